/**
 * One whole training step of the built-in transformer (forward, backward, AdamW) on one
 * sequence, measured through the tracked allocator: the model-train and memory benchmarks
 * share it. Also the model configs the benchmarks name (`tiny`, `small`, `gpt-oss`).
 */
import { performance } from 'node:perf_hooks';

import { type ModelConfig, Transformer, isSlidingLayer, modelConfig, packSequences } from '../../lib/model/index.js';
import { isOutOfMemoryError, memory } from '../../lib/native/index.js';

/** Model configs the benchmarks accept by name. */
export type BenchModel = 'tiny' | 'small' | 'gpt-oss';

/** The names of {@link BenchModel}. */
export const BENCH_MODELS: readonly BenchModel[] = ['tiny', 'small', 'gpt-oss'];

/**
 * The config of a named benchmark model with room for `context` positions. `gpt-oss` has the
 * attention and width of gpt-oss-20b (width 2880, 64 query heads, 8 kv heads, headDim 64,
 * sliding window 128 on the even layers, biases, dense SwiGLU of 2880 — one expert's size)
 * with `layers` blocks (default 2: one sliding, one full) and an 8192-token vocabulary, so that
 * the parameters and AdamW state (150 M parameters, 2.4 GB) leave room for activations.
 */
export function benchModelConfig(name: BenchModel, context: number, layers?: number): ModelConfig {
  // The context must hold the sliding window too (128 at most in these configs).
  const over: Partial<ModelConfig> = { context: Math.max(context, 128) };
  if (layers !== undefined) over.layers = layers;
  if (name === 'gpt-oss') {
    return modelConfig('small', {
      layers: 2,
      width: 2880,
      heads: 64,
      kvHeads: 8,
      headDim: 64,
      window: 128,
      vocab: 8192,
      ffn: 2880,
      ropeTheta: 150000,
      bias: true,
      ...over,
    });
  }
  return modelConfig(name, over);
}

/**
 * Estimated GFLOP of one training step of `seqLen` tokens: 6·(parameters − the embedding
 * table, a lookup)·T for the matrices, plus 14·headDim per (query, key) pair and head for the
 * attention (eager computes every score; fused only the visible ones).
 */
export function stepGflop(config: ModelConfig, parameters: number, seqLen: number, impl: 'fused' | 'eager'): number {
  let pairs = 0;
  for (let l = 0; l < config.layers; l++) {
    const w = impl === 'fused' && isSlidingLayer(config, l) ? config.window : 0;
    pairs += w > 0 ? seqLen * Math.min(w, seqLen) : impl === 'eager' ? seqLen * seqLen : (seqLen * (seqLen + 1)) / 2;
  }
  return (6 * (parameters - config.vocab * config.width) * seqLen + 14 * config.headDim * config.heads * pairs) / 1e9;
}

/** The outcome of one measured training step. */
export interface StepMeasurement {
  /** Peak tracked bytes above the parameters, gradients and AdamW moments (null = out of memory). */
  activationPeakBytes: number | null;
  /** Wall time of the step in ms (null = out of memory). */
  ms: number | null;
  /** The out-of-memory message. */
  error?: string;
  /** When out of memory: bytes held plus the failed request, above the model state (a measured lower bound of the need). */
  oomNeedBytes?: number;
}

/** Random tokens and the gradient of a mean-log-prob loss for one sequence. */
export function stepBatch(config: ModelConfig, seqLen: number, random: () => number) {
  const batch = packSequences([{ tokens: Array.from({ length: seqLen }, () => Math.floor(random() * config.vocab)) }]);
  const count = batch.targets.filter((x) => x >= 0).length;
  const dLogProbs = Float32Array.from(batch.targets, (x) => (x >= 0 ? -1 / count : 0));
  return { batch, dLogProbs };
}

/**
 * Runs forward, backward and AdamW of `model` on one sequence with `impl` attention, under a
 * tracked limit of `limitBytes` in total; returns the peak above what was allocated before
 * (the model state) and the time, or the out-of-memory error.
 */
export function measureTrainStep(
  model: Transformer,
  seqLen: number,
  impl: 'fused' | 'eager',
  limitBytes: number,
  random: () => number,
): StepMeasurement {
  const { batch, dLogProbs } = stepBatch(model.config, seqLen, random);
  const before = memory.currentBytes();
  memory.resetPeak();
  const t0 = performance.now();
  try {
    memory.withLimit(limitBytes, () => {
      const f = model.forward(batch, { impl });
      try {
        f.backward({ dLogProbs });
      } finally {
        f.release();
      }
      model.store.adamwStep({ lr: 1e-5, maxGradNorm: 1 });
      model.store.zeroGrad();
    });
    return { activationPeakBytes: memory.peakBytes() - before, ms: performance.now() - t0 };
  } catch (e) {
    if (!isOutOfMemoryError(e)) throw e;
    model.store.zeroGrad();
    const out: StepMeasurement = { activationPeakBytes: null, ms: null, error: e.message };
    if (typeof e.currentBytes === 'number' && typeof e.requestedBytes === 'number')
      out.oomNeedBytes = e.currentBytes + e.requestedBytes - before;
    return out;
  }
}
