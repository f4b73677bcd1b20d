/**
 * Validation of `POST /v1/chat/completions` requests for {@link startChatServer}: the body is
 * checked field by field and turned into a {@link ChatRequest}; anything wrong gives a
 * {@link RequestError} (HTTP 400 with an OpenAI-style error JSON naming the parameter).
 * @module
 */
import type { ChatMessage, ChatToolCall, ToolSchema } from '../chat/messages.js';
import { checkChatFields, type ChatRequestFields } from './request-fields.js';

/** vLLM's error type names by status (vLLM's own where it has them, else the status's name + `Error`). */
const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'BadRequestError',
  401: 'UnauthorizedError',
  404: 'NotFoundError',
  405: 'MethodNotAllowedError',
  413: 'RequestEntityTooLargeError',
  499: 'ClientClosedRequestError',
  500: 'InternalServerError',
  501: 'NotImplementedError',
  503: 'ServiceUnavailableError',
};

function errorType(status: number): string {
  return ERROR_TYPES[status] ?? (status >= 500 ? 'InternalServerError' : 'BadRequestError');
}

/** A request the server refuses (sent as `{ error: { message, type, param, code } }`). */
export class RequestError extends Error {
  /**
   * @param status - HTTP status.
   * @param message - what is wrong.
   * @param param - the offending parameter (e.g. `messages[2].content`).
   * @param code - a machine-readable code.
   */
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
    this.name = 'RequestError';
  }

  /**
   * The error body as vLLM sends it (`ErrorResponse { error: ErrorInfo }`): `type` the status's
   * error name (`BadRequestError`, `NotFoundError`, `InternalServerError`, … as vLLM's
   * `create_error_response` names them), `code` the HTTP status; this server's own
   * machine-readable reason ({@link RequestError.code}) stays in the logs.
   */
  toJSON(): { error: { message: string; type: string; param: string | null; code: number } } {
    return { error: { message: this.message, type: errorType(this.status), param: this.param, code: this.status } };
  }
}

/** A validated chat-completions request. */
export interface ChatRequest extends ChatRequestFields {
  /** The model name asked for. */
  model: string;
  /** The conversation (`developer` messages become `system`; text parts joined). */
  messages: ChatMessage[];
  /** The tools offered (empty with `tool_choice: 'none'`). */
  tools: ToolSchema[];
  /** Whether the reply's tool calls are read (tools offered and `tool_choice` not `'none'`); else they stay text. */
  toolCallsAllowed: boolean;
  /** `max_tokens` / `max_completion_tokens`, when given. */
  maxTokens?: number;
  /** Temperature (default 1). */
  temperature: number;
  /** Nucleus mass (default 1). */
  topP: number;
  /** Seed, when given. */
  seed?: number;
  /** Stream the answer as server-sent events. */
  stream: boolean;
  /** Include usage in the last streamed chunk (`stream_options.include_usage`). */
  streamUsage: boolean;
  /** Return per-token log-probs. */
  logprobs: boolean;
  /** Return the prompt's and the reply's token ids (vLLM's `return_token_ids`). */
  returnTokenIds: boolean;
  /** Continue this conversation's context (a `sinkflex serve` extension). */
  sessionId?: string;
}

const bad = (message: string, param: string | null): RequestError =>
  new RequestError(400, message, param, 'invalid_value');

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function text(v: unknown, param: string, nullable: boolean): string | null {
  if (typeof v === 'string') return v;
  if ((v === null || v === undefined) && nullable) return null;
  if (Array.isArray(v)) {
    return v
      .map((p, i) => {
        if (!isObject(p) || p.type !== 'text' || typeof p.text !== 'string')
          throw bad(`${param}[${i}] must be a text part ({ type: 'text', text })`, `${param}[${i}]`);
        return p.text;
      })
      .join('');
  }
  throw bad(`${param} must be a string${nullable ? ' or null' : ''}`, param);
}

function toolCalls(v: unknown, param: string): ChatToolCall[] {
  if (!Array.isArray(v)) throw bad(`${param} must be an array`, param);
  return v.map((c, i) => {
    const p = `${param}[${i}]`;
    if (!isObject(c) || !isObject(c.function))
      throw bad(`${p} must be { type: 'function', function: { name, arguments } }`, p);
    const f = c.function;
    if (typeof f.name !== 'string' || f.name === '')
      throw bad(`${p}.function.name must be a non-empty string`, `${p}.function.name`);
    const args =
      f.arguments === undefined
        ? '{}'
        : typeof f.arguments === 'string'
          ? f.arguments
          : isObject(f.arguments)
            ? JSON.stringify(f.arguments)
            : null;
    if (args === null) throw bad(`${p}.function.arguments must be a JSON string`, `${p}.function.arguments`);
    const call: ChatToolCall = { type: 'function', function: { name: f.name, arguments: args } };
    if (typeof c.id === 'string') call.id = c.id;
    return call;
  });
}

