/**
 * The configuration of the transformer as data (the built-in gpt-oss-style policy and the
 * pretrained families it runs), its presets and validation.
 * @module
 */
import {
  LORA_EXPERT_TARGETS,
  LORA_MLP_TARGETS,
  LORA_TARGETS,
  type LoraConfig,
  type LoraConfigInput,
  type LoraTarget,
} from './lora/settings.js';
import { type LayoutParamSpec, modelAddon } from './native.js';
import type { SwiGluVariant } from './ops.js';

/** The attention of one layer: a sliding window of `window` keys, or every earlier key. */
export type LayerType = 'sliding' | 'full';

/** Linear RoPE scaling (transformers' `rope_type: 'linear'`): every inverse frequency divided by `factor`. */
export interface LinearRopeScaling {
  type: 'linear';
  factor: number;
}

/** Llama 3.1 RoPE scaling (`rope_type: 'llama3'`). */
export interface Llama3RopeScaling {
  type: 'llama3';
  factor: number;
  lowFreqFactor: number;
  /** Greater than `lowFreqFactor`. */
  highFreqFactor: number;
  /** `original_max_position_embeddings`. */
  originalContext: number;
}

/** YaRN RoPE scaling (`rope_type: 'yarn'`, gpt-oss), with its attention factor on cos and sin. */
export interface YarnRopeScaling {
  type: 'yarn';
  factor: number;
  /** `original_max_position_embeddings`. */
  originalContext: number;
  /** Default 32 (transformers' default). */
  betaFast: number;
  /** Default 1. */
  betaSlow: number;
  /** Round the correction range to whole dimensions (transformers: absent means true; gpt-oss sets false). */
  truncate: boolean;
  /** Multiplies cos and sin; null: 0.1 ln(factor) + 1, or the mscale / mscaleAllDim ratio when both are set. */
  attentionFactor: number | null;
  mscale?: number;
  mscaleAllDim?: number;
}

/** RoPE frequency scaling; the native RopeTable computes it as transformers' modeling_rope_utils does. */
export type RopeScaling = LinearRopeScaling | Llama3RopeScaling | YarnRopeScaling;

/**
 * Architecture of the decoder-only transformer: the built-in gpt-oss-style policy and the
 * pretrained families it runs (gpt-oss, Qwen3, Qwen2, Llama) are configurations of it.
 */
export interface ModelConfig {
  /** Transformer blocks. */
  layers: number;
  /** Residual stream width (d_model). */
  width: number;
  /** Query heads. */
  heads: number;
  /** Key/value heads (grouped-query attention); divides `heads`. */
  kvHeads: number;
  /** Size of one head; even (RoPE). Query width is heads * headDim (need not equal `width`). */
  headDim: number;
  /** Keys (including the current one) a sliding layer sees; 0 = no sliding layers. */
  window: number;
  /** Vocabulary size (the tokenizer's). */
  vocab: number;
  /** Maximum sequence length (positions). */
  context: number;
  /** Hidden size of the SwiGLU MLP (of each expert when `experts > 0`). */
  ffn: number;
  /** RoPE base. */
  ropeTheta: number;
  /** RMSNorm epsilon. */
  normEps: number;
  /** Standard deviation of the normal initialisation of matrices. */
  initStd: number;
  /** MLP gate: gpt-oss's clamped SwiGLU or the standard one. */
  swiglu: SwiGluVariant;
  /**
   * Legacy: true when q/k/v, o and the MLP all have biases. As input it sets the three flags
   * below that are not given (and must agree with them when they are).
   */
  bias: boolean;
  /** Biases on the q, k, v projections (gpt-oss, Qwen2). */
  qkvBias: boolean;
  /** Bias on the attention output projection (gpt-oss). */
  oBias: boolean;
  /** Biases on the MLP (dense: gate_up and down; MoE: router and experts). */
  mlpBias: boolean;
  /** A learned sink logit per head (gpt-oss); false: plain softmax attention. */
  sinks: boolean;
  /** RMSNorm (weight [headDim]) over every q and k head after the projection, before RoPE (Qwen3). */
  qkNorm: boolean;
  /** The LM head is `embed.weight` (no `lm_head.weight`). */
  tieEmbeddings: boolean;
  /** One entry per layer, or null: the built-in rule (even layers slide when `window > 0`). */
  layerTypes: LayerType[] | null;
  /** 0: dense SwiGLU MLP; > 0: a mixture of this many SwiGLU experts of hidden size `ffn`. */
  experts: number;
  /** Experts per token (top-k), in [1, experts] with experts, else 0. */
  expertsPerToken: number;
  /** RoPE frequency scaling, or null (plain RoPE with `ropeTheta`). */
  ropeScaling: RopeScaling | null;
  /**
   * Low-rank adapters (LoRA) on some projections of every layer, or null (none). Their
   * parameters follow the base ones in the layout ({@link parameterLayout}); the base is then
   * usually frozen ({@link ParamStore.fromSpecs} with `trainable: false`). CPU only for now.
   */
  lora: LoraConfig | null;
  /**
   * Token shift (the built-in model only): each position's input also gets
   * `token_shift.weight` [width, width] times the previous token's embedding (token 0's at a
   * sequence's first position; a session keeps its last processed token for decoding). Every
   * position then knows the token before it without an attention layer, so one attention layer
   * can find "the token after an earlier occurrence of mine" and copy it (an induction head),
   * which a small model otherwise forms only after a long plateau. Pretrained families have none;
   * not with `lora`. Default false.
   */
  tokenShift: boolean;
}

