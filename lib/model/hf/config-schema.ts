/**
 * zod schemas of the config.json fields each supported architecture reads, with the defaults of
 * transformers' `configuration_<arch>.py` where a field is absent. Other fields pass through.
 * @module
 */
import { z } from 'zod';

import { HfConfigError } from './errors.js';

/** The architectures (`config.architectures[0]`) this loader supports. */
export const SUPPORTED_ARCHITECTURES = [
  'GptOssForCausalLM',
  'Qwen3ForCausalLM',
  'Qwen2ForCausalLM',
  'LlamaForCausalLM',
] as const;

/** A supported architecture. */
export type HfArchitecture = (typeof SUPPORTED_ARCHITECTURES)[number];

const posInt = z.number().int().positive();
const positive = z.number().positive();

/** Fields shared by all four, with one architecture's defaults. */
function base(d: {
  vocab: number;
  hidden: number;
  ffn: number;
  layers: number;
  heads: number;
  kvHeads: number | null;
  maxPos: number;
  eps: number;
}) {
  return {
    architectures: z.array(z.string()).min(1),
    vocab_size: posInt.default(d.vocab),
    hidden_size: posInt.default(d.hidden),
    intermediate_size: posInt.default(d.ffn),
    num_hidden_layers: posInt.default(d.layers),
    num_attention_heads: posInt.default(d.heads),
    num_key_value_heads: posInt.nullable().default(d.kvHeads),
    max_position_embeddings: posInt.default(d.maxPos),
    initializer_range: positive.default(0.02),
    rms_norm_eps: positive.default(d.eps),
    tie_word_embeddings: z.boolean().default(false),
    hidden_act: z.string().default('silu'),
    quantization_config: z.looseObject({ quant_method: z.string() }).nullable().optional(),
  };
}

/** `sliding_window` / `use_sliding_window` / `max_window_layers` / `layer_types` of Qwen2 and Qwen3. */
const qwenWindow = {
  use_sliding_window: z.boolean().default(false),
  sliding_window: posInt.nullable().default(4096),
  max_window_layers: z.number().int().nonnegative().default(28),
  layer_types: z.array(z.string()).nullable().default(null),
};

const qwenBase = base({
  vocab: 151936,
  hidden: 4096,
  ffn: 22016,
  layers: 32,
  heads: 32,
  kvHeads: 32,
  maxPos: 32768,
  eps: 1e-6,
});

/** Per architecture: the schema of its fields. */
export const CONFIG_SCHEMAS = {
  GptOssForCausalLM: z.looseObject({
    ...base({ vocab: 201088, hidden: 2880, ffn: 2880, layers: 36, heads: 64, kvHeads: 8, maxPos: 131072, eps: 1e-5 }),
    head_dim: posInt.nullable().default(64),
    attention_bias: z.boolean().default(true),
    sliding_window: posInt.nullable().default(128),
    layer_types: z.array(z.string()).nullable().default(null),
    num_local_experts: posInt.default(128),
    num_experts_per_tok: posInt.default(4),
    swiglu_limit: z.number().default(7),
    swiglu_alpha: z.number().default(1.702),
  }),
  Qwen3ForCausalLM: z.looseObject({
    ...qwenBase,
    ...qwenWindow,
    head_dim: posInt.nullable().default(128),
    attention_bias: z.boolean().default(false),
  }),
  Qwen2ForCausalLM: z.looseObject({ ...qwenBase, ...qwenWindow, head_dim: posInt.nullable().optional() }),
  LlamaForCausalLM: z.looseObject({
    ...base({ vocab: 32000, hidden: 4096, ffn: 11008, layers: 32, heads: 32, kvHeads: null, maxPos: 2048, eps: 1e-6 }),
    head_dim: posInt.nullable().optional(),
    attention_bias: z.boolean().default(false),
    mlp_bias: z.boolean().default(false),
  }),
} as const;

/** A config.json parsed with its architecture's defaults. */
export type ParsedHfConfig<A extends HfArchitecture = HfArchitecture> = z.output<(typeof CONFIG_SCHEMAS)[A]>;

/** The RoPE defaults of each architecture (`default_theta`; gpt-oss's default `rope_parameters`). */
export const ROPE_DEFAULTS: Readonly<Record<HfArchitecture, { theta: number; parameters?: Record<string, unknown> }>> =
  {
    GptOssForCausalLM: {
      theta: 150000,
      parameters: {
        rope_type: 'yarn',
        factor: 32,
        beta_fast: 32,
        beta_slow: 1,
        truncate: false,
        original_max_position_embeddings: 4096,
      },
    },
    Qwen3ForCausalLM: { theta: 10000 },
    Qwen2ForCausalLM: { theta: 10000 },
    LlamaForCausalLM: { theta: 10000 },
  };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The architecture of a config.json (`architectures[0]`); an {@link HfConfigError} naming it when unsupported. */
export function architectureOf(json: unknown): HfArchitecture {
  if (!isObject(json)) throw new HfConfigError('(root)', 'must be a JSON object');
  const archs = json.architectures;
  if (!Array.isArray(archs) || archs.length === 0 || typeof archs[0] !== 'string') {
    throw new HfConfigError(
      'architectures',
      `must be a non-empty array of names, got ${JSON.stringify(archs)} (supported: ${SUPPORTED_ARCHITECTURES.join(', ')})`,
    );
  }
  const arch = archs[0];
  if (!(SUPPORTED_ARCHITECTURES as readonly string[]).includes(arch)) {
    throw new HfConfigError(
      'architectures[0]',
      `architecture '${arch}' is not supported (supported: ${SUPPORTED_ARCHITECTURES.join(', ')})`,
    );
  }
  return arch as HfArchitecture;
}

/** Parses a config.json of architecture `arch` with its defaults; an {@link HfConfigError} names the first bad field. */
export function parseConfigFields<A extends HfArchitecture>(arch: A, json: Record<string, unknown>): ParsedHfConfig<A> {
  const result = CONFIG_SCHEMAS[arch].safeParse(json);
  if (result.success) return result.data as ParsedHfConfig<A>;
  const issue = result.error.issues[0];
  const field =
    issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i > 0 ? '.' : ''}${String(p)}`)).join('') ||
    '(root)';
  let value: unknown = json;
  for (const p of issue.path)
    value =
      isObject(value) || Array.isArray(value) ? (value as Record<PropertyKey, unknown>)[p as PropertyKey] : undefined;
  throw new HfConfigError(field, `${issue.message} (got ${JSON.stringify(value)})`);
}
