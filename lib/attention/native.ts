import { loadAddon } from '../native/index.js';
import type { AttentionForwardResult, AttentionGradients, MaskSpec } from './types.js';

/** An opaque handle to a native object (block mask or saved eager state). */
export type NativeHandle = object & { readonly __sinkflexHandle?: never };

/** The shape object as the addon reads it. */
export interface NativeShape {
  batch: number;
  seqLen: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
  kvLen?: number;
  queryOffset?: number;
}

/** Options as the addon reads them (see attention_binding.cc). */
export interface NativeAttentionOptions {
  mask?: MaskSpec;
  blockMask?: NativeHandle;
  scale?: number;
  softcap?: number;
  impl?: 'fused' | 'eager';
  device?: 'cpu' | 'cuda';
  isa?: 'auto' | 'avx512' | 'avx2' | 'generic';
  blockSize?: number;
  save?: boolean;
  saved?: NativeHandle;
  dLse?: Float32Array;
  backwardSplit?: 'auto' | 'blocks' | 'groups';
}

/** Native forward result; `saved` only with `save: true`. */
export interface NativeForwardResult extends AttentionForwardResult {
  saved?: NativeHandle;
}

/** A block mask as the addon returns it. */
export interface NativeBlockMask {
  batch: number;
  blockSize: number;
  qBlocks: number;
  kvBlocks: number;
  states: Uint8Array;
  counts: { empty: number; partial: number; full: number };
  signature: string;
  handle: NativeHandle;
}

/** Functions of native/addon/attention_binding.cc. */
export interface AttentionAddon {
  attentionForward(q: Float32Array, k: Float32Array, v: Float32Array, sinks: Float32Array | null, shape: NativeShape,
    opts: NativeAttentionOptions): NativeForwardResult;
  attentionForwardAsync(q: Float32Array, k: Float32Array, v: Float32Array, sinks: Float32Array | null, shape: NativeShape,
    opts: NativeAttentionOptions): Promise<NativeForwardResult>;
  attentionBackward(q: Float32Array, k: Float32Array, v: Float32Array, sinks: Float32Array | null, out: Float32Array,
    lse: Float32Array, dOut: Float32Array, shape: NativeShape, opts: NativeAttentionOptions): AttentionGradients;
  attentionBackwardAsync(q: Float32Array, k: Float32Array, v: Float32Array, sinks: Float32Array | null, out: Float32Array,
    lse: Float32Array, dOut: Float32Array, shape: NativeShape, opts: NativeAttentionOptions): Promise<AttentionGradients>;
  attentionReleaseSaved(saved: NativeHandle): void;
  attentionBlockMask(mask: MaskSpec | undefined, shape: NativeShape, blockSize: number | undefined): NativeBlockMask;
  attentionDenseMask(mask: MaskSpec | undefined, shape: NativeShape): Uint8Array;
  attentionInfo(): { isa: string; isas: string[]; cudaKernels: boolean; defaultBlockSize: number; maxHeadDim: number };
}

/** The addon with the attention functions. */
export function attentionAddon(): AttentionAddon {
  return loadAddon<AttentionAddon>();
}
