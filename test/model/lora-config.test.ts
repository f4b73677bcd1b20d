// LoRA settings in the model config and the parameter layout: validation naming the field
// (unknown or unsupported targets, rank <= 0, alpha not finite, MLP targets on a mixture of
// experts, repeats), the adapters' names, shapes and order after the unchanged base layout,
// PEFT's initialisation (A uniform in ±1/√in, B zeros), and the store operations LoRA uses:
// append (initialised as a store made at once), truncate, freeze (no gradient or moments left),
// with a model made before refusing to run on the changed store.
import t from 'tap';

import {
  ParamStore,
  Transformer,
  addLora,
  modelConfig,
  parameterLayout,
  validateModelConfig,
  type ModelConfigInput,
} from '../../lib/model/index.js';
import { modelAddon } from '../../lib/model/native.js';

const base: ModelConfigInput = {
  layers: 2,
  width: 21,
  heads: 3,
  kvHeads: 1,
  headDim: 6,
  window: 0,
  vocab: 31,
  context: 40,
  ffn: 13,
  ropeTheta: 1000,
  normEps: 1e-5,
  initStd: 0.1,
  swiglu: 'standard',
  sinks: false,
  qkNorm: true,
  tieEmbeddings: true,
};
const ALL = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;

t.test('validation names the field', async (t) => {
  const bad: [unknown, RegExp][] = [
    [{ rank: 0, alpha: 8, targets: ['q_proj'] }, /config\.lora\.rank must be an integer in \[1, 65536\], got 0/],
    [{ rank: -2, alpha: 8, targets: ['q_proj'] }, /config\.lora\.rank .* got -2/],
    [{ rank: 2.5, alpha: 8, targets: ['q_proj'] }, /config\.lora\.rank/],
    [{ rank: 4, alpha: Number.NaN, targets: ['q_proj'] }, /config\.lora\.alpha must be a finite number/],
    [{ rank: 4, alpha: Infinity, targets: ['q_proj'] }, /config\.lora\.alpha/],
    [{ rank: 4, alpha: 8, targets: [] }, /config\.lora\.targets must be a non-empty array/],
    [
      { rank: 4, alpha: 8, targets: ['q_proj', 'qkv_proj'] },
      /config\.lora\.targets\[1\] "qkv_proj" is not a LoRA target module/,
    ],
    [
      { rank: 4, alpha: 8, targets: ['embed_tokens'] },
      /config\.lora\.targets\[0\] .*embedding or the LM head is not supported/,
    ],
    [{ rank: 4, alpha: 8, targets: ['lm_head'] }, /config\.lora\.targets\[0\] .*LM head is not supported/],
    [
      { rank: 4, alpha: 8, targets: ['experts'] },
      /config\.lora\.targets\[0\] "experts" is not a LoRA target module \(the experts are named 'experts\.gate_up_proj' and 'experts\.down_proj'\)/,
    ],
    [{ rank: 4, alpha: 8, targets: ['v_proj', 'v_proj'] }, /config\.lora\.targets\[1\] 'v_proj' is listed twice/],
    [{ rank: 4, alpha: 8, targets: ['q_proj'], dropout: 0.1 }, /config\.lora\.dropout is not a LoRA setting/],
    [{ rank: 4, alpha: 8, targets: ['q_proj'], rslora: 1 }, /config\.lora\.rslora must be a boolean/],
    ['q_proj', /config\.lora must be null or an object/],
  ];
  for (const [lora, message] of bad) {
    t.throws(() => validateModelConfig({ ...base, lora }), { name: 'ModelConfigError', message }, JSON.stringify(lora));
  }
  const moe = { ...base, experts: 4, expertsPerToken: 2 };
  t.throws(() => validateModelConfig({ ...moe, lora: { rank: 2, alpha: 4, targets: ['q_proj', 'gate_proj'] } }), {
    message:
      /config\.lora\.targets\[1\] 'gate_proj' is an MLP projection, but the MLP is a mixture of experts \(experts = 4\): target the attention projections \(q_proj, k_proj, v_proj, o_proj\) or the experts/,
  });
  t.doesNotThrow(
    () =>
      validateModelConfig({ ...moe, lora: { rank: 2, alpha: 4, targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] } }),
    'gpt-oss: the attention projections',
  );
  const ok = validateModelConfig({ ...base, lora: { rank: 4, alpha: 8, targets: ['down_proj', 'q_proj'] } });
  t.same(
    ok.lora,
    { rank: 4, alpha: 8, targets: ['q_proj', 'down_proj'], rslora: false },
    'targets in canonical order, rslora defaults to false',
  );
  t.equal(validateModelConfig(base).lora, null, 'no lora: null');
  t.equal(modelConfig('tiny').lora, null);
  // The native side validates the same (a config that skips the TypeScript validation).
  const layout = modelAddon().modelParamLayout;
  const plain = validateModelConfig(base);
  t.throws(() => layout({ ...plain, lora: { rank: 0, alpha: 1, targets: ['q_proj'] } }), {
    message: /lora\.rank must be in \[1, 65536\]/,
  });
  t.throws(() => layout({ ...plain, lora: { rank: 2, alpha: Number.NaN, targets: ['q_proj'] } }), {
    message: /lora\.alpha/,
  });
  t.throws(() => layout({ ...plain, lora: { rank: 2, alpha: 1, targets: ['wq'] } }), {
    message: /lora\.targets\[0\] = 'wq' is not a LoRA target/,
  });
  t.throws(() => layout({ ...plain, lora: { rank: 2, alpha: 1, targets: [] } }), {
    message: /lora\.targets must name at least one module/,
  });
  t.throws(() => layout({ ...validateModelConfig(moe), lora: { rank: 2, alpha: 1, targets: ['down_proj'] } }), {
    message: /config\.lora\.targets: 'down_proj' is an MLP projection.*experts = 4/,
  });
});

