// The MoE op on CUDA (native/model/cuda_moe.cu) against the CPU op (moe.cc, itself checked
// against the float64 reference and finite differences in moe.test.ts) and the float64
// reference written in fixtures/moe-reference.ts: odd sizes (T=37, E=5, k=2, D=24, F=19), both
// SwiGLU variants, with and without biases, k = 1 and k = E, one token, many tokens per expert,
// tied router logits (lower index first), the chosen experts equal, outputs and every gradient
// (dx, router, expert weights and biases) within 1e-5 of the CPU's scale, gradients of the
// float64 reference by central differences at sampled entries, bfloat16 router and experts (the
// float32 results of the widened weights, bit for bit on the device, no weight gradients), the
// same bits on a second run, and the errors. Skipped with a visible message without a CUDA build
// and a GPU (the CUDA emulator, `npm run build:cuda-emulator`, counts).
import t from 'tap';

import { moeBackward, moeForward } from '../../lib/model/index.js';
import { type RefWeights, type Sizes, refMoe, shape, weightsFor } from './fixtures/moe-reference.js';
import {
  bf16Bits,
  bf16Values,
  closeness,
  dot,
  numericGrad,
  pick,
  randn,
  sameBits,
  sampleIndices,
} from './fixtures/reference.js';
import { checkMxfp4Moe, dequantize, randomMxfp4 } from './fixtures/mxfp4-checks.js';
import { noCudaModelOps } from './fixtures/cuda-skip.js';

const noGpu = noCudaModelOps();

/** max |a - b| / max |b| over a whole tensor (0 when equal). */
function scaled(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let e = 0;
  let m = 0;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    e = Number.isNaN(d) ? Infinity : Math.max(e, d);
    m = Math.max(m, Math.abs(b[i]));
  }
  return e === 0 ? 0 : e / Math.max(m, 1e-30);
}

const GRADS = ['dx', 'drouter', 'drouterBias', 'dgateUp', 'dgateUpBias', 'ddown', 'ddownBias'] as const;

t.test('CUDA MoE forward and backward equal the CPU op and the float64 reference', { skip: noGpu }, async (t) => {
  const cases: [string, Sizes, boolean][] = [
    ['T=37 E=5 k=2 D=24 F=19 clamped, biases', { T: 37, D: 24, F: 19, E: 5, K: 2, variant: 'clamped' }, true],
    ['T=37 E=5 k=2 D=24 F=19 standard, no biases', { T: 37, D: 24, F: 19, E: 5, K: 2, variant: 'standard' }, false],
    ['k = E', { T: 11, D: 24, F: 19, E: 5, K: 5, variant: 'clamped' }, true],
    ['k = 1', { T: 23, D: 17, F: 9, E: 4, K: 1, variant: 'standard' }, true],
    ['one token (decode)', { T: 1, D: 24, F: 19, E: 5, K: 2, variant: 'clamped' }, true],
    [
      '150 tokens over 3 experts (several row tiles per expert)',
      { T: 150, D: 33, F: 21, E: 3, K: 2, variant: 'clamped' },
      true,
    ],
  ];
  let seed = 40;
  let worstOut = 0;
  let worstGrad = 0;
  for (const [label, s, biases] of cases) {
    const w = weightsFor(s, (seed += 10), biases);
    const x = randn(s.T * s.D, seed + 7, -1.5, 1.5);
    const dout = randn(s.T * s.D, seed + 8);
    const cpu = moeForward({ ...shape(s), ...w, x });
    const gpu = moeForward({ ...shape(s), ...w, x, device: 'cuda' });
    const ref = refMoe(s, x, w);
    t.same(Array.from(gpu.experts), Array.from(cpu.experts), `${label}: the chosen experts`);
    t.same(Array.from(gpu.experts), ref.experts.flat(), `${label}: the reference's experts`);
    t.ok(closeness(gpu.weights, cpu.weights, 1e-6, 1e-7) <= 1, `${label}: their weights`);
    t.ok(closeness(gpu.logits, cpu.logits, 1e-5, 1e-6) <= 1, `${label}: router logits`);
    const eo = scaled(gpu.out, cpu.out);
    worstOut = Math.max(worstOut, eo);
    t.ok(eo <= 1e-5, `${label}: output within 1e-5 of the CPU's scale (${eo.toExponential(2)})`);
    t.ok(closeness(gpu.out, ref.out, 1e-4, 1e-5) <= 1, `${label}: output vs float64`);
    const gc = moeBackward({ ...shape(s), ...w, x, dout, state: cpu.state });
    const gg = moeBackward({ ...shape(s), ...w, x, dout, state: gpu.state, device: 'cuda' });
    for (const name of GRADS) {
      const a = gg[name];
      const b = gc[name];
      if (b === null) {
        t.equal(a, null, `${label}: no ${name}`);
        continue;
      }
      const e = scaled(a as Float32Array, b);
      worstGrad = Math.max(worstGrad, e);
      t.ok(e <= 1e-5, `${label}: ${name} within 1e-5 of the CPU's scale (${e.toExponential(2)})`);
    }
    // accumulate: dx += (the parameter gradients are skipped)
    const dx2 = gg.dx.slice();
    moeBackward({
      ...shape(s),
      ...w,
      x,
      dout,
      state: gpu.state,
      dx: dx2,
      accumulate: true,
      drouter: null,
      drouterBias: null,
      dgateUp: null,
      dgateUpBias: null,
      ddown: null,
      ddownBias: null,
      device: 'cuda',
    });
    t.ok(
      closeness(
        dx2,
        gg.dx.map((v) => 2 * v),
        1e-6,
        1e-7,
      ) <= 1,
      `${label}: accumulate adds`,
    );
    const again = moeForward({ ...shape(s), ...w, x, device: 'cuda' });
    t.ok(sameBits(again.out, gpu.out), `${label}: the same bits on a second run`);
  }
  t.comment(
    `MoE on CUDA vs CPU: output max|Δ|/max|cpu| = ${worstOut.toExponential(2)}, gradients ${worstGrad.toExponential(2)}`,
  );
});

