// Fused and eager sink attention against the float64 reference (reference.ts): forward, LSE and
// every gradient (dSinks included) within 1e-5 relative, over odd sizes, GQA ratios 1/2/8, every
// mask kind and combinations, with and without sinks, softcap, custom scales, batch > 1, and
// every CPU vector code this machine can run.
import t from 'tap';

import {
  and,
  attentionInfo,
  causal,
  documents,
  not,
  or,
  prefix,
  sinkAttentionBackward,
  sinkAttentionForward,
  slidingWindow,
  type AttentionOptions,
  type CpuKernel,
  type MaskSpec,
} from '../../lib/attention/index.js';
import { Rng, expectClose, packedIds, refBackward, refForward, type Shape } from './fixtures/reference.js';

// These tests are about the CPU kernels: with a CUDA build on a GPU machine `'auto'` would pick
// the GPU (test/attention/cuda.test.ts covers that), so the default device is pinned to the cpu.
process.env.SINKFLEX_DEVICE = 'cpu';

interface Case {
  name: string;
  shape: Shape;
  mask?: (rng: Rng, s: Shape) => MaskSpec;
  sinks?: boolean | 'some-inf';
  softcap?: number;
  scale?: number;
  blockSize?: number;
  dLse?: boolean;
  /** Run every CPU vector code (small cases) or only the default one. */
  allIsas?: boolean;
}

const kvLenOf = (s: Shape) => s.kvLen ?? s.seqLen;

const CASES: Case[] = [
  {
    name: 'seqLen 1, headDim 1',
    shape: { batch: 1, seqLen: 1, qHeads: 1, kvHeads: 1, headDim: 1 },
    sinks: true,
    allIsas: true,
  },
  {
    name: 'seqLen 7, headDim 33, GQA 2, window 3 + prefix 2, batch 2',
    shape: { batch: 2, seqLen: 7, qHeads: 4, kvHeads: 2, headDim: 33 },
    mask: () => ({ window: 3, prefix: 2 }),
    sinks: true,
    dLse: true,
    allIsas: true,
  },
  {
    name: 'seqLen 7, headDim 1, GQA 8, documents, batch 3, no sinks',
    shape: { batch: 3, seqLen: 7, qHeads: 8, kvHeads: 1, headDim: 1 },
    mask: (rng, s) => ({ documentIds: packedIds(rng, s.batch, s.seqLen, 3) }),
    allIsas: true,
  },
  {
    name: 'seqLen 129, headDim 64, GQA 2, causal + window 32 + prefix 5 + documents, softcap, batch 2',
    shape: { batch: 2, seqLen: 129, qHeads: 4, kvHeads: 2, headDim: 64 },
    mask: (rng, s) => ({ window: 32, prefix: 5, documentIds: packedIds(rng, s.batch, s.seqLen, 3) }),
    sinks: true,
    softcap: 4,
    dLse: true,
    allIsas: true,
  },
  {
    name: 'seqLen 129, headDim 128, GQA 1, non-causal (symmetric) window 17, no sinks',
    shape: { batch: 1, seqLen: 129, qHeads: 2, kvHeads: 2, headDim: 128 },
    mask: () => ({ causal: false, window: 17 }),
    allIsas: true,
  },
  {
    name: 'seqLen 129, headDim 33, GQA 8, or(and(causal, window 9), not(documents)), block 32',
    shape: { batch: 2, seqLen: 129, qHeads: 8, kvHeads: 1, headDim: 33 },
    mask: (rng, s) => or(and(causal(), slidingWindow(9)), not(documents(packedIds(rng, s.batch, s.seqLen, 4)))),
    sinks: true,
    blockSize: 32,
    allIsas: true,
  },
  {
    name: 'seqLen 1000, headDim 64, GQA 2, causal, sinks',
    shape: { batch: 1, seqLen: 1000, qHeads: 2, kvHeads: 1, headDim: 64 },
    sinks: true,
    dLse: true,
  },
  {
    name: 'seqLen 1000, headDim 64, window 128 + prefix 4 + documents, no sinks, block 128',
    shape: { batch: 1, seqLen: 1000, qHeads: 1, kvHeads: 1, headDim: 64 },
    mask: (rng, s) => ({ window: 128, prefix: 4, documentIds: packedIds(rng, s.batch, s.seqLen, 3) }),
    blockSize: 128,
  },
  {
    name: 'seqLen 200, headDim 16, no mask at all, softcap 2, scale 0.3',
    shape: { batch: 2, seqLen: 200, qHeads: 2, kvHeads: 1, headDim: 16 },
    mask: () => ({ causal: false }),
    sinks: true,
    softcap: 2,
    scale: 0.3,
    allIsas: true,
  },
  {
    name: 'fully masked rows (not causal: the last row sees nothing), sinks',
    shape: { batch: 2, seqLen: 33, qHeads: 2, kvHeads: 2, headDim: 8 },
    mask: () => not(causal()),
    sinks: true,
    dLse: true,
    allIsas: true,
  },
  {
    name: 'fully masked rows (causal and not window 4: the first 4 rows see nothing), no sinks',
    shape: { batch: 1, seqLen: 40, qHeads: 4, kvHeads: 2, headDim: 8 },
    mask: () => and(causal(), not(slidingWindow(4))),
    dLse: true,
    allIsas: true,
  },
  {
    name: 'queries after a cache: kvLen 150, seqLen 40, queryOffset 110, causal + window 64, GQA 4',
    shape: { batch: 2, seqLen: 40, qHeads: 4, kvHeads: 1, headDim: 24, kvLen: 150, queryOffset: 110 },
    mask: () => ({ window: 64 }),
    sinks: true,
    dLse: true,
    allIsas: true,
  },
  {
    name: 'prefix without a window has no effect; some sinks are -Infinity',
    shape: { batch: 1, seqLen: 50, qHeads: 4, kvHeads: 4, headDim: 12 },
    mask: () => ({ prefix: 3 }),
    sinks: 'some-inf',
    allIsas: true,
  },
  {
    name: 'batch 4, seqLen 65, headDim 64, or(prefix 2, window 8) without causality, block 16',
    shape: { batch: 4, seqLen: 65, qHeads: 2, kvHeads: 1, headDim: 64 },
    mask: () => or(prefix(2), slidingWindow(8)),
    sinks: true,
    blockSize: 16,
  },
];

