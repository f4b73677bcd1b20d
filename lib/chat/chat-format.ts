/**
 * {@link ChatFormat}: what the agent loop, the turn parser, the chat token policy and the
 * serving engine need from a chat format, token-in/token-out. Implemented by the built-in
 * {@link ChatTemplate}, by Jinja chat templates of pretrained models (`JinjaChatFormat`) and by
 * gpt-oss's harmony format (`HarmonyChatFormat`).
 *
 * The contract: a prompt is {@link ChatFormat.renderTokens} of the conversation so far; the
 * model's sampled tokens are kept verbatim; after a sampled assistant turn, the tokens of the
 * environment's new messages (and the next generation prompt) are
 * {@link ChatFormat.renderAppend}. Where the format allows, the tokens assembled this way equal
 * {@link ChatFormat.renderTokens} of the whole conversation (each implementation documents
 * where it does not).
 * @module
 */
import type { ChatAssistantMessage, ChatMessage, ChatToolCall, ToolSchema } from './messages.js';

/** Result of {@link ChatFormat.parseAssistant}: a message, or why the tokens are not one. */
export type ParseResult =
  | { ok: true; message: ChatAssistantMessage; /** tokens used, including <|end|> */ consumed: number }
  | { ok: false; error: string; /** the generated text, specials included, for logs */ text: string };

/** The tokenizer side of a chat format. */
export interface ChatFormatTokenizer {
  /** One more than the largest token id. */
  readonly vocabSize: number;
  /** Token ids of plain text (no special tokens added around it). */
  encode(text: string): number[];
  /** Text of token ids (special tokens written by name, or left out with `skipSpecialTokens`). */
  decode(ids: ArrayLike<number>, options?: { skipSpecialTokens?: boolean }): string;
  /** The bytes one token stands for (optional; e.g. for OpenAI's `logprobs[].bytes`). */
  tokenBytes?(id: number): Uint8Array;
}

/** Options of {@link ChatFormat.renderTokens}. */
export interface ChatFormatRenderOptions {
  /** Tool schemas (OpenAI format: `{ type: 'function', function: { name, description, parameters } }`). */
  tools?: readonly ToolSchema[];
  /** End with the prompt the assistant's reply follows. */
  addGenerationPrompt?: boolean;
  /**
   * Extra template variables (vLLM's `chat_template_kwargs`, e.g. Qwen3's `enable_thinking`);
   * only for a format with {@link ChatFormat.templateVariables}.
   */
  kwargs?: Readonly<Record<string, unknown>>;
}

/** Options of {@link ChatFormat.renderAppend}. */
export interface ChatFormatAppendOptions {
  /** The tool schemas the conversation was rendered with. */
  tools?: readonly ToolSchema[];
  /** The template variables it was rendered with (see {@link ChatFormatRenderOptions.kwargs}). */
  kwargs?: Readonly<Record<string, unknown>>;
}

/** What a completion says: text for the user, tool calls, reasoning; or why it cannot be read. */
export interface ParsedCompletion {
  /** Text for the user (null when there is none). */
  content: string | null;
  /** Tool calls (ids `call_0`, `call_1`, …); empty on a parse error. */
  toolCalls: ChatToolCall[];
  /** The model's reasoning (`<think>` block, harmony's analysis channel), or null. */
  reasoning: string | null;
  /**
   * Why the completion is malformed (a broken tool call, a cut turn), or null. On an error,
   * `content` is the raw text the agent loop hands the environment (tool calls as Hermes
   * `<tool_call>` blocks), which answers a broken call with an `Error: …` tool message.
   */
  error: string | null;
}

/** Reads a token stream of a format back into messages (for message-level policies behind a token interface). */
export interface ConversationReader {
  /** The complete messages so far. */
  readonly messages: ChatMessage[];
  /** The tool schemas, once read. */
  readonly tools: ToolSchema[];
  /** Tokens read so far. */
  readonly length: number;
  /** Whether the stream ends with a generation prompt. */
  readonly awaitingAssistant: boolean;
  /** Reads more tokens (throws on a stream the format cannot have produced). */
  push(tokens: ArrayLike<number>): void;
}

/** A chat format, token-in/token-out (see the module description). */
export interface ChatFormat {
  /** Its tokenizer (the vocabulary of the policy). */
  readonly tokenizer: ChatFormatTokenizer;
  /** Padding id for batches. */
  readonly pad: number;
  /** Tokens that end an assistant turn when sampling. */
  readonly stopTokens: number[];
  /** Whether rendering takes template variables (`options.kwargs`: a Jinja chat template does). */
  readonly templateVariables?: boolean;
  /** The tokens of a conversation. */
  renderTokens(messages: readonly ChatMessage[], options?: ChatFormatRenderOptions): number[];
  /**
   * The tokens that follow a context holding `history` for the new messages `next`, through
   * the next generation prompt. When `history` ends with an assistant message, that turn was
   * sampled (its tokens are in the context verbatim, ending with a stop token); otherwise the
   * context is `renderTokens(history, { tools })`.
   */
  renderAppend(
    history: readonly ChatMessage[],
    next: readonly ChatMessage[],
    options?: ChatFormatAppendOptions,
  ): number[];
  /** Parses a sampled assistant turn (never throws); tool calls get ids `<idPrefix>0`, `<idPrefix>1`, …. */
  parseAssistant(tokens: ArrayLike<number>, idPrefix?: string): ParseResult;
  /**
   * The text of a sampled turn that could not be parsed, in the environment's raw-text protocol
   * (text as is, tool calls as Hermes `<tool_call>{"name", "arguments"}</tool_call>` blocks,
   * reasoning left out), up to the first stop token.
   */
  rawActionText(tokens: ArrayLike<number>): string;
  /** What the model generates after the generation prompt for this message, stop token included (optional). */
  renderAssistantBody?(message: ChatAssistantMessage): number[];
  /** A reader of this format's token streams (optional; the built-in template has one). */
  createReader?(): ConversationReader;
  /**
   * A cheap lower bound on `renderTokens(messages, options).length` computed without
   * tokenizing (optional): a server refuses a prompt that cannot fit its context before
   * spending time and memory on encoding it.
   */
  minTokens?(messages: readonly ChatMessage[], options?: ChatFormatRenderOptions): number;
}