t.test('CUDA MoE gradients match central differences of the float64 reference', { skip: noGpu }, async (t) => {
  const s: Sizes = { T: 37, D: 24, F: 19, E: 5, K: 2, variant: 'clamped' };
  const w = weightsFor(s, 700, true);
  const x = randn(s.T * s.D, 707, -1.5, 1.5);
  const dout = randn(s.T * s.D, 708);
  const f = moeForward({ ...shape(s), ...w, x, device: 'cuda' });
  const g = moeBackward({ ...shape(s), ...w, x, dout, state: f.state, device: 'cuda' });
  const objective = (over: Partial<RefWeights>, xv: ArrayLike<number> = x): number =>
    dot(dout, refMoe(s, xv, { ...w, ...over }).out);
  const check = (
    name: string,
    native: Float32Array | null,
    base: ArrayLike<number>,
    f64: (v: Float64Array) => number,
  ): void => {
    if (!native) return void t.fail(`no ${name} gradient`);
    const idx = sampleIndices(base.length, 12, 900 + name.length);
    const scale = Math.max(1e-3, ...Array.from(native, Math.abs));
    t.ok(
      closeness(pick(native, idx), numericGrad(f64, base, idx), 2e-3, 1e-4 * scale) <= 1,
      `${name} vs finite differences`,
    );
  };
  check('dx', g.dx, x, (v) => objective({}, v));
  check('drouter', g.drouter, w.router, (v) => objective({ router: v }));
  check('drouterBias', g.drouterBias, w.routerBias as Float32Array, (v) => objective({ routerBias: v }));
  check('dgateUp', g.dgateUp, w.gateUp, (v) => objective({ gateUp: v }));
  check('dgateUpBias', g.dgateUpBias, w.gateUpBias as Float32Array, (v) => objective({ gateUpBias: v }));
  check('ddown', g.ddown, w.down, (v) => objective({ down: v }));
  check('ddownBias', g.ddownBias, w.downBias as Float32Array, (v) => objective({ downBias: v }));
});

t.test('CUDA MoE: tied router logits go to the lower expert index', { skip: noGpu }, async (t) => {
  const s: Sizes = { T: 6, D: 8, F: 5, E: 5, K: 3, variant: 'standard' };
  const w = weightsFor(s, 300, true);
  const router = w.router as Float32Array;
  const routerBias = w.routerBias as Float32Array;
  for (let d = 0; d < s.D; d++) {
    router[3 * s.D + d] = router[1 * s.D + d];
    router[4 * s.D + d] = router[0 * s.D + d];
  }
  routerBias[1] = routerBias[3] = 50;
  routerBias[0] = routerBias[4] = 30;
  routerBias[2] = -50;
  const x = randn(s.T * s.D, 301, -0.5, 0.5);
  const r = moeForward({ ...shape(s), ...w, x, device: 'cuda' });
  for (let tok = 0; tok < s.T; tok++)
    t.same(Array.from(r.experts.subarray(tok * 3, tok * 3 + 3)), [1, 3, 0], `token ${tok}`);
});

