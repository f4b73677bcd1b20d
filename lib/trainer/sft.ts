/**
 * SFT warm start: the expert agent's demonstrations through the agent loop (token sequences
 * with response masks), then cross-entropy on the assistant tokens with AdamW.
 * @module
 */
import type { AnyEnv } from '../gym/index.js';
import { packSequences, type ChatTemplate, type PackedSequences, type TransformerPolicy } from '../model/index.js';
import { AgentLoop, ExpertTokenPolicy, mixSeed, type EpisodeRecord } from '../rollout/index.js';
import type { TauWorld } from '../gym/index.js';
import type { TrainConfig } from './config.js';
import type { PromptSettings } from './world.js';

/** A token sequence with its loss mask (1 on the model's tokens). */
export interface MaskedSequence {
  /** Prompt then response tokens. */
  tokens: number[];
  /** 0 on the prompt and observations, 1 on the assistant's tokens. */
  lossMask: number[];
}

/** The full sequence of an episode: prompt ‖ response, loss mask 0 ‖ response mask. */
export function episodeSequence(r: EpisodeRecord): MaskedSequence {
  return { tokens: [...r.promptIds, ...r.responseIds], lossMask: [...new Array<number>(r.promptIds.length).fill(0), ...r.responseMask] };
}

/** Where demonstrations come from. */
export interface DemonstrationOptions {
  /** The world (tasks carry the expert's scenario). */
  world: TauWorld;
  /** Task ids to demonstrate, cycled to `count` episodes. */
  taskIds: readonly string[];
  /** Episodes. */
  count: number;
  /** The chat template. */
  template: ChatTemplate;
  /** Environment factory. */
  env: () => AnyEnv | Promise<AnyEnv>;
  /** Prompt settings (as in training). */
  prompt: PromptSettings;
  /** Episode limits (as in training, so that demonstrations fit the model's context). */
  limits: { maxTurns: number; maxTokensPerTurn: number; maxContextTokens: number };
  /** Seed. */
  seed: number;
}

/** Runs the expert and keeps the successful, complete episodes (reward 1, not truncated nor aborted). */
export async function collectDemonstrations(o: DemonstrationOptions): Promise<{ kept: EpisodeRecord[]; all: EpisodeRecord[] }> {
  if (o.count === 0 || o.taskIds.length === 0) return { kept: [], all: [] };
  const loop = new AgentLoop({
    policy: new ExpertTokenPolicy(o.template, { tasks: o.world }),
    template: o.template,
    env: o.env,
    concurrency: 16,
    limits: o.limits,
    sanityCheck: 'strict',
    systemPrompt: o.prompt.systemPrompt,
    renderTools: o.prompt.renderTools,
    keepAborted: true,
  });
  try {
    const ids = Array.from({ length: o.count }, (_, i) => o.taskIds[i % o.taskIds.length]);
    const all = await loop.rollout({ taskIds: ids, n: 1, seed: o.seed, uidPrefix: 'demo' });
    return { kept: all.filter((r) => !r.aborted && !r.truncated && r.reward >= 1 - 1e-6), all };
  } finally {
    await loop.dispose();
  }
}

/** A seeded permutation of 0..n-1 (Fisher–Yates over a splitmix-style stream). */
export function seededPermutation(n: number, seed: number): number[] {
  const p = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = mixSeed(seed, i) % (i + 1);
    [p[i], p[j]] = [p[j], p[i]];
  }
  return p;
}

/**
 * Groups sequences (in the given order) into packed micro-batches of at most `maxTokens`
 * tokens each, first fit in order. A sequence longer than the budget throws.
 * @returns the packed batches and, for each, the indices of its sequences.
 */
export function packInOrder(seqs: readonly MaskedSequence[], order: readonly number[], maxTokens: number): { batch: PackedSequences; indices: number[] }[] {
  const out: { batch: PackedSequences; indices: number[] }[] = [];
  let cur: number[] = [];
  let size = 0;
  const flush = () => {
    if (cur.length === 0) return;
    out.push({ batch: packSequences(cur.map((i) => seqs[i])), indices: cur });
    cur = [];
    size = 0;
  };
  for (const i of order) {
    const n = seqs[i].tokens.length;
    if (n > maxTokens) throw new RangeError(`a sequence of ${n} tokens exceeds the micro-batch budget of ${maxTokens} tokens`);
    if (size + n > maxTokens) flush();
    cur.push(i);
    size += n;
  }
  flush();
  return out;
}

