/**
 * `Message`: OpenAI-style chat messages, with tool calls (not in Gymnasium; the observation and
 * action space of tool-use agents). A message is
 * `{ role, content, tool_calls?, tool_call_id?, name? }` with the wire format of the OpenAI
 * chat API:
 *
 * - `role` is one of the space's roles (default `system`, `user`, `assistant`, `tool`);
 * - `content` is a string of at most `maxContentLength` characters (and at least
 *   `minContentLength`, default 1, unless the message carries tool calls, when it may be null);
 * - `tool_calls` (assistant only; at most `maxToolCalls`, default 8) are
 *   `{ id, type: 'function', function: { name, arguments } }` with unique non-empty ids,
 *   `name` among the space's tools (when tools are given) and `arguments` a JSON string of an
 *   object that conforms to the tool's `parameters` schema (a JSON Schema subset);
 * - a `tool` message answers a call: `tool_call_id` is a non-empty string.
 *
 * Other keys are allowed and ignored.
 * @module
 */
import type { RandomGenerator, Seed } from '../random.js';
import { sampleJson, validateJson, type JsonSchema } from './json-schema.js';
import { Space, type SpaceJSON } from './space.js';
import { ALPHANUMERIC } from './text.js';

/** A chat role. */
export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

/** One tool call of an assistant message (OpenAI wire format). */
export interface ChatToolCall {
  /** Unique id of the call (echoed by the tool message that answers it). */
  id: string;
  /** Always `function`. */
  type: 'function';
  /** The function and its arguments (a JSON string of an object). */
  function: { name: string; arguments: string };
}

/** A chat message (OpenAI wire format). */
export interface ChatMessage {
  /** Who speaks. */
  role: ChatRole;
  /** The text (null only for an assistant message with tool calls). */
  content: string | null;
  /** Tool calls of an assistant message. */
  tool_calls?: ChatToolCall[];
  /** For `tool` messages: the id of the call answered. */
  tool_call_id?: string;
  /** Optional participant or tool name. */
  name?: string;
}

/** A tool: its name and the JSON Schema of its arguments (OpenAI function definition). */
export interface ToolSpec {
  /** Function name. */
  name: string;
  /** What it does (informational). */
  description?: string;
  /** JSON Schema of the arguments object. */
  parameters?: JsonSchema;
}

/** A tool given either as {@link ToolSpec} or in OpenAI's `{ type: 'function', function: {...} }` form. */
export type ToolInput = ToolSpec | { type: 'function'; function: ToolSpec };

/** Options of {@link Message}. */
export interface MessageOptions {
  /** Allowed roles (default all four). */
  roles?: readonly ChatRole[];
  /** Allowed tools; without tools any function name is accepted and sampling makes no tool calls. */
  tools?: readonly ToolInput[];
  /** Maximum content length in characters (default 4096). */
  maxContentLength?: number;
  /** Minimum content length when there are no tool calls (default 1). */
  minContentLength?: number;
  /** Maximum number of tool calls in one message (default 8). */
  maxToolCalls?: number;
  /** Seed (or generator) of the sampler. */
  seed?: Seed | RandomGenerator | null;
}

/** Restricts {@link Message.sample}: the roles to draw from and whether to make tool calls. */
export interface MessageMask {
  /** Roles to draw from (a subset of the space's roles). */
  roles?: readonly ChatRole[];
  /** true: an assistant message with tool calls; false: none; undefined: either. */
  toolCalls?: boolean;
}

const ALL_ROLES: readonly ChatRole[] = ['system', 'user', 'assistant', 'tool'];

function normalizeTool(tool: ToolInput): ToolSpec {
  const spec = 'function' in tool && typeof tool.function === 'object' ? tool.function : (tool as ToolSpec);
  if (!spec || typeof spec.name !== 'string' || spec.name.length === 0)
    throw new TypeError('Message: every tool needs a non-empty name');
  return {
    name: spec.name,
    ...(spec.description !== undefined ? { description: spec.description } : {}),
    ...(spec.parameters !== undefined ? { parameters: spec.parameters } : {}),
  };
}

/** The space of chat messages. */
export class Message extends Space<ChatMessage, MessageMask, null> {
  /** Allowed roles. */
  readonly roles: readonly ChatRole[];
  /** Allowed tools by name (empty: any name). */
  readonly tools: ReadonlyMap<string, ToolSpec>;
  /** Maximum content length. */
  readonly maxContentLength: number;
  /** Minimum content length without tool calls. */
  readonly minContentLength: number;
  /** Maximum tool calls per message. */
  readonly maxToolCalls: number;

