/**
 * Evaluation of any agent-loop {@link TokenPolicy} (a model of the model layer as it is, an
 * OpenAI-compatible server through `ChatTokenPolicy`, the expert) on a
 * list of tasks: `trials` seeded episodes per task, then the mean reward (mean@1), the success
 * rate and pass^k (tau-bench's, `passHatK` of lib/tau), with VERL's metric names, overall and
 * per task kind (`taskKind`: retail kinds such as `cancel` or `refuse`, telecom issue
 * categories). The trainer's validation and `sinkflex eval` both run it.
 *
 * Aborted episodes (a failing policy, user simulator or environment) count as reward 0; with
 * `episodeRetries` they are first rerun with fresh, deterministic seeds (a flaky server), and
 * only those still aborted count. An evaluation never throws for a failed episode, and never
 * hangs on a dead server (the policy's own timeouts end each call).
 * @module
 */
import type { AnyEnv } from '../gym/async-core.js';
import type { ChatFormat } from '../chat/chat-format.js';
import { isSuccess, passHatK } from '../tau/evaluate.js';
import { TASK_KIND_PATTERN } from '../tau/task-kind.js';
import { AgentLoop, type AgentLoopLimits, type TokenizationSanityCheck } from './agent-loop.js';
import type { EpisodeRecord } from './episode-record.js';
import type { TokenPolicy } from './policy.js';
import { mixSeed } from './seeds.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

const EVALUATE_KEYS = optionKeys<EvaluatePolicyOptions>({
  policy: true,
  chat: true,
  env: true,
  taskIds: true,
  trials: true,
  k: true,
  seed: true,
  temperature: true,
  topP: true,
  limits: true,
  concurrency: true,
  systemPrompt: true,
  renderTools: true,
  sanityCheck: true,
  source: true,
  taskKind: true,
  episodeRetries: true,
  onProgress: true,
});

/** Options of {@link evaluatePolicy}. */
export interface EvaluatePolicyOptions {
  /** The policy (agent-loop token policy). */
  policy: TokenPolicy;
  /** The chat format (its tokenizer is the policy's vocabulary): the built-in ChatTemplate or a pretrained model's. */
  chat: ChatFormat;
  /** Makes one environment (see `AgentLoopOptions.env`). */
  env: () => AnyEnv | Promise<AnyEnv>;
  /** The tasks (each evaluated `trials` times). */
  taskIds: readonly string[];
  /** Trials per task. Default 1. */
  trials?: number;
  /** The k of pass^k (each in [1, trials]). Default 1..trials. */
  k?: readonly number[];
  /** Seed of the episodes (episode i of task g: `mixSeed(seed, g, i)`). Default 0. */
  seed?: number;
  /** Sampling temperature (0: greedy). Default 0. */
  temperature?: number;
  /** Nucleus mass. Default 1. */
  topP?: number;
  /** Episode limits (default the agent loop's). */
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
  /**
   * The kind of a task (`taskKind` of lib/tau over the world's task: `cancel`, `refuse`, …), or
   * null for none. With it, every kind gets `val-core/<source>/<kind>/reward/mean@1` and
   * `val-aux/<source>/<kind>/episodes`. A kind must match {@link TASK_KIND_PATTERN}. Default:
   * no kinds.
   */
  taskKind?: (taskId: string) => string | null;
  /** Reruns of an aborted episode, each with a fresh deterministic seed. Default 0. */
  episodeRetries?: number;
  /** Called as episodes finish (done, total); last with (total, total). */
  onProgress?: (done: number, total: number) => void;
}

/** The results of one task. */
export interface TaskEvaluation {
  /** The task. */
  taskId: string;
  /** The task's kind (`taskKind`), or null. */
  kind: string | null;
  /** Reward of each trial (aborted trials count as 0). */
  rewards: number[];
  /** Trials that succeeded (`isSuccess` of lib/tau: reward within 1e-6 of 1). */
  successes: number;
  /** Trials. */
  trials: number;
  /** Termination reason of each trial. */
  terminations: string[];
}

/** The results of the tasks of one kind. */
export interface KindEvaluation {
  /** The kind. */
  kind: string;
  /** Tasks of this kind (a task id listed twice counts twice). */
  tasks: number;
  /** Trials of those tasks. */
  episodes: number;
  /** Mean reward over those trials (mean@1; aborted trials count 0). */
  meanReward: number;
  /** Trials that succeeded. */
  successes: number;
}

