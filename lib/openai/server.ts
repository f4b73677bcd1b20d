/**
 * `sinkflex serve`: the built-in policy behind an OpenAI-compatible HTTP API (node:http, no
 * framework), so any OpenAI-compatible agent harness can drive a trained checkpoint.
 *
 * - `GET /v1/models`: the served model (`owned_by: "sinkflex"`).
 * - `POST /v1/chat/completions`: messages + tools in, an assistant message out (`tool_calls`
 *   and `finish_reason: "tool_calls"` when it calls tools); `stream: true` sends server-sent
 *   events; `seed`, `temperature`, `top_p`, `max_tokens`; `logprobs: true` gives each sampled
 *   token's log-prob; `return_token_ids: true` (vLLM's extension) gives `prompt_token_ids`
 *   and the choice's `token_ids`; `session_id` (this server's extension) continues a kept
 *   conversation (see {@link ChatEngine}). Requests are validated (400 with an OpenAI-style
 *   error JSON); concurrent requests are batched by the policy itself.
 * - A reply the chat template cannot parse is returned as text (special sections written as
 *   Hermes `<tool_call>` blocks, as the agent loop hands it to an environment).
 * - `GET /health`: `{ status: "ok" }`.
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import type { ChatTemplate } from '../model/chat-template.js';
import type { TokenPolicy as ModelTokenPolicy } from '../model/policy.js';
import { rawActionText } from '../rollout/turns.js';
import { ChatEngine, type ChatEngineOptions, type EngineResult } from './chat-engine.js';
import { parseChatRequest, RequestError, type ChatRequest } from './server-request.js';

/** Options of {@link startChatServer}. */
export interface ChatServerOptions extends ChatEngineOptions {
  /** The model-level policy to serve (e.g. a loaded `TransformerPolicy`). */
  policy: ModelTokenPolicy;
  /** Its chat template. */
  template: ChatTemplate;
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
  onRequest?: (info: { status: number; ms: number; promptTokens: number; completionTokens: number; continued: boolean }) => void;
}

/** A running server. */
export interface ChatServer {
  /** `http://host:port/v1`. */
  readonly baseURL: string;
  /** The port it listens on. */
  readonly port: number;
  /** The engine (its stats count requests and kept conversations). */
  readonly engine: ChatEngine;
  /** Stops listening, ends open connections and frees kept conversations. */
  close(): Promise<void>;
}

function sendJSON(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(new RequestError(413, `the request body is larger than ${limit} bytes`, null, 'request_too_large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

let completionCounter = 0;

/** The OpenAI-style completion for an engine result. */
function completionBody(template: ChatTemplate, model: string, req: ChatRequest, r: EngineResult): { id: string; message: Record<string, unknown>; finish: string; body: Record<string, unknown> } {
  const id = `chatcmpl-sfx${++completionCounter}`;
  const parsed = r.finishReason === 'stop' ? template.parseAssistant(r.tokens, `call_${completionCounter}_`) : null;
  let message: Record<string, unknown>;
  let finish: string = r.finishReason;
  if (parsed && parsed.ok) {
    message = { role: 'assistant', content: parsed.message.content ?? null };
    if (parsed.message.tool_calls && parsed.message.tool_calls.length > 0) {
      message.tool_calls = parsed.message.tool_calls;
      finish = 'tool_calls';
    }
  } else message = { role: 'assistant', content: rawActionText(template, r.tokens) };
  const choice: Record<string, unknown> = { index: 0, message, finish_reason: finish };
  const tok = template.tokenizer;
  if (req.logprobs) choice.logprobs = { content: r.tokens.map((t, i) => ({ token: tok.decode([t]), logprob: r.logProbs[i], bytes: Array.from(tok.decodeBytes([t])), top_logprobs: [] })) };
  if (req.returnTokenIds) choice.token_ids = r.tokens;
  const body: Record<string, unknown> = {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    system_fingerprint: 'sinkflex',
    choices: [choice],
    usage: { prompt_tokens: r.promptTokens.length, completion_tokens: r.tokens.length, total_tokens: r.promptTokens.length + r.tokens.length },
  };
  if (req.returnTokenIds) body.prompt_token_ids = r.promptTokens;
  return { id, message, finish, body };
}

function sendStream(res: ServerResponse, model: string, req: ChatRequest, c: ReturnType<typeof completionBody>): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const base = { id: c.id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model, system_fingerprint: 'sinkflex' };
  const send = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}): void => {
    res.write(`data: ${JSON.stringify({ ...base, choices: [{ index: 0, ...choice }], ...extra })}\n\n`);
  };
  const choice = (c.body.choices as Record<string, unknown>[])[0];
  send({ delta: { role: 'assistant', content: '' }, finish_reason: null });
  if (typeof c.message.content === 'string' && c.message.content !== '') send({ delta: { content: c.message.content }, finish_reason: null, ...(choice.logprobs ? { logprobs: choice.logprobs } : {}) });
  const calls = (c.message.tool_calls ?? []) as { id?: string; function: { name: string; arguments: string } }[];
  calls.forEach((call, i) => send({ delta: { tool_calls: [{ index: i, id: call.id, type: 'function', function: { name: call.function.name, arguments: call.function.arguments } }] }, finish_reason: null }));
  send({ delta: {}, finish_reason: c.finish, ...(choice.token_ids ? { token_ids: choice.token_ids } : {}) });
  if (req.streamUsage) res.write(`data: ${JSON.stringify({ ...base, choices: [], usage: c.body.usage })}\n\n`);
  res.write('data: [DONE]\n\n');
  res.end();
}

