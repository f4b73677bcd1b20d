/**
 * A Hugging Face config.json → {@link ModelConfig}, the way transformers reads it:
 * - `head_dim` from the config (need not be hidden_size / heads; absent or null →
 *   hidden_size / num_attention_heads, except Qwen3 and gpt-oss whose classes default it to 128
 *   and 64); `num_key_value_heads` null → num_attention_heads;
 * - sliding layers: a layer slides when its `layer_types` entry is `'sliding_attention'` and the
 *   config has a `sliding_window` (it counts the token itself, as our `window` does). Qwen2/Qwen3
 *   drop `sliding_window` unless `use_sliding_window`, and derive absent `layer_types` as sliding
 *   from `max_window_layers` on; gpt-oss derives them as sliding on even layers; Llama has none.
 *   The window is capped at the context (a window as long as the context is full attention);
 * - RoPE per {@link resolveRope}; `context` = max_position_embeddings capped by `maxPositions`;
 * - biases: gpt-oss `attention_bias` on q/k/v/o, router and experts always biased; Qwen3
 *   `attention_bias` on q/k/v/o; Qwen2 q/k/v biased, o not; Llama `attention_bias` on q/k/v/o,
 *   `mlp_bias` on gate/up/down;
 * - gpt-oss: clamped SwiGLU (the native one is fixed at `swiglu_limit` 7 and alpha 1.702: other
 *   values are refused), `num_local_experts` / `num_experts_per_tok`, sinks; Qwen/Llama:
 *   `hidden_act` must be `silu` (standard SwiGLU);
 * - `quantization_config`: only gpt-oss's `mxfp4` is understood (its experts are dequantized).
 * @module
 */
import { HfConfigError } from './errors.js';
import {
  type HfArchitecture,
  type ParsedHfConfig,
  ROPE_DEFAULTS,
  architectureOf,
  parseConfigFields,
} from './config-schema.js';
import { type LayerType, type ModelConfig, ModelConfigError, validateModelConfig } from '../config.js';
import { resolveRope } from './rope.js';

export { SUPPORTED_ARCHITECTURES, type HfArchitecture, type ParsedHfConfig } from './config-schema.js';

/** Options of {@link parseHfConfig}. */
export interface HfConfigOptions {
  /** Cap on the context (RoPE tables hold context × headDim values): context = min(max_position_embeddings, maxPositions). */
  maxPositions?: number;
}

/** A parsed config. */
export interface HfConfigInfo {
  architecture: HfArchitecture;
  /** config.json as it was (the raw JSON object). */
  hfConfig: Record<string, unknown>;
  /** The fields read, with the architecture's defaults filled in. */
  resolved: ParsedHfConfig;
  /** The native model's config. */
  modelConfig: ModelConfig;
}

/** The clamped SwiGLU the native kernels implement (gpt-oss's). */
export const CLAMPED_SWIGLU = Object.freeze({ limit: 7, alpha: 1.702 });

/** Parses a config.json object; throws {@link HfConfigError} naming the field. */
export function parseHfConfig(json: unknown, options: HfConfigOptions = {}): HfConfigInfo {
  const architecture = architectureOf(json);
  const hfConfig = json as Record<string, unknown>;
  const c = parseConfigFields(architecture, hfConfig);
  const { maxPositions } = options;
  if (maxPositions !== undefined && (!Number.isSafeInteger(maxPositions) || maxPositions < 1)) {
    throw new RangeError(`maxPositions must be a positive integer, got ${maxPositions}`);
  }
  const context = Math.min(c.max_position_embeddings, maxPositions ?? Infinity);
  const heads = c.num_attention_heads;
  const kvHeads = c.num_key_value_heads ?? heads;
  if (heads % kvHeads !== 0)
    throw new HfConfigError('num_key_value_heads', `(${kvHeads}) must divide num_attention_heads (${heads})`);
  const headDim = c.head_dim ?? Math.floor(c.hidden_size / heads);
  if (headDim < 2 || headDim % 2 !== 0)
    throw new HfConfigError(
      c.head_dim == null ? 'hidden_size' : 'head_dim',
      `gives head_dim ${headDim}; RoPE needs an even head_dim ≥ 2`,
    );

  const quant = c.quantization_config;
  if (
    quant !== undefined &&
    quant !== null &&
    !(architecture === 'GptOssForCausalLM' && quant.quant_method === 'mxfp4')
  ) {
    throw new HfConfigError(
      'quantization_config.quant_method',
      `'${quant.quant_method}' is not supported (only gpt-oss's 'mxfp4' experts are)`,
    );
  }

  const { layerTypes, window } = slidingLayers(architecture, c, context);
  const rope = resolveRope(c, ROPE_DEFAULTS[architecture]);
  const common = {
    layers: c.num_hidden_layers,
    width: c.hidden_size,
    heads,
    kvHeads,
    headDim,
    window,
    vocab: c.vocab_size,
    context,
    ffn: c.intermediate_size,
    ropeTheta: rope.ropeTheta,
    normEps: c.rms_norm_eps,
    initStd: c.initializer_range,
    tieEmbeddings: c.tie_word_embeddings,
    layerTypes,
    ropeScaling: rope.ropeScaling,
    tokenShift: false, // the built-in model's alone: no HF architecture has one
  };

  let modelConfig: Omit<ModelConfig, 'bias' | 'lora'>;
  if (architecture === 'GptOssForCausalLM') {
    const g = c as ParsedHfConfig<'GptOssForCausalLM'>;
    if (g.swiglu_limit !== CLAMPED_SWIGLU.limit)
      throw new HfConfigError(
        'swiglu_limit',
        `${g.swiglu_limit} is not supported: the native clamped SwiGLU is fixed at limit ${CLAMPED_SWIGLU.limit}, alpha ${CLAMPED_SWIGLU.alpha}`,
      );
    if (g.swiglu_alpha !== CLAMPED_SWIGLU.alpha)
      throw new HfConfigError(
        'swiglu_alpha',
        `${g.swiglu_alpha} is not supported: the native clamped SwiGLU is fixed at limit ${CLAMPED_SWIGLU.limit}, alpha ${CLAMPED_SWIGLU.alpha}`,
      );
    if (g.num_experts_per_tok > g.num_local_experts)
      throw new HfConfigError(
        'num_experts_per_tok',
        `(${g.num_experts_per_tok}) must not exceed num_local_experts (${g.num_local_experts})`,
      );
    modelConfig = {
      ...common,
      swiglu: 'clamped',
      qkvBias: g.attention_bias,
      oBias: g.attention_bias,
      mlpBias: true,
      sinks: true,
      qkNorm: false,
      experts: g.num_local_experts,
      expertsPerToken: g.num_experts_per_tok,
    };
  } else {
    if (c.hidden_act !== 'silu')
      throw new HfConfigError('hidden_act', `'${c.hidden_act}' is not supported (the MLP is SwiGLU: 'silu')`);
    const bias =
      architecture === 'Qwen2ForCausalLM'
        ? { qkvBias: true, oBias: false, mlpBias: false }
        : architecture === 'Qwen3ForCausalLM'
          ? {
              qkvBias: (c as ParsedHfConfig<'Qwen3ForCausalLM'>).attention_bias,
              oBias: (c as ParsedHfConfig<'Qwen3ForCausalLM'>).attention_bias,
              mlpBias: false,
            }
          : {
              qkvBias: (c as ParsedHfConfig<'LlamaForCausalLM'>).attention_bias,
              oBias: (c as ParsedHfConfig<'LlamaForCausalLM'>).attention_bias,
              mlpBias: (c as ParsedHfConfig<'LlamaForCausalLM'>).mlp_bias,
            };
    modelConfig = {
      ...common,
      swiglu: 'standard',
      ...bias,
      sinks: false,
      qkNorm: architecture === 'Qwen3ForCausalLM',
      experts: 0,
      expertsPerToken: 0,
    };
  }
  return { architecture, hfConfig, resolved: c, modelConfig: asModelConfig(modelConfig) };
}

