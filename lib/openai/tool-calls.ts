/**
 * Reading an OpenAI-compatible server's assistant message: structured `tool_calls`, or — for
 * servers that return plain text — Hermes-style `<tool_call>{"name": …, "arguments": …}</tool_call>`
 * blocks (and a bare JSON call) parsed with the tau environment's own reader
 * ({@link parseActionText}), so a call means the same thing on both paths. A reply that cannot
 * be read as a well-formed message (a broken `<tool_call>` block, a structured call without a
 * name) is kept as raw text: the environment then answers it with an `Error: …` tool message,
 * which the model sees on its next turn.
 * @module
 */
import type { ChatAssistantMessage, ChatToolCall } from '../chat/messages.js';
import { parseActionText } from '../tau/action.js';

/** A tool call as an OpenAI-compatible server returns it. */
export interface WireToolCall {
  /** The call id. */
  id?: string;
  /** Always `function`. */
  type?: string;
  /** The function and its JSON-text arguments. */
  function?: { name?: unknown; arguments?: unknown };
}

/** An assistant message as an OpenAI-compatible server returns it. */
export interface WireAssistantMessage {
  /** Text (some servers send an array of text parts). */
  content?: string | null | { type?: string; text?: string }[];
  /** Structured tool calls. */
  tool_calls?: WireToolCall[] | null;
}

/** What {@link readAssistantReply} made of a reply. */
export interface AssistantReply {
  /** The message to record (tool calls with ids `<idPrefix><i>` when the server gave none). */
  message: ChatAssistantMessage;
  /** Set when the reply is not a well-formed message: the text to hand to the environment verbatim. */
  rawText?: string;
  /** Why it is not well formed (with `rawText`). */
  problem?: string;
}

/** The text of a message's content (text parts joined; null stays null). */
export function contentText(content: WireAssistantMessage['content']): string | null {
  if (content === undefined || content === null) return null;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (p && typeof p.text === 'string' ? p.text : '')).join('');
  return null;
}

function argumentsText(args: unknown): string {
  if (typeof args === 'string') return args;
  if (args === undefined || args === null) return '{}';
  return JSON.stringify(args);
}

/** The Hermes rendering of a call (how a broken structured call is shown to the environment). */
function hermes(name: unknown, args: unknown): string {
  return `<tool_call>${JSON.stringify({ name: typeof name === 'string' ? name : null, arguments: typeof args === 'string' ? args : (args ?? {}) })}</tool_call>`;
}

/**
 * Reads an assistant reply (never throws). Structured `tool_calls` win over text parsing; a
 * structured call's arguments stay the server's JSON text (the environment answers arguments
 * that are not a JSON object with an error).
 */
export function readAssistantReply(wire: WireAssistantMessage, idPrefix = 'call_'): AssistantReply {
  const text = contentText(wire?.content);
  const structured = Array.isArray(wire?.tool_calls) ? wire.tool_calls : [];
  if (structured.length > 0) {
    const calls: ChatToolCall[] = [];
    let problem: string | undefined;
    structured.forEach((c, i) => {
      const name = c?.function?.name;
      if (typeof name !== 'string' || name === '') problem ??= `tool call ${i} has no function name`;
      calls.push({
        id: typeof c?.id === 'string' && c.id !== '' ? c.id : `${idPrefix}${i}`,
        type: 'function',
        function: { name: typeof name === 'string' ? name : '', arguments: argumentsText(c?.function?.arguments) },
      });
    });
    if (problem) {
      const raw = (text ?? '') + structured.map((c) => hermes(c?.function?.name, c?.function?.arguments)).join('');
      return { message: { role: 'assistant', content: raw }, rawText: raw, problem };
    }
    const message: ChatAssistantMessage = {
      role: 'assistant',
      content: text !== null && text.trim() !== '' ? text : null,
      tool_calls: calls,
    };
    return { message };
  }
  if (text === null) return { message: { role: 'assistant', content: '' } };
  const parsed = parseActionText(text);
  if (parsed.problem) return { message: { role: 'assistant', content: text }, rawText: text, problem: parsed.problem };
  if (parsed.toolCalls.length === 0) return { message: { role: 'assistant', content: text } };
  const calls: ChatToolCall[] = parsed.toolCalls.map((c, i) => {
    const f = 'function' in c ? c.function : c;
    return {
      id: `${idPrefix}${i}`,
      type: 'function',
      function: { name: f.name, arguments: argumentsText(f.arguments) },
    };
  });
  return { message: { role: 'assistant', content: parsed.content, tool_calls: calls } };
}