t.test('layout: the base unchanged, then the adapters per layer and target with their shapes', async (t) => {
  const r = 5;
  const c = validateModelConfig({ ...base, lora: { rank: r, alpha: 10, targets: [...ALL] } });
  const plain = parameterLayout(base);
  const layout = parameterLayout(c);
  t.same(layout.slice(0, plain.length), plain, 'the base parameters first, exactly as without LoRA');
  const q = base.heads * base.headDim;
  const kv = base.kvHeads * base.headDim;
  const D = base.width;
  const F = base.ffn;
  const expected: [string, number[]][] = [];
  for (let l = 0; l < base.layers; l++) {
    const p = `layers.${l}.`;
    for (const [m, inF, outF] of [
      ['attn.q', D, q],
      ['attn.k', D, kv],
      ['attn.v', D, kv],
      ['attn.o', q, D],
      ['mlp.gate', D, F],
      ['mlp.up', D, F],
      ['mlp.down', F, D],
    ] as const) {
      expected.push([`${p}${m}.lora_a`, [r, inF]], [`${p}${m}.lora_b`, [outF, r]]);
    }
  }
  t.same(
    layout.slice(plain.length).map((s) => [s.name, s.shape]),
    expected,
  );
  for (const s of layout.slice(plain.length)) {
    if (s.name.endsWith('lora_a')) t.same([s.init, s.decay], ['uniform', true], `${s.name}: uniform, decayed`);
    else t.same([s.init, s.decay], ['zeros', true], `${s.name}: zeros, decayed`);
    if (s.name.endsWith('lora_a'))
      t.ok(Math.abs(s.std - 1 / Math.sqrt(3 * s.shape[1])) < 1e-12, `${s.name}: std 1/√(3 in)`);
  }
  const sub = parameterLayout({ ...base, lora: { rank: 2, alpha: 1, targets: ['v_proj', 'up_proj'] } })
    .slice(plain.length)
    .map((s) => s.name);
  t.same(sub, [
    'layers.0.attn.v.lora_a',
    'layers.0.attn.v.lora_b',
    'layers.0.mlp.up.lora_a',
    'layers.0.mlp.up.lora_b',
    'layers.1.attn.v.lora_a',
    'layers.1.attn.v.lora_b',
    'layers.1.mlp.up.lora_a',
    'layers.1.mlp.up.lora_b',
  ]);
});