  constructor(options: MessageOptions = {}) {
    const roles = [...(options.roles ?? ALL_ROLES)];
    if (roles.length === 0 || !roles.every((r) => ALL_ROLES.includes(r)))
      throw new RangeError(`Message: roles must be a non-empty subset of ${ALL_ROLES.join(', ')}`);
    const maxContentLength = options.maxContentLength ?? 4096;
    const minContentLength = options.minContentLength ?? 1;
    const maxToolCalls = options.maxToolCalls ?? 8;
    for (const [name, v] of [
      ['maxContentLength', maxContentLength],
      ['minContentLength', minContentLength],
      ['maxToolCalls', maxToolCalls],
    ] as const) {
      if (!Number.isSafeInteger(v) || v < 0)
        throw new RangeError(`Message: ${name} must be a non-negative integer, got ${v}`);
    }
    if (minContentLength > maxContentLength)
      throw new RangeError('Message: minContentLength must not exceed maxContentLength');
    const tools = new Map<string, ToolSpec>();
    for (const t of options.tools ?? []) {
      const spec = normalizeTool(t);
      if (tools.has(spec.name)) throw new RangeError(`Message: tool "${spec.name}" is given twice`);
      tools.set(spec.name, spec);
    }
    super(null, null, options.seed);
    this.roles = [...new Set(roles)];
    this.tools = tools;
    this.maxContentLength = maxContentLength;
    this.minContentLength = minContentLength;
    this.maxToolCalls = maxToolCalls;
  }

  /** Why `x` is not a message of this space, or null when it is one. */
  explain(x: unknown): string | null {
    if (typeof x !== 'object' || x === null || Array.isArray(x)) return 'not an object';
    const m = x as Record<string, unknown>;
    if (typeof m.role !== 'string' || !this.roles.includes(m.role as ChatRole))
      return `role must be one of ${this.roles.join(', ')}, got ${JSON.stringify(m.role)}`;
    const calls = m.tool_calls;
    const hasCalls = Array.isArray(calls) && calls.length > 0;
    if (calls !== undefined && calls !== null) {
      if (!Array.isArray(calls)) return 'tool_calls must be an array';
      if (m.role !== 'assistant' && calls.length > 0) return 'only assistant messages may carry tool_calls';
      if (calls.length > this.maxToolCalls) return `at most ${this.maxToolCalls} tool calls, got ${calls.length}`;
      const ids = new Set<string>();
      for (let i = 0; i < calls.length; i++) {
        const err = this.explainCall(calls[i], i, ids);
        if (err) return err;
      }
    }
    if (m.content === null || m.content === undefined) {
      if (!hasCalls) return 'content must be a string (null only with tool calls)';
    } else if (typeof m.content !== 'string') {
      return 'content must be a string or null';
    } else {
      const len = Array.from(m.content).length;
      if (len > this.maxContentLength) return `content longer than ${this.maxContentLength} characters`;
      if (!hasCalls && len < this.minContentLength) return `content shorter than ${this.minContentLength} characters`;
    }
    if (m.role === 'tool' && (typeof m.tool_call_id !== 'string' || m.tool_call_id.length === 0))
      return 'a tool message needs a non-empty tool_call_id';
    if (m.name !== undefined && typeof m.name !== 'string') return 'name must be a string';
    return null;
  }

  private explainCall(call: unknown, i: number, ids: Set<string>): string | null {
    const where = `tool_calls[${i}]`;
    if (typeof call !== 'object' || call === null) return `${where} must be an object`;
    const c = call as Record<string, unknown>;
    if (typeof c.id !== 'string' || c.id.length === 0) return `${where}.id must be a non-empty string`;
    if (ids.has(c.id)) return `${where}.id "${c.id}" is not unique`;
    ids.add(c.id);
    if (c.type !== 'function') return `${where}.type must be "function"`;
    const fn = c.function as Record<string, unknown> | undefined;
    if (typeof fn !== 'object' || fn === null || typeof fn.name !== 'string' || fn.name.length === 0)
      return `${where}.function.name must be a non-empty string`;
    if (this.tools.size > 0 && !this.tools.has(fn.name)) return `${where}: unknown tool "${fn.name}"`;
    if (typeof fn.arguments !== 'string') return `${where}.function.arguments must be a JSON string`;
    let args: unknown;
    try {
      args = JSON.parse(fn.arguments);
    } catch {
      return `${where}.function.arguments is not valid JSON`;
    }
    if (typeof args !== 'object' || args === null || Array.isArray(args))
      return `${where}.function.arguments must encode an object`;
    const schema = this.tools.get(fn.name)?.parameters;
    if (schema) {
      const err = validateJson(args, schema, `${where}.arguments`);
      if (err) return err;
    }
    return null;
  }

