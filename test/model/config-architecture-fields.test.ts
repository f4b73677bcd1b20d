// The model config's architecture fields (biases per projection, sinks, q/k norm, tied
// embeddings, per-layer types, experts, RoPE scaling): defaults that leave the built-in model's
// configs (and their layouts) unchanged, the legacy `bias` input, the layout of each feature and
// errors naming the field in the TypeScript and native checks.
import t from 'tap';

import { MODEL_PRESETS } from '../../lib/model/config.js';
import { isSlidingLayer, modelConfig, parameterLayout, validateModelConfig } from '../../lib/model/index.js';
import { modelAddon } from '../../lib/model/native.js';

const base = MODEL_PRESETS.tiny;
const small = {
  layers: 2,
  width: 12,
  heads: 4,
  kvHeads: 2,
  headDim: 6,
  window: 3,
  vocab: 17,
  context: 32,
  ffn: 5,
  ropeTheta: 1000,
  normEps: 1e-5,
  initStd: 0.1,
  swiglu: 'standard' as const,
};

t.test(
  'defaults describe the built-in model: a config without the architecture fields validates to the preset',
  async (t) => {
    const {
      bias: _bias,
      qkvBias: _q,
      oBias: _o,
      mlpBias: _m,
      sinks: _s,
      qkNorm: _n,
      tieEmbeddings: _t,
      layerTypes: _l,
      experts: _e,
      expertsPerToken: _k,
      ropeScaling: _r,
      ...old
    } = base;
    const c = validateModelConfig(old);
    t.same(c, base);
    t.same(c, {
      ...old,
      bias: false,
      qkvBias: false,
      oBias: false,
      mlpBias: false,
      sinks: true,
      qkNorm: false,
      tieEmbeddings: false,
      layerTypes: null,
      experts: 0,
      expertsPerToken: 0,
      ropeScaling: null,
    });
    t.not(c, old, 'a new object');
    // the layout of a config of today, written out
    const names = parameterLayout({ ...old, layers: 1, bias: true }).map((p) => p.name);
    t.same(names, [
      'embed.weight',
      'layers.0.attn_norm.weight',
      'layers.0.attn.q.weight',
      'layers.0.attn.q.bias',
      'layers.0.attn.k.weight',
      'layers.0.attn.k.bias',
      'layers.0.attn.v.weight',
      'layers.0.attn.v.bias',
      'layers.0.attn.o.weight',
      'layers.0.attn.o.bias',
      'layers.0.attn.sinks',
      'layers.0.mlp_norm.weight',
      'layers.0.mlp.gate_up.weight',
      'layers.0.mlp.gate_up.bias',
      'layers.0.mlp.down.weight',
      'layers.0.mlp.down.bias',
      'norm.weight',
      'lm_head.weight',
    ]);
  },
);

t.test('legacy bias sets the three flags; overrides replace them; contradictions are named', async (t) => {
  const on = validateModelConfig({ ...small, bias: true });
  t.match(on, { bias: true, qkvBias: true, oBias: true, mlpBias: true });
  const qwen2 = validateModelConfig({ ...small, qkvBias: true });
  t.match(qwen2, { bias: false, qkvBias: true, oBias: false, mlpBias: false });
  t.same(validateModelConfig(qwen2), qwen2, 'a validated config validates to itself');
  t.match(
    modelConfig(qwen2, { bias: true }),
    { qkvBias: true, oBias: true, mlpBias: true },
    'an override of bias sets all three',
  );
  t.match(modelConfig('tiny', { oBias: true }), { bias: false, qkvBias: false, oBias: true, mlpBias: false });
  t.throws(() => validateModelConfig({ ...small, bias: true, oBias: false }), {
    name: 'ModelConfigError',
    message: /config\.bias \(true\) contradicts oBias \(false\)/,
  });
  t.throws(() => modelAddon().modelParamLayout({ ...small, bias: true, mlpBias: false }), {
    name: 'RangeError',
    message: /config\.bias \(true\) contradicts config\.mlpBias/,
  });
  const names = parameterLayout(qwen2).map((p) => p.name);
  t.ok(
    names.includes('layers.1.attn.k.bias') &&
      !names.some((n) => n.includes('o.bias') || (n.includes('mlp') && n.endsWith('.bias'))),
    'q/k/v biases only',
  );
  const oOnly = parameterLayout({ ...small, oBias: true, mlpBias: true }).map((p) => p.name);
  t.ok(
    oOnly.includes('layers.0.attn.o.bias') &&
      oOnly.includes('layers.0.mlp.down.bias') &&
      !oOnly.includes('layers.0.attn.q.bias'),
  );
});

