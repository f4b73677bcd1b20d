/**
 * tau2's task `initial_state` for database domains: `initialization_data.agent_data` patches
 * entities (a recursive merge of objects, as tau2's `update_db`; arrays and scalars are
 * replaced), then `initialization_actions` run as agent tool calls.
 * @module
 */
import type { TauTask } from '../task.js';
import type { Toolkit } from '../tools.js';

/** Reads and writes one table of a state for {@link applyInitialState}. */
export interface InitialStateTable<S> {
  /** The entity stored under `id`, if any. */
  get(state: S, id: string): unknown;
  /** Validates `value` (naming `where` in errors) and stores it under `id`. */
  put(state: S, id: string, value: unknown, where: string): void;
}

/** Recursively merges `patch` into `base`: objects merge key by key, anything else replaces. */
export function deepMergeJson(base: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  if (base === null || typeof base !== 'object' || Array.isArray(base)) return patch;
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) out[k] = deepMergeJson(out[k], v);
  return out;
}

/**
 * Applies `task.initial_state` to `state` (in place) and returns it. Throws a TypeError naming an
 * unknown table or a malformed entry, and an Error when an initialization action fails.
 */
export function applyInitialState<S>(
  state: S,
  task: TauTask | undefined,
  domain: string,
  tables: Readonly<Record<string, InitialStateTable<S>>>,
  tools: Toolkit<S>,
): S {
  const init = task?.initial_state;
  const agentData = init?.initialization_data?.agent_data;
  if (agentData) {
    for (const [table, entries] of Object.entries(agentData)) {
      const t = Object.prototype.hasOwnProperty.call(tables, table) ? tables[table] : undefined;
      if (!t) throw new TypeError(`initialization_data: unknown ${domain} table '${table}'`);
      if (entries === null || typeof entries !== 'object')
        throw new TypeError(`initialization_data.${table} must be an object`);
      for (const [id, patch] of Object.entries(entries as Record<string, unknown>)) {
        t.put(state, id, deepMergeJson(t.get(state, id) ?? null, patch), `initialization_data.${table}.${id}`);
      }
    }
  }
  for (const action of init?.initialization_actions ?? []) {
    if (action.env_type !== 'assistant')
      throw new TypeError(`${domain} has no user tools: initialization actions must be assistant calls`);
    const res = tools.call(state, {
      id: 'init',
      name: action.func_name,
      arguments: action.arguments,
      requestor: 'assistant',
    });
    if (res.error) throw new Error(`initialization action ${action.func_name} failed: ${res.content}`);
  }
  return state;
}
