// The MoE op (gpt-oss semantics) against a float64 reference written here loop by loop (router
// logits, top-k with ties to the lower index, softmax over the chosen k, gathered SwiGLU
// experts, weighted sum in slot order): odd sizes, both SwiGLU variants, with and without
// biases, k = 1 and k = E, tied router logits, many tokens per expert and few; gradients of x,
// every weight and bias and the router against central finite differences of the reference;
// bfloat16 weights equal to float32 over the widened weights.
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

t.test(
  'forward matches the float64 reference (odd sizes, variants, biases, k = 1 and k = E, many and few tokens per expert)',
  async (t) => {
    const cases: [string, Sizes, boolean][] = [
      ['T=37 E=5 k=2 D=24 F=19 clamped, biases', { T: 37, D: 24, F: 19, E: 5, K: 2, variant: 'clamped' }, true],
      ['standard, no biases', { T: 37, D: 24, F: 19, E: 5, K: 2, variant: 'standard' }, false],
      ['k = E', { T: 11, D: 24, F: 19, E: 5, K: 5, variant: 'clamped' }, true],
      ['k = 1', { T: 23, D: 17, F: 9, E: 4, K: 1, variant: 'standard' }, true],
      ['one token (decode)', { T: 1, D: 24, F: 19, E: 5, K: 2, variant: 'clamped' }, true],
      [
        '300 tokens over 4 experts (experts one after another)',
        { T: 300, D: 33, F: 21, E: 4, K: 2, variant: 'clamped' },
        true,
      ],
    ];
    let seed = 10;
    for (const [label, s, biases] of cases) {
      const w = weightsFor(s, (seed += 10), biases);
      const x = randn(s.T * s.D, seed + 7, -1.5, 1.5);
      const r = moeForward({ ...shape(s), ...w, x });
      const ref = refMoe(s, x, w);
      t.same(Array.from(r.experts), ref.experts.flat(), `${label}: the chosen experts`);
      t.ok(closeness(r.weights, ref.weights.flat(), 1e-5, 1e-6) <= 1, `${label}: their weights`);
      t.ok(closeness(r.out, ref.out, 1e-4, 1e-5) <= 1, `${label}: output`);
      if (s.K === 1)
        t.ok(
          r.weights.every((v) => v === 1),
          `${label}: a single expert has weight 1`,
        );
    }
  },
);

t.test('ties in the router logits go to the lower expert index', async (t) => {
  const s: Sizes = { T: 6, D: 8, F: 5, E: 5, K: 2, variant: 'standard' };
  const w = weightsFor(s, 300, true);
  const router = w.router as Float32Array;
  const routerBias = w.routerBias as Float32Array;
  // experts 1 and 3 score the same on every token, above everyone else; expert 4 equals expert 0
  for (let d = 0; d < s.D; d++) {
    router[3 * s.D + d] = router[1 * s.D + d];
    router[4 * s.D + d] = router[0 * s.D + d];
  }
  routerBias[1] = routerBias[3] = 50;
  routerBias[0] = routerBias[4] = 30;
  routerBias[2] = -50;
  const x = randn(s.T * s.D, 301, -0.5, 0.5);
  const r = moeForward({ ...shape(s), ...w, x });
  for (let tok = 0; tok < s.T; tok++) {
    t.same(
      Array.from(r.experts.subarray(tok * 2, tok * 2 + 2)),
      [1, 3],
      `token ${tok}: the tied pair, lower index first`,
    );
    t.equal(r.weights[tok * 2], 0.5);
    t.equal(r.weights[tok * 2 + 1], 0.5);
  }
  // k = 3: the third slot goes to expert 0 over its twin 4
  const r3 = moeForward({ ...shape(s), topK: 3, ...w, x });
  for (let tok = 0; tok < s.T; tok++)
    t.same(Array.from(r3.experts.subarray(tok * 3, tok * 3 + 3)), [1, 3, 0], `token ${tok}: k = 3`);
  t.ok(closeness(r3.out, refMoe({ ...s, K: 3 }, x, w).out, 1e-4, 1e-5) <= 1, 'and the output matches the reference');
});

