/**
 * What a domain provides to the world: a state type with cheap copies and tau2's hash, the
 * agent's (and optionally the user's) tools, the policy text and how a task's initial state is
 * built.
 * @module
 */
import type { TauTask } from './task.js';
import type { Toolkit } from './tools.js';

/** A world state: copies are cheap (copy-on-write) and it hashes like tau2's `get_db_hash`. */
export interface WorldState {
  /** An independent copy (shares unchanged data). */
  fork(): this;
  /** SHA-256 (hex) of the canonical JSON (`json.dumps(model_dump(), sort_keys=True)`). */
  hash(): string;
  /** Whether the canonical JSON of both states is identical (what equal hashes decide). */
  equals(other: this): boolean;
}

/** A dual-control domain. */
export interface TauDomain<S extends WorldState> {
  /** Domain name (e.g. `retail`). */
  readonly name: string;
  /** The agent's policy (markdown). */
  readonly policy: string;
  /** The agent's tools. */
  readonly tools: Toolkit<S>;
  /** The user's tools (dual control); absent when the user has none. */
  readonly userTools?: Toolkit<S>;
  /**
   * Functions that `env_assertions` may name: each returns a boolean about the state.
   * Absent or missing names make the assertion fail (reported, never silently passed).
   */
  readonly assertions?: Readonly<Record<string, (state: S, args: Record<string, unknown>) => boolean>>;
  /** A fresh state for `task`: the domain database with the task's `initial_state` applied. */
  initialState(task?: TauTask): S;
}
