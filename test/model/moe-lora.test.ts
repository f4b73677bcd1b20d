// LoRA on the experts (PEFT's target_parameters) inside the MoE op: every expert's gate_up and
// down outputs gain scale (v A_e^T) B_e^T on the rows routed to it. Random non-zero adapters
// against the float64 reference (moe-reference.ts adds the low-rank terms loop by loop), odd
// sizes, one pair or both, k = 1 and k = E; gradients of x and of every adapter against central
// finite differences of the reference; MXFP4 experts equal their bfloat16 dequantization bit for
// bit with adapters; no adapter = the plain op, bit for bit; errors name the argument.
import t from 'tap';

import { type MoeExpertLora, moeBackward, moeForward } from '../../lib/model/index.js';
import { type RefLora, type Sizes, refMoe, shape, weightsFor } from './fixtures/moe-reference.js';
import { mxfp4MoeCase } from './fixtures/mxfp4-checks.js';
import { closeness, dot, numericGrad, pick, randn, sameBits, sampleIndices } from './fixtures/reference.js';

/** Random non-zero adapters of rank r for sizes s (both pairs unless told). */
function adapters(
  s: Sizes,
  r: number,
  seed: number,
  which: 'both' | 'gateUp' | 'down' = 'both',
): MoeExpertLora & RefLora {
  const { D, F, E } = s;
  const gu = which !== 'down';
  const dn = which !== 'gateUp';
  return {
    rank: r,
    scale: 1.75,
    gateUpA: gu ? randn(E * r * D, seed, -0.5, 0.5) : null,
    gateUpB: gu ? randn(E * 2 * F * r, seed + 1, -0.5, 0.5) : null,
    downA: dn ? randn(E * r * F, seed + 2, -0.5, 0.5) : null,
    downB: dn ? randn(E * D * r, seed + 3, -0.5, 0.5) : null,
  };
}

t.test('forward with expert adapters matches the float64 reference of base + scale · B A per expert', async (t) => {
  const cases: [string, Sizes, number, 'both' | 'gateUp' | 'down'][] = [
    ['T=37 E=5 k=2 D=24 F=19 r=3, both', { T: 37, D: 24, F: 19, E: 5, K: 2, variant: 'clamped' }, 3, 'both'],
    ['gate_up only, standard', { T: 21, D: 17, F: 11, E: 4, K: 2, variant: 'standard' }, 2, 'gateUp'],
    ['down only', { T: 21, D: 17, F: 11, E: 4, K: 2, variant: 'clamped' }, 5, 'down'],
    ['k = E, r = 1', { T: 9, D: 12, F: 7, E: 3, K: 3, variant: 'clamped' }, 1, 'both'],
    ['k = 1', { T: 13, D: 10, F: 6, E: 4, K: 1, variant: 'standard' }, 4, 'both'],
    ['300 tokens over 4 experts', { T: 300, D: 33, F: 21, E: 4, K: 2, variant: 'clamped' }, 3, 'both'],
  ];
  let seed = 40;
  for (const [label, s, r, which] of cases) {
    const w = weightsFor(s, (seed += 10), true);
    const lora = adapters(s, r, seed + 5, which);
    const x = randn(s.T * s.D, seed + 7, -1.5, 1.5);
    const got = moeForward({ ...shape(s), ...w, lora, x });
    const ref = refMoe(s, x, { ...w, lora });
    const plain = refMoe(s, x, w);
    t.ok(closeness(got.out, ref.out, 1e-4, 1e-5) <= 1, `${label}: output`);
    t.ok(
      closeness(got.out, plain.out, 1e-4, 1e-5) > 1,
      `${label}: the adapters change the output (the check can fail)`,
    );
  }
});

