import t from 'tap';

import {
  policyLoss,
  policyLossAsync,
  type KlType,
  type LossAggMode,
  type PolicyLossOptions,
} from '../../lib/grpo/index.js';
import {
  closeness,
  finiteDifferences,
  lossInputs,
  maxAbs,
  refPolicyLoss,
  type RefKl,
  type RefLossOptions,
} from './fixtures/reference.js';

const MODES: LossAggMode[] = ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm'];
const KLS: (RefKl | undefined)[] = [undefined, 'k1', 'k2', 'k3', 'abs'];

type Inputs = ReturnType<typeof lossInputs>;

/** Kernel result against the float64 reference: loss, every metric, and (optionally) the gradient. */
function check(
  t: { fail(message: string): unknown },
  label: string,
  inp: Inputs,
  batch: number,
  len: number,
  opts: PolicyLossOptions & RefLossOptions,
  grad: 'fd' | 'analytic',
): void {
  const got = policyLoss(inp, { batch, responseLen: len }, opts);
  const ref = refPolicyLoss(inp, batch, len, opts);
  const near = (a: number | undefined, b: number, what: string) => {
    // float32 per-token terms (up to ~30 here, e.g. k1 of far references) leave ~1e-6 absolute error.
    if (a === undefined || !(Math.abs(a - b) <= 2e-6 * Math.abs(b) + 1e-6)) t.fail(`${label}: ${what} ${a} vs ${b}`);
  };
  near(got.loss, ref.loss, 'loss');
  near(got.metrics['actor/pg_loss'], ref.pg, 'pg_loss');
  near(got.metrics['actor/pg_clipfrac'], ref.clipfrac, 'pg_clipfrac');
  near(got.metrics['actor/pg_clipfrac_lower'], ref.clipfracLower, 'pg_clipfrac_lower');
  near(got.metrics['actor/ppo_kl'], ref.ppoKl, 'ppo_kl');
  if (inp.refLogProbs) near(got.metrics['actor/kl_loss'], ref.kl, 'kl_loss');
  else if ('actor/kl_loss' in got.metrics) t.fail(`${label}: kl_loss without refLogProbs`);
  if (inp.entropy) near(got.metrics['actor/entropy'], ref.ent, 'entropy');
  else if ('actor/entropy' in got.metrics) t.fail(`${label}: entropy without an entropy input`);

  const want =
    grad === 'fd'
      ? finiteDifferences((lp) => refPolicyLoss({ ...inp, logProbs: lp }, batch, len, opts).loss, inp.logProbs)
      : ref.grad;
  const c = closeness(got.dLogProbs, want, 2e-5, 1e-6 * maxAbs(want) + 1e-12);
  if (c > 1) t.fail(`${label}: dLogProbs closeness ${c}`);
  for (let j = 0; j < inp.responseMask.length; j++) {
    if (inp.responseMask[j] === 0 && got.dLogProbs[j] !== 0) {
      t.fail(`${label}: gradient ${got.dLogProbs[j]} at masked token ${j}`);
      break;
    }
  }
}

t.test(
  'every aggregation mode x KL type x entropy x advantage layout, odd shapes, gradient by finite differences',
  async (t) => {
    let seed = 100;
    let cases = 0;
    for (const mode of MODES) {
      for (const klType of KLS) {
        for (const entropy of [false, true]) {
          for (const perTokenAdv of [false, true]) {
            const [batch, len] = [
              [1, 1],
              [5, 13],
              [7, 9],
            ][seed % 3]!;
            const inp = lossInputs(seed++, batch!, len!, { ref: klType !== undefined, entropy, perTokenAdv });
            const opts: PolicyLossOptions & RefLossOptions = {
              aggMode: mode,
              clipLow: 0.2,
              clipHigh: 0.28,
              ...(klType ? { klType, klCoef: 0.3 } : {}),
              ...(entropy ? { entropyCoef: 0.01 } : {}),
              ...(mode === 'seq-mean-token-sum-norm' && seed % 2 ? { lossScale: 4096 } : {}),
            };
            check(
              t,
              `${mode} kl=${klType} ent=${entropy} tok=${perTokenAdv} [${batch}, ${len}]`,
              inp,
              batch!,
              len!,
              opts,
              'fd',
            );
            cases++;
          }
        }
      }
    }
    t.equal(cases, 80);
  },
);

