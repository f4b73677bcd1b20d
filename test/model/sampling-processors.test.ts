// The native sampler's vLLM processors against a float64 reference of vLLM's sampler
// (vllm/v1/sample/sampler.py: penalties, then temperature, then min_p, then top-k/top-p; the
// penalties of vllm/model_executor/layers/utils.py apply_penalties: repetition over prompt and
// output tokens — positive logits divided, others multiplied —, frequency and presence over the
// output tokens) and its log-probs modes: raw_logprobs (log_softmax of the model's logits),
// processed_logprobs (log_softmax after every processor, renormalised over the kept tokens), and
// our default `tempered` (after penalties and temperature, before truncation).
import t from 'tap';

import { Transformer, type ModelConfig, type NativeJob, modelConfig } from '../../lib/model/index.js';
import { randint } from './fixtures/reference.js';
import { randomizeStore } from './fixtures/transformer-reference.js';

const c: ModelConfig = modelConfig({
  layers: 2,
  width: 20,
  heads: 4,
  kvHeads: 2,
  headDim: 6,
  window: 3,
  vocab: 29,
  context: 64,
  ffn: 14,
  ropeTheta: 500,
  normEps: 1e-5,
  initStd: 0.1,
  swiglu: 'clamped',
  bias: true,
});

function makeModel(seed: number): Transformer {
  const m = Transformer.create(c, seed);
  randomizeStore(m.store, seed + 100, 0.8);
  return m;
}

interface Proc {
  temperature: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repetitionPenalty?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
}

const logSoftmax = (x: ArrayLike<number>): Float64Array => {
  let m = -Infinity;
  for (let i = 0; i < x.length; i++) if (x[i] > m) m = x[i];
  let s = 0;
  for (let i = 0; i < x.length; i++) s += Math.exp(x[i] - m);
  const lz = m + Math.log(s);
  return Float64Array.from(x, (v) => v - lz);
};

/** vLLM's sampler in float64: the penalised logits, the kept set and the final distribution. */
function reference(
  logits: ArrayLike<number>,
  context: readonly number[],
  output: readonly number[],
  p: Proc,
): { penalised: Float64Array; tempered: Float64Array; processed: Float64Array } {
  const x = Float64Array.from(logits);
  const rep = p.repetitionPenalty ?? 1;
  const seen = new Set([...context, ...output]);
  for (const i of seen) x[i] = x[i] > 0 ? x[i] / rep : x[i] * rep;
  const counts = new Map<number, number>();
  for (const o of output) counts.set(o, (counts.get(o) ?? 0) + 1);
  for (const [i, n] of counts) x[i] -= (p.frequencyPenalty ?? 0) * n + (p.presencePenalty ?? 0);
  if (p.temperature === 0) return { penalised: x, tempered: logSoftmax(x), processed: logSoftmax(x) };
  const tempered = logSoftmax(x.map((v) => v / p.temperature));
  const prob = tempered.map(Math.exp);
  const maxP = Math.max(...prob);
  const keep = new Set<number>();
  const order = Array.from(prob.keys()).sort((a, b) => prob[b] - prob[a] || a - b);
  let kept = order.filter((i) => prob[i] >= (p.minP ?? 0) * maxP);
  if (p.topK && p.topK > 0) kept = kept.slice(0, p.topK);
  if (p.topP !== undefined && p.topP < 1) {
    const mass = kept.reduce((a, i) => a + prob[i], 0);
    let acc = 0;
    const nucleus: number[] = [];
    for (const i of kept) {
      nucleus.push(i);
      acc += prob[i];
      if (acc >= p.topP * mass) break;
    }
    kept = nucleus;
  }
  for (const i of kept) keep.add(i);
  const z = kept.reduce((a, i) => a + prob[i], 0);
  const processed = prob.map((q, i) => (keep.has(i) ? Math.log(q / z) : -Infinity));
  return { penalised: x, tempered, processed };
}