/**
 * The synthetic induction warm-up (see `TrainConfig['sft'].inductionSteps`): each step packs
 * sequences `[<|endoftext|>, a_1..a_s, a_1..a_s]` of random non-special tokens up to
 * `inductionTokens` tokens, with the loss on the repeated half; linear warm-up to `sft.lr`, then constant.
 * @returns the loss of each step.
 */
export async function runInductionWarmup(policy: TransformerPolicy, sft: TrainConfig['sft'], seed: number, onStep?: (step: number, loss: number) => void): Promise<number[]> {
  const tok = policy.tokenizer;
  const low = tok ? tok.specialTokens.length : 0;
  const high = policy.vocabSize;
  const bos = tok ? tok.specialId('<|endoftext|>') : 0;
  const span = sft.inductionSpan;
  const perSeq = 2 * span + 1;
  const losses: number[] = [];
  for (let step = 1; step <= sft.inductionSteps; step++) {
    const seqs: MaskedSequence[] = [];
    for (let used = 0, k = 0; used + perSeq <= Math.max(perSeq, sft.inductionTokens); used += perSeq, k++) {
      const a = Array.from({ length: span }, (_, i) => low + (mixSeed(seed, 0x1d0, step, k, i) % (high - low)));
      seqs.push({ tokens: [bos, ...a, ...a], lossMask: Array.from({ length: perSeq }, (_, i) => (i > span + 1 ? 1 : 0)) });
    }
    // linear warm-up, then the constant peak rate (the circuit forms late; a decay would slow it)
    const lr = sft.warmup > 0 && step <= sft.warmup ? (sft.lr * step) / sft.warmup : sft.lr;
    const r = await policy.trainStep([packSequences(seqs)], { kind: 'cross-entropy' }, { optimizer: { lr, weightDecay: sft.weightDecay, maxGradNorm: 1 } });
    losses.push(r.loss);
    onStep?.(step, r.loss);
  }
  return losses;
}

/** One SFT step's record. */
export interface SftStepInfo {
  /** Step (1-based). */
  step: number;
  /** Mean cross-entropy over the step's assistant tokens. */
  loss: number;
  /** Gradient norm before clipping. */
  gradNorm: number;
  /** Learning rate used. */
  lr: number;
  /** Assistant tokens in the step. */
  tokens: number;
}

/** Learning rate of SFT step `step` (1-based): linear warm-up, then cosine down to 10% of the peak. */
export function sftLearningRate(step: number, sft: TrainConfig['sft']): number {
  if (sft.warmup > 0 && step <= sft.warmup) return (sft.lr * step) / sft.warmup;
  const span = Math.max(1, sft.steps - sft.warmup);
  const t = Math.min(1, (step - sft.warmup) / span);
  return sft.lr * (0.1 + 0.9 * 0.5 * (1 + Math.cos(Math.PI * t)));
}

/**
 * SFT on the demonstrations: `sft.steps` AdamW steps, each on one packed micro-batch of up to
 * `sft.tokensPerStep` tokens taken in a seeded shuffled order (reshuffled every pass), loss
 * the mean cross-entropy of the assistant tokens.
 */
export async function runSft(
  policy: TransformerPolicy,
  demos: readonly EpisodeRecord[],
  sft: TrainConfig['sft'],
  seed: number,
  onStep?: (info: SftStepInfo) => void,
): Promise<SftStepInfo[]> {
  const infos: SftStepInfo[] = [];
  if (demos.length === 0 || sft.steps === 0) return infos;
  const seqs = demos.map(episodeSequence);
  let queue: { batch: PackedSequences; indices: number[] }[] = [];
  let pass = 0;
  for (let step = 1; step <= sft.steps; step++) {
    if (queue.length === 0) queue = packInOrder(seqs, seededPermutation(seqs.length, mixSeed(seed, 0x5f7, pass++)), sft.tokensPerStep);
    const { batch } = queue.shift() as { batch: PackedSequences };
    const lr = sftLearningRate(step, sft);
    const r = await policy.trainStep([batch], { kind: 'cross-entropy' }, { optimizer: { lr, weightDecay: sft.weightDecay, maxGradNorm: 1 } });
    const info = { step, loss: r.loss, gradNorm: r.optimizer.gradNorm, lr, tokens: r.targets };
    infos.push(info);
    onStep?.(info);
  }
  return infos;
}