t.test('defaults are VERL defaults', async (t) => {
  const inp = lossInputs(7, 6, 11, { ref: true });
  const a = policyLoss(inp, { batch: 6, responseLen: 11 });
  const b = policyLoss(
    inp,
    { batch: 6, responseLen: 11 },
    { clipLow: 0.2, clipHigh: 0.2, dualClipC: 3, klType: 'k3', klCoef: 0.001, aggMode: 'token-mean' },
  );
  t.equal(a.loss, b.loss);
  t.same(a.dLogProbs, b.dLogProbs);
  check(t, 'defaults', inp, 6, 11, {}, 'fd');
  // VERL's names for the KL estimators.
  for (const [alias, k] of [
    ['kl', 'k1'],
    ['mse', 'k2'],
    ['low_var_kl', 'k3'],
  ] as const) {
    const x = policyLoss(inp, { batch: 6, responseLen: 11 }, { klType: alias as KlType, klCoef: 0.5 });
    const y = policyLoss(inp, { batch: 6, responseLen: 11 }, { klType: k, klCoef: 0.5 });
    t.equal(x.loss, y.loss, `${alias} = ${k}`);
  }
});

t.test(
  'larger and longer inputs (rows split into pieces, many parallel tasks) against the analytic reference',
  async (t) => {
    const shapes = [
      [3, 40001], // rows longer than one piece
      [257, 129], // many short rows per task
      [2, 16384], // exactly one piece per row
    ] as const;
    let seed = 900;
    for (const [batch, len] of shapes) {
      for (const mode of MODES) {
        const inp = lossInputs(seed++, batch, len, { ref: true, entropy: true, perTokenAdv: seed % 2 === 0 });
        check(
          t,
          `${mode} [${batch}, ${len}]`,
          inp,
          batch,
          len,
          { aggMode: mode, klType: 'k3', klCoef: 0.1, entropyCoef: 0.02 },
          'analytic',
        );
      }
    }
    t.pass('done');
  },
);

