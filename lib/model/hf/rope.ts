/**
 * RoPE settings of a Hugging Face config → `ropeTheta` + {@link RopeScaling}, following
 * transformers' standardisation (`RotaryEmbeddingConfigMixin.convert_rope_params_to_dict` /
 * `standardize_rope_params`, `modeling_rope_utils`):
 * - the legacy `rope_scaling` dict wins when non-empty, else `rope_parameters`, else the
 *   architecture's default (gpt-oss: YaRN factor 32, beta 32/1, truncate false, original 4096);
 * - `rope_theta` inside the dict wins over the top-level `rope_theta`, else the architecture's
 *   default theta;
 * - the type is `rope_type`, else the legacy `type`, else `'default'`;
 * - YaRN / llama3: `original_max_position_embeddings` is the top-level field when the config has
 *   one, else the dict's, else `max_position_embeddings` (uncapped: the RoPE table's context cap
 *   does not change the frequencies);
 * - YaRN: `factor` absent = max_position_embeddings / original; `beta_fast || 32`,
 *   `beta_slow || 1`; `truncate` absent = true; `attention_factor` absent = derived natively.
 * Types other than default, linear, llama3 and yarn (dynamic, longrope, ...), per-layer-type
 * dicts and partial rotary factors other than 1 fail with an {@link HfConfigError}.
 * @module
 */
import { HfConfigError } from './errors.js';
import type { RopeScaling } from '../config.js';

/** The RoPE fields of a parsed config.json that this module reads. */
export interface RopeInput {
  rope_theta?: unknown;
  rope_scaling?: unknown;
  rope_parameters?: unknown;
  partial_rotary_factor?: unknown;
  original_max_position_embeddings?: unknown;
  max_position_embeddings: number;
}

/** Architecture defaults for RoPE. */
export interface RopeDefaults {
  /** `default_theta` of the architecture's config class. */
  theta: number;
  /** The dict used when the config has neither `rope_scaling` nor `rope_parameters` (gpt-oss). */
  parameters?: Readonly<Record<string, unknown>>;
}

/** Supported `rope_type` values. */
export const SUPPORTED_ROPE_TYPES: readonly string[] = ['default', 'linear', 'llama3', 'yarn'];

