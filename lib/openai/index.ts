/**
 * `sinkflex-rl/openai`: real LLMs: an OpenAI-compatible chat client and agent policy (the client
 * side), and the built-in policy served over an OpenAI-compatible HTTP API (the server side).
 * @packageDocumentation
 */
export { ChatEngine, type ChatEngineOptions, type CompleteOptions, type EngineResult } from './chat-engine.js';
export {
  OpenAIChatClient,
  OpenAIError,
  type CallOptions,
  type ChatCompletionChoice,
  type ChatCompletionRequest,
  type ChatCompletionResponse,
  type ChatCompletionResult,
  type CompletionResponse,
  type EndpointStats,
  type OpenAIClientOptions,
  type OpenAIErrorKind,
  type RoutingPolicy,
} from './client.js';
export { PretrainedAdapterHost, type AdapterHostStats, type PretrainedAdapterHostOptions } from './lora-host.js';
export {
  AdapterNotFoundError,
  transformerWeightsHost,
  type AdapterHost,
  type AdapterLoadResult,
  type WeightsHost,
} from './model-hosts.js';
export { OpenAIChatPolicy, type OpenAIPolicyOptions, type OpenAITurnLog, type SeedMode } from './policy.js';
export type { ChatRequest } from './server-request.js';
export {
  generationConfigDefaults,
  resolveSampling,
  type RequestedSampling,
  type ResolvedSampling,
  type SamplingDefaults,
} from './sampling-defaults.js';
export { startChatServer, type ChatServer, type ChatServerOptions } from './server.js';
export type { AdminEvent } from './serving-routes.js';
export {
  CompletionFormatError,
  OpenAITokenCompletions,
  readTokenCompletion,
  SAMPLING_FIELDS,
  type AnsweredCompletion,
  type OpenAITokenCompletionsOptions,
  type TokenCompletionsStats,
} from './token-completions.js';
