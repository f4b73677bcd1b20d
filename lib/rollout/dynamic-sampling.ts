/**
 * DAPO's dynamic sampling (VERL's `algorithm.filter_groups`): groups whose samples all have
 * the same reward carry no GRPO signal, so they are dropped and more tasks are generated until
 * the batch holds the wanted number of groups, within a cap on generation rounds.
 * @module
 */
import type { AgentLoop } from './agent-loop.js';
import { episodesToDataProto, rolloutMetrics } from './batch.js';
import type { DataProto } from './data-proto.js';
import type { EpisodeRecord } from './episode-record.js';
import { mixSeed } from './seeds.js';

/** Options of {@link generateWithDynamicSampling}. */
export interface DynamicSamplingOptions {
  /** Groups the batch must hold (VERL's `train_batch_size`, in prompts). */
  batchSize: number;
  /** Samples per task (at least 2). */
  n: number;
  /** The task ids of generation round `round` (`count` of them, VERL's `gen_batch_size`). */
  sampleTasks: (count: number, round: number) => readonly string[];
  /** Tasks per round. Default `batchSize`. */
  genBatchSize?: number;
  /** Most generation rounds (VERL's `max_num_gen_batches`). Default 10; 0 = no limit. */
  maxRounds?: number;
  /** Seed; round r uses `mixSeed(seed, r)`. Default 0. */
  seed?: number;
  /** The value that must differ within a group. Default the reward. */
  metric?: (record: EpisodeRecord) => number;
  /** When the rounds run out before the batch is full: throw (default false) or return the groups kept so far. */
  allowPartial?: boolean;
}

/** Thrown when the cap on generation rounds is reached before the batch is full. */
export class DynamicSamplingError extends Error {
  /** @param message - what happened. @param kept - groups kept. @param rounds - rounds run. */
  constructor(
    message: string,
    readonly kept: number,
    readonly rounds: number,
  ) {
    super(message);
    this.name = 'DynamicSamplingError';
  }
}

/**
 * Generates rounds of `genBatchSize` tasks × `n` samples with `loop`, keeps the groups whose
 * metric (reward) is not the same for all their samples (aborted samples are left out first;
 * a group needs two samples left), and stops when `batchSize` groups are kept (the first
 * ones, in generation order) or after `maxRounds` rounds. Returns the batch of the kept
 * groups; its `meta.metrics` add `rollout/dynamic/{rounds,groups_generated,groups_kept,
 * groups_dropped}` and count every generated episode.
 */
export async function generateWithDynamicSampling(
  loop: AgentLoop,
  options: DynamicSamplingOptions,
): Promise<DataProto> {
  const { batchSize, n } = options;
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new RangeError(`batchSize must be a positive integer, got ${String(batchSize)}`);
  if (!Number.isInteger(n) || n < 2)
    throw new RangeError(`dynamic sampling needs n >= 2 samples per task, got ${String(n)}`);
  const genBatchSize = options.genBatchSize ?? batchSize;
  if (!Number.isInteger(genBatchSize) || genBatchSize < 1)
    throw new RangeError(`genBatchSize must be a positive integer, got ${String(genBatchSize)}`);
  const maxRounds = options.maxRounds ?? 10;
  if (!Number.isInteger(maxRounds) || maxRounds < 0)
    throw new RangeError(`maxRounds must be a non-negative integer, got ${String(maxRounds)}`);
  const metric = options.metric ?? ((r: EpisodeRecord) => r.reward);
  const seed = options.seed ?? 0;
  const t0 = performance.now();
  const all: EpisodeRecord[] = [];
  const kept: EpisodeRecord[][] = [];
  let generated = 0;
  let round = 0;
  while (kept.length < batchSize && (maxRounds === 0 || round < maxRounds)) {
    const taskIds = options.sampleTasks(genBatchSize, round);
    if (!Array.isArray(taskIds) || taskIds.length === 0)
      throw new RangeError(`sampleTasks returned no task ids for round ${round}`);
    const records = await loop.rollout({ taskIds, n, seed: mixSeed(seed, round), uidPrefix: `r${round}g` });
    all.push(...records);
    const groups = new Map<string, EpisodeRecord[]>();
    for (const r of records) {
      const g = groups.get(r.uid) ?? [];
      g.push(r);
      groups.set(r.uid, g);
    }
    for (const g of groups.values()) {
      generated++;
      const ok = g.filter((r) => !r.aborted);
      if (ok.length < 2) continue;
      const v0 = metric(ok[0]);
      if (ok.some((r) => metric(r) !== v0)) kept.push(ok);
    }
    round++;
  }
  if (kept.length < batchSize && !options.allowPartial) {
    throw new DynamicSamplingError(
      `dynamic sampling kept ${kept.length} of ${batchSize} groups after ${round} generation rounds (${generated} groups generated): the tasks may be too hard or too easy; raise maxRounds or genBatchSize, or set allowPartial`,
      kept.length,
      round,
    );
  }
  const chosen = kept.slice(0, batchSize).flat();
  const timingS = (performance.now() - t0) / 1000;
  const batch = episodesToDataProto(chosen, { padTokenId: loop.chat.pad, keepAborted: false });
  const metrics = rolloutMetrics(all, chosen, timingS);
  metrics['rollout/dynamic/rounds'] = round;
  metrics['rollout/dynamic/groups_generated'] = generated;
  metrics['rollout/dynamic/groups_kept'] = Math.min(kept.length, batchSize);
  metrics['rollout/dynamic/groups_dropped'] = generated - kept.length;
  return batch.assign({ meta: { metrics } });
}
