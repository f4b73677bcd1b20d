/**
 * {@link ChatEngine}: what `sinkflex serve` runs behind the HTTP API — chat-completion requests
 * over a {@link GenerativeModel} (the built-in transformer) and its chat template.
 *
 * A request without `session_id` is stateless: the conversation is rendered from scratch into
 * a fresh session seeded with the request's `seed`. With `session_id` the engine keeps the
 * conversation's session (its KV cache and random stream, with the sampled tokens verbatim) and
 * continues it when the next request extends it: same seed and tools, the same non-assistant
 * messages so far, one assistant message per reply it gave, and only new non-assistant
 * messages after them. Those are rendered after the conversation (`renderAppend`, through the
 * generation prompt) and appended — exactly what the in-process agent loop does, so a client that sends the episode seed and a
 * session id gets the same tokens as the in-process policy. Anything else starts the
 * conversation afresh. Sessions are kept up to `maxSessions` (least recently used evicted) and
 * `sessionTtlMs`.
 *
 * A prompt that cannot fit the model's context is refused (400 `context_length_exceeded`)
 * before it is tokenized when a bound from the text lengths alone
 * ({@link ChatFormat.minTokens}) already exceeds the context, so a huge request costs
 * neither time nor memory. With `renderTools: false` (a model trained without the tools
 * section in its prompt) the request's tools are not rendered; its tool calls are still parsed.
 *
 * As in vLLM: a conversation the chat template refuses (its `raise_exception`, a message it
 * cannot render) is the client's error (400, not 500); `chat_template_kwargs` are passed to the
 * template (a format without template variables refuses them); a `max_tokens` that does not fit
 * the context after the prompt is refused (400) instead of being cut.
 * @module
 */
import type { ChatFormat } from '../chat/chat-format.js';
import { ChatTemplateError } from '../chat/chat-template.js';
import type { ChatMessage, ToolSchema } from '../chat/messages.js';
import type { GenerativeModel, ModelSession } from '../model/policy.js';
import { untilAborted } from './abort.js';
import { RequestError, type ChatRequest } from './server-request.js';

/** Options of {@link ChatEngine}. */
export interface ChatEngineOptions {
  /** `max_tokens` when a request gives none. Default 1024. */
  defaultMaxTokens?: number;
  /** Conversations kept for `session_id` continuation. Default 256. */
  maxSessions?: number;
  /** A kept conversation idle this long (ms) is dropped. Default 600000. */
  sessionTtlMs?: number;
  /**
   * Render the request's tools into the prompt (the tools section). Default true; false for a
   * model trained without it (the run's `prompt.renderTools`): the tools are then ignored for
   * the prompt, and tool calls in replies are parsed all the same.
   */
  renderTools?: boolean;
}

/** Per-call options of {@link ChatEngine.complete}. */
export interface CompleteOptions {
  /**
   * Called with each run of newly sampled tokens and their log-probs, in order, as the policy
   * delivers them (all at the end for a policy that does not stream; see `SampleOptions.onTokens`).
   */
  onTokens?: (tokens: readonly number[], logProbs: readonly number[]) => void;
  /** Aborting it stops the generation and frees its session; the call then rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** The result of one completion. */
export interface EngineResult {
  /** The sampled tokens (the end token included when the reply ended). */
  tokens: number[];
  /** Their log-probs. */
  logProbs: number[];
  /** `stop`, or `length` (max tokens, or the context is full). */
  finishReason: 'stop' | 'length';
  /** The whole context before sampling (prompt tokens). */
  promptTokens: number[];
  /** Whether a kept conversation was continued. */
  continued: boolean;
}

interface Conversation {
  session: ModelSession;
  seed: number | undefined;
  tools: string;
  fingerprints: string[];
  context: number[];
  busy: boolean;
  lastUsed: number;
}

function fingerprint(m: ChatMessage): string {
  return m.role === 'assistant' ? 'assistant' : JSON.stringify([m.role, m.content]);
}

/** The engine (see the module description). */
export class ChatEngine {
  private readonly conversations = new Map<string, Conversation>();
  private readonly defaultMaxTokens: number;
  private readonly maxSessions: number;
  private readonly ttl: number;
  private readonly renderTools: boolean;
  private closed = false;
  /** Counters: requests, continued conversations, fresh ones. */
  readonly stats = { requests: 0, continued: 0, fresh: 0, evicted: 0 };

