/**
 * The transformer over a {@link ParamStore}: training forward and backward on packed
 * micro-batches (native, multi-threaded, fused sink attention), KV-cache sessions and batched
 * generation runs. {@link TransformerPolicy} (transformer-policy.ts) puts the policy interfaces
 * of policy.ts on top; this class is the direct, lower-level API.
 *
 * Architecture (config is data, see {@link ModelConfig}): token embedding; per layer
 * RMSNorm → q, k, v projections (+ biases) → per-head q/k RMSNorm (`qkNorm`) → RoPE on q and k
 * (per-token positions; `ropeScaling`) → grouped-query attention with or without sinks (a
 * sliding window of `config.window` keys on the sliding layers, full causal attention on the
 * others, never across documents) → output projection → residual; RMSNorm → SwiGLU MLP or a
 * mixture of SwiGLU experts → residual; final RMSNorm → LM head (or the tied embedding). The
 * built-in policy and the pretrained families (gpt-oss, Qwen3, Qwen2, Llama) are configs of it.
 * Weight matrices may be stored as frozen bfloat16 and any parameter may be frozen
 * ({@link ParamStore.fromSpecs}); frozen parameters get no gradient.
 *
 * The model runs where its store lives: over a GPU store (`Transformer.create(config, seed,
 * { device: 'cuda' })`, or {@link Transformer.fromStore} with a store made on a GPU) training
 * and the batched inference steps run on that GPU, KV caches stay in its memory and only the
 * logits of the sampled rows come back to the host, where sampling is the CPU's.
 * @module
 */
import { type ModelConfig, type ModelConfigInput, validateModelConfig } from './config.js';
import type { DeviceRequest } from '../native/device.js';
import { ParamStore, type StoreDevice } from './param-store.js';
import type { LogProbOptions, LogProbResult, PackedBatch, TokenGradients } from './policy.js';
import {
  type NativeBatch,
  type NativeForwardOptions,
  type NativeJob,
  type NativeRunResult,
  type NativeSession,
  type NativeTrainState,
  type NativeTransformer,
  transformerAddon,
} from './transformer-native.js';

export type { NativeJob, NativeRunResult } from './transformer-native.js';

function int32(value: unknown, name: string): Int32Array {
  if (!(value instanceof Int32Array)) throw new TypeError(`${name} must be an Int32Array`);
  return value;
}

/**
 * Positions counted from 0 at the start of each document (a document is a run of equal ids in
 * `documentIds`; without ids the whole batch is one document).
 */
export function documentPositions(length: number, documentIds?: Int32Array | null): Int32Array {
  const pos = new Int32Array(length);
  let start = 0;
  for (let t = 0; t < length; t++) {
    if (documentIds && t > 0 && documentIds[t] !== documentIds[t - 1]) start = t;
    pos[t] = t - start;
  }
  return pos;
}

/** Checks a packed batch's arrays (types and lengths) and fills in default positions. */
export function resolveBatch(batch: PackedBatch): NativeBatch {
  if (typeof batch !== 'object' || batch === null) throw new TypeError('batch must be an object');
  const tokens = int32(batch.tokens, 'batch.tokens');
  const T = tokens.length;
  const opt = (v: Int32Array | null | undefined, name: string): Int32Array | null => {
    if (v === undefined || v === null) return null;
    const a = int32(v, name);
    if (a.length !== T) throw new RangeError(`${name} has ${a.length} entries, batch.tokens has ${T}`);
    return a;
  };
  const documentIds = opt(batch.documentIds, 'batch.documentIds');
  const targets = opt(batch.targets, 'batch.targets');
  const positions = opt(batch.positions, 'batch.positions') ?? documentPositions(T, documentIds);
  return { tokens, targets, positions, documentIds };
}

