/**
 * The telecom world state: the backend (agent side) and the user's phone (user side), forked
 * and compared together, as tau2 compares the agent DB hash and the user DB hash.
 * @module
 */
import { createHash } from 'node:crypto';

import type { WorldState } from '../../domain.js';
import type { TelecomUserDb } from './device.js';
import type { TelecomDb } from './schema.js';

/** Both sides of the telecom world. */
export class TelecomState implements WorldState {
  /**
   * @param db - the backend (customers, lines, plans, bills, devices).
   * @param user - the user's phone and surroundings.
   */
  constructor(
    readonly db: TelecomDb,
    readonly user: TelecomUserDb,
  ) {}

  /** An independent copy (the backend copy-on-write, the small phone state deep-copied). */
  fork(): this {
    return new TelecomState(this.db.fork(), this.user.fork()) as this;
  }

  /** tau2's agent DB hash. */
  agentHash(): string {
    return this.db.hash();
  }

  /** tau2's user DB hash. */
  userHash(): string {
    return this.user.hash();
  }

  /** SHA-256 of `agentHash + ':' + userHash`: equal exactly when both of tau2's hashes are equal. */
  hash(): string {
    return createHash('sha256').update(`${this.agentHash()}:${this.userHash()}`).digest('hex');
  }

  /** Whether both sides are identical (tau2's `db_match`: agent and user DB hashes equal). */
  equals(other: this): boolean {
    return this.db.equals(other.db) && this.user.canonicalJSON() === other.user.canonicalJSON();
  }
}
