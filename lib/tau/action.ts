/**
 * Turns whatever a policy produced (an OpenAI-style message object, our message shape, or raw
 * model text) into one well-formed assistant message, or says exactly why it is malformed.
 * Nothing here throws.
 * @module
 */
import { parseToolCallArguments, readToolCall, readToolCallJson, type ToolCallArguments } from '../chat/tool-call.js';
import type { AssistantMessage, ToolCall } from './messages.js';

/** A tool call as a policy may write it. */
export type ToolCallInput =
  | { id?: string; name: string; arguments?: Record<string, unknown> | string }
  | { id?: string; type?: 'function'; function: { name: string; arguments?: Record<string, unknown> | string } };

/** One action: an assistant message (text for the user or one tool call), or raw model text. */
export type AssistantAction =
  | string
  | {
      role?: 'assistant';
      content?: string | null;
      toolCalls?: ToolCallInput[];
      tool_calls?: ToolCallInput[];
    };

/** The normalized action. */
export type NormalizedAction =
  | { kind: 'text'; message: AssistantMessage }
  | { kind: 'tool'; message: AssistantMessage; call: ToolCall }
  | { kind: 'malformed'; message: AssistantMessage; reason: string }
  | { kind: 'invalid'; reason: string };

const TOOL_CALL_TAG = /<tool_call>([\s\S]*?)<\/tool_call>/g;

/**
 * Parses raw model text: `<tool_call>{"name": …, "arguments": …}</tool_call>` (Hermes/Qwen
 * style) or a bare JSON object with a non-empty string `name` is a tool call; anything else is
 * text. Each call's JSON is read by the one tool-call reader (`../chat/tool-call.ts`: flat or
 * OpenAI's nested form, `arguments` or `parameters`).
 */
export function parseActionText(text: string): {
  content: string | null;
  toolCalls: ToolCallInput[];
  problem?: string;
} {
  const calls: ToolCallInput[] = [];
  let problem: string | undefined;
  const tagged = [...text.matchAll(TOOL_CALL_TAG)];
  if (tagged.length > 0) {
    for (const m of tagged) {
      const r = readToolCallJson(m[1].trim());
      if (r.ok) calls.push({ name: r.name, arguments: r.arguments });
      else if (r.problem === 'json') problem ??= `could not parse a <tool_call> block as JSON (${r.detail})`;
      else if (r.problem === 'name') problem ??= 'a <tool_call> block has no tool name';
      // arguments that are neither an object nor text: kept, normalizeAction reports them
      else calls.push({ name: r.name, arguments: r.args as ToolCallArguments });
    }
    const rest = text.replace(TOOL_CALL_TAG, '').trim();
    return { content: rest.length > 0 ? rest : null, toolCalls: calls, problem };
  }
  const trimmed = text.trim();
  if (trimmed.startsWith('{') && trimmed.endsWith('}')) {
    const r = readToolCallJson(trimmed);
    if (r.ok) return { content: null, toolCalls: [{ name: r.name, arguments: r.arguments }] };
    if (r.problem === 'arguments')
      return { content: null, toolCalls: [{ name: r.name, arguments: r.args as ToolCallArguments }] };
    // not JSON, or no tool name: plain text
  }
  return { content: text, toolCalls: [] };
}

/**
 * Normalizes one action. `nextId()` supplies ids for calls that have none.
 * Text and a tool call together, several tool calls, bad JSON arguments or a missing tool name
 * give `malformed` (the calls are recorded but never run); an action with neither text nor a
 * call, or that is not a message at all, gives `invalid`.
 */
export function normalizeAction(action: unknown, nextId: () => string): NormalizedAction {
  let content: string | null;
  let rawCalls: unknown[] = [];
  let problem: string | undefined;
  if (typeof action === 'string') {
    const parsed = parseActionText(action);
    content = parsed.content;
    rawCalls = parsed.toolCalls;
    problem = parsed.problem;
  } else if (action !== null && typeof action === 'object' && !Array.isArray(action)) {
    const a = action as Record<string, unknown>;
    if (a.role !== undefined && a.role !== 'assistant')
      return { kind: 'invalid', reason: `action role must be 'assistant', got ${JSON.stringify(a.role)}` };
    if (a.content !== undefined && a.content !== null && typeof a.content !== 'string') {
      return { kind: 'invalid', reason: 'action content must be a string or null' };
    }
    content = typeof a.content === 'string' ? a.content : null;
    const tc = a.toolCalls ?? a.tool_calls;
    if (tc !== undefined && tc !== null) {
      if (!Array.isArray(tc)) return { kind: 'invalid', reason: 'toolCalls must be an array' };
      rawCalls = tc;
    }
  } else {
    return {
      kind: 'invalid',
      reason: `an action must be a string or an assistant message object, got ${action === null ? 'null' : typeof action}`,
    };
  }
  if (content !== null && content.trim().length === 0) content = null;

  const calls: ToolCall[] = [];
  for (const raw of rawCalls) {
    const r = readToolCall(raw);
    const id =
      raw && typeof raw === 'object' && typeof (raw as { id?: unknown }).id === 'string'
        ? (raw as { id: string }).id
        : nextId();
    if (!r.ok && r.problem !== 'arguments') {
      problem ??= 'a tool call has no tool name';
      calls.push({
        id,
        name: String((r.problem === 'name' ? r.name : undefined) ?? ''),
        arguments: {},
        requestor: 'assistant',
      });
      continue;
    }
    let args: Record<string, unknown> = {};
    if (!r.ok) problem ??= `the arguments of '${r.name}' must be a JSON object`;
    else {
      const a = parseToolCallArguments(r.arguments);
      if (a.ok) args = a.value;
      else if (a.problem === 'json') problem ??= `could not parse the arguments of '${r.name}' as JSON (${a.detail})`;
      else problem ??= `the arguments of '${r.name}' must be a JSON object`;
    }
    calls.push({ id, name: r.name, arguments: args, requestor: 'assistant' });
  }

  if (content === null && calls.length === 0) {
    if (problem && typeof action === 'string')
      return { kind: 'malformed', message: { role: 'assistant', content: action }, reason: problem };
    return { kind: 'invalid', reason: problem ?? 'the message has neither text nor a tool call' };
  }
  const message: AssistantMessage =
    calls.length > 0 ? { role: 'assistant', content, toolCalls: calls } : { role: 'assistant', content };
  if (problem) return { kind: 'malformed', message, reason: problem };
  if (calls.length > 1)
    return { kind: 'malformed', message, reason: 'only one tool call per message is allowed; none of them was run' };
  if (calls.length === 1 && content !== null) {
    return {
      kind: 'malformed',
      message,
      reason:
        'a message must either call one tool or talk to the user, not both; the tool was not run and the text was not delivered',
    };
  }
  if (calls.length === 1) return { kind: 'tool', message, call: calls[0] };
  return { kind: 'text', message };
}
