/**
 * One GRPO step in VERL's order: rollout (n samples per task through the agent loop) → old
 * log-probs (recomputed at the rollout temperature) → reference log-probs (KL, optional) →
 * advantages (the native GRPO kernel) → actor update (mini-batches × PPO epochs over packed
 * micro-batches, gradient clipping; a step with a non-finite gradient norm is skipped and
 * counted) → metrics with VERL's names.
 * @module
 */
import { performance } from 'node:perf_hooks';

import { computeAdvantages, policyLoss, type PolicyLossOptions } from '../grpo/index.js';
import type { PackedSequences, TransformerPolicy } from '../model/index.js';
import { groupIds, mixSeed, rolloutMetrics, type AgentLoop, type EpisodeRecord } from '../rollout/index.js';
import type { TrainConfig } from './config.js';
import type { LogProbSource } from './model-handle.js';
import { episodeSequence, packInOrder, seededPermutation, type MaskedSequence } from './sft.js';

/** What a GRPO step needs. */
export interface GrpoStepContext {
  /** The policy being trained. */
  policy: TransformerPolicy;
  /** The agent loop over the policy (the model itself, or a serving engine's) and the training environments. */
  loop: AgentLoop;
  /** The KL reference (a policy, or a LoRA run's reference adapter; needed when `grpo.klCoef > 0`). */
  reference?: LogProbSource | null;
  /** The configuration (rollout, grpo, seed). */
  config: TrainConfig;
  /**
   * Called after the rollout, before any update (the policy still holds the weights the episodes
   * were sampled with): the rollout engine's on-policy check; its metrics join the step's, and a
   * rejection stops the step.
   */
  afterRollout?: () => Promise<Record<string, number>>;
}

/** What a GRPO step returns. */
export interface GrpoStepResult {
  /** The step's metrics (VERL names). */
  metrics: Record<string, number>;
  /** Every episode of the rollout (aborted ones included). */
  records: EpisodeRecord[];
  /** Optimiser steps skipped for a non-finite gradient norm. */
  skipped: number;
}

/** Per-sequence token values taken out of a packed batch's positions. */
function split(batch: PackedSequences, values: Float32Array): Float32Array[] {
  const out: Float32Array[] = [];
  for (let d = 0; d + 1 < batch.offsets.length; d++) out.push(values.slice(batch.offsets[d], batch.offsets[d + 1]));
  return out;
}

async function perSequenceLogProbs(
  policy: LogProbSource,
  seqs: readonly MaskedSequence[],
  budget: number,
  temperature: number,
): Promise<{ logProbs: Float32Array[]; entropy: Float32Array[] }> {
  const logProbs: Float32Array[] = new Array(seqs.length);
  const entropy: Float32Array[] = new Array(seqs.length);
  for (const mb of packInOrder(
    seqs,
    seqs.map((_, i) => i),
    budget,
  )) {
    const r = await policy.logProbs(mb.batch, { temperature });
    const lp = split(mb.batch, r.logProbs);
    const en = split(mb.batch, r.entropy);
    mb.indices.forEach((s, k) => {
      logProbs[s] = lp[k];
      entropy[s] = en[k];
    });
  }
  return { logProbs, entropy };
}

/** Weight of each scored token in the aggregated loss (for the entropy gradient, which the loss kernel does not give). */
function aggWeight(
  mode: TrainConfig['grpo']['aggMode'],
  tokensOfRow: number,
  globalTokens: number,
  globalSeqs: number,
  lossScale: number,
): number {
  switch (mode) {
    case 'token-mean':
      return 1 / globalTokens;
    case 'seq-mean-token-sum':
      return 1 / globalSeqs;
    case 'seq-mean-token-mean':
      return 1 / ((tokensOfRow + 1e-8) * globalSeqs);
    default:
      return 1 / lossScale;
  }
}

/** Adds `v * w` to the weighted sum of metric `k`. */
function acc(sums: Map<string, [number, number]>, k: string, v: number, w: number): void {
  const e = sums.get(k) ?? [0, 0];
  e[0] += v * w;
  e[1] += w;
  sums.set(k, e);
}

