/**
 * Vector environments (Gymnasium's `gymnasium.vector`).
 * @module
 */
export { SyncVectorEnv, type SyncVectorEnvOptions } from './sync-vector-env.js';
export { AsyncVectorEnv, WORKER_URL, type AsyncVectorEnvOptions, type WaitOptions } from './async-vector-env.js';
export {
  VectorEnvBase,
  expandSeeds,
  splitResetMask,
  type VectorEnvOptions,
  type VectorResetArgs,
  type VectorResetResult,
  type VectorSeed,
  type VectorStepResult,
} from './vector-env.js';
export { addInfo } from './info.js';
export { makeVec, type MakeVecOptions } from './make-vec.js';
export { resolveEnvSource, type EnvSource, type IdEnvSource, type ModuleEnvSource } from './protocol.js';
