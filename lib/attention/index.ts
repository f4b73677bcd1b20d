/**
 * Sink-aware attention (gpt-oss style learned per-head sinks) with composable masks, fused
 * and eager CPU implementations, forward and backward.
 * @packageDocumentation
 */
export type {
  AttentionBackwardOptions,
  AttentionForwardResult,
  AttentionGradients,
  AttentionImpl,
  AttentionMask,
  AttentionOptions,
  AttentionShape,
  AttentionTensor,
  BackwardSplit,
  CpuKernel,
  DeviceAttentionForwardResult,
  DeviceAttentionGradients,
  MaskPredicate,
  MaskSpec,
} from './types.js';
export {
  allKeys,
  and,
  andMasks,
  causal,
  describeMask,
  documents,
  isMaskPredicate,
  maskFromOptions,
  not,
  notMask,
  or,
  orMasks,
  prefix,
  slidingWindow,
} from './masks.js';
export { BlockMask, createBlockMask, createMask, type BlockState, type DenseMask } from './block-mask.js';
export {
  resolveAttentionDevice,
  sinkAttentionBackward,
  sinkAttentionBackwardAsync,
  sinkAttentionForward,
  sinkAttentionForwardAsync,
} from './functional.js';
export { SinkAttention, type SinkAttentionBackwardOptions, type SinkAttentionOptions } from './sink-attention.js';
export { attentionInfo, type AttentionInfo } from './info.js';
