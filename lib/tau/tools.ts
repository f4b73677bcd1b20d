/**
 * Tools declared once: a name, a kind, a description and a zod parameter schema. The OpenAI
 * function schema is generated from the declaration, and every call's arguments are validated
 * against it before the tool runs.
 * @module
 */
import { z } from 'zod';

import type { ToolCall, ToolMessage } from './messages.js';
import { pyJsonDumps } from './pyjson.js';

/** tau2's conceptual tool kinds. Only `write` tools change the world and are replayed in grading. */
export type ToolKind = 'read' | 'write' | 'think' | 'generic';

/** The tool kinds as constants (`ToolKinds.WRITE === 'write'`). */
export const ToolKinds = { READ: 'read', WRITE: 'write', THINK: 'think', GENERIC: 'generic' } as const;

/** An expected failure inside a tool (tau2's `ValueError`): becomes an `Error: <message>` tool result. */
export class ToolError extends Error {
  /** @param message - the text after `Error: ` in the tool result. */
  constructor(message: string) {
    super(message);
    this.name = 'ToolError';
  }
}

/** A JSON schema object (as produced by zod's `toJSONSchema`). */
export type JsonSchema = { [key: string]: unknown };

/** A tool in OpenAI's function-calling format. */
export interface OpenAIToolSchema {
  /** Always `function`. */
  type: 'function';
  /** Name, description and parameter schema. */
  function: { name: string; description: string; parameters: JsonSchema };
}

/** The declaration of one tool over a world state `S`. */
export interface ToolSpec<S, Shape extends z.ZodRawShape> {
  /** Tool name (unique in its toolkit). */
  name: string;
  /** tau2 kind. */
  kind: ToolKind;
  /** What the tool does, shown to the model. */
  description: string;
  /** Parameters: one zod schema per argument (add `.describe()` for the model). */
  params: Shape;
  /** Whether the tool changes state (replayed in grading); default: `kind === 'write'`. */
  mutates?: boolean;
  /** Runs the tool; throws {@link ToolError} on expected failures; returns a string or JSON value. */
  run(state: S, args: z.infer<z.ZodObject<Shape>>): unknown;
}

/** A declared tool, ready to validate and run calls. */
export interface Tool<S> {
  /** Tool name. */
  readonly name: string;
  /** tau2 kind. */
  readonly kind: ToolKind;
  /** Description for the model. */
  readonly description: string;
  /** Whether calls change state. */
  readonly mutates: boolean;
  /** The OpenAI function schema generated from the declaration. */
  readonly schema: OpenAIToolSchema;
  /** Validates raw arguments: the typed arguments or a message naming what is wrong. */
  validate(args: unknown): { ok: true; args: Record<string, unknown> } | { ok: false; message: string };
  /** Runs the tool on already validated arguments. */
  run(state: S, args: Record<string, unknown>): unknown;
}

function formatIssues(name: string, error: z.ZodError, raw: unknown): string {
  const parts = error.issues.map((issue) => {
    const path = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys')
      return `unexpected argument(s) ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
    if (issue.code === 'invalid_type' && issue.path.length === 1) {
      const present = raw !== null && typeof raw === 'object' && (issue.path[0] as string) in (raw as object);
      if (!present) return `missing required argument '${path}'`;
    }
    return path ? `argument '${path}': ${issue.message}` : issue.message;
  });
  return `${name}() got invalid arguments: ${parts.join('; ')}`;
}

/** Declares a tool; the JSON schema is generated once from `params`. */
export function defineTool<S, Shape extends z.ZodRawShape>(spec: ToolSpec<S, Shape>): Tool<S> {
  const object = z.strictObject(spec.params);
  const generated = z.toJSONSchema(object) as JsonSchema;
  delete generated.$schema;
  if (!('required' in generated)) generated.required = [];
  const schema: OpenAIToolSchema = {
    type: 'function',
    function: { name: spec.name, description: spec.description, parameters: generated },
  };
  return {
    name: spec.name,
    kind: spec.kind,
    description: spec.description,
    mutates: spec.mutates ?? spec.kind === 'write',
    schema,
    validate(args: unknown) {
      if (args === null || typeof args !== 'object' || Array.isArray(args)) {
        return { ok: false, message: `${spec.name}() arguments must be a JSON object` };
      }
      const parsed = object.safeParse(args);
      if (!parsed.success) return { ok: false, message: formatIssues(spec.name, parsed.error, args) };
      return { ok: true, args: parsed.data as Record<string, unknown> };
    },
    run(state: S, args: Record<string, unknown>) {
      return spec.run(state, args as z.infer<z.ZodObject<Shape>>);
    },
  };
}

/** How a tool's return value becomes the tool message text. */
export type ResultSerializer = (value: unknown) => string;

/** tau2's rule: strings pass through, everything else is `json.dumps`-ed (Python style). */
export const tau2Serializer: ResultSerializer = (value) => (typeof value === 'string' ? value : pyJsonDumps(value));

/** The outcome of running one call. */
export interface ToolOutcome {
  /** The tool message to append to the trajectory. */
  message: ToolMessage;
  /** The tool, when the name was known. */
  tool?: Tool<unknown>;
}

/** A named set of tools over one world state type. */
export class Toolkit<S> {
  private readonly byName: Map<string, Tool<S>>;

  /**
   * @param tools - the tools, in the order they are shown to the model.
   * @param serialize - how results become text (default {@link tau2Serializer}).
   */
  constructor(
    readonly tools: readonly Tool<S>[],
    readonly serialize: ResultSerializer = tau2Serializer,
  ) {
    this.byName = new Map(tools.map((t) => [t.name, t]));
    if (this.byName.size !== tools.length) throw new Error('Toolkit: duplicate tool names');
  }

  /** The tool called `name`, if any. */
  get(name: string): Tool<S> | undefined {
    return this.byName.get(name);
  }

  /** Whether a tool called `name` exists. */
  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** Tool names in declaration order. */
  names(): string[] {
    return this.tools.map((t) => t.name);
  }

  /** Every tool's OpenAI function schema. */
  schemas(): OpenAIToolSchema[] {
    return this.tools.map((t) => t.schema);
  }

  /**
   * Validates and runs one call against `state` (which the tool may change). Never throws:
   * unknown tools, bad arguments and tool failures become `Error: …` tool messages.
   */
  call(state: S, call: ToolCall): ToolMessage {
    const base = { role: 'tool' as const, id: call.id, requestor: call.requestor };
    const tool = this.byName.get(call.name);
    if (!tool) return { ...base, content: `Error: Tool '${call.name}' not found.`, error: true };
    const checked = tool.validate(call.arguments);
    if (!checked.ok) return { ...base, content: `Error: ${checked.message}`, error: true };
    try {
      const value = tool.run(state, checked.args);
      return { ...base, content: this.serialize(value), error: false };
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      return { ...base, content: `Error: ${msg}`, error: true };
    }
  }
}
