/**
 * `RecordEpisodeStatistics`: at the end of every episode (terminated or truncated) adds
 * `info.episode = { r, l, t }` — the return, the length in steps and the wall time in seconds
 * (rounded to microseconds) since the reset — and keeps the last `bufferLength` values in
 * `returnQueue`, `lengthQueue` and `timeQueue` (Gymnasium's `wrappers.RecordEpisodeStatistics`).
 * @module
 */
import { performance } from 'node:perf_hooks';

import { AsyncWrapper, type AsyncEnv } from '../async-core.js';
import { Wrapper, type Env } from '../core.js';
import type { ResetArgs, ResetResult, StepResult } from '../types.js';

/** Options of {@link RecordEpisodeStatistics}. */
export interface RecordEpisodeStatisticsOptions {
  /** How many episodes the queues keep (default 100). */
  bufferLength?: number;
  /** The info key of the statistics (default `episode`). */
  statsKey?: string;
}

/** The statistics of one episode. */
export interface EpisodeStatistics {
  /** Return: the sum of the rewards. */
  r: number;
  /** Length in steps. */
  l: number;
  /** Wall time in seconds since the reset (6 decimals). */
  t: number;
}

/** The bookkeeping shared by the sync and async wrappers. */
class EpisodeRecorder {
  readonly bufferLength: number;
  readonly statsKey: string;
  episodeCount = 0;
  episodeStartTime = performance.now();
  episodeReturn = 0;
  episodeLength = 0;
  readonly returnQueue: number[] = [];
  readonly lengthQueue: number[] = [];
  readonly timeQueue: number[] = [];

  constructor(options: RecordEpisodeStatisticsOptions) {
    this.bufferLength = options.bufferLength ?? 100;
    this.statsKey = options.statsKey ?? 'episode';
    if (!Number.isSafeInteger(this.bufferLength) || this.bufferLength <= 0)
      throw new RangeError(`bufferLength must be a positive integer, got ${this.bufferLength}`);
  }

  reset(): void {
    this.episodeStartTime = performance.now();
    this.episodeReturn = 0;
    this.episodeLength = 0;
  }

  record<Obs>(result: StepResult<Obs>): StepResult<Obs> {
    const [, reward, terminated, truncated, info] = result;
    this.episodeReturn += reward;
    this.episodeLength += 1;
    if (terminated || truncated) {
      if (this.statsKey in info)
        throw new Error(`RecordEpisodeStatistics: the info already has the key "${this.statsKey}"`);
      const t = Math.round((performance.now() - this.episodeStartTime) * 1000) / 1e6;
      const stats: EpisodeStatistics = { r: this.episodeReturn, l: this.episodeLength, t };
      info[this.statsKey] = stats;
      for (const [queue, value] of [
        [this.returnQueue, stats.r],
        [this.lengthQueue, stats.l],
        [this.timeQueue, stats.t],
      ] as const) {
        queue.push(value);
        if (queue.length > this.bufferLength) queue.shift();
      }
      this.episodeCount += 1;
      this.episodeStartTime = performance.now();
    }
    return result;
  }
}

/** Adds `info.episode = { r, l, t }` at the end of every episode. */
export class RecordEpisodeStatistics<Obs, Act> extends Wrapper<Obs, Act> {
  private readonly recorder: EpisodeRecorder;

  constructor(env: Env<Obs, Act>, options: RecordEpisodeStatisticsOptions = {}) {
    super(env);
    this.recorder = new EpisodeRecorder(options);
  }

  /** Finished episodes. */
  get episodeCount(): number {
    return this.recorder.episodeCount;
  }
  /** Returns of the last episodes (oldest first). */
  get returnQueue(): readonly number[] {
    return this.recorder.returnQueue;
  }
  /** Lengths of the last episodes. */
  get lengthQueue(): readonly number[] {
    return this.recorder.lengthQueue;
  }
  /** Wall times (seconds) of the last episodes. */
  get timeQueue(): readonly number[] {
    return this.recorder.timeQueue;
  }

  override step(action: Act): StepResult<Obs> {
    return this.recorder.record(this.env.step(action));
  }

  override reset(args: ResetArgs = {}): ResetResult<Obs> {
    const result = this.env.reset(args);
    this.recorder.reset();
    return result;
  }
}

/** {@link RecordEpisodeStatistics} for asynchronous environments. */
export class AsyncRecordEpisodeStatistics<Obs, Act> extends AsyncWrapper<Obs, Act> {
  private readonly recorder: EpisodeRecorder;

  constructor(env: AsyncEnv<Obs, Act>, options: RecordEpisodeStatisticsOptions = {}) {
    super(env);
    this.recorder = new EpisodeRecorder(options);
  }

  /** Finished episodes. */
  get episodeCount(): number {
    return this.recorder.episodeCount;
  }
  /** Returns of the last episodes (oldest first). */
  get returnQueue(): readonly number[] {
    return this.recorder.returnQueue;
  }
  /** Lengths of the last episodes. */
  get lengthQueue(): readonly number[] {
    return this.recorder.lengthQueue;
  }
  /** Wall times (seconds) of the last episodes. */
  get timeQueue(): readonly number[] {
    return this.recorder.timeQueue;
  }

  override async step(action: Act): Promise<StepResult<Obs>> {
    return this.recorder.record(await this.env.step(action));
  }

  override async reset(args: ResetArgs = {}): Promise<ResetResult<Obs>> {
    const result = await this.env.reset(args);
    this.recorder.reset();
    return result;
  }
}
