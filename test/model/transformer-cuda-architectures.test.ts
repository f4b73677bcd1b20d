// The config's architecture fields on a CUDA device against the same model on the CPU (the reference the GPU
// path is tested against; the CPU path itself is tested against the float64 reference in
// transformer-architectures.test.ts): configs shaped like Qwen3 (q/k norm, no sinks, tied
// embeddings, headDim != width / heads, its weight matrices frozen as bfloat16), gpt-oss (MoE
// with k = 2 of 5 experts, biases, sinks, yarn without truncation, sliding/full layer types,
// clamped SwiGLU) and Llama 3 (llama3 RoPE scaling, no sinks), plus split biases with layer
// types and yarn, an MoE with q/k norm, tied embeddings and k = 1, and the built-in model's
// token shift (float32, and frozen as bfloat16). For each: log-probs and
// entropies of packed batches of several documents (odd T, fused and eager attention),
// every parameter gradient relative to its largest value, AdamW steps (values and moments),
// greedy and seeded sampling with KV caches on the device (decode rows and prefill chunks,
// past the window), and the logits after them. A CUDA store holds bfloat16 and frozen parameters
// like a CPU store (same initialisation, bits in and out, no gradient or moments, skipped by
// zeroGrad, the gradient norm and AdamW). Skipped with a visible message without a CUDA build
// and a GPU (the CUDA emulator, `npm run build:cuda-emulator`, counts).
import t, { type Test } from 'tap';

import {
  ParamStore,
  Transformer,
  type TransformerSession,
  modelConfig,
  parameterLayout,
  type ModelConfig,
  type ModelConfigInput,
  type ParamSpec,
} from '../../lib/model/index.js';
import { bf16Bits, closeness, randint, rng, sameBits } from './fixtures/reference.js';
import { randomizeStore } from './fixtures/transformer-reference.js';
import { noCudaModelOps } from './fixtures/cuda-skip.js';

const noGpu = noCudaModelOps();

const base: ModelConfigInput = {
  layers: 2,
  width: 24,
  heads: 4,
  kvHeads: 2,
  headDim: 6,
  window: 5,
  vocab: 53,
  context: 160,
  ffn: 20,
  ropeTheta: 1000,
  normEps: 1e-5,
  initStd: 0.1,
  swiglu: 'clamped',
};

const yarn = {
  type: 'yarn',
  factor: 32,
  originalContext: 32,
  betaFast: 32,
  betaSlow: 1,
  truncate: false,
  attentionFactor: null,
} as const;

