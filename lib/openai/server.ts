/**
 * `sinkflex serve`: the built-in policy behind an OpenAI-compatible HTTP API (node:http, no
 * framework), so any OpenAI-compatible agent harness can drive a trained checkpoint.
 *
 * - `GET /v1/models`: the served model (`owned_by: "sinkflex"`).
 * - `POST /v1/chat/completions`: messages + tools in, an assistant message out (`tool_calls`
 *   and `finish_reason: "tool_calls"` when it calls tools offered by the request, and not with
 *   `tool_choice: "none"`; `reasoning_content` when the format splits reasoning off; the other
 *   OpenAI fields checked in request-fields.ts); `stream: true` streams the reply
 *   as it is sampled (`chat.completion.chunk` server-sent events, see server-stream.ts);
 *   `seed`, `temperature`, `top_p`, `max_tokens`; `logprobs: true` gives each sampled
 *   token's log-prob; `return_token_ids: true` (vLLM's extension) gives `prompt_token_ids`
 *   and the choice's `token_ids`; `session_id` (this server's extension) continues a kept
 *   conversation (see {@link ChatEngine}). Requests are validated (400 with an OpenAI-style
 *   error JSON); concurrent requests are batched by the policy itself. A prompt that cannot
 *   fit the context is refused before it is tokenized when its length alone shows it; a body
 *   over `maxBodyBytes` gets its 413 (the rest of the upload is dropped, not buffered). A
 *   client that disconnects stops its generation.
 * - A reply the chat format cannot parse is returned as text (special sections written as
 *   Hermes `<tool_call>` blocks, as the agent loop hands it to an environment).
 * - The chat format is any {@link ChatFormat}: the built-in template, or a pretrained model's
 *   (its Jinja template or harmony; `sinkflex serve --model-dir`).
 * - `GET /health`: `{ status: "ok" }`.
 * - `GET /v1/models` (the base model and the loaded LoRA adapters), `POST /v1/completions`
 *   (token-in/token-out), the runtime LoRA routes and `POST /update_weights_from_disk`: see
 *   serving-routes.ts. A chat request may name a loaded adapter as its model.
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import type { ChatFormat } from '../chat/chat-format.js';
import type { ChatToolCall } from '../chat/messages.js';
import type { GenerativeModel } from '../model/policy.js';
import { rawActionText } from '../rollout/turns.js';
import { ClientGone } from './abort.js';
import { ChatEngine, type ChatEngineOptions, type EngineResult } from './chat-engine.js';
import type { AdapterHost, WeightsHost } from './model-hosts.js';
import { parseChatRequest, RequestError, type ChatRequest } from './server-request.js';
import type { SamplingDefaults } from './sampling-defaults.js';
import { ServingRoutes, type AdminEvent } from './serving-routes.js';
import { ReplyStream, SseReply } from './server-stream.js';
import { HarmonyReplyStream } from './stream-harmony.js';
import { HermesReplyStream, type ReplyDelta } from './stream-hermes.js';
import { HarmonyChatFormat } from '../chat/hf/harmony-format.js';
import { JinjaChatFormat } from '../chat/hf/jinja-format.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

/** Options of {@link startChatServer}. */
export interface ChatServerOptions extends ChatEngineOptions {
  /** The model to serve (e.g. a loaded `TransformerPolicy`). */
  policy: GenerativeModel;
  /** Its chat format (the built-in `ChatTemplate`, or a pretrained model's `chat`). */
  chat: ChatFormat;
  /** The model name clients ask for. Default `sinkflex`. */
  modelName?: string;
  /** Host to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Port (0: any free port). Default 8000. */
  port?: number;
  /** When set, requests must send `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Largest request body in bytes. Default 32 MiB. */
  maxBodyBytes?: number;
  /** Called after each completion request (for logs). */
  onRequest?: (info: {
    status: number;
    ms: number;
    promptTokens: number;
    completionTokens: number;
    continued: boolean;
  }) => void;
  /** Called after each adapter load or unload and weight reload, refused ones included (for logs). */
  onAdmin?: (info: AdminEvent) => void;
  /** Runtime LoRA adapters (`/v1/load_lora_adapter`, `/v1/unload_lora_adapter`); without it those routes answer 404. */
  adapters?: AdapterHost;
  /** Full weight reloads (`/update_weights_from_disk`); without it that route answers 404. */
  weights?: WeightsHost;
  /** Completions: defaults of the sampling fields a request leaves out (see lib/openai/sampling-defaults.ts). */
  samplingDefaults?: SamplingDefaults;
  /** Completions: vLLM's `--logprobs-mode` (default `processed_logprobs`). */
  logprobsMode?: 'raw_logprobs' | 'processed_logprobs';
}