t.test(
  'expert targets (PEFT target_parameters): a mixture of experts only; A [E, r, in], B [E, out, r] per layer',
  async (t) => {
    const moe = { ...base, experts: 4, expertsPerToken: 2 };
    const c = validateModelConfig({
      ...moe,
      lora: { rank: 3, alpha: 6, targets: ['experts.down_proj', 'q_proj', 'experts.gate_up_proj'] },
    });
    t.same(c.lora?.targets, ['q_proj', 'experts.gate_up_proj', 'experts.down_proj'], 'canonical order');
    const plain = parameterLayout(moe);
    const added = parameterLayout(c).slice(plain.length);
    const D = base.width;
    const F = base.ffn;
    const q = base.heads * base.headDim;
    const expected: [string, number[]][] = [];
    for (let l = 0; l < base.layers; l++) {
      expected.push([`layers.${l}.attn.q.lora_a`, [3, D]], [`layers.${l}.attn.q.lora_b`, [q, 3]]);
      expected.push(
        [`layers.${l}.mlp.experts.gate_up.lora_a`, [4, 3, D]],
        [`layers.${l}.mlp.experts.gate_up.lora_b`, [4, 2 * F, 3]],
      );
      expected.push(
        [`layers.${l}.mlp.experts.down.lora_a`, [4, 3, F]],
        [`layers.${l}.mlp.experts.down.lora_b`, [4, D, 3]],
      );
    }
    t.same(
      added.map((s) => [s.name, s.shape]),
      expected,
    );
    const gu = added.find((s) => s.name === 'layers.0.mlp.experts.gate_up.lora_a')!;
    t.ok(Math.abs(gu.std - 1 / Math.sqrt(3 * D)) < 1e-12, "A: PEFT's U(±1/√in) over the expert's input");
    t.throws(() => validateModelConfig({ ...base, lora: { rank: 2, alpha: 4, targets: ['experts.gate_up_proj'] } }), {
      message:
        /config\.lora\.targets\[0\] 'experts\.gate_up_proj' adapts the experts of a mixture of experts, but this model's MLP is dense/,
    });
    const layout = modelAddon().modelParamLayout;
    t.throws(
      () => layout({ ...validateModelConfig(base), lora: { rank: 2, alpha: 1, targets: ['experts.down_proj'] } }),
      { message: /config\.lora\.targets: 'experts\.down_proj' adapts the experts .*dense MLP/ },
      'the native side checks the same',
    );
  },
);

t.test(
  "initialisation: PEFT's kaiming_uniform(a = √5) for A (U(±1/√in)), zeros for B; the base as without LoRA",
  async (t) => {
    const c = validateModelConfig({
      ...base,
      width: 64,
      ffn: 100,
      lora: { rank: 16, alpha: 32, targets: ['q_proj', 'down_proj'] },
    });
    const s = ParamStore.fromConfig(c, 11);
    const plain = ParamStore.fromConfig({ ...base, width: 64, ffn: 100 }, 11);
    t.teardown(() => {
      s.dispose();
      plain.dispose();
    });
    for (const name of plain.names()) t.same(s.read(name), plain.read(name), `${name}: bit for bit as without LoRA`);
    for (const [name, inF] of [
      ['layers.0.attn.q.lora_a', 64],
      ['layers.1.mlp.down.lora_a', 100],
    ] as const) {
      const a = s.read(name);
      const bound = 1 / Math.sqrt(inF);
      let max = 0;
      let mean = 0;
      let sq = 0;
      for (const v of a) {
        max = Math.max(max, Math.abs(v));
        mean += v / a.length;
        sq += (v * v) / a.length;
      }
      t.ok(
        max <= bound && max > 0.97 * bound,
        `${name}: |a| ≤ 1/√${inF} = ${bound.toFixed(4)} and reaches it (max ${max.toFixed(4)})`,
      );
      t.ok(Math.abs(mean) < 0.1 * bound, `${name}: mean near 0 (${mean.toExponential(2)})`);
      t.ok(
        Math.abs(sq - (bound * bound) / 3) < 0.15 * ((bound * bound) / 3),
        `${name}: variance near b²/3 (${sq.toExponential(3)} vs ${((bound * bound) / 3).toExponential(3)})`,
      );
    }
    t.ok(
      s.read('layers.0.attn.q.lora_b').every((v) => v === 0),
      'B starts at zero',
    );
  },
);

