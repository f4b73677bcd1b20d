/**
 * Validation of `POST /v1/completions` requests (vLLM's token-in/token-out subset of the
 * OpenAI completions API): the body is checked field by field and turned into a
 * {@link CompletionRequestParams}; anything wrong gives a {@link RequestError} (HTTP 400 with an
 * OpenAI-style error JSON naming the parameter). Token ids are checked against the served
 * model's vocabulary by the route, which knows it.
 * @module
 */
import { RequestError } from './server-request.js';
import { checkCommonFields, type CommonRequestFields } from './request-fields.js';

/** A validated completions request. */
export interface CompletionRequestParams extends CommonRequestFields {
  /** The model asked for (the base model or a loaded LoRA adapter), or null for the base model. */
  model: string | null;
  /** The prompt: token ids, or text to tokenize. */
  prompt: number[] | string;
  /** Most tokens to generate (`max_tokens`; null: left out, 16 as in OpenAI's and vLLM's API, capped by the generation config). */
  maxTokens: number | null;
  /** Temperature (0 is greedy; null: left out, the server's default). */
  temperature: number | null;
  /** Nucleus mass (null: left out). */
  topP: number | null;
  /** Top-k as sent (-1 and 0: off; null: left out). */
  topK: number | null;
  /** vLLM's `min_p` (null: left out). */
  minP: number | null;
  /** vLLM's `repetition_penalty` (null: left out). */
  repetitionPenalty: number | null;
  /** `presence_penalty` (null: left out, 0). */
  presencePenalty: number | null;
  /** `frequency_penalty` (null: left out, 0). */
  frequencyPenalty: number | null;
  /** Seed of the request's random stream, when given. */
  seed?: number;
  /** Token ids that end the completion (`stop_token_ids`); the stop token is part of the output. */
  stopTokenIds: number[];
  /** Do not stop at the tokenizer's end-of-sequence token (vLLM's `ignore_eos`). */
  ignoreEos: boolean;
  /** Return the sampled tokens' log-probs (`logprobs: 0`). */
  logprobs: boolean;
  /** Write the log-probs' tokens as `token_id:<id>` (vLLM's `return_tokens_as_token_ids`). */
  tokensAsIds: boolean;
  /** Return the prompt's and the completion's token ids (vLLM's `return_token_ids`). */
  returnTokenIds: boolean;
  /** Continue this session's context and random stream (a `sinkflex serve` extension). */
  sessionId?: string;
}

const bad = (message: string, param: string | null): RequestError =>
  new RequestError(400, message, param, 'invalid_value');

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

const given = (v: unknown): boolean => v !== undefined && v !== null;

function tokenIds(v: unknown, param: string, allowEmpty: boolean): number[] {
  if (!Array.isArray(v)) throw bad(`${param} must be a list of token ids`, param);
  if (!allowEmpty && v.length === 0) throw bad(`${param} must not be empty`, param);
  v.forEach((t, i) => {
    if (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0)
      throw bad(`${param}[${i}] must be a token id (an integer >= 0), got ${JSON.stringify(t)}`, `${param}[${i}]`);
  });
  return v as number[];
}

function number(body: Record<string, unknown>, key: string, lo: number, hi: number, loOpen = false): number | null {
  const v = body[key];
  if (!given(v)) return null;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || (loOpen && v === lo) || v > hi)
    throw bad(`${key} must be a number in ${loOpen ? '(' : '['}${lo}, ${hi}], got ${JSON.stringify(v)}`, key);
  return v;
}

