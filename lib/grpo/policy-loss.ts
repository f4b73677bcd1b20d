import type { DeviceRequest } from '../native/device.js';
import { refuseUnknownOptions } from '../util/options.js';
import { grpoCallDevice } from './device.js';
import { grpoAddon, type GrpoFloats, type NativePolicyLossOptions, type NativePolicyLossResult } from './native.js';

/**
 * Token tensors of {@link policyLoss}, each `[batch, responseLen]` row-major. Values at masked
 * tokens (mask 0) are never used; at unmasked tokens they must be finite. `T` is `Float32Array`
 * (host arrays) or `DeviceTensor` (float32 tensors on one device: the call runs there and
 * `dLogProbs` is a DeviceTensor `[batch, responseLen]` on it; Float32Arrays mixed in are copied).
 */
export interface PolicyLossInputs<T extends GrpoFloats = Float32Array> {
  /** log pi(token) under the policy being trained; the gradient is taken with respect to it. */
  logProbs: T;
  /** log pi_old(token) of the policy that sampled the rollout. */
  oldLogProbs: T;
  /** Token advantages (`[batch, responseLen]`), or one per response (`[batch]`, broadcast over tokens). */
  advantages: T;
  /** 1 for tokens in the loss (model-generated), 0 otherwise (prompt, tool output, padding). */
  responseMask: T;
  /** log pi_ref(token) of the reference policy; enables the KL loss term. */
  refLogProbs?: T;
  /** Per-token entropy of the policy, aggregated into `actor/entropy` (an input: no gradient here). */
  entropy?: T;
}

/** The `[batch, responseLen]` shape of the token tensors. */
export interface PolicyLossShape {
  /** Responses (rows), >= 1. */
  batch: number;
  /** Tokens per response (columns), >= 1. */
  responseLen: number;
}

/**
 * KL-to-reference estimator (VERL's `kl_loss_type`; VERL's names `kl`, `mse`, `low_var_kl` are
 * accepted as aliases of `k1`, `k2`, `k3`): with d = logp - ref,
 * `k1` = d, `k2` = d^2 / 2, `abs` = |d|, `k3` = e^(-d') + d' - 1 clamped to [-10, 10] where
 * d' = clamp(d, -20, 20).
 */
export type KlType = 'k1' | 'k2' | 'k3' | 'abs' | 'kl' | 'mse' | 'low_var_kl';

/**
 * VERL's `loss_agg_mode` (m mask, l per-token loss, B rows with an unmasked token):
 * `token-mean` sum(m l) / sum(m); `seq-mean-token-sum` sum_i sum_t m l / B;
 * `seq-mean-token-mean` sum_i (sum_t m l / (sum_t m + 1e-8)) / B;
 * `seq-mean-token-sum-norm` sum(m l) / lossScale.
 */
export type LossAggMode = 'token-mean' | 'seq-mean-token-sum' | 'seq-mean-token-mean' | 'seq-mean-token-sum-norm';

/** Options of {@link policyLoss}; defaults are VERL's. */
export interface PolicyLossOptions {
  /** The ratio is clipped below at 1 - clipLow; in [0, 1]. Default 0.2. */
  clipLow?: number;
  /** The ratio is clipped above at 1 + clipHigh; >= 0. Default 0.2 (DAPO's clip-higher: 0.28). */
  clipHigh?: number;
  /** Dual-clip bound c: where A < 0 the loss is at most -A c; must be > 1. Default 3. */
  dualClipC?: number;
  /** KL estimator; needs `refLogProbs`. Default `'k3'` when `refLogProbs` is given. */
  klType?: KlType;
  /** Weight of the KL term; >= 0. Default 0.001 with `refLogProbs` (VERL's kl_loss_coef), else 0. */
  klCoef?: number;
  /** Weight of the entropy bonus (subtracted); nonzero needs `entropy`. Default 0. */
  entropyCoef?: number;
  /** Default `'token-mean'`. */
  aggMode?: LossAggMode;
  /** Divisor of `seq-mean-token-sum-norm` (> 0); other modes ignore it. Default responseLen. */
  lossScale?: number;
  /** Divisor of `token-mean` instead of this batch's unmasked-token count (micro-batches of a larger batch). */
  globalTokenCount?: number;
  /** Divisor of `seq-mean-token-sum` and `seq-mean-token-mean` instead of this batch's non-empty rows. */
  globalSeqCount?: number;
  /** Where to run; default `SINKFLEX_DEVICE`, else `'auto'`; DeviceTensor inputs run on their device. */
  device?: DeviceRequest;
  /** Float32Array calls only: write dLogProbs here (length batch * responseLen, not overlapping the inputs) instead of a new array; on an error it may be partly written. */
  out?: Float32Array;
}