/** The fields a config may leave out: {@link validateModelConfig} fills their defaults. */
export type OptionalModelConfigField =
  | 'bias'
  | 'qkvBias'
  | 'oBias'
  | 'mlpBias'
  | 'sinks'
  | 'qkNorm'
  | 'tieEmbeddings'
  | 'layerTypes'
  | 'experts'
  | 'expertsPerToken'
  | 'ropeScaling'
  | 'lora'
  | 'tokenShift';

/** A config as input: the fields of {@link OptionalModelConfigField} may be left out (defaults: the built-in model's). */
export type ModelConfigInput = Omit<ModelConfig, OptionalModelConfigField | 'lora'> &
  Partial<Pick<ModelConfig, Exclude<OptionalModelConfigField, 'lora'>>> & { lora?: LoraConfigInput | null };

/** Names of the presets. */
export type ModelPreset = 'tiny' | 'small';

/**
 * The values of the {@link OptionalModelConfigField} fields for the built-in gpt-oss-style model
 * (learned sinks, no biases, no q/k norm, untied head, even layers sliding, dense MLP, plain
 * RoPE, no adapters): the presets' and, field by field, {@link validateModelConfig}'s defaults.
 */
const BUILTIN_ARCHITECTURE: Readonly<Pick<ModelConfig, OptionalModelConfigField>> = Object.freeze({
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
  lora: null,
  tokenShift: false,
});

/**
 * `tiny`: 2 layers, width 128, 0.66M parameters (0.52M besides the embedding) — trains on a
 * laptop CPU in minutes. `small`: 8 layers, width 512, 32.5M parameters.
 */
export const MODEL_PRESETS: Readonly<Record<ModelPreset, Readonly<ModelConfig>>> = Object.freeze({
  tiny: Object.freeze({
    layers: 2,
    width: 128,
    heads: 4,
    kvHeads: 2,
    headDim: 32,
    window: 64,
    vocab: 1024,
    context: 1024,
    ffn: 384,
    ropeTheta: 10000,
    normEps: 1e-5,
    initStd: 0.02,
    swiglu: 'clamped',
    ...BUILTIN_ARCHITECTURE,
  }),
  small: Object.freeze({
    layers: 8,
    width: 512,
    heads: 8,
    kvHeads: 2,
    headDim: 64,
    window: 128,
    vocab: 8192,
    context: 4096,
    ffn: 1536,
    ropeTheta: 150000,
    normEps: 1e-5,
    initStd: 0.02,
    swiglu: 'clamped',
    ...BUILTIN_ARCHITECTURE,
  }),
});

/** Thrown for an invalid model configuration; the message names the field. */
export class ModelConfigError extends RangeError {
  constructor(
    /** The offending field, e.g. `'kvHeads'`. */
    readonly field: string,
    message: string,
  ) {
    super(`config.${field} ${message}`);
    this.name = 'ModelConfigError';
  }
}

