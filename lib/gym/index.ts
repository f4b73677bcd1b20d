/**
 * A TypeScript port of Gymnasium's core API: environments and wrappers, spaces, the registry
 * with `make`, the environment checker, vector environments (sync and worker threads), a seeded
 * generator, and the built-in `sinkflex/CartPole-v1`.
 * @module
 */
export * from './types.js';
export * from './errors.js';
export { logger, captureWarnings, captureWarningsAsync, setWarningHandler, defaultWarningHandler, type WarningHandler, type WarningKind } from './logger.js';
export { RandomGenerator, npRandom, randomSeed, seedToBigInt, splitMix64, type ChoiceOptions, type RandomState, type Seed } from './random.js';
export {
  EnvBase,
  Env,
  Wrapper,
  ObservationWrapper,
  ActionWrapper,
  RewardWrapper,
  TransformObservation,
  TransformAction,
  TransformReward,
  type SetWrapperAttrOptions,
} from './core.js';
export {
  AsyncEnv,
  AsyncWrapper,
  AsyncObservationWrapper,
  AsyncActionWrapper,
  AsyncRewardWrapper,
  SyncToAsyncEnv,
  toAsyncEnv,
  type AnyEnv,
} from './async-core.js';
export * from './spaces/index.js';
export * from './wrappers/index.js';
export {
  EnvSpec,
  ENV_ID_RE,
  findHighestVersion,
  findSpec,
  getEnvId,
  importEntryPoint,
  loadEntryPoint,
  make,
  makeAsync,
  namespace,
  parseEnvId,
  pprintRegistry,
  provideEntryPoint,
  register,
  registry,
  resolveModuleSpecifier,
  spec,
  type EnvCreator,
  type EnvKwargs,
  type EnvSpecInit,
  type MakeOptions,
  type WrapperCreator,
  type WrapperSpec,
} from './registration.js';
export { checkEnv, checkAsyncEnv, checkSpaceLimit, type CheckEnvOptions } from './utils/env-checker.js';
export { dataEquivalence } from './utils/data-equivalence.js';
export { checkObs, checkSpace, checkResetResult, checkStepResult, checkRenderMetadata, checkRenderResult } from './utils/passive-checks.js';
export * from './vector/index.js';
export * from './envs/index.js';
