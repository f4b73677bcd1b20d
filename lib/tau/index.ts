/**
 * The dual-control tau world: messages, tools, tasks, the episode driver (tau2's orchestrator),
 * tau2-compatible grading and pass^k, user simulators, agents, and the retail and telecom domains.
 * @module
 */
export * from './action.js';
export * from './agents.js';
export * from './cow.js';
export * from './domain.js';
export * from './episode.js';
export * from './evaluate.js';
export * from './messages.js';
export * from './prompts.js';
export * from './pyjson.js';
export * from './reward-explanation.js';
export * from './rng.js';
export * from './task.js';
export * from './task-kind.js';
export * from './tools.js';
export * from './users/llm.js';
export * from './users/types.js';
export * from './domains/retail/index.js';
export * from './domains/telecom/index.js';
