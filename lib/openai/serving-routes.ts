/**
 * The routes of `sinkflex serve` beyond chat completions, in vLLM's and SGLang's shapes, so that
 * a trainer drives it as it drives those engines:
 *
 * - `POST /v1/completions`: token-in/token-out completions (vLLM's subset): `prompt` as token
 *   ids (or text, tokenized), `max_tokens`, `temperature`, `top_p`, `top_k`, `min_p`,
 *   `repetition_penalty`, `presence_penalty`, `frequency_penalty` (a field left out takes the
 *   model's generation-config default as vLLM's does: lib/openai/sampling-defaults.ts), `seed`,
 *   `stop_token_ids`, `logprobs: 0` (the sampled tokens' log-probs as vLLM's `--logprobs-mode`
 *   says: {@link ServingRoutesOptions.logprobsMode}, in `choices[0].logprobs.{tokens,
 *   token_logprobs, text_offset, top_logprobs}`), `return_tokens_as_token_ids` (those tokens as `token_id:<id>`),
 *   `return_token_ids` (`choices[0].token_ids` and `prompt_token_ids`), `session_id` (this
 *   server's extension: see {@link CompletionEngine}); `model` names the base model or a loaded
 *   adapter (absent: the base model).
 * - `POST /v1/load_lora_adapter` `{ lora_name, lora_path, load_inplace? }` and
 *   `POST /v1/unload_lora_adapter` `{ lora_name }`: runtime LoRA adapters (vLLM's requests,
 *   answers and errors: 200 with a plain-text `Success: …`; 400 for a missing field, a name
 *   already loaded or an adapter the host refuses; 404 for an unknown adapter and for a path
 *   without an adapter), through an {@link AdapterHost}; 404 when the server has none.
 * - `POST /update_weights_from_disk` `{ model_path }` (SGLang's route and answer, `{ success,
 *   message }`): reloads the served weights through a {@link WeightsHost}; 404 when there is none.
 * - `GET /v1/models`: the base model and the loaded adapters (each with vLLM's `parent`, the
 *   base model, and `root`, its path).
 *
 * Every change of what is served waits for the requests in flight (new ones wait meanwhile:
 * {@link ServingRoutes.admit}) and drops the kept sessions it makes stale.
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

import type { ChatFormatTokenizer } from '../chat/chat-format.js';
import type { GenerativeModel } from '../model/policy.js';
import { ClientGone } from './abort.js';
import type { ChatEngine } from './chat-engine.js';
import { parseCompletionRequest, type CompletionRequestParams } from './completion-request.js';
import { CompletionEngine, type EngineCompletionResult } from './completion-engine.js';
import { AdapterNotFoundError, type AdapterHost, type WeightsHost } from './model-hosts.js';
import { resolveSampling, type SamplingDefaults } from './sampling-defaults.js';
import { RequestError } from './server-request.js';

/** Options of {@link ServingRoutes}. */
export interface ServingRoutesOptions {
  /** The served base model. */
  policy: GenerativeModel;
  /** Its tokenizer (text prompts, and the decoded text of completions). */
  tokenizer: ChatFormatTokenizer;
  /** The base model's name. */
  modelName: string;
  /** When the server started (seconds; `created` of the models list). */
  created: number;
  /** Runtime LoRA adapters; without it the adapter routes answer 404. */
  adapters?: AdapterHost;
  /** Full weight reloads; without it `/update_weights_from_disk` answers 404. */
  weights?: WeightsHost;
  /** The base model's chat engine, and how to make one for an adapter (chat completions naming an adapter). */
  chat: { base: ChatEngine; create: (model: GenerativeModel) => ChatEngine };
  /** Defaults of the sampling fields a completions request leaves out (the model's generation config; default none). */
  samplingDefaults?: SamplingDefaults;
  /**
   * vLLM's `--logprobs-mode` for completions: `processed_logprobs` (default: after the penalties,
   * the temperature and min_p/top-k/top-p, renormalised) or `raw_logprobs` (vLLM's default: the
   * model's own log-softmax, before the temperature).
   */
  logprobsMode?: 'raw_logprobs' | 'processed_logprobs';
  /** Completion sessions kept (`session_id`). Default 256. */
  maxSessions?: number;
  /** A kept completion session idle this long (ms) is dropped. Default 600000. */
  sessionTtlMs?: number;
  /** Called after each completions request (for logs). */
  onRequest?: (info: {
    status: number;
    ms: number;
    promptTokens: number;
    completionTokens: number;
    continued: boolean;
  }) => void;
  /** Called after each adapter load or unload and weight reload, refused ones included (for logs). */
  onAdmin?: (info: AdminEvent) => void;
}