const isas = attentionInfo().isas as CpuKernel[];

for (const [index, c] of CASES.entries()) {
  t.test(c.name, async (t) => {
    const rng = new Rng(1000 + index);
    const s = c.shape;
    const Tk = kvLenOf(s);
    const q = rng.floats(s.batch * s.seqLen * s.qHeads * s.headDim);
    const k = rng.floats(s.batch * Tk * s.kvHeads * s.headDim);
    const v = rng.floats(s.batch * Tk * s.kvHeads * s.headDim);
    let sinks: Float32Array | null = null;
    if (c.sinks) {
      sinks = rng.floats(s.qHeads, 1.5);
      if (c.sinks === 'some-inf') sinks[1] = sinks[3] = -Infinity;
    }
    const dOut = rng.floats(q.length);
    const dLse = c.dLse ? rng.floats(s.batch * s.qHeads * s.seqLen) : undefined;
    const mask = c.mask?.(rng, s);
    const refOpts = { mask, scale: c.scale, softcap: c.softcap };
    const ref = refForward(q, k, v, sinks, s, refOpts);
    const grads = refBackward(q, k, v, sinks, dOut, s, refOpts, dLse);

    const results: Record<string, Float32Array[]> = {};
    for (const impl of ['fused', 'eager'] as const) {
      for (const cpuKernel of c.allIsas ? isas : (['auto'] as CpuKernel[])) {
        const opts: AttentionOptions = {
          mask,
          scale: c.scale,
          softcap: c.softcap,
          impl,
          cpuKernel,
          blockSize: c.blockSize,
        };
        const label = `${impl}/${cpuKernel}`;
        const { out, lse } = sinkAttentionForward(q, k, v, sinks, s, opts);
        expectClose(t, out, ref.out, `${label} out`);
        expectClose(t, lse, ref.lse, `${label} lse`);
        // the fused backward's two work splits must both match
        for (const backwardSplit of impl === 'fused' ? (['blocks', 'groups'] as const) : (['auto'] as const)) {
          const bl = impl === 'fused' ? `${label}/${backwardSplit}` : label;
          const g = sinkAttentionBackward(q, k, v, sinks, out, lse, dOut, s, { ...opts, dLse, backwardSplit });
          expectClose(t, g.dq, grads.dq, `${bl} dq`);
          expectClose(t, g.dk, grads.dk, `${bl} dk`);
          expectClose(t, g.dv, grads.dv, `${bl} dv`);
          if (sinks) {
            t.ok(g.dSinks instanceof Float32Array, `${bl} dSinks present`);
            expectClose(t, g.dSinks!, grads.dSinks!, `${bl} dSinks`);
          } else {
            t.equal(g.dSinks, null, `${bl} dSinks is null without sinks`);
          }
          for (const [name, a] of Object.entries({ out, lse, ...g })) {
            if (a && Array.from(a as Float32Array).some((x) => Number.isNaN(x))) t.fail(`${bl} ${name} has NaN`);
          }
          results[label] = [out, lse, g.dq, g.dk, g.dv];
        }
      }
    }
    // fused and eager agree with each other (to fp32 rounding)
    const fused = results[`fused/${c.allIsas ? isas[0] : 'auto'}`]!;
    const eager = results[`eager/${c.allIsas ? isas[0] : 'auto'}`]!;
    ['out', 'lse', 'dq', 'dk', 'dv'].forEach((name, n) =>
      expectClose(t, fused[n]!, eager[n]!, `fused vs eager ${name}`, 2e-6),
    );
  });
}

t.test('fully masked rows give out 0, lse = sink (or -Infinity) and zero gradients, no NaN', async (t) => {
  const rng = new Rng(7);
  const s = { batch: 1, seqLen: 5, qHeads: 2, kvHeads: 1, headDim: 3 };
  const q = rng.floats(30),
    k = rng.floats(15),
    v = rng.floats(15),
    dOut = rng.floats(30);
  const sinks = Float32Array.from([0.7, -1.2]);
  for (const impl of ['fused', 'eager'] as const) {
    // prefix(0) allows nothing: every row is fully masked
    for (const withSinks of [true, false]) {
      const sk = withSinks ? sinks : null;
      const backwardSplit = withSinks ? 'groups' : 'blocks';
      const { out, lse } = sinkAttentionForward(q, k, v, sk, s, { mask: prefix(0), impl });
      t.same(Array.from(out), new Array(30).fill(0), `${impl} out is 0 (sinks ${withSinks})`);
      const expected = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1].map((h) => (withSinks ? sinks[h]! : -Infinity));
      t.same(Array.from(lse), expected, `${impl} lse is the sink or -Infinity`);
      const g = sinkAttentionBackward(
        q,
        k,
        v,
        sk,
        out,
        lse,
        dOut,
        s,
        impl === 'fused' ? { mask: prefix(0), impl, backwardSplit } : { mask: prefix(0), impl },
      );
      for (const a of [g.dq, g.dk, g.dv])
        t.ok(
          a.every((x) => x === 0),
          `${impl} zero gradient`,
        );
      if (withSinks) t.same(Array.from(g.dSinks!), [0, 0], `${impl} dSinks 0`);
    }
  }
});