/** What {@link evaluatePolicy} measured. */
export interface EvaluationResult {
  /**
   * Metrics: `val-core/<source>/reward/mean@1` (mean reward over every trial),
   * `val-core/<source>/reward/pass^k` for each k, and under `val-aux/<source>/`: `episodes`,
   * `aborted`, `truncated`, `response_length/mean`, `num_turns/mean`; with `taskKind`, for each
   * kind `val-core/<source>/<kind>/reward/mean@1` and `val-aux/<source>/<kind>/episodes`.
   */
  metrics: Record<string, number>;
  /** Mean reward over every trial (mean@1; aborted trials count 0). */
  meanReward: number;
  /** Fraction of trials that succeeded. */
  successRate: number;
  /** pass^k for each k: mean over tasks of C(c, k) / C(n, k). */
  passHatK: Record<number, number>;
  /** Per task, in request order. */
  perTask: TaskEvaluation[];
  /** Per task kind, sorted by kind (empty without `taskKind`; tasks without a kind are in no entry). */
  perKind: KindEvaluation[];
  /** Every episode (aborted ones included), in request order (task, then trial); reruns replace the aborted ones. */
  episodes: EpisodeRecord[];
  /** Episodes still aborted after their reruns. */
  aborted: number;
  /** Episode reruns done. */
  retried: number;
  /** Episodes per termination reason. */
  terminations: Record<string, number>;
  /** Wall time in seconds. */
  seconds: number;
}

function nonNegativeInt(v: number, name: string): number {
  if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`${name} must be an integer >= 0, got ${String(v)}`);
  return v;
}

/**
 * Runs `policy` on `taskIds` with `trials` episodes each (seeded: the same options give the
 * same episodes for a deterministic policy) and measures it (see the module description).
 */
