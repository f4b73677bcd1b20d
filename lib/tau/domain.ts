/**
 * What a domain provides to the world: a state type with cheap copies and tau2's hash, the
 * agent's (and optionally the user's) tools, the policy text and how a task's initial state is
 * built.
 * @module
 */
import type { TauTask } from './task.js';
import type { ToolCall, ToolMessage } from './messages.js';
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

/**
 * An env-assertion function of a domain: a boolean about the state. Typed through a method
 * signature, so that (as with the domain's tools and `sync`) a domain over a concrete state type
 * is also a `TauDomain<WorldState>`: what the worlds of the Gym environments hold.
 */
export type StateAssertion<S> = { check(state: S, args: Record<string, unknown>): boolean }['check'];

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
  readonly assertions?: Readonly<Record<string, StateAssertion<S>>>;
  /**
   * tau2's `sync_tools`: brings one side of a dual-control state up to date with the other
   * (e.g. the backend's line status into the user's phone). The episode driver calls it after
   * every tool call (agent's or user's), and grading after every replayed or gold call, so
   * both grading sides see the same synchronised world. Absent when a domain needs none.
   */
  sync?(state: S): void;
  /** A fresh state for `task`: the domain database with the task's `initial_state` applied. */
  initialState(task?: TauTask): S;
}

/**
 * Runs one call with the toolkit of its requestor (the agent's or the user's), then the
 * domain's {@link TauDomain.sync} hook, as tau2's `Environment.get_response` does. A call
 * whose requestor has no toolkit gives an `Error: …` tool message.
 */
export function callDomainTool<S extends WorldState>(domain: TauDomain<S>, state: S, call: ToolCall): ToolMessage {
  const kit = call.requestor === 'user' ? domain.userTools : domain.tools;
  if (!kit)
    return {
      role: 'tool',
      id: call.id,
      content: `Error: no ${call.requestor} tools in domain ${domain.name}`,
      requestor: call.requestor,
      error: true,
    };
  const res = kit.call(state, call);
  domain.sync?.(state);
  return res;
}
