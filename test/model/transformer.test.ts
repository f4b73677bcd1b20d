// The transformer's training forward and backward against a plain float64 reference of the
// whole model (fixtures/transformer-reference.ts): log-probs and entropies on packed batches
// with several documents, GQA, sinks and a sliding window; parameter gradients against central
// finite differences of the reference (every parameter of one block, and of a 3-layer model with
// biases); fp32 finite differences of the native forward on the tiny preset; packed batches
// equal to each sequence alone; eager equal to fused.
import t, { type Test } from 'tap';

import { ParamStore, Transformer, type ModelConfig, modelConfig, packSequences } from '../../lib/model/index.js';
import { closeness, numericGrad, randint, rng, sampleIndices } from './fixtures/reference.js';
import {
  randomizeStore,
  readGrads,
  readParams,
  refTransformer,
  type RefBatch,
  randomBatch as packedBatch,
} from './fixtures/transformer-reference.js';

const small = (over: Partial<ModelConfig> = {}): ModelConfig =>
  modelConfig({
    layers: 3,
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
    bias: false,
    ...over,
  });

/** Packed batches whose document ids are not 0, 1, …: only their equality matters. */
const randomBatch = (lengths: number[], vocab: number, seed: number) =>
  packedBatch(lengths, vocab, seed, (d) => 10 + d * 3);

/** Per-token coefficients of the objective sum a·logp + b·H. */
function coefficients(T: number, seed: number): { a: Float32Array; b: Float32Array } {
  const r = rng(seed);
  return {
    a: Float32Array.from({ length: T }, () => r() - 0.5),
    b: Float32Array.from({ length: T }, () => 0.5 * (r() - 0.5)),
  };
}

function objective(
  c: ModelConfig,
  params: Map<string, Float64Array>,
  batch: RefBatch,
  a: Float32Array,
  b: Float32Array,
  temperature = 1,
): number {
  const r = refTransformer(c, params, batch, temperature);
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * r.logp[i] + b[i] * r.entropy[i];
  return s;
}

/** Checks every parameter's gradient at a few indices against finite differences of the float64 reference. */
function checkGradients(
  t: Test,
  c: ModelConfig,
  model: Transformer,
  batch: RefBatch,
  a: Float32Array,
  b: Float32Array,
  perParam: number,
  temperature = 1,
): void {
  const params = readParams(model.store);
  const grads = readGrads(model.store);
  let worst = 0;
  let worstName = '';
  let seed = 100;
  for (const [name, value] of params) {
    const idx = sampleIndices(value.length, perParam, seed++);
    const numeric = numericGrad(
      (v) => {
        const p = new Map(params);
        p.set(name, v);
        return objective(c, p, batch, a, b, temperature);
      },
      value,
      idx,
      1e-6,
    );
    const g = grads.get(name) as Float32Array;
    let scale = 0;
    for (const v of g) scale = Math.max(scale, Math.abs(v));
    const native = Float64Array.from(idx, (i) => g[i]);
    const cl = closeness(native, numeric, 2e-3, 1e-4 * Math.max(scale, 1e-3));
    if (cl > worst) {
      worst = cl;
      worstName = name;
    }
  }
  t.ok(worst <= 1, `every sampled gradient matches finite differences (worst ${worst.toFixed(3)} at ${worstName})`);
}

t.test('forward matches the float64 reference (documents, GQA, sinks, window, temperature)', async (t) => {
  for (const [label, c, temperature] of [
    ['3 layers, clamped SwiGLU', small(), 1],
    ['bias, standard SwiGLU, temperature 0.7', small({ bias: true, swiglu: 'standard', layers: 2, window: 2 }), 0.7],
    ['no window, heads = kvHeads', small({ window: 0, heads: 3, kvHeads: 3, layers: 2 }), 1.3],
    ['token shift', small({ tokenShift: true }), 1],
  ] as const) {
    const model = Transformer.create(c, 7);
    randomizeStore(model.store, 11);
    const batch = randomBatch([6, 1, 9, 5], c.vocab, 3);
    const r = model.logProbs(batch, { temperature });
    const ref = refTransformer(c, readParams(model.store), batch, temperature);
    t.ok(closeness(r.logProbs, ref.logp, 1e-4, 1e-5) <= 1, `${label}: log-probs`);
    t.ok(closeness(r.entropy, ref.entropy, 1e-4, 1e-5) <= 1, `${label}: entropies`);
    for (let i = 0; i < batch.targets.length; i++)
      if (batch.targets[i] < 0) t.equal(r.logProbs[i], 0, `${label}: no target gives 0`);
    // the same through the saved-activation path
    const f = model.forward(batch, { temperature });
    t.same(f.logProbs, r.logProbs, `${label}: forward with save gives the same log-probs`);
    f.release();
    t.equal(f.bytes, 0, 'released');
    model.dispose();
  }
});

