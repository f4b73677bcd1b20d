/**
 * `sinkflex-rl/chat`: text and tokens of a conversation: the built-in tokenizer (byte-level BPE)
 * and Hugging Face `tokenizer.json` tokenizers, the chat formats behind one interface
 * ({@link ChatFormat}: the built-in template, Jinja chat templates with Hermes tool calls,
 * gpt-oss's harmony) with their message types, the decoder of a growing token stream, and the one
 * reader of a tool call's JSON. A leaf layer: it imports only `util`, and `model`, `rollout`,
 * `openai` and `trainer` build on it.
 * @packageDocumentation
 */
export type {
  ChatFormat,
  ChatFormatAppendOptions,
  ChatFormatRenderOptions,
  ChatFormatTokenizer,
  ConversationReader,
  ParsedCompletion,
  ParseResult,
} from './chat-format.js';
export {
  appendTokens,
  ChatTemplate,
  ChatTemplateError,
  trainChatTokenizer,
  type RenderOptions,
} from './chat-template.js';
export { ConversationDecodeError, ConversationDecoder } from './conversation-decoder.js';
export { loadChatFormat, type ChatFormatOptions, type PretrainedChatFormat } from './hf/factory.js';
export {
  HarmonyChatFormat,
  type HarmonyChatFormatOptions,
  type HarmonyRenderChatOptions,
} from './hf/harmony-format.js';
export type { ReasoningEffort } from './hf/harmony-render.js';
export {
  JinjaChatFormat,
  type JinjaChatFormatOptions,
  type JinjaRenderOptions,
  type RenderedChat,
} from './hf/jinja-format.js';
export {
  HfTokenizer,
  HfTokenizerError,
  type HfDecodeOptions,
  type HfEncodeOptions,
  type HfSpecialTokens,
  type HfTokenizerFiles,
  type HfTokenizerOptions,
} from './hf/tokenizer.js';
export type { ChatAssistantMessage, ChatMessage, ChatToolCall, ToolSchema } from './messages.js';
export {
  Tokenizer,
  TokenizerError,
  type DecodeOptions,
  type TokenizerJSON,
  type TokenizerTrainOptions,
} from './tokenizer.js';
export { decodeWtf8 } from './utf8.js';