/** One sequence of {@link packSequences}. */
export interface SequenceToPack {
  tokens: ArrayLike<number>;
  /**
   * Which tokens are scored (1) or not (0), e.g. the response mask of a multi-turn episode.
   * Token i + 1 is the target at position i when `lossMask[i + 1]` is non-zero. Default: all.
   */
  lossMask?: ArrayLike<number>;
}

/** A packed batch with the offsets of its documents. */
export interface PackedSequences extends Required<{ [K in keyof PackedBatch]: Int32Array }> {
  /** Document d spans tokens [offsets[d], offsets[d + 1]). */
  offsets: Int32Array;
}

/**
 * Packs sequences end to end for next-token training: `targets[t] = tokens[t + 1]` within a
 * document where the next token is scored, -1 elsewhere (always at a document's last token);
 * positions restart at 0; document ids are the sequence indices.
 */
export function packSequences(sequences: readonly SequenceToPack[]): PackedSequences {
  const total = sequences.reduce((n, s) => n + s.tokens.length, 0);
  const tokens = new Int32Array(total);
  const targets = new Int32Array(total).fill(-1);
  const positions = new Int32Array(total);
  const documentIds = new Int32Array(total);
  const offsets = new Int32Array(sequences.length + 1);
  let at = 0;
  sequences.forEach((s, d) => {
    const n = s.tokens.length;
    if (s.lossMask && s.lossMask.length !== n)
      throw new RangeError(`sequences[${d}].lossMask has ${s.lossMask.length} entries, tokens has ${n}`);
    offsets[d] = at;
    for (let i = 0; i < n; i++) {
      tokens[at + i] = s.tokens[i];
      positions[at + i] = i;
      documentIds[at + i] = d;
      if (i + 1 < n && (s.lossMask ? s.lossMask[i + 1] !== 0 : true)) targets[at + i] = s.tokens[i + 1];
    }
    at += n;
  });
  offsets[sequences.length] = at;
  return { tokens, targets, positions, documentIds, offsets };
}

/** The addon's forward options for `options` (unknown keys pass through: the addon refuses them by name). */
function nativeForwardOptions(options: LogProbOptions, save: boolean): NativeForwardOptions {
  const { activationCheckpointing, lmHeadChunk, ...rest } = options;
  if (
    activationCheckpointing !== undefined &&
    activationCheckpointing !== 'none' &&
    activationCheckpointing !== 'layers'
  ) {
    throw new RangeError(
      `options.activationCheckpointing must be 'none' or 'layers', got ${JSON.stringify(activationCheckpointing)}`,
    );
  }
  if (lmHeadChunk !== undefined && (!Number.isSafeInteger(lmHeadChunk) || lmHeadChunk < 0)) {
    throw new RangeError(
      `options.lmHeadChunk must be a non-negative integer (0: automatic), got ${String(lmHeadChunk)}`,
    );
  }
  return {
    ...rest,
    save,
    ...(activationCheckpointing !== undefined ? { checkpoint: activationCheckpointing } : {}),
    ...(lmHeadChunk !== undefined ? { headChunk: lmHeadChunk } : {}),
  };
}

/** A training forward that kept its activations (natively, in the tracked allocator). */
export class TrainForward implements LogProbResult {
  private state: NativeTrainState | null;

  /** @internal */
  constructor(
    private readonly model: NativeTransformer,
    state: NativeTrainState,
    /** Log-probabilities of the targets, [T]. */
    readonly logProbs: Float32Array,
    /** Entropies, [T]. */
    readonly entropy: Float32Array,
  ) {
    this.state = state;
  }

  private current(): NativeTrainState {
    if (this.state === null) throw new Error('this forward was already used by a backward or released');
    return this.state;
  }

  /** Accumulates parameter gradients (+=) of `sum dLogProbs·logProbs + dEntropy·entropy`; frees the activations. */
  backward(grads: TokenGradients): void {
    this.model.backward(this.current(), { dLogProbs: grads.dLogProbs ?? null, dEntropy: grads.dEntropy ?? null });
    this.state = null;
  }

