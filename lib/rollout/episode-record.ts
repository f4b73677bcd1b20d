/**
 * The record of one episode of the agent loop: its tokens (prompt, response with the
 * response mask and rollout log-probs), reward, termination and trajectory.
 * @module
 */
import type { ChatMessage, ToolSchema } from '../chat/messages.js';

/**
 * Why an episode ended: the environment's reasons (tau2's: `user_stop`, `agent_stop`,
 * `too_many_errors`, `agent_error`, `user_error`, `max_steps`; and `user_give_up`, a scripted
 * user that left with its request unresolved) or the loop's own:
 * `max_turns`, `turn_token_limit` (a turn reached the per-turn token limit without ending),
 * `context_limit` (the next turn or observation would not fit), `policy_error` (the policy
 * failed or broke its contract), `env_error` (the environment threw).
 */
export type EpisodeEnd =
  | 'user_stop'
  | 'agent_stop'
  | 'too_many_errors'
  | 'agent_error'
  | 'user_error'
  | 'user_give_up'
  | 'max_steps'
  | 'max_turns'
  | 'turn_token_limit'
  | 'context_limit'
  | 'policy_error'
  | 'env_error'
  | (string & {});

/** Reasons that truncate an episode (a limit, not an outcome). */
export const TRUNCATION_REASONS: readonly string[] = ['max_steps', 'max_turns', 'turn_token_limit', 'context_limit'];

/** Reasons that abort an episode (an infrastructure failure: policy, user simulator or environment). */
export const ABORT_REASONS: readonly string[] = ['policy_error', 'env_error', 'user_error'];

/** Result of the tokenization sanity check of an episode. */
export type TokenizationCheck = 'ok' | 'mismatch' | 'unchecked' | 'disabled';

/** One episode. */
export interface EpisodeRecord {
  /** The group id: every sample of one task in one request shares it. */
  uid: string;
  /** The task. */
  taskId: string;
  /** Index of the task in the request. */
  groupIndex: number;
  /** Index of the sample within its group (0..n-1). */
  sampleIndex: number;
  /** The episode's seed (environment reset; per-turn sampling seeds derive from it). */
  seed: number;
  /** The prompt: system message, tools section, first observation, generation prompt. */
  promptIds: number[];
  /** Everything after the prompt: model turns and, between them, observations and generation prompts. */
  responseIds: number[];
  /** 1 exactly on the model's sampled tokens of `responseIds`, else 0. */
  responseMask: number[];
  /** The log-prob of each sampled token (0 elsewhere, and everywhere when the policy gives none). */
  logProbs: number[];
  /** Whether every model turn came with log-probs. */
  hasLogProbs: boolean;
  /** The environment's final reward (0 when truncated or aborted before the end). */
  reward: number;
  /** Assistant (model) turns. */
  numTurns: number;
  /** Why it ended. */
  termination: EpisodeEnd;
  /** Ended by a limit. */
  truncated: boolean;
  /** Ended by a failure of the policy, the user simulator or the environment. */
  aborted: boolean;
  /** The failure's message, when aborted. */
  error: string | null;
  /** Model turns the chat template could not parse (sent as raw text). */
  parseErrors: number;
  /** The tokenization sanity check. */
  tokenization: TokenizationCheck;
  /** The conversation in OpenAI chat format: system message, observations, assistant turns (the final observation too, which is not in the tokens). */
  messages: ChatMessage[];
  /** The tools offered (OpenAI function schemas). */
  tools: readonly ToolSchema[];
  /** The environment's reward breakdown, when it gave one. */
  rewardInfo: unknown;
  /** Wall time of the episode in ms. */
  ms: number;
}