t.test(
  'CUDA MoE with bfloat16 router and experts: the widened weights, no weight gradients',
  { skip: noGpu },
  async (t) => {
    const s: Sizes = { T: 37, D: 24, F: 19, E: 5, K: 2, variant: 'clamped' };
    const w = weightsFor(s, 900, true);
    const bits = { router: bf16Bits(w.router), gateUp: bf16Bits(w.gateUp), down: bf16Bits(w.down) };
    const wide = { router: bf16Values(bits.router), gateUp: bf16Values(bits.gateUp), down: bf16Values(bits.down) };
    const x = randn(s.T * s.D, 901);
    const dout = randn(s.T * s.D, 902);
    const a = moeForward({ ...shape(s), ...w, ...bits, x, device: 'cuda' });
    const b = moeForward({ ...shape(s), ...w, ...wide, x, device: 'cuda' });
    const c = moeForward({ ...shape(s), ...w, ...bits, x });
    t.ok(sameBits(a.out, b.out), 'forward: the same bits as float32 over the widened weights (on the device)');
    t.same(Array.from(a.experts), Array.from(c.experts), 'the CPU bf16 path chooses the same experts');
    const eo = scaled(a.out, c.out);
    t.ok(eo <= 1e-5, `forward: the CPU bf16 path within 1e-5 of its scale (${eo.toExponential(2)})`);
    t.ok(
      closeness(a.out, refMoe(s, x, { ...w, ...wide }).out, 1e-4, 1e-5) <= 1,
      'forward: float64 reference of the rounded weights',
    );
    const ga = moeBackward({ ...shape(s), ...w, ...bits, x, dout, state: a.state, device: 'cuda' });
    const gb = moeBackward({ ...shape(s), ...w, ...wide, x, dout, state: b.state, device: 'cuda' });
    const gc = moeBackward({ ...shape(s), ...w, ...bits, x, dout, state: c.state });
    t.ok(sameBits(ga.dx, gb.dx), 'dx: the same bits as float32 over the widened weights');
    t.ok(scaled(ga.dx, gc.dx) <= 1e-5, `dx: the CPU bf16 path (${scaled(ga.dx, gc.dx).toExponential(2)})`);
    t.equal(ga.dgateUp, null);
    t.equal(ga.drouter, null);
    t.equal(ga.ddown, null);
    t.ok(
      sameBits(ga.ddownBias!, gb.ddownBias!) && sameBits(ga.drouterBias!, gb.drouterBias!),
      'bias gradients still flow',
    );
    t.throws(
      () =>
        moeBackward({
          ...shape(s),
          ...w,
          ...bits,
          x,
          dout,
          state: a.state,
          dgateUp: new Float32Array(s.E * 2 * s.F * s.D),
          device: 'cuda',
        }),
      {
        name: 'TypeError',
        message: /dgateUp must be null for bfloat16 experts/,
      },
    );
  },
);

t.test('CUDA MoE: a state belongs to the device of its forward', { skip: noGpu }, async (t) => {
  const s: Sizes = { T: 3, D: 4, F: 3, E: 3, K: 2, variant: 'standard' };
  const w = weightsFor(s, 1, false);
  const x = randn(s.T * s.D, 2);
  const dout = randn(s.T * s.D, 3);
  const g = moeForward({ ...shape(s), ...w, x, device: 'cuda' });
  const c = moeForward({ ...shape(s), ...w, x });
  t.throws(() => moeBackward({ ...shape(s), ...w, x, dout, state: g.state }), {
    name: 'RangeError',
    message: /state was made by a forward on cuda/,
  });
  t.throws(() => moeBackward({ ...shape(s), ...w, x, dout, state: c.state, device: 'cuda' }), {
    name: 'RangeError',
    message: /state was made by a forward on the cpu/,
  });
  t.throws(() => moeForward({ ...shape(s), topK: 4, ...w, x, device: 'cuda' }), {
    name: 'RangeError',
    message: /topK must be in \[1, 3\], got 4/,
  });
  const empty = moeForward({ ...shape(s), rows: 0, ...w, x: new Float32Array(0), device: 'cuda' });
  t.equal(empty.out.length, 0, 'zero rows');
});

t.test(
  'MXFP4 experts on CUDA: packed = dequantized, bit for bit (forward and input gradient)',
  { skip: noGpu },
  async (t) => {
    checkMxfp4Moe(t, 'cuda');
  },
);

t.test('a CUDA ParamStore keeps MXFP4 blocks and scales in device memory', { skip: noGpu }, async (t) => {
  const { ParamStore } = await import('../../lib/model/index.js');
  const s = ParamStore.fromSpecs([{ name: 'w', shape: [3, 64], dtype: 'mxfp4', init: 'zeros' }], 1, { device: 'cuda' });
  t.teardown(() => s.dispose());
  const data = randomMxfp4(3 * 64, 12);
  s.writeMxfp4('w', data);
  const back = s.readMxfp4('w');
  t.same(Array.from(back.blocks), Array.from(data.blocks), 'blocks round-trip through the device');
  t.same(Array.from(back.scales), Array.from(data.scales), 'scales round-trip through the device');
  t.same(Array.from(s.readBf16('w')), Array.from(dequantize(data, 64)), 'readBf16 gives the dequantization');
  t.equal(s.bytes, (3 * 64 * 17) / 32, '17/32 bytes a value');
});
