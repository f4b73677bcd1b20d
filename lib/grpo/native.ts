/**
 * The GRPO functions of the native addon (native/addon/grpo_binding.cc), as the typed API in
 * this folder calls them. Options reach the addon already resolved (`device` is a concrete
 * device); the addon checks types and values again and throws TypeError/RangeError.
 */
import type { CoreAddon } from '../native/addon-types.js';
import { loadAddon } from '../native/loader.js';

/** A concrete device a GRPO kernel runs on. */
export type GrpoNativeDevice = 'cpu' | 'cuda';

/** Options of `grpoAdvantages` as the addon reads them. */
export interface NativeAdvantageOptions {
  estimator?: string;
  normByStd?: boolean;
  eps?: number;
  device: GrpoNativeDevice;
  out?: Float32Array;
}

/** Options of `grpoBroadcast`. */
export interface NativeBroadcastOptions {
  device: GrpoNativeDevice;
  out?: Float32Array;
}

/** Token inputs of `grpoPolicyLoss`. */
export interface NativePolicyLossInputs {
  logProbs: Float32Array;
  oldLogProbs: Float32Array;
  advantages: Float32Array;
  responseMask: Float32Array;
  refLogProbs?: Float32Array;
  entropy?: Float32Array;
}

/** Options of `grpoPolicyLoss`. */
export interface NativePolicyLossOptions {
  clipLow?: number;
  clipHigh?: number;
  dualClipC?: number;
  klType?: string;
  klCoef?: number;
  entropyCoef?: number;
  aggMode?: string;
  lossScale?: number;
  globalTokenCount?: number;
  globalSeqCount?: number;
  device: GrpoNativeDevice;
  out?: Float32Array;
}

/** What `grpoPolicyLoss` returns. */
export interface NativePolicyLossResult {
  loss: number;
  dLogProbs: Float32Array;
  metrics: Record<string, number>;
}

/** The addon's GRPO entry points. */
export interface GrpoAddon {
  /** Devices with GRPO kernels in this build (`['cpu']`, plus `'cuda'` once it has CUDA kernels). */
  grpoDevices(): string[];
  grpoAdvantages(rewards: Float32Array, groupIds: Int32Array, opts: NativeAdvantageOptions): Float32Array;
  grpoAdvantagesAsync(rewards: Float32Array, groupIds: Int32Array, opts: NativeAdvantageOptions): Promise<Float32Array>;
  grpoBroadcast(adv: Float32Array, responseMask: Float32Array, batch: number, responseLen: number, opts: NativeBroadcastOptions): Float32Array;
  grpoBroadcastAsync(
    adv: Float32Array,
    responseMask: Float32Array,
    batch: number,
    responseLen: number,
    opts: NativeBroadcastOptions,
  ): Promise<Float32Array>;
  grpoPolicyLoss(
    inp: NativePolicyLossInputs,
    shape: { batch: number; responseLen: number },
    opts: NativePolicyLossOptions,
  ): NativePolicyLossResult;
  grpoPolicyLossAsync(
    inp: NativePolicyLossInputs,
    shape: { batch: number; responseLen: number },
    opts: NativePolicyLossOptions,
  ): Promise<NativePolicyLossResult>;
  /** Which build of the CPU token kernel runs: `'avx512'`, `'avx2'` or `'generic'` (SSE2/NEON/portable). */
  grpoKernelIsa(): string;
  /** dst.set(src) with the kernel thread pool: the benchmarks' memory-bandwidth baseline. */
  grpoCopy(dst: Float32Array, src: Float32Array): void;
}

/** The addon typed with its GRPO functions. */
export function grpoAddon(): GrpoAddon & CoreAddon {
  return loadAddon<GrpoAddon>();
}