/** The configs, and whether their weight matrices are frozen bfloat16. */
const CASES: { name: string; c: ModelConfig; bf16: boolean; lengths: number[]; impl: 'fused' | 'eager' }[] = [
  {
    name: 'qwen3-like (q/k norm, no sinks, tied, headDim 8, bf16 frozen matrices)',
    c: modelConfig(base, {
      qkNorm: true,
      sinks: false,
      tieEmbeddings: true,
      window: 0,
      headDim: 8,
      swiglu: 'standard',
    }),
    bf16: true,
    lengths: [23, 1, 17],
    impl: 'fused',
  },
  {
    name: 'qwen3-like, float32 and trainable (tied head gradient into embed)',
    c: modelConfig(base, {
      qkNorm: true,
      sinks: false,
      tieEmbeddings: true,
      window: 0,
      headDim: 8,
      swiglu: 'standard',
    }),
    bf16: false,
    lengths: [30, 11],
    impl: 'eager',
  },
  {
    name: 'gpt-oss-like (MoE E=5 k=2, biases, sinks, yarn, sliding/full)',
    c: modelConfig(base, {
      bias: true,
      experts: 5,
      expertsPerToken: 2,
      ffn: 7,
      layerTypes: ['sliding', 'full'],
      ropeScaling: yarn,
    }),
    bf16: false,
    lengths: [19, 26, 4],
    impl: 'fused',
  },
  {
    name: 'gpt-oss-like with bf16 frozen matrices (router and experts)',
    c: modelConfig(base, {
      bias: true,
      experts: 5,
      expertsPerToken: 2,
      ffn: 7,
      layerTypes: ['sliding', 'full'],
      ropeScaling: yarn,
    }),
    bf16: true,
    lengths: [37],
    impl: 'fused',
  },
  {
    name: 'llama-like (llama3 RoPE scaling, no sinks, no biases)',
    c: modelConfig(base, {
      sinks: false,
      window: 0,
      swiglu: 'standard',
      ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 16 },
    }),
    bf16: false,
    lengths: [41, 6],
    impl: 'fused',
  },
  {
    name: 'split biases, layer types and yarn (3 layers)',
    c: modelConfig(base, {
      layers: 3,
      qkvBias: true,
      mlpBias: true,
      layerTypes: ['full', 'sliding', 'sliding'],
      ropeScaling: yarn,
    }),
    bf16: false,
    lengths: [45, 25],
    impl: 'fused',
  },
  {
    name: 'MoE E=3 k=1 + q/k norm + tied + no sinks, eager',
    c: modelConfig(base, {
      experts: 3,
      expertsPerToken: 1,
      ffn: 9,
      qkNorm: true,
      tieEmbeddings: true,
      sinks: false,
      swiglu: 'standard',
    }),
    bf16: false,
    lengths: [13, 20],
    impl: 'eager',
  },
  {
    name: 'token shift (built-in model, float32 and trainable: token_shift and embed gradients)',
    c: modelConfig(base, { tokenShift: true }),
    bf16: false,
    lengths: [21, 1, 14],
    impl: 'fused',
  },
  {
    name: 'token shift with bf16 frozen matrices (embed and token_shift frozen)',
    c: modelConfig(base, { tokenShift: true, window: 0 }),
    bf16: true,
    lengths: [33],
    impl: 'eager',
  },
];

/** The layout of `c` with every weight matrix frozen as bfloat16 (norms, sinks, biases float32 and trainable). */
function bf16Layout(c: ModelConfig): ParamSpec[] {
  return parameterLayout(c).map((p) =>
    p.shape.length >= 2 && p.decay ? { ...p, dtype: 'bfloat16' as const, trainable: false } : p,
  );
}

/** The same model on the CPU and on the GPU, with the same random parameters (bf16 bits copied as bits). */
function pair(c: ModelConfig, bf16: boolean, seed: number): { cpu: Transformer; gpu: Transformer } {
  const specs = bf16 ? bf16Layout(c) : parameterLayout(c);
  const cs = ParamStore.fromSpecs(specs, seed);
  const gs = ParamStore.fromSpecs(specs, seed, { device: 'cuda' });
  randomizeStore(cs, seed + 100, 0.5);
  for (const p of cs.info()) gs.write(p.name, p.dtype === 'bfloat16' ? cs.readBf16(p.name) : cs.read(p.name));
  return { cpu: Transformer.fromStore(c, cs), gpu: Transformer.fromStore(c, gs) };
}

/** A packed batch of documents of the given lengths (random tokens, some targets -1). */
function batchOf(lengths: number[], vocab: number, seed: number) {
  const T = lengths.reduce((a, b) => a + b, 0);
  const documentIds = new Int32Array(T);
  const positions = new Int32Array(T);
  let at = 0;
  lengths.forEach((n, d) => {
    for (let i = 0; i < n; i++) {
      documentIds[at + i] = 3 + d;
      positions[at + i] = i;
    }
    at += n;
  });
  return { tokens: randint(T, seed, 0, vocab), targets: randint(T, seed + 1, -1, vocab), positions, documentIds };
}

/** max |a - b| / max |b| (scale-aware relative error of a whole tensor; 0 when both are 0). */
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

/** max |a - b| / max(1, |b|) element by element. */
function relative(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let e = 0;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(a[i] - b[i]) / Math.max(1, Math.abs(b[i]));
    e = Number.isNaN(d) ? Infinity : Math.max(e, d);
  }
  return e;
}