/** The native model's config, validated (a field out of the model's ranges names its config.json source). */
function asModelConfig(c: Omit<ModelConfig, 'bias' | 'lora'>): ModelConfig {
  try {
    return validateModelConfig(c);
  } catch (e) {
    if (!(e instanceof ModelConfigError)) throw e;
    const source = MODEL_FIELD_SOURCES[e.field.split(/[.[]/)[0]] ?? e.field;
    throw new HfConfigError(source, `gives a model the native transformer cannot run: ${e.message}`);
  }
}

/** The config.json field each model-config field comes from (for error messages). */
const MODEL_FIELD_SOURCES: Readonly<Record<string, string>> = {
  layers: 'num_hidden_layers',
  width: 'hidden_size',
  heads: 'num_attention_heads',
  kvHeads: 'num_key_value_heads',
  headDim: 'head_dim',
  window: 'sliding_window',
  vocab: 'vocab_size',
  context: 'max_position_embeddings',
  ffn: 'intermediate_size',
  ropeTheta: 'rope_theta',
  normEps: 'rms_norm_eps',
  initStd: 'initializer_range',
  layerTypes: 'layer_types',
  experts: 'num_local_experts',
  expertsPerToken: 'num_experts_per_tok',
  ropeScaling: 'rope_scaling',
};

/** Layer types and window of a config (see the module notes). */
function slidingLayers(
  architecture: HfArchitecture,
  c: ParsedHfConfig,
  context: number,
): { layerTypes: LayerType[]; window: number } {
  const n = c.num_hidden_layers;
  if (architecture === 'LlamaForCausalLM') return { layerTypes: Array<LayerType>(n).fill('full'), window: 0 };
  let slidingWindow: number | null;
  let hfTypes: string[];
  if (architecture === 'GptOssForCausalLM') {
    const g = c as ParsedHfConfig<'GptOssForCausalLM'>;
    slidingWindow = g.sliding_window;
    hfTypes =
      g.layer_types ?? Array.from({ length: n }, (_, i) => (i % 2 === 0 ? 'sliding_attention' : 'full_attention'));
  } else {
    const q = c as ParsedHfConfig<'Qwen3ForCausalLM'>;
    slidingWindow = q.use_sliding_window ? q.sliding_window : null;
    hfTypes =
      q.layer_types ??
      Array.from({ length: n }, (_, i) =>
        slidingWindow !== null && i >= q.max_window_layers ? 'sliding_attention' : 'full_attention',
      );
  }
  if (hfTypes.length !== n)
    throw new HfConfigError('layer_types', `has ${hfTypes.length} entries, num_hidden_layers is ${n}`);
  const layerTypes = hfTypes.map((t, i): LayerType => {
    if (t !== 'sliding_attention' && t !== 'full_attention')
      throw new HfConfigError(
        `layer_types[${i}]`,
        `'${t}' is not supported (supported: sliding_attention, full_attention)`,
      );
    return t === 'sliding_attention' && slidingWindow !== null ? 'sliding' : 'full';
  });
  const window = layerTypes.includes('sliding') && slidingWindow !== null ? Math.min(slidingWindow, context) : 0;
  return { layerTypes, window };
}
