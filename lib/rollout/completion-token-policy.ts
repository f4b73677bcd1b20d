/**
 * {@link CompletionTokenPolicy}: a token-in/token-out {@link TokenPolicy} over a completions
 * service (vLLM, SGLang or `sinkflex serve` behind `/v1/completions`), for rollouts on a
 * serving engine. The policy sees the service through the {@link TokenCompletions} interface
 * (lib/openai implements it over its client), so this layer does not depend on HTTP.
 *
 * Each session keeps its episode's token context locally and sends it whole each turn as the
 * prompt (token ids); the sampled tokens come back as ids with their log-probs and are appended
 * verbatim — nothing the model sampled is ever re-tokenized. Seeds: by default each turn is an
 * independent request seeded with the turn's seed (the agent loop's `params.seed`), as a
 * vLLM-style server expects. With `sessions: true` each request also carries a session id per
 * episode and the episode's seed instead (`sinkflex serve` keeps the episode's model session and
 * continues its random stream, exactly as the local engine's one session per episode does).
 * @module
 */
import { checkSampleParams } from './chat-token-policy.js';
import type { SessionContext, TokenPolicy, SampleOptions, TokenSampleResult, TokenSession } from './policy.js';

/**
 * One token-in/token-out completion request. The distribution is softmax(logits / temperature)
 * within the nucleus `topP`: an implementation must set every other sampling field of its
 * service to the value that leaves it untouched (lib/openai: `top_k` off, `min_p` 0, no
 * penalties), so that no server default changes what the trainer assumes was sampled.
 */
export interface TokenCompletionRequest {
  /** The whole context so far (token ids). */
  prompt: readonly number[];
  /** At most this many tokens. */
  maxTokens: number;
  /** Temperature (0: greedy). */
  temperature: number;
  /** Nucleus mass. */
  topP: number;
  /** Stop token ids (the stop token is part of the output). */
  stop: readonly number[];
  /** Seed of the request. */
  seed?: number;
  /** The episode's session id (with `sessions: true`). */
  sessionId?: string;
  /** Routing key of the episode: its requests go to one server while it answers. */
  affinity: string;
}

/** What a completions service returned for one request. */
export interface TokenCompletion {
  /** The sampled token ids (a stop token included when one ended the completion). */
  tokens: number[];
  /** Their log-probs. */
  logProbs: number[];
  /** `stop` (a stop token) or `length` (max tokens, or a full context). */
  finishReason: 'stop' | 'length';
}

/** A completions service, token-in/token-out (implemented over an HTTP client by lib/openai). */
export interface TokenCompletions {
  /** Runs one completion (rejects with a clear error when the service fails or answers without ids or log-probs). */
  complete(request: TokenCompletionRequest): Promise<TokenCompletion>;
  /** Forgets an episode's routing key (called when its session is disposed). */
  release?(affinity: string): void;
}

/** Options of {@link CompletionTokenPolicy}. */
export interface CompletionTokenPolicyOptions {
  /** The service. */
  completions: TokenCompletions;
  /** The vocabulary size (returned ids are checked against it). */
  vocabSize: number;
  /**
   * Send a session id per episode with the episode's seed (see the module description), for
   * `sinkflex serve`. Default false: each turn is an independent request seeded with its turn's seed.
   */
  sessions?: boolean;
}

let sessionCounter = 0;

class CompletionTokenSession implements TokenSession {
  private readonly context: number[] = [];
  private closed = false;
  private busy = false;
  private readonly affinity: string;

  constructor(
    private readonly policy: CompletionTokenPolicy,
    private readonly episode: SessionContext,
  ) {
    this.affinity = `ep-${process.pid}-${++sessionCounter}-${episode.seed}`;
  }

  get length(): number {
    return this.context.length;
  }