const INT_FIELDS: readonly [keyof ModelConfig, number, number][] = [
  ['layers', 1, 1024],
  ['width', 1, 65536],
  ['heads', 1, 1024],
  ['kvHeads', 1, 1024],
  ['headDim', 2, 1024],
  ['window', 0, 2 ** 24],
  ['vocab', 2, 2 ** 24],
  ['context', 1, 2 ** 24],
  ['ffn', 1, 2 ** 18],
];

const KNOWN_FIELDS: ReadonlySet<string> = new Set([
  ...INT_FIELDS.map(([k]) => k),
  'ropeTheta',
  'normEps',
  'initStd',
  'swiglu',
  'bias',
  'qkvBias',
  'oBias',
  'mlpBias',
  'sinks',
  'qkNorm',
  'tieEmbeddings',
  'layerTypes',
  'experts',
  'expertsPerToken',
  'ropeScaling',
  'lora',
  'tokenShift',
]);

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A validated copy of `ropeScaling` (null stays null); errors name `ropeScaling.<field>`. */
function validateRopeScaling(value: unknown): RopeScaling | null {
  if (value === null || value === undefined) return null;
  if (!isRecord(value))
    throw new ModelConfigError('ropeScaling', `must be null or an object, got ${JSON.stringify(value)}`);
  const fail = (field: string, what: string): never => {
    throw new ModelConfigError(`ropeScaling.${field}`, `must be ${what}, got ${JSON.stringify(value[field])}`);
  };
  const allowed: Record<string, readonly string[]> = {
    linear: ['type', 'factor'],
    llama3: ['type', 'factor', 'lowFreqFactor', 'highFreqFactor', 'originalContext'],
    yarn: [
      'type',
      'factor',
      'originalContext',
      'betaFast',
      'betaSlow',
      'truncate',
      'attentionFactor',
      'mscale',
      'mscaleAllDim',
    ],
  };
  const type = value.type;
  if (type !== 'linear' && type !== 'llama3' && type !== 'yarn') return fail('type', `'linear', 'llama3' or 'yarn'`);
  for (const k of Object.keys(value))
    if (!allowed[type].includes(k))
      throw new ModelConfigError(`ropeScaling.${k}`, `is not a field of ${type} RoPE scaling`);
  const positive = (field: string, def?: number): number => {
    const v = value[field] ?? def;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) return fail(field, 'a positive finite number');
    return v;
  };
  const context = (): number => {
    const v = value.originalContext;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 2 ** 24)
      return fail('originalContext', 'an integer in [1, 16777216]');
    return v;
  };
  const factor = positive('factor');
  if (type === 'linear') return { type, factor };
  if (type === 'llama3') {
    const lowFreqFactor = positive('lowFreqFactor');
    const highFreqFactor = positive('highFreqFactor');
    if (!(highFreqFactor > lowFreqFactor)) fail('highFreqFactor', `greater than lowFreqFactor (${lowFreqFactor})`);
    return { type, factor, lowFreqFactor, highFreqFactor, originalContext: context() };
  }
  const truncate = value.truncate ?? true;
  if (typeof truncate !== 'boolean') fail('truncate', 'a boolean');
  const af = value.attentionFactor ?? null;
  const out: YarnRopeScaling = {
    type,
    factor,
    originalContext: context(),
    betaFast: positive('betaFast', 32),
    betaSlow: positive('betaSlow', 1),
    truncate: truncate as boolean,
    attentionFactor: af === null ? null : positive('attentionFactor'),
  };
  for (const field of ['mscale', 'mscaleAllDim'] as const) {
    const v = value[field];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) fail(field, 'a finite number >= 0');
    out[field] = v as number;
  }
  return out;
}

