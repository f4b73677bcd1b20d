/**
 * A small evaluation over the agent loop (any policy: the built-in one, an OpenAI-compatible
 * server through `ChatTokenPolicy`): `trials` episodes per task with seeds derived from one
 * seed, mean reward, success rate and pass^k. Aborted episodes (policy, user simulator or
 * environment failure) are retried up to `episodeRetries` times with fresh, deterministic
 * seeds, then counted as aborted with reward 0 — a run never hangs on a dead server (the
 * policy's own timeouts end each call) and never throws for a failed episode.
 * @module
 */
import type { AnyEnv } from '../gym/async-core.js';
import type { ChatFormat } from '../model/chat-format.js';
import { AgentLoop, type AgentLoopLimits, type AgentLoopSampling, type TokenizationSanityCheck } from '../rollout/agent-loop.js';
import type { EpisodeRecord } from '../rollout/episode-record.js';
import type { TokenPolicy, TokenSession } from '../rollout/policy.js';
import { mixSeed } from '../rollout/seeds.js';
import { passHatK } from '../tau/evaluate.js';

/** Options of {@link evaluateAgent}. */
export interface AgentEvaluationOptions {
  /** The policy. */
  policy: TokenPolicy;
  /** The chat format of the agent loop. */
  template: ChatFormat;
  /** Makes one environment (see `AgentLoopOptions.env`). */
  env: () => AnyEnv | Promise<AnyEnv>;
  /** The tasks. */
  taskIds: readonly string[];
  /** Episodes per task. Default 1. */
  trials?: number;
  /** The k of pass^k (each <= trials). Default 1..trials. */
  k?: readonly number[];
  /** Seed. Default 0. */
  seed?: number;
  /** Episodes in flight. Default 4. */
  concurrency?: number;
  /** Episode limits. */
  limits?: AgentLoopLimits;
  /** Sampling. */
  sampling?: AgentLoopSampling;
  /** System prompt from the reset info (default the environment's). */
  systemPrompt?: (info: Readonly<Record<string, unknown>>) => string;
  /** Render the tools section. Default true. */
  renderTools?: boolean;
  /** Tokenization sanity check. Default `disable`. */
  sanityCheck?: TokenizationSanityCheck;
  /** Reruns of an aborted episode. Default 1. */
  episodeRetries?: number;
  /** Called as episodes finish (done, total). */
  onProgress?: (done: number, total: number) => void;
}

/** What {@link evaluateAgent} measured. */
export interface AgentEvaluationResult {
  /** Every episode (task order, then trial), retries replaced. */
  episodes: EpisodeRecord[];
  /** Mean reward over all episodes (aborted ones count 0). */
  meanReward: number;
  /** Fraction of episodes with reward 1. */
  successRate: number;
  /** pass^k for each k. */
  passK: Record<number, number>;
  /** Episodes still aborted after their retries. */
  aborted: number;
  /** Episode reruns done. */
  retried: number;
  /** Episodes per termination reason. */
  terminations: Record<string, number>;
  /** Wall time in seconds. */
  seconds: number;
}

/** Counts finished sessions for progress. */
class ProgressPolicy implements TokenPolicy {
  done = 0;
  constructor(
    readonly inner: TokenPolicy,
    readonly tick: () => void,
  ) {}
  get maxBatchSize(): number | undefined {
    return this.inner.maxBatchSize;
  }
  createSession(context: Parameters<TokenPolicy['createSession']>[0]): TokenSession {
    const s = this.inner.createSession(context);
    let closed = false;
    const tick = this.tick;
    return {
      append: (t) => s.append(t),
      sample: (p) => s.sample(p),
      get length() {
        return s.length;
      },
      close: () => {
        s.close();
        if (!closed) tick();
        closed = true;
      },
    };
  }
}

/** Runs the evaluation (see the module description). */
export async function evaluateAgent(options: AgentEvaluationOptions): Promise<AgentEvaluationResult> {
  const t0 = performance.now();
  const trials = options.trials ?? 1;
  if (!Number.isSafeInteger(trials) || trials < 1) throw new RangeError(`trials must be a positive integer, got ${String(options.trials)}`);
  const ks = options.k ?? Array.from({ length: trials }, (_, i) => i + 1);
  for (const k of ks) if (!Number.isSafeInteger(k) || k < 1 || k > trials) throw new RangeError(`k must be an integer in [1, trials = ${trials}], got ${String(k)}`);
  if (options.taskIds.length === 0) throw new RangeError('taskIds is empty');
  const retries = options.episodeRetries ?? 1;
  const seed = options.seed ?? 0;
  const total = options.taskIds.length * trials;
  let done = 0;
  const policy = new ProgressPolicy(options.policy, () => options.onProgress?.(Math.min(++done, total), total));
  const loop = new AgentLoop({
    policy,
    template: options.template,
    env: options.env,
    concurrency: options.concurrency ?? 4,
    limits: options.limits,
    sampling: options.sampling,
    sanityCheck: options.sanityCheck ?? 'disable',
    renderTools: options.renderTools ?? true,
    keepAborted: true,
    ...(options.systemPrompt ? { systemPrompt: options.systemPrompt } : {}),
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
      const again = await loop.rollout({ taskIds: failed.map((i) => episodes[i].taskId), n: 1, seed: mixSeed(seed, 0x5e7, attempt), uidPrefix: 'retry' });
      failed.forEach((i, j) => {
        const old = episodes[i];
        episodes[i] = { ...again[j], uid: old.uid, groupIndex: old.groupIndex, sampleIndex: old.sampleIndex };
      });
    }
  } finally {
    await loop.close();
  }
  options.onProgress?.(total, total);
  const rewards = episodes.map((r) => (r.aborted || !Number.isFinite(r.reward) ? 0 : r.reward));
  const results = episodes.map((r, i) => ({ taskId: `${r.groupIndex}:${r.taskId}`, reward: rewards[i] }));
  const passK: Record<number, number> = {};
  for (const k of ks) passK[k] = passHatK(results, k);
  const terminations: Record<string, number> = {};
  for (const r of episodes) terminations[r.termination] = (terminations[r.termination] ?? 0) + 1;
  return {
    episodes,
    meanReward: rewards.reduce((a, b) => a + b, 0) / rewards.length,
    successRate: rewards.filter((r) => Math.abs(r - 1) <= 1e-6).length / rewards.length,
    passK,
    aborted: episodes.filter((r) => r.aborted).length,
    retried,
    terminations,
    seconds: (performance.now() - t0) / 1000,
  };
}
