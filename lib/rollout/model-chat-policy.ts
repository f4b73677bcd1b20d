/**
 * {@link ModelChatPolicy}: a generative model as a message-level {@link ChatPolicy}. Each reply
 * renders the conversation with a chat format (and a generation prompt), samples until one of
 * the format's stop tokens and parses the assistant message. `ChatPolicy` is the one vocabulary
 * of a messages-in, message-out model: the model layer has none of its own.
 * @module
 */
import type { ChatFormat } from '../chat/chat-format.js';
import type { GenerativeModel } from '../model/policy.js';
import type { ChatConversation, ChatPolicy, ChatPolicyRequest, ChatTurn, SessionContext } from './policy.js';

/**
 * A {@link GenerativeModel} behind the {@link ChatPolicy} interface. A reply is a
 * {@link ChatTurn} with the sampled tokens and their log-probs (in the format's vocabulary, so
 * a `ChatTokenPolicy` over the same format records them verbatim), its finish reason,
 * and, when the tokens do not parse as a message, the format's raw-text reading of them
 * (`rawText`, which the environment answers with an `Error: …` tool message for a broken call).
 */
export class ModelChatPolicy implements ChatPolicy {
  /**
   * @param model - the token-level model that generates.
   * @param format - the chat format that renders and parses (the built-in ChatTemplate or a
   *   pretrained model's).
   */
  constructor(
    readonly model: GenerativeModel,
    readonly format: ChatFormat,
  ) {}

  /**
   * A conversation: each `respond` samples one reply in a fresh model session, seeded by the
   * request's `params.seed` (the episode's context is not needed).
   */
  startConversation(_context: SessionContext): ChatConversation {
    return { respond: (request) => this.reply(request) };
  }

  /**
   * Renders the conversation with a generation prompt, samples to a stop token (at most
   * `params.maxTokens`, default: what the model's context leaves) and parses the reply.
   */
  private async reply(request: ChatPolicyRequest): Promise<ChatTurn> {
    const { messages, tools, params } = request;
    const prompt = this.format.renderTokens(messages, { tools, addGenerationPrompt: true });
    const maxTokens = params.maxTokens ?? this.model.contextLength - prompt.length;
    if (!(maxTokens >= 1))
      throw new RangeError(
        `the prompt (${prompt.length} tokens) leaves no room in the model's context (${this.model.contextLength})`,
      );
    const session = this.model.createSession({ seed: params.seed });
    try {
      session.append(prompt);
      const r = await session.sample({
        maxTokens,
        temperature: params.temperature,
        topP: params.topP,
        stop: this.format.stopTokens,
      });
      const tokens = Array.from(r.tokens);
      const turn: ChatTurn = {
        message: { role: 'assistant', content: null },
        finishReason: r.finishReason === 'stop' ? 'stop' : 'length',
        tokens,
      };
      if (r.logProbs !== undefined) turn.logProbs = Array.from(r.logProbs);
      const parsed = this.format.parseAssistant(tokens);
      if (parsed.ok) turn.message = parsed.message;
      else {
        turn.rawText = this.format.rawActionText(tokens);
        turn.message = { role: 'assistant', content: turn.rawText };
      }
      return turn;
    } finally {
      session.dispose();
    }
  }
}
