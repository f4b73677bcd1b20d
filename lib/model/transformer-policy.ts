/**
 * {@link TransformerPolicy}: the built-in transformer as a {@link TrainablePolicy}. Sessions
 * that sample at the same time are batched continuously: whenever the native engine is free,
 * every session with an unfinished `sample()`/`prefill()` joins one native run that does up to
 * `maxForwardsPerRun` batched forwards (prefill chunks and decoding steps together, sampling in
 * between) off the main thread; sessions that finish resolve, new requests join the next run.
 * Training calls (log-probs, forward, backward, optimiser steps) queue behind the same lock,
 * so native work never overlaps on one model. Checkpoints hold the parameters, AdamW state,
 * config, tokenizer and the sampler's RNG state. `device: 'cuda'` puts the parameters,
 * optimiser state, activations and KV caches on the GPU (everything else is unchanged; a
 * checkpoint saved from either device loads on either).
 * @module
 */
import type { DeviceRequest } from '../native/device.js';
import { type Checkpoint, loadCheckpoint, restoreParamStore, saveCheckpoint } from './checkpoint.js';
import { type ModelConfig, type ModelConfigInput, validateModelConfig } from './config.js';
import type { AdamWStepResult } from './native.js';
import type {
  FinishReason,
  ForwardBackwardResult,
  ForwardPass,
  ActivationCheckpointing,
  GenerateRequest,
  LogProbOptions,
  LogProbResult,
  OptimizerStepOptions,
  PackedBatch,
  ModelSession,
  SampleOptions,
  SampleResult,
  SessionOptions,
  TokenGradients,
  TokenLoss,
  TrainStepOptions,
  TrainStepResult,
  TrainablePolicy,
} from './policy.js';
import { Tokenizer } from '../chat/tokenizer.js';
import type { StoreDevice } from './param-store.js';
import { type NativeJob, Transformer, type TransformerSession } from './transformer.js';

/** Runs async tasks one at a time, in call order. */
class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  /** Runs `task` after every task queued before it (also when those fail). */
  run<T>(task: () => Promise<T> | T): Promise<T> {
    const next = this.tail.then(task, task);
    this.tail = next.catch(() => undefined);
    return next;
  }
}

/** SplitMix64 of a 64-bit value (BigInt), for deriving session seeds. */
function splitmix64(x: bigint): bigint {
  const M = (1n << 64n) - 1n;
  let z = (x + 0x9e3779b97f4a7c15n) & M;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
  return z ^ (z >> 31n);
}

function checkSeed(seed: number, name: string): number {
  if (!Number.isSafeInteger(seed) || seed < 0)
    throw new RangeError(`${name} must be a non-negative safe integer, got ${seed}`);
  return seed;
}

/** Options of {@link TransformerPolicy.create} and {@link TransformerPolicy.load}. */
export interface TransformerPolicyOptions {
  /** Seed of the parameter initialisation (create only; default 0). */
  seed?: number;
  /** Seed of the sampler stream that derives session seeds not given explicitly (default: `seed`). */
  samplerSeed?: number;
  /** The tokenizer (saved in checkpoints). */
  tokenizer?: Tokenizer | null;
  /** Batched forwards per native run before new requests can join (default 16). */
  maxForwardsPerRun?: number;
  /** Tokens of one session per forward at most (chunked prefill, default 512). */
  prefillChunk?: number;
  /**
   * Batched forwards per native run while a sample with `onTokens` (streaming) is in the batch
   * (default 1: each token is delivered as soon as it is sampled).
   */
  streamForwardsPerRun?: number;
  /**
   * Where the model runs: `'cpu'` (default), `'cuda'` (the first GPU; throws
   * {@link DeviceUnavailableError} without a CUDA build and a usable GPU) or `'auto'` (the GPU
   * when usable, else the CPU).
   */
  device?: DeviceRequest;
  /**
   * Activation checkpointing of the training forwards (forward, forwardBackward, trainStep)
   * that do not set their own: `'none'` (default) or `'layers'` (keep each layer's input and
   * recompute the layer in the backward; gradients bit-identical, less memory, more compute).
   */
  activationCheckpointing?: ActivationCheckpointing;
}