/** A validated copy of `lora` (null stays null); errors name `lora.<field>`. */
function validateLora(value: unknown, experts: number): LoraConfig | null {
  if (value === null || value === undefined) return null;
  if (!isRecord(value))
    throw new ModelConfigError(
      'lora',
      `must be null or an object { rank, alpha, targets, rslora? }, got ${JSON.stringify(value)}`,
    );
  for (const k of Object.keys(value)) {
    if (!['rank', 'alpha', 'targets', 'rslora'].includes(k))
      throw new ModelConfigError(`lora.${k}`, 'is not a LoRA setting (rank, alpha, targets, rslora)');
  }
  const rank = value.rank;
  if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 1 || rank > 65536) {
    throw new ModelConfigError('lora.rank', `must be an integer in [1, 65536], got ${JSON.stringify(rank)}`);
  }
  const alpha = value.alpha;
  if (typeof alpha !== 'number' || !Number.isFinite(alpha))
    throw new ModelConfigError('lora.alpha', `must be a finite number, got ${JSON.stringify(alpha)}`);
  const rslora = value.rslora ?? false;
  if (typeof rslora !== 'boolean')
    throw new ModelConfigError('lora.rslora', `must be a boolean, got ${JSON.stringify(rslora)}`);
  const targets = value.targets;
  if (!Array.isArray(targets) || targets.length === 0) {
    throw new ModelConfigError(
      'lora.targets',
      `must be a non-empty array of module names (${LORA_TARGETS.join(', ')}), got ${JSON.stringify(targets)}`,
    );
  }
  const seen = new Set<LoraTarget>();
  targets.forEach((t: unknown, i) => {
    const field = `lora.targets[${i}]`;
    if (typeof t !== 'string' || !(LORA_TARGETS as readonly string[]).includes(t)) {
      const why =
        t === 'embed_tokens' || t === 'lm_head'
          ? ' (LoRA on the embedding or the LM head is not supported)'
          : /router/.test(String(t))
            ? ' (LoRA on the router is not supported)'
            : /expert/.test(String(t))
              ? " (the experts are named 'experts.gate_up_proj' and 'experts.down_proj')"
              : '';
      throw new ModelConfigError(
        field,
        `${JSON.stringify(t)} is not a LoRA target module${why}; the targets are ${LORA_TARGETS.join(', ')}`,
      );
    }
    const target = t as LoraTarget;
    if (seen.has(target)) throw new ModelConfigError(field, `'${target}' is listed twice`);
    if (experts > 0 && LORA_MLP_TARGETS.includes(target)) {
      throw new ModelConfigError(
        field,
        `'${target}' is an MLP projection, but the MLP is a mixture of experts (experts = ${experts}): target the attention projections (q_proj, k_proj, v_proj, o_proj) or the experts (experts.gate_up_proj, experts.down_proj)`,
      );
    }
    if (experts === 0 && LORA_EXPERT_TARGETS.includes(target)) {
      throw new ModelConfigError(
        field,
        `'${target}' adapts the experts of a mixture of experts, but this model's MLP is dense (experts = 0): target gate_proj, up_proj, down_proj`,
      );
    }
    seen.add(target);
  });
  return { rank, alpha, targets: LORA_TARGETS.filter((t) => seen.has(t)), rslora };
}

/**
 * Checks every field of a config (types, ranges, heads divisible by kvHeads, even headDim,
 * window <= context, layer types, experts, RoPE scaling, LoRA, token shift) and returns a new config with the
 * optional fields filled in (the defaults describe the built-in model, so a config without
 * them is the same model as before); throws {@link ModelConfigError} naming the field.
 */
