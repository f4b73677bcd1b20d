/**
 * A client for OpenAI-compatible servers (OpenAI, vLLM, SGLang, `sinkflex serve`) with plain
 * `fetch` (the official `openai` package needs Node >= 22; this project supports Node 20):
 * chat completions and (token-in/token-out) completions over several base URLs (round-robin or
 * least-busy, with sticky routing per conversation), a concurrency limit, a per-call timeout
 * (AbortController), and retries with exponential backoff and seeded jitter on network errors,
 * timeouts, 408/409/429/5xx and malformed responses. Other 4xx answers fail at once.
 *
 * A base URL can be taken out of routing ({@link OpenAIChatClient.setEnabled}, e.g. a server
 * that missed a weight update) and, with `endpointCooldownMs`, one that could not be reached is
 * avoided for a while: a run survives losing a server, its requests going to the others. Admin
 * calls to one server ({@link OpenAIChatClient.postTo}: runtime LoRA adapters, weight reloads)
 * share the headers and timeouts.
 * @module
 */
import { mulberry32 } from '../util/random.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

/** How a request picks a base URL. */
export type RoutingPolicy = 'round-robin' | 'least-busy';

const CLIENT_KEYS = optionKeys<OpenAIClientOptions>({
  baseURL: true,
  model: true,
  apiKey: true,
  timeoutMs: true,
  retries: true,
  backoffMs: true,
  maxBackoffMs: true,
  jitter: true,
  seed: true,
  concurrency: true,
  routing: true,
  headers: true,
  fetch: true,
  maxConsecutiveFailures: true,
  endpointCooldownMs: true,
});

/** Options of {@link OpenAIChatClient}. */
export interface OpenAIClientOptions {
  /** One base URL or several (e.g. `http://localhost:8000/v1`). Default env `OPENAI_BASE_URL`, else OpenAI's. */
  baseURL?: string | readonly string[];
  /** The model name sent with each request (required). */
  model: string;
  /** API key (default env `OPENAI_API_KEY`; optional for local servers). */
  apiKey?: string;
  /** Per-call timeout in ms. Default 60000. */
  timeoutMs?: number;
  /** Retries after a failed call. Default 3. */
  retries?: number;
  /** First backoff in ms (doubles each retry). Default 500. */
  backoffMs?: number;
  /** Longest backoff in ms. Default 10000. */
  maxBackoffMs?: number;
  /** Jitter: each backoff is scaled by a factor in [1 - jitter, 1 + jitter]. Default 0.25. */
  jitter?: number;
  /** Seed of the jitter. Default 0. */
  seed?: number;
  /** Most requests in flight over all base URLs. Default 32. */
  concurrency?: number;
  /** How requests pick a base URL. Default `least-busy`. */
  routing?: RoutingPolicy;
  /** Extra HTTP headers. */
  headers?: Record<string, string>;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
  /**
   * Stop after this many calls in a row failed to reach a server (network errors and timeouts,
   * each after its retries): later calls then fail at once with kind `network`, without a
   * request (e.g. an evaluation against a dead server ends early). Any answer from a server
   * resets the count. Default 0: never stop.
   */
  maxConsecutiveFailures?: number;
  /**
   * After a call failed to reach a base URL (network error or timeout), route new calls to the
   * other base URLs for this long (ms), while any is available; 0 (default): no cooldown.
   */
  endpointCooldownMs?: number;
}

/** What went wrong talking to a server. */
export type OpenAIErrorKind = 'http' | 'timeout' | 'network' | 'invalid_response';

/** A failed chat-completions call (after its retries). */
export class OpenAIError extends Error {
  /**
   * @param message - what went wrong.
   * @param kind - the kind of failure.
   * @param status - the HTTP status, when there was one.
   * @param attempts - how many calls were made.
   */
  constructor(
    message: string,
    readonly kind: OpenAIErrorKind,
    readonly status?: number,
    readonly attempts = 1,
  ) {
    super(message);
    this.name = 'OpenAIError';
  }

