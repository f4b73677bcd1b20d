/**
 * The model layer's interfaces: what a language model (the built-in transformer, a pretrained
 * one) implements, and the one session vocabulary the model and rollout layers share. Two
 * levels:
 *
 * - {@link GenerativeModel}: token in, token out. A session holds a conversation's context (a
 *   KV cache for the built-in model); the caller appends tokens verbatim and samples the model's
 *   tokens, which stay in the context exactly as sampled. Many sessions sample concurrently; an
 *   implementation batches them (the built-in model runs every session that is waiting in one
 *   batched forward per decoding step). {@link TokenSession} (append, {@link SampleOptions} in,
 *   {@link TokenSampleResult} out) is what every session offers — the rollout layer's policies'
 *   too (its `TokenPolicy`); a model's {@link ModelSession} adds prefill and fork and returns
 *   typed arrays ({@link SampleResult}). A GenerativeModel is a rollout `TokenPolicy` as it
 *   is: the agent loop passes the episode's context, whose `seed` seeds the session.
 * - {@link TrainablePolicy}: a GenerativeModel whose log-probabilities on packed micro-batches
 *   can be computed, differentiated and stepped by an optimiser (the built-in transformer).
 *
 * Messages in, an assistant message out is the rollout layer's `ChatPolicy`
 * (`ModelChatPolicy` puts a chat format over any GenerativeModel to get one).
 *
 * Conventions: token ids are integers in `[0, vocabSize)`; a sampled token's log-probability
 * is under the tempered distribution `softmax(logits / temperature)` before top-k/top-p
 * truncation (at temperature 0, greedy decoding, it is under `softmax(logits)`), which is what
 * a trainer recomputes with the same temperature (VERL divides the logits by the rollout
 * temperature when it computes old log-probs).
 * @module
 */
import type { AdamWStepOptions, AdamWStepResult } from './native.js';

/** How a generation ends. */
export type FinishReason =
  /** A stop token was sampled (it is the last token of the result). */
  | 'stop'
  /** `maxTokens` tokens were sampled. */
  | 'length'
  /** The context is full. */
  | 'context';

/** Which log-probs a generation returns (see {@link SampleOptions.logprobsMode}). */
export type LogprobsMode = 'tempered' | 'raw' | 'processed';

/** Sampling parameters of one generation. */
export interface SampleOptions {
  /** Tokens to sample at most (>= 0). */
  maxTokens: number;
  /** 0: greedy (argmax, lowest id on ties); > 0: sample from softmax(logits / temperature). Default 1. */
  temperature?: number;
  /** Nucleus sampling: keep the smallest set of most likely tokens whose probability reaches topP (default 1: off). */
  topP?: number;
  /** Keep only the topK most likely tokens, applied before topP (default 0: off). */
  topK?: number;
  /** vLLM's min_p: after the temperature, drop the tokens less likely than minP times the most likely one (default 0: off). */
  minP?: number;
  /** vLLM's repetition_penalty over the whole context, before the temperature (default 1: off). */
  repetitionPenalty?: number;
  /** vLLM's presence_penalty over this generation's tokens, in [-2, 2] (default 0: off). */
  presencePenalty?: number;
  /** vLLM's frequency_penalty over this generation's tokens, in [-2, 2] (default 0: off). */
  frequencyPenalty?: number;
  /**
   * Which log-probs the result holds: `tempered` (default: under softmax(penalised logits / T),
   * before min_p/top-k/top-p; T = 0: softmax(penalised logits)), `raw` (vLLM's raw_logprobs:
   * log_softmax of the model's logits) or `processed` (vLLM's processed_logprobs: after the
   * penalties, the temperature and min_p/top-k/top-p, renormalised over the kept tokens).
   */
  logprobsMode?: LogprobsMode;
  /** Token ids that end the generation; the stop token is included in the result. */
  stop?: readonly number[];
  /**
   * Called with each run of newly sampled tokens and their log-probs, in order, before the
   * result resolves (for streaming). A policy calls it as it samples, or not at all; the
   * result holds every token either way. An exception thrown by it fails the sample.
   */
  onTokens?: (tokens: Int32Array, logProbs: Float32Array) => void;
  /**
   * Seed of this request (the agent loop derives one per turn from the episode's seed). A
   * deterministic session returns the same tokens for the same context, options and seed,
   * whatever else is sampled at the same time. A model's session ignores it: its own random
   * stream, seeded when the session was created, already continues deterministically from turn
   * to turn.
   */
  seed?: number;
}