const LAYER_TYPE_KEYS = new Set(['full_attention', 'sliding_attention', 'chunked_attention', 'linear_attention']);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Resolves the RoPE base and scaling of a config; throws {@link HfConfigError} naming the field. */
export function resolveRope(
  raw: RopeInput,
  defaults: RopeDefaults,
): { ropeTheta: number; ropeScaling: RopeScaling | null } {
  let field: string;
  let params: Record<string, unknown>;
  if (isObject(raw.rope_scaling) && Object.keys(raw.rope_scaling).length > 0) {
    field = 'rope_scaling';
    params = { ...raw.rope_scaling };
  } else if (raw.rope_scaling !== undefined && raw.rope_scaling !== null && !isObject(raw.rope_scaling)) {
    throw new HfConfigError('rope_scaling', `must be an object or null, got ${JSON.stringify(raw.rope_scaling)}`);
  } else if (isObject(raw.rope_parameters)) {
    field = 'rope_parameters';
    params = { ...raw.rope_parameters };
  } else if (raw.rope_parameters !== undefined && raw.rope_parameters !== null) {
    throw new HfConfigError('rope_parameters', `must be an object or null, got ${JSON.stringify(raw.rope_parameters)}`);
  } else {
    field = 'rope_parameters';
    params = { ...(defaults.parameters ?? {}) };
  }
  const nested = Object.keys(params).filter((k) => LAYER_TYPE_KEYS.has(k));
  if (nested.length > 0)
    throw new HfConfigError(
      `${field}.${nested[0]}`,
      'RoPE parameters per layer type are not supported (one dict for all layers is)',
    );

  const num = (key: string, value: unknown, ok: (v: number) => boolean, what: string): number => {
    if (typeof value !== 'number' || !Number.isFinite(value) || !ok(value))
      throw new HfConfigError(key, `must be ${what}, got ${JSON.stringify(value)}`);
    return value;
  };
  const thetaField =
    params.rope_theta !== undefined && params.rope_theta !== null ? `${field}.rope_theta` : 'rope_theta';
  const thetaValue = params.rope_theta ?? raw.rope_theta ?? defaults.theta;
  const ropeTheta = num(thetaField, thetaValue, (v) => v > 1, 'a number > 1');

  const partial = params.partial_rotary_factor ?? raw.partial_rotary_factor;
  if (partial !== undefined && partial !== null && partial !== 1) {
    throw new HfConfigError(
      params.partial_rotary_factor !== undefined ? `${field}.partial_rotary_factor` : 'partial_rotary_factor',
      `partial RoPE is not supported (must be 1), got ${JSON.stringify(partial)}`,
    );
  }

  const typeValue = params.rope_type ?? params.type ?? 'default';
  const typeField = params.rope_type !== undefined ? `${field}.rope_type` : `${field}.type`;
  if (typeof typeValue !== 'string' || !SUPPORTED_ROPE_TYPES.includes(typeValue)) {
    throw new HfConfigError(
      typeField,
      `RoPE type ${JSON.stringify(typeValue)} is not supported (supported: ${SUPPORTED_ROPE_TYPES.join(', ')})`,
    );
  }
  if (typeValue === 'default') return { ropeTheta, ropeScaling: null };

  const positive = (key: string): number => num(`${field}.${key}`, params[key], (v) => v > 0, 'a number > 0');
  if (typeValue === 'linear') return { ropeTheta, ropeScaling: { type: 'linear', factor: positive('factor') } };

  const hasTop = raw.original_max_position_embeddings !== undefined && raw.original_max_position_embeddings !== null;
  const originalField = hasTop ? 'original_max_position_embeddings' : `${field}.original_max_position_embeddings`;
  const originalValue = hasTop
    ? raw.original_max_position_embeddings
    : (params.original_max_position_embeddings ?? raw.max_position_embeddings);
  const originalContext = num(originalField, originalValue, (v) => Number.isInteger(v) && v > 0, 'a positive integer');

  if (typeValue === 'llama3') {
    const lowFreqFactor = positive('low_freq_factor');
    const highFreqFactor = positive('high_freq_factor');
    if (highFreqFactor <= lowFreqFactor)
      throw new HfConfigError(
        `${field}.high_freq_factor`,
        `must exceed low_freq_factor (${lowFreqFactor}), got ${highFreqFactor}`,
      );
    return {
      ropeTheta,
      ropeScaling: { type: 'llama3', factor: positive('factor'), lowFreqFactor, highFreqFactor, originalContext },
    };
  }

  // yarn
  const factor =
    params.factor === undefined || params.factor === null
      ? raw.max_position_embeddings / originalContext
      : positive('factor');
  const optional = (key: string): number | undefined =>
    params[key] === undefined || params[key] === null
      ? undefined
      : num(`${field}.${key}`, params[key], () => true, 'a number');
  const attentionFactor = optional('attention_factor');
  if (attentionFactor !== undefined && attentionFactor < 0)
    throw new HfConfigError(`${field}.attention_factor`, `must be ≥ 0, got ${attentionFactor}`);
  const truncate = params.truncate ?? true;
  if (typeof truncate !== 'boolean')
    throw new HfConfigError(`${field}.truncate`, `must be a boolean, got ${JSON.stringify(truncate)}`);
  const scaling: RopeScaling = {
    type: 'yarn',
    factor,
    originalContext,
    betaFast: optional('beta_fast') || 32,
    betaSlow: optional('beta_slow') || 1,
    truncate,
    attentionFactor: attentionFactor ?? null,
  };
  const mscale = optional('mscale');
  const mscaleAllDim = optional('mscale_all_dim');
  if (mscale !== undefined) scaling.mscale = mscale;
  if (mscaleAllDim !== undefined) scaling.mscaleAllDim = mscaleAllDim;
  return { ropeTheta, ropeScaling: scaling };
}