  /** {@link backward} off the main thread (arguments are checked before it returns). */
  async backwardAsync(grads: TokenGradients): Promise<void> {
    const done = this.model.backwardAsync(this.current(), {
      dLogProbs: grads.dLogProbs ?? null,
      dEntropy: grads.dEntropy ?? null,
    });
    this.state = null;
    await done;
  }

  /** Bytes of activations held (0 once used or released). */
  get bytes(): number {
    return this.state === null ? 0 : this.model.stateBytes(this.state);
  }

  /** Frees the activations without a backward. Idempotent. */
  release(): void {
    if (this.state !== null) this.model.releaseState(this.state);
    this.state = null;
  }
}

/** Options of {@link Transformer.run}. */
export interface RunOptions {
  /** Batched forward passes at most in this call (unfinished jobs continue in the next call). */
  maxForwards?: number;
  /** Tokens of one session processed per forward at most (chunked prefill, default 512). */
  prefillChunk?: number;
}

/**
 * A sequence's KV cache (sliding-window layers keep only their window). Tokens appended are
 * processed by the next {@link Transformer.run} that gives the session a job.
 */
export class TransformerSession {
  /** @internal */
  constructor(
    /** @internal */ readonly native: NativeSession,
    /** The model it belongs to. */ readonly model: Transformer,
  ) {}

  /** Tokens in the context (processed and pending). */
  get length(): number {
    return this.native.length();
  }

  /** Tokens already run through the model (in the cache). */
  get processed(): number {
    return this.native.processed();
  }

  /** Queues tokens (ids checked against the vocabulary, total against the context); returns the new length. */
  append(tokens: ArrayLike<number>): number {
    if (!(tokens instanceof Int32Array)) {
      for (let i = 0; i < tokens.length; i++) {
        if (!Number.isInteger(tokens[i]))
          throw new RangeError(`tokens[${i}] = ${String(tokens[i])} is not an integer token id`);
      }
    }
    return this.native.append(tokens instanceof Int32Array ? tokens : Int32Array.from(tokens));
  }

  /** The logits after the last token when every token is processed, else null (a copy). */
  logits(): Float32Array | null {
    return this.native.logits();
  }

  /** A deep copy (cache, pending tokens, logits) with its own seed. */
  fork(seed: number): TransformerSession {
    const Ctor = transformerAddon().TransformerSession;
    return new TransformerSession(new Ctor({ forkOf: this.native, seed }), this.model);
  }

  /** Bytes of the KV cache and logits. */
  get bytes(): number {
    return this.native.bytes();
  }

  /** Frees the cache (a run in progress keeps it until it ends). Idempotent. */
  dispose(): void {
    this.native.dispose();
  }

  /** {@link dispose} (for `using`). */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** True after {@link dispose}. */
  get disposed(): boolean {
    return this.native.isDisposed();
  }
}

/** The transformer over a parameter store. */
export class Transformer {
  private readonly native: NativeTransformer;
  private disposedFlag = false;

  private constructor(
    /** The architecture. */
    readonly config: ModelConfig,
    /** Parameters, gradients and AdamW moments. */
    readonly store: ParamStore,
    private readonly ownsStore: boolean,
  ) {
    const Ctor = transformerAddon().Transformer;
    this.native = new Ctor({ config, store: store.handle });
  }

  /**
   * A model with fresh parameters initialised from `seed` (the store is disposed with the model)
   * on `options.device`: `'cpu'` (default), `'cuda'` ({@link DeviceUnavailableError} without a
   * CUDA build and a usable GPU) or `'auto'`. The same seed gives the same parameters everywhere.
   */
  static create(config: ModelConfigInput, seed: number, options: { device?: DeviceRequest } = {}): Transformer {
    const c = validateModelConfig(config);
    const store = ParamStore.fromConfig(c, seed, options);
    try {
      return new Transformer(c, store, true);
    } catch (e) {
      store.dispose();
      throw e;
    }
  }

