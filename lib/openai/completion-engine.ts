/**
 * {@link CompletionEngine}: token-in/token-out completions over a {@link GenerativeModel} (the
 * base model, or a LoRA adapter's), what `sinkflex serve` runs behind `POST /v1/completions`.
 *
 * A request without `session_id` is stateless, as in vLLM: a fresh session seeded with the
 * request's `seed` takes the prompt and samples, so the same prompt, parameters and seed give
 * the same tokens. With `session_id` (a `sinkflex serve` extension, the completions twin of the
 * chat server's) the engine keeps the session (its KV cache and random stream) after the
 * request and continues it when the next request of that id names the same model and seed and
 * its prompt extends the kept context (the context so far, sampled tokens included, then new
 * tokens): only the new tokens are appended, and the random stream goes on where it stopped —
 * exactly what the in-process agent loop does with one model session per episode, so a rollout
 * client that sends the episode seed and a session id per episode gets the in-process tokens.
 * Anything else starts the session afresh. Sessions are kept up to `maxSessions` (least recently
 * used evicted) and `sessionTtlMs`, and are dropped when the weights change ({@link clear}).
 * @module
 */
import type { GenerativeModel, LogprobsMode, ModelSession } from '../model/policy.js';
import { untilAborted } from './abort.js';
import { RequestError } from './server-request.js';

/** Options of {@link CompletionEngine}. */
export interface CompletionEngineOptions {
  /** Sessions kept for `session_id` continuation. Default 256. */
  maxSessions?: number;
  /** A kept session idle this long (ms) is dropped. Default 600000. */
  sessionTtlMs?: number;
}

/** One completion to run. */
export interface EngineCompletion {
  /** The model to sample from. */
  model: GenerativeModel;
  /** Its name (kept sessions continue only under the same name). */
  modelName: string;
  /** The prompt's token ids (checked against the vocabulary by the caller). */
  prompt: readonly number[];
  /** Most tokens to sample (cut to the room left in the context). */
  maxTokens: number;
  /** Temperature. */
  temperature: number;
  /** Nucleus mass. */
  topP: number;
  /** Top-k (0: off). */
  topK: number;
  /** vLLM's min_p (default 0: off). */
  minP?: number;
  /** vLLM's repetition_penalty (default 1: off). */
  repetitionPenalty?: number;
  /** vLLM's presence_penalty (default 0). */
  presencePenalty?: number;
  /** vLLM's frequency_penalty (default 0). */
  frequencyPenalty?: number;
  /** The log-probs returned (default `processed`: see `SampleOptions.logprobsMode`). */
  logprobsMode?: LogprobsMode;
  /** Stop token ids. */
  stop: readonly number[];
  /** Seed of a fresh session's random stream. */
  seed?: number;
  /** Keep and continue the session under this id. */
  sessionId?: string;
}

/** What one completion produced. */
export interface EngineCompletionResult {
  /** The sampled tokens (a stop token included when one ended the completion). */
  tokens: number[];
  /** Their log-probs (as `logprobsMode` says). */
  logProbs: number[];
  /** `stop` (a stop token) or `length` (max tokens, or the context is full). */
  finishReason: 'stop' | 'length';
  /** Whether a kept session was continued. */
  continued: boolean;
}

interface Kept {
  session: ModelSession;
  modelName: string;
  seed: number | undefined;
  context: number[];
  busy: boolean;
  lastUsed: number;
}

function extends_(prompt: readonly number[], context: readonly number[]): boolean {
  if (prompt.length <= context.length) return false;
  for (let i = 0; i < context.length; i++) if (prompt[i] !== context[i]) return false;
  return true;
}

/** The engine (see the module description). */
export class CompletionEngine {
  private readonly kept = new Map<string, Kept>();
  private readonly maxSessions: number;
  private readonly ttl: number;
  private closed = false;
  /** Counters: requests, continued sessions, fresh ones, evicted ones. */
  readonly stats = { requests: 0, continued: 0, fresh: 0, evicted: 0 };

  /** @param options - session limits. */
  constructor(options: CompletionEngineOptions = {}) {
    this.maxSessions = options.maxSessions ?? 256;
    this.ttl = options.sessionTtlMs ?? 600000;
    if (!Number.isSafeInteger(this.maxSessions) || this.maxSessions < 0)
      throw new RangeError('options.maxSessions must be an integer >= 0');
    if (!(this.ttl > 0)) throw new RangeError('options.sessionTtlMs must be positive');
  }

