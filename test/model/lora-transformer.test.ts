// LoRA in the transformer (training forward/backward and KV-cache inference) against the float64
// reference of the whole model (fixtures/transformer-reference.ts, which adds
// scale (x A^T) B^T to every adapted projection): log-probs and entropies; the gradient of
// every adapter parameter against central finite differences of the reference (odd sizes, every
// target kind — q, k, v, o, gate and up on the two halves of the fused gate_up, down — with a
// float32 and a bfloat16 frozen base, rsLoRA and a gpt-oss-like MoE with attention targets);
// gradients reaching a trainable embedding below every frozen layer; no gradient for the
// frozen base; sampling with adapters equal to the training forward's log-probs.
import t, { type Test } from 'tap';

import {
  ParamStore,
  Transformer,
  modelConfig,
  parameterLayout,
  type ModelConfig,
  type ModelConfigInput,
  type ParamSpec,
} from '../../lib/model/index.js';
import { isLoraParameter } from '../../lib/model/lora/layout.js';
import { closeness, numericGrad, randint, rng, sampleIndices } from './fixtures/reference.js';
import {
  randomBatch,
  randomizeStore,
  readParams,
  type RefBatch,
  refTransformer,
} from './fixtures/transformer-reference.js';

const base: ModelConfigInput = {
  layers: 2,
  width: 19,
  heads: 3,
  kvHeads: 1,
  headDim: 6,
  window: 0,
  vocab: 23,
  context: 64,
  ffn: 11,
  ropeTheta: 500,
  normEps: 1e-5,
  initStd: 0.1,
  swiglu: 'standard',
};
const ALL = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;

interface Case {
  label: string;
  config: ModelConfig;
  /** Store the base's weight matrices as frozen bfloat16 (else frozen float32). */
  bf16: boolean;
  /** Keep the embedding trainable (checks the gradient reaching below every frozen layer). */
  trainEmbed?: boolean;
}

const CASES: Case[] = [
  {
    label: 'qwen3-like (q/k norm, no sinks, tied), every target, float32 base, trainable embedding',
    config: modelConfig(base, {
      qkNorm: true,
      sinks: false,
      tieEmbeddings: true,
      lora: { rank: 3, alpha: 5, targets: [...ALL] },
    }),
    bf16: false,
    trainEmbed: true,
  },
  {
    label: 'qwen3-like, every target, bfloat16 base',
    config: modelConfig(base, {
      qkNorm: true,
      sinks: false,
      tieEmbeddings: true,
      lora: { rank: 3, alpha: 5, targets: [...ALL] },
    }),
    bf16: true,
  },
  {
    label: 'qwen2-like (qkv biases, sliding layer), v/up/down, rsLoRA, bfloat16 base',
    config: modelConfig(base, {
      layers: 3,
      qkvBias: true,
      sinks: false,
      window: 4,
      layerTypes: ['full', 'sliding', 'full'],
      lora: { rank: 2, alpha: 3, rslora: true, targets: ['v_proj', 'up_proj', 'down_proj'] },
    }),
    bf16: true,
  },
  {
    label: 'gpt-oss-like (MoE, sinks, biases, clamped SwiGLU), attention targets, float32 base',
    config: modelConfig(base, {
      bias: true,
      swiglu: 'clamped',
      experts: 3,
      expertsPerToken: 2,
      ffn: 7,
      window: 4,
      lora: { rank: 4, alpha: 16, targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] },
    }),
    bf16: false,
  },
];

function bf16Round(v: Float32Array): Float32Array {
  const u = new Uint32Array(v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength));
  for (let i = 0; i < u.length; i++) {
    const x = u[i];
    u[i] = (((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) << 16) >>> 0;
  }
  return new Float32Array(u.buffer);
}

