// The extended config on a CUDA device: what the CUDA transformer shares with the CPU path
// (split biases, per-layer types, RoPE scaling: its RoPE reads the same table) equals the CPU
// model, and what it does not run yet (q/k norm, no sinks, tied embeddings, experts; bfloat16
// or frozen parameters in a CUDA store) is refused with an error naming the field or parameter
// — never wrong numbers. Skipped with a visible message without a CUDA build and a GPU (the
// CUDA emulator, `npm run build:cuda-emulator`, counts).
import t from 'tap';

import { ParamStore, Transformer, cudaAvailable, loadAddon, modelAddon, modelConfig, parameterLayout, type ModelConfigInput } from '../../lib/index.js';
import { closeness, randint, rng } from './fixtures/reference.js';
import { randomizeStore } from './fixtures/transformer-reference.js';

const noGpu = !cudaAvailable()
  ? `no CUDA device: ${loadAddon().cudaStatus().reason}`
  : !modelAddon().modelOpsDevices().includes('cuda')
    ? 'no CUDA device: this build has no CUDA model kernels'
    : false;

const base: ModelConfigInput = { layers: 3, width: 24, heads: 4, kvHeads: 2, headDim: 6, window: 5, vocab: 53, context: 160, ffn: 20, ropeTheta: 1000, normEps: 1e-5, initStd: 0.1, swiglu: 'clamped' };

t.test('split biases, layer types and RoPE scaling on the GPU equal the CPU model', { skip: noGpu }, async (t) => {
  const c = modelConfig(base, {
    qkvBias: true,
    mlpBias: true,
    layerTypes: ['full', 'sliding', 'sliding'],
    ropeScaling: { type: 'yarn', factor: 32, originalContext: 32, betaFast: 32, betaSlow: 1, truncate: false, attentionFactor: null },
  });
  const cpu = Transformer.create(c, 4);
  randomizeStore(cpu.store, 5, 0.5);
  const gpu = Transformer.create(c, 4, { device: 'cuda' });
  for (const n of cpu.store.names()) gpu.store.write(n, cpu.store.read(n));
  const T = 70;
  const tokens = randint(T, 6, 0, c.vocab);
  const targets = randint(T, 7, -1, c.vocab);
  const documentIds = Int32Array.from({ length: T }, (_, i) => (i < 45 ? 0 : 1));
  const positions = Int32Array.from({ length: T }, (_, i) => (i < 45 ? i : i - 45));
  const batch = { tokens, targets, documentIds, positions };
  const r = rng(8);
  const dLogProbs = Float32Array.from({ length: T }, () => r() - 0.5);
  const fc = cpu.forward(batch);
  const fg = gpu.forward(batch);
  t.ok(closeness(fg.logProbs, fc.logProbs, 1e-4, 1e-5) <= 1, 'log-probs');
  fc.backward({ dLogProbs });
  fg.backward({ dLogProbs });
  let worst = 0;
  for (const n of cpu.store.names()) {
    const a = gpu.store.read(n, 'grad');
    const b = cpu.store.read(n, 'grad');
    const scale = Math.max(1e-6, ...Array.from(b, Math.abs));
    for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) / scale);
  }
  t.ok(worst < 1e-4, `every gradient within 1e-4 of its largest (worst ${worst.toExponential(2)})`);
  const sc = cpu.createSession(1);
  const sg = gpu.createSession(1);
  sc.append(Array.from(tokens.subarray(0, 30)));
  sg.append(Array.from(tokens.subarray(0, 30)));
  const [rc] = await cpu.run([{ session: sc, job: { kind: 'sample', maxTokens: 12, temperature: 0 } }]);
  const [rg] = await gpu.run([{ session: sg, job: { kind: 'sample', maxTokens: 12, temperature: 0 } }]);
  t.same(Array.from(rg.tokens), Array.from(rc.tokens), 'greedy tokens past the window');
  sc.dispose();
  sg.dispose();
  cpu.dispose();
  gpu.dispose();
});

t.test('what the CUDA transformer does not run yet is refused, naming the field or parameter', { skip: noGpu }, async (t) => {
  for (const [over, field] of [
    [{ qkNorm: true }, /config\.qkNorm is not supported by the CUDA transformer yet/],
    [{ sinks: false }, /config\.sinks = false is not supported by the CUDA transformer yet/],
    [{ tieEmbeddings: true }, /config\.tieEmbeddings is not supported by the CUDA transformer yet/],
    [{ experts: 4, expertsPerToken: 2 }, /config\.experts is not supported by the CUDA transformer yet/],
  ] as const) {
    t.throws(() => Transformer.create(modelConfig(base, over), 1, { device: 'cuda' }), { name: 'RangeError', message: field }, JSON.stringify(over));
  }
  const c = modelConfig(base);
  const specs = parameterLayout(c);
  t.throws(() => ParamStore.fromSpecs(specs.map((p) => (p.name === 'embed.weight' ? { ...p, dtype: 'bfloat16' as const } : p)), 1, { device: 'cuda' }), {
    name: 'RangeError',
    message: /parameter 'embed\.weight': dtype bfloat16 is not supported by CUDA stores yet/,
  });
  t.throws(() => ParamStore.fromSpecs(specs.map((p) => (p.name === 'norm.weight' ? { ...p, trainable: false } : p)), 1, { device: 'cuda' }), {
    name: 'RangeError',
    message: /parameter 'norm\.weight': trainable = false is not supported by CUDA stores yet/,
  });
});