  /** @param policy - the model to serve. @param chat - its chat format. @param options - limits. */
  constructor(
    readonly policy: GenerativeModel,
    readonly chat: ChatFormat,
    options: ChatEngineOptions = {},
  ) {
    this.defaultMaxTokens = options.defaultMaxTokens ?? 1024;
    this.maxSessions = options.maxSessions ?? 256;
    this.ttl = options.sessionTtlMs ?? 600000;
    this.renderTools = options.renderTools ?? true;
    if (typeof this.renderTools !== 'boolean') throw new TypeError('options.renderTools must be a boolean');
    if (!Number.isSafeInteger(this.defaultMaxTokens) || this.defaultMaxTokens < 1)
      throw new RangeError('options.defaultMaxTokens must be a positive integer');
    if (!Number.isSafeInteger(this.maxSessions) || this.maxSessions < 0)
      throw new RangeError('options.maxSessions must be an integer >= 0');
    if (!(this.ttl > 0)) throw new RangeError('options.sessionTtlMs must be positive');
  }

  /** Conversations kept now. */
  get sessions(): number {
    return this.conversations.size;
  }

  private drop(id: string): void {
    const c = this.conversations.get(id);
    if (!c) return;
    this.conversations.delete(id);
    c.session.dispose();
  }

  private sweep(now: number): void {
    for (const [id, c] of this.conversations) if (!c.busy && now - c.lastUsed > this.ttl) this.drop(id);
    while (this.conversations.size > this.maxSessions) {
      let oldest: string | null = null;
      let t = Infinity;
      for (const [id, c] of this.conversations) if (!c.busy && c.lastUsed < t) [oldest, t] = [id, c.lastUsed];
      if (oldest === null) break;
      this.drop(oldest);
      this.stats.evicted++;
    }
  }

  private continuation(conv: Conversation | undefined, req: ChatRequest, tools: string): ChatMessage[] | null {
    if (!conv || conv.busy || conv.seed !== req.seed || conv.tools !== tools) return null;
    const n = conv.fingerprints.length;
    if (req.messages.length <= n) return null;
    for (let i = 0; i < n; i++) if (fingerprint(req.messages[i]) !== conv.fingerprints[i]) return null;
    const delta = req.messages.slice(n);
    return delta.some((m) => m.role === 'assistant') ? null : delta;
  }

  /** The refusal of a prompt of `needed` tokens (at least, when `estimated`). */
  private tooLong(needed: number, estimated: boolean): RequestError {
    const what = estimated
      ? `at least ${needed} tokens (counted from its length, before tokenizing)`
      : `${needed} tokens`;
    return new RequestError(
      400,
      `the conversation needs ${what}; the model's context is ${this.policy.contextLength}`,
      'messages',
      'context_length_exceeded',
    );
  }

