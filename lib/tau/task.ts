/**
 * Tasks in tau2's JSON format (snake_case, as in tau2's `tasks.json`), with one sinkflex
 * extension: `sinkflex_scenario`, the machine-readable scenario that the scripted user follows.
 * @module
 */
import type { Message, ToolRequestor } from './messages.js';

/** tau2's reward components. */
export type RewardType = 'DB' | 'ENV_ASSERTION' | 'NL_ASSERTION' | 'ACTION' | 'COMMUNICATE';

/** All reward types. */
export const REWARD_TYPES: readonly RewardType[] = ['DB', 'ENV_ASSERTION', 'NL_ASSERTION', 'ACTION', 'COMMUNICATE'];

/** tau2's structured user instructions (rendered as labelled blocks for an LLM user). */
export interface StructuredUserInstructions {
  /** Domain name. */
  domain: string;
  /** Why the user calls. */
  reason_for_call: string;
  /** What the user knows (name, zip, email, order ids…). */
  known_info?: string | null;
  /** What the user does not know. */
  unknown_info?: string | null;
  /** How the user behaves. */
  task_instructions: string;
}

/** The user side of a task. */
export interface UserScenario {
  /** Optional persona text. */
  persona?: string | null;
  /** Free text or structured instructions. */
  instructions: string | StructuredUserInstructions;
}

/** A reference tool call (gold action). */
export interface TaskAction {
  /** Id within the task. */
  action_id: string;
  /** Who calls it (default assistant). */
  requestor?: ToolRequestor;
  /** Tool name. */
  name: string;
  /** Arguments. */
  arguments: Record<string, unknown>;
  /** Notes. */
  info?: string | null;
  /** Arguments compared in action matching (default: all of the call's arguments). */
  compare_args?: string[] | null;
}

/** A function call used to set up or check the environment. */
export interface EnvFunctionCall {
  /** Which side's functions. */
  env_type: ToolRequestor;
  /** Function (tool) name. */
  func_name: string;
  /** Arguments. */
  arguments: Record<string, unknown>;
}

/** An assertion on the final environment. */
export interface EnvAssertion extends EnvFunctionCall {
  /** Expected return value (default true). */
  assert_value?: boolean;
  /** Message on failure. */
  message?: string | null;
}

/** How a task is graded. */
export interface EvaluationCriteria {
  /** Gold actions (a reference trajectory; replayed to build the gold database). */
  actions?: TaskAction[] | null;
  /** Assertions on the final environment. */
  env_assertions?: EnvAssertion[] | null;
  /** Strings the agent must say (case-insensitive substring of an assistant text, commas removed). */
  communicate_info?: string[] | null;
  /** Natural-language assertions for an LLM judge. */
  nl_assertions?: string[] | null;
  /** Components multiplied into the reward (tau2 default `['DB', 'COMMUNICATE']`). */
  reward_basis?: RewardType[];
}

/** Initial state of a task. */
export interface InitialState {
  /** Partial database updates merged into the fresh database. */
  initialization_data?: {
    agent_data?: Record<string, unknown> | null;
    user_data?: Record<string, unknown> | null;
  } | null;
  /** Calls run on the fresh environment before the conversation. */
  initialization_actions?: EnvFunctionCall[] | null;
  /** A conversation to resume from. */
  message_history?: Message[] | null;
}

/** A tau2 task (plus the optional sinkflex scenario). */
export interface TauTask<Scenario = unknown> {
  /** Task id. */
  id: string;
  /** Free-form description. */
  description?: { purpose?: string | null; relevant_policies?: string | null; notes?: string | null } | null;
  /** The user's side. */
  user_scenario: UserScenario;
  /** Solo-mode ticket (unused in retail). */
  ticket?: string | null;
  /** Initial state. */
  initial_state?: InitialState | null;
  /** Grading criteria. */
  evaluation_criteria?: EvaluationCriteria | null;
  /** sinkflex extension: the scripted user's machine-readable scenario (generated tasks only). */
  sinkflex_scenario?: Scenario;
  /** Other tau2 fields are kept as they are. */
  [extra: string]: unknown;
}

/** The reward basis of a task with tau2's default. */
export function rewardBasis(task: TauTask): RewardType[] {
  return task.evaluation_criteria?.reward_basis ?? ['DB', 'COMMUNICATE'];
}

/** Renders a user scenario the way tau2 does for the LLM user (labelled, indented blocks). */
export function renderScenario(scenario: UserScenario): string {
  const indent = (s: string) =>
    s
      .split('\n')
      .map((l) => `  ${l}`)
      .join('\n');
  const lines: string[] = [];
  if (scenario.persona) lines.push('Persona:', indent(scenario.persona));
  const ins = scenario.instructions;
  let body: string;
  if (typeof ins === 'string') body = ins;
  else {
    const parts = [`Domain: ${ins.domain}`, `Reason for call:\n${indent(ins.reason_for_call)}`];
    if (ins.known_info) parts.push(`Known info:\n${indent(ins.known_info)}`);
    if (ins.unknown_info) parts.push(`Unknown info:\n${indent(ins.unknown_info)}`);
    parts.push(`Task instructions:\n${indent(ins.task_instructions)}`);
    body = parts.join('\n');
  }
  lines.push('Instructions:', indent(body));
  return lines.join('\n');
}

/** Checks the minimal shape of a task read from JSON; throws a TypeError naming the problem. */
export function checkTask(value: unknown, where = 'task'): TauTask {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new TypeError(`${where}: not an object`);
  const t = value as Record<string, unknown>;
  if (typeof t.id !== 'string') throw new TypeError(`${where}: id must be a string`);
  const us = t.user_scenario as Record<string, unknown> | undefined;
  if (!us || typeof us !== 'object') throw new TypeError(`${where} ${t.id}: user_scenario missing`);
  if (typeof us.instructions !== 'string' && (us.instructions === null || typeof us.instructions !== 'object')) {
    throw new TypeError(`${where} ${t.id}: user_scenario.instructions must be a string or an object`);
  }
  const ec = t.evaluation_criteria as Record<string, unknown> | null | undefined;
  if (ec !== undefined && ec !== null) {
    if (typeof ec !== 'object') throw new TypeError(`${where} ${t.id}: evaluation_criteria must be an object`);
    if (ec.actions != null) {
      if (!Array.isArray(ec.actions)) throw new TypeError(`${where} ${t.id}: actions must be an array`);
      for (const a of ec.actions as Record<string, unknown>[]) {
        if (typeof a?.name !== 'string' || a.arguments === null || typeof a.arguments !== 'object') {
          throw new TypeError(`${where} ${t.id}: each action needs a name and an arguments object`);
        }
      }
    }
    if (ec.reward_basis !== undefined) {
      if (!Array.isArray(ec.reward_basis) || ec.reward_basis.some((r) => !REWARD_TYPES.includes(r as RewardType))) {
        throw new TypeError(`${where} ${t.id}: reward_basis must list ${REWARD_TYPES.join('/')}`);
      }
    }
  }
  return value as TauTask;
}