/** A model of `c` over a store whose base is frozen (bf16 or float32 matrices) with random values (no zeros) everywhere, adapters included. */
function makeModel(k: Case, seed: number): Transformer {
  const specs: ParamSpec[] = parameterLayout(k.config).map((p) => {
    if (isLoraParameter(p.name)) return { ...p, dtype: 'float32', trainable: true };
    if (k.trainEmbed && p.name === 'embed.weight') return { ...p, dtype: 'float32', trainable: true };
    const matrix = p.shape.length >= 2 && p.decay;
    return { ...p, dtype: k.bf16 && matrix ? 'bfloat16' : 'float32', trainable: false };
  });
  const store = ParamStore.fromSpecs(specs, seed);
  const tmp = ParamStore.fromSpecs(parameterLayout(k.config), seed);
  randomizeStore(tmp, seed + 100, 0.5);
  for (const name of tmp.names()) store.write(name, tmp.read(name));
  tmp.dispose();
  const m = Transformer.fromStore(k.config, store);
  return m;
}

const disposeAll = (m: Transformer): void => {
  const store = m.store;
  m.dispose();
  store.dispose();
};

t.test('forward with adapters matches the float64 reference', async (t) => {
  for (const k of CASES) {
    const m = makeModel(k, 3);
    const batch = randomBatch([7, 1, 9], k.config.vocab, 4);
    for (const temperature of [1, 0.8]) {
      const r = m.logProbs(batch, { temperature });
      const ref = refTransformer(k.config, readParams(m.store), batch, temperature);
      t.ok(closeness(r.logProbs, ref.logp, 1e-4, 1e-5) <= 1, `${k.label}, temperature ${temperature}: log-probs`);
      t.ok(closeness(r.entropy, ref.entropy, 1e-4, 1e-5) <= 1, `${k.label}, temperature ${temperature}: entropies`);
    }
    // the adapters matter: zeroing one B changes the outputs
    const p = readParams(m.store);
    const bName = [...p.keys()].find((n) => n.endsWith('lora_b'))!;
    p.set(bName, new Float64Array(p.get(bName)!.length));
    const without = refTransformer(k.config, p, batch).logp;
    t.ok(closeness(m.logProbs(batch).logProbs, without, 1e-4, 1e-5) > 1, `${k.label}: ${bName} changes the log-probs`);
    disposeAll(m);
  }
});

/** Gradients of every trainable parameter (sampled entries) against finite differences of the reference objective. */
function checkGradients(
  t: Test,
  k: Case,
  m: Transformer,
  batch: RefBatch,
  a: Float32Array,
  b: Float32Array,
  perParam: number,
): void {
  const params = readParams(m.store);
  let worst = 0;
  let worstName = '';
  let seed = 1;
  let checked = 0;
  for (const info of m.store.info()) {
    if (!info.trainable) continue;
    const value = params.get(info.name)!;
    const idx = sampleIndices(value.length, perParam, seed++);
    const numeric = numericGrad(
      (v) => {
        const p = new Map(params);
        p.set(info.name, v);
        const r = refTransformer(k.config, p, batch);
        let s = 0;
        for (let i = 0; i < a.length; i++) s += a[i] * r.logp[i] + b[i] * r.entropy[i];
        return s;
      },
      value,
      idx,
      1e-6,
    );
    const g = m.store.read(info.name, 'grad');
    const scale = Math.max(1e-3, ...Array.from(g, Math.abs));
    const cl = closeness(
      Float64Array.from(idx, (i) => g[i]),
      numeric,
      2e-3,
      1e-4 * scale,
    );
    if (cl > worst) {
      worst = cl;
      worstName = info.name;
    }
    checked++;
  }
  t.ok(
    worst <= 1,
    `${k.label}: sampled gradients of all ${checked} trainable parameters match finite differences (worst ${worst.toFixed(3)} at ${worstName})`,
  );
}

