/**
 * {@link OpenAITokenCompletions}: the rollout layer's {@link TokenCompletions} over the OpenAI
 * client — token-in/token-out completions from vLLM-compatible servers (vLLM, SGLang, `sinkflex
 * serve`), with the client's retries, timeouts, least-busy routing over base URLs and
 * failure counting.
 *
 * Each request is vLLM's `POST /v1/completions` with the context as `prompt` token ids, every
 * sampling field the trainer's distribution depends on set explicitly ({@link SAMPLING_FIELDS}:
 * `top_k` off, `min_p: 0`, `repetition_penalty: 1`, no presence or frequency penalty, besides
 * `temperature`, `top_p` and `max_tokens`), so that no server default — vLLM applies the model's
 * `generation_config.json` to every field a request leaves out, SGLang its own — changes the
 * distribution the tokens are drawn from; `logprobs: 0` (the sampled tokens' log-probs), `return_tokens_as_token_ids: true` (the sampled
 * tokens as `token_id:<id>`, parsed back into ids: nothing is re-tokenized), `return_token_ids:
 * true` (the ids again, as a cross-check where the server supports it), `stop_token_ids`, `seed`
 * and, for `sinkflex serve`, `session_id`. With an adapter ({@link OpenAITokenCompletions.loraPath})
 * the request also carries `lora_path: <adapter name>`: SGLang picks the adapter from `model` only
 * in the form `<base>:<adapter>` and otherwise from `lora_path` (a plain adapter name as `model`
 * gives its base model), while vLLM and `sinkflex serve` pick it from `model` and ignore
 * `lora_path`. An answer without token ids or log-probs fails with a
 * {@link CompletionFormatError} naming what is missing (not retried: the server does not support it).
 * @module
 */
import type { TokenCompletion, TokenCompletionRequest, TokenCompletions } from '../rollout/completion-token-policy.js';
import { OpenAIError, type CompletionResponse, type OpenAIChatClient } from './client.js';

/** A server answered a completion without what token-in/token-out needs (ids, log-probs). */
export class CompletionFormatError extends Error {
  /** @param message - what is missing, and where. */
  constructor(message: string) {
    super(message);
    this.name = 'CompletionFormatError';
  }
}

const TOKEN_ID = /^token_id:(\d+)$/;

/**
 * The sampling fields every completion request sets besides `temperature`, `top_p` and
 * `max_tokens`: the values that leave the distribution softmax(logits / temperature) untouched.
 * `top_k: -1` is "off" for vLLM (which also takes 0) and SGLang (which refuses 0).
 */
export const SAMPLING_FIELDS: Readonly<Record<string, number>> = Object.freeze({
  top_k: -1,
  min_p: 0,
  repetition_penalty: 1,
  presence_penalty: 0,
  frequency_penalty: 0,
});

/**
 * The sampled ids, log-probs and finish reason of a completion (vLLM's shape), or a
 * {@link CompletionFormatError} naming what is missing. `where` names the server in messages.
 */
export function readTokenCompletion(response: CompletionResponse, where: string): TokenCompletion {
  const c = response.choices[0];
  const lp = c.logprobs;
  if (!lp || !Array.isArray(lp.token_logprobs)) {
    throw new CompletionFormatError(
      `${where} answered a completion without log-probs (choices[0].logprobs.token_logprobs is missing): the rollout engine needs a server that returns the sampled tokens' log-probs for logprobs: 0, as vLLM does`,
    );
  }
  const logProbs = lp.token_logprobs.map((x, i) => {
    if (typeof x !== 'number' || !Number.isFinite(x))
      throw new CompletionFormatError(
        `${where}: choices[0].logprobs.token_logprobs[${i}] is ${JSON.stringify(x)}, not a log-prob`,
      );
    return x;
  });
  let fromTokens: number[] | null = null;
  if (
    Array.isArray(lp.tokens) &&
    lp.tokens.length > 0 &&
    lp.tokens.every((s) => typeof s === 'string' && TOKEN_ID.test(s))
  ) {
    fromTokens = lp.tokens.map((s) => Number((TOKEN_ID.exec(s as string) as RegExpExecArray)[1]));
  } else if (Array.isArray(lp.tokens) && lp.tokens.length === 0 && logProbs.length === 0) fromTokens = [];
  const ids = Array.isArray(c.token_ids) ? c.token_ids : null;
  if (fromTokens === null && ids === null) {
    const sample = Array.isArray(lp.tokens) && lp.tokens.length > 0 ? ` (got ${JSON.stringify(lp.tokens[0])})` : '';
    throw new CompletionFormatError(
      `${where} answered a completion without token ids: choices[0].logprobs.tokens are not 'token_id:<id>' strings${sample} (return_tokens_as_token_ids) and choices[0].token_ids is missing (return_token_ids); the rollout engine needs the sampled ids, which vLLM returns for either`,
    );
  }
  if (
    fromTokens !== null &&
    ids !== null &&
    (fromTokens.length !== ids.length || fromTokens.some((t, i) => t !== ids[i]))
  ) {
    throw new CompletionFormatError(
      `${where}: choices[0].logprobs.tokens (token_id:<id>) and choices[0].token_ids disagree`,
    );
  }
  const tokens = (fromTokens ?? ids) as number[];
  if (tokens.length !== logProbs.length)
    throw new CompletionFormatError(`${where}: ${tokens.length} token ids but ${logProbs.length} log-probs`);
  const finish = c.finish_reason;
  if (finish !== 'stop' && finish !== 'length')
    throw new CompletionFormatError(`${where}: finish_reason ${JSON.stringify(finish)} (expected 'stop' or 'length')`);
  return { tokens, logProbs, finishReason: finish };
}