/** Options of {@link TransformerPolicy.save}. */
export interface PolicySaveOptions {
  /** Save the AdamW moments (default true). */
  optimizer?: boolean;
  /** Any JSON-serialisable trainer state. */
  trainer?: Record<string, unknown>;
  /** More RNG states to keep (the sampler's is saved as `sampler`). */
  rng?: Record<string, string>;
}

interface Request {
  session: TransformerPolicySession;
  job: NativeJob;
  started: boolean;
  tokens: number[];
  logProbs: number[];
  onTokens: ((tokens: Int32Array, logProbs: Float32Array) => void) | null;
  resolve: (r: SampleResult) => void;
  reject: (e: unknown) => void;
}

/** A session of a {@link TransformerPolicy} (a KV cache plus its own seeded random stream). */
export class TransformerPolicySession implements ModelSession {
  /** @internal */
  request: Request | null = null;

  /** @internal */
  constructor(
    private readonly policy: TransformerPolicy,
    /** The lower-level session. */
    readonly native: TransformerSession,
    /** The seed of its random stream. */
    readonly seed: number,
  ) {}

  /** Tokens in the context (appended and sampled). */
  get length(): number {
    return this.native.length;
  }

  private idle(what: string): void {
    if (this.native.disposed) throw new Error(`${what}: the session has been disposed`);
    if (this.request) throw new Error(`${what}: a sample() or prefill() of this session is still running`);
  }

  /** Adds tokens to the context (checked now, processed by the next sample/prefill); not while a sample() runs. */
  append(tokens: ArrayLike<number>): void {
    this.idle('append');
    this.native.append(tokens);
  }

  /** Samples up to `options.maxTokens` tokens, batched with every other session sampling now (see the module notes). */
  sample(options: SampleOptions): Promise<SampleResult> {
    this.idle('sample');
    const o = options as Partial<SampleOptions>;
    if (typeof o !== 'object' || o === null) throw new TypeError('options must be an object');
    if (!Number.isSafeInteger(o.maxTokens) || (o.maxTokens as number) < 0)
      throw new RangeError(`options.maxTokens must be an integer >= 0, got ${String(o.maxTokens)}`);
    const temperature = o.temperature ?? 1;
    const topP = o.topP ?? 1;
    const topK = o.topK ?? 0;
    if (typeof temperature !== 'number' || !(temperature >= 0) || !Number.isFinite(temperature))
      throw new RangeError(`options.temperature must be a finite number >= 0, got ${String(temperature)}`);
    if (typeof topP !== 'number' || !(topP > 0 && topP <= 1))
      throw new RangeError(`options.topP must be in (0, 1], got ${String(topP)}`);
    if (!Number.isSafeInteger(topK) || topK < 0)
      throw new RangeError(`options.topK must be an integer >= 0, got ${String(topK)}`);
    const minP = o.minP ?? 0;
    const repetitionPenalty = o.repetitionPenalty ?? 1;
    const presencePenalty = o.presencePenalty ?? 0;
    const frequencyPenalty = o.frequencyPenalty ?? 0;
    const logprobsMode = o.logprobsMode ?? 'tempered';
    if (typeof minP !== 'number' || !(minP >= 0 && minP <= 1))
      throw new RangeError(`options.minP must be in [0, 1], got ${String(minP)}`);
    if (typeof repetitionPenalty !== 'number' || !(repetitionPenalty > 0) || !Number.isFinite(repetitionPenalty))
      throw new RangeError(`options.repetitionPenalty must be a finite number > 0, got ${String(repetitionPenalty)}`);
    if (typeof presencePenalty !== 'number' || !(presencePenalty >= -2 && presencePenalty <= 2))
      throw new RangeError(`options.presencePenalty must be in [-2, 2], got ${String(presencePenalty)}`);
    if (typeof frequencyPenalty !== 'number' || !(frequencyPenalty >= -2 && frequencyPenalty <= 2))
      throw new RangeError(`options.frequencyPenalty must be in [-2, 2], got ${String(frequencyPenalty)}`);
    if (logprobsMode !== 'tempered' && logprobsMode !== 'raw' && logprobsMode !== 'processed')
      throw new RangeError(
        `options.logprobsMode must be 'tempered', 'raw' or 'processed', got ${String(logprobsMode)}`,
      );
    const stop = o.stop ?? [];
    const V = this.policy.vocabSize;
    for (const t of stop)
      if (!Number.isInteger(t) || t < 0 || t >= V)
        throw new RangeError(`options.stop holds ${String(t)}, not a token id in [0, ${V})`);
    if (o.onTokens !== undefined && typeof o.onTokens !== 'function')
      throw new TypeError('options.onTokens must be a function');
    if (this.native.length === 0) throw new RangeError('sample: append a prompt first (the session is empty)');
    return this.policy.enqueue(
      this,
      {
        kind: 'sample',
        maxTokens: o.maxTokens as number,
        temperature,
        topP,
        topK,
        minP,
        repetitionPenalty,
        presencePenalty,
        frequencyPenalty,
        logprobsMode,
        stop: Int32Array.from(stop),
      },
      o.onTokens ?? null,
    );
  }