  /** Sessions kept now. */
  get sessions(): number {
    return this.kept.size;
  }

  private drop(id: string): void {
    const k = this.kept.get(id);
    if (!k) return;
    this.kept.delete(id);
    k.session.dispose();
  }

  private sweep(now: number): void {
    for (const [id, k] of this.kept) if (!k.busy && now - k.lastUsed > this.ttl) this.drop(id);
    while (this.kept.size > this.maxSessions) {
      let oldest: string | null = null;
      let t = Infinity;
      for (const [id, k] of this.kept) if (!k.busy && k.lastUsed < t) [oldest, t] = [id, k.lastUsed];
      if (oldest === null) break;
      this.drop(oldest);
      this.stats.evicted++;
    }
  }

  /**
   * Drops the kept sessions (all, or those of `modelName`) that are not sampling now: call it
   * when weights change, since their KV caches were computed with the old ones.
   */
  clear(modelName?: string): void {
    for (const [id, k] of [...this.kept])
      if (!k.busy && (modelName === undefined || k.modelName === modelName)) this.drop(id);
  }

  /**
   * Runs one completion (throws {@link RequestError} for a prompt that does not fit the
   * context; with `signal` aborted, stops sampling, frees the session and rejects with its reason).
   */
  async complete(c: EngineCompletion, signal?: AbortSignal): Promise<EngineCompletionResult> {
    if (this.closed) throw new RequestError(503, 'the server is shutting down');
    signal?.throwIfAborted();
    this.stats.requests++;
    const now = Date.now();
    this.sweep(now);
    const limit = c.model.contextLength;
    if (c.prompt.length >= limit)
      throw new RequestError(
        400,
        `the prompt has ${c.prompt.length} tokens; the model's context is ${limit} (at least one token must fit after it)`,
        'prompt',
        'context_length_exceeded',
      );
    const id = c.sessionId;
    const prior = id !== undefined ? this.kept.get(id) : undefined;
    let k: Kept;
    let append: readonly number[];
    const continued =
      prior !== undefined &&
      !prior.busy &&
      prior.modelName === c.modelName &&
      prior.seed === c.seed &&
      extends_(c.prompt, prior.context);
    if (continued && prior) {
      k = prior;
      append = c.prompt.slice(prior.context.length);
      this.stats.continued++;
    } else {
      if (id !== undefined && prior && !prior.busy) this.drop(id);
      k = {
        session: c.model.createSession(c.seed !== undefined ? { seed: c.seed } : {}),
        modelName: c.modelName,
        seed: c.seed,
        context: [],
        busy: false,
        lastUsed: now,
      };
      append = c.prompt;
      this.stats.fresh++;
    }
    k.busy = true;
    const onAbort = (): void => k.session.dispose();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      k.session.append(append);
      const sampling = k.session.sample({
        maxTokens: Math.min(c.maxTokens, limit - c.prompt.length),
        temperature: c.temperature,
        topP: c.topP,
        topK: c.topK,
        minP: c.minP ?? 0,
        repetitionPenalty: c.repetitionPenalty ?? 1,
        presencePenalty: c.presencePenalty ?? 0,
        frequencyPenalty: c.frequencyPenalty ?? 0,
        logprobsMode: c.logprobsMode ?? 'processed',
        stop: c.stop,
      });
      const r = await (signal ? untilAborted(sampling, signal) : sampling);
      const tokens = Array.from(r.tokens);
      k.context = [...c.prompt, ...tokens];
      k.lastUsed = Date.now();
      k.busy = false;
      const other = id !== undefined ? this.kept.get(id) : undefined;
      if (id !== undefined && !this.closed && !(other && other !== k && other.busy)) {
        // a request of the same id that started meanwhile and is done is replaced by this one
        if (other && other !== k) this.drop(id);
        this.kept.set(id, k);
      } else {
        if (id !== undefined && other === k) this.kept.delete(id);
        k.session.dispose();
      }
      return {
        tokens,
        logProbs: Array.from(r.logProbs),
        finishReason: r.finishReason === 'stop' ? 'stop' : 'length',
        continued,
      };
    } catch (e) {
      if (id !== undefined && this.kept.get(id) === k) this.kept.delete(id);
      k.session.dispose();
      throw e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Frees every kept session; further requests are refused. Idempotent. */
  dispose(): void {
    this.closed = true;
    for (const id of [...this.kept.keys()]) this.drop(id);
  }

  /** {@link dispose} (for `using`). */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