const worst = { logp: 0, entropy: 0, grad: 0, adamw: 0, moments: 0, logits: 0 };

async function checkCase(t: Test, k: (typeof CASES)[number], i: number): Promise<void> {
  const { cpu, gpu } = pair(k.c, k.bf16, 20 + i);
  const batch = batchOf(k.lengths, k.c.vocab, 60 + i);
  const T = batch.tokens.length;
  // forward: log-probs and entropies (kept activations, and the chunked head without them)
  const temperature = i % 2 === 0 ? 1 : 0.8;
  const opts = { impl: k.impl, temperature };
  const f1 = cpu.forward(batch, opts);
  const f2 = gpu.forward(batch, opts);
  const noSave = gpu.logProbs(batch, opts);
  const el = Math.max(relative(f2.logProbs, f1.logProbs), relative(noSave.logProbs, f1.logProbs));
  const ee = relative(f2.entropy, f1.entropy);
  worst.logp = Math.max(worst.logp, el);
  worst.entropy = Math.max(worst.entropy, ee);
  t.ok(
    el <= 1e-5 && ee <= 1e-5,
    `${k.name}: log-probs (${el.toExponential(2)}) and entropies (${ee.toExponential(2)}) within 1e-5`,
  );
  // backward: every trainable parameter's gradient; frozen ones have none
  const r = rng(70 + i);
  const dLogProbs = Float32Array.from({ length: T }, () => r() - 0.5);
  const dEntropy = Float32Array.from({ length: T }, () => 0.3 * (r() - 0.5));
  f1.backward({ dLogProbs, dEntropy });
  await f2.backwardAsync({ dLogProbs, dEntropy });
  let g = 0;
  let where = '';
  let frozen = 0;
  for (const p of cpu.store.info()) {
    if (!p.trainable) {
      frozen++;
      t.throws(() => gpu.store.read(p.name, 'grad'), { message: /is not trainable/ });
      continue;
    }
    const s = scaled(gpu.store.read(p.name, 'grad'), cpu.store.read(p.name, 'grad'));
    if (s > g) [g, where] = [s, p.name];
  }
  worst.grad = Math.max(worst.grad, g);
  t.ok(
    g <= 1e-5,
    `${k.name}: every trainable gradient within 1e-5 of its largest value (worst ${g.toExponential(2)} at ${where})`,
  );
  if (k.bf16) t.ok(frozen > 0, `${k.name}: ${frozen} frozen bf16 matrices, no gradient`);
  t.ok(Math.abs(gpu.store.gradNorm() - cpu.store.gradNorm()) <= 1e-5 * cpu.store.gradNorm(), 'gradient norms agree');
  // AdamW (eps 1e-2: a smooth function of the gradients), clipped; frozen parameters unchanged
  const frozenBefore = k.bf16 ? gpu.store.readBf16('layers.0.attn.q.weight') : null;
  const o = { lr: 0.01, eps: 1e-2, weightDecay: 0.05, maxGradNorm: 0.5 };
  const sa = cpu.store.adamwStep(o);
  const sb = gpu.store.adamwStep(o);
  t.ok(Math.abs(sb.clipScale - sa.clipScale) <= 1e-5 * sa.clipScale, 'the same clipping');
  let ea = 0;
  let em = 0;
  for (const p of cpu.store.info()) {
    ea = Math.max(ea, closeness(gpu.store.read(p.name), cpu.store.read(p.name), 1e-5, 1e-7));
    // the moments carry the gradients' differences: measured like them, against their largest value
    if (p.trainable)
      for (const w of ['m', 'v'] as const)
        em = Math.max(em, scaled(gpu.store.read(p.name, w), cpu.store.read(p.name, w)));
  }
  worst.adamw = Math.max(worst.adamw, ea);
  worst.moments = Math.max(worst.moments, em);
  t.ok(ea <= 1, `${k.name}: values after AdamW within 1e-5 (worst ${ea.toFixed(3)} of 1e-5 |cpu| + 1e-7)`);
  t.ok(em <= 1e-5, `${k.name}: AdamW moments within 1e-5 of their largest value (${em.toExponential(2)})`);
  if (frozenBefore)
    t.same(gpu.store.readBf16('layers.0.attn.q.weight'), frozenBefore, 'AdamW leaves a frozen bf16 matrix alone');
  // sampling: several sessions (decode rows and prefill chunks), past the window; greedy then seeded
  const prompts = [3, 14, 27].map((n, j) => randint(n, 80 + 10 * i + j, 0, k.c.vocab));
  const mk = (m: Transformer): TransformerSession[] =>
    prompts.map((p, j) => {
      const s = m.createSession(5 + j);
      s.append(p);
      return s;
    });
  const sc = mk(cpu);
  const sg = mk(gpu);
  const run = async (job: Parameters<Transformer['run']>[0][number]['job']) => ({
    a: await cpu.run(
      sc.map((session) => ({ session, job })),
      { prefillChunk: 11 },
    ),
    b: await gpu.run(
      sg.map((session) => ({ session, job })),
      { prefillChunk: 11 },
    ),
  });
  const greedy = await run({ kind: 'sample', maxTokens: 8, temperature: 0 });
  for (let j = 0; j < prompts.length; j++) {
    t.same(
      Array.from(greedy.b[j].tokens),
      Array.from(greedy.a[j].tokens),
      `${k.name}: greedy session ${j}, the CPU's tokens`,
    );
  }
  const sampled = await run({ kind: 'sample', maxTokens: 10, temperature: 1, topK: 20, topP: 0.95 });
  for (let j = 0; j < prompts.length; j++) {
    t.same(
      Array.from(sampled.b[j].tokens),
      Array.from(sampled.a[j].tokens),
      `${k.name}: sampled session ${j}, the same tokens from the same seed`,
    );
    t.ok(closeness(sampled.b[j].logProbs, sampled.a[j].logProbs, 1e-4, 1e-5) <= 1, 'and their log-probs');
  }
  await run({ kind: 'prefill' });
  let le = 0;
  for (let j = 0; j < prompts.length; j++) le = Math.max(le, scaled(sg[j].logits()!, sc[j].logits()!));
  worst.logits = Math.max(worst.logits, le);
  t.ok(
    le <= 1e-5,
    `${k.name}: logits after ${prompts[2].length + 18} tokens within 1e-5 of their scale (${le.toExponential(2)})`,
  );
  for (const s of [...sc, ...sg]) s.dispose();
  cpu.dispose();
  gpu.dispose();
}

