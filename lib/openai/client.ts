/**
 * A client for OpenAI-compatible chat-completions servers (OpenAI, vLLM, SGLang, `sinkflex
 * serve`) with plain `fetch` (the official `openai` package needs Node >= 22; this project
 * supports Node 20): several base URLs (round-robin or least-busy, with sticky routing per
 * conversation), a concurrency limit, a per-call timeout (AbortController), and retries with
 * exponential backoff and seeded jitter on network errors, timeouts, 408/409/429/5xx and
 * malformed responses. Other 4xx answers fail at once.
 * @module
 */
import { mulberry32 } from '../tau/rng.js';

/** How a request picks a base URL. */
export type RoutingPolicy = 'round-robin' | 'least-busy';

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
    return this.kind !== 'http' || this.status === undefined || this.status === 408 || this.status === 409 || this.status === 429 || this.status >= 500;
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
}

function nonNegativeInt(v: number, name: string): number {
  if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`${name} must be a non-negative integer, got ${String(v)}`);
  return v;
}

/** Checks the shape of a chat completion; returns the problem or null. */
export function checkCompletion(json: unknown): string | null {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return 'the response is not a JSON object';
  const choices = (json as { choices?: unknown }).choices;
  if (!Array.isArray(choices) || choices.length === 0) return 'the response has no choices';
  const c = choices[0] as { message?: unknown; token_ids?: unknown };
  if (c === null || typeof c !== 'object' || c.message === null || typeof c.message !== 'object') return 'the first choice has no message';
  const m = c.message as { content?: unknown; tool_calls?: unknown };
  if (m.content !== undefined && m.content !== null && typeof m.content !== 'string' && !Array.isArray(m.content)) return 'the message content is neither text nor null';
  if (m.tool_calls !== undefined && m.tool_calls !== null && !Array.isArray(m.tool_calls)) return 'tool_calls is not an array';
  if (c.token_ids !== undefined && c.token_ids !== null && (!Array.isArray(c.token_ids) || !c.token_ids.every((t) => Number.isInteger(t)))) return 'token_ids is not an array of integers';
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
    if (options === null || typeof options !== 'object') throw new TypeError('OpenAIChatClient expects an options object');
    if (typeof options.model !== 'string' || options.model === '') throw new TypeError('options.model must be a non-empty string');
    const urls = options.baseURL === undefined ? [process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1'] : typeof options.baseURL === 'string' ? [options.baseURL] : [...options.baseURL];
    if (urls.length === 0) throw new RangeError('options.baseURL: give at least one base URL');
    this.baseURLs = urls.map((u, i) => {
      if (typeof u !== 'string' || !/^https?:\/\//.test(u)) throw new TypeError(`options.baseURL[${i}] must be an http(s) URL, got ${JSON.stringify(u)}`);
      return u.replace(/\/+$/, '');
    });
    this.model = options.model;
    this.apiKey = options.apiKey ?? process.env.OPENAI_API_KEY;
    this.timeoutMs = options.timeoutMs ?? 60000;
    if (!(this.timeoutMs > 0 && Number.isFinite(this.timeoutMs))) throw new RangeError(`options.timeoutMs must be a positive number, got ${String(options.timeoutMs)}`);
    this.retries = nonNegativeInt(options.retries ?? 3, 'options.retries');
    this.backoffMs = options.backoffMs ?? 500;
    this.maxBackoffMs = options.maxBackoffMs ?? 10000;
    if (!(this.backoffMs >= 0) || !(this.maxBackoffMs >= 0)) throw new RangeError('options.backoffMs and options.maxBackoffMs must be >= 0');
    this.jitter = options.jitter ?? 0.25;
    if (!(this.jitter >= 0 && this.jitter <= 1)) throw new RangeError(`options.jitter must be in [0, 1], got ${String(options.jitter)}`);
    this.concurrency = options.concurrency ?? 32;
    if (!Number.isSafeInteger(this.concurrency) || this.concurrency < 1) throw new RangeError(`options.concurrency must be a positive integer, got ${String(options.concurrency)}`);
    this.routing = options.routing ?? 'least-busy';
    if (this.routing !== 'round-robin' && this.routing !== 'least-busy') throw new RangeError(`options.routing must be 'round-robin' or 'least-busy', got ${JSON.stringify(this.routing)}`);
    this.headers = { ...(options.headers ?? {}) };
    this.doFetch = options.fetch ?? fetch;
    this.random = mulberry32(nonNegativeInt(options.seed ?? 0, 'options.seed'));
    this.endpoints = this.baseURLs.map((baseURL) => ({ baseURL, inFlight: 0, calls: 0, failures: 0 }));
    this.maxConsecutiveFailures = nonNegativeInt(options.maxConsecutiveFailures ?? 0, 'options.maxConsecutiveFailures');
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
    if (this.maxConsecutiveFailures > 0 && this.consecutive >= this.maxConsecutiveFailures && this.stopReason === null) {
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

  private pick(affinity: string | undefined, avoid: number): number {
    if (affinity !== undefined) {
      const i = this.sticky.get(affinity);
      if (i !== undefined && i !== avoid) return i;
    }
    const n = this.endpoints.length;
    let i: number;
    if (this.routing === 'round-robin' || n === 1) {
      i = this.next++ % n;
      if (i === avoid && n > 1) i = this.next++ % n;
    } else {
      i = -1;
      for (let k = 0; k < n; k++) {
        const j = (this.next + k) % n;
        if (j === avoid && n > 1) continue;
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

  /** GET `/models` on the first base URL: the served models (id and owner). */
  async listModels(): Promise<{ id: string; owned_by?: string }[]> {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
    try {
      const res = await this.doFetch(`${this.baseURLs[0]}/models`, { headers: this.requestHeaders(), signal: ctrl.signal });
      if (!res.ok) throw new OpenAIError(`GET /models answered ${res.status}`, 'http', res.status);
      const json = (await res.json()) as { data?: unknown };
      if (!Array.isArray(json.data)) throw new OpenAIError('GET /models: no data array', 'invalid_response');
      return json.data.filter((m): m is { id: string; owned_by?: string } => m !== null && typeof m === 'object' && typeof (m as { id?: unknown }).id === 'string');
    } catch (e) {
      if (e instanceof OpenAIError) throw e;
      throw new OpenAIError(ctrl.signal.aborted ? `GET /models timed out after ${this.timeoutMs} ms` : `GET /models failed: ${failureText(e)}`, ctrl.signal.aborted ? 'timeout' : 'network');
    } finally {
      clearTimeout(timer);
    }
  }

  private requestHeaders(): Record<string, string> {
    return { 'content-type': 'application/json', ...(this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}), ...this.headers };
  }

  /**
   * POST `/chat/completions` (the client's `model` is set in the body), retrying per the
   * options; throws {@link OpenAIError} when every try failed or the server refused the request.
   */
  async createChatCompletion(request: ChatCompletionRequest, options: CallOptions = {}): Promise<ChatCompletionResult> {
    if (request === null || typeof request !== 'object' || !Array.isArray(request.messages)) throw new TypeError('request must be an object with a messages array');
    if (this.stopReason !== null) throw new OpenAIError(this.stopReason, 'network', undefined, 0);
    const body = JSON.stringify({ ...request, model: this.model });
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
      const i = this.pick(options.affinity, avoid);
      const ep = this.endpoints[i];
      ep.inFlight++;
      ep.calls++;
      const ctrl = new AbortController();
      const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
      try {
        const res = await this.doFetch(`${ep.baseURL}/chat/completions`, { method: 'POST', headers: this.requestHeaders(), body, signal: ctrl.signal });
        const text = await res.text();
        if (!res.ok) {
          const ra = Number(res.headers.get('retry-after'));
          const err = Number.isFinite(ra) && ra > 0 ? new RetryAfter(`${ep.baseURL} answered ${res.status}: ${text.slice(0, 300)}`, res.status, ra * 1000) : new OpenAIError(`${ep.baseURL} answered ${res.status}: ${text.slice(0, 300)}`, 'http', res.status);
          if (!err.retryable) throw new OpenAIError(err.message, 'http', res.status, attempt + 1);
          throw err;
        }
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          throw new OpenAIError(`${ep.baseURL} answered with something that is not JSON: ${JSON.stringify(text.slice(0, 120))}`, 'invalid_response');
        }
        const problem = checkCompletion(json);
        if (problem) throw new OpenAIError(`${ep.baseURL}: ${problem}`, 'invalid_response');
        this.countOutcome(null);
        return { response: json as ChatCompletionResponse, baseURL: ep.baseURL, attempts: attempt + 1, ms: performance.now() - t0 };
      } catch (e) {
        ep.failures++;
        if (e instanceof OpenAIError && !e.retryable) {
          this.countOutcome(e);
          throw e;
        }
        if (e instanceof OpenAIError && e.kind !== 'network' && e.kind !== 'timeout') this.countOutcome(null); // the server answered
        last = e instanceof OpenAIError ? e : new OpenAIError(ctrl.signal.aborted ? `${ep.baseURL} timed out after ${this.timeoutMs} ms` : `${ep.baseURL}: request failed: ${failureText(e)}`, ctrl.signal.aborted ? 'timeout' : 'network');
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