  append(tokens: ArrayLike<number>): void {
    if (this.closed) throw new Error('append: the session is disposed');
    if (this.busy) throw new Error('append: a sample of this session is still running');
    const vocab = this.policy.vocabSize;
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (!Number.isInteger(t) || t < 0 || t >= vocab)
        throw new RangeError(`append: token ${i} is ${String(t)}, not an id in [0, ${vocab})`);
    }
    for (let i = 0; i < tokens.length; i++) this.context.push(tokens[i]);
  }

  async sample(params: SampleOptions): Promise<TokenSampleResult> {
    if (this.closed) throw new Error('sample: the session is disposed');
    if (this.busy) throw new Error('sample: one sample at a time');
    checkSampleParams(params);
    if (this.context.length === 0) throw new RangeError('sample: append a prompt first (the session is empty)');
    const sessions = this.policy.sessions;
    const seed = sessions ? this.episode.seed >>> 0 : params.seed;
    this.busy = true;
    try {
      const r = await this.policy.completions.complete({
        prompt: this.context.slice(),
        maxTokens: params.maxTokens,
        temperature: params.temperature ?? 1,
        topP: params.topP ?? 1,
        stop: params.stop ?? [],
        ...(seed !== undefined ? { seed } : {}),
        ...(sessions ? { sessionId: this.affinity } : {}),
        affinity: this.affinity,
      });
      const problem = checkCompletion(r, params.maxTokens, this.policy.vocabSize);
      if (problem) throw new Error(`the completions service answered badly: ${problem}`);
      for (const t of r.tokens) this.context.push(t);
      return { tokens: r.tokens, logProbs: r.logProbs, finishReason: r.finishReason };
    } finally {
      this.busy = false;
    }
  }

  dispose(): void {
    if (this.closed) return;
    this.closed = true;
    this.policy.completions.release?.(this.affinity);
  }
}

function checkCompletion(r: TokenCompletion, maxTokens: number, vocab: number): string | null {
  if (r === null || typeof r !== 'object' || !Array.isArray(r.tokens) || !Array.isArray(r.logProbs))
    return 'no tokens and log-probs';
  if (r.tokens.length > maxTokens) return `${r.tokens.length} tokens for max_tokens ${maxTokens}`;
  if (r.logProbs.length !== r.tokens.length) return `${r.logProbs.length} log-probs for ${r.tokens.length} tokens`;
  for (let i = 0; i < r.tokens.length; i++) {
    const t = r.tokens[i];
    if (!Number.isInteger(t) || t < 0 || t >= vocab) return `token ${i} is ${String(t)}, not an id in [0, ${vocab})`;
    if (!Number.isFinite(r.logProbs[i]) || r.logProbs[i] > 1e-6)
      return `log-prob ${i} is ${r.logProbs[i]}, not a finite number <= 0`;
  }
  if (r.finishReason !== 'stop' && r.finishReason !== 'length')
    return `finish reason ${JSON.stringify(r.finishReason)}`;
  return null;
}

/** A completions service as a {@link TokenPolicy} (see the module description). */
export class CompletionTokenPolicy implements TokenPolicy {
  /** The service. */
  readonly completions: TokenCompletions;
  /** The vocabulary size. */
  readonly vocabSize: number;
  /** Whether requests carry a session id per episode (with the episode seed). */
  readonly sessions: boolean;

  /** @param options - the service, the vocabulary size, seeding. */
  constructor(options: CompletionTokenPolicyOptions) {
    if (options === null || typeof options !== 'object')
      throw new TypeError('CompletionTokenPolicy expects an options object');
    if (!options.completions || typeof options.completions.complete !== 'function')
      throw new TypeError('options.completions must be a TokenCompletions (complete)');
    if (!Number.isSafeInteger(options.vocabSize) || options.vocabSize < 1)
      throw new RangeError(`options.vocabSize must be a positive integer, got ${String(options.vocabSize)}`);
    if (options.sessions !== undefined && typeof options.sessions !== 'boolean')
      throw new TypeError('options.sessions must be a boolean');
    this.completions = options.completions;
    this.vocabSize = options.vocabSize;
    this.sessions = options.sessions ?? false;
  }

  /** A session holding the episode's context locally. */
  createSession(context: SessionContext): TokenSession {
    return new CompletionTokenSession(this, context);
  }
}