export async function evaluatePolicy(options: EvaluatePolicyOptions): Promise<EvaluationResult> {
  refuseUnknownOptions(options, EVALUATE_KEYS, 'evaluatePolicy');
  const t0 = performance.now();
  const trials = options.trials ?? 1;
  if (!Number.isSafeInteger(trials) || trials < 1)
    throw new RangeError(`trials must be a positive integer, got ${String(trials)}`);
  if (!Array.isArray(options.taskIds) || options.taskIds.length === 0)
    throw new RangeError('taskIds must be a non-empty array of task ids');
  const ks = options.k ?? Array.from({ length: trials }, (_, i) => i + 1);
  for (const k of ks)
    if (!Number.isSafeInteger(k) || k < 1 || k > trials)
      throw new RangeError(`k must be an integer in [1, trials = ${trials}], got ${String(k)}`);
  const retries = nonNegativeInt(options.episodeRetries ?? 0, 'episodeRetries');
  const source = options.source ?? 'tau-retail';
  const kinds = options.taskIds.map((id) => {
    const kind = options.taskKind ? options.taskKind(id) : null;
    if (kind !== null && (typeof kind !== 'string' || !TASK_KIND_PATTERN.test(kind)))
      throw new RangeError(
        `taskKind('${id}') must be null or a string matching ${String(TASK_KIND_PATTERN)} (a metric name segment), got ${JSON.stringify(kind)}`,
      );
    return kind;
  });
  const seed = options.seed ?? 0;
  const total = options.taskIds.length * trials;
  let done = 0;
  const onProgress = options.onProgress;
  const loop = new AgentLoop({
    policy: options.policy,
    chat: options.chat,
    env: options.env,
    concurrency: options.concurrency ?? 16,
    ...(options.limits ? { limits: options.limits } : {}),
    sampling: { temperature: options.temperature ?? 0, topP: options.topP ?? 1 },
    sanityCheck: options.sanityCheck ?? 'disable',
    ...(options.systemPrompt ? { systemPrompt: options.systemPrompt } : {}),
    renderTools: options.renderTools ?? true,
    keepAborted: true,
    ...(onProgress ? { onEpisode: () => onProgress(Math.min(++done, total), total) } : {}),
  });
  let retried = 0;
  let episodes: EpisodeRecord[];
  try {
    episodes = await loop.rollout({ taskIds: options.taskIds, n: trials, seed });
    for (let attempt = 1; attempt <= retries; attempt++) {
      const failed = episodes.map((r, i) => (r.aborted ? i : -1)).filter((i) => i >= 0);
      if (failed.length === 0) break;
      retried += failed.length;
      done -= failed.length;
      const again = await loop.rollout({
        taskIds: failed.map((i) => episodes[i].taskId),
        n: 1,
        seed: mixSeed(seed, 0x5e7, attempt),
        uidPrefix: 'retry',
      });
      failed.forEach((i, j) => {
        const old = episodes[i];
        episodes[i] = { ...again[j], uid: old.uid, groupIndex: old.groupIndex, sampleIndex: old.sampleIndex };
      });
    }
  } finally {
    await loop.dispose();
  }
  onProgress?.(total, total);

  const perTask: TaskEvaluation[] = options.taskIds.map((taskId, g) => ({
    taskId,
    kind: kinds[g],
    rewards: [],
    successes: 0,
    trials: 0,
    terminations: [],
  }));
  for (const e of episodes) {
    const t = perTask[e.groupIndex];
    const r = e.aborted || !Number.isFinite(e.reward) ? 0 : e.reward;
    t.rewards.push(r);
    t.trials++;
    if (isSuccess(r)) t.successes++;
    t.terminations.push(e.termination);
  }
  const all = perTask.flatMap((t) => t.rewards);
  const meanReward = all.reduce((a, b) => a + b, 0) / all.length;
  // one pass^k result per trial, keyed by the task's position (a task id may repeat in taskIds)
  const results = perTask.flatMap((t, g) => t.rewards.map((reward) => ({ taskId: `${g}:${t.taskId}`, reward })));
  const passK: Record<number, number> = {};
  const metrics: Record<string, number> = { [`val-core/${source}/reward/mean@1`]: meanReward };
  for (const k of ks) {
    passK[k] = passHatK(results, k);
    metrics[`val-core/${source}/reward/pass^${k}`] = passK[k];
  }
  const n = episodes.length;
  const mean = (f: (e: EpisodeRecord) => number) => episodes.reduce((a, e) => a + f(e), 0) / n;
  const aborted = episodes.filter((e) => e.aborted).length;
  metrics[`val-aux/${source}/episodes`] = n;
  metrics[`val-aux/${source}/aborted`] = aborted;
  metrics[`val-aux/${source}/truncated`] = episodes.filter((e) => e.truncated).length;
  metrics[`val-aux/${source}/response_length/mean`] = mean((e) => e.responseMask.reduce((a, b) => a + b, 0));
  metrics[`val-aux/${source}/num_turns/mean`] = mean((e) => e.numTurns);
  const perKind = evaluationsByKind(perTask);
  for (const k of perKind) {
    metrics[`val-core/${source}/${k.kind}/reward/mean@1`] = k.meanReward;
    metrics[`val-aux/${source}/${k.kind}/episodes`] = k.episodes;
  }
  const terminations: Record<string, number> = {};
  for (const e of episodes) terminations[e.termination] = (terminations[e.termination] ?? 0) + 1;
  return {
    metrics,
    meanReward,
    successRate: perTask.reduce((a, t) => a + t.successes, 0) / n,
    passHatK: passK,
    perTask,
    perKind,
    episodes,
    aborted,
    retried,
    terminations,
    seconds: (performance.now() - t0) / 1000,
  };
}

/** The tasks grouped by kind (sorted by kind; tasks without a kind left out). */
function evaluationsByKind(perTask: readonly TaskEvaluation[]): KindEvaluation[] {
  const byKind = new Map<string, KindEvaluation & { sum: number }>();
  for (const t of perTask) {
    if (t.kind === null) continue;
    const k = byKind.get(t.kind) ?? { kind: t.kind, tasks: 0, episodes: 0, meanReward: 0, successes: 0, sum: 0 };
    k.tasks++;
    k.episodes += t.trials;
    k.successes += t.successes;
    k.sum += t.rewards.reduce((a, b) => a + b, 0);
    byKind.set(t.kind, k);
  }
  return [...byKind.values()]
    .sort((a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0))
    .map(({ sum, ...k }) => ({ ...k, meanReward: k.episodes > 0 ? sum / k.episodes : 0 }));
}