/** What one generation produced, as every session reports it. */
export interface TokenSampleResult {
  /** The sampled token ids (the stop token included when `finishReason` is `stop`); now part of the session's context. */
  tokens: ArrayLike<number>;
  /** Log-probability of each sampled token (see the module notes for the distribution), when the session computes it. */
  logProbs?: ArrayLike<number>;
  /** A stop token was sampled, `maxTokens` were sampled (`length`), or the context is full (`context`, a length cut too). */
  finishReason: FinishReason;
}

/** What one generation of a model's session produced: typed arrays, log-probs always. */
export interface SampleResult extends TokenSampleResult {
  /** The sampled tokens (they are now part of the session's context). */
  tokens: Int32Array;
  /** Log-probability of each sampled token (see the module notes for the distribution). */
  logProbs: Float32Array;
}

/** Options of {@link GenerativeModel.createSession}. */
export interface SessionOptions {
  /**
   * Seed of the session's own random stream: the same seed, context and options give the same
   * tokens whatever other sessions run at the same time. Default: derived from the policy's
   * sampler state (deterministic in the order sessions are created).
   */
  seed?: number;
}

/**
 * One conversation's context (one episode's, in the agent loop): what every session offers,
 * the model layer's and the rollout layer's policies' alike. `append` and `sample` may be
 * interleaved freely; one `sample` at a time per session.
 */
export interface TokenSession {
  /** Tokens in the context (appended and sampled). */
  readonly length: number;
  /** Adds tokens to the context (prompt, environment/user/tool turns, generation prompts). */
  append(tokens: ArrayLike<number>): void;
  /** Samples up to `options.maxTokens` tokens after the current context; they are part of the context afterwards. */
  sample(options: SampleOptions): Promise<TokenSampleResult>;
  /** Frees the context (a KV cache); further use throws. Idempotent. */
  dispose(): void;
}

/** A model's session: a {@link TokenSession} with typed results, prefill and fork (one `sample` or `prefill` at a time). */
export interface ModelSession extends TokenSession {
  /** Samples up to `options.maxTokens` tokens after the current context. */
  sample(options: SampleOptions): Promise<SampleResult>;
  /** Processes the appended tokens now (optional: `sample` does it anyway). */
  prefill?(): Promise<void>;
  /** An independent copy of the context with its own seed (e.g. n samples after one prompt). */
  fork?(options?: SessionOptions): ModelSession;
}

/** One request of {@link GenerativeModel.generate}. */
export interface GenerateRequest extends SampleOptions {
  /** The context to continue. */
  prompt: ArrayLike<number>;
  /** Seed of this request's random stream (see {@link SessionOptions.seed}). */
  seed?: number;
}

/** A token-in, token-out language model with per-conversation sessions. */
export interface GenerativeModel {
  /** Size of the vocabulary (token ids are below it). */
  readonly vocabSize: number;
  /** Maximum tokens in a session's context. */
  readonly contextLength: number;
  /** A new, empty session. */
  createSession(options?: SessionOptions): ModelSession;
  /** Continues each prompt once (batched); results in request order. */
  generate(requests: readonly GenerateRequest[]): Promise<SampleResult[]>;
}

/**
 * A packed micro-batch: T tokens of one or more documents laid end to end (attention never
 * crosses documents). Position t predicts `targets[t]` (usually `tokens[t + 1]` of the same
 * document, or -1 where there is nothing to score); `logProbs[t]` is the log-probability of
 * `targets[t]` given the document's tokens up to t.
 */
export interface PackedBatch {
  tokens: Int32Array;
  /** Token to score at each position, -1 for none (its log-prob and gradient are 0). Default all -1. */
  targets?: Int32Array | null;
  /** Position of each token in its document (RoPE). Default: counted from 0 at each document start. */
  positions?: Int32Array | null;
  /** Document of each token; consecutive runs of one id form a document. Default: one document. */
  documentIds?: Int32Array | null;
}

/** Options of a training-time forward. */
export interface LogProbOptions {
  /** Log-probs and entropies of softmax(logits / temperature) (default 1). */
  temperature?: number;
  /** Attention implementation: `'fused'` (default, memory linear in length) or `'eager'`. */
  impl?: 'fused' | 'eager';
  /**
   * What a training forward keeps for its backward: `'none'` (default) every layer's
   * activations, `'layers'` only each layer's input, the backward recomputing the layer
   * (activation checkpointing: gradients bit-identical, one more forward of the layers).
   */
  activationCheckpointing?: ActivationCheckpointing;
  /**
   * Rows of logits the LM head computes at a time (default: automatic, at most 256 MiB of
   * logits per chunk). The forward keeps per-token log-probs, entropies and log-sum-exps; a
   * backward over more than one chunk recomputes each chunk's logits, so no [T, vocab] buffer
   * exists for a long batch. On the CPU a multiple of 384 gives results bit-identical to one chunk.
   */
  lmHeadChunk?: number;
}