  contains(x: unknown): boolean {
    return this.explain(x) === null;
  }

  private text(minLength: number): string {
    const max = Math.min(this.maxContentLength, Math.max(minLength, 32));
    const n = this.npRandom.integers(minLength, max + 1);
    let s = '';
    for (let i = 0; i < n; i++)
      s += i > 0 && this.npRandom.integers(6) === 0 ? ' ' : ALPHANUMERIC[this.npRandom.integers(ALPHANUMERIC.length)];
    return s;
  }

  private callId(): string {
    let s = 'call_';
    for (let i = 0; i < 12; i++) s += ALPHANUMERIC[this.npRandom.integers(ALPHANUMERIC.length)];
    return s;
  }

  /**
   * A random message: a role from the space (or `mask.roles`); an assistant message makes 1–3
   * tool calls with arguments drawn from the tools' schemas half of the time when the space has
   * tools and at least one call is allowed (always with `mask.toolCalls: true`, never with
   * `false`), with null content; other messages get random text (at most 32 characters).
   */
  sample(mask?: MessageMask | null, probability?: null): ChatMessage {
    if (probability !== undefined && probability !== null)
      throw new TypeError('Message.sample does not take a probability');
    const roles = mask?.roles ? this.roles.filter((r) => mask.roles!.includes(r)) : this.roles;
    const canCall = this.tools.size > 0 && this.maxToolCalls > 0;
    if (mask?.toolCalls === true && (!canCall || !roles.includes('assistant'))) {
      throw new RangeError(
        'Message.sample: tool calls were asked for but the space allows none (no tools, maxToolCalls 0 or no assistant role)',
      );
    }
    const pool = mask?.toolCalls === true ? (['assistant'] as ChatRole[]) : roles;
    if (pool.length === 0) throw new RangeError('Message.sample: the mask leaves no role');
    const role = this.npRandom.choice(pool);
    const withCalls =
      role === 'assistant' &&
      canCall &&
      mask?.toolCalls !== false &&
      (mask?.toolCalls === true || this.npRandom.integers(2) === 1);
    if (withCalls) {
      const tools = [...this.tools.values()];
      const n = this.npRandom.integers(1, Math.min(3, this.maxToolCalls) + 1);
      const tool_calls: ChatToolCall[] = [];
      for (let i = 0; i < n; i++) {
        const tool = this.npRandom.choice(tools);
        const args = sampleJson(tool.parameters ?? { type: 'object', properties: {} }, this.npRandom);
        tool_calls.push({
          id: this.callId(),
          type: 'function',
          function: { name: tool.name, arguments: JSON.stringify(args) },
        });
      }
      return { role, content: null, tool_calls };
    }
    const content = this.text(Math.max(this.minContentLength, role === 'tool' ? 0 : 1));
    return role === 'tool' ? { role, content, tool_call_id: this.callId() } : { role, content };
  }

  equals(other: unknown): boolean {
    return other instanceof Message && JSON.stringify(other.toJSON()) === JSON.stringify(this.toJSON());
  }

  toJSON(): SpaceJSON {
    return {
      type: 'Message',
      roles: [...this.roles],
      tools: [...this.tools.values()].map((t) => structuredClone(t)),
      maxContentLength: this.maxContentLength,
      minContentLength: this.minContentLength,
      maxToolCalls: this.maxToolCalls,
    };
  }

  override fromJsonable(json: unknown): ChatMessage[] {
    if (!Array.isArray(json)) throw new TypeError('Message.fromJsonable expects an array of messages');
    return json.map((m, i) => {
      const err = this.explain(m);
      if (err) throw new TypeError(`Message.fromJsonable: item ${i}: ${err}`);
      return structuredClone(m) as ChatMessage;
    });
  }

  toString(): string {
    const tools = [...this.tools.keys()];
    return `Message(roles=[${this.roles.join(', ')}], tools=[${tools.join(', ')}], maxContentLength=${this.maxContentLength})`;
  }
}
