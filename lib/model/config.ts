/**
 * The configuration of the built-in gpt-oss-style policy as data, its presets and validation.
 * @module
 */
import { type ParamSpec, modelAddon } from './native.js';
import type { SwiGluVariant } from './ops.js';

/** Architecture of the built-in decoder-only transformer. */
export interface ModelConfig {
  /** Transformer blocks. */
  layers: number;
  /** Residual stream width (d_model). */
  width: number;
  /** Query heads. */
  heads: number;
  /** Key/value heads (grouped-query attention); divides `heads`. */
  kvHeads: number;
  /** Size of one head; even (RoPE). Query width is heads * headDim. */
  headDim: number;
  /** Sliding window (keys, including the current one) of the even layers; 0 = full attention everywhere. */
  window: number;
  /** Vocabulary size (the tokenizer's). */
  vocab: number;
  /** Maximum sequence length (positions). */
  context: number;
  /** Hidden size of the SwiGLU MLP. */
  ffn: number;
  /** RoPE base. */
  ropeTheta: number;
  /** RMSNorm epsilon. */
  normEps: number;
  /** Standard deviation of the normal initialisation of matrices. */
  initStd: number;
  /** MLP gate: gpt-oss's clamped SwiGLU or the standard one. */
  swiglu: SwiGluVariant;
  /** Biases on the attention and MLP projections (gpt-oss has them). */
  bias: boolean;
}

/** Names of the presets. */
export type ModelPreset = 'tiny' | 'small';

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
    bias: false,
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
    bias: false,
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

/**
 * Checks every field of a config (types, ranges, heads divisible by kvHeads, even headDim,
 * window <= context) and returns it typed; throws {@link ModelConfigError} naming the field.
 */
export function validateModelConfig(value: unknown): ModelConfig {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError('config must be an object');
  const c = value as Record<string, unknown>;
  const known = new Set<string>(Object.keys(MODEL_PRESETS.tiny));
  for (const k of Object.keys(c)) if (!known.has(k)) throw new ModelConfigError(k, 'is not a model config field');
  for (const [key, min, max] of INT_FIELDS) {
    const v = c[key];
    if (typeof v !== 'number' || !Number.isInteger(v)) throw new ModelConfigError(key, `must be an integer, got ${JSON.stringify(v)}`);
    if (v < min || v > max) throw new ModelConfigError(key, `must be in [${min}, ${max}], got ${v}`);
  }
  const num = (key: string, ok: (v: number) => boolean, what: string): void => {
    const v = c[key];
    if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw new ModelConfigError(key, `must be ${what}, got ${JSON.stringify(v)}`);
  };
  num('ropeTheta', (v) => v > 1, 'a number > 1');
  num('normEps', (v) => v > 0 && v < 1, 'in (0, 1)');
  num('initStd', (v) => v > 0 && v < 10, 'in (0, 10)');
  if (c.swiglu !== 'standard' && c.swiglu !== 'clamped') throw new ModelConfigError('swiglu', `must be 'standard' or 'clamped', got ${JSON.stringify(c.swiglu)}`);
  if (typeof c.bias !== 'boolean') throw new ModelConfigError('bias', `must be a boolean, got ${JSON.stringify(c.bias)}`);
  const cfg = c as unknown as ModelConfig;
  if (cfg.kvHeads > cfg.heads || cfg.heads % cfg.kvHeads !== 0) throw new ModelConfigError('kvHeads', `(${cfg.kvHeads}) must divide heads (${cfg.heads})`);
  if (cfg.headDim % 2 !== 0) throw new ModelConfigError('headDim', `must be even (RoPE), got ${cfg.headDim}`);
  if (cfg.window > cfg.context) throw new ModelConfigError('window', `(${cfg.window}) must not exceed context (${cfg.context})`);
  return cfg;
}

/**
 * A validated config: a preset, optionally with fields overridden, or a full config object.
 * @example modelConfig('tiny', { layers: 4 })
 */
export function modelConfig(base: ModelPreset | ModelConfig, overrides: Partial<ModelConfig> = {}): ModelConfig {
  let from: Readonly<ModelConfig>;
  if (typeof base === 'string') {
    if (!(base in MODEL_PRESETS)) throw new RangeError(`unknown model preset '${base}' (expected one of ${Object.keys(MODEL_PRESETS).join(', ')})`);
    from = MODEL_PRESETS[base];
  } else {
    from = base;
  }
  return validateModelConfig({ ...from, ...overrides });
}

/** True when `layer` (0-based) uses the sliding window: the even layers, when `window > 0`. */
export function isSlidingLayer(config: ModelConfig, layer: number): boolean {
  return config.window > 0 && layer % 2 === 0;
}

/**
 * The parameters of a model (names, shapes, initialisation, weight decay), as defined natively
 * (native/model/model_config.cc): `embed.weight`; per layer `layers.<i>.attn_norm.weight`,
 * `layers.<i>.attn.{q,k,v,o}.weight` (+ `.bias`), `layers.<i>.attn.sinks`,
 * `layers.<i>.mlp_norm.weight`, `layers.<i>.mlp.gate_up.weight` (gate rows, then up rows),
 * `layers.<i>.mlp.down.weight` (+ biases); `norm.weight`; `lm_head.weight`.
 */
export function parameterLayout(config: ModelConfig): Required<ParamSpec>[] {
  return modelAddon().modelParamLayout(validateModelConfig(config));
}

/** Total number of parameters of a config. */
export function parameterCount(config: ModelConfig): number {
  return parameterLayout(config).reduce((n, p) => n + p.shape.reduce((a, b) => a * b, 1), 0);
}