t.test('edge cases', async (t) => {
  const shape = { batch: 1, responseLen: 4 };
  const ones = new Float32Array([1, 1, 1, 1]);

  t.test('ratio 1: loss is -mean(A), gradient -A/N', async (t) => {
    const lp = new Float32Array([-1, -2, -0.5, -3]);
    const r = policyLoss(
      { logProbs: lp, oldLogProbs: lp, advantages: new Float32Array([0.5, -1, 2, 1.5]), responseMask: ones },
      shape,
    );
    t.ok(Math.abs(r.loss - -0.75) < 1e-7);
    t.same(Array.from(r.dLogProbs), [-0.125, 0.25, -0.5, -0.375]);
    t.equal(r.metrics['actor/pg_clipfrac'], 0);
    t.equal(r.metrics['actor/ppo_kl'], 0);
  });

  t.test('log-ratio clamped at ±20: no gradient beyond, full gradient at the bound', async (t) => {
    const lp = new Float32Array([5, -25, 0, -20]);
    const old = new Float32Array([-20, 0, -20, 0]); // x = 25, -25, 20, -20
    const adv = new Float32Array([-0.001, 1, -1e-9, 1]);
    const r = policyLoss({ logProbs: lp, oldLogProbs: old, advantages: adv, responseMask: ones }, shape, {
      dualClipC: 1e12,
    });
    const ref = refPolicyLoss({ logProbs: lp, oldLogProbs: old, advantages: adv, responseMask: ones }, 1, 4, {
      dualClipC: 1e12,
    });
    t.equal(r.dLogProbs[0], 0, 'x = 25: clamped, gradient 0');
    t.equal(r.dLogProbs[1], 0, 'x = -25: clamped, gradient 0');
    t.ok(
      r.dLogProbs[2] !== 0 && Math.abs(r.dLogProbs[2]! - ref.grad[2]!) <= 2e-6 * Math.abs(ref.grad[2]!),
      'x = 20: inside the inclusive bound',
    );
    t.ok(Math.abs(r.loss - ref.loss) <= 2e-6 * Math.abs(ref.loss), `loss uses exp(±20): ${r.loss} vs ${ref.loss}`);
    t.ok(Math.abs(r.metrics['actor/ppo_kl'] - 0) < 1e-6, 'ppo_kl averages -clamp(x): (-20 + 20 - 20 + 20) / 4');
  });

  t.test('dual clip bounds the loss at -A c for A < 0', async (t) => {
    const lp = new Float32Array([Math.log(5), Math.log(2), Math.log(5), Math.log(0.5)]);
    const old = new Float32Array(4);
    const adv = new Float32Array([-1, -1, 1, -1]);
    const r = policyLoss({ logProbs: lp, oldLogProbs: old, advantages: adv, responseMask: ones }, shape);
    // token 0: ratio 5 > c: loss 3, gradient 0; token 1: ratio 2 < c: loss 2 (unclipped, A < 0 and ratio > 1.2
    // keeps -A rho), gradient 2/4; token 2: A > 0, ratio clipped to 1.2: loss -1.2, gradient 0; token 3: A < 0, ratio 0.5
    // clipped to 0.8: loss 0.8, gradient 0.
    t.ok(Math.abs(r.loss - (3 + 2 - 1.2 + 0.8) / 4) < 1e-6, `loss ${r.loss}`);
    t.ok(closeness(r.dLogProbs, [0, 0.5, 0, 0], 1e-6, 1e-7) <= 1, `${Array.from(r.dLogProbs)}`);
    t.equal(r.metrics['actor/pg_clipfrac_lower'], 0.25);
    t.equal(r.metrics['actor/pg_clipfrac'], 0.5, 'tokens 2 and 3: the clipped term is the larger');
    const c5 = policyLoss({ logProbs: lp, oldLogProbs: old, advantages: adv, responseMask: ones }, shape, {
      dualClipC: 10,
    });
    t.equal(c5.metrics['actor/pg_clipfrac_lower'], 0, 'c = 10: nothing bounded');
  });

  t.test('k3 clamps at 10 (and the inner ±20 clamp); small differences stay accurate', async (t) => {
    const lp = new Float32Array([-1, -1, -1, -1]);
    const refLp = new Float32Array([4, 24, -31, -1.001]); // ref - logp = 5, 25, -30, -0.001
    const adv = new Float32Array([1, 1, 1, 1]);
    const inp = { logProbs: lp, oldLogProbs: lp, advantages: adv, responseMask: ones, refLogProbs: refLp };
    const r = policyLoss(inp, shape, { klType: 'k3', klCoef: 1 });
    const e = Math.fround(-1.001) + 1; // ref - logp as the float inputs hold it, about -0.001
    const small = Math.expm1(e) - e; // about 5e-7
    t.ok(Math.abs(r.metrics['actor/kl_loss']! - (10 + 10 + 10 + small) / 4) < 1e-6);
    const only = policyLoss({ ...inp, responseMask: new Float32Array([0, 0, 0, 1]) }, shape, {
      klType: 'k3',
      klCoef: 1,
    });
    t.ok(
      Math.abs(only.metrics['actor/kl_loss']! - small) <= 1e-4 * small,
      `k3 of a tiny difference: ${only.metrics['actor/kl_loss']} vs ${small}`,
    );
    // k3 keeps its relative precision for small differences on both sides of the exp's
    // range-reduction boundary (|d| = ln2/2), where e^d - d - 1 would cancel.
    for (const dd of [3e-5, -2e-4, 1e-2, -0.2, 0.3465, 0.3467, -0.35, 0.9]) {
      const one = {
        logProbs: new Float32Array([-2]),
        oldLogProbs: new Float32Array([-2]),
        advantages: new Float32Array([1]),
        responseMask: new Float32Array([1]),
      };
      const refOne = new Float32Array([-2 + dd]);
      const e = refOne[0]! + 2; // the float difference the kernel sees
      const want = Math.expm1(e) - e;
      const got = policyLoss(
        { ...one, refLogProbs: refOne },
        { batch: 1, responseLen: 1 },
        { klType: 'k3', klCoef: 1 },
      );
      t.ok(
        Math.abs(got.metrics['actor/kl_loss']! - want) <= 3e-6 * want,
        `k3(${e}) = ${got.metrics['actor/kl_loss']} vs ${want}`,
      );
      const wantGrad = -1 - Math.expm1(e); // ratio term -A plus d k3 / d logp = 1 - e^(ref - logp)
      t.ok(Math.abs(got.dLogProbs[0]! - wantGrad) <= 1e-6 * Math.abs(wantGrad) + 1e-7, `gradient at ${e}`);
    }
    // Gradient: only the ratio term (-A/N) where k3 is clamped; plus 1 - e^(ref - logp) where not.
    t.ok(
      closeness(r.dLogProbs, [-0.25, -0.25, -0.25, (-1 - Math.expm1(e)) / 4], 1e-5, 1e-8) <= 1,
      `${Array.from(r.dLogProbs)}`,
    );
  });

  t.test('all-masked rows are skipped; an all-masked batch gives 0', async (t) => {
    const inp = lossInputs(3, 4, 6, { ref: true, entropy: true });
    inp.responseMask.fill(0, 6, 12); // row 1
    for (const mode of MODES) check(t, `row masked ${mode}`, inp, 4, 6, { aggMode: mode, entropyCoef: 0.1 }, 'fd');
    inp.responseMask.fill(0);
    for (const mode of MODES) {
      const r = policyLoss(inp, { batch: 4, responseLen: 6 }, { aggMode: mode, entropyCoef: 0.1 });
      t.equal(r.loss, 0, mode);
      t.ok(r.dLogProbs.every((g) => g === 0));
      t.same(r.metrics, {
        'actor/pg_loss': 0,
        'actor/pg_clipfrac': 0,
        'actor/pg_clipfrac_lower': 0,
        'actor/ppo_kl': 0,
        'actor/kl_loss': 0,
        'actor/entropy': 0,
      });
    }
  });

  t.test('values at masked tokens are never read into the result', async (t) => {
    const inp = lossInputs(4, 3, 10, { ref: true, entropy: true, perTokenAdv: true });
    const clean = policyLoss(inp, { batch: 3, responseLen: 10 }, { entropyCoef: 0.1 });
    for (const a of [inp.logProbs, inp.oldLogProbs, inp.advantages, inp.refLogProbs!, inp.entropy!]) {
      for (let j = 0; j < a.length; j++) if (inp.responseMask[j] === 0) a[j] = j % 2 ? Number.NaN : -Infinity;
    }
    const dirty = policyLoss(inp, { batch: 3, responseLen: 10 }, { entropyCoef: 0.1 });
    t.equal(dirty.loss, clean.loss);
    t.same(dirty.dLogProbs, clean.dLogProbs);
    t.same(dirty.metrics, clean.metrics);
  });
});