t.test(
  'the architecture configs on the GPU equal the CPU model (training, AdamW, sampling)',
  { skip: noGpu },
  async (t) => {
    for (const [i, k] of CASES.entries()) await checkCase(t, k, i);
    t.comment(
      `GPU vs CPU: log-probs ${worst.logp.toExponential(2)}, entropies ${worst.entropy.toExponential(2)} (max |Δ| / max(1, |cpu|)); ` +
        `gradients ${worst.grad.toExponential(2)} (max |Δ| / max |cpu| per parameter); AdamW values ${worst.adamw.toFixed(3)} (of 1e-5 |cpu| + 1e-7), moments ${worst.moments.toExponential(2)}; ` +
        `logits after sampling ${worst.logits.toExponential(2)}`,
    );
  },
);

t.test(
  'a CUDA store with bfloat16 and frozen parameters: initialisation, bits, no gradients',
  { skip: noGpu },
  async (t) => {
    const c = modelConfig(base, { qkNorm: true, sinks: false, tieEmbeddings: true });
    const specs = bf16Layout(c).map((p) => (p.name === 'layers.1.attn_norm.weight' ? { ...p, trainable: false } : p));
    const cpu = ParamStore.fromSpecs(specs, 9);
    const gpu = ParamStore.fromSpecs(specs, 9, { device: 'cuda' });
    t.equal(gpu.bytes, cpu.bytes, 'the same bytes (2 per bf16 value, no gradient or moments for frozen ones)');
    t.equal(gpu.trainableNumel, cpu.trainableNumel);
    for (const p of cpu.info()) {
      t.ok(sameBits(gpu.read(p.name), cpu.read(p.name)), `${p.name}: initialised like the CPU store`);
      if (p.dtype === 'bfloat16') t.same(gpu.readBf16(p.name), cpu.readBf16(p.name), `${p.name}: the same bits`);
      if (!p.trainable) {
        t.throws(() => gpu.read(p.name, 'grad'), {
          name: 'RangeError',
          message: /is not trainable: it has no gradient/,
        });
        t.throws(() => gpu.write(p.name, new Float32Array(p.numel), 'm'), {
          message: /is not trainable: it has no AdamW moments/,
        });
      }
    }
    // float32 writes round to nearest even; bits go in unchanged
    const name = 'layers.0.attn.q.weight';
    const n = cpu.info().find((p) => p.name === name)!.numel;
    const r = rng(4);
    const values = Float32Array.from({ length: n }, () => r() - 0.5);
    cpu.write(name, values);
    gpu.write(name, values);
    t.same(gpu.readBf16(name), cpu.readBf16(name), 'float32 writes round like the CPU store');
    t.same(gpu.readBf16(name), bf16Bits(values), 'to nearest even');
    const bits = Uint16Array.from({ length: n }, (_, i) => (0x3f80 + i) & 0xffff);
    gpu.write(name, bits);
    cpu.write(name, bits);
    t.same(gpu.readBf16(name), bits, 'bits round-trip');
    t.throws(() => gpu.write('norm.weight', new Uint16Array(c.width)), { message: /norm\.weight.*float32/ });
    t.throws(() => gpu.readBf16('norm.weight'), { message: /is float32/ });
    // gradient norm, zeroGrad and AdamW over the trainable parameters only
    for (const p of cpu.info()) {
      if (!p.trainable) continue;
      const g = Float32Array.from({ length: p.numel }, () => r() - 0.5);
      cpu.write(p.name, g, 'grad');
      gpu.write(p.name, g, 'grad');
    }
    t.ok(
      Math.abs(gpu.gradNorm() - cpu.gradNorm()) <= 1e-6 * cpu.gradNorm(),
      'gradient norms over the trainable parameters',
    );
    const before = gpu.read('layers.1.attn_norm.weight');
    const a = cpu.adamwStep({ lr: 0.05, maxGradNorm: 1 });
    const b = gpu.adamwStep({ lr: 0.05, maxGradNorm: 1 });
    t.equal(b.step, a.step);
    t.ok(sameBits(gpu.read('layers.1.attn_norm.weight'), before), 'a frozen float32 parameter is left alone');
    let e = 0;
    for (const p of cpu.info()) e = Math.max(e, closeness(gpu.read(p.name), cpu.read(p.name), 1e-5, 1e-7));
    t.ok(e <= 1, `values after AdamW equal the CPU store's (worst ${e.toFixed(3)})`);
    gpu.zeroGrad();
    t.equal(gpu.gradNorm(), 0, 'zeroGrad');
    // a frozen embedding table in a tied model: the head gradient has nowhere to go, the rest trains
    const frozenEmbed = ParamStore.fromSpecs(
      parameterLayout(c).map((p) => (p.name === 'embed.weight' ? { ...p, trainable: false } : p)),
      2,
      { device: 'cuda' },
    );
    const m = Transformer.fromStore(c, frozenEmbed);
    const batch = batchOf([9, 4], c.vocab, 3);
    m.forward(batch).backward({ dLogProbs: new Float32Array(13).fill(0.5) });
    t.ok(frozenEmbed.gradNorm() > 0, 'the other parameters get gradients');
    t.throws(() => frozenEmbed.read('embed.weight', 'grad'), { message: /is not trainable/ });
    m.dispose();
    frozenEmbed.dispose();
    cpu.dispose();
    gpu.dispose();
  },
);