t.test('layout of q/k norm, no sinks, tied embeddings and experts', async (t) => {
  const qwen3 = parameterLayout({ ...small, qkNorm: true, sinks: false, tieEmbeddings: true });
  const by = new Map(qwen3.map((p) => [p.name, p]));
  t.same(by.get('layers.1.attn.q_norm.weight'), {
    name: 'layers.1.attn.q_norm.weight',
    shape: [6],
    init: 'ones',
    std: 0,
    decay: false,
  });
  t.same(by.get('layers.0.attn.k_norm.weight')?.shape, [6]);
  t.notOk(by.has('layers.0.attn.sinks'), 'no sinks');
  t.notOk(by.has('lm_head.weight'), 'tied: no head');
  t.equal(qwen3[qwen3.length - 1].name, 'norm.weight');
  const names = qwen3.map((p) => p.name);
  t.ok(
    names.indexOf('layers.0.attn.v.weight') < names.indexOf('layers.0.attn.q_norm.weight') &&
      names.indexOf('layers.0.attn.k_norm.weight') < names.indexOf('layers.0.attn.o.weight'),
  );

  const moe = parameterLayout({ ...small, experts: 5, expertsPerToken: 2, mlpBias: true });
  const m = new Map(moe.map((p) => [p.name, p]));
  t.notOk(m.has('layers.0.mlp.gate_up.weight'), 'no dense MLP');
  t.same(m.get('layers.0.mlp.router.weight'), {
    name: 'layers.0.mlp.router.weight',
    shape: [5, 12],
    init: 'normal',
    std: 0.1,
    decay: true,
  });
  t.same(m.get('layers.0.mlp.router.bias')?.shape, [5]);
  t.same(m.get('layers.1.mlp.experts.gate_up.weight')?.shape, [5, 10, 12]);
  t.same(m.get('layers.1.mlp.experts.gate_up.bias'), {
    name: 'layers.1.mlp.experts.gate_up.bias',
    shape: [5, 10],
    init: 'zeros',
    std: 0,
    decay: false,
  });
  t.same(m.get('layers.1.mlp.experts.down.weight')?.shape, [5, 12, 5]);
  t.equal(m.get('layers.1.mlp.experts.down.weight')?.std, 0.1 / 2, 'output projection std scaled by 1/sqrt(2 layers)');
  t.same(m.get('layers.1.mlp.experts.down.bias')?.shape, [5, 12]);
  const noBias = parameterLayout({ ...small, experts: 3, expertsPerToken: 3 }).map((p) => p.name);
  t.notOk(noBias.some((n) => n.endsWith('.bias')));
});