t.test('one block: every parameter gradient matches finite differences of the reference', async (t) => {
  const c = small({ layers: 1, bias: true });
  const model = Transformer.create(c, 3);
  randomizeStore(model.store, 21);
  const batch = randomBatch([7, 4], c.vocab, 5);
  const { a, b } = coefficients(batch.tokens.length, 9);
  const f = model.forward(batch);
  f.backward({ dLogProbs: a, dEntropy: b });
  checkGradients(t, c, model, batch, a, b, 6);
  model.dispose();
});

t.test('whole model (3 layers, sliding/full/sliding, 3 documents): gradients match finite differences', async (t) => {
  const c = small();
  const model = Transformer.create(c, 4);
  randomizeStore(model.store, 31);
  const batch = randomBatch([5, 8, 4], c.vocab, 6);
  const { a, b } = coefficients(batch.tokens.length, 10);
  const f = model.forward(batch, { temperature: 0.8 });
  await f.backwardAsync({ dLogProbs: a, dEntropy: b });
  checkGradients(t, c, model, batch, a, b, 3, 0.8);
  model.dispose();
});

t.test('token shift: the previous token is seen at every position, gradients match finite differences', async (t) => {
  const c = small({ tokenShift: true, layers: 2 });
  const model = Transformer.create(c, 6);
  t.ok(model.store.names().includes('token_shift.weight'), 'a token_shift.weight parameter');
  randomizeStore(model.store, 41);
  const batch = randomBatch([6, 9, 3], c.vocab, 12);
  // token 0 only as the previous token of each document's first position: its embedding row
  // gets a gradient through the shift alone
  for (let i = 0; i < batch.tokens.length; i++) if (batch.tokens[i] === 0) batch.tokens[i] = 1;
  const { a, b } = coefficients(batch.tokens.length, 13);
  const f = model.forward(batch);
  await f.backwardAsync({ dLogProbs: a, dEntropy: b });
  checkGradients(t, c, model, batch, a, b, 4);
  const params = readParams(model.store);
  const row0 = Array.from({ length: c.width }, (_, i) => i);
  const numeric = numericGrad(
    (v) => {
      const p = new Map(params);
      p.set('embed.weight', v);
      return objective(c, p, batch, a, b);
    },
    params.get('embed.weight') as Float64Array,
    row0,
    1e-6,
  );
  const g = readGrads(model.store).get('embed.weight') as Float32Array;
  const native = Float64Array.from(row0, (i) => g[i]);
  t.ok(
    Math.max(...native.map(Math.abs)) > 1e-4,
    'token 0 (never an input) gets an embedding gradient through the shift',
  );
  t.ok(closeness(native, numeric, 2e-3, 1e-6) <= 1, 'which matches finite differences');
  // the reference without the shift differs: the term is there
  const plain = refTransformer({ ...c, tokenShift: false }, params, batch);
  t.ok(closeness(f.logProbs, plain.logp, 1e-4, 1e-5) > 1, 'the shift changes the log-probs');
  model.dispose();
});

t.test(
  'token shift: a packed batch gives each sequence what it gets alone (no previous token across documents)',
  async (t) => {
    const c = small({ tokenShift: true, layers: 2 });
    const model = Transformer.create(c, 8);
    randomizeStore(model.store, 43);
    const batch = randomBatch([5, 7], c.vocab, 14);
    const packed = model.logProbs(batch).logProbs;
    const second = model.logProbs({
      tokens: batch.tokens.slice(5),
      targets: batch.targets.slice(5),
      positions: batch.positions.slice(5),
    }).logProbs;
    t.ok(
      closeness(packed.slice(5), second, 1e-5, 1e-6) <= 1,
      "the second document's first position sees token 0, not the first document's last token",
    );
    model.dispose();
  },
);

t.test('tiny preset: fp32 finite differences of the native forward agree with the backward', async (t) => {
  const c = modelConfig('tiny');
  const model = Transformer.create(c, 5);
  const batch = randomBatch([23, 17], c.vocab, 8);
  const { a } = coefficients(batch.tokens.length, 12);
  const f = model.forward(batch);
  f.backward({ dLogProbs: a });
  const loss = (): number => {
    const r = model.logProbs(batch);
    let s = 0;
    for (let i = 0; i < a.length; i++) s += a[i] * r.logProbs[i];
    return s;
  };
  let worst = 0;
  for (const [name, count] of [
    ['layers.1.attn.q.weight', 3],
    ['layers.0.attn.v.weight', 3],
    ['layers.0.attn.sinks', 2],
    ['layers.1.mlp.down.weight', 2],
    ['norm.weight', 2],
  ] as const) {
    const grad = model.store.read(name, 'grad');
    const value = model.store.view(name);
    // the entries with the largest gradients (their finite differences are well above fp32 noise)
    const idx = Array.from(grad.keys())
      .sort((x, y) => Math.abs(grad[y]) - Math.abs(grad[x]))
      .slice(0, count);
    for (const i of idx) {
      const v = value[i];
      const h = 1e-2 * Math.max(1, Math.abs(v));
      value[i] = v + h;
      const up = loss();
      value[i] = v - h;
      const down = loss();
      value[i] = v;
      const fd = (up - down) / (2 * h);
      worst = Math.max(worst, Math.abs(fd - grad[i]) / (Math.abs(grad[i]) * 0.05 + 1e-4));
    }
  }
  t.ok(worst <= 1, `fp32 finite differences within 5% (worst ratio ${worst.toFixed(3)})`);
  model.dispose();
});

