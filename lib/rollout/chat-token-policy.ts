/**
 * {@link ChatTokenPolicy}: a message-level {@link ChatPolicy} behind the token interface. Each
 * session decodes the tokens it is given back into the conversation (with the chat format's
 * reader: the built-in template has one), asks the chat policy for the next assistant message,
 * and returns that message's rendering (`renderAssistantBody`, the stop token included; raw
 * text as its tokens and the first stop token) as the sampled tokens, cut at the first stop
 * token and at `maxTokens`. No log-probs (the tokens were not sampled from a distribution),
 * unless the reply is a {@link ChatTurn} carrying the server's own tokens and log-probs (a
 * server sharing the template's tokenizer: token-in/token-out), which are used verbatim; a
 * turn the server cut (`finishReason: 'length'`) stays cut.
 * @module
 */
import type { ChatFormat, ConversationReader } from '../chat/chat-format.js';
import type { ChatAssistantMessage } from '../chat/messages.js';
import { ConversationDecodeError } from '../chat/conversation-decoder.js';
import {
  isChatTurn,
  type ChatConversation,
  type ChatPolicy,
  type SessionContext,
  type TokenPolicy,
  type SampleOptions,
  type TokenSampleResult,
  type TokenSession,
} from './policy.js';

/** Checks sampling parameters (shared by the policies of this package). */
export function checkSampleParams(params: SampleOptions): void {
  if (params === null || typeof params !== 'object') throw new TypeError('sample params must be an object');
  if (!Number.isInteger(params.maxTokens) || params.maxTokens < 1)
    throw new RangeError(`maxTokens must be a positive integer, got ${String(params.maxTokens)}`);
  if (params.temperature !== undefined && !(params.temperature >= 0 && Number.isFinite(params.temperature)))
    throw new RangeError(`temperature must be a finite number >= 0, got ${params.temperature}`);
  if (params.topP !== undefined && !(params.topP > 0 && params.topP <= 1))
    throw new RangeError(`topP must be in (0, 1], got ${params.topP}`);
  if (params.stop !== undefined && !Array.isArray(params.stop))
    throw new TypeError('stop must be an array of token ids');
}

class ChatTokenSession implements TokenSession {
  private readonly decoder: ConversationReader;
  private closed = false;
  private busy = false;

  constructor(
    private readonly format: MessageLevelFormat,
    private readonly conversation: ChatConversation,
  ) {
    this.decoder = format.createReader();
  }

  get length(): number {
    return this.decoder.length;
  }

  append(tokens: ArrayLike<number>): void {
    if (this.closed) throw new Error('ChatTokenSession: append after dispose()');
    if (this.busy) throw new Error('ChatTokenSession: append while a sample is in progress');
    this.decoder.push(tokens);
  }

  async sample(params: SampleOptions): Promise<TokenSampleResult> {
    if (this.closed) throw new Error('ChatTokenSession: sample after dispose()');
    if (this.busy) throw new Error('ChatTokenSession: one sample at a time');
    checkSampleParams(params);
    if (!this.decoder.awaitingAssistant)
      throw new ConversationDecodeError('the context does not end with a generation prompt (<|start|>assistant)');
    this.busy = true;
    try {
      const reply = await this.conversation.respond({
        messages: this.decoder.messages.slice(),
        tools: this.decoder.tools,
        params: { temperature: params.temperature, topP: params.topP, maxTokens: params.maxTokens, seed: params.seed },
      });
      const turn = isChatTurn(reply) ? reply : { message: reply };
      let body: number[];
      let logProbs: number[] | undefined;
      if (turn.tokens !== undefined) {
        const vocab = this.format.tokenizer.vocabSize;
        body = Array.from(turn.tokens);
        for (const t of body)
          if (!Number.isInteger(t) || t < 0 || t >= vocab)
            throw new RangeError(`the reply's token ${String(t)} is not in the template's vocabulary [0, ${vocab})`);
        if (turn.logProbs !== undefined) {
          if (turn.logProbs.length !== body.length)
            throw new RangeError(`the reply has ${turn.logProbs.length} log-probs for ${body.length} tokens`);
          logProbs = Array.from(turn.logProbs);
        }
      } else if (turn.rawText !== undefined) {
        // Text outside any section: the template cannot parse it, so the agent loop hands the text to the environment verbatim.
        body = [...this.format.tokenizer.encode(turn.rawText), this.format.stopTokens[0]];
      } else body = this.format.renderAssistantBody(turn.message);
      let n = body.length;
      let finishReason: 'stop' | 'length' = 'stop';
      if (turn.finishReason === 'length') {
        finishReason = 'length';
        if (turn.tokens === undefined && this.format.stopTokens.includes(body[body.length - 1])) n--;
      }
      if (params.stop && params.stop.length > 0) {
        const stop = new Set(params.stop);
        const at = body.findIndex((t) => stop.has(t));
        if (at >= 0 && at < n) {
          n = at + 1;
          finishReason = 'stop';
        }
      }
      if (n > params.maxTokens) {
        n = params.maxTokens;
        finishReason = 'length';
      }
      const tokens = body.slice(0, n);
      this.decoder.push(tokens);
      return logProbs ? { tokens, logProbs: logProbs.slice(0, n), finishReason } : { tokens, finishReason };
    } finally {
      this.busy = false;
    }
  }

  dispose(): void {
    if (this.closed) return;
    this.closed = true;
    this.conversation.dispose?.();
  }
}

/** A chat format that can read its token streams back into messages and render an assistant reply's tokens. */
type MessageLevelFormat = ChatFormat & {
  createReader(): ConversationReader;
  renderAssistantBody(m: ChatAssistantMessage): number[];
};

/** A {@link ChatPolicy} as a {@link TokenPolicy} (see the module description). */
export class ChatTokenPolicy implements TokenPolicy {
  /** The chat format the agent loop renders with. */
  readonly format: ChatFormat;

  /**
   * @param chat - the message-level policy.
   * @param format - the chat format the agent loop renders with; it must read its token
   *   streams back into messages (`createReader`) and render replies (`renderAssistantBody`),
   *   as the built-in ChatTemplate does.
   */
  constructor(
    readonly chat: ChatPolicy,
    format: ChatFormat,
  ) {
    if (!format || typeof format.createReader !== 'function' || typeof format.renderAssistantBody !== 'function') {
      throw new TypeError(
        'ChatTokenPolicy needs a chat format that reads its token streams back into messages (createReader) and renders replies (renderAssistantBody), such as the built-in ChatTemplate',
      );
    }
    this.format = format;
  }

  /** A session whose context is decoded back into messages. */
  createSession(context: SessionContext): TokenSession {
    return new ChatTokenSession(this.format as MessageLevelFormat, this.chat.startConversation(context));
  }
}
