import { attentionAddon } from './native.js';

/** What the attention kernels of this process can use. */
export interface AttentionInfo {
  /** The CPU vector code `'auto'` picks: `'avx512'`, `'avx2'` or `'generic'`. */
  isa: string;
  /** Every CPU vector code this machine can run. */
  isas: string[];
  /** Whether CUDA attention kernels are compiled in and registered (a GPU may still be missing). */
  cudaKernels: boolean;
  /** Largest headDim of the CUDA fused kernels (`null` without CUDA kernels); eager takes up to `maxHeadDim`. */
  cudaMaxFusedHeadDim: number | null;
  /** Default block (tile) size of the fused kernels. */
  defaultBlockSize: number;
  /** Largest supported head dimension. */
  maxHeadDim: number;
}

/** Capabilities of the attention kernels (vector code, CUDA, limits). */
export function attentionInfo(): AttentionInfo {
  return attentionAddon().attentionInfo();
}
