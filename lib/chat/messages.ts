/**
 * The messages a chat format (`ChatFormat`) renders and parses: OpenAI's chat format (system, user,
 * assistant with text, reasoning and tool calls whose arguments are JSON text, tool results),
 * the vocabulary of the chat formats, the agent loop, the OpenAI client and server. The tau
 * world keeps its own message shapes (`sinkflex-rl/tau`'s `Message`, tau2's: parsed arguments,
 * a requestor); the rollout layer converts between the two.
 * @module
 */
/** A tool call of an assistant message (OpenAI chat format). */
export interface ChatToolCall {
  /** The call's id (`call_0`, …), which the tool message answering it names. */
  id?: string;
  /** Always `'function'` when given. */
  type?: 'function';
  /** The tool to call and its arguments. */
  function: {
    /** The tool's name. */
    name: string;
    /** The arguments as JSON text. */
    arguments: string;
  };
}

/** A chat message (OpenAI chat format). */
export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | {
      role: 'assistant';
      content?: string | null;
      tool_calls?: ChatToolCall[];
      /** The model's reasoning before this reply (Qwen3's `<think>`, harmony's analysis); the built-in template ignores it. */
      reasoning_content?: string | null;
    }
  | { role: 'tool'; content: string; tool_call_id?: string; name?: string };

/** An assistant message as parsed from generated tokens. */
export type ChatAssistantMessage = Extract<ChatMessage, { role: 'assistant' }>;

/** A tool schema as passed to chat APIs (rendered as JSON; any JSON-serialisable object). */
export type ToolSchema = Record<string, unknown>;
