/**
 * The airline domain: tau2's flight database, its 14 agent tools, the policy, and how a task's
 * initial state is applied.
 * @module
 */
import type { TauDomain } from '../../domain.js';
import type { TauTask } from '../../task.js';
import type { Toolkit } from '../../tools.js';
import { applyInitialState, type InitialStateTable } from '../initial-state.js';
import type { AirlineUser, Flight, Reservation } from './schema.js';
import { AirlineDb, normalizeAirlineEntity } from './schema.js';
import { airlineToolkit } from './tools.js';

/** Options of {@link createAirlineDomain}. */
export interface AirlineDomainOptions {
  /** The database (tau2's `db.json` loaded with `AirlineDb.fromJSON`). */
  db: AirlineDb;
  /** The agent policy (markdown): tau2's airline `policy.md`. */
  policy: string;
}

/** The airline domain type. */
export type AirlineDomain = TauDomain<AirlineDb> & { readonly db: AirlineDb; readonly tools: Toolkit<AirlineDb> };

const AIRLINE_TABLES: Readonly<Record<string, InitialStateTable<AirlineDb>>> = {
  flights: {
    get: (db, id) => db.flights.get(id),
    put: (db, _id, v, where) => db.putFlight(normalizeAirlineEntity('flights', v, where) as Flight),
  },
  users: {
    get: (db, id) => db.users.get(id),
    put: (db, _id, v, where) => db.putUser(normalizeAirlineEntity('users', v, where) as AirlineUser),
  },
  reservations: {
    get: (db, id) => db.reservations.get(id),
    put: (db, _id, v, where) => db.putReservation(normalizeAirlineEntity('reservations', v, where) as Reservation),
  },
};

/** Creates the airline domain over a database. */
export function createAirlineDomain(options: AirlineDomainOptions): AirlineDomain {
  if (options === null || typeof options !== 'object')
    throw new TypeError('createAirlineDomain: options must be an object');
  if (!(options.db instanceof AirlineDb))
    throw new TypeError('createAirlineDomain: db must be an AirlineDb (AirlineDb.fromJSON)');
  if (typeof options.policy !== 'string' || options.policy.length === 0)
    throw new TypeError("createAirlineDomain: policy must be a non-empty string (tau2's airline policy.md)");
  const tools = airlineToolkit();
  const db = options.db;
  return {
    name: 'airline',
    policy: options.policy,
    tools,
    db,
    initialState(task?: TauTask): AirlineDb {
      return applyInitialState(db.fork(), task, 'airline', AIRLINE_TABLES, tools);
    },
  };
}
