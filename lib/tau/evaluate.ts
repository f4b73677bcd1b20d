/**
 * tau2's grading: DB check by replaying the trajectory's state-changing calls and the task's
 * gold actions on fresh copies and comparing their canonical-JSON SHA-256; env assertions;
 * communicate checks; NL assertions through an optional judge; action matching (all-or-nothing
 * when `ACTION` is in the basis, else a diagnostic); reward = product over the task's reward
 * basis, 0 unless the user (or agent) stopped the conversation. A gold action that fails is
 * skipped (listed in `info.gold_action_errors`) and the DB check is still scored against the
 * resulting gold state, as tau2's evaluator does.
 * @module
 */
import { structuralEqual } from '../util/structural-equal.js';
import type { TauDomain, WorldState } from './domain.js';
import { callDomainTool } from './domain.js';
import type { Message, ToolCall, ToolMessage } from './messages.js';
import { hasText, isToolCallMessage } from './messages.js';
import type { RewardType, TaskAction, TauTask } from './task.js';
import { rewardBasis } from './task.js';
import type { ToolKind } from './tools.js';

/**
 * Why a conversation ended: tau2's names, plus `user_give_up` (sinkflex): a scripted user
 * left with its request unresolved, after the agent's messages stopped addressing it (tau2's
 * LLM user has no give-up; the same conversation would go on until `max_steps`). Only
 * `user_stop` and `agent_stop` are graded; every other reason scores 0, as in tau2.
 */
export type TerminationReason =
  'user_stop' | 'agent_stop' | 'max_steps' | 'too_many_errors' | 'agent_error' | 'user_error' | 'user_give_up';

/** A finished (or resumed) conversation to grade. */
export interface SimulationRun {
  /** The task id. */
  taskId: string;
  /** Every message after the task's message history (greeting, user, assistant, tool). */
  messages: Message[];
  /** Why it ended. */
  terminationReason: TerminationReason;
}

/** The DB component. */
export interface DbCheck {
  /** Whether the predicted and gold databases are identical. */
  dbMatch: boolean;
  /** 1 or 0. */
  dbReward: number;
  /** SHA-256 of the gold database. */
  goldHash: string;
  /** SHA-256 of the predicted database. */
  predictedHash: string;
}

/** A state-changing gold action that failed while building the gold state (skipped, as in tau2). */
export interface GoldActionError {
  /** The gold action's id. */
  action_id: string;
  /** The tool name. */
  name: string;
  /** The tool's error message. */
  error: string;
}

/** One gold action matched against the trajectory's calls. */
export interface ActionCheck {
  /** The gold action. */
  action: TaskAction;
  /** Whether some call matched it. */
  actionMatch: boolean;
  /** 1 or 0. */
  actionReward: number;
  /** The tool's kind, when known. */
  toolKind?: ToolKind;
}

/** One communicate_info string. */
export interface CommunicateCheck {
  /** The expected string. */
  info: string;
  /** Whether an assistant text contained it. */
  met: boolean;
  /** Why. */
  justification: string;
}

/** One NL assertion as judged. */
export interface NLAssertionCheck {
  /** The assertion. */
  nlAssertion: string;
  /** Whether the judge found it met. */
  met: boolean;
  /** The judge's reasoning. */
  justification: string;
}

/** One env assertion. */
export interface EnvAssertionCheck {
  /** The function name. */
  funcName: string;
  /** Whether it held. */
  met: boolean;
  /** Why it failed, when it did. */
  note?: string;
}

/** The reward and its breakdown (tau2's RewardInfo). */
export interface RewardInfo {
  /** Product of the evaluated components in the basis (0 for an unfinished conversation). */
  reward: number;
  /** The task's reward basis. */
  rewardBasis: RewardType[];
  /** Each evaluated component's value. */
  rewardBreakdown: Partial<Record<RewardType, number>>;
  /** Components in the basis that could not be evaluated (e.g. NL assertions without a judge). */
  notEvaluated: RewardType[];
  /** DB check (null when the conversation was not graded or the task has neither gold actions nor env assertions). */
  dbCheck: DbCheck | null;
  /** Env assertions. */
  envAssertions: EnvAssertionCheck[];
  /** Gold actions vs calls, one check each (diagnostic unless ACTION is in the basis; ACTION is 1 only when every one matched). */
  actionChecks: ActionCheck[];
  /** Communicate checks. */
  communicateChecks: CommunicateCheck[];
  /** NL assertions, or null when not judged. */
  nlAssertions: NLAssertionCheck[] | null;
  /** Notes (premature termination, replay problems, gold actions that failed…). */
  info: Record<string, unknown>;
}

