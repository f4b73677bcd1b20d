/**
 * The retail domain: a database, tau2's 16 agent tools, a policy, and how a task's initial
 * state is applied.
 * @module
 */
import type { TauDomain } from '../../domain.js';
import type { TauTask } from '../../task.js';
import type { Toolkit } from '../../tools.js';
import { RETAIL_POLICY } from './policy.js';
import type { Order, Product, User } from './schema.js';
import { normalizeEntity, RetailDb } from './schema.js';
import type { RetailToolOptions } from './tools.js';
import { retailToolkit } from './tools.js';

/** Options of {@link createRetailDomain}. */
export interface RetailDomainOptions extends RetailToolOptions {
  /** The database (tau2's `db.json` loaded with `RetailDb.fromJSON`, or a generated one). */
  db: RetailDb;
  /** The policy; default the embedded sinkflex retail policy. */
  policy?: string;
}

/** The retail domain type. */
export type RetailDomain = TauDomain<RetailDb> & { readonly db: RetailDb; readonly tools: Toolkit<RetailDb> };

function deepMerge(base: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  if (base === null || typeof base !== 'object' || Array.isArray(base)) return patch;
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) out[k] = deepMerge(out[k], v);
  return out;
}

/** Creates the retail domain over a database. */
export function createRetailDomain(options: RetailDomainOptions): RetailDomain {
  const tools = retailToolkit(options);
  const db = options.db;
  return {
    name: 'retail',
    policy: options.policy ?? RETAIL_POLICY,
    tools,
    db,
    initialState(task?: TauTask): RetailDb {
      const state = db.fork();
      const init = task?.initial_state;
      const agentData = init?.initialization_data?.agent_data;
      if (agentData) {
        for (const [table, entries] of Object.entries(agentData)) {
          if (table !== 'products' && table !== 'users' && table !== 'orders') throw new TypeError(`initialization_data: unknown retail table '${table}'`);
          if (entries === null || typeof entries !== 'object') throw new TypeError(`initialization_data.${table} must be an object`);
          for (const [id, patch] of Object.entries(entries as Record<string, unknown>)) {
            const map = state[table] as unknown as { get(k: string): unknown };
            const merged = normalizeEntity(table, deepMerge(map.get(id) ?? null, patch), `initialization_data.${table}.${id}`);
            if (table === 'products') state.putProduct(merged as Product);
            else if (table === 'users') state.putUser(merged as User);
            else state.putOrder(merged as Order);
          }
        }
      }
      for (const action of init?.initialization_actions ?? []) {
        if (action.env_type !== 'assistant') throw new TypeError('retail has no user tools: initialization actions must be assistant calls');
        const res = tools.call(state, { id: 'init', name: action.func_name, arguments: action.arguments, requestor: 'assistant' });
        if (res.error) throw new Error(`initialization action ${action.func_name} failed: ${res.content}`);
      }
      return state;
    },
  };
}
