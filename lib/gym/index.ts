/**
 * `sinkflex-rl/gym`: a TypeScript port of Gymnasium's core API (`import * as gym from
 * 'sinkflex-rl/gym'`): environments and wrappers (sync and async), spaces, the registry with
 * `make`, the environment checker, vector environments (sync and worker threads), a seeded
 * generator, the built-in `sinkflex/CartPole-v1`, and the tau worlds as environments
 * (`sinkflex/TauRetail-v0`, `sinkflex/TauTelecom-v0`, `sinkflex/TauAirline-v0`).
 * @packageDocumentation
 */
import './envs/builtin.js';

export {
  AsyncActionWrapper,
  AsyncEnv,
  AsyncObservationWrapper,
  AsyncRewardWrapper,
  AsyncWrapper,
  SyncToAsyncEnv,
  toAsyncEnv,
  type AnyEnv,
} from './async-core.js';
export {
  ActionWrapper,
  Env,
  EnvBase,
  ObservationWrapper,
  RewardWrapper,
  TransformAction,
  TransformObservation,
  TransformReward,
  Wrapper,
  type SetWrapperAttrOptions,
} from './core.js';
export { CartPoleEnv, type CartPoleOptions } from './envs/cartpole.js';
export {
  buildTauWorld,
  loadTauWorld,
  TauWorld,
  type GeneratedTaskSource,
  type Tau2TaskSource,
  type TauDomainName,
  type TauTaskSource,
} from './envs/tau-world.js';
export {
  AsyncTauEnv,
  createTauEnv,
  TauEnv,
  type TauEnvAction,
  type TauEnvOptions,
  type TauEnvView,
  type TauObservation,
  type TauResetOptions,
  type TauUserOptions,
} from './envs/tau.js';
export {
  AlreadyPendingCallError,
  ClosedEnvironmentError,
  DeprecatedEnv,
  EnvCheckError,
  GymError,
  NameNotFound,
  NamespaceNotFound,
  NoAsyncCallError,
  NotImplementedError,
  RegistrationError,
  ResetNeeded,
  UnregisteredEnv,
  VectorEnvError,
  VersionNotFound,
  WorkerExitedError,
  WorkerTimeoutError,
  type SubEnvFailure,
} from './errors.js';
export {
  captureWarnings,
  captureWarningsAsync,
  logger,
  setWarningHandler,
  type WarningHandler,
  type WarningKind,
} from './logger.js';
export { npRandom, RandomGenerator, type ChoiceOptions, type RandomState, type Seed } from './random.js';
export {
  EnvSpec,
  loadEntryPoint,
  make,
  makeAsync,
  namespace,
  pprintRegistry,
  register,
  registry,
  spec,
  type EnvCreator,
  type EnvKwargs,
  type EnvSpecInit,
  type MakeOptions,
  type WrapperCreator,
  type WrapperSpec,
} from './registration.js';
export { batchSpace, concatenate, iterate } from './spaces/batch.js';
export { Box, type BoxBound, type BoxOptions } from './spaces/box.js';
export {
  Dict,
  Tuple,
  type AnySpace,
  type CompositeOptions,
  type SpaceMask,
  type SpaceProbability,
  type SpaceValue,
} from './spaces/composite.js';
export { Discrete, type DiscreteOptions } from './spaces/discrete.js';
export type { JsonSchema, JsonType } from './spaces/json-schema.js';
export {
  Message,
  type ChatMessage,
  type ChatRole,
  type ChatToolCall,
  type MessageMask,
  type MessageOptions,
  type ToolInput,
  type ToolSpec,
} from './spaces/message.js';
export { MultiBinary, type MultiBinaryOptions } from './spaces/multi-binary.js';
export {
  MultiDiscrete,
  type IntDType,
  type MultiDiscreteMask,
  type MultiDiscreteOptions,
} from './spaces/multi-discrete.js';
export type { NestedNumbers } from './spaces/nested.js';
export { Sequence, type SequenceLength, type SequenceOptions, type SequenceValue } from './spaces/sequence.js';
export { registerSpaceType, spaceFromJSON, type SpaceReviver } from './spaces/serialize.js';
export { Space, type DType, type SeedTree, type SpaceJSON, type TypedArrayMap } from './spaces/space.js';
export { Text, type TextMask, type TextOptions } from './spaces/text.js';
export {
  AutoresetMode,
  type EnvMetadata,
  type Info,
  type RenderFrame,
  type ResetArgs,
  type ResetResult,
  type RgbArray,
  type StepResult,
} from './types.js';
export { checkAsyncEnv, checkEnv, type CheckEnvOptions } from './utils/env-checker.js';
export { AsyncVectorEnv, type AsyncVectorEnvOptions, type WaitOptions } from './vector/async-vector-env.js';
export { makeVec, type MakeVecOptions } from './vector/make-vec.js';
export type { EnvSource, IdEnvSource, ModuleEnvSource } from './vector/protocol.js';
export { SyncVectorEnv, type SyncVectorEnvOptions } from './vector/sync-vector-env.js';
export {
  VectorEnvBase,
  type VectorEnvOptions,
  type VectorResetArgs,
  type VectorResetResult,
  type VectorSeed,
  type VectorStepResult,
} from './vector/vector-env.js';
export { AsyncOrderEnforcing, OrderEnforcing, type OrderEnforcingOptions } from './wrappers/order-enforcing.js';
export { AsyncPassiveEnvChecker, PassiveEnvChecker } from './wrappers/passive-env-checker.js';
export {
  AsyncRecordEpisodeStatistics,
  RecordEpisodeStatistics,
  type EpisodeStatistics,
  type RecordEpisodeStatisticsOptions,
} from './wrappers/record-episode-statistics.js';
export { AsyncTimeLimit, TimeLimit } from './wrappers/time-limit.js';