export function validateModelConfig(value: unknown): ModelConfig {
  if (!isRecord(value)) throw new TypeError('config must be an object');
  const c = value;
  for (const k of Object.keys(c))
    if (!KNOWN_FIELDS.has(k)) throw new ModelConfigError(k, 'is not a model config field');
  for (const [key, min, max] of INT_FIELDS) {
    const v = c[key];
    if (typeof v !== 'number' || !Number.isInteger(v))
      throw new ModelConfigError(key, `must be an integer, got ${JSON.stringify(v)}`);
    if (v < min || v > max) throw new ModelConfigError(key, `must be in [${min}, ${max}], got ${v}`);
  }
  const num = (key: string, ok: (v: number) => boolean, what: string): void => {
    const v = c[key];
    if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v))
      throw new ModelConfigError(key, `must be ${what}, got ${JSON.stringify(v)}`);
  };
  num('ropeTheta', (v) => v > 1, 'a number > 1');
  num('normEps', (v) => v > 0 && v < 1, 'in (0, 1)');
  num('initStd', (v) => v > 0 && v < 10, 'in (0, 10)');
  if (c.swiglu !== 'standard' && c.swiglu !== 'clamped')
    throw new ModelConfigError('swiglu', `must be 'standard' or 'clamped', got ${JSON.stringify(c.swiglu)}`);
  const bool = (key: string, def: boolean): boolean => {
    const v = c[key];
    if (v === undefined) return def;
    if (typeof v !== 'boolean') throw new ModelConfigError(key, `must be a boolean, got ${JSON.stringify(v)}`);
    return v;
  };
  const bias = bool('bias', BUILTIN_ARCHITECTURE.bias);
  const qkvBias = bool('qkvBias', bias);
  const oBias = bool('oBias', bias);
  const mlpBias = bool('mlpBias', bias);
  if (c.bias !== undefined && bias !== (qkvBias && oBias && mlpBias)) {
    const which = qkvBias !== bias ? 'qkvBias' : oBias !== bias ? 'oBias' : 'mlpBias';
    throw new ModelConfigError(
      'bias',
      `(${bias}) contradicts ${which} (${!bias}); give either bias or the three flags`,
    );
  }
  const base = c as unknown as ModelConfig;
  const layers = base.layers;
  let layerTypes: LayerType[] | null = null;
  if (c.layerTypes !== undefined && c.layerTypes !== null) {
    if (!Array.isArray(c.layerTypes))
      throw new ModelConfigError(
        'layerTypes',
        `must be null or an array of 'sliding' / 'full', got ${JSON.stringify(c.layerTypes)}`,
      );
    if (c.layerTypes.length !== layers)
      throw new ModelConfigError('layerTypes', `must have one entry per layer (${layers}), got ${c.layerTypes.length}`);
    layerTypes = (c.layerTypes as unknown[]).map((v, i) => {
      if (v !== 'sliding' && v !== 'full')
        throw new ModelConfigError(`layerTypes[${i}]`, `must be 'sliding' or 'full', got ${JSON.stringify(v)}`);
      if (v === 'sliding' && base.window < 1)
        throw new ModelConfigError(`layerTypes[${i}]`, `is 'sliding' but window is 0`);
      return v;
    });
  }
  const int = (key: string, min: number, max: number): number => {
    const v = c[key] ?? 0;
    if (typeof v !== 'number' || !Number.isInteger(v))
      throw new ModelConfigError(key, `must be an integer, got ${JSON.stringify(v)}`);
    if (v < min || v > max) throw new ModelConfigError(key, `must be in [${min}, ${max}], got ${v}`);
    return v;
  };
  const experts = int('experts', 0, 65536);
  const expertsPerToken = experts === 0 ? int('expertsPerToken', 0, 0) : int('expertsPerToken', 1, experts);
  const cfg: ModelConfig = {
    layers,
    width: base.width,
    heads: base.heads,
    kvHeads: base.kvHeads,
    headDim: base.headDim,
    window: base.window,
    vocab: base.vocab,
    context: base.context,
    ffn: base.ffn,
    ropeTheta: base.ropeTheta,
    normEps: base.normEps,
    initStd: base.initStd,
    swiglu: base.swiglu,
    bias: qkvBias && oBias && mlpBias,
    qkvBias,
    oBias,
    mlpBias,
    sinks: bool('sinks', BUILTIN_ARCHITECTURE.sinks),
    qkNorm: bool('qkNorm', BUILTIN_ARCHITECTURE.qkNorm),
    tieEmbeddings: bool('tieEmbeddings', BUILTIN_ARCHITECTURE.tieEmbeddings),
    layerTypes,
    experts,
    expertsPerToken,
    ropeScaling: validateRopeScaling(c.ropeScaling),
    lora: validateLora(c.lora, experts),
    tokenShift: bool('tokenShift', BUILTIN_ARCHITECTURE.tokenShift),
  };
  if (cfg.tokenShift && cfg.lora !== null)
    throw new ModelConfigError(
      'tokenShift',
      'cannot be combined with lora (LoRA adapts pretrained models, which have no token shift)',
    );
  if (cfg.kvHeads > cfg.heads || cfg.heads % cfg.kvHeads !== 0)
    throw new ModelConfigError('kvHeads', `(${cfg.kvHeads}) must divide heads (${cfg.heads})`);
  if (cfg.headDim % 2 !== 0) throw new ModelConfigError('headDim', `must be even (RoPE), got ${cfg.headDim}`);
  if (cfg.window > cfg.context)
    throw new ModelConfigError('window', `(${cfg.window}) must not exceed context (${cfg.context})`);
  return cfg;
}