/** Validates a parsed JSON body (throws {@link RequestError}). */
export function parseCompletionRequest(body: unknown): CompletionRequestParams {
  if (!isObject(body)) throw bad('the request body must be a JSON object', null);
  let model: string | null = null;
  if (given(body.model)) {
    if (typeof body.model !== 'string' || body.model === '') throw bad('model must be a non-empty string', 'model');
    model = body.model;
  }
  const p = body.prompt;
  let prompt: number[] | string;
  if (typeof p === 'string') {
    if (p === '') throw bad('prompt must not be empty', 'prompt');
    prompt = p;
  } else if (Array.isArray(p) && p.length > 0 && (Array.isArray(p[0]) || typeof p[0] === 'string')) {
    throw bad('one prompt per request: a string or a list of token ids (lists of prompts are not supported)', 'prompt');
  } else if (Array.isArray(p)) {
    prompt = tokenIds(p, 'prompt', false).slice();
  } else throw bad('prompt is required: a string or a list of token ids', 'prompt');
  let maxTokens: number | null = null;
  if (given(body.max_tokens)) {
    const v = body.max_tokens;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
      throw bad(`max_tokens must be a positive integer, got ${JSON.stringify(v)}`, 'max_tokens');
    maxTokens = v;
  }
  let topK: number | null = null;
  if (given(body.top_k)) {
    const v = body.top_k;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < -1)
      throw bad(`top_k must be an integer >= -1 (-1 or 0: off), got ${JSON.stringify(v)}`, 'top_k');
    topK = v;
  }
  const seed = body.seed;
  if (given(seed) && (typeof seed !== 'number' || !Number.isSafeInteger(seed) || seed < 0))
    throw bad(`seed must be a non-negative integer, got ${JSON.stringify(seed)}`, 'seed');
  const stop = body.stop;
  if (given(stop) && stop !== '' && !(Array.isArray(stop) && stop.length === 0))
    throw bad('stop strings are not supported: give stop_token_ids', 'stop');
  const stopTokenIds = given(body.stop_token_ids) ? tokenIds(body.stop_token_ids, 'stop_token_ids', true).slice() : [];
  let logprobs = false;
  if (given(body.logprobs)) {
    const v = body.logprobs;
    if (typeof v !== 'number' || !Number.isSafeInteger(v))
      throw bad(`logprobs must be an integer (0: the sampled tokens' log-probs), got ${JSON.stringify(v)}`, 'logprobs');
    if (v !== 0)
      throw bad(
        `logprobs ${v} is not supported: only the sampled tokens' log-probs are returned (logprobs: 0)`,
        'logprobs',
      );
    logprobs = true;
  }
  for (const key of ['return_tokens_as_token_ids', 'return_token_ids', 'echo', 'stream', 'ignore_eos']) {
    if (given(body[key]) && typeof body[key] !== 'boolean') throw bad(`${key} must be a boolean`, key);
  }
  if (body.echo === true) throw bad('echo is not supported', 'echo');
  if (body.stream === true)
    throw bad('streaming completions are not supported (stream: false; /v1/chat/completions streams)', 'stream');
  if (given(body.n) && body.n !== 1) throw bad('n must be 1', 'n');
  if (given(body.best_of) && body.best_of !== 1) throw bad('best_of must be 1', 'best_of');
  const sessionId = body.session_id;
  if (given(sessionId) && (typeof sessionId !== 'string' || sessionId === '' || sessionId.length > 256))
    throw bad('session_id must be a non-empty string of at most 256 characters', 'session_id');
  const req: CompletionRequestParams = {
    ...checkCommonFields(body, { penalties: true }),
    model,
    prompt,
    maxTokens,
    temperature: number(body, 'temperature', 0, 2),
    topP: number(body, 'top_p', 0, 1, true),
    topK,
    minP: number(body, 'min_p', 0, 1),
    repetitionPenalty: number(body, 'repetition_penalty', 0, Number.MAX_VALUE, true),
    presencePenalty: number(body, 'presence_penalty', -2, 2),
    frequencyPenalty: number(body, 'frequency_penalty', -2, 2),
    stopTokenIds,
    ignoreEos: body.ignore_eos === true,
    logprobs,
    tokensAsIds: body.return_tokens_as_token_ids === true,
    returnTokenIds: body.return_token_ids === true,
  };
  if (typeof seed === 'number') req.seed = seed;
  if (typeof sessionId === 'string') req.sessionId = sessionId;
  return req;
}
