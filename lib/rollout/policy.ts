/**
 * What the agent loop needs from a policy. Two levels:
 *
 * - {@link TokenPolicy} (token-in/token-out, what training needs): one {@link TokenSession}
 *   per episode holds the context (a KV cache for a native model); the loop appends the
 *   prompt and environment tokens with `append` and asks for the next assistant turn with
 *   `sample`. Sampled tokens are part of the context afterwards and are used verbatim (never
 *   re-tokenized). `generateBatch` serves the pending requests of many sessions at once, so
 *   that a model can batch decoding across concurrent episodes.
 * - {@link ChatPolicy} (message-in/message-out): an OpenAI-compatible server or a scripted
 *   agent; {@link ChatTokenPolicy} adapts one to the token interface through the chat
 *   template (the tokens are then the template's rendering of the returned messages).
 *
 * The session types ({@link TokenSession}, `SampleOptions`, {@link TokenSampleResult}) are the
 * model layer's (lib/model/policy.ts), shared by both layers: a model of the model layer (a
 * `GenerativeModel`, e.g. the built-in `TransformerPolicy` or a pretrained model's policy) is a
 * {@link TokenPolicy} as it is — `createSession` takes the episode's context, whose seed seeds
 * its session, so that its samples depend only on the episode, never on which other episodes
 * are decoded in the same batch. A policy implements {@link TokenPolicy} thinly:
 * `createSession` → a KV-cache session,
 * `append` → queue tokens for prefill (done lazily by the next `sample`/`generateBatch`),
 * `generateBatch` → one batched prefill + decode loop with per-request seeds, stop tokens,
 * `maxTokens`, temperature/top-p, returning the sampled ids and their log-probs.
 * @module
 */
import type { ChatAssistantMessage, ChatMessage, ToolSchema } from '../chat/messages.js';
import type { SampleOptions, SessionOptions, TokenSampleResult, TokenSession } from '../model/policy.js';

export type { SampleOptions, TokenSampleResult, TokenSession } from '../model/policy.js';

/**
 * What a session is told about its episode (oracle policies read it; a model's session takes
 * its `seed`, see the model layer's `SessionOptions`).
 */
export interface SessionContext extends SessionOptions {
  /** The id of the episode's task. */
  taskId: string;
  /** The episode's seed. */
  seed: number;
  /** The environment's reset info (tools, policy, domain…). */
  envInfo: Readonly<Record<string, unknown>>;
}

/** One request of a batch. */
export interface TokenSampleRequest {
  /** The session to continue. */
  session: TokenSession;
  /** How to sample. */
  params: SampleOptions;
}

/** A token-in/token-out policy. */
export interface TokenPolicy {
  /** Starts the context of one episode. */
  createSession(context: SessionContext): TokenSession;
  /**
   * Serves several sessions' requests at once (each session at most once per call). Returns
   * one entry per request, in order: the result, or an Error for a request that failed (the
   * other requests still complete). Optional: without it, each session's `sample` is called.
   */
  generateBatch?(requests: readonly TokenSampleRequest[]): Promise<Array<TokenSampleResult | Error>>;
  /** Most requests per `generateBatch` call (default unlimited). */
  readonly maxBatchSize?: number;
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

/**
 * Serves `requests` with the policy's `generateBatch` (when it has one) or each session's
 * `sample`, never rejecting: a failed request (or a failed batch, for all its requests) gives
 * an Error in its slot.
 */
export async function generateBatch(
  policy: TokenPolicy,
  requests: readonly TokenSampleRequest[],
): Promise<Array<TokenSampleResult | Error>> {
  if (requests.length === 0) return [];
  if (typeof policy.generateBatch === 'function') {
    try {
      const out = await policy.generateBatch(requests);
      if (!Array.isArray(out) || out.length !== requests.length) {
        const e = new Error(
          `generateBatch returned ${Array.isArray(out) ? out.length : typeof out} results for ${requests.length} requests`,
        );
        return requests.map(() => e);
      }
      return out;
    } catch (e) {
      const err = asError(e);
      return requests.map(() => err);
    }
  }
  const settled = await Promise.allSettled(requests.map((r) => r.session.sample(r.params)));
  return settled.map((s) => (s.status === 'fulfilled' ? s.value : asError(s.reason)));
}

/** Sampling parameters of a message-level policy. */
export interface ChatSampleParams {
  /** Temperature. */
  temperature?: number;
  /** Nucleus mass. */
  topP?: number;
  /** Most tokens of the reply. */
  maxTokens?: number;
  /** Seed. */
  seed?: number;
}

/** One request to a message-level policy: the whole conversation so far (OpenAI chat format). */
export interface ChatPolicyRequest {
  /** System message first, then the dialogue (tool results answer the calls before them). */
  messages: readonly ChatMessage[];
  /** The tools offered (OpenAI function schemas). */
  tools: readonly ToolSchema[];
  /** Sampling parameters. */
  params: ChatSampleParams;
}

/**
 * A richer reply of a message-level policy (e.g. an OpenAI-compatible server that returns
 * token ids and log-probs): the message plus what the server said about how it was made.
 */
export interface ChatTurn {
  /** The assistant message (what the conversation records). */
  message: ChatAssistantMessage;
  /** `length` when the server cut the reply at its token limit (the turn is then truncated). Default `stop`. */
  finishReason?: 'stop' | 'length';
  /**
   * The reply's tokens in the chat template's vocabulary, verbatim as sampled (token-in/token-out
   * with a server that shares the template's tokenizer): used instead of rendering `message`.
   */
  tokens?: readonly number[];
  /** Log-probability of each of `tokens`. */
  logProbs?: readonly number[];
  /**
   * The model's raw text when it could not be read as a message (e.g. a malformed
   * `<tool_call>` block): the environment gets this text verbatim and answers a broken call
   * with an `Error: …` tool message. Ignored when `tokens` are given.
   */
  rawText?: string;
}

/** Whether a reply of {@link ChatConversation.respond} is a {@link ChatTurn} (rather than a bare message). */
export function isChatTurn(reply: ChatAssistantMessage | ChatTurn): reply is ChatTurn {
  return reply !== null && typeof reply === 'object' && 'message' in reply && !('role' in reply);
}

/** One conversation of a message-level policy. */
export interface ChatConversation {
  /** The next assistant message (or a {@link ChatTurn} with the server's tokens and finish reason). */
  respond(request: ChatPolicyRequest): Promise<ChatAssistantMessage | ChatTurn>;
  /** Releases the conversation. */
  dispose?(): void;
}

/** A message-level policy (an OpenAI-compatible server, a scripted agent). */
export interface ChatPolicy {
  /** Starts a conversation. */
  startConversation(context: SessionContext): ChatConversation;
}
