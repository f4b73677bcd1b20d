/**
 * Validation: any agent-loop {@link TokenPolicy} (the built-in model through
 * `ModelPolicyAdapter`, an OpenAI-compatible server through `ChatTokenPolicy`, the expert) on
 * held-out tasks with k trials each and fixed seeds → mean@1 and pass^k with VERL's metric
 * names, per-task results and the episode records.
 * @module
 */
import type { AnyEnv } from '../gym/index.js';
import type { ChatFormat } from '../model/index.js';
import { AgentLoop, type AgentLoopLimits, type EpisodeRecord, type TokenizationSanityCheck, type TokenPolicy } from '../rollout/index.js';

/** Options of {@link evaluatePolicy}. */
export interface EvaluatePolicyOptions {
  /** The policy (agent-loop token policy). */
  policy: TokenPolicy;
  /** The chat format (its tokenizer is the policy's vocabulary): the built-in ChatTemplate or a pretrained model's. */
  template: ChatFormat;
  /** Environment factory (see `AgentLoopOptions.env`). */
  env: () => AnyEnv | Promise<AnyEnv>;
  /** Held-out task ids (each evaluated `trials` times). */
  taskIds: readonly string[];
  /** Trials per task (pass^k is reported for k = 1..trials). Default 1. */
  trials?: number;
  /** Seed of the episodes (episode i of task g: `mixSeed(seed, g, i)`). Default 0. */
  seed?: number;
  /** Sampling temperature (0: greedy). Default 0. */
  temperature?: number;
  /** Nucleus mass. Default 1. */
  topP?: number;
  /** Episode limits. */
  limits?: AgentLoopLimits;
  /** Episodes in flight at once. Default 16. */
  concurrency?: number;
  /** System prompt from the reset info (default the environment's). */
  systemPrompt?: (info: Readonly<Record<string, unknown>>) => string;
  /** Render the tools section. Default true. */
  renderTools?: boolean;
  /** Tokenization sanity check. Default `disable`. */
  sanityCheck?: TokenizationSanityCheck;
  /** Metric data-source name: `val-core/<source>/reward/mean@1`. Default `tau-retail`. */
  source?: string;
  /** Success threshold of a trial's reward (tau2: reward 1). Default `1 - 1e-6`. */
  successThreshold?: number;
}

/** The results of one task. */
export interface TaskEvaluation {
  /** The task. */
  taskId: string;
  /** Reward of each trial (aborted and truncated trials count as 0). */
  rewards: number[];
  /** Trials with reward at or above the success threshold. */
  successes: number;
  /** Trials. */
  trials: number;
  /** Termination reason of each trial. */
  terminations: string[];
}

/** What {@link evaluatePolicy} returns. */
export interface EvaluationResult {
  /**
   * Metrics: `val-core/<source>/reward/mean@1` (mean reward over every trial),
   * `val-core/<source>/reward/pass^k` for k = 1..trials, and under `val-aux/<source>/`:
   * `aborted`, `truncated`, `response_length/mean`, `num_turns/mean`, `episodes`.
   */
  metrics: Record<string, number>;
  /** Mean reward over every trial. */
  meanAt1: number;
  /** pass^k by k (1..trials): mean over tasks of C(c, k) / C(n, k). */
  passHatK: Record<number, number>;
  /** Per task, in request order. */
  perTask: TaskEvaluation[];
  /** Every episode (aborted ones included), in request order. */
  episodes: EpisodeRecord[];
}

/** C(n, k) as a float (exact for the small values used here). */
function binomial(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return r;
}

/** pass^k over per-task (successes, trials): mean of C(c, k) / C(n, k). Every task needs at least k trials. */
export function passHatKOf(tasks: readonly { successes: number; trials: number }[], k: number): number {
  if (!Number.isInteger(k) || k < 1) throw new RangeError(`k must be a positive integer, got ${k}`);
  if (tasks.length === 0) throw new RangeError('pass^k of no tasks');
  let sum = 0;
  for (const t of tasks) {
    if (t.trials < k) throw new RangeError(`a task has ${t.trials} trials, fewer than k = ${k}`);
    sum += binomial(t.successes, k) / binomial(t.trials, k);
  }
  return sum / tasks.length;
}

/**
 * Runs `policy` on `taskIds` with `trials` episodes each (seeded: the same options give the
 * same episodes for a deterministic policy) and computes mean@1 and pass^k. Failed (aborted)
 * episodes count as reward 0 and are reported in `val-aux/<source>/aborted`.
 */
export async function evaluatePolicy(options: EvaluatePolicyOptions): Promise<EvaluationResult> {
  const trials = options.trials ?? 1;
  if (!Number.isInteger(trials) || trials < 1) throw new RangeError(`trials must be a positive integer, got ${String(trials)}`);
  if (!Array.isArray(options.taskIds) || options.taskIds.length === 0) throw new RangeError('taskIds must be a non-empty array of task ids');
  const source = options.source ?? 'tau-retail';
  const threshold = options.successThreshold ?? 1 - 1e-6;
  const loop = new AgentLoop({
    policy: options.policy,
    template: options.template,
    env: options.env,
    concurrency: options.concurrency ?? 16,
    ...(options.limits ? { limits: options.limits } : {}),
    sampling: { temperature: options.temperature ?? 0, topP: options.topP ?? 1 },
    sanityCheck: options.sanityCheck ?? 'disable',
    ...(options.systemPrompt ? { systemPrompt: options.systemPrompt } : {}),
    renderTools: options.renderTools ?? true,
    keepAborted: true,
  });
  let episodes: EpisodeRecord[];
  try {
    episodes = await loop.rollout({ taskIds: options.taskIds, n: trials, seed: options.seed ?? 0, uidPrefix: 'val' });
  } finally {
    await loop.close();
  }
  const perTask: TaskEvaluation[] = options.taskIds.map((taskId) => ({ taskId, rewards: [], successes: 0, trials: 0, terminations: [] }));
  for (const e of episodes) {
    const t = perTask[e.groupIndex];
    const r = e.aborted ? 0 : e.reward;
    t.rewards.push(r);
    t.trials++;
    if (r >= threshold) t.successes++;
    t.terminations.push(e.termination);
  }
  const all = perTask.flatMap((t) => t.rewards);
  const meanAt1 = all.reduce((a, b) => a + b, 0) / all.length;
  const passHatK: Record<number, number> = {};
  const metrics: Record<string, number> = { [`val-core/${source}/reward/mean@1`]: meanAt1 };
  for (let k = 1; k <= trials; k++) {
    passHatK[k] = passHatKOf(perTask, k);
    metrics[`val-core/${source}/reward/pass^${k}`] = passHatK[k];
  }
  const n = episodes.length;
  const mean = (f: (e: EpisodeRecord) => number) => episodes.reduce((a, e) => a + f(e), 0) / n;
  metrics[`val-aux/${source}/episodes`] = n;
  metrics[`val-aux/${source}/aborted`] = episodes.filter((e) => e.aborted).length;
  metrics[`val-aux/${source}/truncated`] = episodes.filter((e) => e.truncated).length;
  metrics[`val-aux/${source}/response_length/mean`] = mean((e) => e.responseMask.reduce((a, b) => a + b, 0));
  metrics[`val-aux/${source}/num_turns/mean`] = mean((e) => e.numTurns);
  return { metrics, meanAt1, passHatK, perTask, episodes };
}
