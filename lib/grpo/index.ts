/**
 * `sinkflex-rl/grpo`: GRPO without a value model: group-relative advantages and the clipped
 * policy loss with VERL-compatible numerics, computed by native kernels.
 * @packageDocumentation
 */
export {
  broadcastAdvantages,
  broadcastAdvantagesAsync,
  computeAdvantages,
  computeAdvantagesAsync,
  type AdvantageEstimator,
  type AdvantageOptions,
  type BroadcastOptions,
} from './advantages.js';
export type { GrpoFloats } from './native.js';
export {
  policyLoss,
  policyLossAsync,
  type KlType,
  type LossAggMode,
  type PolicyLossInputs,
  type PolicyLossMetrics,
  type PolicyLossOptions,
  type PolicyLossResult,
  type PolicyLossShape,
} from './policy-loss.js';