/** `'none'`: keep every layer's activations for the backward; `'layers'`: keep each layer's input and recompute the layer. */
export type ActivationCheckpointing = 'none' | 'layers';

/** Per-token log-probabilities of the targets and entropies of the predicted distributions. */
export interface LogProbResult {
  /** [T], 0 where the target is -1. */
  logProbs: Float32Array;
  /** [T], entropy of softmax(logits / temperature) at every position. */
  entropy: Float32Array;
}

/** Gradients of a scalar loss with respect to the per-token log-probs and entropies. */
export interface TokenGradients {
  /** d loss / d logProbs[t] (rows with target -1 are ignored). */
  dLogProbs?: Float32Array | null;
  /** d loss / d entropy[t]. */
  dEntropy?: Float32Array | null;
}

/** A forward that kept its activations: call `backward` once (or `release`). */
export interface ForwardPass extends LogProbResult {
  /** Accumulates parameter gradients of `sum dLogProbs·logProbs + dEntropy·entropy`, then frees the activations. */
  backward(grads: TokenGradients): Promise<void>;
  /** Frees the activations without a backward. Idempotent. */
  release(): void;
}

/**
 * The loss of {@link TrainablePolicy.forwardBackward}: cross-entropy on the targets with
 * optional per-token weights (`loss = -sum_t w_t logp_t`, default `w_t = 1 / #targets`: the
 * mean), fixed per-token coefficients, or a function of the forward's log-probs that returns
 * the gradients (e.g. a GRPO loss).
 */
export type TokenLoss =
  | { kind: 'cross-entropy'; weights?: Float32Array | null }
  | ({ kind: 'coefficients' } & TokenGradients)
  | {
      kind: 'custom';
      fn: (
        forward: LogProbResult,
      ) => (TokenGradients & { loss?: number }) | Promise<TokenGradients & { loss?: number }>;
    };

/** What {@link TrainablePolicy.forwardBackward} returns. */
export interface ForwardBackwardResult extends LogProbResult {
  /** The loss value (cross-entropy: `-sum w logp`; coefficients: `sum dLogProbs·logp + dEntropy·H`; custom: what fn returned, else NaN). */
  loss: number;
  /** Positions with a target. */
  targets: number;
}

/** Options of an optimiser step. */
export interface OptimizerStepOptions extends AdamWStepOptions {
  /** Zero the gradients after the step (default true). */
  zeroGrad?: boolean;
}

/** Options of {@link TrainablePolicy.trainStep}. */
export interface TrainStepOptions extends LogProbOptions {
  /** The optimiser step after the micro-batches (gradients are zeroed after it unless `zeroGrad: false`). */
  optimizer: OptimizerStepOptions;
}

/** What {@link TrainablePolicy.trainStep} did. */
export interface TrainStepResult {
  /** Sum of the micro-batches' losses (with the default cross-entropy weights: sum of their means). */
  loss: number;
  /** Positions with a target over all micro-batches. */
  targets: number;
  /** The optimiser step (gradient norm before clipping, whether it was applied). */
  optimizer: AdamWStepResult;
}

/** A policy that can be trained on packed micro-batches. */
export interface TrainablePolicy extends GenerativeModel {
  /** Log-probs and entropies without keeping activations (old / reference log-probs). */
  logProbs(batch: PackedBatch, options?: LogProbOptions): Promise<LogProbResult>;
  /** A forward that keeps its activations for one backward. */
  forward(batch: PackedBatch, options?: LogProbOptions): Promise<ForwardPass>;
  /** forward + loss + backward in one call; gradients accumulate until the optimiser step. */
  forwardBackward(batch: PackedBatch, loss: TokenLoss, options?: LogProbOptions): Promise<ForwardBackwardResult>;
  /**
   * AdamW over all parameters with global-norm clipping; zeroes the gradients afterwards by
   * default. Runs after the native work queued before it (forwards, backwards, generation).
   */
  optimizerStep(options: OptimizerStepOptions): Promise<AdamWStepResult>;
  /** Sets every gradient to zero (after the native work queued before it). */
  zeroGrad(): Promise<void>;
  /**
   * One optimiser step over several micro-batches: forwardBackward on each (gradients
   * accumulate; scale the loss, e.g. with cross-entropy weights, for a mean over all of them),
   * then optimizerStep.
   */
  trainStep(
    batches: readonly PackedBatch[],
    loss: TokenLoss | ((batch: PackedBatch, index: number) => TokenLoss),
    options: TrainStepOptions,
  ): Promise<TrainStepResult>;
}
