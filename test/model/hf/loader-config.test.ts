// config.json → our model config, for each supported architecture: the defaults of transformers'
// configuration_<arch>.py, and the details that decide whether the numbers match (issue 17).
import t from 'tap';

import { HfConfigError, parseHfConfig } from '../../../lib/model/index.js';

// Real configs (field values as published for openai/gpt-oss-20b, Qwen/Qwen3-0.6B,
// Qwen/Qwen2.5-0.5B-Instruct, meta-llama/Llama-3.2-1B), written out by hand.
const gptOss20b = {
  architectures: ['GptOssForCausalLM'],
  attention_bias: true,
  attention_dropout: 0.0,
  eos_token_id: 200002,
  experts_per_token: 4,
  head_dim: 64,
  hidden_act: 'silu',
  hidden_size: 2880,
  initial_context_length: 4096,
  initializer_range: 0.02,
  intermediate_size: 2880,
  layer_types: Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? 'sliding_attention' : 'full_attention')),
  max_position_embeddings: 131072,
  model_type: 'gpt_oss',
  num_attention_heads: 64,
  num_experts_per_tok: 4,
  num_hidden_layers: 24,
  num_key_value_heads: 8,
  num_local_experts: 32,
  output_router_logits: false,
  pad_token_id: 199999,
  quantization_config: {
    modules_to_not_convert: ['model.layers.*.self_attn', 'model.layers.*.mlp.router', 'model.embed_tokens', 'lm_head'],
    quant_method: 'mxfp4',
  },
  rms_norm_eps: 1e-5,
  rope_scaling: {
    beta_fast: 32.0,
    beta_slow: 1.0,
    factor: 32.0,
    original_max_position_embeddings: 4096,
    rope_type: 'yarn',
    truncate: false,
  },
  rope_theta: 150000,
  router_aux_loss_coef: 0.9,
  sliding_window: 128,
  swiglu_limit: 7.0,
  tie_word_embeddings: false,
  torch_dtype: 'bfloat16',
  use_cache: true,
  vocab_size: 201088,
};