t.test('micro-batches with global counts add up to the whole batch', async (t) => {
  const batch = 8;
  const len = 21;
  const inp = lossInputs(21, batch, len, { ref: true, perTokenAdv: true });
  const rows = (a: Float32Array, from: number, to: number) => a.subarray(from * len, to * len);
  for (const mode of ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean'] as const) {
    const whole = policyLoss(inp, { batch, responseLen: len }, { aggMode: mode, klType: 'k2', klCoef: 0.2 });
    let tokens = 0;
    let seqs = 0;
    for (let i = 0; i < batch; i++) {
      let c = 0;
      for (let k = 0; k < len; k++) c += inp.responseMask[i * len + k]!;
      tokens += c;
      seqs += c > 0 ? 1 : 0;
    }
    let sum = 0;
    const grad: number[] = [];
    for (const [a, b] of [
      [0, 3],
      [3, 8],
    ] as const) {
      const part = {
        logProbs: rows(inp.logProbs, a, b),
        oldLogProbs: rows(inp.oldLogProbs, a, b),
        advantages: rows(inp.advantages, a, b),
        responseMask: rows(inp.responseMask, a, b),
        refLogProbs: rows(inp.refLogProbs!, a, b),
      };
      const r = policyLoss(
        part,
        { batch: b - a, responseLen: len },
        { aggMode: mode, klType: 'k2', klCoef: 0.2, globalTokenCount: tokens, globalSeqCount: seqs },
      );
      sum += r.loss;
      grad.push(...r.dLogProbs);
    }
    t.ok(Math.abs(sum - whole.loss) <= 1e-6 * Math.abs(whole.loss) + 1e-9, `${mode}: ${sum} vs ${whole.loss}`);
    t.ok(closeness(grad, whole.dLogProbs, 1e-6, 1e-9) <= 1, `${mode} gradient`);
  }
});

t.test('same input, same bits; async equals sync; caller-provided output', async (t) => {
  const inp = lossInputs(31, 40, 333, { ref: true, entropy: true });
  const opts: PolicyLossOptions = { aggMode: 'seq-mean-token-mean', klType: 'k3', klCoef: 0.01, entropyCoef: 0.001 };
  const a = policyLoss(inp, { batch: 40, responseLen: 333 }, opts);
  const b = policyLoss(inp, { batch: 40, responseLen: 333 }, opts);
  t.equal(a.loss, b.loss);
  t.same(a.metrics, b.metrics);
  t.same(a.dLogProbs, b.dLogProbs);
  const c = await policyLossAsync(inp, { batch: 40, responseLen: 333 }, opts);
  t.equal(c.loss, a.loss);
  t.same(c.dLogProbs, a.dLogProbs);
  const out = new Float32Array(40 * 333).fill(Number.NaN);
  const d = policyLoss(inp, { batch: 40, responseLen: 333 }, { ...opts, out });
  t.equal(d.dLogProbs, out, 'writes into opts.out');
  t.same(out, a.dLogProbs);
  const e = await policyLossAsync(inp, { batch: 40, responseLen: 333 }, { ...opts, out: out.fill(7) });
  t.equal(e.dLogProbs, out);
  t.same(out, a.dLogProbs);
});