/**
 * Runs one GRPO step on `taskIds` (one group of `rollout.n` samples each) with rollout seed
 * `mixSeed(config.seed, step)`.
 */
export async function grpoStep(
  ctx: GrpoStepContext,
  step: number,
  taskIds: readonly string[],
): Promise<GrpoStepResult> {
  const { policy, loop, config } = ctx;
  const g = config.grpo;
  const temperature = config.rollout.temperature;
  const timing: Record<string, number> = {};
  const t0 = performance.now();
  let t = t0;
  const lap = (name: string) => {
    const now = performance.now();
    timing[`timing_s/${name}`] = (now - t) / 1000;
    t = now;
  };

  // 1. rollout
  const records = await loop.rollout({ taskIds, n: config.rollout.n, seed: mixSeed(config.seed, 0x6e0, step) });
  const kept = records.filter((r) => !r.aborted);
  lap('gen');
  const metrics: Record<string, number> = rolloutMetrics(records, kept, timing['timing_s/gen']);
  if (ctx.afterRollout) Object.assign(metrics, await ctx.afterRollout());
  const seqs = kept.map(episodeSequence);
  const budget = g.microBatchTokens;
  let skipped = 0;

  if (kept.length > 0) {
    // 2. old log-probs (and the rollout/training mismatch)
    const old = await perSequenceLogProbs(policy, seqs, budget, temperature);
    let diff = 0;
    let diffN = 0;
    kept.forEach((r, i) => {
      if (!r.hasLogProbs) return;
      const P = r.promptIds.length;
      for (let j = 0; j < r.responseIds.length; j++) {
        if (r.responseMask[j] !== 1) continue;
        diff += Math.abs(r.logProbs[j] - old.logProbs[i][P + j - 1]);
        diffN++;
      }
    });
    if (diffN > 0) metrics['rollout/logprob_abs_diff'] = diff / diffN;
    lap('old_log_prob');

    // 3. reference log-probs
    let ref: Float32Array[] | null = null;
    if (g.klCoef > 0) {
      if (!ctx.reference) throw new Error('grpo.klCoef > 0 needs a reference policy');
      ref = (await perSequenceLogProbs(ctx.reference, seqs, budget, temperature)).logProbs;
      lap('ref');
    }

    // 4. advantages
    const rewards = Float32Array.from(kept, (r) => r.reward);
    const adv = computeAdvantages(rewards, groupIds(kept.map((r) => r.uid)), {
      estimator: g.estimator,
      normByStd: g.normByStd,
    });
    const scoredTokens = seqs.map((s) => s.lossMask.reduce((a, b) => a + b, 0) - (s.lossMask[0] ?? 0));
    let advTok = 0;
    let nTok = 0;
    kept.forEach((_, i) => {
      advTok += adv[i] * scoredTokens[i];
      nTok += scoredTokens[i];
    });
    metrics['critic/score/mean'] = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    metrics['critic/advantages/mean'] = nTok > 0 ? advTok / nTok : 0;
    metrics['critic/advantages/max'] = Math.max(...adv);
    metrics['critic/advantages/min'] = Math.min(...adv);
    lap('adv');

    // 5. actor update
    const sums = new Map<string, [number, number]>();
    const gradNorms: number[] = [];
    const lossScale = config.rollout.maxContextTokens;
    const lossOptions: PolicyLossOptions = {
      clipLow: g.clipLow,
      clipHigh: g.clipHigh,
      entropyCoef: g.entropyCoef,
      aggMode: g.aggMode,
      lossScale,
      ...(ref ? { klType: g.klType, klCoef: g.klCoef } : { klCoef: 0 }),
    };
    let updates = 0;
    for (let epoch = 0; epoch < g.ppoEpochs; epoch++) {
      const order = seededPermutation(seqs.length, mixSeed(config.seed, 0x9b0, step, epoch));
      const parts = Math.min(g.miniBatches, order.length);
      for (let m = 0; m < parts; m++) {
        const mini = order.slice(Math.floor((m * order.length) / parts), Math.floor(((m + 1) * order.length) / parts));
        const globalTokens = mini.reduce((a, i) => a + scoredTokens[i], 0);
        const globalSeqs = mini.filter((i) => scoredTokens[i] > 0).length;
        if (globalTokens === 0) continue;
        let pgLoss = 0;
        for (const mb of packInOrder(seqs, mini, budget)) {
          const rows = mb.indices.length;
          const L = Math.max(...mb.indices.map((i) => seqs[i].tokens.length));
          const pass = await policy.forward(mb.batch, { temperature });
          try {
            const lp = new Float32Array(rows * L);
            const oldLp = new Float32Array(rows * L);
            const refLp = ref ? new Float32Array(rows * L) : null;
            const mask = new Float32Array(rows * L);
            const ent = new Float32Array(rows * L);
            const advRows = new Float32Array(rows);
            mb.indices.forEach((s, r) => {
              const off = mb.batch.offsets[r];
              const n = seqs[s].tokens.length;
              advRows[r] = adv[s];
              for (let k = 0; k < n; k++) {
                if (mb.batch.targets[off + k] < 0) continue;
                const at = r * L + k;
                mask[at] = 1;
                lp[at] = pass.logProbs[off + k];
                oldLp[at] = old.logProbs[s][k];
                ent[at] = pass.entropy[off + k];
                if (refLp && ref) refLp[at] = ref[s][k];
              }
            });
            const res = policyLoss(
              {
                logProbs: lp,
                oldLogProbs: oldLp,
                advantages: advRows,
                responseMask: mask,
                entropy: ent,
                ...(refLp ? { refLogProbs: refLp } : {}),
              },
              { batch: rows, responseLen: L },
              { ...lossOptions, globalTokenCount: globalTokens, globalSeqCount: Math.max(1, globalSeqs) },
            );
            pgLoss += res.metrics['actor/pg_loss'];
            const T = mb.batch.tokens.length;
            const dLogProbs = new Float32Array(T);
            const dEntropy = g.entropyCoef !== 0 ? new Float32Array(T) : null;
            let mbTokens = 0;
            mb.indices.forEach((s, r) => {
              const off = mb.batch.offsets[r];
              const n = seqs[s].tokens.length;
              const w = aggWeight(g.aggMode, scoredTokens[s], globalTokens, Math.max(1, globalSeqs), lossScale);
              for (let k = 0; k < n; k++) {
                if (mask[r * L + k] === 0) continue;
                dLogProbs[off + k] = res.dLogProbs[r * L + k];
                if (dEntropy) dEntropy[off + k] = -g.entropyCoef * w;
                mbTokens++;
              }
            });
            for (const key of [
              'actor/pg_clipfrac',
              'actor/pg_clipfrac_lower',
              'actor/ppo_kl',
              'actor/kl_loss',
              'actor/entropy',
            ] as const) {
              const v = res.metrics[key];
              if (v !== undefined) acc(sums, key, v, mbTokens);
            }
            await pass.backward({ dLogProbs, dEntropy });
          } finally {
            pass.release();
          }
        }
        const opt = await policy.optimizerStep({
          lr: g.lr,
          weightDecay: g.weightDecay,
          maxGradNorm: g.maxGradNorm,
          skipNonFinite: true,
        });
        updates++;
        if (!opt.applied) skipped++;
        else gradNorms.push(opt.gradNorm);
        acc(sums, 'actor/pg_loss', pgLoss, 1);
      }
    }
    for (const [k, [s, w]] of sums) metrics[k] = w > 0 ? s / w : 0;
    metrics['actor/grad_norm'] = gradNorms.length > 0 ? gradNorms.reduce((a, b) => a + b, 0) / gradNorms.length : 0;
    metrics['actor/updates'] = updates;
    metrics['actor/lr'] = g.lr;
    lap('update_actor');
  } else {
    metrics['critic/score/mean'] = 0;
  }
  metrics['actor/skipped_steps'] = skipped;
  Object.assign(metrics, timing);
  metrics['timing_s/step'] = (performance.now() - t0) / 1000;
  return { metrics, records, skipped };
}