  /** Processes the appended tokens now (batched like sample()). */
  async prefill(): Promise<void> {
    this.idle('prefill');
    await this.policy.enqueue(this, { kind: 'prefill' });
  }

  /** The logits after the last token when everything is processed (after `prefill()`/`sample()`), else null. */
  logits(): Float32Array | null {
    this.idle('logits');
    return this.native.logits();
  }

  /** A deep copy of the context (KV cache, pending tokens) with its own seed (default: the policy's next). */
  fork(options: SessionOptions = {}): TransformerPolicySession {
    this.idle('fork');
    const seed = options.seed === undefined ? this.policy.nextSessionSeed() : checkSeed(options.seed, 'options.seed');
    return new TransformerPolicySession(this.policy, this.native.fork(seed), seed);
  }

  /** Frees the cache; a pending sample() rejects. Idempotent. */
  dispose(): void {
    if (this.request) this.policy.cancel(this.request, new Error('the session was disposed during sample()'));
    this.native.dispose();
  }

  /** {@link dispose} (for `using`). */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** The built-in transformer as a trainable, batched-sampling policy. */
export class TransformerPolicy implements TrainablePolicy {
  private readonly queue = new SerialQueue();
  private readonly requests = new Set<Request>();
  private pumping = false;
  private samplerSeed: bigint;
  private samplerCounter = 0n;
  private readonly maxForwardsPerRun: number;
  private readonly streamForwardsPerRun: number;
  private readonly prefillChunk: number;
  /** Activation checkpointing of the training forwards that do not set their own. */
  readonly activationCheckpointing: ActivationCheckpointing;

  private constructor(
    /** The model (parameters in `model.store`). */
    readonly model: Transformer,
    /** The tokenizer, when known. */
    readonly tokenizer: Tokenizer | null,
    options: TransformerPolicyOptions,
  ) {
    this.samplerSeed = BigInt(checkSeed(options.samplerSeed ?? options.seed ?? 0, 'options.samplerSeed'));
    this.maxForwardsPerRun = options.maxForwardsPerRun ?? 16;
    this.prefillChunk = options.prefillChunk ?? 512;
    this.streamForwardsPerRun = options.streamForwardsPerRun ?? 1;
    this.activationCheckpointing = options.activationCheckpointing ?? 'none';
    if (this.activationCheckpointing !== 'none' && this.activationCheckpointing !== 'layers') {
      throw new RangeError(
        `options.activationCheckpointing must be 'none' or 'layers', got ${JSON.stringify(this.activationCheckpointing)}`,
      );
    }
    if (!Number.isSafeInteger(this.streamForwardsPerRun) || this.streamForwardsPerRun < 1)
      throw new RangeError('options.streamForwardsPerRun must be an integer >= 1');
    if (!Number.isSafeInteger(this.maxForwardsPerRun) || this.maxForwardsPerRun < 1)
      throw new RangeError('options.maxForwardsPerRun must be an integer >= 1');
    if (!Number.isSafeInteger(this.prefillChunk) || this.prefillChunk < 1)
      throw new RangeError('options.prefillChunk must be an integer >= 1');
    if (tokenizer && tokenizer.vocabSize > model.config.vocab)
      throw new RangeError(
        `the tokenizer has ${tokenizer.vocabSize} tokens, more than config.vocab (${model.config.vocab})`,
      );
  }

