/**
 * `sinkflex-rl/attention`: sink-aware attention (gpt-oss style learned per-head sinks) with
 * composable masks, fused and eager implementations on CPU and CUDA, forward and backward.
 * @packageDocumentation
 */
export { BlockMask, createBlockMask, createMask, type BlockState, type DenseMask } from './block-mask.js';
export {
  sinkAttentionBackward,
  sinkAttentionBackwardAsync,
  sinkAttentionForward,
  sinkAttentionForwardAsync,
} from './functional.js';
export { attentionInfo, type AttentionInfo } from './info.js';
export {
  allKeys,
  and,
  causal,
  describeMask,
  documents,
  maskFromOptions,
  not,
  or,
  prefix,
  slidingWindow,
} from './masks.js';
export { SinkAttention, type SinkAttentionBackwardOptions, type SinkAttentionOptions } from './sink-attention.js';
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