/** One request to change what is served (see {@link ServingRoutesOptions.onAdmin}). */
export interface AdminEvent {
  /** The route, without its `/v1` prefix. */
  action: 'load_lora_adapter' | 'unload_lora_adapter' | 'update_weights_from_disk';
  /** The adapter's name (`lora_name`; null for weights or when absent). */
  name: string | null;
  /** `lora_path` or `model_path` (null for an unload or when absent). */
  path: string | null;
  /** The HTTP status answered. */
  status: number;
  /** Milliseconds from the request's arrival to the answer (waiting for requests in flight included). */
  ms: number;
  /** Why it was refused (null when it succeeded). */
  error: string | null;
}

/** Reads and parses the request's JSON body (400 when it is not JSON, 413 when too large). */
export type JsonBodyReader = () => Promise<unknown>;

let completionCounter = 0;

/** vLLM clamps log-probs at -9999 so that they stay JSON numbers. */
const clampLogProb = (x: number): number => Math.max(x, -9999);

function sendJSON(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function field(body: unknown, key: string): unknown {
  return body !== null && typeof body === 'object' && !Array.isArray(body)
    ? (body as Record<string, unknown>)[key]
    : undefined;
}

/**
 * The tokenizer's own end-of-sequence id (a Hugging Face tokenizer's `eos_token`), or null: vLLM
 * answers `stop_reason: null` when a completion ends with it (its EOS check comes before the
 * `stop_token_ids` one, which answers the stop token's id).
 */
function tokenizerEos(tokenizer: ChatFormatTokenizer): number | null {
  const t = tokenizer as ChatFormatTokenizer & {
    specialTokensMap?: { eos_token?: unknown };
    tokenToId?: (token: string) => number | undefined;
  };
  const eos = t.specialTokensMap?.eos_token;
  if (typeof eos !== 'string' || typeof t.tokenToId !== 'function') return null;
  return t.tokenToId(eos) ?? null;
}

/** The routes (see the module description). */
export class ServingRoutes {
  /** The completions engine (its stats count requests and kept sessions). */
  readonly completions: CompletionEngine;
  private readonly adapterPaths = new Map<string, string>();
  private readonly chatEngines = new Map<string, ChatEngine>();
  private inFlight = 0;
  private gate: Promise<void> | null = null;
  private drained: (() => void) | null = null;
  private adminQueue: Promise<unknown> = Promise.resolve();
  private readonly reportedErrors = new WeakSet<object>();

  private readonly eos: number | null;

  /** @param options - the served model, hosts, chat engines, limits. */
  constructor(private readonly options: ServingRoutesOptions) {
    this.completions = new CompletionEngine({ maxSessions: options.maxSessions, sessionTtlMs: options.sessionTtlMs });
    this.eos = tokenizerEos(options.tokenizer);
  }

  /**
   * Waits while what is served changes, then counts a request in flight; call the returned
   * function when it is done.
   */
  async admit(): Promise<() => void> {
    while (this.gate) await this.gate;
    this.inFlight++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.inFlight--;
      if (this.inFlight === 0) this.drained?.();
    };
  }

  /** Runs `change` with no request in flight and new ones held back, one change at a time. */
  private exclusive<T>(change: () => Promise<T>): Promise<T> {
    const run = async (): Promise<T> => {
      let open = (): void => undefined;
      this.gate = new Promise<void>((r) => (open = r));
      try {
        if (this.inFlight > 0) await new Promise<void>((r) => (this.drained = r));
        this.drained = null;
        return await change();
      } finally {
        this.gate = null;
        open();
      }
    };
    const p = this.adminQueue.then(run, run);
    this.adminQueue = p.catch(() => undefined);
    return p;
  }

  /** The model a request names: the base model (also when absent) or a loaded adapter's; undefined for an unknown name. */
  modelFor(name: string | null): GenerativeModel | undefined {
    if (name === null || name === this.options.modelName) return this.options.policy;
    if (!this.adapterPaths.has(name)) return undefined;
    return this.options.adapters?.model(name);
  }

  /** The chat engine of the model a chat request names, or undefined for an unknown name. */
  chatEngine(name: string): ChatEngine | undefined {
    if (name === this.options.modelName) return this.options.chat.base;
    const model = this.modelFor(name);
    if (!model) return undefined;
    let e = this.chatEngines.get(name);
    if (!e) {
      e = this.options.chat.create(model);
      this.chatEngines.set(name, e);
    }
    return e;
  }

  /** The `GET /v1/models` body: the base model, then the adapters. */
  models(): Record<string, unknown> {
    const o = this.options;
    const base = {
      id: o.modelName,
      object: 'model',
      created: o.created,
      owned_by: 'sinkflex',
      root: o.modelName,
      parent: null,
      max_model_len: o.policy.contextLength,
    };
    const adapters = [...this.adapterPaths].map(([id, root]) => ({
      id,
      object: 'model',
      created: o.created,
      owned_by: 'sinkflex',
      root,
      parent: o.modelName,
      max_model_len: o.policy.contextLength,
    }));
    return { object: 'list', data: [base, ...adapters] };
  }

  /**
   * Serves the request when it is one of these routes (resolves true); false leaves it to the
   * caller. Errors are thrown as {@link RequestError}s (the caller answers them).
   */
  async handle(req: IncomingMessage, res: ServerResponse, url: string, readJson: JsonBodyReader): Promise<boolean> {
    switch (url) {
      case '/v1/models':
        if (req.method !== 'GET') throw new RequestError(405, `${req.method} is not allowed on /v1/models`);
        sendJSON(res, 200, this.models());
        return true;
      case '/v1/completions':
        this.post(req, url);
        await this.complete(res, await readJson());
        return true;
      case '/v1/load_lora_adapter':
        this.post(req, url);
        await this.logged('load_lora_adapter', res, await readJson(), (body) => this.loadAdapter(res, body));
        return true;
      case '/v1/unload_lora_adapter':
        this.post(req, url);
        await this.logged('unload_lora_adapter', res, await readJson(), (body) => this.unloadAdapter(res, body));
        return true;
      case '/update_weights_from_disk':
        this.post(req, url);
        await this.logged('update_weights_from_disk', res, await readJson(), (body) => this.updateWeights(res, body));
        return true;
      default:
        if (url.startsWith('/v1/models/')) {
          if (req.method !== 'GET') throw new RequestError(405, `${req.method} is not allowed on ${url}`);
          sendJSON(res, 200, this.model(decodeURIComponent(url.slice('/v1/models/'.length))));
          return true;
        }
        return false;
    }
  }

  /** The `GET /v1/models/{id}` body: one entry of {@link models} (404 for an unknown id). */
  model(id: string): Record<string, unknown> {
    const m = (this.models().data as Record<string, unknown>[]).find((e) => e.id === id);
    if (!m) throw new RequestError(404, `The model '${id}' does not exist.`, 'model', 'model_not_found');
    return m;
  }

  /** Runs an admin route and reports it to `onAdmin` (its error: thrown, or returned when already answered). */
  private async logged(
    action: AdminEvent['action'],
    res: ServerResponse,
    body: unknown,
    run: (body: unknown) => Promise<string | null | void>,
  ): Promise<void> {
    const t0 = performance.now();
    const text = (k: string): string | null => {
      const v = field(body, k);
      return typeof v === 'string' ? v : null;
    };
    const report = (status: number, error: string | null): void =>
      this.options.onAdmin?.({
        action,
        name: text('lora_name'),
        path:
          action === 'unload_lora_adapter'
            ? null
            : text(action === 'update_weights_from_disk' ? 'model_path' : 'lora_path'),
        status,
        ms: performance.now() - t0,
        error,
      });
    let answered: string | null | void;
    try {
      answered = await run(body);
    } catch (e) {
      report(e instanceof RequestError ? e.status : 500, e instanceof Error ? e.message : String(e));
      if (e !== null && typeof e === 'object') this.reportedErrors.add(e);
      throw e;
    }
    report(res.statusCode, answered ?? null);
  }

  /** Whether `error` was already reported (to `onAdmin`): the caller does not log it again. */
  reported(error: unknown): boolean {
    return error !== null && typeof error === 'object' && this.reportedErrors.has(error);
  }

  private post(req: IncomingMessage, url: string): void {
    if (req.method !== 'POST') throw new RequestError(405, `${req.method} is not allowed on ${url}`);
  }

  private async complete(res: ServerResponse, body: unknown): Promise<void> {
    const t0 = performance.now();
    const r = parseCompletionRequest(body);
    const model = this.modelFor(r.model);
    const name = r.model ?? this.options.modelName;
    if (!model)
      throw new RequestError(
        404,
        `the model '${name}' does not exist (this server serves '${this.options.modelName}'${this.adapterPaths.size > 0 ? ` and the adapters ${[...this.adapterPaths.keys()].map((a) => `'${a}'`).join(', ')}` : ''})`,
        'model',
        'model_not_found',
      );
    const vocab = model.vocabSize;
    const prompt = typeof r.prompt === 'string' ? this.options.tokenizer.encode(r.prompt) : r.prompt;
    if (prompt.length === 0) throw new RequestError(400, 'the prompt has no tokens', 'prompt', 'invalid_value');
    const badAt = (ids: readonly number[]): number => ids.findIndex((t) => t >= vocab);
    let i = badAt(prompt);
    if (i >= 0)
      throw new RequestError(
        400,
        `prompt[${i}] is ${prompt[i]}, not a token id of the model (vocabulary ${vocab})`,
        `prompt[${i}]`,
        'invalid_value',
      );
    const room = model.contextLength - prompt.length;
    if (r.maxTokens !== null && r.maxTokens > room && room >= 1) {
      throw new RequestError(
        400,
        `max_tokens is too large: ${r.maxTokens}. The model's context is ${model.contextLength} tokens and the prompt has ${prompt.length} (${r.maxTokens} > ${model.contextLength} - ${prompt.length})`,
        'max_tokens',
        'context_length_exceeded',
      );
    }
    i = badAt(r.stopTokenIds);
    if (i >= 0)
      throw new RequestError(
        400,
        `stop_token_ids[${i}] is ${r.stopTokenIds[i]}, not a token id of the model (vocabulary ${vocab})`,
        `stop_token_ids[${i}]`,
        'invalid_value',
      );
    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) gone.abort(new ClientGone());
    });
    const sampling = resolveSampling(r, this.options.samplingDefaults ?? {});
    const release = await this.admit();
    let out: EngineCompletionResult;
    try {
      const live = this.modelFor(r.model); // an adapter may have been unloaded while this request waited
      if (!live)
        throw new RequestError(404, `the model '${name}' does not exist (it was unloaded)`, 'model', 'model_not_found');
      out = await this.completions.complete(
        {
          model: live,
          modelName: name,
          prompt,
          ...sampling,
          logprobsMode: this.options.logprobsMode === 'raw_logprobs' ? 'raw' : 'processed',
          // vLLM stops at the tokenizer's EOS unless ignore_eos
          stop:
            this.eos !== null && !r.ignoreEos && !r.stopTokenIds.includes(this.eos)
              ? [...r.stopTokenIds, this.eos]
              : r.stopTokenIds,
          ...(r.seed !== undefined ? { seed: r.seed } : {}),
          ...(r.sessionId !== undefined ? { sessionId: r.sessionId } : {}),
        },
        gone.signal,
      );
    } finally {
      release();
    }
    sendJSON(res, 200, this.completionBody(name, r, prompt, out));
    this.options.onRequest?.({
      status: 200,
      ms: performance.now() - t0,
      promptTokens: prompt.length,
      completionTokens: out.tokens.length,
      continued: out.continued,
    });
  }

  /** The completion in vLLM's response shape. */
  private completionBody(
    model: string,
    r: CompletionRequestParams,
    prompt: readonly number[],
    out: EngineCompletionResult,
  ): Record<string, unknown> {
    const tok = this.options.tokenizer;
    const last = out.tokens[out.tokens.length - 1];
    const choice: Record<string, unknown> = {
      index: 0,
      text: tok.decode(out.tokens, { skipSpecialTokens: r.skipSpecialTokens }),
      logprobs: null,
      finish_reason: out.finishReason,
      // vLLM: null at the tokenizer's EOS, else the stop token id that ended it
      stop_reason: out.finishReason === 'stop' && last !== this.eos && r.stopTokenIds.includes(last) ? last : null,
      prompt_logprobs: null,
    };
    if (r.logprobs) {
      const tokens = out.tokens.map((t) =>
        r.tokensAsIds ? `token_id:${t}` : tok.decode([t], { skipSpecialTokens: r.skipSpecialTokens }),
      );
      const offsets: number[] = [];
      let at = 0;
      for (const s of tokens) {
        offsets.push(at);
        at += s.length;
      }
      const lps = out.logProbs.map(clampLogProb);
      choice.logprobs = {
        text_offset: offsets,
        token_logprobs: lps,
        tokens,
        top_logprobs: tokens.map((s, k) => ({ [s]: lps[k] })),
      };
    }
    if (r.returnTokenIds) {
      choice.token_ids = out.tokens;
      choice.prompt_token_ids = [...prompt];
    }
    return {
      id: `cmpl-sfx${++completionCounter}`,
      object: 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model,
      system_fingerprint: 'sinkflex',
      choices: [choice],
      usage: {
        prompt_tokens: prompt.length,
        completion_tokens: out.tokens.length,
        total_tokens: prompt.length + out.tokens.length,
      },
    };
  }

  private adapterHost(): AdapterHost {
    if (!this.options.adapters)
      throw new RequestError(
        404,
        'runtime LoRA adapters are not enabled on this server (it was started without an adapter host)',
        null,
        'lora_not_enabled',
      );
    return this.options.adapters;
  }

  private dropAdapterSessions(name: string): void {
    this.completions.clear(name);
    const e = this.chatEngines.get(name);
    if (e) {
      this.chatEngines.delete(name);
      e.dispose();
    }
  }

  /** Drops every kept session, of every model (called with none sampling). */
  private dropAllSessions(): void {
    this.completions.clear();
    this.options.chat.base.clearSessions();
    for (const e of this.chatEngines.values()) e.clearSessions();
  }

  private async loadAdapter(res: ServerResponse, body: unknown): Promise<void> {
    const host = this.adapterHost();
    const name = field(body, 'lora_name');
    const path = field(body, 'lora_path');
    const inplace = field(body, 'load_inplace');
    if (typeof name !== 'string' || name === '' || typeof path !== 'string' || path === '') {
      throw new RequestError(
        400,
        "Both 'lora_name' and 'lora_path' must be provided (non-empty strings).",
        typeof name !== 'string' || name === '' ? 'lora_name' : 'lora_path',
        'invalid_value',
      );
    }
    if (inplace !== undefined && inplace !== null && typeof inplace !== 'boolean')
      throw new RequestError(400, 'load_inplace must be a boolean', 'load_inplace', 'invalid_value');
    if (name === this.options.modelName)
      throw new RequestError(
        400,
        `'${name}' is the base model's name; give the adapter another name`,
        'lora_name',
        'invalid_value',
      );
    await this.exclusive(async () => {
      if (this.adapterPaths.has(name) && inplace !== true) {
        throw new RequestError(
          400,
          `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`,
          'lora_name',
          'adapter_already_loaded',
        );
      }
      let rebuilt: boolean;
      try {
        rebuilt = (await host.load(name, path))?.rebuilt === true;
      } catch (e) {
        // vLLM answers 404 when there is no adapter at the path, 400 for one it cannot load
        const missing = e instanceof AdapterNotFoundError;
        throw new RequestError(
          missing ? 404 : 400,
          `could not load the LoRA adapter '${name}' from ${path}: ${e instanceof Error ? e.message : String(e)}`,
          'lora_path',
          missing ? 'adapter_not_found' : 'adapter_load_failed',
        );
      }
      if (rebuilt) this.dropAllSessions();
      this.dropAdapterSessions(name);
      this.adapterPaths.set(name, path);
    });
    sendText(res, 200, `Success: LoRA adapter '${name}' added successfully.`);
  }

  private async unloadAdapter(res: ServerResponse, body: unknown): Promise<void> {
    const host = this.adapterHost();
    const name = field(body, 'lora_name');
    if (typeof name !== 'string' || name === '')
      throw new RequestError(
        400,
        "'lora_name' needs to be provided to unload a LoRA adapter.",
        'lora_name',
        'invalid_value',
      );
    await this.exclusive(async () => {
      if (!this.adapterPaths.has(name))
        throw new RequestError(404, `The lora adapter '${name}' cannot be found.`, 'lora_name', 'adapter_not_found');
      this.dropAdapterSessions(name);
      this.adapterPaths.delete(name);
      try {
        await host.unload(name);
      } catch (e) {
        throw new RequestError(
          500,
          `could not unload the adapter '${name}': ${e instanceof Error ? e.message : String(e)}`,
          'lora_name',
          'adapter_unload_failed',
        );
      }
    });
    sendText(res, 200, `Success: LoRA adapter '${name}' removed successfully.`);
  }

  /** Answers the route itself; resolves with the error it answered (null on success). */
  private async updateWeights(res: ServerResponse, body: unknown): Promise<string | null> {
    if (!this.options.weights)
      throw new RequestError(
        404,
        'reloading weights is not enabled on this server (it was started without a weights host)',
        null,
        'weights_not_enabled',
      );
    const host = this.options.weights;
    const path = field(body, 'model_path');
    const fail = (status: number, message: string, param: string | null, code: string): string => {
      const err = new RequestError(status, message, param, code);
      sendJSON(res, status, { success: false, message, ...err.toJSON() });
      return message;
    };
    if (typeof path !== 'string' || path === '')
      return fail(400, 'model_path must be a non-empty string (a checkpoint to load)', 'model_path', 'invalid_value');
    try {
      await this.exclusive(async () => {
        await host.load(path);
        this.dropAllSessions(); // every kept context was computed with the old weights
      });
    } catch (e) {
      return fail(
        400,
        `could not load the weights from ${path}: ${e instanceof Error ? e.message : String(e)}`,
        'model_path',
        'weights_load_failed',
      );
    }
    sendJSON(res, 200, { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 });
    return null;
  }

  /** Frees the kept sessions and the adapters' chat engines. */
  dispose(): void {
    this.completions.dispose();
    for (const e of this.chatEngines.values()) e.dispose();
    this.chatEngines.clear();
  }
}