  /** A model over an existing store (on its device), which must hold exactly the parameters of `config` (not disposed with the model). */
  static fromStore(config: ModelConfigInput, store: ParamStore): Transformer {
    return new Transformer(validateModelConfig(config), store, false);
  }

  /**
   * A model with another config over this model's store, which must now hold exactly that
   * config's parameters (e.g. after LoRA adapters were appended to the store or merged and
   * removed: lib/model/lora). This model is disposed; the new one takes over its ownership of
   * the store (a model from {@link create} hands the store's disposal on).
   */
  reconfigure(config: ModelConfigInput): Transformer {
    if (this.disposedFlag) throw new Error('the transformer has been disposed');
    const next = new Transformer(validateModelConfig(config), this.store, this.ownsStore);
    this.disposedFlag = true;
    this.native.dispose();
    return next;
  }

  /** Where the model runs: its store's device, `'cpu'` or `'cuda:<k>'`. */
  get device(): StoreDevice {
    return this.store.device;
  }

  /** Log-probs and entropies of a packed batch (no activations kept). */
  logProbs(batch: PackedBatch, options: LogProbOptions = {}): LogProbResult {
    const r = this.native.forward(resolveBatch(batch), nativeForwardOptions(options, false));
    return { logProbs: r.logProbs, entropy: r.entropy };
  }

  /** {@link logProbs} off the main thread. */
  async logProbsAsync(batch: PackedBatch, options: LogProbOptions = {}): Promise<LogProbResult> {
    const r = await this.native.forwardAsync(resolveBatch(batch), nativeForwardOptions(options, false));
    return { logProbs: r.logProbs, entropy: r.entropy };
  }

  /** A forward that keeps its activations for one backward. */
  forward(batch: PackedBatch, options: LogProbOptions = {}): TrainForward {
    const r = this.native.forward(resolveBatch(batch), nativeForwardOptions(options, true));
    return new TrainForward(this.native, r.state as NativeTrainState, r.logProbs, r.entropy);
  }

  /** {@link forward} off the main thread. */
  async forwardAsync(batch: PackedBatch, options: LogProbOptions = {}): Promise<TrainForward> {
    const r = await this.native.forwardAsync(resolveBatch(batch), nativeForwardOptions(options, true));
    return new TrainForward(this.native, r.state as NativeTrainState, r.logProbs, r.entropy);
  }

  /** A new, empty KV-cache session whose sampling stream is seeded by `seed`. */
  createSession(seed: number): TransformerSession {
    const Ctor = transformerAddon().TransformerSession;
    return new TransformerSession(new Ctor({ model: this.native, seed }), this);
  }

  /**
   * Advances sessions in batched forwards: a session given a `job` starts it (`sample`: sample
   * up to maxTokens; `prefill`: process the appended tokens); a session without one continues
   * its unfinished job. Each forward processes the pending tokens of every active job at once;
   * sampling happens natively between forwards. Resolves with the tokens sampled in this call.
   */
  run(
    items: readonly { session: TransformerSession; job?: NativeJob }[],
    options: RunOptions = {},
  ): Promise<NativeRunResult[]> {
    return this.native.runAsync(
      items.map((it) => {
        if (it.session.model !== this) throw new RangeError('a session of another model was given to run()');
        return it.job ? { session: it.session.native, job: it.job } : { session: it.session.native };
      }),
      options,
    );
  }

  /** Frees the native model (and the store when {@link create} made it). Idempotent. */
  dispose(): void {
    if (this.disposedFlag) return;
    this.disposedFlag = true;
    this.native.dispose();
    if (this.ownsStore) this.store.dispose();
  }

  /** {@link dispose} (for `using`). */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** True after {@link dispose}. */
  get disposed(): boolean {
    return this.disposedFlag;
  }
}