/** Options of {@link OpenAITokenCompletions}. */
export interface OpenAITokenCompletionsOptions {
  /** The model requests name (default the client's); {@link OpenAITokenCompletions.model} changes it (a new adapter). */
  model?: string;
  /** Extra body fields of every request. */
  extraBody?: Record<string, unknown>;
  /** Called after each completion that answered well, with the server that answered it (for on-policy checks). */
  onCompletion?: (done: AnsweredCompletion) => void;
}

/** A completion and the server that answered it. */
export interface AnsweredCompletion {
  /** The server's base URL. */
  baseURL: string;
  /** The request. */
  request: TokenCompletionRequest;
  /** What it returned. */
  result: TokenCompletion;
}

/** Counters of {@link OpenAITokenCompletions}. */
export interface TokenCompletionsStats {
  /** Completions requested. */
  requests: number;
  /** Completions that failed (after the client's retries, or for a bad answer). */
  failures: number;
  /** Calls beyond the first of each request (the client's retries). */
  retries: number;
}

/** The rollout engine's completions over the OpenAI client (see the module description). */
export class OpenAITokenCompletions implements TokenCompletions {
  /** The model requests name now. */
  model: string;
  /** The adapter requests name in `lora_path` (SGLang's field), or null for none. */
  loraPath: string | null = null;
  private readonly onCompletion: ((done: AnsweredCompletion) => void) | undefined;
  private readonly extraBody: Record<string, unknown>;
  private readonly counters: TokenCompletionsStats = { requests: 0, failures: 0, retries: 0 };

  /** @param client - the client (base URLs, retries, timeouts, routing). @param options - model, extra fields. */
  constructor(
    readonly client: OpenAIChatClient,
    options: OpenAITokenCompletionsOptions = {},
  ) {
    this.model = options.model ?? client.model;
    this.extraBody = { ...(options.extraBody ?? {}) };
    this.onCompletion = options.onCompletion;
  }

  /** The counters so far (a copy). */
  stats(): TokenCompletionsStats {
    return { ...this.counters };
  }

  /** Runs one completion (see the module description). */
  async complete(request: TokenCompletionRequest): Promise<TokenCompletion> {
    this.counters.requests++;
    try {
      const r = await this.client.createCompletion(
        {
          ...this.extraBody,
          model: this.model,
          ...(this.loraPath !== null ? { lora_path: this.loraPath } : {}),
          prompt: request.prompt,
          max_tokens: request.maxTokens,
          temperature: request.temperature,
          top_p: request.topP,
          ...SAMPLING_FIELDS,
          stop_token_ids: request.stop,
          logprobs: 0,
          return_tokens_as_token_ids: true,
          return_token_ids: true,
          ...(request.seed !== undefined ? { seed: request.seed } : {}),
          ...(request.sessionId !== undefined ? { session_id: request.sessionId } : {}),
        },
        { affinity: request.affinity },
      );
      this.counters.retries += r.attempts - 1;
      const result = readTokenCompletion(r.response, `${r.baseURL}/completions`);
      this.onCompletion?.({ baseURL: r.baseURL, request, result });
      return result;
    } catch (e) {
      this.counters.failures++;
      if (e instanceof OpenAIError) this.counters.retries += Math.max(0, e.attempts - 1);
      throw e;
    }
  }

  /** Forgets an episode's routing key. */
  release(affinity: string): void {
    this.client.release(affinity);
  }
}