function message(m: unknown, i: number): ChatMessage {
  const p = `messages[${i}]`;
  if (!isObject(m)) throw bad(`${p} must be an object`, p);
  switch (m.role) {
    case 'system':
    case 'developer':
      return { role: 'system', content: text(m.content, `${p}.content`, false) as string };
    case 'user':
      return { role: 'user', content: text(m.content, `${p}.content`, false) as string };
    case 'tool': {
      if (m.tool_call_id !== undefined && typeof m.tool_call_id !== 'string')
        throw bad(`${p}.tool_call_id must be a string`, `${p}.tool_call_id`);
      const out: ChatMessage = { role: 'tool', content: text(m.content, `${p}.content`, false) as string };
      if (typeof m.tool_call_id === 'string') out.tool_call_id = m.tool_call_id;
      return out;
    }
    case 'assistant': {
      const content = text(m.content, `${p}.content`, true);
      const calls =
        m.tool_calls === undefined || m.tool_calls === null ? [] : toolCalls(m.tool_calls, `${p}.tool_calls`);
      if (content === null && calls.length === 0) throw bad(`${p} needs content or tool_calls`, `${p}.content`);
      return calls.length > 0 ? { role: 'assistant', content, tool_calls: calls } : { role: 'assistant', content };
    }
    default:
      throw bad(
        `${p}.role must be one of system, developer, user, assistant, tool; got ${JSON.stringify(m.role)}`,
        `${p}.role`,
      );
  }
}

function number(body: Record<string, unknown>, key: string, lo: number, hi: number, fallback: number): number {
  const v = body[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi)
    throw bad(`${key} must be a number in [${lo}, ${hi}], got ${JSON.stringify(v)}`, key);
  return v;
}

/** Validates a parsed JSON body (throws {@link RequestError}). */
export function parseChatRequest(body: unknown): ChatRequest {
  if (!isObject(body)) throw bad('the request body must be a JSON object', null);
  if (typeof body.model !== 'string' || body.model === '') throw bad('model must be a non-empty string', 'model');
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    throw bad('messages must be a non-empty array', 'messages');
  const messages = body.messages.map(message);
  let tools: ToolSchema[] = [];
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw bad('tools must be an array', 'tools');
    tools = body.tools.map((t, i) => {
      if (
        !isObject(t) ||
        t.type !== 'function' ||
        !isObject(t.function) ||
        typeof t.function.name !== 'string' ||
        t.function.name === ''
      )
        throw bad(
          `tools[${i}] must be { type: 'function', function: { name, description?, parameters? } }`,
          `tools[${i}]`,
        );
      return t;
    });
  }
  const choice = body.tool_choice;
  if (choice !== undefined && choice !== null && choice !== 'auto' && choice !== 'none')
    throw bad(`tool_choice ${JSON.stringify(choice)} is not supported (use 'auto' or 'none')`, 'tool_choice');
  const toolCallsAllowed = tools.length > 0 && choice !== 'none';
  if (choice === 'none') tools = [];
  const n = body.n;
  if (n !== undefined && n !== null && n !== 1) throw bad('n must be 1', 'n');
  let maxTokens: number | undefined;
  for (const key of ['max_completion_tokens', 'max_tokens']) {
    const v = body[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
      throw bad(`${key} must be a positive integer, got ${JSON.stringify(v)}`, key);
    maxTokens ??= v;
  }
  const seed = body.seed;
  if (seed !== undefined && seed !== null && (typeof seed !== 'number' || !Number.isSafeInteger(seed) || seed < 0))
    throw bad(`seed must be a non-negative integer, got ${JSON.stringify(seed)}`, 'seed');
  const stop = body.stop;
  if (stop !== undefined && stop !== null && !(Array.isArray(stop) && stop.length === 0))
    throw bad('stop sequences are not supported (the reply ends at the chat template end token)', 'stop');
  const top = body.top_logprobs;
  if (top !== undefined && top !== null && top !== 0)
    throw bad('top_logprobs is not supported (only the sampled tokens have log-probs)', 'top_logprobs');
  for (const key of ['stream', 'logprobs', 'return_token_ids']) {
    if (body[key] !== undefined && body[key] !== null && typeof body[key] !== 'boolean')
      throw bad(`${key} must be a boolean`, key);
  }
  const sessionId = body.session_id;
  if (
    sessionId !== undefined &&
    sessionId !== null &&
    (typeof sessionId !== 'string' || sessionId === '' || sessionId.length > 256)
  )
    throw bad('session_id must be a non-empty string of at most 256 characters', 'session_id');
  const streamOptions = body.stream_options;
  const req: ChatRequest = {
    ...checkChatFields(body),
    model: body.model,
    messages,
    tools,
    toolCallsAllowed,
    temperature: number(body, 'temperature', 0, 2, 1),
    topP: number(body, 'top_p', Number.MIN_VALUE, 1, 1),
    stream: body.stream === true,
    streamUsage: isObject(streamOptions) && streamOptions.include_usage === true,
    logprobs: body.logprobs === true,
    returnTokenIds: body.return_token_ids === true,
  };
  if (maxTokens !== undefined) req.maxTokens = maxTokens;
  if (typeof seed === 'number') req.seed = seed;
  if (typeof sessionId === 'string') req.sessionId = sessionId;
  return req;
}