  /** A policy with fresh parameters initialised from `options.seed`. */
  static create(config: ModelConfigInput, options: TransformerPolicyOptions = {}): TransformerPolicy {
    const seed = checkSeed(options.seed ?? 0, 'options.seed');
    const model = Transformer.create(validateModelConfig(config), seed, { device: options.device });
    try {
      return new TransformerPolicy(model, options.tokenizer ?? null, options);
    } catch (e) {
      model.dispose();
      throw e;
    }
  }

  /**
   * Restores a policy saved by {@link save}: parameters, AdamW state and step, config,
   * tokenizer and sampler state (throws CheckpointError for a corrupt or mismatched file), on
   * `options.device` (default the CPU, whichever device saved it).
   */
  static load(
    path: string,
    options: Omit<TransformerPolicyOptions, 'seed' | 'samplerSeed'> & { expectConfig?: ModelConfigInput } = {},
  ): TransformerPolicy {
    const ck: Checkpoint = loadCheckpoint(path, { expectConfig: options.expectConfig });
    const store = restoreParamStore(ck, undefined, { device: options.device });
    let model: Transformer;
    try {
      model = Transformer.fromStore(ck.config, store);
    } catch (e) {
      store.dispose();
      throw e;
    }
    const tokenizer = options.tokenizer ?? (ck.tokenizer ? Tokenizer.fromJSON(ck.tokenizer) : null);
    const policy = new TransformerPolicy(model, tokenizer, { ...options, seed: ck.seed });
    if (ck.rng.sampler !== undefined) policy.setSamplerState(ck.rng.sampler);
    policy.ownsStore = true;
    return policy;
  }

  /**
   * A policy over an existing model (e.g. one whose store was filled from a pretrained
   * checkpoint), with the same batched sampling and training calls. The policy owns the model
   * ({@link dispose} frees it) but not its store.
   */
  static fromModel(
    model: Transformer,
    options: Omit<TransformerPolicyOptions, 'seed' | 'device'> = {},
  ): TransformerPolicy {
    if (!(model instanceof Transformer)) throw new TypeError('model must be a Transformer');
    if (model.disposed) throw new Error('the model has been disposed');
    return new TransformerPolicy(model, options.tokenizer ?? null, options);
  }

  private ownsStore = false;

  /** The architecture. */
  get config(): ModelConfig {
    return this.model.config;
  }

  /** Where the model runs: `'cpu'` or `'cuda:<k>'`. */
  get device(): StoreDevice {
    return this.model.device;
  }

  /** `config.vocab`. */
  get vocabSize(): number {
    return this.model.config.vocab;
  }

  /** `config.context`. */
  get contextLength(): number {
    return this.model.config.context;
  }

  // ---- sampling -----------------------------------------------------------------------------

  /** The next seed of the sampler stream (advances it). */
  nextSessionSeed(): number {
    const z = splitmix64(this.samplerSeed ^ splitmix64(this.samplerCounter));
    this.samplerCounter += 1n;
    return Number(z & ((1n << 53n) - 1n));
  }

  /** The sampler state (`"<seed>:<counter>"`), saved in checkpoints. */
  samplerState(): string {
    return `${this.samplerSeed}:${this.samplerCounter}`;
  }

  /** Restores {@link samplerState}. */
  setSamplerState(state: string): void {
    const m = /^(\d+):(\d+)$/.exec(state);
    if (!m) throw new RangeError(`sampler state must look like "<seed>:<counter>", got ${JSON.stringify(state)}`);
    this.samplerSeed = BigInt(m[1]);
    this.samplerCounter = BigInt(m[2]);
  }

  /** A new, empty session; its seed is `options.seed` or the next of the sampler stream. */
  createSession(options: SessionOptions = {}): TransformerPolicySession {
    const seed = options.seed === undefined ? this.nextSessionSeed() : checkSeed(options.seed, 'options.seed');
    return new TransformerPolicySession(this, this.model.createSession(seed), seed);
  }