/** A running server. */
export interface ChatServer {
  /** `http://host:port/v1`. */
  readonly baseURL: string;
  /** The port it listens on. */
  readonly port: number;
  /** The engine (its stats count requests and kept conversations). */
  readonly engine: ChatEngine;
  /** The completions, adapter and weight routes (their engine's stats count completions). */
  readonly routes: ServingRoutes;
  /** Stops listening, ends open connections and frees kept conversations. */
  dispose(): Promise<void>;
  /** {@link dispose} (for `await using`). */
  [Symbol.asyncDispose](): Promise<void>;
}

function sendJSON(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The body was larger than the limit; the 413 is written by {@link readBody} itself. */
class BodyTooLarge extends RequestError {}

/**
 * Reads a request body of at most `limit` bytes. A larger one is refused at once: buffering
 * stops, the 413 (with `connection: close`) is written in full, and the rest of the upload is
 * read and dropped — up to `dropLimit` more bytes or `lingerMs` — before the response ends and
 * the connection closes (a lingering close, RFC 9112 §9.6). A client that reads the response
 * while it uploads (curl, fetch) stops there; one that uploads everything first (Python's
 * urllib) still gets its 413 instead of a connection reset.
 */
function readBody(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  dropLimit: number,
  lingerMs: number,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    let dropped = 0;
    let timer: NodeJS.Timeout | undefined;
    const close = (): void => {
      clearTimeout(timer);
      if (!res.writableEnded) res.end();
      req.off('data', onData);
      req.resume();
      if (dropped > dropLimit) req.socket.destroy();
    };
    const onData = (c: Buffer): void => {
      if (refused) {
        dropped += c.length;
        if (dropped > dropLimit) close();
        return;
      }
      size += c.length;
      if (size > limit) {
        refused = true;
        chunks.length = 0;
        const err = new BodyTooLarge(413, `the request body is larger than ${limit} bytes`, null, 'request_too_large');
        const text = JSON.stringify(err.toJSON());
        res.writeHead(413, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
          connection: 'close',
        });
        res.write(text);
        timer = setTimeout(close, lingerMs);
        timer.unref();
        reject(err);
        return;
      }
      chunks.push(c);
    };
    req.on('data', onData);
    req.on('end', () => {
      if (refused) close();
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('error', (e) => {
      if (refused) close();
      else reject(e);
    });
  });
}

let completionCounter = 0;

/** The id of a new completion and the prefix of its tool-call ids. */
function newCompletionId(): { id: string; callPrefix: string } {
  const n = ++completionCounter;
  return { id: `chatcmpl-sfx${n}`, callPrefix: `call_${n}_` };
}

/**
 * The log-probs entries of some sampled tokens (OpenAI's `logprobs.content`): each token's text
 * and its bytes (the tokenizer's `tokenBytes` where it has one, else the UTF-8 of its text).
 */
function logprobEntries(
  chat: ChatFormat,
  tokens: readonly number[],
  logProbs: readonly number[],
  skipSpecialTokens: boolean,
): Record<string, unknown>[] {
  const tok = chat.tokenizer;
  return tokens.map((t, i) => {
    const text = tok.decode([t], { skipSpecialTokens });
    // a special token left out of the text has no bytes either
    const bytes = text === '' ? [] : Array.from(tok.tokenBytes ? tok.tokenBytes(t) : new TextEncoder().encode(text));
    return { token: text, logprob: logProbs[i], bytes, top_logprobs: [] };
  });
}

/** The OpenAI-style completion for an engine result. */
function completionBody(
  chat: ChatFormat,
  model: string,
  req: ChatRequest,
  r: EngineResult,
  ids = newCompletionId(),
): { id: string; message: Record<string, unknown>; finish: string; body: Record<string, unknown> } {
  const { id, callPrefix } = ids;
  const parsed = r.finishReason === 'stop' ? chat.parseAssistant(r.tokens, callPrefix) : null;
  let message: Record<string, unknown>;
  let finish: string = r.finishReason;
  const calls = parsed && parsed.ok ? (parsed.message.tool_calls ?? []) : [];
  const reasoning = parsed && parsed.ok ? parsed.message.reasoning_content : undefined;
  if (parsed && parsed.ok && (calls.length === 0 || req.toolCallsAllowed)) {
    message = { role: 'assistant', content: parsed.message.content ?? null };
    if (reasoning) message.reasoning_content = reasoning;
    if (calls.length > 0) {
      // parallel_tool_calls: false keeps the first call only
      message.tool_calls = req.parallelToolCalls ? calls : calls.slice(0, 1);
      finish = 'tool_calls';
    }
  } else {
    // unparsable, or tool calls without tools offered (no tools, tool_choice 'none'): the text as is
    message = { role: 'assistant', content: rawActionText(chat, r.tokens) };
    if (reasoning) message.reasoning_content = reasoning;
  }
  const choice: Record<string, unknown> = { index: 0, message, finish_reason: finish };
  if (req.logprobs) choice.logprobs = { content: logprobEntries(chat, r.tokens, r.logProbs, req.skipSpecialTokens) };
  if (req.returnTokenIds) choice.token_ids = r.tokens;
  const body: Record<string, unknown> = {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    system_fingerprint: 'sinkflex',
    choices: [choice],
    usage: {
      prompt_tokens: r.promptTokens.length,
      completion_tokens: r.tokens.length,
      total_tokens: r.promptTokens.length + r.tokens.length,
    },
  };
  if (req.returnTokenIds) body.prompt_token_ids = r.promptTokens;
  return { id, message, finish, body };
}

