import { type DeviceTensor } from '../native/index.js';
import { loadAddon } from '../native/loader.js';
import type {
  AttentionForwardResult,
  AttentionGradients,
  AttentionTensor,
  DeviceAttentionForwardResult,
  DeviceAttentionGradients,
  MaskSpec,
} from './types.js';

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
  /** `'cpu'`, `'cuda'` or `'cuda:<k>'`. */
  device?: string;
  isa?: 'auto' | 'avx512' | 'avx2' | 'generic';
  blockSize?: number;
  save?: boolean;
  saved?: NativeHandle;
  dLse?: Float32Array | DeviceTensor;
  backwardSplit?: 'auto' | 'blocks' | 'groups';
}

/** Native forward result (DeviceTensors for DeviceTensor inputs); `saved` only with `save: true`. */
export type NativeForwardResult = (AttentionForwardResult | DeviceAttentionForwardResult) & { saved?: NativeHandle };

/** Native backward result (DeviceTensors for DeviceTensor inputs). */
export type NativeGradients = AttentionGradients | DeviceAttentionGradients;

/** sinks and lse may be Float32Arrays also when the main tensors are DeviceTensors. */
type Small = Float32Array | DeviceTensor;

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
  attentionForward(
    q: AttentionTensor,
    k: AttentionTensor,
    v: AttentionTensor,
    sinks: Small | null,
    shape: NativeShape,
    opts: NativeAttentionOptions,
  ): NativeForwardResult;
  attentionForwardAsync(
    q: AttentionTensor,
    k: AttentionTensor,
    v: AttentionTensor,
    sinks: Small | null,
    shape: NativeShape,
    opts: NativeAttentionOptions,
  ): Promise<NativeForwardResult>;
  attentionBackward(
    q: AttentionTensor,
    k: AttentionTensor,
    v: AttentionTensor,
    sinks: Small | null,
    out: AttentionTensor,
    lse: Small,
    dOut: AttentionTensor,
    shape: NativeShape,
    opts: NativeAttentionOptions,
  ): NativeGradients;
  attentionBackwardAsync(
    q: AttentionTensor,
    k: AttentionTensor,
    v: AttentionTensor,
    sinks: Small | null,
    out: AttentionTensor,
    lse: Small,
    dOut: AttentionTensor,
    shape: NativeShape,
    opts: NativeAttentionOptions,
  ): Promise<NativeGradients>;
  attentionReleaseSaved(saved: NativeHandle): void;
  attentionBlockMask(mask: MaskSpec | undefined, shape: NativeShape, blockSize: number | undefined): NativeBlockMask;
  attentionDenseMask(mask: MaskSpec | undefined, shape: NativeShape): Uint8Array;
  attentionInfo(): {
    isa: string;
    isas: string[];
    cudaKernels: boolean;
    cudaMaxFusedHeadDim: number | null;
    defaultBlockSize: number;
    maxHeadDim: number;
  };
}

/** The addon with the attention functions. */
export function attentionAddon(): AttentionAddon {
  return loadAddon<AttentionAddon>();
}
