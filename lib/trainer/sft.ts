/**
 * SFT warm start: the expert agent's demonstrations through the agent loop (token sequences
 * with response masks), then cross-entropy on the assistant tokens with AdamW.
 *
 * A pretrained model learns from the same demonstrations in its own chat format
 * ({@link renderDemonstration}): each conversation is rendered token-in/token-out exactly as the
 * agent loop assembles an episode of that model — the prompt, each assistant turn as the tokens
 * the model would sample for it (the format's rendering of the message up to and including its
 * stop token; loss mask 1), and after each turn the environment's messages as the format
 * appends them (`renderAppend`; mask 0).
 * @module
 */
import type { AnyEnv } from '../gym/index.js';
import {
  ChatTemplateError,
  type ChatAssistantMessage,
  type ChatFormat,
  type ChatMessage,
  type ChatTemplate,
  type ToolSchema,
} from '../chat/index.js';
import { packSequences, type PackedSequences, type TransformerPolicy } from '../model/index.js';
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
  return {
    tokens: [...r.promptIds, ...r.responseIds],
    lossMask: [...new Array<number>(r.promptIds.length).fill(0), ...r.responseMask],
  };
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
  chat: ChatTemplate;
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
export async function collectDemonstrations(
  o: DemonstrationOptions,
): Promise<{ kept: EpisodeRecord[]; all: EpisodeRecord[] }> {
  if (o.count === 0 || o.taskIds.length === 0) return { kept: [], all: [] };
  const loop = new AgentLoop({
    policy: new ExpertTokenPolicy(o.chat, { tasks: o.world }),
    chat: o.chat,
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

/** The tool calls of a message as comparable values (name, parsed arguments). */
function callsOf(m: ChatAssistantMessage): { name: string; args: unknown }[] {
  return (m.tool_calls ?? []).map((c) => {
    let args: unknown = c.function.arguments;
    try {
      args = JSON.parse(c.function.arguments);
    } catch {
      // kept as text
    }
    return { name: c.function.name, args };
  });
}

/**
 * The tokens a model of `format` samples for `message` after the conversation `history` (which
 * ends where the generation prompt goes), its stop token included: the format's
 * `renderAssistantBody` when it has one (the built-in template, harmony), else the rendering of
 * `[...history, message]` minus that of `history` with the generation prompt, up to and
 * including the first stop token (a Jinja template such as Qwen3's, which renders the turn
 * being sampled as the last message). The tokens must parse back to the message (content, tool
 * names and arguments), or a {@link ChatTemplateError} says why.
 * @returns the tokens and the message parsed back from them (tool call ids `<idPrefix>0`, …),
 *   which is what the agent loop keeps in the conversation after such a turn.
 */
export function assistantTurnTokens(
  format: ChatFormat,
  history: readonly ChatMessage[],
  message: ChatAssistantMessage,
  tools: readonly ToolSchema[],
  idPrefix = 'call_',
): { tokens: number[]; message: ChatAssistantMessage } {
  let tokens: number[];
  if (typeof format.renderAssistantBody === 'function') tokens = format.renderAssistantBody(message);
  else {
    const prompt = format.renderTokens(history, { tools, addGenerationPrompt: true });
    const full = format.renderTokens([...history, message], { tools });
    let same = 0;
    while (same < prompt.length && same < full.length && prompt[same] === full[same]) same++;
    if (same < prompt.length)
      throw new ChatTemplateError(
        'the chat format renders an assistant turn that does not follow its generation prompt (no token-in/token-out rendering of the reply)',
      );
    const rest = full.slice(prompt.length);
    const stop = rest.findIndex((t) => format.stopTokens.includes(t));
    if (stop < 0) throw new ChatTemplateError('the chat format renders an assistant turn without a stop token');
    tokens = rest.slice(0, stop + 1);
  }
  const back = format.parseAssistant(tokens, idPrefix);
  if (!back.ok) throw new ChatTemplateError(`the rendering of an assistant turn does not parse back: ${back.error}`);
  const want = { content: (message.content ?? '').trim(), calls: callsOf(message) };
  const got = { content: (back.message.content ?? '').trim(), calls: callsOf(back.message) };
  if (JSON.stringify(got) !== JSON.stringify(want))
    throw new ChatTemplateError(
      `the rendering of an assistant turn parses back to another message: ${JSON.stringify(got)} instead of ${JSON.stringify(want)}`,
    );
  return { tokens, message: back.message };
}

/**
 * A finished episode's conversation (an episode record's `messages`: the system message, the
 * first observation — which may hold the environment's own assistant greeting —, then each of
 * the `numTurns` assistant turns followed by its observation) as the token sequence an episode of
 * a model of `format` holds (see the module description): the prompt (system message with
 * `tools`, then the first observation and the generation prompt), each assistant turn
 * ({@link assistantTurnTokens}, loss mask 1), and between turns the next observation
 * (`renderAppend` after the conversation as the agent loop keeps it: each turn as parsed back
 * from its tokens, tool call ids `call_<turn>_<k>`; mask 0); what follows the last turn is not
 * part of the episode.
 */
export function renderDemonstration(
  format: ChatFormat,
  episode: Pick<EpisodeRecord, 'messages' | 'numTurns'>,
  tools: readonly ToolSchema[],
): MaskedSequence {
  const messages = episode.messages as ChatMessage[];
  if (messages[0]?.role !== 'system') throw new ChatTemplateError('a demonstration starts with its system message');
  // the model's turns are the last numTurns assistant messages (observations hold none after the first)
  const turnAt = messages.map((m, i) => (m.role === 'assistant' ? i : -1)).filter((i) => i >= 0);
  const turns = turnAt.slice(turnAt.length - episode.numTurns);
  if (episode.numTurns < 1 || turns.length !== episode.numTurns)
    throw new ChatTemplateError(`a demonstration has ${turns.length} assistant messages for ${episode.numTurns} turns`);
  const system = messages[0];
  const tokens = [
    ...format.renderTokens([system], { tools }),
    ...format.renderAppend([system], messages.slice(1, turns[0]), { tools }),
  ];
  const lossMask = new Array<number>(tokens.length).fill(0);
  const history: ChatMessage[] = messages.slice(0, turns[0]);
  turns.forEach((at, k) => {
    const turn = assistantTurnTokens(format, history, messages[at] as ChatAssistantMessage, tools, `call_${k}_`);
    tokens.push(...turn.tokens);
    for (let j = 0; j < turn.tokens.length; j++) lossMask.push(1);
    history.push(turn.message);
    if (k === turns.length - 1) return;
    const observation = messages.slice(at + 1, turns[k + 1]);
    const obs = format.renderAppend(history, observation, { tools });
    history.push(...observation);
    tokens.push(...obs);
    for (let j = 0; j < obs.length; j++) lossMask.push(0);
  });
  return { tokens, lossMask };
}

/** What {@link renderDemonstrations} returns. */
export interface RenderedDemonstrations {
  /** The sequences of the demonstrations that fit, in order. */
  sequences: MaskedSequence[];
  /** Demonstrations longer than `maxTokens` in this format (dropped). */
  tooLong: number;
}

/**
 * The kept demonstrations (episode records of the expert, collected with any template) in
 * `format` ({@link renderDemonstration}, tools rendered when `renderTools`), keeping those of at
 * most `maxTokens` tokens.
 */
export function renderDemonstrations(
  format: ChatFormat,
  records: readonly EpisodeRecord[],
  options: { renderTools: boolean; maxTokens: number },
): RenderedDemonstrations {
  const sequences: MaskedSequence[] = [];
  let tooLong = 0;
  for (const r of records) {
    const seq = renderDemonstration(format, r, options.renderTools ? (r.tools as ToolSchema[]) : []);
    if (seq.tokens.length > options.maxTokens) tooLong++;
    else sequences.push(seq);
  }
  return { sequences, tooLong };
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
export function packInOrder(
  seqs: readonly MaskedSequence[],
  order: readonly number[],
  maxTokens: number,
): { batch: PackedSequences; indices: number[] }[] {
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
    if (n > maxTokens)
      throw new RangeError(`a sequence of ${n} tokens exceeds the micro-batch budget of ${maxTokens} tokens`);
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
export async function runInductionWarmup(
  policy: TransformerPolicy,
  sft: TrainConfig['sft'],
  seed: number,
  onStep?: (step: number, loss: number) => void,
): Promise<number[]> {
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
      seqs.push({
        tokens: [bos, ...a, ...a],
        lossMask: Array.from({ length: perSeq }, (_, i) => (i > span + 1 ? 1 : 0)),
      });
    }
    // linear warm-up, then the constant peak rate (the circuit forms late; a decay would slow it)
    const lr = sft.warmup > 0 && step <= sft.warmup ? (sft.lr * step) / sft.warmup : sft.lr;
    const r = await policy.trainStep(
      [packSequences(seqs)],
      { kind: 'cross-entropy' },
      { optimizer: { lr, weightDecay: sft.weightDecay, maxGradNorm: 1 } },
    );
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
  /** Mean cross-entropy over the step's observation tokens (0 when `sft.observationWeight` is 0). */
  observationLoss: number;
}

/** Learning rate of SFT step `step` (1-based): linear warm-up, then cosine down to 10% of the peak. */
export function sftLearningRate(step: number, sft: TrainConfig['sft']): number {
  if (sft.warmup > 0 && step <= sft.warmup) return (sft.lr * step) / sft.warmup;
  const span = Math.max(1, sft.steps - sft.warmup);
  const t = Math.min(1, (step - sft.warmup) / span);
  return sft.lr * (0.1 + 0.9 * 0.5 * (1 + Math.cos(Math.PI * t)));
}

/**
 * Cross-entropy targets and weights of a packed SFT step: every assistant token weighs 1 and,
 * with `observationWeight` > 0, every token after the first assistant token that is not the
 * assistant's (user messages and tool results) weighs `observationWeight`; the prompt before
 * the first assistant token is never a target. A target that continues a copy (its pair with
 * the token before it occurred earlier in the sequence: {@link copyTargets}) weighs
 * `copyWeight` times that. The weights are divided by their sum (a weighted mean). `assistant`
 * marks the positions whose target is an assistant token.
 */
export function observationWeightedStep(
  seqs: readonly MaskedSequence[],
  observationWeight: number,
  copyWeight = 1,
): { batch: PackedSequences; weights: Float32Array; assistant: Uint8Array } {
  if (!Number.isFinite(observationWeight) || observationWeight < 0)
    throw new RangeError(`sft.observationWeight must be a finite number >= 0, got ${observationWeight}`);
  if (!Number.isFinite(copyWeight) || copyWeight < 1)
    throw new RangeError(`sft.copyWeight must be a finite number >= 1, got ${copyWeight}`);
  const widened: MaskedSequence[] = seqs.map((s) => {
    const first = s.lossMask.indexOf(1);
    return {
      tokens: s.tokens,
      lossMask: s.lossMask.map((m, i) => (m !== 0 || (observationWeight > 0 && first >= 0 && i > first) ? 1 : 0)),
    };
  });
  const batch = packSequences(widened);
  const total = batch.tokens.length;
  const weights = new Float32Array(total);
  const assistant = new Uint8Array(total);
  let at = 0;
  let sum = 0;
  for (const [k, s] of seqs.entries()) {
    const copies = copyWeight !== 1 ? copyTargets(s.tokens) : null;
    for (let t = 0; t + 1 < s.tokens.length; t++) {
      if (widened[k].lossMask[t + 1] === 0) continue;
      const own = s.lossMask[t + 1] !== 0;
      weights[at + t] = (own ? 1 : observationWeight) * (copies && copies[t + 1] ? copyWeight : 1);
      assistant[at + t] = own ? 1 : 0;
      sum += weights[at + t];
    }
    at += s.tokens.length;
  }
  if (sum > 0) for (let t = 0; t < total; t++) weights[t] /= sum;
  return { batch, weights, assistant };
}

/**
 * Which tokens continue a copy: `out[i]` is 1 when `i >= 1` and the pair (`tokens[i - 1]`,
 * `tokens[i]`) also occurs at some earlier position `j < i` (`tokens[j - 1]`, `tokens[j]`) —
 * predicting `tokens[i]` from `tokens[i - 1]` is then what an induction (copy) head does.
 */
export function copyTargets(tokens: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(tokens.length);
  const seen = new Set<number>();
  for (let i = 1; i < tokens.length; i++) {
    const pair = tokens[i - 1] * 2 ** 26 + tokens[i];
    if (seen.has(pair)) out[i] = 1;
    else seen.add(pair);
  }
  return out;
}

/**
 * SFT on the demonstrations (episode records, or token sequences with loss masks such as
 * {@link renderDemonstration} makes): `sft.steps` AdamW steps, each on one packed micro-batch of
 * up to `sft.tokensPerStep` tokens taken in a seeded shuffled order (reshuffled every pass),
 * loss the mean cross-entropy of the assistant tokens — or, with `sft.observationWeight` > 0,
 * the weighted mean that also predicts the observations ({@link observationWeightedStep}). The
 * reported loss is always the mean over the assistant's tokens.
 */
export async function runSft(
  policy: TransformerPolicy,
  demos: readonly EpisodeRecord[] | readonly MaskedSequence[],
  sft: TrainConfig['sft'],
  seed: number,
  onStep?: (info: SftStepInfo) => void,
): Promise<SftStepInfo[]> {
  const infos: SftStepInfo[] = [];
  if (demos.length === 0 || sft.steps === 0) return infos;
  const seqs = demos.map((d) => ('lossMask' in d ? d : episodeSequence(d)));
  let queue: { batch: PackedSequences; indices: number[] }[] = [];
  let pass = 0;
  for (let step = 1; step <= sft.steps; step++) {
    if (queue.length === 0)
      queue = packInOrder(seqs, seededPermutation(seqs.length, mixSeed(seed, 0x5f7, pass++)), sft.tokensPerStep);
    const { batch, indices } = queue.shift() as { batch: PackedSequences; indices: number[] };
    const lr = sftLearningRate(step, sft);
    const optimizer = { lr, weightDecay: sft.weightDecay, maxGradNorm: 1 };
    let info: SftStepInfo;
    if (sft.observationWeight > 0 || sft.copyWeight !== 1) {
      const w = observationWeightedStep(
        indices.map((i) => seqs[i]),
        sft.observationWeight,
        sft.copyWeight,
      );
      const fb = await policy.forwardBackward(w.batch, { kind: 'cross-entropy', weights: w.weights });
      const opt = await policy.optimizerStep(optimizer);
      let own = 0;
      let count = 0;
      let other = 0;
      for (let t = 0; t < w.weights.length; t++) {
        if (w.assistant[t]) {
          own -= fb.logProbs[t];
          count++;
        } else if (w.weights[t] > 0) other -= fb.logProbs[t];
      }
      info = {
        step,
        loss: count ? own / count : 0,
        gradNorm: opt.gradNorm,
        lr,
        tokens: count,
        observationLoss: fb.targets > count ? other / (fb.targets - count) : 0,
      };
    } else {
      const r = await policy.trainStep([batch], { kind: 'cross-entropy' }, { optimizer });
      info = { step, loss: r.loss, gradNorm: r.optimizer.gradNorm, lr, tokens: r.targets, observationLoss: 0 };
    }
    infos.push(info);
    onStep?.(info);
  }
  return infos;
}
