/**
 * The retail domain: a database, tau2's 16 agent tools, a policy, and how a task's initial
 * state is applied.
 * @module
 */
import type { TauDomain } from '../../domain.js';
import type { TauTask } from '../../task.js';
import type { Toolkit } from '../../tools.js';
import { applyInitialState, type InitialStateTable } from '../initial-state.js';
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

const RETAIL_TABLES: Readonly<Record<string, InitialStateTable<RetailDb>>> = {
  products: {
    get: (db, id) => db.products.get(id),
    put: (db, _id, v, where) => db.putProduct(normalizeEntity('products', v, where) as Product),
  },
  users: {
    get: (db, id) => db.users.get(id),
    put: (db, _id, v, where) => db.putUser(normalizeEntity('users', v, where) as User),
  },
  orders: {
    get: (db, id) => db.orders.get(id),
    put: (db, _id, v, where) => db.putOrder(normalizeEntity('orders', v, where) as Order),
  },
};

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
      return applyInitialState(db.fork(), task, 'retail', RETAIL_TABLES, tools);
    },
  };
}
