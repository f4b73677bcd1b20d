/**
 * The GRPO functions of the native addon (native/addon/grpo_binding.cc), as the typed API in
 * this folder calls them. Options reach the addon already resolved (`device` is a concrete
 * device); the addon checks types and values again and throws TypeError/RangeError.
 */
import type { CoreAddon } from '../native/addon-types.js';
import type { DeviceTensor } from '../native/device-tensor.js';
import { loadAddon } from '../native/loader.js';

/** A float input of a GRPO kernel: host memory, or a float32 DeviceTensor (the call then runs on its device). */
export type GrpoFloats = Float32Array | DeviceTensor;

/** A concrete device a GRPO kernel runs on. */
export type GrpoNativeDevice = 'cpu' | 'cuda' | `cuda:${number}`;

/** Options of `grpoAdvantages` as the addon reads them. */
export interface NativeAdvantageOptions {
  estimator?: string;
  normByStd?: boolean;
  eps?: number;
  /** Absent: the DeviceTensor inputs' device. */
  device?: GrpoNativeDevice;
  out?: Float32Array;
}

/** Options of `grpoBroadcast`. */
export interface NativeBroadcastOptions {
  /** Absent: the DeviceTensor inputs' device. */
  device?: GrpoNativeDevice;
  out?: Float32Array;
}

/** Token inputs of `grpoPolicyLoss`. */
export interface NativePolicyLossInputs {
  logProbs: GrpoFloats;
  oldLogProbs: GrpoFloats;
  advantages: GrpoFloats;
  responseMask: GrpoFloats;
  refLogProbs?: GrpoFloats;
  entropy?: GrpoFloats;
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
  /** Absent: the DeviceTensor inputs' device. */
  device?: GrpoNativeDevice;
  out?: Float32Array;
}

/** What `grpoPolicyLoss` returns. */
export interface NativePolicyLossResult {
  loss: number;
  dLogProbs: GrpoFloats;
  metrics: Record<string, number>;
}

/** The addon's GRPO entry points. */
export interface GrpoAddon {
  /** Devices with GRPO kernels here: `['cpu']`, plus `'cuda'` when this build has the CUDA kernels and a GPU is usable. */
  grpoDevices(): string[];
  grpoAdvantages(rewards: GrpoFloats, groupIds: Int32Array, opts: NativeAdvantageOptions): GrpoFloats;
  grpoAdvantagesAsync(rewards: GrpoFloats, groupIds: Int32Array, opts: NativeAdvantageOptions): Promise<GrpoFloats>;
  grpoBroadcast(
    adv: GrpoFloats,
    responseMask: GrpoFloats,
    batch: number,
    responseLen: number,
    opts: NativeBroadcastOptions,
  ): GrpoFloats;
  grpoBroadcastAsync(
    adv: GrpoFloats,
    responseMask: GrpoFloats,
    batch: number,
    responseLen: number,
    opts: NativeBroadcastOptions,
  ): Promise<GrpoFloats>;
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