/** An LLM judge for NL assertions: one verdict per assertion, in order. */
export type NLJudge = (
  transcript: readonly Message[],
  assertions: readonly string[],
) => Promise<{ met: boolean; reasoning: string }[]>;

/** Evaluation options. */
export interface EvaluateOptions {
  /** Raise (grade 0) when a replayed call's output differs from the recorded one (tau2 strict). Default true. */
  strictReplay?: boolean;
  /**
   * What to do with a basis component that cannot be evaluated (NL assertions without a judge):
   * `exclude` (default) leaves it out of the product and lists it in `notEvaluated`; `fail`
   * counts it as 0.
   */
  unevaluated?: 'exclude' | 'fail';
}

const JSON_EQUAL = { nanEqual: false } as const;

/** Deep equality of JSON values (Python `==` on dicts and lists; {@link structuralEqual} with NaN unequal). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return structuralEqual(a, b, JSON_EQUAL);
}

function parseMaybeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

/** The (call, result) pairs of a trajectory, in order; results are matched by call id. */
export function callResultPairs(messages: readonly Message[]): { call: ToolCall; result: ToolMessage | undefined }[] {
  const results = new Map<string, ToolMessage>();
  for (const m of messages) if (m.role === 'tool' && !results.has(m.id)) results.set(m.id, m);
  const pairs: { call: ToolCall; result: ToolMessage | undefined }[] = [];
  for (const m of messages)
    if (isToolCallMessage(m)) for (const c of m.toolCalls) pairs.push({ call: c, result: results.get(c.id) });
  return pairs;
}

/** Whether a gold action matches a call (tau2: same name, and equal compared arguments). */
export function actionMatches(action: TaskAction, call: ToolCall): boolean {
  if (action.name !== call.name) return false;
  const keys = action.compare_args ?? Object.keys(call.arguments);
  if (keys.length === 0) return true;
  const pick = (args: Record<string, unknown>) => {
    const o: Record<string, unknown> = {};
    for (const k of keys) if (Object.prototype.hasOwnProperty.call(args, k)) o[k] = args[k];
    return o;
  };
  return jsonEqual(pick(call.arguments), pick(action.arguments));
}

/** Grades conversations of one domain; caches each task's gold state. */
export class TauEvaluator<S extends WorldState> {
  private readonly gold = new WeakMap<TauTask, { state: S; failed: GoldActionError[]; hash?: string }>();

  /** @param domain - the domain whose tools replay the calls. */
  constructor(readonly domain: TauDomain<S>) {}

  private toolkitFor(call: ToolCall) {
    return call.requestor === 'user' ? this.domain.userTools : this.domain.tools;
  }

  /** Applies the state-changing calls of `messages` to `state`; throws on a strict mismatch. */
  replay(state: S, messages: readonly Message[], strict: boolean): void {
    for (const { call, result } of callResultPairs(messages)) {
      const kit = this.toolkitFor(call);
      const tool = kit?.get(call.name);
      if (!kit || !tool || !tool.mutates) continue; // unknown tools were no-ops; reads change nothing
      if (result?.rejected) continue; // malformed actions were never run
      const replayed = callDomainTool(this.domain, state, call);
      if (strict && result && !jsonEqual(parseMaybeJson(replayed.content), parseMaybeJson(result.content))) {
        throw new Error(`replayed call ${call.name} (${call.id}) returned a different result than recorded`);
      }
    }
  }

  /**
   * The gold state of a task: fresh state + message history + gold actions in order (cached).
   * A state-changing gold action that fails is skipped and listed in `failed` (tau2 logs it and
   * goes on).
   */
  goldState(task: TauTask): { state: S; failed: GoldActionError[]; hash?: string } {
    let g = this.gold.get(task);
    if (!g) {
      const state = this.domain.initialState(task);
      this.replay(state, task.initial_state?.message_history ?? [], false);
      const failed: GoldActionError[] = [];
      for (const a of task.evaluation_criteria?.actions ?? []) {
        const call: ToolCall = {
          id: `gold_${a.action_id}`,
          name: a.name,
          arguments: a.arguments,
          requestor: a.requestor ?? 'assistant',
        };
        const kit = this.toolkitFor(call);
        const res = kit
          ? callDomainTool(this.domain, state, call)
          : { error: true, content: 'Error: no tools for this requestor' };
        const mutating = kit?.get(a.name)?.mutates ?? true;
        if (res.error && mutating) failed.push({ action_id: a.action_id, name: a.name, error: res.content });
      }
      g = { state, failed };
      this.gold.set(task, g);
    }
    return g;
  }

