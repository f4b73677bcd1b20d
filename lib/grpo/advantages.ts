import type { DeviceRequest } from '../native/device.js';
import { refuseUnknownOptions } from '../util/options.js';
import { grpoCallDevice } from './device.js';
import { grpoAddon, type GrpoFloats, type NativeAdvantageOptions } from './native.js';

/**
 * How a group's rewards become advantages (VERL's `adv_estimator`):
 * - `'grpo'`: `(r - mean_g) / (std_g + eps)` with the unbiased std; `r - mean_g` when
 *   `normByStd` is false (Dr. GRPO). A group of one has mean 0 and std 1.
 * - `'rloo'`: `n / (n - 1) * (r - mean_g)` (= r minus the mean of the others). A group of one has
 *   no leave-one-out baseline and keeps its reward, as in VERL. `normByStd` and `eps` do not apply.
 * - `'grpo_passk'`: only the best response of a group (the lowest index among equal maxima) gets
 *   `(r_max - r_second) / (std_g + eps)` (or `r_max - r_second` without `normByStd`); the others
 *   get 0. Every group needs at least 2 responses.
 */
export type AdvantageEstimator = 'grpo' | 'rloo' | 'grpo_passk';

/** Options of {@link computeAdvantages}. */
export interface AdvantageOptions {
  /** Default `'grpo'`. */
  estimator?: AdvantageEstimator;
  /** Divide by `std_g + eps` (grpo, grpo_passk). Default true. */
  normByStd?: boolean;
  /** Added to the std; finite and >= 0. Default 1e-6 (VERL). */
  eps?: number;
  /**
   * Where to run; default `SINKFLEX_DEVICE`, else `'auto'`. With a DeviceTensor `rewards` the
   * call runs on its device (an explicit `'cpu'`/`'cuda'` must match it).
   */
  device?: DeviceRequest;
  /** Float32Array calls only: write the result here (length = rewards.length, not overlapping the inputs) instead of a new array; on an error it may be partly written. */
  out?: Float32Array;
}

const ADVANTAGE_KEYS = ['estimator', 'normByStd', 'eps', 'device', 'out'] as const;

function nativeAdvantageOptions(rewards: GrpoFloats, opts: AdvantageOptions | undefined): NativeAdvantageOptions {
  if (opts !== null) refuseUnknownOptions(opts, ADVANTAGE_KEYS, 'computeAdvantages', 'opts');
  return { ...opts, device: grpoCallDevice([rewards], opts?.device) };
}

/**
 * One advantage per response from its scalar reward and its group (VERL's GRPO-family outcome
 * estimators; statistics in double precision, in index order, so results are reproducible).
 *
 * On a GPU (`device: 'cuda'`, or `rewards` a CUDA DeviceTensor) one block per group reduces
 * in double with a fixed tree, so results equal the CPU's to float rounding.
 *
 * @param rewards one finite reward per response (at least one): a Float32Array, or a float32
 *   DeviceTensor (the result is then a DeviceTensor on its device).
 * @param groupIds the group of each response: any integers, unsorted, not necessarily contiguous;
 *   responses to the same task instance share one.
 * @returns a new Float32Array (or `opts.out`) of `rewards.length` advantages; a DeviceTensor `[n]` for a DeviceTensor `rewards`.
 * @throws TypeError for wrong argument types; RangeError for length mismatches, an empty batch,
 *   NaN/Infinity rewards, bad option values, or a group of one under `'grpo_passk'`.
 * @example
 * ```ts
 * const adv = computeAdvantages(new Float32Array([1, 0, 0.5, 1]), new Int32Array([7, 7, 9, 9]));
 * ```
 */
export function computeAdvantages<T extends GrpoFloats>(rewards: T, groupIds: Int32Array, opts?: AdvantageOptions): T {
  return grpoAddon().grpoAdvantages(rewards, groupIds, nativeAdvantageOptions(rewards, opts)) as T;
}

/**
 * {@link computeAdvantages} off the JavaScript thread. Do not modify the input arrays until the
 * promise settles; errors reject the promise.
 */
export async function computeAdvantagesAsync<T extends GrpoFloats>(
  rewards: T,
  groupIds: Int32Array,
  opts?: AdvantageOptions,
): Promise<T> {
  return (await grpoAddon().grpoAdvantagesAsync(rewards, groupIds, nativeAdvantageOptions(rewards, opts))) as T;
}

/** Options of {@link broadcastAdvantages}. */
export interface BroadcastOptions {
  /** Where to run; default `SINKFLEX_DEVICE`, else `'auto'`; DeviceTensor inputs run on their device. */
  device?: DeviceRequest;
  /** Float32Array calls only: write the result here (length batch * responseLen, not overlapping the inputs); on an error it may be partly written. */
  out?: Float32Array;
}

const BROADCAST_KEYS = ['device', 'out'] as const;

/**
 * Token advantages: `out[i * responseLen + t] = adv[i] * responseMask[i * responseLen + t]`
 * (`[batch, responseLen]`, row-major), as VERL multiplies the scalar advantage by the mask.
 * Either input may be a float32 DeviceTensor: the call then runs on its device and returns a
 * DeviceTensor `[batch, responseLen]` there (Float32Array inputs are copied to it).
 *
 * @param adv one finite advantage per response (length `batch`).
 * @param responseMask 0/1 per token (length `batch * responseLen`).
 * @throws RangeError for length mismatches, non-finite advantages, mask values other than 0 and 1.
 */
export function broadcastAdvantages(
  adv: Float32Array,
  responseMask: Float32Array,
  batch: number,
  responseLen: number,
  opts?: BroadcastOptions,
): Float32Array;
export function broadcastAdvantages(
  adv: GrpoFloats,
  responseMask: GrpoFloats,
  batch: number,
  responseLen: number,
  opts?: BroadcastOptions,
): GrpoFloats;
export function broadcastAdvantages(
  adv: GrpoFloats,
  responseMask: GrpoFloats,
  batch: number,
  responseLen: number,
  opts?: BroadcastOptions,
): GrpoFloats {
  if (opts !== null) refuseUnknownOptions(opts, BROADCAST_KEYS, 'broadcastAdvantages', 'opts');
  return grpoAddon().grpoBroadcast(adv, responseMask, batch, responseLen, {
    ...opts,
    device: grpoCallDevice([adv, responseMask], opts?.device),
  });
}

/** {@link broadcastAdvantages} off the JavaScript thread (inputs must stay unmodified until it settles). */
export async function broadcastAdvantagesAsync(
  adv: Float32Array,
  responseMask: Float32Array,
  batch: number,
  responseLen: number,
  opts?: BroadcastOptions,
): Promise<Float32Array>;
export async function broadcastAdvantagesAsync(
  adv: GrpoFloats,
  responseMask: GrpoFloats,
  batch: number,
  responseLen: number,
  opts?: BroadcastOptions,
): Promise<GrpoFloats>;
export async function broadcastAdvantagesAsync(
  adv: GrpoFloats,
  responseMask: GrpoFloats,
  batch: number,
  responseLen: number,
  opts?: BroadcastOptions,
): Promise<GrpoFloats> {
  if (opts !== null) refuseUnknownOptions(opts, BROADCAST_KEYS, 'broadcastAdvantages', 'opts');
  return grpoAddon().grpoBroadcastAsync(adv, responseMask, batch, responseLen, {
    ...opts,
    device: grpoCallDevice([adv, responseMask], opts?.device),
  });
}