  /** Whether another try may succeed. */
  get retryable(): boolean {
    return (
      this.kind !== 'http' ||
      this.status === undefined ||
      this.status === 408 ||
      this.status === 409 ||
      this.status === 429 ||
      this.status >= 500
    );
  }
}

/** One choice of a chat completion (the fields this project reads). */
export interface ChatCompletionChoice {
  /** Index of the choice. */
  index?: number;
  /** The assistant message. */
  message: {
    role?: string;
    content?: string | null | { type?: string; text?: string }[];
    tool_calls?: { id?: string; type?: string; function?: { name?: unknown; arguments?: unknown } }[] | null;
  };
  /** `stop`, `length`, `tool_calls`… */
  finish_reason?: string | null;
  /** Per-token log-probs (`logprobs: true`). */
  logprobs?: { content?: { token?: string; logprob?: number }[] | null } | null;
  /** The sampled token ids (vLLM's `return_token_ids` extension; `sinkflex serve` too). */
  token_ids?: number[] | null;
}

/** A chat completion (the fields this project reads). */
export interface ChatCompletionResponse {
  id?: string;
  model?: string;
  choices: ChatCompletionChoice[];
  /** Token counts. */
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
  /** The prompt's token ids (vLLM's `return_token_ids` extension). */
  prompt_token_ids?: number[] | null;
}

/** One choice of a (text) completion (the fields this project reads; vLLM's response shape). */
export interface CompletionChoice {
  /** Index of the choice. */
  index?: number;
  /** The generated text. */
  text?: string;
  /** Per-token log-probs (`logprobs: <n>`): the sampled tokens (`token_id:<n>` with `return_tokens_as_token_ids`) and their log-probs. */
  logprobs?: {
    tokens?: unknown[] | null;
    token_logprobs?: unknown[] | null;
    text_offset?: unknown[] | null;
    top_logprobs?: unknown[] | null;
  } | null;
  /** `stop` or `length`. */
  finish_reason?: string | null;
  /** The stop token id (or string) that ended the completion (vLLM). */
  stop_reason?: number | string | null;
  /** The sampled token ids (vLLM's `return_token_ids`). */
  token_ids?: number[] | null;
  /** The prompt's token ids (vLLM's `return_token_ids`). */
  prompt_token_ids?: number[] | null;
}

/** A completion (the fields this project reads). */
export interface CompletionResponse {
  id?: string;
  model?: string;
  choices: CompletionChoice[];
  /** Token counts. */
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
}

/** A completions request body: a prompt (text, or token ids) and parameters; `model` defaults to the client's. */
export type CompletionRequest = Record<string, unknown> & { prompt: string | readonly number[]; model?: string };

/** A completions call's result with where and how it was served. */
export interface CompletionResult {
  /** The server's answer. */
  response: CompletionResponse;
  /** The base URL that answered. */
  baseURL: string;
  /** Calls made (1 + retries used). */
  attempts: number;
  /** Wall time in ms, waits included. */
  ms: number;
}

/** The answer of one admin call ({@link OpenAIChatClient.postTo}). */
export interface AdminResponse {
  /** The HTTP status. */
  status: number;
  /** Whether the status is 2xx. */
  ok: boolean;
  /** The body as text. */
  text: string;
  /** The body as JSON, when it is JSON. */
  json: unknown;
}

/** A chat-completions request body (`model` is filled in by the client). */
export type ChatCompletionRequest = Record<string, unknown> & { messages: readonly unknown[] };

/** A call's result with where and how it was served. */
export interface ChatCompletionResult {
  /** The server's answer. */
  response: ChatCompletionResponse;
  /** The base URL that answered. */
  baseURL: string;
  /** Calls made (1 + retries used). */
  attempts: number;
  /** Wall time in ms, waits included. */
  ms: number;
}

/** An entry of `GET /v1/models`. */
export interface ModelCard {
  /** The model name requests use. */
  id: string;
  /** Who serves it. */
  owned_by?: string;
  /** The base model of a LoRA adapter (vLLM), absent for a base model. */
  parent?: string | null;
  /** Where it was loaded from (vLLM: the adapter's path). */
  root?: string | null;
}