  /** Continues each prompt once, all batched together; results in request order. */
  async generate(requests: readonly GenerateRequest[]): Promise<SampleResult[]> {
    const sessions = requests.map((r) => this.createSession({ seed: r.seed }));
    try {
      requests.forEach((r, i) => sessions[i].append(r.prompt));
      return await Promise.all(requests.map((r, i) => sessions[i].sample(r)));
    } finally {
      for (const s of sessions) s.dispose();
    }
  }

  /** Sample and prefill jobs queued or running now. */
  get pending(): number {
    return this.requests.size;
  }

  /**
   * Runs `task` once the native work queued so far has finished (a batched run whose samples
   * were all cancelled included) and before any queued after it: e.g. to write parameters in
   * place between runs. Samples enqueued meanwhile wait for it.
   */
  betweenRuns<T>(task: () => T | Promise<T>): Promise<T> {
    return this.queue.run(task);
  }

  /** @internal Queues a job of `session` for the next batched run. */
  enqueue(
    session: TransformerPolicySession,
    job: NativeJob,
    onTokens: Request['onTokens'] = null,
  ): Promise<SampleResult> {
    return new Promise<SampleResult>((resolve, reject) => {
      const req: Request = { session, job, started: false, tokens: [], logProbs: [], onTokens, resolve, reject };
      session.request = req;
      this.requests.add(req);
      void this.pump();
    });
  }

  /** @internal Drops a request (its session was disposed). */
  cancel(req: Request, error: Error): void {
    if (!this.requests.delete(req)) return;
    req.session.request = null;
    req.reject(error);
  }

