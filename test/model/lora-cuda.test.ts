// LoRA on a CUDA model against the same model on the CPU (the CPU path is tested against the
// float64 reference in lora-transformer.test.ts): a frozen float32 or bfloat16 base with float32
// adapters on the device — training forward/backward (log-probs, entropies and every adapter
// gradient within 1e-4 of the tensor's largest entry; no gradient for the base), KV-cache
// inference (the logits after a prefill), addLora on a CUDA model (the base frozen on the
// device, an AdamW step moving the adapters only, as on the CPU), merging refused on a
// CUDA store; LoRA on the experts (PEFT target_parameters) likewise, in the model and the MoE op. Skipped with a visible message without a CUDA build and a GPU (the CUDA emulator,
// `npm run build:cuda-emulator`, counts).
import t from 'tap';

import {
  ParamStore,
  Transformer,
  addLora,
  modelConfig,
  moeBackward,
  moeForward,
  parameterLayout,
  type ModelConfig,
  type ModelConfigInput,
  type ParamSpec,
} from '../../lib/model/index.js';
import { isLoraParameter } from '../../lib/model/lora/layout.js';
import { rng } from './fixtures/reference.js';
import { randomBatch, randomizeStore } from './fixtures/transformer-reference.js';
import { noCudaModelOps } from './fixtures/cuda-skip.js';

const noGpu = noCudaModelOps();

const base: ModelConfigInput = {
  layers: 2,
  width: 16,
  heads: 2,
  kvHeads: 1,
  headDim: 8,
  window: 4,
  vocab: 29,
  context: 64,
  ffn: 12,
  ropeTheta: 1000,
  normEps: 1e-5,
  initStd: 0.1,
  swiglu: 'clamped',
};
const ALL = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;

const CASES: { label: string; config: ModelConfig; bf16: boolean }[] = [
  {
    label: 'dense, biases, sinks, every target, float32 base',
    config: modelConfig(base, { bias: true, lora: { rank: 3, alpha: 5, targets: [...ALL] } }),
    bf16: false,
  },
  {
    label: 'q/k norm, tied, rsLoRA on v/up/down, bfloat16 base',
    config: modelConfig(base, {
      qkNorm: true,
      tieEmbeddings: true,
      sinks: false,
      lora: { rank: 2, alpha: 3, rslora: true, targets: ['v_proj', 'up_proj', 'down_proj'] },
    }),
    bf16: true,
  },
  {
    label: 'MoE (E=3, k=2), LoRA on attention, bfloat16 base',
    config: modelConfig(base, {
      bias: true,
      experts: 3,
      expertsPerToken: 2,
      ffn: 7,
      lora: { rank: 4, alpha: 16, targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] },
    }),
    bf16: true,
  },
  {
    label: 'MoE (E=4, k=2), LoRA on q and the experts (PEFT target_parameters), bfloat16 base',
    config: modelConfig(base, {
      bias: true,
      experts: 4,
      expertsPerToken: 2,
      ffn: 9,
      lora: { rank: 3, alpha: 5, targets: ['q_proj', 'experts.gate_up_proj', 'experts.down_proj'] },
    }),
    bf16: true,
  },
];

/** max |a - b| / max |b| (0 when both are 0). */
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

/** The same model (random values everywhere, adapters included; the base frozen) on `device`. */
function makeModel(k: (typeof CASES)[number], device: 'cpu' | 'cuda'): Transformer {
  const specs: ParamSpec[] = parameterLayout(k.config).map((p) => {
    if (isLoraParameter(p.name)) return { ...p, dtype: 'float32', trainable: true };
    const matrix = p.shape.length >= 2 && p.decay;
    return { ...p, dtype: k.bf16 && matrix ? 'bfloat16' : 'float32', trainable: false };
  });
  const store = ParamStore.fromSpecs(specs, 3, { device });
  const tmp = ParamStore.fromSpecs(parameterLayout(k.config), 3);
  randomizeStore(tmp, 103, 0.5);
  for (const name of tmp.names()) store.write(name, tmp.read(name));
  tmp.dispose();
  return Transformer.fromStore(k.config, store);
}

function disposeAll(...models: Transformer[]): void {
  for (const m of models) {
    const store = m.store;
    m.dispose();
    store.dispose();
  }
}

t.test('training forward/backward with adapters on CUDA = on the CPU', { skip: noGpu }, async (t) => {
  for (const k of CASES) {
    const cpu = makeModel(k, 'cpu');
    const gpu = makeModel(k, 'cuda');
    t.equal(gpu.device, 'cuda:0');
    const batch = randomBatch([9, 1, 14, 6], k.config.vocab, 4);
    const T = batch.tokens.length;
    const r = rng(17);
    const dLogProbs = Float32Array.from({ length: T }, () => r() - 0.5);
    const dEntropy = Float32Array.from({ length: T }, () => 0.5 * (r() - 0.5));
    for (const impl of ['fused', 'eager'] as const) {
      cpu.store.zeroGrad();
      gpu.store.zeroGrad();
      const a = cpu.forward(batch, { impl, temperature: 0.9 });
      const b = gpu.forward(batch, { impl, temperature: 0.9 });
      t.ok(
        scaled(b.logProbs, a.logProbs) <= 1e-4,
        `${k.label}, ${impl}: log-probs (${scaled(b.logProbs, a.logProbs)})`,
      );
      t.ok(scaled(b.entropy, a.entropy) <= 1e-4, `${k.label}, ${impl}: entropies`);
      a.backward({ dLogProbs, dEntropy });
      b.backward({ dLogProbs, dEntropy });
      for (const p of gpu.store.info()) {
        t.equal(p.trainable, isLoraParameter(p.name), `${k.label}: ${p.name} ${p.trainable ? 'trains' : 'is frozen'}`);
        if (!p.trainable) continue;
        const ga = cpu.store.read(p.name, 'grad');
        const gb = gpu.store.read(p.name, 'grad');
        t.ok(
          ga.some((v) => v !== 0),
          `${k.label}, ${impl}: ${p.name} has a gradient`,
        );
        t.ok(scaled(gb, ga) <= 1e-4, `${k.label}, ${impl}: gradient of ${p.name} (${scaled(gb, ga)})`);
      }
    }
    // KV-cache inference with the adapters: the logits after a prefill
    const tokens = Array.from(batch.tokens.subarray(0, 12));
    const logits: Float32Array[] = [];
    for (const m of [cpu, gpu]) {
      const s = m.createSession(5);
      s.append(tokens);
      await m.run([{ session: s, job: { kind: 'prefill' } }]);
      logits.push(s.logits()!);
      s.dispose();
    }
    t.ok(
      scaled(logits[1], logits[0]) <= 1e-4,
      `${k.label}: inference logits after a prefill (${scaled(logits[1], logits[0])})`,
    );
    disposeAll(cpu, gpu);
  }
});