const qwen3_06b = {
  architectures: ['Qwen3ForCausalLM'],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: 'silu',
  hidden_size: 1024,
  initializer_range: 0.02,
  intermediate_size: 3072,
  max_position_embeddings: 40960,
  max_window_layers: 28,
  model_type: 'qwen3',
  num_attention_heads: 16,
  num_hidden_layers: 28,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: null,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

const qwen25_05b = {
  architectures: ['Qwen2ForCausalLM'],
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  hidden_act: 'silu',
  hidden_size: 896,
  initializer_range: 0.02,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 21,
  model_type: 'qwen2',
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

const llama32_1b = {
  architectures: ['LlamaForCausalLM'],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 128000,
  eos_token_id: 128001,
  head_dim: 64,
  hidden_act: 'silu',
  hidden_size: 2048,
  initializer_range: 0.02,
  intermediate_size: 8192,
  max_position_embeddings: 131072,
  mlp_bias: false,
  model_type: 'llama',
  num_attention_heads: 32,
  num_hidden_layers: 16,
  num_key_value_heads: 8,
  pretraining_tp: 1,
  rms_norm_eps: 1e-5,
  rope_scaling: {
    factor: 32.0,
    high_freq_factor: 4.0,
    low_freq_factor: 1.0,
    original_max_position_embeddings: 8192,
    rope_type: 'llama3',
  },
  rope_theta: 500000.0,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  use_cache: true,
  vocab_size: 128256,
};

const err = (field: string, message?: RegExp) => ({ name: 'HfConfigError', field, ...(message ? { message } : {}) });

t.test('gpt-oss-20b', async (t) => {
  const { architecture, modelConfig: m, hfConfig } = parseHfConfig(gptOss20b);
  t.equal(architecture, 'GptOssForCausalLM');
  t.equal(hfConfig, gptOss20b, 'the raw JSON is kept');
  t.same(m, {
    bias: true,
    layers: 24,
    width: 2880,
    heads: 64,
    kvHeads: 8,
    headDim: 64,
    window: 128,
    vocab: 201088,
    context: 131072,
    ffn: 2880,
    ropeTheta: 150000,
    normEps: 1e-5,
    initStd: 0.02,
    tieEmbeddings: false,
    layerTypes: gptOss20b.layer_types.map((l) => (l === 'sliding_attention' ? 'sliding' : 'full')),
    ropeScaling: {
      type: 'yarn',
      factor: 32,
      originalContext: 4096,
      betaFast: 32,
      betaSlow: 1,
      truncate: false,
      attentionFactor: null,
    },
    lora: null,
    swiglu: 'clamped',
    qkvBias: true,
    oBias: true,
    mlpBias: true,
    sinks: true,
    qkNorm: false,
    tokenShift: false,
    experts: 32,
    expertsPerToken: 4,
  });
  t.equal(parseHfConfig(gptOss20b, { maxPositions: 4096 }).modelConfig.context, 4096, 'maxPositions caps the context');
  t.equal(
    parseHfConfig(gptOss20b, { maxPositions: 100 }).modelConfig.window,
    100,
    'a window longer than the context is capped to it',
  );
  t.equal(parseHfConfig(gptOss20b, { maxPositions: 4096 }).modelConfig.ropeScaling?.type, 'yarn');
  t.same(
    (parseHfConfig(gptOss20b, { maxPositions: 4096 }).modelConfig.ropeScaling as { originalContext: number })
      .originalContext,
    4096,
    'the cap does not move YaRN',
  );
  t.throws(() => parseHfConfig(gptOss20b, { maxPositions: 0 }), RangeError);
});

t.test('gpt-oss defaults (configuration_gpt_oss.py)', async (t) => {
  const { modelConfig: m } = parseHfConfig({ architectures: ['GptOssForCausalLM'] });
  t.match(m, {
    layers: 36,
    width: 2880,
    heads: 64,
    kvHeads: 8,
    headDim: 64,
    window: 128,
    vocab: 201088,
    context: 131072,
    ffn: 2880,
    ropeTheta: 150000,
    normEps: 1e-5,
    experts: 128,
    expertsPerToken: 4,
  });
  t.same(
    m.layerTypes,
    Array.from({ length: 36 }, (_, i) => (i % 2 === 0 ? 'sliding' : 'full')),
    'even layers slide',
  );
  t.same(
    m.ropeScaling,
    {
      type: 'yarn',
      factor: 32,
      originalContext: 4096,
      betaFast: 32,
      betaSlow: 1,
      truncate: false,
      attentionFactor: null,
    },
    'the default YaRN',
  );
  t.equal(m.qkvBias && m.oBias, true, 'attention_bias defaults to true');
  const noWindow = parseHfConfig({
    architectures: ['GptOssForCausalLM'],
    num_hidden_layers: 2,
    sliding_window: null,
  }).modelConfig;
  t.same([noWindow.layerTypes, noWindow.window], [['full', 'full'], 0], 'sliding_window null: no sliding layers');
  const noBias = parseHfConfig({ architectures: ['GptOssForCausalLM'], attention_bias: false }).modelConfig;
  t.same([noBias.qkvBias, noBias.oBias, noBias.mlpBias], [false, false, true], 'router and experts stay biased');
  t.equal(
    parseHfConfig({
      architectures: ['GptOssForCausalLM'],
      head_dim: null,
      hidden_size: 512,
      num_attention_heads: 4,
      num_key_value_heads: 2,
    }).modelConfig.headDim,
    128,
  );
});

t.test('gpt-oss SwiGLU and experts are checked', async (t) => {
  t.throws(
    () => parseHfConfig({ ...gptOss20b, swiglu_limit: 8 }),
    err('swiglu_limit', /fixed at limit 7, alpha 1\.702/),
  );
  t.throws(() => parseHfConfig({ ...gptOss20b, swiglu_alpha: 1.5 }), err('swiglu_alpha'));
  t.throws(() => parseHfConfig({ ...gptOss20b, num_experts_per_tok: 33 }), err('num_experts_per_tok'));
  t.throws(
    () => parseHfConfig({ ...gptOss20b, quantization_config: { quant_method: 'fp8' } }),
    err('quantization_config.quant_method', /'fp8' is not supported/),
  );
  t.throws(
    () => parseHfConfig({ ...gptOss20b, layer_types: ['sliding_attention'] }),
    err('layer_types', /1 entries, num_hidden_layers is 24/),
  );
  t.throws(
    () =>
      parseHfConfig({
        ...gptOss20b,
        layer_types: gptOss20b.layer_types.map((l, i) => (i === 3 ? 'chunked_attention' : l)),
      }),
    err('layer_types[3]'),
  );
});

t.test('Qwen3-0.6B', async (t) => {
  const { modelConfig: m } = parseHfConfig(qwen3_06b);
  t.same(m, {
    bias: false,
    layers: 28,
    width: 1024,
    heads: 16,
    kvHeads: 8,
    headDim: 128,
    window: 0,
    vocab: 151936,
    context: 40960,
    ffn: 3072,
    ropeTheta: 1000000,
    normEps: 1e-6,
    initStd: 0.02,
    tieEmbeddings: true,
    layerTypes: Array(28).fill('full'),
    ropeScaling: null,
    lora: null,
    swiglu: 'standard',
    qkvBias: false,
    oBias: false,
    mlpBias: false,
    sinks: false,
    qkNorm: true,
    tokenShift: false,
    experts: 0,
    expertsPerToken: 0,
  });
  t.equal(m.headDim * m.heads, 2048, 'head_dim × heads need not equal hidden_size (1024)');
});

t.test('Qwen3 defaults and sliding windows', async (t) => {
  const d = parseHfConfig({ architectures: ['Qwen3ForCausalLM'] }).modelConfig;
  t.match(d, {
    layers: 32,
    width: 4096,
    heads: 32,
    kvHeads: 32,
    headDim: 128,
    vocab: 151936,
    context: 32768,
    ffn: 22016,
    ropeTheta: 10000,
    normEps: 1e-6,
    tieEmbeddings: false,
    window: 0,
  });
  const ignored = parseHfConfig({
    ...qwen3_06b,
    sliding_window: 64,
    layer_types: Array(28).fill('sliding_attention'),
  }).modelConfig;
  t.same(
    [ignored.window, ignored.layerTypes?.includes('sliding')],
    [0, false],
    'sliding_window is ignored unless use_sliding_window',
  );
  const used = parseHfConfig({
    ...qwen3_06b,
    use_sliding_window: true,
    sliding_window: 64,
    max_window_layers: 20,
  }).modelConfig;
  t.equal(used.window, 64);
  t.same(
    used.layerTypes,
    Array.from({ length: 28 }, (_, i) => (i >= 20 ? 'sliding' : 'full')),
    'layers from max_window_layers on slide',
  );
  const explicit = parseHfConfig({
    ...qwen3_06b,
    num_hidden_layers: 3,
    use_sliding_window: true,
    sliding_window: 16,
    layer_types: ['sliding_attention', 'full_attention', 'sliding_attention'],
  }).modelConfig;
  t.same(explicit.layerTypes, ['sliding', 'full', 'sliding'], 'explicit layer_types win over max_window_layers');
  const biased = parseHfConfig({ ...qwen3_06b, attention_bias: true }).modelConfig;
  t.same([biased.qkvBias, biased.oBias, biased.mlpBias], [true, true, false]);
  const noKv = parseHfConfig({ ...qwen3_06b, num_key_value_heads: null }).modelConfig;
  t.equal(noKv.kvHeads, 16, 'num_key_value_heads null = num_attention_heads');
});

t.test('Qwen2.5-0.5B', async (t) => {
  const m = parseHfConfig(qwen25_05b).modelConfig;
  t.match(m, {
    layers: 24,
    width: 896,
    heads: 14,
    kvHeads: 2,
    headDim: 64,
    window: 0,
    context: 32768,
    ffn: 4864,
    ropeTheta: 1000000,
    tieEmbeddings: true,
    qkNorm: false,
    sinks: false,
    swiglu: 'standard',
  });
  t.same([m.qkvBias, m.oBias, m.mlpBias], [true, false, false], 'Qwen2: q/k/v biased, o not');
  t.same(m.layerTypes, Array(24).fill('full'), 'use_sliding_window false: sliding_window 32768 ignored');
  const sliding = parseHfConfig({ ...qwen25_05b, use_sliding_window: true }).modelConfig;
  t.same([sliding.window, sliding.layerTypes?.indexOf('sliding')], [32768, 21], 'max_window_layers 21');
  t.equal(parseHfConfig({ ...qwen25_05b, head_dim: 32 }).modelConfig.headDim, 32, 'an explicit head_dim is used');
  const d = parseHfConfig({ architectures: ['Qwen2ForCausalLM'] }).modelConfig;
  t.match(d, {
    layers: 32,
    width: 4096,
    heads: 32,
    kvHeads: 32,
    headDim: 128,
    ffn: 22016,
    context: 32768,
    ropeTheta: 10000,
    normEps: 1e-6,
  });
  const yarn = parseHfConfig({
    ...qwen25_05b,
    rope_scaling: { factor: 4.0, original_max_position_embeddings: 32768, type: 'yarn' },
  }).modelConfig;
  t.same(
    yarn.ropeScaling,
    {
      type: 'yarn',
      factor: 4,
      originalContext: 32768,
      betaFast: 32,
      betaSlow: 1,
      truncate: true,
      attentionFactor: null,
    },
    'legacy "type"; truncate absent = true',
  );
});

t.test('Llama 3.2 1B', async (t) => {
  const m = parseHfConfig(llama32_1b).modelConfig;
  t.match(m, {
    layers: 16,
    width: 2048,
    heads: 32,
    kvHeads: 8,
    headDim: 64,
    context: 131072,
    ffn: 8192,
    ropeTheta: 500000,
    normEps: 1e-5,
    tieEmbeddings: true,
    window: 0,
    qkNorm: false,
    sinks: false,
  });
  t.same(m.ropeScaling, { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 8192 });
  t.same([m.qkvBias, m.oBias, m.mlpBias], [false, false, false]);
  const biased = parseHfConfig({ ...llama32_1b, attention_bias: true, mlp_bias: true }).modelConfig;
  t.same([biased.qkvBias, biased.oBias, biased.mlpBias], [true, true, true]);
  const d = parseHfConfig({ architectures: ['LlamaForCausalLM'] }).modelConfig;
  t.match(d, {
    layers: 32,
    width: 4096,
    heads: 32,
    kvHeads: 32,
    headDim: 128,
    vocab: 32000,
    context: 2048,
    ffn: 11008,
    ropeTheta: 10000,
    normEps: 1e-6,
    tieEmbeddings: false,
    ropeScaling: null,
  });
  t.same(
    parseHfConfig({ ...llama32_1b, sliding_window: 16 }).modelConfig.layerTypes,
    Array(16).fill('full'),
    'Llama has no sliding layers',
  );
  t.throws(() => parseHfConfig({ ...llama32_1b, hidden_act: 'gelu' }), err('hidden_act'));
  t.throws(
    () => parseHfConfig({ ...llama32_1b, rope_scaling: { ...llama32_1b.rope_scaling, high_freq_factor: 0.5 } }),
    err('rope_scaling.high_freq_factor'),
  );
  t.throws(
    () => parseHfConfig({ ...llama32_1b, rope_scaling: { rope_type: 'llama3', factor: 8 } }),
    err('rope_scaling.low_freq_factor'),
  );
});

t.test('RoPE forms: rope_parameters (transformers 5), precedence, types', async (t) => {
  const base = { architectures: ['LlamaForCausalLM'], max_position_embeddings: 8192 };
  const rope = (extra: Record<string, unknown>) => parseHfConfig({ ...base, ...extra }).modelConfig;
  t.same(
    rope({ rope_parameters: { rope_type: 'default', rope_theta: 5e5 } }).ropeTheta,
    5e5,
    'rope_theta inside rope_parameters',
  );
  t.same(
    rope({ rope_theta: 1234, rope_parameters: { rope_type: 'default', rope_theta: 5e5 } }).ropeTheta,
    5e5,
    'the dict wins over the top-level field',
  );
  t.same(
    rope({ rope_theta: 1234, rope_parameters: { rope_type: 'default' } }).ropeTheta,
    1234,
    'top-level rope_theta fills the dict',
  );
  t.same(rope({ rope_parameters: { rope_type: 'linear', factor: 2, rope_theta: 1e4 } }).ropeScaling, {
    type: 'linear',
    factor: 2,
  });
  t.same(
    rope({ rope_scaling: { type: 'linear', factor: 4 }, rope_parameters: { rope_type: 'linear', factor: 2 } })
      .ropeScaling,
    { type: 'linear', factor: 4 },
    'a non-empty rope_scaling wins',
  );
  t.same(
    rope({ rope_scaling: {}, rope_parameters: { rope_type: 'linear', factor: 2 } }).ropeScaling,
    { type: 'linear', factor: 2 },
    'an empty rope_scaling does not',
  );
  const yarn = rope({
    rope_parameters: {
      rope_type: 'yarn',
      factor: 4,
      attention_factor: 1.25,
      beta_fast: 16,
      beta_slow: 2,
      truncate: false,
      mscale: 0.707,
      mscale_all_dim: 0.5,
      original_max_position_embeddings: 2048,
    },
  });
  t.same(yarn.ropeScaling, {
    type: 'yarn',
    factor: 4,
    originalContext: 2048,
    betaFast: 16,
    betaSlow: 2,
    truncate: false,
    attentionFactor: 1.25,
    mscale: 0.707,
    mscaleAllDim: 0.5,
  });
  t.same(
    rope({ rope_parameters: { rope_type: 'yarn', original_max_position_embeddings: 2048 } }).ropeScaling,
    {
      type: 'yarn',
      factor: 4,
      originalContext: 2048,
      betaFast: 32,
      betaSlow: 1,
      truncate: true,
      attentionFactor: null,
    },
    'factor absent = max_position_embeddings / original',
  );
  t.same(
    rope({ rope_parameters: { rope_type: 'yarn', factor: 2, beta_fast: 0, beta_slow: null } }).ropeScaling,
    {
      type: 'yarn',
      factor: 2,
      originalContext: 8192,
      betaFast: 32,
      betaSlow: 1,
      truncate: true,
      attentionFactor: null,
    },
    'beta_fast || 32, original = max_position_embeddings',
  );
  t.equal(
    (
      rope({
        original_max_position_embeddings: 1024,
        rope_scaling: { rope_type: 'yarn', factor: 8, original_max_position_embeddings: 2048 },
      }).ropeScaling as { originalContext: number }
    ).originalContext,
    1024,
    'a top-level original_max_position_embeddings has priority',
  );
  t.same(rope({ partial_rotary_factor: 1.0 }).ropeScaling, null);

  t.throws(
    () => rope({ rope_scaling: { rope_type: 'dynamic', factor: 2 } }),
    err('rope_scaling.rope_type', /"dynamic" is not supported \(supported: default, linear, llama3, yarn\)/),
  );
  t.throws(() => rope({ rope_parameters: { type: 'longrope' } }), err('rope_parameters.type'));
  t.throws(() => rope({ partial_rotary_factor: 0.5 }), err('partial_rotary_factor', /partial RoPE/));
  t.throws(
    () =>
      rope({
        rope_parameters: { full_attention: { rope_type: 'default' }, sliding_attention: { rope_type: 'default' } },
      }),
    err('rope_parameters.full_attention'),
  );
  t.throws(() => rope({ rope_scaling: { rope_type: 'linear' } }), err('rope_scaling.factor'));
  t.throws(
    () => rope({ rope_scaling: { rope_type: 'yarn', factor: 2, truncate: 'no' } }),
    err('rope_scaling.truncate'),
  );
  t.throws(() => rope({ rope_theta: 'big' }), err('rope_theta'));
  t.throws(() => rope({ rope_scaling: 3 }), err('rope_scaling'));
  t.throws(() => rope({ rope_parameters: 'x' }), err('rope_parameters'));
});

t.test('unknown architectures and bad fields fail naming the field', async (t) => {
  t.throws(
    () => parseHfConfig({ architectures: ['MistralForCausalLM'] }),
    err(
      'architectures[0]',
      /'MistralForCausalLM' is not supported \(supported: GptOssForCausalLM, Qwen3ForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM\)/,
    ),
  );
  t.throws(() => parseHfConfig({ model_type: 'llama' }), err('architectures'));
  t.throws(() => parseHfConfig([]), err('(root)'));
  t.throws(
    () => parseHfConfig({ ...llama32_1b, num_attention_heads: 'many' }),
    err('num_attention_heads', /got "many"/),
  );
  t.throws(() => parseHfConfig({ ...llama32_1b, hidden_size: -4 }), err('hidden_size'));
  t.throws(() => parseHfConfig({ ...llama32_1b, tie_word_embeddings: 'yes' }), err('tie_word_embeddings'));
  t.throws(() => parseHfConfig({ ...qwen3_06b, layer_types: [1, 2] }), err('layer_types[0]'));
  t.throws(() => parseHfConfig({ ...llama32_1b, num_key_value_heads: 5 }), err('num_key_value_heads', /must divide/));
  t.throws(() => parseHfConfig({ ...llama32_1b, head_dim: 63 }), err('head_dim', /even/));
  t.throws(
    () => parseHfConfig({ ...llama32_1b, quantization_config: { quant_method: 'mxfp4' } }),
    err('quantization_config.quant_method'),
  );
  const e = t.throws(() => parseHfConfig({ ...qwen3_06b, rms_norm_eps: 0 })) as unknown as HfConfigError;
  t.ok(e instanceof HfConfigError && e.message.startsWith('config.json: rms_norm_eps:'), e.message);
});
