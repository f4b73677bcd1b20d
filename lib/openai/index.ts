/**
 * Real LLMs: an OpenAI-compatible chat client and agent policy (the client side), and the
 * built-in policy served over an OpenAI-compatible HTTP API (the server side).
 * @module
 */
export * from './client.js';
export * from './tool-calls.js';
export * from './policy.js';
export * from './server-request.js';
export * from './chat-engine.js';
export * from './server.js';
export * from './server-stream.js';
export * from './completion-request.js';
export * from './completion-engine.js';
export * from './model-hosts.js';
export * from './serving-routes.js';
export * from './token-completions.js';