t.test('gradients of x, router, expert weights and biases match finite differences of the reference', async (t) => {
  const cases: [string, Sizes][] = [
    ['T=37 E=5 k=2 D=24 F=19 clamped', { T: 37, D: 24, F: 19, E: 5, K: 2, variant: 'clamped' }],
    ['k = E, standard', { T: 9, D: 12, F: 7, E: 3, K: 3, variant: 'standard' }],
    ['k = 1', { T: 13, D: 10, F: 6, E: 4, K: 1, variant: 'clamped' }],
  ];
  let seed = 500;
  for (const [label, s] of cases) {
    const w = weightsFor(s, (seed += 10), true);
    const x = randn(s.T * s.D, seed + 8, -1.5, 1.5);
    const dout = randn(s.T * s.D, seed + 9);
    const f = moeForward({ ...shape(s), ...w, x });
    const g = moeBackward({ ...shape(s), ...w, x, dout, state: f.state });
    const objective = (over: Partial<RefWeights>, xv: ArrayLike<number> = x): number =>
      dot(dout, refMoe(s, xv, { ...w, ...over }).out);
    const check = (
      name: string,
      native: Float32Array | null,
      base: ArrayLike<number>,
      f64: (v: Float64Array) => number,
    ): void => {
      if (!native) return void t.fail(`${label}: no ${name} gradient`);
      const idx = sampleIndices(base.length, 14, seed + name.length);
      const scale = Math.max(1e-3, ...Array.from(native, Math.abs));
      t.ok(closeness(pick(native, idx), numericGrad(f64, base, idx), 2e-3, 1e-4 * scale) <= 1, `${label}: ${name}`);
    };
    check('dx', g.dx, x, (v) => objective({}, v));
    check('drouter', g.drouter, w.router, (v) => objective({ router: v }));
    check('drouterBias', g.drouterBias, w.routerBias as Float32Array, (v) => objective({ routerBias: v }));
    check('dgateUp', g.dgateUp, w.gateUp, (v) => objective({ gateUp: v }));
    check('dgateUpBias', g.dgateUpBias, w.gateUpBias as Float32Array, (v) => objective({ gateUpBias: v }));
    check('ddown', g.ddown, w.down, (v) => objective({ down: v }));
    check('ddownBias', g.ddownBias, w.downBias as Float32Array, (v) => objective({ downBias: v }));
    if (s.K === 1)
      t.ok(
        g.drouter!.every((v) => v === 0) && g.drouterBias!.every((v) => v === 0),
        `${label}: a single expert's weight is constant: no router gradient`,
      );
    // accumulate: dx +=
    const dx2 = g.dx.slice();
    moeBackward({
      ...shape(s),
      ...w,
      x,
      dout,
      state: f.state,
      dx: dx2,
      accumulate: true,
      drouter: null,
      drouterBias: null,
      dgateUp: null,
      dgateUpBias: null,
      ddown: null,
      ddownBias: null,
    });
    t.ok(
      closeness(
        dx2,
        g.dx.map((v) => 2 * v),
        1e-6,
        1e-7,
      ) <= 1,
      `${label}: accumulate adds`,
    );
  }
});

t.test(
  'bfloat16 expert and router weights: the float32 results of the widened weights, no weight gradients',
  async (t) => {
    const s: Sizes = { T: 29, D: 24, F: 19, E: 5, K: 2, variant: 'clamped' };
    const w = weightsFor(s, 900, true);
    const bits = { router: bf16Bits(w.router), gateUp: bf16Bits(w.gateUp), down: bf16Bits(w.down) };
    const wide = { router: bf16Values(bits.router), gateUp: bf16Values(bits.gateUp), down: bf16Values(bits.down) };
    const x = randn(s.T * s.D, 901);
    const dout = randn(s.T * s.D, 902);
    const a = moeForward({ ...shape(s), ...w, ...bits, x });
    const b = moeForward({ ...shape(s), ...w, ...wide, x });
    t.ok(sameBits(a.out, b.out), 'forward: same bits');
    t.ok(
      closeness(a.out, refMoe(s, x, { ...w, ...wide }).out, 1e-4, 1e-5) <= 1,
      'forward: float64 reference of the rounded weights',
    );
    const ga = moeBackward({ ...shape(s), ...w, ...bits, x, dout, state: a.state });
    const gb = moeBackward({ ...shape(s), ...w, ...wide, x, dout, state: b.state });
    t.ok(sameBits(ga.dx, gb.dx), 'dx: same bits');
    t.equal(ga.dgateUp, null);
    t.equal(ga.drouter, null);
    t.ok(sameBits(ga.ddownBias!, gb.ddownBias!), 'bias gradients still flow');
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
        }),
      { name: 'TypeError', message: /dgateUp must be null for bfloat16 experts/ },
    );
  },
);

t.test('errors name the argument', async (t) => {
  const s: Sizes = { T: 3, D: 4, F: 3, E: 3, K: 2, variant: 'standard' };
  const w = weightsFor(s, 1, false);
  const x = randn(s.T * s.D, 2);
  t.throws(() => moeForward({ ...shape(s), topK: 4, ...w, x }), {
    name: 'RangeError',
    message: /topK must be in \[1, 3\], got 4/,
  });
  t.throws(() => moeForward({ ...shape(s), ...w, gateUp: new Float32Array(5), x }), {
    name: 'RangeError',
    message: /gateUp/,
  });
  const f = moeForward({ ...shape(s), ...w, x });
  t.throws(
    () => moeBackward({ ...shape(s), rows: 2, ...w, x: x.subarray(0, 8), dout: new Float32Array(8), state: f.state }),
    { name: 'RangeError', message: /state was made by a forward of other shapes/ },
  );
  t.throws(() => moeBackward({ ...shape(s), ...w, x, dout: new Float32Array(12), state: {} as never }), {
    name: 'TypeError',
    message: /state must be the state returned by moeForward/,
  });
});
