import type { DeviceRequest, DeviceTensor } from '../native/index.js';
import type { BlockMask } from './block-mask.js';

/**
 * Sizes of an attention call. Layout (row-major, fp32, flash-attention convention):
 * `q`/`out`/`dOut`/`dq` are `[batch, seqLen, qHeads, headDim]`, `k`/`v`/`dk`/`dv` are
 * `[batch, kvLen, kvHeads, headDim]`, `lse` is `[batch, qHeads, seqLen]`, `sinks` is `[qHeads]`.
 * Query head `h` reads kv head `floor(h / (qHeads / kvHeads))`.
 */
export interface AttentionShape {
  /** Sequences in the batch (>= 1). */
  batch: number;
  /** Query positions per sequence (>= 1); also the key count unless `kvLen` is given. */
  seqLen: number;
  /** Query heads; a multiple of `kvHeads`. */
  qHeads: number;
  /** Key/value heads (grouped-query attention when fewer than `qHeads`). */
  kvHeads: number;
  /** Features per head, 1..1024. */
  headDim: number;
  /** Key positions per sequence (default `seqLen`), e.g. a cache longer than the new queries. */
  kvLen?: number;
  /**
   * Absolute position of query row 0 (default 0): masks compare query position
   * `queryOffset + i` with key position `j`, e.g. `kvLen - seqLen` for new tokens after a cache.
   */
  queryOffset?: number;
}

/**
 * The mask shorthand: `causal AND (window OR prefix) AND documents`, each part only when set.
 * Prefix keys stay visible regardless of the window but remain subject to causality and
 * documents.
 */
export interface AttentionMask {
  /** Keys `j <= i` only (default `true`). */
  causal?: boolean;
  /**
   * Sliding window of `W` keys including the current one: `i - j <= W - 1` (with `causal`),
   * `|i - j| <= W - 1` without. `0` or absent = no window.
   */
  window?: number;
  /** The first `P` keys (attention-sink tokens) stay visible to every query despite the window. */
  prefix?: number;
  /** `[batch * kvLen]` document ids of packed sequences: attend only within equal ids. */
  documentIds?: Int32Array;
}

/**
 * A mask predicate tree (FlexAttention `mask_mod` style, evaluated natively). Build it with
 * {@link causal}, {@link slidingWindow}, {@link prefix}, {@link documents}, {@link allKeys},
 * {@link and}, {@link or}, {@link not}.
 */
export type MaskPredicate =
  | { readonly kind: 'all' }
  | { readonly kind: 'causal' }
  | { readonly kind: 'slidingWindow'; readonly window: number }
  | { readonly kind: 'prefix'; readonly length: number }
  | { readonly kind: 'documents'; readonly ids: Int32Array }
  | { readonly kind: 'and'; readonly masks: readonly MaskSpec[] }
  | { readonly kind: 'or'; readonly masks: readonly MaskSpec[] }
  | { readonly kind: 'not'; readonly mask: MaskSpec };

/** A mask given either as a predicate tree or as the shorthand (which may also appear inside trees). */
export type MaskSpec = MaskPredicate | AttentionMask;

/** `'fused'` (tiled, memory linear in length) or `'eager'` (materialises seqLen x (kvLen + 1) matrices). */
export type AttentionImpl = 'fused' | 'eager';

/** CPU vector code: `'auto'` picks the best this CPU supports; the others force one (tests, benchmarks). */
export type CpuKernel = 'auto' | 'avx512' | 'avx2' | 'generic';

/** Options of the forward and backward calls. */
export interface AttentionOptions {
  /** The mask (default causal); ignored in favour of `blockMask.mask` when only `blockMask` is given. */
  mask?: MaskSpec;
  /** A block mask from {@link createBlockMask} for this shape, reused across calls (fused only). */
  blockMask?: BlockMask;
  /** Logit scale (default `1 / sqrt(headDim)`). */
  scale?: number;
  /** Softcap `C > 0`: logits become `C tanh(scale q.k / C)` (the sink is not capped); 0 = none. */
  softcap?: number;
  /** Implementation (default `'fused'`). */
  impl?: AttentionImpl;
  /**
   * Device (default: `SINKFLEX_DEVICE`, else `'auto'`); `'cuda'` without CUDA kernels or a GPU
   * throws DeviceUnavailableError. With DeviceTensor inputs the call runs where they are (a
   * conflicting `device` throws RangeError).
   */
  device?: DeviceRequest;
  /**
   * Fused tile size when no `blockMask` is given: a multiple of 16 in [16, 256] (default 64).
   * The CUDA kernels always use 64 x 64 tiles (a block mask of another size is converted).
   */
  blockSize?: number;
  /** Which CPU vector code to run (default `'auto'`). */
  cpuKernel?: CpuKernel;
}

/**
 * How the fused backward splits its work (same results to fp32 rounding): `'blocks'` — one
 * pass parallel over key blocks for dk/dv and one over query blocks for dq (most parallelism,
 * probabilities recomputed twice, no extra memory); `'groups'` — one pass per (sequence, kv
 * head), the group's query heads dealt to `S = min(qHeads / kvHeads, ceil(threads / (batch *
 * kvHeads)))` tasks whose dk/dv partials (`S - 1` kv-sized pairs) are added in a fixed order
 * (less work); `'auto'` (default) — `'groups'` when that gives a task per thread, else `'blocks'`.
 */
export type BackwardSplit = 'auto' | 'blocks' | 'groups';

/** Options of the backward call. */
export interface AttentionBackwardOptions extends AttentionOptions {
  /** A gradient for the `lse` output, `[batch, qHeads, seqLen]` (default none); a float32 DeviceTensor too. */
  dLse?: Float32Array | DeviceTensor;
  /** Fused backward work split (default `'auto'`). */
  backwardSplit?: BackwardSplit;
}

/** Forward results. */
export interface AttentionForwardResult {
  /** `[batch, seqLen, qHeads, headDim]`. */
  out: Float32Array;
  /** `[batch, qHeads, seqLen]`: natural-log sum of exp over the visible logits and the sink. */
  lse: Float32Array;
}

/** Backward results. */
export interface AttentionGradients {
  /** `[batch, seqLen, qHeads, headDim]`. */
  dq: Float32Array;
  /** `[batch, kvLen, kvHeads, headDim]`, summed over the query heads of each kv group. */
  dk: Float32Array;
  /** `[batch, kvLen, kvHeads, headDim]`, summed over the query heads of each kv group. */
  dv: Float32Array;
  /** `[qHeads]`, summed over the batch; `null` when the call had no sinks. */
  dSinks: Float32Array | null;
}

/**
 * A tensor argument of the attention functions: Float32Arrays (copied to and from the GPU when
 * the device is CUDA) or DeviceTensors (used in place; results stay on their device).
 */
export type AttentionTensor = Float32Array | DeviceTensor;

/**
 * Forward results of a call with DeviceTensor inputs: `out` in the inputs' dtype and shape
 * (bfloat16 inputs give a bfloat16 out, float16 a float16 one), `lse` float32 `[batch, qHeads, seqLen]`, both on the
 * inputs' device.
 */
export interface DeviceAttentionForwardResult {
  out: DeviceTensor;
  lse: DeviceTensor;
}

/**
 * Backward results of a call with DeviceTensor inputs: dq, dk, dv in the inputs' dtype with
 * the shapes of q, k, v; dSinks float32 `[qHeads]` (`null` without sinks); on the inputs' device.
 */
export interface DeviceAttentionGradients {
  dq: DeviceTensor;
  dk: DeviceTensor;
  dv: DeviceTensor;
  dSinks: DeviceTensor | null;
}