t.test(
  'store: append initialises as a store made at once; truncate and freeze free their buffers; old models refuse',
  async (t) => {
    const c = validateModelConfig({ ...base, lora: { rank: 3, alpha: 6, targets: [...ALL] } });
    const whole = ParamStore.fromConfig(c, 21);
    const store = ParamStore.fromConfig(base, 21);
    t.teardown(() => {
      whole.dispose();
      store.dispose();
    });
    const n0 = store.names().length;
    const bytes0 = store.bytes;
    const model = Transformer.fromStore(base, store);
    const v0 = store.layoutVersion;
    store.append(parameterLayout(c).slice(n0));
    t.equal(store.layoutVersion, v0 + 1);
    for (const name of whole.names()) t.same(store.read(name), whole.read(name), `${name} equals the at-once store`);
    t.throws(
      () => model.logProbs({ tokens: Int32Array.from([1, 2, 3]) }),
      { message: /the store's parameters were added or removed since this model was made/ },
      'a model made before refuses',
    );
    t.throws(() => store.append([{ name: 'layers.0.attn.q.lora_a', shape: [2] }]), {
      message: /duplicate parameter name 'layers.0.attn.q.lora_a'/,
    });
    t.throws(
      () =>
        store.append([
          { name: 'x', shape: [2] },
          { name: 'x', shape: [3] },
        ]),
      { message: /duplicate parameter name 'x'/ },
    );
    t.equal(store.names().length, whole.names().length, 'a refused append adds nothing');
    const view = store.view('layers.1.mlp.down.lora_b', 'grad');
    store.truncate(n0);
    t.equal(view.length, 0, 'views of removed parameters are detached');
    t.equal(store.bytes, bytes0, 'truncate gives back every byte');
    t.same(
      store.names(),
      parameterLayout(base).map((s) => s.name),
    );
    t.throws(() => store.truncate(0), { message: /count must be in \[1, 22\]/ });
    model.dispose();

    const before = store.bytes;
    const gview = store.view('embed.weight', 'grad');
    store.freeze(['embed.weight', 'layers.0.attn.q.weight']);
    t.equal(gview.length, 0, 'the view of a freed gradient is detached');
    const n = 31 * 21 + 18 * 21;
    t.equal(store.bytes, before - 12 * n, 'gradient and both moments freed');
    t.same(
      store
        .info()
        .filter((p) => !p.trainable)
        .map((p) => p.name),
      ['embed.weight', 'layers.0.attn.q.weight'],
    );
    t.throws(() => store.read('embed.weight', 'grad'), { message: /is not trainable/ });
    t.throws(() => store.freeze(['nope']), { message: /unknown parameter 'nope'/ });
  },
);

t.test('addLora: the base is frozen, the outputs unchanged (B = 0), AdamW state only for the adapters', async (t) => {
  const plain = Transformer.create(base, 5);
  const batch = {
    tokens: Int32Array.from([3, 1, 4, 1, 5, 9, 2, 6]),
    targets: Int32Array.from([1, 4, 1, 5, 9, 2, 6, -1]),
  };
  const before = plain.logProbs(batch).logProbs;
  const baseBytes = plain.store.info().reduce((s, p) => s + 4 * p.numel, 0);
  const m = addLora(plain, { rank: 4, alpha: 8, targets: ['q_proj', 'v_proj', 'down_proj'] });
  t.teardown(() => m.dispose());
  t.ok(plain.disposed, 'the model passed in is disposed');
  t.same(m.logProbs(batch).logProbs, before, 'the same log-probs, bit for bit');
  const adapters = m.store.info().filter((p) => p.trainable);
  t.ok(adapters.length > 0 && adapters.every((p) => /\.lora_[ab]$/.test(p.name)), 'only the adapters are trainable');
  const adapterNumel = adapters.reduce((s, p) => s + p.numel, 0);
  t.equal(m.store.trainableNumel, adapterNumel);
  t.equal(adapterNumel, 2 * (4 * 21 + 18 * 4) + 2 * (4 * 21 + 6 * 4) + 2 * (4 * 13 + 21 * 4));
  t.equal(
    m.store.bytes,
    baseBytes + 16 * adapterNumel,
    'base values, plus value, gradient and two moments per adapter element',
  );
  t.throws(() => addLora(m, { rank: 2, alpha: 2, targets: ['q_proj'] }), { message: /config\.lora is already set/ });
  t.throws(() => addLora(Transformer.create(base, 1), { rank: 0, alpha: 2, targets: ['q_proj'] }), {
    message: /config\.lora\.rank/,
  });
});
