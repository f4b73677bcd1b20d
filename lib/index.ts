/**
 * sinkflex-rl: reinforcement learning for long-horizon tool-use agents in dual-control
 * environments. The public API of every layer is re-exported here.
 * @packageDocumentation
 */
export * from './native/index.js';
export * from './attention/index.js';
export * from './tau/index.js';
export * from './model/index.js';
export * from './grpo/index.js';
export * as gym from './gym/index.js';
export { Env, AsyncEnv, Wrapper, AsyncWrapper, SyncVectorEnv, AsyncVectorEnv, AutoresetMode, EnvSpec, TauEnv, AsyncTauEnv, TauWorld, loadTauWorld, createTauEnv } from './gym/index.js';
export * from './rollout/index.js';
export * from './openai/index.js';
export * from './trainer/index.js';
