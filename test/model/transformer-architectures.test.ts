// The transformer with the architecture fields of the config (the shapes of Qwen3, Qwen2, Llama 3 and gpt-oss):
// q/k norm, no sinks, tied embeddings, biases per projection, per-layer types, RoPE scaling
// (yarn, llama3), mixture of experts, and the built-in token shift (tied); against the float64 reference of the whole model
// (fixtures/transformer-reference.ts): log-probs and entropies, gradients of a few entries of
// every parameter against central finite differences, KV-cache inference equal to the
// training forward (past the window, per-layer types), bfloat16 weights equal to float32 over
// the rounded weights, frozen parameters without gradients, and thread-count independence.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import {
  ParamStore,
  Transformer,
  type ModelConfig,
  type ModelConfigInput,
  modelConfig,
  parameterLayout,
} from '../../lib/model/index.js';
import {
  bf16Bits,
  bf16Values,
  closeness,
  numericGrad,
  randint,
  rng,
  sameBits,
  sampleIndices,
} from './fixtures/reference.js';
import {
  randomBatch,
  randomizeStore,
  readGrads,
  readParams,
  type RefBatch,
  refTransformer,
} from './fixtures/transformer-reference.js';

const base: ModelConfigInput = {
  layers: 2,
  width: 20,
  heads: 4,
  kvHeads: 2,
  headDim: 6,
  window: 3,
  vocab: 29,
  context: 96,
  ffn: 14,
  ropeTheta: 500,
  normEps: 1e-5,
  initStd: 0.1,
  swiglu: 'standard',
};

/** Configurations shaped like the pretrained families (tiny sizes). */
const CONFIGS: [string, ModelConfig][] = [
  [
    'qwen3: q/k norm, no sinks, tied, headDim != width / heads',
    modelConfig(base, { qkNorm: true, sinks: false, tieEmbeddings: true, window: 0, headDim: 8 }),
  ],
  [
    'qwen2: q/k/v biases, no sinks, a sliding middle layer',
    modelConfig(base, { layers: 3, qkvBias: true, sinks: false, window: 4, layerTypes: ['full', 'sliding', 'full'] }),
  ],
  [
    'llama 3: llama3 RoPE scaling, no sinks, no biases',
    modelConfig(base, {
      sinks: false,
      window: 0,
      ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 16 },
    }),
  ],
  [
    'gpt-oss: MoE (E=5, k=2), biases, sinks, yarn without truncation, sliding/full',
    modelConfig(base, {
      swiglu: 'clamped',
      bias: true,
      experts: 5,
      expertsPerToken: 2,
      ffn: 7,
      layerTypes: ['sliding', 'full'],
      ropeScaling: {
        type: 'yarn',
        factor: 32,
        originalContext: 16,
        betaFast: 32,
        betaSlow: 1,
        truncate: false,
        attentionFactor: null,
      },
    }),
  ],
  [
    'MoE (E=3, k=1) + q/k norm + tied + yarn + no sinks',
    modelConfig(base, {
      experts: 3,
      expertsPerToken: 1,
      ffn: 9,
      qkNorm: true,
      tieEmbeddings: true,
      sinks: false,
      ropeScaling: {
        type: 'yarn',
        factor: 4,
        originalContext: 24,
        betaFast: 8,
        betaSlow: 1,
        truncate: true,
        attentionFactor: null,
      },
    }),
  ],
  [
    'built-in token shift + tied embeddings (the shift and the head both feed embed)',
    modelConfig(base, { tokenShift: true, tieEmbeddings: true }),
  ],
];

function coefficients(T: number, seed: number): { a: Float32Array; b: Float32Array } {
  const r = rng(seed);
  return {
    a: Float32Array.from({ length: T }, () => r() - 0.5),
    b: Float32Array.from({ length: T }, () => 0.5 * (r() - 0.5)),
  };
}

function makeModel(c: ModelConfig, seed: number): Transformer {
  const m = Transformer.create(c, seed);
  randomizeStore(m.store, seed + 100, 0.5);
  return m;
}

t.test('forward matches the float64 reference', async (t) => {
  for (const [label, c] of CONFIGS) {
    const m = makeModel(c, 3);
    const batch = randomBatch([6, 1, 9, 5], c.vocab, 4);
    for (const temperature of [1, 0.7]) {
      const r = m.logProbs(batch, { temperature });
      const ref = refTransformer(c, readParams(m.store), batch, temperature);
      t.ok(closeness(r.logProbs, ref.logp, 1e-4, 1e-5) <= 1, `${label}, temperature ${temperature}: log-probs`);
      t.ok(closeness(r.entropy, ref.entropy, 1e-4, 1e-5) <= 1, `${label}, temperature ${temperature}: entropies`);
    }
    const eager = m.logProbs(batch, { impl: 'eager' });
    t.ok(closeness(eager.logProbs, m.logProbs(batch).logProbs, 1e-5, 1e-6) <= 1, `${label}: eager equals fused`);
    m.dispose();
  }
});