t.test('a packed batch gives each sequence the log-probs and gradients it gets alone', async (t) => {
  const c = small({ layers: 2, window: 4 });
  const seqs = [13, 5, 9].map((n, i) => ({ tokens: Array.from(randint(n, 40 + i, 0, c.vocab)) }));
  const packed = packSequences(seqs);
  const a = coefficients(packed.tokens.length, 3).a;

  const store = ParamStore.fromConfig(c, 1);
  randomizeStore(store, 2);
  const model = Transformer.fromStore(c, store);
  const f = model.forward(packed);
  f.backward({ dLogProbs: a });
  const packedGrads = readGrads(store);

  store.zeroGrad();
  const alone = new Float32Array(packed.tokens.length);
  seqs.forEach((s, d) => {
    const one = packSequences([s]);
    const lo = packed.offsets[d];
    const fo = model.forward(one);
    alone.set(fo.logProbs, lo);
    fo.backward({ dLogProbs: a.slice(lo, lo + s.tokens.length) });
  });
  t.ok(closeness(f.logProbs, alone, 2e-5, 2e-6) <= 1, 'log-probs');
  let worst = 0;
  for (const [name, g] of readGrads(store))
    worst = Math.max(worst, closeness(packedGrads.get(name) as Float32Array, g, 1e-4, 1e-6));
  t.ok(worst <= 1, `gradients (worst ${worst.toFixed(3)})`);
  model.dispose();
  t.notOk(store.disposed, 'a model over an existing store leaves it alive');
  store.dispose();
});

t.test('eager and fused attention give the same log-probs and gradients', async (t) => {
  const c = small({ layers: 2 });
  const batch = randomBatch([11, 7], c.vocab, 13);
  const { a, b } = coefficients(batch.tokens.length, 14);
  const results = (['fused', 'eager'] as const).map((impl) => {
    const model = Transformer.create(c, 9);
    randomizeStore(model.store, 15);
    const f = model.forward(batch, { impl });
    f.backward({ dLogProbs: a, dEntropy: b });
    const out = { logp: f.logProbs, grads: readGrads(model.store) };
    model.dispose();
    return out;
  });
  t.ok(closeness(results[0].logp, results[1].logp, 1e-5, 1e-6) <= 1, 'log-probs');
  let worst = 0;
  for (const [name, g] of results[0].grads)
    worst = Math.max(worst, closeness(g, results[1].grads.get(name) as Float32Array, 1e-4, 1e-6));
  t.ok(worst <= 1, 'gradients');
});

t.test('gradients accumulate, states are used once, stale states are refused', async (t) => {
  const c = small({ layers: 2 });
  const model = Transformer.create(c, 1);
  const batch = randomBatch([6], c.vocab, 1);
  const { a } = coefficients(6, 2);
  const f1 = model.forward(batch);
  f1.backward({ dLogProbs: a });
  const once = model.store.read('layers.0.attn.q.weight', 'grad');
  t.throws(() => f1.backward({ dLogProbs: a }), /already used/, 'a state is used once');
  const f2 = model.forward(batch);
  f2.backward({ dLogProbs: a });
  const twice = model.store.read('layers.0.attn.q.weight', 'grad');
  t.ok(
    closeness(
      twice,
      once.map((v) => 2 * v),
      1e-5,
      1e-9,
    ) <= 1,
    'a second backward adds the same gradient',
  );
  const f3 = model.forward(batch);
  model.store.adamwStep({ lr: 1e-3 });
  t.throws(
    () => f3.backward({ dLogProbs: a }),
    /parameters changed/,
    'a forward from before an optimiser step is refused',
  );
  const f4 = model.forward(batch);
  t.ok(f4.bytes > 0, 'a state holds its activations');
  t.throws(() => f4.backward({ dLogProbs: new Float32Array(3) }), RangeError, 'dLogProbs must have T entries');
  await f4.backwardAsync({ dLogProbs: a });
  t.equal(f4.bytes, 0, 'a refused call leaves the state usable; the backward frees it');
  await t.rejects(async () => f4.backwardAsync({}), /already used/);
  model.dispose();
});
