/**
 * Checks of the OpenAI request fields that `sinkflex serve` does not act on or that only need a
 * type check, shared by `POST /v1/chat/completions` and `POST /v1/completions`. As in vLLM (its
 * pydantic request models and `SamplingParams` checks), a wrongly typed field is refused with a
 * 400 naming it; a field this server cannot honour (a JSON response format, penalties, a logit
 * bias) is refused too rather than ignored. Fields OpenAI's API has and that change nothing here
 * (`user`, `response_format: { type: 'text' }`, zero penalties, an empty `logit_bias`) are
 * accepted. Unknown fields are ignored, as vLLM does.
 * @module
 */
import { RequestError } from './server-request.js';

const bad = (message: string, param: string): RequestError => new RequestError(400, message, param, 'invalid_value');
const unsupported = (message: string, param: string): RequestError =>
  new RequestError(400, message, param, 'unsupported_value');

const given = (v: unknown): boolean => v !== undefined && v !== null;

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** What the checked fields ask for. */
export interface CommonRequestFields {
  /** `skip_special_tokens` (vLLM's; default true): leave special tokens out of returned text. */
  skipSpecialTokens: boolean;
}

/** What a route honours among the shared fields. */
export interface CommonFieldOptions {
  /** The route applies `presence_penalty` / `frequency_penalty` (`/v1/completions`); else non-zero ones are refused. */
  penalties?: boolean;
}

/**
 * Checks the fields both routes share: `user`, `presence_penalty`, `frequency_penalty`,
 * `logit_bias`, `response_format`, `stream_options` (only with `stream: true`, as vLLM
 * requires), `skip_special_tokens`.
 */
export function checkCommonFields(
  body: Record<string, unknown>,
  options: CommonFieldOptions = {},
): CommonRequestFields {
  if (given(body.user) && typeof body.user !== 'string')
    throw bad(`user must be a string, got ${JSON.stringify(body.user)}`, 'user');
  for (const key of ['presence_penalty', 'frequency_penalty']) {
    const v = body[key];
    if (!given(v)) continue;
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw bad(`${key} must be a number, got ${JSON.stringify(v)}`, key);
    if (v < -2 || v > 2) throw bad(`${key} must be in [-2, 2], got ${v}`, key);
    if (v !== 0 && options.penalties !== true)
      throw unsupported(`${key} is not supported on this route (only 0; /v1/completions applies it)`, key);
  }
  const bias = body.logit_bias;
  if (given(bias)) {
    if (!isObject(bias)) throw bad('logit_bias must be an object mapping token ids to biases', 'logit_bias');
    for (const [k, v] of Object.entries(bias)) {
      if (!/^\d+$/.test(k)) throw bad(`logit_bias key ${JSON.stringify(k)} is not a token id`, 'logit_bias');
      if (typeof v !== 'number' || !Number.isFinite(v))
        throw bad(`logit_bias[${k}] must be a number, got ${JSON.stringify(v)}`, 'logit_bias');
    }
    if (Object.keys(bias).length > 0) throw unsupported('logit_bias is not supported by this server', 'logit_bias');
  }
  const format = body.response_format;
  if (given(format)) {
    if (!isObject(format) || typeof format.type !== 'string')
      throw bad(
        "response_format must be an object with a type ('text', 'json_object' or 'json_schema')",
        'response_format',
      );
    if (!['text', 'json_object', 'json_schema'].includes(format.type))
      throw bad(
        `response_format.type must be 'text', 'json_object' or 'json_schema', got ${JSON.stringify(format.type)}`,
        'response_format.type',
      );
    if (format.type !== 'text')
      throw unsupported(
        `response_format ${format.type} is not supported by this server (no constrained decoding; only 'text')`,
        'response_format',
      );
  }
  const so = body.stream_options;
  if (given(so)) {
    if (!isObject(so)) throw bad('stream_options must be an object', 'stream_options');
    for (const key of ['include_usage', 'continuous_usage_stats']) {
      if (given(so[key]) && typeof so[key] !== 'boolean')
        throw bad(`stream_options.${key} must be a boolean`, `stream_options.${key}`);
    }
    if (body.stream !== true) throw bad('stream_options can only be given with stream: true', 'stream_options');
  }
  const skip = body.skip_special_tokens;
  if (given(skip) && typeof skip !== 'boolean')
    throw bad('skip_special_tokens must be a boolean', 'skip_special_tokens');
  return { skipSpecialTokens: skip !== false };
}

/** What the chat-only fields ask for. */
export interface ChatRequestFields extends CommonRequestFields {
  /** `parallel_tool_calls` (default true): false keeps at most one tool call per reply. */
  parallelToolCalls: boolean;
  /** `chat_template_kwargs`: extra variables for the chat template (e.g. `{ enable_thinking: false }`). */
  templateKwargs?: Record<string, unknown>;
}

/**
 * Checks the chat fields beyond the shared ones: `parallel_tool_calls`, `chat_template_kwargs`,
 * and each tool's `function.parameters` (an object) and `function.description` (a string).
 */
export function checkChatFields(body: Record<string, unknown>): ChatRequestFields {
  const common = checkCommonFields(body);
  const parallel = body.parallel_tool_calls;
  if (given(parallel) && typeof parallel !== 'boolean')
    throw bad('parallel_tool_calls must be a boolean', 'parallel_tool_calls');
  if (Array.isArray(body.tools)) {
    body.tools.forEach((t, i) => {
      const f = isObject(t) && isObject(t.function) ? t.function : null;
      if (!f) return; // the tools' shape is checked with the request
      if (given(f.parameters) && !isObject(f.parameters))
        throw bad(`tools[${i}].function.parameters must be a JSON Schema object`, `tools[${i}].function.parameters`);
      if (given(f.description) && typeof f.description !== 'string')
        throw bad(`tools[${i}].function.description must be a string`, `tools[${i}].function.description`);
    });
  }
  const kwargs = body.chat_template_kwargs;
  if (given(kwargs) && !isObject(kwargs)) throw bad('chat_template_kwargs must be an object', 'chat_template_kwargs');
  const out: ChatRequestFields = { ...common, parallelToolCalls: parallel !== false };
  if (isObject(kwargs) && Object.keys(kwargs).length > 0) out.templateKwargs = kwargs;
  return out;
}