  /**
   * Runs one completion (throws {@link RequestError} for a prompt that does not fit; with
   * `options.signal` aborted, stops sampling, frees the session and rejects with its reason).
   */
  async complete(req: ChatRequest, options: CompleteOptions = {}): Promise<EngineResult> {
    if (this.closed) throw new RequestError(503, 'the server is shutting down');
    options.signal?.throwIfAborted();
    this.stats.requests++;
    const now = Date.now();
    this.sweep(now);
    const toolList: readonly ToolSchema[] = this.renderTools ? req.tools : [];
    const kwargs = req.templateKwargs;
    if (kwargs && !this.chat.templateVariables)
      throw new RequestError(
        400,
        "chat_template_kwargs: this model's chat format takes no template variables (only a Jinja chat template does)",
        'chat_template_kwargs',
        'invalid_value',
      );
    const tools = JSON.stringify([toolList, kwargs ?? null]);
    const render = <T>(f: () => T): T => {
      try {
        return f();
      } catch (e) {
        if (e instanceof ChatTemplateError)
          throw new RequestError(
            400,
            `the chat template cannot render these messages: ${e.message}`,
            'messages',
            'invalid_value',
          );
        throw e;
      }
    };
    const opts = kwargs ? { kwargs } : {};
    const id = req.sessionId;
    const kept = id !== undefined ? this.conversations.get(id) : undefined;
    const delta = this.continuation(kept, req, tools);
    const limit = this.policy.contextLength;
    let conv: Conversation;
    let append: number[];
    if (kept && delta) {
      const least = kept.context.length + (this.chat.minTokens?.(delta, { ...opts, addGenerationPrompt: true }) ?? 0);
      if (least >= limit) throw this.tooLong(least, true);
      conv = kept;
      append = render(() =>
        this.chat.renderAppend(req.messages.slice(0, req.messages.length - delta.length), delta, {
          ...opts,
          tools: toolList,
        }),
      );
      this.stats.continued++;
    } else {
      const least = this.chat.minTokens?.(req.messages, { ...opts, tools: toolList, addGenerationPrompt: true }) ?? 0;
      if (least >= limit) throw this.tooLong(least, true);
      append = render(() =>
        this.chat.renderTokens(req.messages, { ...opts, tools: toolList, addGenerationPrompt: true }),
      );
      if (id !== undefined && kept && !kept.busy) this.drop(id);
      conv = {
        session: this.policy.createSession(req.seed !== undefined ? { seed: req.seed } : {}),
        seed: req.seed,
        tools,
        fingerprints: [],
        context: [],
        busy: false,
        lastUsed: now,
      };
      this.stats.fresh++;
    }
    const room = limit - conv.context.length - append.length;
    if (room < 1) {
      if (conv !== kept) conv.session.dispose();
      throw this.tooLong(conv.context.length + append.length, false);
    }
    if (req.maxTokens !== undefined && req.maxTokens > room) {
      if (conv !== kept) conv.session.dispose();
      const prompt = conv.context.length + append.length;
      throw new RequestError(
        400,
        `max_tokens is too large: ${req.maxTokens}. The model's context is ${limit} tokens and the conversation has ${prompt} (${req.maxTokens} > ${limit} - ${prompt})`,
        'max_tokens',
        'context_length_exceeded',
      );
    }
    const maxTokens = Math.min(req.maxTokens ?? this.defaultMaxTokens, room);
    conv.busy = true;
    const ownedHere = conv !== kept;
    const onTokens = options.onTokens;
    let delivered = 0;
    const onAbort = (): void => conv.session.dispose();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      conv.session.append(append);
      const sampling = conv.session.sample({
        maxTokens,
        temperature: req.temperature,
        topP: req.topP,
        stop: this.chat.stopTokens,
        ...(onTokens
          ? {
              onTokens: (t: ArrayLike<number>, lp: ArrayLike<number>) => {
                delivered += t.length;
                onTokens(Array.from(t), Array.from(lp));
              },
            }
          : {}),
      });
      const r = await (options.signal ? untilAborted(sampling, options.signal) : sampling);
      const tokens = Array.from(r.tokens);
      const logProbs = Array.from(r.logProbs);
      if (onTokens && delivered < tokens.length) onTokens(tokens.slice(delivered), logProbs.slice(delivered));
      const promptTokens = conv.context.concat(append);
      conv.context = promptTokens.concat(tokens);
      conv.fingerprints = [...req.messages.map(fingerprint), 'assistant'];
      conv.lastUsed = Date.now();
      conv.busy = false;
      if (id !== undefined && !this.closed && r.finishReason === 'stop') this.conversations.set(id, conv);
      else {
        if (id !== undefined) this.conversations.delete(id);
        conv.session.dispose();
      }
      return {
        tokens,
        logProbs,
        finishReason: r.finishReason === 'stop' ? 'stop' : 'length',
        promptTokens,
        continued: !ownedHere,
      };
    } catch (e) {
      if (id !== undefined && this.conversations.get(id) === conv) this.conversations.delete(id);
      conv.session.dispose();
      throw e;
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Drops the kept conversations that are not sampling now (their KV caches were computed with
   * the weights of their time: call it when the weights change). Requests still go on.
   */
  clearSessions(): void {
    for (const [id, c] of [...this.conversations]) if (!c.busy) this.drop(id);
  }

  /** Frees every kept conversation (their KV caches); further requests are refused. Idempotent. */
  dispose(): void {
    this.closed = true;
    for (const id of [...this.conversations.keys()]) this.drop(id);
  }

  /** {@link dispose} (for `using`). */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
