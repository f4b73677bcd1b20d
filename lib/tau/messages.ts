/**
 * Chat messages of a dual-control conversation, in tau2's shapes (camel-cased where tau2's
 * Python names would clash with TypeScript conventions: `toolCalls`).
 * @module
 */

/** Who issued a tool call: the agent (`assistant`) or the simulated user. */
export type ToolRequestor = 'assistant' | 'user';

/** One tool call: id, tool name, parsed arguments and who asked for it. */
export interface ToolCall {
  /** Call id; the matching {@link ToolMessage} carries the same id. */
  id: string;
  /** Tool name. */
  name: string;
  /** Arguments as a JSON object. */
  arguments: Record<string, unknown>;
  /** Who made the call. */
  requestor: ToolRequestor;
}

/** The system prompt. */
export interface SystemMessage {
  /** Role tag. */
  role: 'system';
  /** Prompt text. */
  content: string;
}

/** A message from the agent: text for the user, or tool calls (never both when valid). */
export interface AssistantMessage {
  /** Role tag. */
  role: 'assistant';
  /** Text for the user, or null when the message only calls tools. */
  content: string | null;
  /** Tool calls; absent or empty for a text message. */
  toolCalls?: ToolCall[];
}

/** A message from the (simulated) user: text for the agent, or calls to the user's own tools. */
export interface UserMessage {
  /** Role tag. */
  role: 'user';
  /** Text for the agent, or null when the message only calls user tools. */
  content: string | null;
  /** Calls to user tools (dual control); absent for a text message. */
  toolCalls?: ToolCall[];
}

/** The result of one tool call. */
export interface ToolMessage {
  /** Role tag. */
  role: 'tool';
  /** The id of the call this answers. */
  id: string;
  /** Result text: JSON for objects, the plain string for strings, `Error: …` on failure. */
  content: string;
  /** Who made the call. */
  requestor: ToolRequestor;
  /** True when the call failed (counts toward the error budget). */
  error: boolean;
  /**
   * sinkflex extension: true when the call was rejected before it ran (malformed action:
   * unknown tool, bad JSON, bad argument types, tool call mixed with text, several calls).
   * Grading never replays a rejected call.
   */
  rejected?: boolean;
}

/** Any message of a trajectory. */
export type Message = SystemMessage | AssistantMessage | UserMessage | ToolMessage;

/** True when a participant message calls tools. */
export function isToolCallMessage(m: Message): m is (AssistantMessage | UserMessage) & { toolCalls: ToolCall[] } {
  return (m.role === 'assistant' || m.role === 'user') && Array.isArray(m.toolCalls) && m.toolCalls.length > 0;
}

/** True when a participant message has non-empty text. */
export function hasText(m: Message): boolean {
  return typeof m.content === 'string' && m.content.length > 0;
}

/** One message in OpenAI chat-completions format. */
export type OpenAIChatMessage =
  | { role: 'system' | 'user'; content: string }
  | {
      role: 'assistant';
      content: string | null;
      tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
    }
  | { role: 'tool'; tool_call_id: string; content: string };

/**
 * Converts a trajectory (as the agent sees it) to OpenAI chat-completions messages: tool calls
 * with JSON-string arguments, tool results keyed by `tool_call_id`. User tool calls and their
 * results are private to the user and are left out.
 */
export function toOpenAIMessages(messages: readonly Message[]): OpenAIChatMessage[] {
  const out: OpenAIChatMessage[] = [];
  for (const m of messages) {
    if (m.role === 'system') out.push({ role: 'system', content: m.content });
    else if (m.role === 'user') {
      if (hasText(m)) out.push({ role: 'user', content: m.content as string });
    } else if (m.role === 'assistant') {
      const calls = m.toolCalls ?? [];
      out.push({
        role: 'assistant',
        content: m.content,
        ...(calls.length > 0
          ? {
              tool_calls: calls.map((c) => ({
                id: c.id,
                type: 'function' as const,
                function: { name: c.name, arguments: JSON.stringify(c.arguments) },
              })),
            }
          : {}),
      });
    } else if (m.requestor === 'assistant') {
      out.push({ role: 'tool', tool_call_id: m.id, content: m.content });
    }
  }
  return out;
}

/** `role: content` transcript lines as tau2's judges read them (tool calls in functional form). */
export function transcript(messages: readonly Message[]): string {
  return messages
    .map((m) => {
      if (m.role !== 'tool' && m.role !== 'system' && m.toolCalls && m.toolCalls.length > 0) {
        const calls = m.toolCalls
          .map(
            (c) =>
              `${c.name}(${Object.entries(c.arguments)
                .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
                .join(', ')})`,
          )
          .join('; ');
        return `${m.role}: ${m.content ? `${m.content} ` : ''}${calls}`;
      }
      return `${m.role}: ${m.content ?? ''}`;
    })
    .join('\n');
}