/** Every parameter's gradient at a few entries against finite differences of the reference objective. */
function checkGradients(
  t: Test,
  label: string,
  c: ModelConfig,
  m: Transformer,
  batch: RefBatch,
  a: Float32Array,
  b: Float32Array,
  perParam: number,
): void {
  const params = readParams(m.store);
  const grads = readGrads(m.store);
  let worst = 0;
  let worstName = '';
  let seed = 1;
  for (const [name, value] of params) {
    const idx = sampleIndices(value.length, perParam, seed++);
    const numeric = numericGrad(
      (v) => {
        const p = new Map(params);
        p.set(name, v);
        const r = refTransformer(c, p, batch);
        let s = 0;
        for (let i = 0; i < a.length; i++) s += a[i] * r.logp[i] + b[i] * r.entropy[i];
        return s;
      },
      value,
      idx,
      1e-6,
    );
    const g = grads.get(name) as Float32Array;
    const scale = Math.max(1e-3, ...Array.from(g, Math.abs));
    const cl = closeness(
      Float64Array.from(idx, (i) => g[i]),
      numeric,
      2e-3,
      1e-4 * scale,
    );
    if (cl > worst) {
      worst = cl;
      worstName = name;
    }
  }
  t.ok(
    worst <= 1,
    `${label}: sampled gradients of all ${params.size} parameters match finite differences (worst ${worst.toFixed(3)} at ${worstName})`,
  );
}

t.test('gradients of every parameter match finite differences of the reference', async (t) => {
  for (const [label, c] of CONFIGS) {
    const m = makeModel(c, 5);
    const batch = randomBatch([7, 5], c.vocab, 6);
    const { a, b } = coefficients(batch.tokens.length, 7);
    const f = m.forward(batch);
    f.backward({ dLogProbs: a, dEntropy: b });
    if (c.tieEmbeddings) t.notOk(m.store.names().includes('lm_head.weight'), `${label}: tied, no head`);
    checkGradients(t, label, c, m, batch, a, b, 3);
    m.dispose();
  }
});

t.test("KV-cache inference gives the training forward's log-probs (past the window, per-layer types)", async (t) => {
  for (const [label, c] of CONFIGS) {
    const m = makeModel(c, 8);
    const prompts = [
      Array.from(randint(11, 9, 0, c.vocab)),
      Array.from(randint(2, 10, 0, c.vocab)),
      Array.from(randint(30, 11, 0, c.vocab)),
    ];
    const sessions = prompts.map((p, i) => {
      const s = m.createSession(20 + i);
      s.append(p);
      return s;
    });
    const results = await m.run(
      sessions.map((session) => ({ session, job: { kind: 'sample' as const, maxTokens: 14, temperature: 1 } })),
      { prefillChunk: 5 },
    );
    results.forEach((r, i) => {
      const seq = [...prompts[i], ...Array.from(r.tokens)];
      const T = seq.length;
      const batch = {
        tokens: Int32Array.from(seq),
        targets: Int32Array.from({ length: T }, (_, j) => (j + 1 < T ? seq[j + 1] : -1)),
        positions: Int32Array.from({ length: T }, (_, j) => j),
      };
      const train = m.logProbs(batch).logProbs.slice(prompts[i].length - 1, T - 1);
      t.equal(r.tokens.length, 14);
      t.ok(
        closeness(r.logProbs, train, 1e-4, 1e-4) <= 1,
        `${label}, prompt ${i} (${T} tokens, window ${c.window}): sampled log-probs equal the training forward's`,
      );
    });
    for (const s of sessions) s.dispose();
    m.dispose();
  }
});

/** The layout of `c` with every weight matrix frozen as bfloat16 (norms, sinks, biases float32 trainable). */
function bf16Specs(c: ModelConfig) {
  return parameterLayout(c).map((p) => (p.shape.length >= 2 && p.decay ? { ...p, dtype: 'bfloat16' as const } : p));
}