/** Call options. */
export interface CallOptions {
  /** Sticky routing key (e.g. a conversation id): its calls go to one base URL while it answers. */
  affinity?: string;
}

/** Counters of one base URL. */
export interface EndpointStats {
  /** The base URL. */
  baseURL: string;
  /** Requests in flight now. */
  inFlight: number;
  /** Calls made. */
  calls: number;
  /** Calls that failed. */
  failures: number;
  /** Whether it takes calls ({@link OpenAIChatClient.setEnabled}). */
  enabled: boolean;
}

function nonNegativeInt(v: number, name: string): number {
  if (!Number.isSafeInteger(v) || v < 0)
    throw new RangeError(`${name} must be a non-negative integer, got ${String(v)}`);
  return v;
}

/** Checks the shape of a (text) completion; returns the problem or null. */
export function checkTextCompletion(json: unknown): string | null {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return 'the response is not a JSON object';
  const choices = (json as { choices?: unknown }).choices;
  if (!Array.isArray(choices) || choices.length === 0) return 'the response has no choices';
  const c = choices[0] as { logprobs?: unknown; token_ids?: unknown } | null;
  if (c === null || typeof c !== 'object') return 'the first choice is not an object';
  if (c.logprobs !== undefined && c.logprobs !== null && (typeof c.logprobs !== 'object' || Array.isArray(c.logprobs)))
    return 'logprobs is not an object';
  if (
    c.token_ids !== undefined &&
    c.token_ids !== null &&
    (!Array.isArray(c.token_ids) || !c.token_ids.every((t) => Number.isInteger(t)))
  )
    return 'token_ids is not an array of integers';
  return null;
}