t.test('gradients of x and of every expert adapter match finite differences of the reference', async (t) => {
  const cases: [string, Sizes, number][] = [
    ['T=23 E=5 k=2 D=14 F=9 r=3 clamped', { T: 23, D: 14, F: 9, E: 5, K: 2, variant: 'clamped' }, 3],
    ['k = E, standard, r=2', { T: 9, D: 12, F: 7, E: 3, K: 3, variant: 'standard' }, 2],
    ['k = 1, r=1', { T: 13, D: 10, F: 6, E: 4, K: 1, variant: 'clamped' }, 1],
  ];
  let seed = 700;
  for (const [label, s, r] of cases) {
    const w = weightsFor(s, (seed += 10), true);
    const lora = adapters(s, r, seed + 3);
    const x = randn(s.T * s.D, seed + 8, -1.5, 1.5);
    const dout = randn(s.T * s.D, seed + 9);
    const f = moeForward({ ...shape(s), ...w, lora, x });
    const g = moeBackward({ ...shape(s), ...w, lora, x, dout, state: f.state });
    const objective = (over: Partial<RefLora>, xv: ArrayLike<number> = x): number =>
      dot(dout, refMoe(s, xv, { ...w, lora: { ...lora, ...over } }).out);
    const check = (
      name: string,
      native: Float32Array | null,
      base: ArrayLike<number>,
      f64: (v: Float64Array) => number,
    ): void => {
      if (!native) return void t.fail(`${label}: no ${name} gradient`);
      const idx = sampleIndices(base.length, 16, seed + name.length);
      const scale = Math.max(1e-3, ...Array.from(native, Math.abs));
      t.ok(closeness(pick(native, idx), numericGrad(f64, base, idx), 2e-3, 1e-4 * scale) <= 1, `${label}: ${name}`);
    };
    check('dx', g.dx, x, (v) => objective({}, v));
    check('dgateUpLoraA', g.dgateUpLoraA, lora.gateUpA!, (v) => objective({ gateUpA: v }));
    check('dgateUpLoraB', g.dgateUpLoraB, lora.gateUpB!, (v) => objective({ gateUpB: v }));
    check('ddownLoraA', g.ddownLoraA, lora.downA!, (v) => objective({ downA: v }));
    check('ddownLoraB', g.ddownLoraB, lora.downB!, (v) => objective({ downB: v }));
    check('dgateUp (the base weight, through base + delta)', g.dgateUp, w.gateUp, (v) =>
      dot(dout, refMoe(s, x, { ...w, gateUp: v, lora }).out),
    );
    check('drouter', g.drouter, w.router, (v) => dot(dout, refMoe(s, x, { ...w, router: v, lora }).out));
    // an expert no token was routed to gets a zero gradient
    const routed = new Set(Array.from(f.experts));
    for (let e = 0; e < s.E; e++) {
      if (routed.has(e)) continue;
      t.ok(
        g.dgateUpLoraA!.subarray(e * r * s.D, (e + 1) * r * s.D).every((v) => v === 0),
        `${label}: expert ${e} (no tokens) has no gradient`,
      );
    }
  }
});

t.test('no adapters: the plain op, bit for bit; a B of zeros: the base output', async (t) => {
  const s: Sizes = { T: 31, D: 20, F: 13, E: 5, K: 2, variant: 'clamped' };
  const w = weightsFor(s, 1200, true);
  const x = randn(s.T * s.D, 1201);
  const plain = moeForward({ ...shape(s), ...w, x });
  t.ok(sameBits(plain.out, moeForward({ ...shape(s), ...w, lora: null, x }).out), 'lora: null');
  const zeroB = {
    ...adapters(s, 3, 1202),
    gateUpB: new Float32Array(s.E * 2 * s.F * 3),
    downB: new Float32Array(s.E * s.D * 3),
  };
  t.ok(
    sameBits(plain.out, moeForward({ ...shape(s), ...w, lora: zeroB, x }).out),
    "B = 0 (PEFT's initialisation): the base's output",
  );
});

t.test('MXFP4 experts with adapters = their bfloat16 dequantization, bit for bit (forward and backward)', async (t) => {
  const s = { T: 29, D: 64, F: 32, E: 4, K: 2, variant: 'clamped' as const, biases: true };
  const c = mxfp4MoeCase(s, 1300);
  const lora = adapters(s, 3, 1301);
  const a = moeForward({ ...shape(s), ...c.packed, lora, x: c.x });
  const b = moeForward({ ...shape(s), ...c.bf, lora, x: c.x });
  t.ok(sameBits(a.out, b.out), 'forward');
  const ga = moeBackward({ ...shape(s), ...c.packed, lora, x: c.x, dout: c.dout, state: a.state });
  const gb = moeBackward({ ...shape(s), ...c.bf, lora, x: c.x, dout: c.dout, state: b.state });
  t.ok(sameBits(ga.dx, gb.dx), 'dx');
  for (const k of ['dgateUpLoraA', 'dgateUpLoraB', 'ddownLoraA', 'ddownLoraB'] as const)
    t.ok(sameBits(ga[k]!, gb[k]!), k);
});

t.test('errors name the argument', async (t) => {
  const s: Sizes = { T: 3, D: 4, F: 3, E: 3, K: 2, variant: 'standard' };
  const w = weightsFor(s, 1, false);
  const x = randn(s.T * s.D, 2);
  const lora = adapters(s, 2, 3);
  t.throws(() => moeForward({ ...shape(s), ...w, lora: { ...lora, gateUpB: null }, x }), {
    name: 'RangeError',
    message: /needs both A and B/,
  });
  t.throws(() => moeForward({ ...shape(s), ...w, lora: { ...lora, downA: new Float32Array(5) }, x }), {
    name: 'RangeError',
    message: /downLoraA/,
  });
  t.throws(() => moeForward({ ...shape(s), ...w, lora: { ...lora, rank: 0 }, x }), {
    name: 'RangeError',
    message: /loraRank/,
  });
  const f = moeForward({ ...shape(s), ...w, x });
  t.throws(
    () =>
      moeBackward({
        ...shape(s),
        ...w,
        x,
        dout: new Float32Array(12),
        state: f.state,
        dgateUpLoraA: new Float32Array(12),
      }),
    { name: 'TypeError', message: /without its adapter/ },
  );
});