t.test(
  'addLora on a CUDA model: the base frozen on the device, AdamW moves the adapters only',
  { skip: noGpu },
  async (t) => {
    const lora = {
      rank: 2,
      alpha: 4,
      targets: ['q_proj', 'v_proj', 'down_proj'] as ('q_proj' | 'v_proj' | 'down_proj')[],
    };
    const models = (['cpu', 'cuda'] as const).map((device) => {
      const m = Transformer.create(base, 1, { device });
      randomizeStore(m.store, 9, 0.5);
      return addLora(m, lora);
    });
    const [cpu, gpu] = models;
    t.same(gpu.config.lora, cpu.config.lora);
    t.same(
      gpu.store
        .info()
        .filter((p) => p.trainable)
        .map((p) => p.name),
      cpu.store
        .info()
        .filter((p) => p.trainable)
        .map((p) => p.name),
      'the adapters train, as on the CPU',
    );
    t.ok(
      gpu.store
        .info()
        .filter((p) => !isLoraParameter(p.name))
        .every((p) => !p.trainable),
      'every base parameter is frozen',
    );
    for (const name of gpu.store.names().filter(isLoraParameter))
      t.same(gpu.store.read(name), cpu.store.read(name), `${name}: the same initial values`);
    const before = new Map(gpu.store.names().map((n) => [n, gpu.store.read(n)]));
    const batch = randomBatch([11, 8], base.vocab, 2);
    for (const m of models) {
      const f = m.forward(batch);
      f.backward({ dLogProbs: Float32Array.from(f.logProbs, (_, i) => (i % 3) - 1) });
      m.store.adamwStep({ lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01, maxGradNorm: 1 });
    }
    for (const name of gpu.store.names()) {
      const now = gpu.store.read(name);
      if (name.endsWith('lora_b')) {
        t.notSame(now, before.get(name), `${name} moved`);
        t.ok(scaled(now, cpu.store.read(name)) <= 1e-4, `${name}: as on the CPU`);
      } else if (!isLoraParameter(name)) {
        t.same(now, before.get(name), `${name} (base) unchanged`);
      }
    }
    t.throws(
      () =>
        gpu.store.mergeLora({
          weight: 'layers.0.attn.q.weight',
          rowOffset: 0,
          loraA: 'layers.0.attn.q.lora_a',
          loraB: 'layers.0.attn.q.lora_b',
          scale: 2,
        }),
      { message: /mergeLora runs on CPU stores only/ },
    );
    disposeAll(cpu, gpu);
  },
);

t.test(
  'the MoE op with expert adapters on cuda = on the cpu (forward, every adapter gradient, dx)',
  { skip: noGpu },
  async (t) => {
    const [T, D, F, E, K, r] = [37, 24, 19, 5, 2, 3];
    const rand = rng(71);
    const vals = (n: number, s = 0.5): Float32Array => Float32Array.from({ length: n }, () => (rand() * 2 - 1) * s);
    const op = {
      rows: T,
      width: D,
      ffn: F,
      experts: E,
      topK: K,
      variant: 'clamped' as const,
      router: vals(E * D, 1),
      gateUp: vals(E * 2 * F * D, 0.4),
      down: vals(E * D * F, 0.4),
      gateUpBias: vals(E * 2 * F),
      downBias: vals(E * D),
    };
    const lora = {
      rank: r,
      scale: 1.5,
      gateUpA: vals(E * r * D),
      gateUpB: vals(E * 2 * F * r),
      downA: vals(E * r * F),
      downB: vals(E * D * r),
    };
    const x = vals(T * D, 1.5);
    const dout = vals(T * D, 1);
    const run = (device: 'cpu' | 'cuda') => {
      const f = moeForward({ ...op, lora, x, device });
      const g = moeBackward({ ...op, lora, x, dout, state: f.state, device });
      return { out: f.out, ...g };
    };
    const cpu = run('cpu');
    const gpu = run('cuda');
    for (const k of [
      'out',
      'dx',
      'dgateUpLoraA',
      'dgateUpLoraB',
      'ddownLoraA',
      'ddownLoraB',
      'dgateUp',
      'ddown',
    ] as const) {
      t.ok(
        scaled(gpu[k]!, cpu[k]!) <= 1e-4,
        `${k}: within 1e-4 of the largest entry (${scaled(gpu[k]!, cpu[k]!).toExponential(2)})`,
      );
    }
  },
);