/** Checks the shape of a chat completion; returns the problem or null. */
export function checkCompletion(json: unknown): string | null {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return 'the response is not a JSON object';
  const choices = (json as { choices?: unknown }).choices;
  if (!Array.isArray(choices) || choices.length === 0) return 'the response has no choices';
  const c = choices[0] as { message?: unknown; token_ids?: unknown };
  if (c === null || typeof c !== 'object' || c.message === null || typeof c.message !== 'object')
    return 'the first choice has no message';
  const m = c.message as { content?: unknown; tool_calls?: unknown };
  if (m.content !== undefined && m.content !== null && typeof m.content !== 'string' && !Array.isArray(m.content))
    return 'the message content is neither text nor null';
  if (m.tool_calls !== undefined && m.tool_calls !== null && !Array.isArray(m.tool_calls))
    return 'tool_calls is not an array';
  if (
    c.token_ids !== undefined &&
    c.token_ids !== null &&
    (!Array.isArray(c.token_ids) || !c.token_ids.every((t) => Number.isInteger(t)))
  )
    return 'token_ids is not an array of integers';
  return null;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** What a failed fetch says, with its cause (fetch's own message is only "fetch failed"). */
function failureText(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = (e as { cause?: unknown }).cause;
  const why = cause instanceof Error ? cause.message : typeof cause === 'string' ? cause : '';
  return why && !e.message.includes(why) ? `${e.message} (${why})` : e.message;
}

/** The client (see the module description). */
export class OpenAIChatClient {
  /** The model name. */
  readonly model: string;
  /** The base URLs (no trailing slash). */
  readonly baseURLs: readonly string[];
  private readonly apiKey: string | undefined;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly jitter: number;
  private readonly concurrency: number;
  private readonly routing: RoutingPolicy;
  private readonly headers: Record<string, string>;
  private readonly doFetch: typeof fetch;
  private readonly random: () => number;
  private readonly endpoints: EndpointStats[];
  private readonly downUntil: number[];
  private readonly cooldownMs: number;
  private readonly sticky = new Map<string, number>();
  private readonly waiting: (() => void)[] = [];
  private active = 0;
  private next = 0;
  private readonly maxConsecutiveFailures: number;
  private consecutive = 0;
  private connectionFailureCount = 0;
  private stopReason: string | null = null;

  /** @param options - endpoints, model, key, timeout, retries, concurrency, routing. */
  constructor(options: OpenAIClientOptions) {
    if (options === null || typeof options !== 'object')
      throw new TypeError('OpenAIChatClient expects an options object');
    refuseUnknownOptions(options, CLIENT_KEYS, 'OpenAIChatClient');
    if (typeof options.model !== 'string' || options.model === '')
      throw new TypeError('options.model must be a non-empty string');
    const urls =
      options.baseURL === undefined
        ? [process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1']
        : typeof options.baseURL === 'string'
          ? [options.baseURL]
          : [...options.baseURL];
    if (urls.length === 0) throw new RangeError('options.baseURL: give at least one base URL');
    this.baseURLs = urls.map((u, i) => {
      if (typeof u !== 'string' || !/^https?:\/\//.test(u))
        throw new TypeError(`options.baseURL[${i}] must be an http(s) URL, got ${JSON.stringify(u)}`);
      return u.replace(/\/+$/, '');
    });
    this.model = options.model;
    this.apiKey = options.apiKey ?? process.env.OPENAI_API_KEY;
    this.timeoutMs = options.timeoutMs ?? 60000;
    if (!(this.timeoutMs > 0 && Number.isFinite(this.timeoutMs)))
      throw new RangeError(`options.timeoutMs must be a positive number, got ${String(options.timeoutMs)}`);
    this.retries = nonNegativeInt(options.retries ?? 3, 'options.retries');
    this.backoffMs = options.backoffMs ?? 500;
    this.maxBackoffMs = options.maxBackoffMs ?? 10000;
    if (!(this.backoffMs >= 0) || !(this.maxBackoffMs >= 0))
      throw new RangeError('options.backoffMs and options.maxBackoffMs must be >= 0');
    this.jitter = options.jitter ?? 0.25;
    if (!(this.jitter >= 0 && this.jitter <= 1))
      throw new RangeError(`options.jitter must be in [0, 1], got ${String(options.jitter)}`);
    this.concurrency = options.concurrency ?? 32;
    if (!Number.isSafeInteger(this.concurrency) || this.concurrency < 1)
      throw new RangeError(`options.concurrency must be a positive integer, got ${String(options.concurrency)}`);
    this.routing = options.routing ?? 'least-busy';
    if (this.routing !== 'round-robin' && this.routing !== 'least-busy')
      throw new RangeError(
        `options.routing must be 'round-robin' or 'least-busy', got ${JSON.stringify(this.routing)}`,
      );
    this.headers = { ...(options.headers ?? {}) };
    this.doFetch = options.fetch ?? fetch;
    this.random = mulberry32(nonNegativeInt(options.seed ?? 0, 'options.seed'));
    this.endpoints = this.baseURLs.map((baseURL) => ({ baseURL, inFlight: 0, calls: 0, failures: 0, enabled: true }));
    this.downUntil = this.baseURLs.map(() => 0);
    this.maxConsecutiveFailures = nonNegativeInt(options.maxConsecutiveFailures ?? 0, 'options.maxConsecutiveFailures');
    this.cooldownMs = options.endpointCooldownMs ?? 0;
    if (!(this.cooldownMs >= 0 && Number.isFinite(this.cooldownMs)))
      throw new RangeError(
        `options.endpointCooldownMs must be a number >= 0, got ${String(options.endpointCooldownMs)}`,
      );
  }

  /** Calls that failed to reach a server (network errors and timeouts, after their retries). */
  get connectionFailures(): number {
    return this.connectionFailureCount;
  }

  /** Why the client stopped calling (see `maxConsecutiveFailures`), or null while it calls. */
  get stopped(): string | null {
    return this.stopReason;
  }

  /** Counts a call's outcome toward `maxConsecutiveFailures`. */
  private countOutcome(error: OpenAIError | null): void {
    if (error === null || (error.kind !== 'network' && error.kind !== 'timeout')) {
      this.consecutive = 0;
      return;
    }
    this.connectionFailureCount++;
    this.consecutive++;
    if (
      this.maxConsecutiveFailures > 0 &&
      this.consecutive >= this.maxConsecutiveFailures &&
      this.stopReason === null
    ) {
      this.stopReason = `stopped after ${this.consecutive} consecutive calls failed to reach the server (last: ${error.message})`;
    }
  }

  /** Counters per base URL (a copy). */
  stats(): EndpointStats[] {
    return this.endpoints.map((e) => ({ ...e }));
  }

  /** Forgets a sticky routing key (call when its conversation ends). */
  release(affinity: string): void {
    this.sticky.delete(affinity);
  }

  /**
   * Takes a base URL out of routing (`false`: no new call goes there, its sticky
   * conversations move) or puts it back (`true`, which also ends its cooldown). At least one
   * must stay enabled for calls to be made.
   */
  setEnabled(baseURL: string, enabled: boolean): void {
    const i = this.baseURLs.indexOf(baseURL.replace(/\/+$/, ''));
    if (i < 0) throw new RangeError(`setEnabled: ${JSON.stringify(baseURL)} is not one of the client's base URLs`);
    this.endpoints[i].enabled = enabled;
    if (enabled) this.downUntil[i] = 0;
    else for (const [k, v] of this.sticky) if (v === i) this.sticky.delete(k);
  }

  /** The base URLs that take calls. */
  enabledBaseURLs(): string[] {
    return this.endpoints.filter((e) => e.enabled).map((e) => e.baseURL);
  }

  /** Whether endpoint `i` may get a new call: enabled, not `avoid`, not cooling down (unless `strict` is false). */
  private usable(i: number, avoid: number, now: number, strict: boolean): boolean {
    if (!this.endpoints[i].enabled || i === avoid) return false;
    return !strict || this.downUntil[i] <= now;
  }

  private pick(affinity: string | undefined, avoid: number): number {
    const n = this.endpoints.length;
    const now = Date.now();
    if (affinity !== undefined) {
      const i = this.sticky.get(affinity);
      if (i !== undefined && this.usable(i, avoid, now, true)) return i;
    }
    // the candidates, from the most to the least preferred set: enabled, not `avoid`, not cooling down
    let ok = (j: number): boolean => this.usable(j, avoid, now, true);
    const any = (f: (j: number) => boolean): boolean => this.endpoints.some((_, j) => f(j));
    if (!any(ok)) ok = (j) => this.usable(j, avoid, now, false);
    if (!any(ok)) ok = (j) => this.usable(j, -1, now, false);
    if (!any(ok))
      throw new OpenAIError('no base URL is enabled (every server was taken out of routing)', 'network', undefined, 0);
    let i = -1;
    if (this.routing === 'round-robin' || n === 1) {
      for (let k = 0; k < n && i < 0; k++) {
        const j = this.next++ % n;
        if (ok(j)) i = j;
      }
    } else {
      for (let k = 0; k < n; k++) {
        const j = (this.next + k) % n;
        if (!ok(j)) continue;
        if (i < 0 || this.endpoints[j].inFlight < this.endpoints[i].inFlight) i = j;
      }
      this.next++;
    }
    if (affinity !== undefined) this.sticky.set(affinity, i);
    return i;
  }

  private async acquire(): Promise<void> {
    if (this.active < this.concurrency) {
      this.active++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private releaseSlot(): void {
    const w = this.waiting.shift();
    if (w) w();
    else this.active--;
  }

  private backoff(attempt: number, retryAfterMs: number | null): number {
    const base = Math.min(this.maxBackoffMs, this.backoffMs * 2 ** (attempt - 1));
    const jittered = base * (1 + this.jitter * (2 * this.random() - 1));
    return Math.min(this.maxBackoffMs, Math.max(jittered, retryAfterMs ?? 0));
  }

  /**
   * GET `/models` on a base URL (default the first): the served models, with vLLM's `parent`
   * (the base model of a LoRA adapter) and `root` where the server gives them.
   */
  async listModels(baseURL: string = this.baseURLs[0]): Promise<ModelCard[]> {
    const base = baseURL.replace(/\/+$/, '');
    if (!this.baseURLs.includes(base))
      throw new RangeError(`listModels: ${JSON.stringify(baseURL)} is not one of the client's base URLs`);
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
    try {
      const res = await this.doFetch(`${base}/models`, { headers: this.requestHeaders(), signal: ctrl.signal });
      if (!res.ok) throw new OpenAIError(`GET /models answered ${res.status}`, 'http', res.status);
      const json = (await res.json()) as { data?: unknown };
      if (!Array.isArray(json.data)) throw new OpenAIError('GET /models: no data array', 'invalid_response');
      return json.data.filter(
        (m): m is ModelCard => m !== null && typeof m === 'object' && typeof (m as { id?: unknown }).id === 'string',
      );
    } catch (e) {
      if (e instanceof OpenAIError) throw e;
      throw new OpenAIError(
        ctrl.signal.aborted
          ? `GET /models timed out after ${this.timeoutMs} ms`
          : `GET /models failed: ${failureText(e)}`,
        ctrl.signal.aborted ? 'timeout' : 'network',
      );
    } finally {
      clearTimeout(timer);
    }
  }

  private requestHeaders(): Record<string, string> {
    return {
      'content-type': 'application/json',
      ...(this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}),
      ...this.headers,
    };
  }

  /**
   * POST `/chat/completions` (the client's `model` is set in the body), retrying per the
   * options; throws {@link OpenAIError} when every try failed or the server refused the request.
   */
  async createChatCompletion(request: ChatCompletionRequest, options: CallOptions = {}): Promise<ChatCompletionResult> {
    if (request === null || typeof request !== 'object' || !Array.isArray(request.messages))
      throw new TypeError('request must be an object with a messages array');
    const r = await this.call(
      '/chat/completions',
      JSON.stringify({ ...request, model: this.model }),
      checkCompletion,
      options,
    );
    return { ...r, response: r.json as ChatCompletionResponse };
  }

  /**
   * POST `/completions`: a prompt as text or token ids (vLLM's completions API; `model`
   * defaults to the client's, e.g. a LoRA adapter's name instead), retrying per the options;
   * throws {@link OpenAIError} when every try failed or the server refused the request.
   */
  async createCompletion(request: CompletionRequest, options: CallOptions = {}): Promise<CompletionResult> {
    if (
      request === null ||
      typeof request !== 'object' ||
      (typeof request.prompt !== 'string' && !Array.isArray(request.prompt))
    )
      throw new TypeError('request must be an object with a prompt (text or token ids)');
    if (request.model !== undefined && (typeof request.model !== 'string' || request.model === ''))
      throw new TypeError('request.model must be a non-empty string when given');
    const r = await this.call(
      '/completions',
      JSON.stringify({ ...request, model: request.model ?? this.model }),
      checkTextCompletion,
      options,
    );
    return { ...r, response: r.json as CompletionResponse };
  }

  /**
   * One POST to one server, without retries (admin calls: `/load_lora_adapter`,
   * `/unload_lora_adapter`, `/update_weights_from_disk`): `path` is under the base URL, or
   * under the server's root with `root: true` (the base URL without its trailing `/v1`, where
   * SGLang keeps its admin routes). Resolves with any HTTP answer; throws {@link OpenAIError}
   * (`network`, `timeout`) when the server cannot be reached in `timeoutMs` (default the
   * client's).
   */
  async postTo(
    baseURL: string,
    path: string,
    body: unknown,
    options: { root?: boolean; timeoutMs?: number } = {},
  ): Promise<AdminResponse> {
    const base = baseURL.replace(/\/+$/, '');
    if (!this.baseURLs.includes(base))
      throw new RangeError(`postTo: ${JSON.stringify(baseURL)} is not one of the client's base URLs`);
    const url = `${options.root ? base.replace(/\/v1$/, '') : base}${path}`;
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), timeoutMs);
    try {
      const res = await this.doFetch(url, {
        method: 'POST',
        headers: this.requestHeaders(),
        body: JSON.stringify(body),
        signal: ctrl.signal,
      });
      const text = await res.text();
      let json: unknown = undefined;
      try {
        json = JSON.parse(text);
      } catch {
        // vLLM answers its admin calls with plain text
      }
      return { status: res.status, ok: res.ok, text, json };
    } catch (e) {
      throw new OpenAIError(
        ctrl.signal.aborted ? `POST ${url} timed out after ${timeoutMs} ms` : `POST ${url} failed: ${failureText(e)}`,
        ctrl.signal.aborted ? 'timeout' : 'network',
      );
    } finally {
      clearTimeout(timer);
    }
  }

  /** The shared retry loop of the calls (see the module description). */
  private async call(
    path: string,
    body: string,
    check: (json: unknown) => string | null,
    options: CallOptions,
  ): Promise<{ json: unknown; baseURL: string; attempts: number; ms: number }> {
    if (this.stopReason !== null) throw new OpenAIError(this.stopReason, 'network', undefined, 0);
    const t0 = performance.now();
    let last = new OpenAIError('no call made', 'network');
    let avoid = -1;
    let calls = 0;
    for (let attempt = 0; attempt <= this.retries; attempt++) {
      if (attempt > 0) await sleep(this.backoff(attempt, last instanceof RetryAfter ? last.retryAfterMs : null));
      // another call found the server unreachable meanwhile: no more tries
      if (attempt > 0 && this.stopReason !== null) break;
      calls++;
      await this.acquire();
      let i: number;
      try {
        i = this.pick(options.affinity, avoid);
      } catch (e) {
        this.releaseSlot();
        throw e;
      }
      const ep = this.endpoints[i];
      ep.inFlight++;
      ep.calls++;
      const ctrl = new AbortController();
      const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
      try {
        const res = await this.doFetch(`${ep.baseURL}${path}`, {
          method: 'POST',
          headers: this.requestHeaders(),
          body,
          signal: ctrl.signal,
        });
        const text = await res.text();
        if (!res.ok) {
          const ra = Number(res.headers.get('retry-after'));
          const err =
            Number.isFinite(ra) && ra > 0
              ? new RetryAfter(`${ep.baseURL} answered ${res.status}: ${text.slice(0, 300)}`, res.status, ra * 1000)
              : new OpenAIError(`${ep.baseURL} answered ${res.status}: ${text.slice(0, 300)}`, 'http', res.status);
          if (!err.retryable) throw new OpenAIError(err.message, 'http', res.status, attempt + 1);
          throw err;
        }
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          throw new OpenAIError(
            `${ep.baseURL} answered with something that is not JSON: ${JSON.stringify(text.slice(0, 120))}`,
            'invalid_response',
          );
        }
        const problem = check(json);
        if (problem) throw new OpenAIError(`${ep.baseURL}: ${problem}`, 'invalid_response');
        this.countOutcome(null);
        this.downUntil[i] = 0;
        return { json, baseURL: ep.baseURL, attempts: attempt + 1, ms: performance.now() - t0 };
      } catch (e) {
        ep.failures++;
        if (e instanceof OpenAIError && !e.retryable) {
          this.countOutcome(e);
          throw e;
        }
        if (e instanceof OpenAIError && e.kind !== 'network' && e.kind !== 'timeout') this.countOutcome(null); // the server answered
        last =
          e instanceof OpenAIError
            ? e
            : new OpenAIError(
                ctrl.signal.aborted
                  ? `${ep.baseURL} timed out after ${this.timeoutMs} ms`
                  : `${ep.baseURL}: request failed: ${failureText(e)}`,
                ctrl.signal.aborted ? 'timeout' : 'network',
              );
        if (this.cooldownMs > 0 && (last.kind === 'network' || last.kind === 'timeout'))
          this.downUntil[i] = Date.now() + this.cooldownMs;
        if (this.endpoints.length > 1) {
          avoid = i;
          if (options.affinity !== undefined) this.sticky.delete(options.affinity);
        }
      } finally {
        clearTimeout(timer);
        ep.inFlight--;
        this.releaseSlot();
      }
    }
    const failed = new OpenAIError(`${last.message} (after ${calls} calls)`, last.kind, last.status, calls);
    this.countOutcome(failed);
    throw failed;
  }
}

/** A retryable HTTP answer with a Retry-After header. */
class RetryAfter extends OpenAIError {
  constructor(
    message: string,
    status: number,
    readonly retryAfterMs: number,
  ) {
    super(message, 'http', status);
  }
}