const job = (p: Proc, maxTokens: number, logprobsMode: 'tempered' | 'raw' | 'processed'): NativeJob => ({
  kind: 'sample',
  maxTokens,
  logprobsMode,
  ...p,
});

/** The logits after `tokens` (a fresh session, prefilled). */
async function logitsAfter(m: Transformer, tokens: number[]): Promise<Float32Array> {
  const s = m.createSession(0);
  s.append(tokens);
  await m.run([{ session: s, job: { kind: 'prefill' } }]);
  const l = Float32Array.from(s.logits() as Float32Array);
  s.dispose();
  return l;
}

t.test(
  'one token: the sampled set and each log-probs mode match vLLM’s processors (repetition penalty, temperature, min_p, top-k, top-p)',
  async (t) => {
    const m = makeModel(3);
    t.teardown(() => m.dispose());
    const prompt = Array.from(randint(9, 5, 0, c.vocab));
    const logits = await logitsAfter(m, prompt);
    const p: Proc = { temperature: 1.3, topK: 7, topP: 0.9, minP: 0.04, repetitionPenalty: 1.4 };
    const ref = reference(logits, prompt, [], p);
    const raw = logSoftmax(logits);
    t.ok(
      [...ref.processed].filter(Number.isFinite).length >= 2,
      'more than one token kept (the test can see sampling)',
    );
    t.ok(
      ref.processed.some((v, i) => Number.isFinite(v) && Math.abs(v - ref.tempered[i]) > 0.01),
      'truncation changes the log-probs (the modes differ)',
    );
    const n = 3000;
    const freq = new Float64Array(c.vocab);
    const base = m.createSession(0);
    base.append(prompt);
    await m.run([{ session: base, job: { kind: 'prefill' } }]);
    for (const mode of ['processed', 'tempered', 'raw'] as const) {
      const forks = Array.from({ length: mode === 'processed' ? n : 200 }, (_, i) => base.fork(i + 1));
      const rs = await m.run(forks.map((session) => ({ session, job: job(p, 1, mode) })));
      let worst = 0;
      for (const r of rs) {
        const tok = r.tokens[0];
        if (!Number.isFinite(ref.processed[tok])) t.fail(`token ${tok} sampled outside the kept set`);
        const want = mode === 'raw' ? raw[tok] : mode === 'tempered' ? ref.tempered[tok] : ref.processed[tok];
        worst = Math.max(worst, Math.abs(r.logProbs[0] - want));
        if (mode === 'processed') freq[tok] += 1 / n;
      }
      t.ok(worst < 1e-4, `${mode}: log-probs of the reference (worst |diff| ${worst.toExponential(2)})`);
      for (const f of forks) f.dispose();
    }
    let tv = 0;
    for (let i = 0; i < c.vocab; i++)
      tv += Math.abs(freq[i] - (Number.isFinite(ref.processed[i]) ? Math.exp(ref.processed[i]) : 0)) / 2;
    t.ok(tv < 0.05, `frequencies follow the processed distribution (total variation ${tv.toFixed(3)})`);
    base.dispose();
  },
);