/** The error as the server answers it (499 when the client went away, 500 for a failure of ours). */
function asRequestError(e: unknown): RequestError {
  if (e instanceof RequestError) return e;
  // 499: the client closed the connection before the reply (nginx's code, for the log)
  if (e instanceof ClientGone) return new RequestError(499, e.message, null, 'client_closed');
  return new RequestError(500, `internal error: ${e instanceof Error ? e.message : String(e)}`, null, 'internal_error');
}

const SERVER_KEYS = optionKeys<ChatServerOptions>({
  policy: true,
  chat: true,
  modelName: true,
  host: true,
  port: true,
  apiKey: true,
  maxBodyBytes: true,
  onRequest: true,
  onAdmin: true,
  adapters: true,
  weights: true,
  samplingDefaults: true,
  logprobsMode: true,
  defaultMaxTokens: true,
  maxSessions: true,
  sessionTtlMs: true,
  renderTools: true,
});

/** Starts the server (resolves once it listens). */
export async function startChatServer(options: ChatServerOptions): Promise<ChatServer> {
  if (options === null || typeof options !== 'object') throw new TypeError('startChatServer expects an options object');
  refuseUnknownOptions(options, SERVER_KEYS, 'startChatServer');
  if (!options.policy || typeof options.policy.createSession !== 'function')
    throw new TypeError('options.policy must be a GenerativeModel (createSession)');
  if (
    !options.chat ||
    typeof options.chat.renderTokens !== 'function' ||
    typeof options.chat.parseAssistant !== 'function'
  ) {
    throw new TypeError("options.chat must be a ChatFormat (a ChatTemplate, or a pretrained model's chat)");
  }
  const engine = new ChatEngine(options.policy, options.chat, options);
  const format = options.chat;
  const model = options.modelName ?? 'sinkflex';
  const limit = options.maxBodyBytes ?? 32 * 2 ** 20;
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new RangeError('options.maxBodyBytes must be a positive integer');
  const created = Math.floor(Date.now() / 1000);
  const routes = new ServingRoutes({
    policy: options.policy,
    tokenizer: format.tokenizer,
    modelName: model,
    created,
    ...(options.adapters ? { adapters: options.adapters } : {}),
    ...(options.weights ? { weights: options.weights } : {}),
    ...(options.samplingDefaults ? { samplingDefaults: options.samplingDefaults } : {}),
    ...(options.logprobsMode ? { logprobsMode: options.logprobsMode } : {}),
    chat: { base: engine, create: (m) => new ChatEngine(m, format, options) },
    maxSessions: options.maxSessions,
    sessionTtlMs: options.sessionTtlMs,
    ...(options.onRequest ? { onRequest: options.onRequest } : {}),
    ...(options.onAdmin ? { onAdmin: options.onAdmin } : {}),
  });
  const readJson = async (req: IncomingMessage, res: ServerResponse): Promise<unknown> => {
    const text = await readBody(req, res, limit, Math.max(limit, 64 * 2 ** 20), 10000);
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new RequestError(400, `the request body is not JSON: ${(e as Error).message}`, null, 'invalid_json');
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = (req.url ?? '/').split('?')[0].replace(/\/+$/, '');
    if (url === '/health') return sendJSON(res, 200, { status: 'ok' });
    if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`)
      throw new RequestError(401, 'invalid or missing API key (Authorization: Bearer …)', null, 'invalid_api_key');
    if (await routes.handle(req, res, url, () => readJson(req, res))) return;
    if (url !== '/v1/chat/completions') throw new RequestError(404, `no route ${req.method} ${url}`, null, 'not_found');
    if (req.method !== 'POST') throw new RequestError(405, `${req.method} is not allowed on /v1/chat/completions`);
    const t0 = performance.now();
    const chat = parseChatRequest(await readJson(req, res));
    const release = await routes.admit();
    try {
      await chatCompletion(res, chat, t0);
    } finally {
      release();
    }
  };

  const chatCompletion = async (res: ServerResponse, chat: ChatRequest, t0: number): Promise<void> => {
    const engine = routes.chatEngine(chat.model);
    if (!engine)
      throw new RequestError(
        404,
        `the model '${chat.model}' does not exist (this server serves '${model}')`,
        'model',
        'model_not_found',
      );
    // a client that goes away stops its generation (and frees its session)
    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) gone.abort(new ClientGone());
    });
    const ids = newCompletionId();
    const sse = chat.stream ? new SseReply(res, ids.id, chat.model) : null;
    const reply = chat.stream ? new ReplyStream(format) : null;
    // a Jinja template's replies (<think>, Hermes calls) and harmony's (gpt-oss) stream reasoning, content and calls
    const formatStream = !chat.stream
      ? null
      : format instanceof JinjaChatFormat
        ? new HermesReplyStream(format.tokenizer, format.stopTokens, chat.toolCallsAllowed, ids.callPrefix)
        : format instanceof HarmonyChatFormat
          ? new HarmonyReplyStream(format.tokenizer, format.stopTokens, chat.toolCallsAllowed, ids.callPrefix)
          : null;
    let callsSent = 0;
    const send = (d: ReplyDelta, logprobs?: unknown[]): void => {
      sse?.reasoning(d.reasoning);
      sse?.content(d.content, logprobs);
      const calls = chat.parallelToolCalls ? d.toolCalls : d.toolCalls.slice(0, Math.max(0, 1 - callsSent));
      sse?.toolCalls(calls, callsSent);
      callsSent += calls.length;
    };
    if (!sse || !reply) {
      const r = await engine.complete(chat, { signal: gone.signal });
      sendJSON(res, 200, completionBody(format, chat.model, chat, r, ids).body);
      options.onRequest?.({
        status: 200,
        ms: performance.now() - t0,
        promptTokens: r.promptTokens.length,
        completionTokens: r.tokens.length,
        continued: r.continued,
      });
      return;
    }
    let r: EngineResult;
    try {
      r = await engine.complete(chat, {
        signal: gone.signal,
        onTokens: (tokens, logProbs) => {
          sse.begin(); // the stream begins with the first sampled token, whatever it is
          const lps = chat.logprobs ? logprobEntries(format, tokens, logProbs, chat.skipSpecialTokens) : undefined;
          if (formatStream) send(formatStream.push(tokens), lps);
          else sse.content(reply.push(tokens), lps);
        },
      });
      const c = completionBody(format, chat.model, chat, r, ids);
      const content = typeof c.message.content === 'string' ? c.message.content : null;
      const calls = (c.message.tool_calls ?? []) as ChatToolCall[];
      if (formatStream)
        send(
          formatStream.finish({
            content,
            reasoning: typeof c.message.reasoning_content === 'string' ? c.message.reasoning_content : null,
            toolCalls: calls,
          }),
        );
      else {
        sse.content(reply.finish(content));
        sse.toolCalls(calls);
      }
      sse.end(
        c.finish,
        chat.returnTokenIds ? r.tokens : undefined,
        chat.streamUsage ? (c.body.usage as Record<string, unknown>) : undefined,
      );
    } catch (e) {
      // once the stream has begun, an error goes as an error event (the status is sent)
      if (sse.begun && !(e instanceof ClientGone)) sse.fail(asRequestError(e).toJSON().error);
      throw e;
    }
    options.onRequest?.({
      status: 200,
      ms: performance.now() - t0,
      promptTokens: r.promptTokens.length,
      completionTokens: r.tokens.length,
      continued: r.continued,
    });
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      const err = asRequestError(e);
      if (e instanceof BodyTooLarge || e instanceof ClientGone) {
        // the 413 is already on its way (readBody); nobody is left to answer
      } else if (!res.headersSent) sendJSON(res, err.status, err.toJSON());
      else if (!res.writableEnded) res.end();
      if (!routes.reported(e))
        options.onRequest?.({ status: err.status, ms: 0, promptTokens: 0, completionTokens: 0, continued: false });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8000, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const dispose = (): Promise<void> =>
    new Promise<void>((resolve) => {
      engine.dispose();
      routes.dispose();
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return {
    baseURL: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${addr.port}/v1`,
    port: addr.port,
    engine,
    routes,
    dispose,
    [Symbol.asyncDispose]: dispose,
  };
}
