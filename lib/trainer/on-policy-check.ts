/**
 * {@link OnPolicyCheck}: are the rollout servers sampling the trainer's distribution?
 *
 * A server can answer every request well-formed and still sample something else than the policy
 * being trained: a sampling default the request left out (vLLM applies the model's
 * `generation_config.json`, e.g. Qwen3's `top_k: 20`), log-probs of another distribution
 * (vLLM's default `--logprobs-mode raw_logprobs` is taken before the temperature), a request for
 * an adapter served by the base model (SGLang reads a plain adapter name as `model` as its base),
 * another base model or dtype. The trainer would then compute its importance ratios against the
 * wrong log-probs and train on the wrong samples, silently.
 *
 * The check keeps, per server, the first completions it answered since the servers last took new
 * weights (at most {@link OnPolicyCheck.perServer}), recomputes their sampled tokens' log-probs
 * with the trainer's policy at the request's temperature, and measures the mean |server log-prob −
 * trainer log-prob|. The first batch checked for a server must be within `rollout.maxLogprobDiff`
 * or the run stops with an {@link OffPolicyError} naming the likely causes; after that the mean is
 * logged per server (`rollout/logprob_abs_diff/server_<k>`, k the index in `rollout.servers`).
 * @module
 */
import type { PackedSequences } from '../model/index.js';
import type { AnsweredCompletion } from '../openai/index.js';
import type { LogProbSource } from './model-handle.js';
import { packInOrder } from './sft.js';

/** A server's sampled tokens did not come from the trainer's distribution (see the module description). */
export class OffPolicyError extends Error {
  /** @param message - the server, the measured difference, the bound and the likely causes. */
  constructor(message: string) {
    super(message);
    this.name = 'OffPolicyError';
  }
}

interface Sample {
  prompt: readonly number[];
  tokens: readonly number[];
  logProbs: readonly number[];
  temperature: number;
}

/** Mean |server − trainer| log-prob per server, and how many tokens each mean is over. */
export interface LogProbDiff {
  /** The server's base URL. */
  baseURL: string;
  /** The mean absolute difference. */
  mean: number;
  /** Sampled tokens compared. */
  tokens: number;
}

/** The mean |a − b| of each sample's sampled tokens, the trainer's log-probs computed in packed micro-batches. */
async function diffs(
  policy: LogProbSource,
  samples: readonly Sample[],
  budget: number,
): Promise<{ sum: number; n: number }[]> {
  const seqs = samples.map((s) => ({
    tokens: [...s.prompt, ...s.tokens],
    lossMask: [...new Array<number>(s.prompt.length).fill(0), ...new Array<number>(s.tokens.length).fill(1)],
  }));
  const out: { sum: number; n: number }[] = samples.map(() => ({ sum: 0, n: 0 }));
  // one temperature per packed call: group the samples by temperature
  const byT = new Map<number, number[]>();
  samples.forEach((s, i) => byT.set(s.temperature, [...(byT.get(s.temperature) ?? []), i]));
  const longest = Math.max(...seqs.map((s) => s.tokens.length));
  for (const [temperature, idx] of byT) {
    for (const mb of packInOrder(seqs, idx, Math.max(budget, longest))) {
      const batch: PackedSequences = mb.batch;
      const r = await policy.logProbs(batch, { temperature });
      mb.indices.forEach((si, k) => {
        const s = samples[si];
        const start = batch.offsets[k];
        const P = s.prompt.length;
        for (let j = 0; j < s.tokens.length; j++) {
          // position P + j - 1 predicts token P + j
          out[si].sum += Math.abs(s.logProbs[j] - r.logProbs[start + P + j - 1]);
          out[si].n++;
        }
      });
    }
  }
  return out;
}

/** The on-policy check of a run's rollout servers (see the module description). */
export class OnPolicyCheck {
  private samples = new Map<string, Sample[]>();
  private readonly checked = new Set<string>();

  /**
   * @param servers - the servers' base URLs, in `rollout.servers` order (metric names use the index).
   * @param bound - `rollout.maxLogprobDiff`.
   * @param budget - tokens per packed micro-batch (`grpo.microBatchTokens`).
   * @param perServer - completions kept per server between two weight changes.
   */
  constructor(
    readonly servers: readonly string[],
    readonly bound: number,
    readonly budget: number,
    readonly perServer = 8,
  ) {}

  /** Keeps a completion (the first `perServer` of its server since {@link reset}; greedy ones are skipped). */
  record(done: AnsweredCompletion): void {
    if (!(done.request.temperature > 0) || done.result.tokens.length === 0) return;
    const list = this.samples.get(done.baseURL) ?? [];
    if (list.length >= this.perServer) return;
    list.push({
      prompt: done.request.prompt.slice(),
      tokens: done.result.tokens.slice(),
      logProbs: done.result.logProbs.slice(),
      temperature: done.request.temperature,
    });
    this.samples.set(done.baseURL, list);
  }

  /** Forgets the kept completions (the servers are about to take new weights). */
  reset(): void {
    this.samples = new Map();
  }

  /**
   * Compares the kept completions with `policy` (which must hold the weights the servers
   * sampled with), forgets them, and returns the per-server metrics; throws
   * {@link OffPolicyError} when a server's first checked batch is above the bound.
   */
  async check(policy: LogProbSource): Promise<Record<string, number>> {
    const kept = this.samples;
    this.samples = new Map();
    const metrics: Record<string, number> = {};
    const bad: LogProbDiff[] = [];
    for (const [baseURL, samples] of kept) {
      const d = await diffs(policy, samples, this.budget);
      const tokens = d.reduce((a, x) => a + x.n, 0);
      if (tokens === 0) continue;
      const mean = d.reduce((a, x) => a + x.sum, 0) / tokens;
      const k = this.servers.indexOf(baseURL);
      metrics[`rollout/logprob_abs_diff/server_${k >= 0 ? k : baseURL}`] = mean;
      if (!this.checked.has(baseURL)) {
        this.checked.add(baseURL);
        if (!(mean <= this.bound)) bad.push({ baseURL, mean, tokens });
      }
    }
    if (bad.length > 0) {
      const which = bad
        .map(
          (b) =>
            `${b.baseURL}: mean |server log-prob - trainer log-prob| ${b.mean.toExponential(3)} over ${b.tokens} sampled tokens`,
        )
        .join('; ');
      throw new OffPolicyError(
        `rollout servers sample off-policy (above rollout.maxLogprobDiff ${this.bound}): ${which}. Likely causes: sampling defaults the server applies (vLLM: the model's generation_config.json, e.g. top_k or repetition_penalty; start it with --generation-config vllm), its log-probs mode (vLLM: start it with --logprobs-mode processed_logprobs, whose log-probs are taken after the temperature as the trainer's are), an adapter request served by the base model (SGLang: the adapter must be named by lora_path or model '<base>:<adapter>'), or another base model, checkpoint or dtype than the trainer's`,
      );
    }
    return metrics;
  }
}