t.test('adapter gradients match finite differences of the float64 reference; the frozen base gets none', async (t) => {
  for (const k of CASES) {
    const m = makeModel(k, 5);
    const batch = randomBatch([8, 5], k.config.vocab, 6);
    const T = batch.tokens.length;
    const r = rng(7);
    const a = Float32Array.from({ length: T }, () => r() - 0.5);
    const b = Float32Array.from({ length: T }, () => 0.5 * (r() - 0.5));
    const f = m.forward(batch);
    f.backward({ dLogProbs: a, dEntropy: b });
    checkGradients(t, k, m, batch, a, b, 4);
    const trainable = m.store
      .info()
      .filter((p) => p.trainable)
      .map((p) => p.name);
    const expected = parameterLayout(k.config)
      .map((p) => p.name)
      .filter((n) => isLoraParameter(n) || (k.trainEmbed === true && n === 'embed.weight'));
    t.same(trainable, expected, `${k.label}: only the adapters${k.trainEmbed ? ' and the embedding' : ''} train`);
    const frozen = m.store.info().find((p) => !p.trainable)!;
    t.throws(
      () => m.store.read(frozen.name, 'grad'),
      { message: /is not trainable/ },
      `${k.label}: ${frozen.name} has no gradient`,
    );
    if (k.trainEmbed)
      t.ok(
        m.store.read('embed.weight', 'grad').some((v) => v !== 0),
        'the gradient reaches the embedding through every frozen layer and adapter',
      );
    // a second backward accumulates (+=)
    const g1 = m.store.read(trainable[0], 'grad');
    m.forward(batch).backward({ dLogProbs: a, dEntropy: b });
    const g2 = m.store.read(trainable[0], 'grad');
    t.ok(
      closeness(
        g2,
        g1.map((v) => 2 * v),
        1e-5,
        1e-7,
      ) <= 1,
      `${k.label}: gradients accumulate`,
    );
    disposeAll(m);
  }
});

t.test("KV-cache sampling with adapters gives the training forward's log-probs", async (t) => {
  for (const k of CASES) {
    const m = makeModel(k, 8);
    const prompts = [
      Array.from(randint(9, 9, 0, k.config.vocab)),
      Array.from(randint(2, 10, 0, k.config.vocab)),
      Array.from(randint(17, 11, 0, k.config.vocab)),
    ];
    const sessions = prompts.map((p, i) => {
      const s = m.createSession(20 + i);
      s.append(p);
      return s;
    });
    const results = await m.run(
      sessions.map((session) => ({ session, job: { kind: 'sample' as const, maxTokens: 12, temperature: 1 } })),
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
      t.equal(r.tokens.length, 12);
      t.ok(
        closeness(r.logProbs, train, 1e-4, 1e-4) <= 1,
        `${k.label}, prompt ${i}: sampled log-probs equal the training forward's`,
      );
    });
    // and the reference agrees on one sampled sequence (the adapters are in the sampling path)
    const seq = [...prompts[2], ...Array.from(results[2].tokens)];
    const T = seq.length;
    const ref = refTransformer(k.config, readParams(m.store), {
      tokens: seq,
      targets: seq.slice(1).concat([-1]),
      positions: seq.map((_, j) => j),
    }).logp;
    t.ok(
      closeness(results[2].logProbs, ref.slice(prompts[2].length - 1, T - 1), 1e-4, 1e-4) <= 1,
      `${k.label}: sampled log-probs match the float64 reference`,
    );
    for (const s of sessions) s.dispose();
    disposeAll(m);
  }
});

t.test('a bfloat16 base with adapters equals a float32 base of the rounded weights', async (t) => {
  const k = CASES[1];
  const m16 = makeModel(k, 12);
  const f32 = ParamStore.fromSpecs(parameterLayout(k.config), 1);
  for (const name of f32.names()) f32.write(name, m16.store.read(name));
  const m32 = Transformer.fromStore(k.config, f32);
  const batch = randomBatch([10, 6], k.config.vocab, 13);
  const T = batch.tokens.length;
  const a = Float32Array.from({ length: T }, (_, i) => ((i * 7) % 5) / 5 - 0.4);
  const r16 = m16.forward(batch);
  const r32 = m32.forward(batch);
  t.same(r16.logProbs, r32.logProbs, 'the same log-probs (bf16 widening is exact)');
  r16.backward({ dLogProbs: a });
  r32.backward({ dLogProbs: a });
  for (const p of m16.store.info().filter((p) => p.trainable))
    t.same(m16.store.read(p.name, 'grad'), f32.read(p.name, 'grad'), `${p.name}: the same gradient`);
  // sanity: the bf16 store holds rounded values
  const w = m16.store.read('layers.0.attn.q.weight');
  t.same(w, bf16Round(w));
  m32.dispose();
  f32.dispose();
  disposeAll(m16);
});
