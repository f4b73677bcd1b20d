/**
 * The rollout dataflow: a DataProto-like batch, the token-level policy interface (and the
 * message-level one with its adapter and the scripted experts), the concurrent agent loop
 * over the tau Gym environments, the evaluation of a policy (mean reward, pass^k), trajectory
 * export in OpenAI chat format, DAPO dynamic sampling, balanced token-budget packing.
 * @module
 */
export * from './data-proto.js';
export * from './deep-equal.js';
export * from './policy.js';
export * from './conversation-decoder.js';
export * from './chat-token-policy.js';
export * from './model-token-policy.js';
export * from './completion-token-policy.js';
export * from './expert-policy.js';
export * from './seeds.js';
export * from './scheduler.js';
export * from './turns.js';
export * from './episode-record.js';
export * from './agent-loop.js';
export * from './evaluate.js';
export * from './trajectory-export.js';
export * from './batch.js';
export * from './dynamic-sampling.js';
export * from './partition.js';
export * from './packing.js';