  private finish(req: Request, finishReason: FinishReason): void {
    this.requests.delete(req);
    req.session.request = null;
    req.resolve({ tokens: Int32Array.from(req.tokens), logProbs: Float32Array.from(req.logProbs), finishReason });
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.requests.size > 0) {
        const batch = [...this.requests];
        const items = batch.map((r) =>
          r.started ? { session: r.session.native } : { session: r.session.native, job: r.job },
        );
        const maxForwards = batch.some((r) => r.onTokens)
          ? Math.min(this.maxForwardsPerRun, this.streamForwardsPerRun)
          : this.maxForwardsPerRun;
        let results;
        try {
          results = await this.queue.run(() => this.model.run(items, { maxForwards, prefillChunk: this.prefillChunk }));
        } catch (e) {
          for (const r of batch) this.cancel(r, e as Error);
          continue;
        }
        batch.forEach((r, i) => {
          r.started = true;
          if (!this.requests.has(r)) return; // disposed during the run
          const res = results[i];
          for (const t of res.tokens) r.tokens.push(t);
          for (const l of res.logProbs) r.logProbs.push(l);
          if (r.onTokens && res.tokens.length > 0) {
            try {
              r.onTokens(Int32Array.from(res.tokens), Float32Array.from(res.logProbs));
            } catch (e) {
              this.cancel(r, e instanceof Error ? e : new Error(String(e)));
              return;
            }
          }
          if (res.done && this.requests.has(r)) this.finish(r, (res.finishReason || 'length') as FinishReason);
        });
      }
    } finally {
      this.pumping = false;
    }
  }

  // ---- training -----------------------------------------------------------------------------

  /** Log-probs and entropies of a packed batch, no activations kept (queued behind earlier native work). */
  logProbs(batch: PackedBatch, options: LogProbOptions = {}): Promise<LogProbResult> {
    return this.queue.run(() => this.model.logProbsAsync(batch, options));
  }

  /** A forward that keeps its activations for one backward (both queued). */
  async forward(batch: PackedBatch, options: LogProbOptions = {}): Promise<ForwardPass> {
    const f = await this.queue.run(() =>
      this.model.forwardAsync(batch, { activationCheckpointing: this.activationCheckpointing, ...options }),
    );
    return {
      logProbs: f.logProbs,
      entropy: f.entropy,
      backward: (grads: TokenGradients) => this.queue.run(() => f.backwardAsync(grads)),
      release: () => f.release(),
    };
  }

  /** forward + loss + backward; parameter gradients accumulate until the next optimizer step. */
  async forwardBackward(
    batch: PackedBatch,
    loss: TokenLoss,
    options: LogProbOptions = {},
  ): Promise<ForwardBackwardResult> {
    const pass = await this.forward(batch, options);
    try {
      const T = pass.logProbs.length;
      const targets = batch.targets ?? null;
      let count = 0;
      if (targets) for (let t = 0; t < T; t++) if (targets[t] >= 0) count++;
      let grads: TokenGradients;
      let value = 0;
      switch (loss.kind) {
        case 'cross-entropy': {
          const w = loss.weights ?? null;
          if (w && w.length !== T)
            throw new RangeError(`loss.weights has ${w.length} entries, the batch has ${T} tokens`);
          const d = new Float32Array(T);
          for (let t = 0; t < T; t++) {
            if (!targets || targets[t] < 0) continue;
            const wt = w ? w[t] : 1 / count;
            d[t] = -wt;
            value -= wt * pass.logProbs[t];
          }
          grads = { dLogProbs: d };
          break;
        }
        case 'coefficients':
          grads = loss;
          for (let t = 0; t < T; t++)
            value += (loss.dLogProbs?.[t] ?? 0) * pass.logProbs[t] + (loss.dEntropy?.[t] ?? 0) * pass.entropy[t];
          break;
        case 'custom': {
          const r = await loss.fn({ logProbs: pass.logProbs, entropy: pass.entropy });
          grads = r;
          value = r.loss ?? Number.NaN;
          break;
        }
        default:
          throw new TypeError(`unknown loss kind ${JSON.stringify((loss as { kind?: unknown }).kind)}`);
      }
      await pass.backward(grads);
      return { logProbs: pass.logProbs, entropy: pass.entropy, loss: value, targets: count };
    } finally {
      pass.release();
    }
  }

  /** AdamW with clipping after the queued native work; zeroes the gradients unless `zeroGrad: false`. */
  optimizerStep(options: OptimizerStepOptions): Promise<AdamWStepResult> {
    return this.queue.run(() => {
      const { zeroGrad, ...adamw } = options;
      const r = this.model.store.adamwStep(adamw);
      if (zeroGrad ?? true) this.model.store.zeroGrad();
      return r;
    });
  }

  /** Sets every gradient to zero (after the queued native work). */
  zeroGrad(): Promise<void> {
    return this.queue.run(() => this.model.store.zeroGrad());
  }

  /** forwardBackward over each micro-batch, then one optimizer step. */
  async trainStep(
    batches: readonly PackedBatch[],
    loss: TokenLoss | ((batch: PackedBatch, index: number) => TokenLoss),
    options: TrainStepOptions,
  ): Promise<TrainStepResult> {
    const { optimizer, ...forward } = options;
    let total = 0;
    let targets = 0;
    for (const [i, batch] of batches.entries()) {
      const r = await this.forwardBackward(batch, typeof loss === 'function' ? loss(batch, i) : loss, forward);
      total += r.loss;
      targets += r.targets;
    }
    return { loss: total, targets, optimizer: await this.optimizerStep(optimizer) };
  }

  // ---- checkpoints --------------------------------------------------------------------------

  /** Writes a checkpoint (atomic): weights, AdamW moments and step, config, tokenizer, sampler state. */
  save(path: string, options: PolicySaveOptions = {}): void {
    saveCheckpoint(path, {
      config: this.config,
      store: this.model.store,
      tokenizer: this.tokenizer ?? undefined,
      optimizer: options.optimizer ?? true,
      rng: { ...options.rng, sampler: this.samplerState() },
      trainer: options.trainer,
    });
  }

  /** Frees the model (and its store when this policy made it). Pending samples reject. Idempotent. */
  dispose(): void {
    for (const r of [...this.requests]) this.cancel(r, new Error('the policy was disposed'));
    this.model.dispose();
    if (this.ownsStore && !this.model.store.disposed) this.model.store.dispose();
  }

  /** {@link dispose} (for `using`). */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
