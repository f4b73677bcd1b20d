/**
 * Batches generation requests of concurrent episodes: each episode awaits
 * `scheduler.sample(session, params)`; requests that arrive in the same turn of the event loop
 * (and those that arrive while a batch is being generated) are served together by one
 * `generateBatch` call, so a model decodes all waiting episodes at once.
 * @module
 */
import {
  generateBatch,
  type TokenPolicy,
  type SampleOptions,
  type TokenSampleResult,
  type TokenSession,
} from './policy.js';

interface Pending {
  session: TokenSession;
  params: SampleOptions;
  resolve: (r: TokenSampleResult) => void;
  reject: (e: Error) => void;
}

/** Statistics of a scheduler. */
export interface SchedulerStats {
  /** `generateBatch` calls made. */
  batches: number;
  /** Requests served. */
  requests: number;
  /** Largest batch. */
  maxBatch: number;
}

/** The request batcher (see the module description). */
export class GenerationScheduler {
  private queue: Pending[] = [];
  private scheduled = false;
  private inFlight = 0;
  private readonly maxBatch: number;
  private readonly maxInFlight: number;
  /** Counters. */
  readonly stats: SchedulerStats = { batches: 0, requests: 0, maxBatch: 0 };

  /**
   * @param policy - the policy serving the requests.
   * @param options - `maxBatchSize` (default the policy's, else unlimited); `maxInFlight`:
   *   batches generated at the same time (default 1: the next batch collects what arrives meanwhile).
   */
  constructor(
    readonly policy: TokenPolicy,
    options: { maxBatchSize?: number; maxInFlight?: number } = {},
  ) {
    const mb = options.maxBatchSize ?? policy.maxBatchSize ?? Infinity;
    if (!(mb >= 1)) throw new RangeError(`maxBatchSize must be >= 1, got ${mb}`);
    this.maxBatch = mb;
    const mf = options.maxInFlight ?? 1;
    if (!Number.isInteger(mf) || mf < 1) throw new RangeError(`maxInFlight must be a positive integer, got ${mf}`);
    this.maxInFlight = mf;
  }

  /** Queues one request; resolves with its result or rejects with its error. */
  sample(session: TokenSession, params: SampleOptions): Promise<TokenSampleResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ session, params, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0 || this.inFlight >= this.maxInFlight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.queue.length > 0 && this.inFlight < this.maxInFlight) {
      const batch = this.queue.splice(0, Number.isFinite(this.maxBatch) ? this.maxBatch : this.queue.length);
      this.inFlight++;
      this.stats.batches++;
      this.stats.requests += batch.length;
      this.stats.maxBatch = Math.max(this.stats.maxBatch, batch.length);
      void generateBatch(
        this.policy,
        batch.map((p) => ({ session: p.session, params: p.params })),
      ).then((results) => {
        this.inFlight--;
        batch.forEach((p, i) => {
          const r = results[i];
          if (r instanceof Error) p.reject(r);
          else p.resolve(r);
        });
        this.schedule();
      });
    }
  }
}