t.test(
  'several tokens: frequency and presence penalties count the job’s own output, repetition the whole context',
  async (t) => {
    const m = makeModel(5);
    t.teardown(() => m.dispose());
    const prompt = Array.from(randint(6, 11, 0, c.vocab));
    const p: Proc = { temperature: 0.9, repetitionPenalty: 1.7, presencePenalty: 0.6, frequencyPenalty: 0.45 };
    for (const mode of ['processed', 'tempered', 'raw'] as const) {
      const s = m.createSession(77);
      s.append(prompt);
      const [r] = await m.run([{ session: s, job: job(p, 6, mode) }]);
      s.dispose();
      const out = Array.from(r.tokens);
      t.equal(out.length, 6);
      let worst = 0;
      for (let k = 0; k < out.length; k++) {
        const logits = await logitsAfter(m, [...prompt, ...out.slice(0, k)]);
        const ref = reference(logits, prompt, out.slice(0, k), p);
        const want =
          mode === 'raw'
            ? logSoftmax(logits)[out[k]]
            : mode === 'tempered'
              ? ref.tempered[out[k]]
              : ref.processed[out[k]];
        worst = Math.max(worst, Math.abs(r.logProbs[k] - want));
      }
      t.ok(
        worst < 1e-4,
        `${mode}: every step's log-prob with the penalties of the tokens before it (worst ${worst.toExponential(2)})`,
      );
    }
    // a second job on the same session: its output penalties start afresh, the repetition penalty sees everything
    const s = m.createSession(9);
    s.append(prompt);
    const [a] = await m.run([{ session: s, job: job(p, 3, 'processed') }]);
    s.append([4]);
    const [b] = await m.run([{ session: s, job: job(p, 2, 'processed') }]);
    s.dispose();
    const ctx = [...prompt, ...a.tokens, 4];
    const out = Array.from(b.tokens);
    let worst = 0;
    for (let k = 0; k < out.length; k++) {
      const ref = reference(await logitsAfter(m, [...ctx, ...out.slice(0, k)]), ctx, out.slice(0, k), p);
      worst = Math.max(worst, Math.abs(b.logProbs[k] - ref.processed[out[k]]));
    }
    t.ok(
      worst < 1e-4,
      `continued session: the earlier job's tokens are prompt to the next one (worst ${worst.toExponential(2)})`,
    );
  },
);

t.test(
  'greedy with a repetition penalty: the argmax of the penalised logits, processed = log_softmax(penalised), raw = the model’s own',
  async (t) => {
    const m = makeModel(8);
    t.teardown(() => m.dispose());
    const prompt = Array.from(randint(7, 2, 0, c.vocab));
    const logits = await logitsAfter(m, prompt);
    // penalise the prompt strongly enough to move the argmax when the argmax is in the prompt
    const p: Proc = { temperature: 0, repetitionPenalty: 3 };
    const ref = reference(logits, prompt, [], p);
    let arg = 0;
    for (let i = 1; i < c.vocab; i++) if (ref.penalised[i] > ref.penalised[arg]) arg = i;
    for (const mode of ['processed', 'raw'] as const) {
      const s = m.createSession(1);
      s.append(prompt);
      const [r] = await m.run([{ session: s, job: job(p, 1, mode) }]);
      s.dispose();
      t.equal(r.tokens[0], arg, `${mode}: argmax of the penalised logits`);
      const want = mode === 'raw' ? logSoftmax(logits)[arg] : ref.processed[arg];
      t.ok(Math.abs(r.logProbs[0] - want) < 1e-4, `${mode}: log-prob ${r.logProbs[0]} vs ${want}`);
    }
  },
);

t.test('bad processor arguments are refused naming the field', async (t) => {
  const m = makeModel(1);
  t.teardown(() => m.dispose());
  const s = m.createSession(1);
  s.append([1, 2, 3]);
  const bad: [Partial<NativeJob>, RegExp][] = [
    [{ minP: 1.5 }, /minP/],
    [{ minP: -0.1 }, /minP/],
    [{ repetitionPenalty: 0 }, /repetitionPenalty/],
    [{ repetitionPenalty: Number.POSITIVE_INFINITY }, /repetitionPenalty/],
    [{ presencePenalty: 2.5 }, /presencePenalty/],
    [{ frequencyPenalty: -3 }, /frequencyPenalty/],
    [{ logprobsMode: 'weird' as 'raw' }, /logprobsMode/],
  ];
  for (const [over, re] of bad)
    t.throws(() => m.run([{ session: s, job: { kind: 'sample', maxTokens: 1, ...over } as NativeJob }]), re);
  const [r] = await m.run([{ session: s, job: { kind: 'sample', maxTokens: 1 } }]);
  t.equal(r.tokens.length, 1, 'the session still samples');
  s.dispose();
});
