/**
 * `sinkflex-rl/rollout`: the rollout dataflow: a DataProto-like batch, the token-level and
 * message-level policy interfaces with their adapters and the scripted experts, the concurrent
 * agent loop over the tau Gym environments, the evaluation of a policy (mean reward, pass^k),
 * trajectory export in OpenAI chat format, DAPO dynamic sampling, balanced token-budget packing.
 * @packageDocumentation
 */
export {
  AgentLoop,
  type AgentLoopLimits,
  type AgentLoopOptions,
  type AgentLoopSampling,
  type RolloutJob,
  type RolloutRequest,
  type TokenizationSanityCheck,
} from './agent-loop.js';
export { episodesToDataProto, groupIds, rolloutMetrics, type EpisodesToDataProtoOptions } from './batch.js';
export { ChatTokenPolicy } from './chat-token-policy.js';
export {
  DataProto,
  DataProtoError,
  type DataProtoInit,
  type DataProtoItem,
  type SelectKeys,
  type TensorColumn,
  type TensorData,
  type TensorInput,
} from './data-proto.js';
export { DynamicSamplingError, generateWithDynamicSampling, type DynamicSamplingOptions } from './dynamic-sampling.js';
export type { EpisodeEnd, EpisodeRecord, TokenizationCheck } from './episode-record.js';
export {
  evaluatePolicy,
  type EvaluatePolicyOptions,
  type EvaluationResult,
  type KindEvaluation,
  type TaskEvaluation,
} from './evaluate.js';
export {
  ExpertChatPolicy,
  ExpertTokenPolicy,
  tauMessageOf,
  type ExpertPolicyOptions,
  type TaskLookup,
} from './expert-policy.js';
export { ModelChatPolicy } from './model-chat-policy.js';
export { packMicroBatches, unpackDocuments, type PackedMicroBatch, type PackOptions } from './packing.js';
export {
  balanceBatch,
  greedyPartition,
  karmarkarKarp,
  partitionByBudget,
  type BalanceOptions,
  type BalanceResult,
  type PartitionMethod,
} from './partition.js';
export {
  generateBatch,
  type ChatConversation,
  type ChatPolicy,
  type ChatPolicyRequest,
  type ChatSampleParams,
  type ChatTurn,
  type SessionContext,
  type SampleOptions,
  type TokenPolicy,
  type TokenSampleRequest,
  type TokenSampleResult,
  type TokenSession,
} from './policy.js';
export {
  CompletionTokenPolicy,
  type CompletionTokenPolicyOptions,
  type TokenCompletion,
  type TokenCompletionRequest,
  type TokenCompletions,
} from './completion-token-policy.js';
export { GenerationScheduler, type SchedulerStats } from './scheduler.js';
export { mixSeed } from './seeds.js';
export { trajectoriesToJsonl, writeTrajectories, type ExportOptions } from './trajectory-export.js';
export { rawActionText } from './turns.js';