/** Starts the server (resolves once it listens). */
export async function startChatServer(options: ChatServerOptions): Promise<ChatServer> {
  if (options === null || typeof options !== 'object') throw new TypeError('startChatServer expects an options object');
  if (!options.policy || typeof options.policy.createSession !== 'function') throw new TypeError('options.policy must be a model-level TokenPolicy');
  if (!options.template || typeof options.template.render !== 'function') throw new TypeError('options.template must be a ChatTemplate');
  const engine = new ChatEngine(options.policy, options.template, options);
  const model = options.modelName ?? 'sinkflex';
  const limit = options.maxBodyBytes ?? 32 * 2 ** 20;
  const created = Math.floor(Date.now() / 1000);

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = (req.url ?? '/').split('?')[0].replace(/\/+$/, '');
    if (url === '/health') return sendJSON(res, 200, { status: 'ok' });
    if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`) throw new RequestError(401, 'invalid or missing API key (Authorization: Bearer …)', null, 'invalid_api_key');
    if (url === '/v1/models') {
      if (req.method !== 'GET') throw new RequestError(405, `${req.method} is not allowed on /v1/models`);
      return sendJSON(res, 200, { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'sinkflex', max_model_len: options.policy.contextLength }] });
    }
    if (url !== '/v1/chat/completions') throw new RequestError(404, `no route ${req.method} ${url}`, null, 'not_found');
    if (req.method !== 'POST') throw new RequestError(405, `${req.method} is not allowed on /v1/chat/completions`);
    const t0 = performance.now();
    const text = await readBody(req, limit);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (e) {
      throw new RequestError(400, `the request body is not JSON: ${(e as Error).message}`, null, 'invalid_json');
    }
    const chat = parseChatRequest(json);
    if (chat.model !== model) throw new RequestError(404, `the model '${chat.model}' does not exist (this server serves '${model}')`, 'model', 'model_not_found');
    const r = await engine.complete(chat);
    const c = completionBody(options.template, model, chat, r);
    if (chat.stream) sendStream(res, model, chat, c);
    else sendJSON(res, 200, c.body);
    options.onRequest?.({ status: 200, ms: performance.now() - t0, promptTokens: r.promptTokens.length, completionTokens: r.tokens.length, continued: r.continued });
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      const err = e instanceof RequestError ? e : new RequestError(500, `internal error: ${e instanceof Error ? e.message : String(e)}`, null, 'internal_error');
      if (!res.headersSent) sendJSON(res, err.status, err.toJSON());
      else res.end();
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
  return {
    baseURL: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${addr.port}/v1`,
    port: addr.port,
    engine,
    close: () =>
      new Promise<void>((resolve) => {
        engine.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