t.test('layer types, experts and RoPE scaling are validated and filled', async (t) => {
  const c = validateModelConfig({ ...small, layers: 3, layerTypes: ['full', 'sliding', 'sliding'] });
  t.same(
    [0, 1, 2].map((l) => isSlidingLayer(c, l)),
    [false, true, true],
  );
  const yarn = validateModelConfig({ ...small, ropeScaling: { type: 'yarn', factor: 32, originalContext: 4096 } });
  t.same(yarn.ropeScaling, {
    type: 'yarn',
    factor: 32,
    originalContext: 4096,
    betaFast: 32,
    betaSlow: 1,
    truncate: true,
    attentionFactor: null,
  });
  const gptOss = {
    type: 'yarn',
    factor: 32,
    originalContext: 4096,
    betaFast: 32,
    betaSlow: 1,
    truncate: false,
    attentionFactor: null,
  } as const;
  t.same(validateModelConfig({ ...small, ropeScaling: gptOss }).ropeScaling, gptOss);
  const llama = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 8192 } as const;
  t.same(validateModelConfig({ ...small, ropeScaling: llama }).ropeScaling, llama);
  t.ok(parameterLayout({ ...small, ropeScaling: llama }).length > 0, 'the native side accepts it');

  const cases: [Record<string, unknown>, RegExp][] = [
    [{ layerTypes: ['full'] }, /config\.layerTypes must have one entry per layer \(2\), got 1/],
    [{ layerTypes: ['full', 'local'] }, /config\.layerTypes\[1\] must be 'sliding' or 'full'/],
    [{ window: 0, layerTypes: ['full', 'sliding'] }, /config\.layerTypes\[1\] is 'sliding' but window is 0/],
    [{ layerTypes: 'sliding' }, /config\.layerTypes must be null or an array/],
    [{ experts: 4, expertsPerToken: 5 }, /config\.expertsPerToken must be in \[1, 4\], got 5/],
    [{ experts: 4 }, /config\.expertsPerToken must be in \[1, 4\], got 0/],
    [{ expertsPerToken: 2 }, /config\.expertsPerToken must be in \[0, 0\], got 2/],
    [{ experts: -1 }, /config\.experts must be in/],
    [{ sinks: 1 }, /config\.sinks must be a boolean/],
    [{ qkNorm: 'yes' }, /config\.qkNorm must be a boolean/],
    [{ ropeScaling: { type: 'dynamic', factor: 2 } }, /config\.ropeScaling\.type must be 'linear', 'llama3' or 'yarn'/],
    [{ ropeScaling: { type: 'linear', factor: 0 } }, /config\.ropeScaling\.factor must be a positive finite number/],
    [
      { ropeScaling: { type: 'linear', factor: 2, betaFast: 3 } },
      /config\.ropeScaling\.betaFast is not a field of linear RoPE scaling/,
    ],
    [
      { ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 4, highFreqFactor: 1, originalContext: 8192 } },
      /config\.ropeScaling\.highFreqFactor must be greater than lowFreqFactor/,
    ],
    [{ ropeScaling: { type: 'yarn', factor: 8 } }, /config\.ropeScaling\.originalContext must be an integer/],
    [
      { ropeScaling: { type: 'yarn', factor: 8, originalContext: 64, truncate: 'no' } },
      /config\.ropeScaling\.truncate must be a boolean/,
    ],
    [
      { ropeScaling: { type: 'yarn', factor: 8, originalContext: 64, attentionFactor: -1 } },
      /config\.ropeScaling\.attentionFactor must be a positive/,
    ],
  ];
  for (const [over, message] of cases) {
    t.throws(
      () => validateModelConfig({ ...small, ...over }),
      { name: 'ModelConfigError', message },
      JSON.stringify(over),
    );
  }
  const native = modelAddon();
  const nativeCases: [Record<string, unknown>, RegExp][] = [
    [{ layerTypes: ['full'] }, /config\.layerTypes must have one entry per layer \(2\), got 1/],
    [{ layerTypes: ['full', 'x'] }, /config\.layerTypes\[1\] must be one of/],
    [{ window: 0, layerTypes: ['sliding', 'full'] }, /config\.layerTypes\[0\] is 'sliding' but config\.window is 0/],
    [{ experts: 3, expertsPerToken: 4 }, /config\.expertsPerToken must be in \[1, 3\], got 4/],
    [{ expertsPerToken: 1 }, /config\.expertsPerToken must be 0 without experts/],
    [
      { ropeScaling: { type: 'yarn', factor: 8, originalContext: 64, betaSlow: 0 } },
      /config\.ropeScaling\.betaSlow must be a positive finite number/,
    ],
    [
      { ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 0 } },
      /config\.ropeScaling\.originalContext must be in \[1, 16777216\], got 0/,
    ],
    [
      { ropeScaling: { type: 'yarn', factor: 8, originalContext: 64, attentionFactor: 0 } },
      /config\.ropeScaling\.attentionFactor must be > 0 or null/,
    ],
    [{ ropeScaling: { type: 'ntk', factor: 8 } }, /config\.ropeScaling\.type must be one of/],
  ];
  for (const [over, message] of nativeCases) {
    t.throws(
      () => native.modelParamLayout({ ...small, ...over } as never),
      { message },
      `native ${JSON.stringify(over)}`,
    );
  }
});

t.test(
  'checkpoints keep the architecture fields and compare it field by field (arrays and objects by value)',
  async (t) => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { ParamStore, loadCheckpoint, saveCheckpoint } = await import('../../lib/model/index.js');
    const config = modelConfig({
      ...small,
      layers: 2,
      qkvBias: true,
      layerTypes: ['full', 'sliding'],
      ropeScaling: { type: 'linear', factor: 2 },
      experts: 3,
      expertsPerToken: 2,
    });
    const store = ParamStore.fromConfig(config, 3);
    const dir = mkdtempSync(join(tmpdir(), 'sinkflex-config-'));
    t.teardown(() => {
      store.dispose();
      rmSync(dir, { recursive: true, force: true });
    });
    const path = join(dir, 'a.safetensors');
    saveCheckpoint(path, { config, store });
    const ck = loadCheckpoint(path, { expectConfig: JSON.parse(JSON.stringify(config)) });
    t.same(ck.config, config);
    t.throws(() => loadCheckpoint(path, { expectConfig: { ...config, layerTypes: ['sliding', 'sliding'] } }), {
      name: 'CheckpointError',
      message: /config mismatch: layerTypes/,
    });
  },
);
