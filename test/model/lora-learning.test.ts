// A seeded learning test of LoRA SFT: a tiny random Qwen3-shaped model (q/k norm, no sinks,
// tied embeddings) with a frozen bfloat16 base memorises a few fixed token sequences through
// adapters on every projection. The mean next-token loss must fall by a clear margin, the base
// must keep its exact bits, AdamW moments must exist for the adapters only, and the run is
// deterministic (the same seed gives the same losses).
import t from 'tap';

import {
  ParamStore,
  Transformer,
  addLora,
  modelConfig,
  packSequences,
  parameterLayout,
} from '../../lib/model/index.js';
import { isLoraParameter } from '../../lib/model/lora/layout.js';
import { randint } from './fixtures/reference.js';

const config = modelConfig({
  layers: 2,
  width: 32,
  heads: 4,
  kvHeads: 2,
  headDim: 8,
  window: 0,
  vocab: 40,
  context: 64,
  ffn: 48,
  ropeTheta: 10000,
  normEps: 1e-6,
  initStd: 0.25,
  swiglu: 'standard',
  sinks: false,
  qkNorm: true,
  tieEmbeddings: true,
});

/** The base as a "checkpoint": random weights, matrices frozen as bfloat16, the rest frozen float32. */
function baseModel(seed: number): Transformer {
  const specs = parameterLayout(config).map((p) => ({
    ...p,
    dtype: p.shape.length >= 2 && p.decay ? ('bfloat16' as const) : ('float32' as const),
    trainable: false,
  }));
  return Transformer.fromStore(config, ParamStore.fromSpecs(specs, seed));
}

function run(
  seed: number,
  steps: number,
): { losses: number[]; baseSame: boolean; moments: boolean; frozenHaveNone: boolean } {
  const start = baseModel(seed);
  const store = start.store;
  const bits = new Map<string, Uint16Array | Float32Array>();
  for (const p of store.info()) bits.set(p.name, p.dtype === 'bfloat16' ? store.readBf16(p.name) : store.read(p.name));
  const m = addLora(start, {
    rank: 8,
    alpha: 16,
    targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
  });
  const data = Array.from({ length: 6 }, (_, i) => ({ tokens: Array.from(randint(14, 100 + i, 0, config.vocab)) }));
  const batch = packSequences(data);
  const targets = batch.targets.reduce((n, v) => n + (v >= 0 ? 1 : 0), 0);
  const dLogProbs = Float32Array.from(batch.targets, (v) => (v >= 0 ? -1 / targets : 0));
  const losses: number[] = [];
  for (let step = 0; step < steps; step++) {
    const f = m.forward(batch);
    let loss = 0;
    for (let i = 0; i < f.logProbs.length; i++) loss -= f.logProbs[i] * (batch.targets[i] >= 0 ? 1 / targets : 0);
    losses.push(loss);
    f.backward({ dLogProbs });
    store.adamwStep({ lr: 2e-2, weightDecay: 0, maxGradNorm: 1 });
    store.zeroGrad();
  }
  let baseSame = true;
  for (const [name, before] of bits) {
    const info = store.info().find((p) => p.name === name)!;
    const now = info.dtype === 'bfloat16' ? store.readBf16(name) : store.read(name);
    if (
      Buffer.compare(
        Buffer.from(now.buffer, now.byteOffset, now.byteLength),
        Buffer.from(before.buffer, before.byteOffset, before.byteLength),
      ) !== 0
    )
      baseSame = false;
  }
  const adapters = store.info().filter((p) => isLoraParameter(p.name));
  const moments = adapters.every((p) => p.trainable && store.read(p.name, 'v').some((v) => v > 0));
  let frozenHaveNone = true;
  for (const p of store.info().filter((p) => !isLoraParameter(p.name))) {
    try {
      store.read(p.name, 'm');
      frozenHaveNone = false;
    } catch {
      // no moments: as expected
    }
  }
  m.dispose();
  store.dispose();
  return { losses, baseSame, moments, frozenHaveNone };
}

t.test('LoRA SFT memorises fixed sequences with the base frozen', async (t) => {
  const a = run(7, 60);
  t.comment(
    a.losses
      .filter((_, i) => i % 10 === 0)
      .map((l) => l.toFixed(3))
      .join(' '),
  );
  const first = a.losses[0];
  const last = a.losses[a.losses.length - 1];
  t.ok(
    first > 3,
    `the random base does not know the data (loss ${first.toFixed(3)}; uniform: ln 40 = ${Math.log(40).toFixed(3)})`,
  );
  t.ok(last < 0.1 * first && last < 0.3, `the loss falls by a clear margin: ${first.toFixed(3)} -> ${last.toFixed(3)}`);
  t.ok(a.baseSame, 'every base parameter keeps its exact bits');
  t.ok(a.moments, 'every adapter has AdamW moments');
  t.ok(a.frozenHaveNone, 'no base parameter has AdamW moments');
  const b = run(7, 60);
  t.same(b.losses, a.losses, 'the same seed gives the same losses');
});
