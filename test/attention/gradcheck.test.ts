// Finite-difference gradient checks: (1) the float64 reference's backward equations against
// central differences of its own forward (every input element, tight tolerance); (2) the fp32
// kernels' gradients against central differences of the fp32 kernels' forward (sampled
// elements, a step and tolerance sized for fp32). The loss is sum(out * G) + sum(lse * H), so
// the dLse path is checked too.
import t from 'tap';

import {
  and,
  causal,
  documents,
  or,
  prefix,
  sinkAttentionBackward,
  sinkAttentionForward,
  slidingWindow,
  type AttentionImpl,
  type MaskSpec,
} from '../../lib/attention/index.js';
import { Rng, packedIds, refBackward, refForward, type RefOptions, type Shape } from './fixtures/reference.js';

// These tests are about the CPU kernels: with a CUDA build on a GPU machine `'auto'` would pick
// the GPU (test/attention/cuda.test.ts covers that), so the default device is pinned to the cpu.
process.env.SINKFLEX_DEVICE = 'cpu';

function loss(out: ArrayLike<number>, lse: ArrayLike<number>, G: ArrayLike<number>, H: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < out.length; i++) s += out[i]! * G[i]!;
  for (let i = 0; i < lse.length; i++) if (Number.isFinite(lse[i]!)) s += lse[i]! * H[i]!;
  return s;
}

interface Inputs {
  q: Float64Array | Float32Array;
  k: Float64Array | Float32Array;
  v: Float64Array | Float32Array;
  sinks: Float64Array | Float32Array;
}

t.test('float64 reference: backward equations match central differences', async (t) => {
  const rng = new Rng(11);
  const s: Shape = { batch: 2, seqLen: 6, qHeads: 4, kvHeads: 2, headDim: 3 };
  const ids = packedIds(rng, 2, 6, 2);
  const cases: [string, RefOptions][] = [
    ['causal', {}],
    [
      'window 2 + prefix 1 + documents, softcap 1.5',
      { mask: { window: 2, prefix: 1, documentIds: ids }, softcap: 1.5 },
    ],
    ['non-causal, scale 0.7', { mask: { causal: false }, scale: 0.7 }],
  ];
  for (const [name, opts] of cases) {
    const x: Inputs = {
      q: Float64Array.from(rng.floats(2 * 6 * 4 * 3)),
      k: Float64Array.from(rng.floats(2 * 6 * 2 * 3)),
      v: Float64Array.from(rng.floats(2 * 6 * 2 * 3)),
      sinks: Float64Array.from(rng.floats(4)),
    };
    const G = rng.floats(x.q.length);
    const H = rng.floats(2 * 4 * 6);
    const g = refBackward(x.q, x.k, x.v, x.sinks, G, s, opts, H);
    const h = 1e-5;
    let worst = 0;
    for (const [key, grad] of [
      ['q', g.dq],
      ['k', g.dk],
      ['v', g.dv],
      ['sinks', g.dSinks!],
    ] as const) {
      const a = x[key];
      for (let i = 0; i < a.length; i++) {
        const keep = a[i]!;
        a[i] = keep + h;
        const fp = refForward(x.q, x.k, x.v, x.sinks, s, opts);
        a[i] = keep - h;
        const fm = refForward(x.q, x.k, x.v, x.sinks, s, opts);
        a[i] = keep;
        const fd = (loss(fp.out, fp.lse, G, H) - loss(fm.out, fm.lse, G, H)) / (2 * h);
        worst = Math.max(worst, Math.abs(fd - grad[i]!) / (Math.abs(grad[i]!) + 1e-3));
      }
    }
    t.ok(worst < 1e-6, `${name}: worst relative difference ${worst.toExponential(2)}`);
  }
});

t.test('fp32 kernels: gradients match central differences of the fp32 forward', async (t) => {
  const rng = new Rng(12);
  const s = { batch: 2, seqLen: 9, qHeads: 4, kvHeads: 2, headDim: 5 };
  const ids = packedIds(rng, 2, 9, 2);
  const masks: [string, MaskSpec, number | undefined][] = [
    ['causal', causal(), undefined],
    [
      'and(causal, or(window 3, prefix 2), documents), softcap 2',
      and(causal(), or(slidingWindow(3), prefix(2)), documents(ids)),
      2,
    ],
  ];
  for (const impl of ['fused', 'eager'] as AttentionImpl[]) {
    for (const [name, mask, softcap] of masks) {
      const x = {
        q: rng.floats(2 * 9 * 4 * 5),
        k: rng.floats(2 * 9 * 2 * 5),
        v: rng.floats(2 * 9 * 2 * 5),
        sinks: rng.floats(4),
      };
      const G = rng.floats(x.q.length);
      const H = rng.floats(2 * 4 * 9);
      const opts = { mask, softcap, impl };
      const { out, lse } = sinkAttentionForward(x.q, x.k, x.v, x.sinks, s, opts);
      const g = sinkAttentionBackward(x.q, x.k, x.v, x.sinks, out, lse, G, s, { ...opts, dLse: H });
      const h = 2e-3;
      let worst = 0;
      for (const [key, grad] of [
        ['q', g.dq],
        ['k', g.dk],
        ['v', g.dv],
        ['sinks', g.dSinks!],
      ] as const) {
        const a = x[key];
        let scale = 0;
        for (const z of grad) scale = Math.max(scale, Math.abs(z));
        const picks = key === 'sinks' ? [0, 1, 2, 3] : Array.from({ length: 12 }, () => rng.int(a.length));
        for (const i of picks) {
          const keep = a[i]!;
          const up = Math.fround(keep + h);
          const down = Math.fround(keep - h);
          a[i] = up;
          const fp = sinkAttentionForward(x.q, x.k, x.v, x.sinks, s, opts);
          a[i] = down;
          const fm = sinkAttentionForward(x.q, x.k, x.v, x.sinks, s, opts);
          a[i] = keep;
          const fd = (loss(fp.out, fp.lse, G, H) - loss(fm.out, fm.lse, G, H)) / (up - down);
          worst = Math.max(worst, Math.abs(fd - grad[i]!) / (Math.abs(grad[i]!) + 0.05 * scale));
        }
      }
      t.ok(worst < 5e-3, `${impl} ${name}: worst relative difference ${worst.toExponential(2)}`);
    }
  }
});