  /** Grades without an NL judge (NL assertions, if any, are reported as not evaluated). */
  evaluate(task: TauTask, run: SimulationRun, options: EvaluateOptions = {}): RewardInfo {
    return this.grade(task, run, options, null);
  }

  /** Grades, asking `judge` about the task's NL assertions when they are in the basis. */
  async evaluateAsync(
    task: TauTask,
    run: SimulationRun,
    options: EvaluateOptions & { judge?: NLJudge } = {},
  ): Promise<RewardInfo> {
    let nl: NLAssertionCheck[] | null = null;
    const assertions = task.evaluation_criteria?.nl_assertions ?? [];
    const graded = run.terminationReason === 'user_stop' || run.terminationReason === 'agent_stop';
    if (graded && options.judge && assertions.length > 0 && rewardBasis(task).includes('NL_ASSERTION')) {
      const verdicts = await options.judge(
        [...(task.initial_state?.message_history ?? []), ...run.messages],
        assertions,
      );
      nl = assertions.map((a, i) => ({
        nlAssertion: a,
        met: verdicts[i]?.met === true,
        justification: verdicts[i]?.reasoning ?? 'the judge returned no verdict',
      }));
    }
    return this.grade(task, run, options, nl);
  }

  private grade(
    task: TauTask,
    run: SimulationRun,
    options: EvaluateOptions,
    nl: NLAssertionCheck[] | null,
  ): RewardInfo {
    const basis = rewardBasis(task);
    const empty: RewardInfo = {
      reward: 0,
      rewardBasis: basis,
      rewardBreakdown: {},
      notEvaluated: [],
      dbCheck: null,
      envAssertions: [],
      actionChecks: [],
      communicateChecks: [],
      nlAssertions: null,
      info: {},
    };
    if (run.terminationReason !== 'user_stop' && run.terminationReason !== 'agent_stop') {
      return {
        ...empty,
        info: { note: `Simulation terminated prematurely. Termination reason: ${run.terminationReason}` },
      };
    }
    const ec = task.evaluation_criteria;
    if (!ec) return { ...empty, reward: 1, info: { note: 'No evaluation criteria' } };
    const full = [...(task.initial_state?.message_history ?? []), ...run.messages];
    const info: Record<string, unknown> = {};
    const breakdown: Partial<Record<RewardType, number>> = {};
    const notEvaluated: RewardType[] = [];
    let reward = 1;

    // DB and env assertions
    let dbCheck: DbCheck | null = null;
    const envChecks: EnvAssertionCheck[] = [];
    if (ec.actions == null && ec.env_assertions == null) {
      info.env = 'No expected actions or env assertions';
    } else {
      let predicted: S;
      try {
        predicted = this.domain.initialState(task);
        this.replay(predicted, full, options.strictReplay ?? true);
      } catch (e) {
        return { ...empty, info: { error: `replay failed: ${(e as Error).message}` } };
      }
      const gold = this.goldState(task);
      const match = predicted.equals(gold.state);
      gold.hash ??= gold.state.hash();
      dbCheck = {
        dbMatch: match,
        dbReward: match ? 1 : 0,
        goldHash: gold.hash,
        predictedHash: match ? gold.hash : predicted.hash(),
      };
      // tau2 logs a failing gold action, skips it and scores the DB check all the same
      if (gold.failed.length > 0) info.gold_action_errors = gold.failed;
      for (const a of ec.env_assertions ?? []) {
        const fn = this.domain.assertions?.[a.func_name];
        if (!fn) {
          envChecks.push({ funcName: a.func_name, met: false, note: 'unknown assertion function' });
          continue;
        }
        let met: boolean;
        try {
          met = fn(predicted, a.arguments) === (a.assert_value ?? true);
        } catch (e) {
          envChecks.push({ funcName: a.func_name, met: false, note: (e as Error).message });
          continue;
        }
        envChecks.push({ funcName: a.func_name, met, ...(met ? {} : { note: a.message ?? 'assertion failed' }) });
      }
    }
    if (basis.includes('DB') && dbCheck) {
      breakdown.DB = dbCheck.dbReward;
      reward *= dbCheck.dbReward;
    }
    if (basis.includes('ENV_ASSERTION')) {
      const r = envChecks.every((c) => c.met) ? 1 : 0;
      breakdown.ENV_ASSERTION = r;
      reward *= r;
    }

    // actions (always computed as a diagnostic)
    const calls = callResultPairs(full).map((p) => p.call);
    const actionChecks: ActionCheck[] = (ec.actions ?? []).map((a) => {
      const m = calls.some((c) => actionMatches(a, c));
      const kind = (a.requestor === 'user' ? this.domain.userTools : this.domain.tools)?.get(a.name)?.kind;
      return { action: a, actionMatch: m, actionReward: m ? 1 : 0, ...(kind ? { toolKind: kind } : {}) };
    });
    if (basis.includes('ACTION')) {
      // tau2: 1 if every gold action was matched, 0 otherwise (no partial credit)
      const r = actionChecks.every((c) => c.actionMatch) ? 1 : 0;
      breakdown.ACTION = r;
      reward *= r;
    }

    // communicate
    const texts = full
      .filter((m) => m.role === 'assistant' && hasText(m))
      .map((m) => (m.content as string).toLowerCase().replace(/,/g, ''));
    const communicateChecks: CommunicateCheck[] = (ec.communicate_info ?? []).map((s) => {
      const needle = s.toLowerCase();
      const met = texts.some((t) => t.includes(needle));
      return {
        info: s,
        met,
        justification: met ? `Information '${s}' communicated.` : `Information '${s}' not communicated.`,
      };
    });
    if (basis.includes('COMMUNICATE')) {
      const r = communicateChecks.every((c) => c.met) ? 1 : 0;
      breakdown.COMMUNICATE = r;
      reward *= r;
    }

    // NL assertions
    if (basis.includes('NL_ASSERTION')) {
      const assertions = ec.nl_assertions ?? [];
      if (assertions.length === 0) breakdown.NL_ASSERTION = 1;
      else if (nl) {
        const r = nl.every((c) => c.met) ? 1 : 0;
        breakdown.NL_ASSERTION = r;
        reward *= r;
      } else if ((options.unevaluated ?? 'exclude') === 'fail') {
        breakdown.NL_ASSERTION = 0;
        reward = 0;
        info.nl = 'NL assertions not evaluated (no judge): counted as failed';
      } else {
        notEvaluated.push('NL_ASSERTION');
        info.nl = 'NL assertions not evaluated (no judge): left out of the reward';
      }
    }
    return {
      reward,
      rewardBasis: basis,
      rewardBreakdown: breakdown,
      notEvaluated,
      dbCheck,
      envAssertions: envChecks,
      actionChecks,
      communicateChecks,
      nlAssertions: nl,
      info,
    };
  }
}