/** VERL's actor metrics of one loss evaluation. */
export interface PolicyLossMetrics {
  /** The aggregated clipped policy-gradient loss. */
  'actor/pg_loss': number;
  /** Fraction of unmasked tokens where the clipped term is the larger. */
  'actor/pg_clipfrac': number;
  /** Fraction of unmasked tokens where A < 0 and the dual clip bounds the loss. */
  'actor/pg_clipfrac_lower': number;
  /** Mean over unmasked tokens of -(clamp(logp - oldLogp, -20, 20)). */
  'actor/ppo_kl': number;
  /** The aggregated KL estimate (before klCoef); present with `refLogProbs`. */
  'actor/kl_loss'?: number;
  /** The aggregated entropy (before entropyCoef); present with `entropy`. */
  'actor/entropy'?: number;
}

/** What {@link policyLoss} returns (`T`: the inputs' kind). */
export interface PolicyLossResult<T extends GrpoFloats = Float32Array> {
  /** pg_loss + klCoef * kl_loss - entropyCoef * entropy. */
  loss: number;
  /** d loss / d logProbs, `[batch, responseLen]`; 0 at masked tokens and where a clamp or clip is active. */
  dLogProbs: T;
  /** VERL-named metrics. */
  metrics: PolicyLossMetrics;
}

const LOSS_KEYS = [
  'clipLow',
  'clipHigh',
  'dualClipC',
  'klType',
  'klCoef',
  'entropyCoef',
  'aggMode',
  'lossScale',
  'globalTokenCount',
  'globalSeqCount',
  'device',
  'out',
] as const;
const INPUT_KEYS = ['logProbs', 'oldLogProbs', 'advantages', 'responseMask', 'refLogProbs', 'entropy'] as const;

function nativeLossOptions<T extends GrpoFloats>(
  inp: PolicyLossInputs<T>,
  opts: PolicyLossOptions | undefined,
): NativePolicyLossOptions {
  if (inp !== null) refuseUnknownOptions(inp, INPUT_KEYS, 'policyLoss', 'inp');
  if (opts !== null) refuseUnknownOptions(opts, LOSS_KEYS, 'policyLoss', 'opts');
  const inputs = inp !== null && typeof inp === 'object' ? INPUT_KEYS.map((k) => inp[k]) : [];
  return { ...opts, device: grpoCallDevice(inputs, opts?.device) };
}

function toResult<T extends GrpoFloats>(r: NativePolicyLossResult): PolicyLossResult<T> {
  return { loss: r.loss, dLogProbs: r.dLogProbs as T, metrics: r.metrics as unknown as PolicyLossMetrics };
}

/**
 * The GRPO/PPO clipped policy loss with VERL's numerics (`compute_policy_loss_vanilla`, dual
 * clip, `kl_loss`, entropy bonus, `agg_loss`) and its exact gradient with respect to `logProbs`,
 * in one fused pass over the tokens. Per unmasked token, with A the advantage:
 * `rho = exp(clamp(logp - oldLogp, -20, 20))`,
 * `l = max(-A rho, -A clip(rho, 1 - clipLow, 1 + clipHigh))`, and where A < 0 `l = min(l, -A c)`.
 * Sums run in double in an order fixed by the shape, so results do not depend on the thread count.
 * On a GPU (`device: 'cuda'` or CUDA DeviceTensor inputs) one fused kernel pass computes the loss
 * terms and the gradient (fp32 per token, block sums in double added in block order on the host).
 *
 * @throws TypeError for wrong argument types; RangeError for length mismatches, an empty batch,
 *   mask values other than 0 and 1, NaN/Infinity at unmasked tokens, bad option values.
 * @example
 * ```ts
 * const { loss, dLogProbs, metrics } = policyLoss(
 *   { logProbs, oldLogProbs, advantages, responseMask },
 *   { batch: 8, responseLen: 512 },
 *   { clipHigh: 0.28, aggMode: 'token-mean' },
 * );
 * ```
 */
export function policyLoss<T extends GrpoFloats = Float32Array>(
  inp: PolicyLossInputs<T>,
  shape: PolicyLossShape,
  opts?: PolicyLossOptions,
): PolicyLossResult<T> {
  return toResult<T>(grpoAddon().grpoPolicyLoss(inp, shape, nativeLossOptions(inp, opts)));
}

/**
 * {@link policyLoss} off the JavaScript thread. Do not modify the input arrays until the
 * promise settles; errors reject the promise.
 */
export async function policyLossAsync<T extends GrpoFloats = Float32Array>(
  inp: PolicyLossInputs<T>,
  shape: PolicyLossShape,
  opts?: PolicyLossOptions,
): Promise<PolicyLossResult<T>> {
  return toResult<T>(await grpoAddon().grpoPolicyLossAsync(inp, shape, nativeLossOptions(inp, opts)));
}