/**
 * A validated config: a preset, optionally with fields overridden, or a full config object.
 * An override of `bias` replaces the base's three bias flags (qkvBias, oBias, mlpBias).
 * @example modelConfig('tiny', { layers: 4 })
 */
export function modelConfig(
  base: ModelPreset | ModelConfigInput,
  overrides: Partial<ModelConfigInput> = {},
): ModelConfig {
  let from: Readonly<ModelConfigInput>;
  if (typeof base === 'string') {
    if (!(base in MODEL_PRESETS))
      throw new RangeError(`unknown model preset '${base}' (expected one of ${Object.keys(MODEL_PRESETS).join(', ')})`);
    from = MODEL_PRESETS[base];
  } else {
    from = base;
  }
  const merged: Record<string, unknown> = { ...from };
  if (isRecord(overrides) && overrides.bias !== undefined) {
    for (const k of ['qkvBias', 'oBias', 'mlpBias']) if (!(k in overrides)) delete merged[k];
  }
  return validateModelConfig({ ...merged, ...overrides });
}

/** True when `layer` (0-based) uses the sliding window: per `layerTypes`, else the even layers when `window > 0`. */
export function isSlidingLayer(config: ModelConfig, layer: number): boolean {
  if (config.layerTypes) return config.layerTypes[layer] === 'sliding';
  return config.window > 0 && layer % 2 === 0;
}

/**
 * The parameters of a model (names, shapes, initialisation, weight decay), as defined natively
 * (native/model/model_config.cc): `embed.weight`; `token_shift.weight` [width, width] (with
 * `tokenShift`); per layer `layers.<i>.attn_norm.weight`,
 * `layers.<i>.attn.{q,k,v}.weight` (+ `.bias` with qkvBias), `layers.<i>.attn.{q,k}_norm.weight`
 * (qkNorm), `layers.<i>.attn.o.weight` (+ `.bias` with oBias), `layers.<i>.attn.sinks` (sinks),
 * `layers.<i>.mlp_norm.weight`, then the dense `layers.<i>.mlp.gate_up.weight` (gate rows, then
 * up rows) and `layers.<i>.mlp.down.weight` (+ biases with mlpBias), or with experts
 * `layers.<i>.mlp.router.weight` [E, width], `layers.<i>.mlp.experts.gate_up.weight` [E, 2 ffn,
 * width], `layers.<i>.mlp.experts.down.weight` [E, width, ffn] (+ biases with mlpBias);
 * `norm.weight`; `lm_head.weight` (unless tieEmbeddings); then, with `lora`, per layer and
 * target (in {@link LORA_TARGETS} order) `layers.<i>.attn.{q,k,v,o}.lora_{a,b}` and
 * `layers.<i>.mlp.{gate,up,down}.lora_{a,b}` (A [rank, in] uniform in ±1/√in, B [out, rank]
 * zeros: PEFT's initialisation), and for the expert targets `layers.<i>.mlp.experts.gate_up.lora_{a,b}`
 * (A [E, rank, width], B [E, 2 ffn, rank]: gate rows, then up rows) and
 * `layers.<i>.mlp.experts.down.lora_{a,b}` (A [E, rank, ffn], B [E, width, rank]). Storage dtype and trainability are not part of the layout:
 * they are chosen per store ({@link ParamStore.fromSpecs}).
 */
export function parameterLayout(config: ModelConfigInput): LayoutParamSpec[] {
  return modelAddon().modelParamLayout(validateModelConfig(config));
}

/** Total number of parameters of a config. */
export function parameterCount(config: ModelConfigInput): number {
  return parameterLayout(config).reduce((n, p) => n + p.shape.reduce((a, b) => a * b, 1), 0);
}