function binomial(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return r;
}

/** One graded trial. */
export interface TrialResult {
  /** The task id. */
  taskId: string;
  /** The reward (a success when {@link isSuccess}). */
  reward: number;
}

/** Whether a trial's reward counts as a success for pass^k and success rates: within 1e-6 of 1 (tau-bench). */
export function isSuccess(reward: number): boolean {
  return Math.abs(reward - 1) <= 1e-6;
}

/**
 * pass^k (tau-bench): for each task with n trials and c successes, C(c, k) / C(n, k);
 * averaged over tasks. Every task needs at least k trials.
 */
export function passHatK(results: readonly TrialResult[], k: number): number {
  if (!Number.isInteger(k) || k < 1) throw new RangeError(`passHatK: k must be a positive integer, got ${k}`);
  const byTask = new Map<string, { n: number; c: number }>();
  for (const r of results) {
    const e = byTask.get(r.taskId) ?? { n: 0, c: 0 };
    e.n++;
    if (isSuccess(r.reward)) e.c++;
    byTask.set(r.taskId, e);
  }
  if (byTask.size === 0) throw new RangeError('passHatK: no results');
  let sum = 0;
  for (const [id, { n, c }] of byTask) {
    if (n < k) throw new RangeError(`passHatK: task ${id} has ${n} trials, fewer than k = ${k}`);
    sum += binomial(c, k) / binomial(n, k);
  }
  return sum / byTask.size;
}