t.test(
  'bfloat16 weights: the forward of float32 over the rounded weights; no gradients for them, the same for the rest',
  async (t) => {
    for (const [label, c] of CONFIGS) {
      const seedModel = makeModel(c, 12);
      const f32 = ParamStore.fromSpecs(parameterLayout(c), 1);
      const b16 = ParamStore.fromSpecs(bf16Specs(c), 1);
      for (const p of b16.info()) {
        const v = seedModel.store.read(p.name);
        if (p.dtype === 'bfloat16') {
          const bits = bf16Bits(v);
          b16.write(p.name, bits);
          f32.write(p.name, bf16Values(bits));
        } else {
          b16.write(p.name, v);
          f32.write(p.name, v);
        }
      }
      seedModel.dispose();
      const mf = Transformer.fromStore(c, f32);
      const mb = Transformer.fromStore(c, b16);
      t.ok(b16.bytes < f32.bytes / 3, `${label}: the bf16 store is smaller (${b16.bytes} vs ${f32.bytes} bytes)`);
      const batch = randomBatch([9, 12], c.vocab, 13);
      const ff = mf.forward(batch);
      const fb = mb.forward(batch);
      let rel = 0;
      for (let i = 0; i < ff.logProbs.length; i++)
        rel = Math.max(rel, Math.abs(fb.logProbs[i] - ff.logProbs[i]) / Math.max(1, Math.abs(ff.logProbs[i])));
      t.ok(rel <= 1e-5, `${label}: log-probs within 1e-5 relative (${rel})`);
      t.ok(sameBits(fb.logProbs, ff.logProbs), `${label}: in fact the same bits (exact widening)`);
      const { a, b } = coefficients(batch.tokens.length, 14);
      ff.backward({ dLogProbs: a, dEntropy: b });
      fb.backward({ dLogProbs: a, dEntropy: b });
      let same = true;
      for (const p of b16.info()) {
        if (p.trainable) same &&= sameBits(b16.read(p.name, 'grad'), f32.read(p.name, 'grad'));
        else t.throws(() => b16.read(p.name, 'grad'), { message: /is not trainable/ });
      }
      t.ok(same, `${label}: the float32 parameters get the gradients of the all-float32 model`);
      // inference over bf16 weights
      const sf = mf.createSession(3);
      const sb = mb.createSession(3);
      sf.append(Array.from(batch.tokens.subarray(0, 9)));
      sb.append(Array.from(batch.tokens.subarray(0, 9)));
      const [rf] = await mf.run([{ session: sf, job: { kind: 'sample', maxTokens: 6, temperature: 1 } }]);
      const [rb] = await mb.run([{ session: sb, job: { kind: 'sample', maxTokens: 6, temperature: 1 } }]);
      t.same(Array.from(rb.tokens), Array.from(rf.tokens), `${label}: sampling over bf16 weights`);
      t.ok(closeness(rb.logProbs, rf.logProbs, 1e-5, 1e-6) <= 1);
      sf.dispose();
      sb.dispose();
      mf.dispose();
      mb.dispose();
      f32.dispose();
      b16.dispose();
    }
  },
);

t.test(
  'frozen parameters get no gradient; the trainable ones get the same as in a fully trainable model',
  async (t) => {
    const [, c] = CONFIGS[3];
    const donor = makeModel(c, 15);
    const frozenNames = new Set([
      'embed.weight',
      'layers.0.attn.q.weight',
      'layers.0.attn_norm.weight',
      'layers.1.mlp.router.weight',
      'layers.1.mlp.experts.down.bias',
      'layers.0.attn.sinks',
      'norm.weight',
    ]);
    const partial = ParamStore.fromSpecs(
      parameterLayout(c).map((p) => (frozenNames.has(p.name) ? { ...p, trainable: false } : p)),
      1,
    );
    for (const name of partial.names()) partial.write(name, donor.store.read(name));
    const m = Transformer.fromStore(c, partial);
    const batch = randomBatch([10, 6], c.vocab, 16);
    const { a, b } = coefficients(batch.tokens.length, 17);
    donor.forward(batch).backward({ dLogProbs: a, dEntropy: b });
    m.forward(batch).backward({ dLogProbs: a, dEntropy: b });
    for (const name of partial.names()) {
      if (frozenNames.has(name))
        t.throws(() => partial.read(name, 'grad'), { message: /is not trainable/ }, `${name}: no gradient`);
      else if (!sameBits(partial.read(name, 'grad'), donor.store.read(name, 'grad')))
        t.fail(`${name}: gradient differs`);
    }
    const before = partial.read('embed.weight');
    partial.adamwStep({ lr: 0.1 });
    t.ok(sameBits(partial.read('embed.weight'), before), 'AdamW leaves the frozen embedding alone');
    m.dispose();
    partial.dispose();
    donor.dispose();
  },
);

t.test('configs and stores the transformer refuses, naming the field or parameter', async (t) => {
  const [, c] = CONFIGS[0];
  const bad = ParamStore.fromSpecs(
    parameterLayout(c).map((p) =>
      p.name === 'layers.0.attn.q_norm.weight' ? { ...p, dtype: 'bfloat16' as const } : p,
    ),
    1,
  );
  t.throws(() => Transformer.fromStore(c, bad), {
    name: 'RangeError',
    message: /parameter 'layers\.0\.attn\.q_norm\.weight' must be float32/,
  });
  bad.dispose();
  const other = ParamStore.fromConfig(modelConfig(c, { qkNorm: false }), 1);
  t.throws(() => Transformer.fromStore(c, other), {
    name: 'RangeError',
    message: /store holds 18 parameters, the config has 22/,
  });
  other.dispose();
});

t.test('a model with every architecture field gives the same bits with 1 and 3 threads', async (t) => {
  const child = join(process.cwd(), 'test', 'model', 'fixtures', 'architectures-determinism-child.mjs');
  const run = (threads: number): string =>
    execFileSync(process.execPath, [child], {
      env: { ...process.env, SINKFLEX_NUM_THREADS: String(threads) },
      encoding: 'utf8',
    });
  const one = run(1);
  t.match(one, /^[0-9a-f]{64}$/);
  t.equal(run(3), one);
});
