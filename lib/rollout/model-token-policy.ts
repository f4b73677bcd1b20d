/**
 * The bridge from the model layer's {@link GenerativeModel} (the built-in `TransformerPolicy`,
 * a pretrained model) to the agent loop's {@link TokenPolicy}.
 *
 * Each episode gets one model session seeded with the episode's seed, so its samples depend
 * only on the episode (its context and seed), never on which other episodes are decoded in
 * the same batch: the model batches every session that is waiting on `sample` into one
 * forward per decoding step by itself, so no `generateBatch` is needed here.
 * @module
 */
import type { GenerativeModel, ModelSession, SampleResult } from '../model/policy.js';
import type { SessionContext, TokenPolicy, TokenSampleParams, TokenSampleResult, TokenSession } from './policy.js';

/** A model session as the agent loop's {@link TokenSession}. */
class AdaptedSession implements TokenSession {
  private closed = false;
  constructor(private readonly inner: ModelSession) {}

  get length(): number {
    return this.inner.length;
  }

  append(tokens: ArrayLike<number>): void {
    if (this.closed) throw new Error('append: the session is disposed');
    this.inner.append(tokens);
  }

  async sample(params: TokenSampleParams): Promise<TokenSampleResult> {
    if (this.closed) throw new Error('sample: the session is disposed');
    const r: SampleResult = await this.inner.sample({
      maxTokens: params.maxTokens,
      ...(params.temperature !== undefined ? { temperature: params.temperature } : {}),
      ...(params.topP !== undefined ? { topP: params.topP } : {}),
      ...(params.stop !== undefined ? { stop: params.stop } : {}),
    });
    // 'context' (the model's context is full) is a length cut for the agent loop.
    const finishReason = r.finishReason === 'stop' ? 'stop' : 'length';
    return { tokens: r.tokens, logProbs: r.logProbs, finishReason };
  }

  dispose(): void {
    if (this.closed) return;
    this.closed = true;
    this.inner.dispose();
  }

  /** {@link dispose} (for `using`). */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * Adapts a model-layer {@link GenerativeModel} (e.g. `TransformerPolicy`) to the agent loop's
 * {@link TokenPolicy}. Sessions are seeded with the episode seed (`SessionContext.seed`);
 * the per-turn seeds of the requests are not needed, since a session's random stream already
 * continues deterministically from turn to turn.
 */
export class ModelPolicyAdapter implements TokenPolicy {
  /** @param model - the model (its sessions are created on demand and disposed with the episode's session). */
  constructor(readonly model: GenerativeModel) {
    if (!model || typeof model.createSession !== 'function') throw new TypeError('ModelPolicyAdapter expects a GenerativeModel (createSession)');
  }

  /** A model session seeded with the episode seed (disposable with `using`). */
  createSession(context: SessionContext): TokenSession & Disposable {
    const seed = context.seed >>> 0;
    return new AdaptedSession(this.model.createSession({ seed }));
  }
}
