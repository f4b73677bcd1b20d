/**
 * The one reader of a tool call written as JSON, for every place that reads one: the built-in
 * template's `<|call|>` sections, Hermes `<tool_call>` blocks (Jinja formats, the streaming
 * server), and the tau environment's raw-text and message actions. One set of rules:
 *
 * - a call is a JSON object, either flat, `{"name": …, "arguments": …}`, or OpenAI's nested
 *   form, `{"function": {"name": …, "arguments": …}}`;
 * - its `name` is a non-empty string;
 * - its `arguments` (or, as some models write it, `parameters`) are a JSON object or JSON text
 *   (kept as written: OpenAI's messages carry arguments as text); absent or null means `{}`.
 *
 * Each reader words its own errors (the formats report `tool call N …` to logs, the environment
 * answers the agent with `Error: …`), so the reading returns what is wrong, not a sentence;
 * {@link readChatToolCall} is the formats' wording. The module needs nothing but the message
 * types, and `chat` is a leaf layer, so the tau world reads its agents' raw actions with it too.
 * @module
 */
import type { ChatToolCall } from './messages.js';

/** A tool call's arguments as read: a JSON object, or JSON text kept as written. */
export type ToolCallArguments = Record<string, unknown> | string;

/** What {@link readToolCall} made of a value: the call's name and arguments, or what is wrong. */
export type ToolCallReading =
  | { ok: true; name: string; arguments: ToolCallArguments }
  /** The text is not JSON; `detail` is the parser's message. */
  | { ok: false; problem: 'json'; detail: string }
  /** Not an object with a non-empty string name; `name` is the name field as found (undefined when none). */
  | { ok: false; problem: 'name'; name: unknown }
  /** The arguments are neither an object nor text; `args` is what was found. */
  | { ok: false; problem: 'arguments'; name: string; args: unknown };

/** What {@link parseToolCallArguments} made of arguments text. */
export type ArgumentsReading =
  | { ok: true; value: Record<string, unknown> }
  /** The text is not JSON; `detail` is the parser's message. */
  | { ok: false; problem: 'json'; detail: string }
  /** The JSON is not an object. */
  | { ok: false; problem: 'object' };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads a parsed JSON value as a tool call by the module's rules (never throws). */
export function readToolCall(value: unknown): ToolCallReading {
  if (!isObject(value)) return { ok: false, problem: 'name', name: undefined };
  const f =
    typeof value.function === 'object' && value.function !== null ? (value.function as Record<string, unknown>) : value;
  const name = f.name;
  if (typeof name !== 'string' || name === '') return { ok: false, problem: 'name', name };
  const args = f.arguments ?? f.parameters ?? {};
  if (typeof args !== 'string' && !isObject(args)) return { ok: false, problem: 'arguments', name, args };
  return { ok: true, name, arguments: args };
}

/** Parses `text` as JSON and reads it with {@link readToolCall} (never throws). */
export function readToolCallJson(text: string): ToolCallReading {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return { ok: false, problem: 'json', detail: (e as Error).message };
  }
  return readToolCall(parsed);
}

/**
 * Arguments as the object a tool runs with: an object as is; text parsed as JSON (blank text
 * means `{}`), which must give an object.
 */
export function parseToolCallArguments(args: ToolCallArguments): ArgumentsReading {
  if (typeof args !== 'string') return { ok: true, value: args };
  if (args.trim() === '') return { ok: true, value: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch (e) {
    return { ok: false, problem: 'json', detail: (e as Error).message };
  }
  return isObject(parsed) ? { ok: true, value: parsed } : { ok: false, problem: 'object' };
}

/**
 * Reads the JSON text of call number `index` as a chat format does: an OpenAI tool call with id
 * `id` and its arguments as JSON text, or the reason it is not one (`tool call <index> …`).
 */
export function readChatToolCall(text: string, index: number, id: string): ChatToolCall | string {
  const r = readToolCallJson(text);
  if (r.ok) {
    const args = typeof r.arguments === 'string' ? r.arguments : JSON.stringify(r.arguments);
    return { id, type: 'function', function: { name: r.name, arguments: args } };
  }
  if (r.problem === 'json') return `tool call ${index} is not valid JSON: ${r.detail}`;
  if (r.problem === 'name') return `tool call ${index} must be an object with a non-empty "name"`;
  return `tool call ${index} "arguments" must be an object`;
}
