/**
 * The sampling parameters of a `/v1/completions` request as vLLM resolves them:
 *
 * - a field the request sets is used as given;
 * - a field it leaves out (`temperature`, `top_p`, `top_k`, `min_p`, `repetition_penalty`) takes
 *   the served model's generation-config default when there is one (vLLM's `--generation-config
 *   auto`, its default: `ModelConfig.get_diff_sampling_param`, which keeps the fields of the
 *   model's `generation_config.json` that differ from transformers' `GenerationConfig` defaults —
 *   temperature 1, top_k 50, top_p 1, repetition_penalty 1, no min_p, no max_new_tokens), else
 *   vLLM's neutral default (`CompletionRequest._DEFAULT_SAMPLING_PARAMS`: temperature 1, top_p 1,
 *   top_k 0 (off), min_p 0, repetition_penalty 1);
 * - `presence_penalty` and `frequency_penalty` default to 0 (no generation-config default);
 * - `max_tokens` defaults to 16 and is capped by the generation config's `max_new_tokens`.
 *
 * `--generation-config vllm` (no defaults) gives the neutral defaults only.
 * @module
 */

/** The generation-config defaults a server applies to fields a request leaves out. */
export interface SamplingDefaults {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  repetition_penalty?: number;
  /** The generation config's `max_new_tokens`: a cap on `max_tokens`. */
  max_tokens?: number;
}

/** transformers' `GenerationConfig` defaults of the fields vLLM reads (a field equal to its default is not a "diff"). */
const HF_DEFAULTS: Readonly<Record<string, number | null>> = {
  temperature: 1,
  top_k: 50,
  top_p: 1,
  min_p: null,
  repetition_penalty: 1,
  max_new_tokens: null,
};

/**
 * The defaults vLLM takes from a model's `generation_config.json` (parsed; null: the model has
 * none): each of temperature, top_p, top_k, min_p, repetition_penalty and max_new_tokens (as
 * max_tokens) that is a number other than transformers' default.
 */
export function generationConfigDefaults(generationConfig: Readonly<Record<string, unknown>> | null): SamplingDefaults {
  const out: SamplingDefaults = {};
  if (generationConfig === null) return out;
  for (const [key, hf] of Object.entries(HF_DEFAULTS)) {
    const v = generationConfig[key];
    if (typeof v !== 'number' || !Number.isFinite(v) || v === hf) continue;
    if (key === 'max_new_tokens') out.max_tokens = v;
    else out[key as Exclude<keyof SamplingDefaults, 'max_tokens'>] = v;
  }
  return out;
}

/** A request's sampling fields, null where the request leaves them out. */
export interface RequestedSampling {
  temperature: number | null;
  topP: number | null;
  /** As sent (vLLM's -1 and 0 are both "off"). */
  topK: number | null;
  minP: number | null;
  repetitionPenalty: number | null;
  presencePenalty: number | null;
  frequencyPenalty: number | null;
  maxTokens: number | null;
}

/** The parameters a completion is sampled with. */
export interface ResolvedSampling {
  temperature: number;
  topP: number;
  /** 0: off. */
  topK: number;
  minP: number;
  repetitionPenalty: number;
  presencePenalty: number;
  frequencyPenalty: number;
  maxTokens: number;
}

/** Resolves a request's sampling fields against the server's defaults (see the module description). */
export function resolveSampling(r: RequestedSampling, defaults: SamplingDefaults): ResolvedSampling {
  const topK = r.topK ?? defaults.top_k ?? 0;
  const maxTokens = r.maxTokens ?? 16;
  return {
    temperature: r.temperature ?? defaults.temperature ?? 1,
    topP: r.topP ?? defaults.top_p ?? 1,
    topK: topK < 0 ? 0 : topK,
    minP: r.minP ?? defaults.min_p ?? 0,
    repetitionPenalty: r.repetitionPenalty ?? defaults.repetition_penalty ?? 1,
    presencePenalty: r.presencePenalty ?? 0,
    frequencyPenalty: r.frequencyPenalty ?? 0,
    maxTokens: defaults.max_tokens !== undefined ? Math.min(maxTokens, defaults.max_tokens) : maxTokens,
  };
}
