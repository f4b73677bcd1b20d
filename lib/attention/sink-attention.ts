import type { DeviceTensor } from '../native/index.js';
import { createBlockMask, type BlockMask } from './block-mask.js';
import { backwardSaved, forwardSaving, releaseSaved } from './functional.js';
import type { NativeHandle } from './native.js';
import type {
  AttentionBackwardOptions,
  AttentionForwardResult,
  AttentionGradients,
  AttentionOptions,
  AttentionShape,
  AttentionTensor,
  BackwardSplit,
  DeviceAttentionForwardResult,
  DeviceAttentionGradients,
} from './types.js';

/** Options of a {@link SinkAttention}: those of every call, plus the fused backward's work split. */
export interface SinkAttentionOptions extends AttentionOptions {
  backwardSplit?: BackwardSplit;
}

interface Saved {
  q: AttentionTensor;
  k: AttentionTensor;
  v: AttentionTensor;
  sinks: Float32Array | DeviceTensor | null;
  out: AttentionTensor;
  lse: Float32Array | DeviceTensor;
  probs?: NativeHandle;
}

/** Options of {@link SinkAttention.backward}. */
export interface SinkAttentionBackwardOptions {
  /** Gradient of the `lse` output (a float32 DeviceTensor too). */
  dLse?: Float32Array | DeviceTensor;
  /** Keep the saved state for another backward (default: released after this one). */
  retain?: boolean;
}

/**
 * One attention layer's forward and backward with the state the backward needs kept in between
 * (like an autograd node): the fused implementation keeps q, k, v, sinks, out and lse and
 * builds its block mask once in the constructor; the eager one also keeps the probabilities
 * (natively, counted by the tracked allocator) until `backward` or `release`.
 * The inputs are kept by reference: do not modify (or dispose) them between forward and backward.
 * DeviceTensor inputs keep everything on their device (on CUDA the eager probabilities stay in
 * device memory) and give DeviceTensor results.
 */
export class SinkAttention {
  /** The sizes of every call. */
  readonly shape: Readonly<AttentionShape>;
  /** The options of every call (with the block mask built by the constructor for the fused path). */
  readonly options: Readonly<AttentionOptions>;
  /** The fused backward's work split. */
  readonly backwardSplit: BackwardSplit | undefined;
  private saved: Saved | undefined;

  constructor(shape: AttentionShape, opts: SinkAttentionOptions = {}) {
    this.shape = Object.freeze({ ...shape });
    const { backwardSplit, ...o } = opts;
    this.backwardSplit = backwardSplit;
    if ((o.impl ?? 'fused') === 'fused' && o.blockMask === undefined) {
      o.blockMask = createBlockMask(o.mask, shape, o.blockSize);
      delete o.blockSize;
    }
    this.options = Object.freeze(o);
  }

  /** The block mask of the fused path (`undefined` for eager). */
  get blockMask(): BlockMask | undefined {
    return this.options.blockMask;
  }

  /** True between a forward and the backward (or `release`). */
  get hasSaved(): boolean {
    return this.saved !== undefined;
  }

  private get eager(): boolean {
    return this.options.impl === 'eager';
  }

  /** Forward; keeps what the backward needs (replacing any earlier state). */
  forward(q: Float32Array, k: Float32Array, v: Float32Array, sinks?: Float32Array | null): AttentionForwardResult;
  forward(
    q: DeviceTensor,
    k: DeviceTensor,
    v: DeviceTensor,
    sinks?: Float32Array | DeviceTensor | null,
  ): DeviceAttentionForwardResult;
  forward(
    q: AttentionTensor,
    k: AttentionTensor,
    v: AttentionTensor,
    sinks: Float32Array | DeviceTensor | null = null,
  ): AttentionForwardResult | DeviceAttentionForwardResult {
    this.release();
    const r = forwardSaving(q, k, v, sinks, this.shape, this.options, this.eager, false);
    this.saved = { q, k, v, sinks, out: r.out, lse: r.lse, probs: r.saved };
    return { out: r.out, lse: r.lse } as AttentionForwardResult | DeviceAttentionForwardResult;
  }

  /** {@link SinkAttention.forward} off the main thread. */
  forwardAsync(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    sinks?: Float32Array | null,
  ): Promise<AttentionForwardResult>;
  forwardAsync(
    q: DeviceTensor,
    k: DeviceTensor,
    v: DeviceTensor,
    sinks?: Float32Array | DeviceTensor | null,
  ): Promise<DeviceAttentionForwardResult>;
  async forwardAsync(
    q: AttentionTensor,
    k: AttentionTensor,
    v: AttentionTensor,
    sinks: Float32Array | DeviceTensor | null = null,
  ): Promise<AttentionForwardResult | DeviceAttentionForwardResult> {
    this.release();
    const r = await forwardSaving(q, k, v, sinks, this.shape, this.options, this.eager, true);
    this.saved = { q, k, v, sinks, out: r.out, lse: r.lse, probs: r.saved };
    return { out: r.out, lse: r.lse } as AttentionForwardResult | DeviceAttentionForwardResult;
  }

  /** Gradients of the last forward's inputs given `dOut`; releases the saved state unless `retain`. */
  backward(dOut: Float32Array, opts?: SinkAttentionBackwardOptions): AttentionGradients;
  backward(dOut: DeviceTensor, opts?: SinkAttentionBackwardOptions): DeviceAttentionGradients;
  backward(
    dOut: AttentionTensor,
    opts: SinkAttentionBackwardOptions = {},
  ): AttentionGradients | DeviceAttentionGradients {
    const s = this.requireSaved();
    const g = backwardSaved(
      [s.q, s.k, s.v, s.sinks, s.out, s.lse, dOut],
      this.shape,
      this.backwardOptions(opts),
      s.probs,
      false,
    ) as AttentionGradients | DeviceAttentionGradients;
    if (!opts.retain) this.release();
    return g;
  }

  /** {@link SinkAttention.backward} off the main thread. */
  backwardAsync(dOut: Float32Array, opts?: SinkAttentionBackwardOptions): Promise<AttentionGradients>;
  backwardAsync(dOut: DeviceTensor, opts?: SinkAttentionBackwardOptions): Promise<DeviceAttentionGradients>;
  async backwardAsync(
    dOut: AttentionTensor,
    opts: SinkAttentionBackwardOptions = {},
  ): Promise<AttentionGradients | DeviceAttentionGradients> {
    const s = this.requireSaved();
    const g = await backwardSaved(
      [s.q, s.k, s.v, s.sinks, s.out, s.lse, dOut],
      this.shape,
      this.backwardOptions(opts),
      s.probs,
      true,
    );
    if (!opts.retain && this.saved === s) this.release();
    return g;
  }

  /** Drops the saved state now (frees the eager probabilities without waiting for GC). */
  release(): void {
    if (this.saved?.probs !== undefined) releaseSaved(this.saved.probs);
    this.saved = undefined;
  }

  private requireSaved(): Saved {
    if (this.saved === undefined)
      throw new Error('SinkAttention.backward needs a forward first (or the state was released)');
    return this.saved;
  }

  private backwardOptions(opts: SinkAttentionBackwardOptions): AttentionBackwardOptions {
    return { ...this.options, dLse: opts.dLse, backwardSplit: this.backwardSplit };
  }
}
