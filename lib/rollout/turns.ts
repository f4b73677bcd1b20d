/**
 * Turn-level helpers of the agent loop: what a generated assistant turn becomes as an
 * environment action, and the checks of a policy's output.
 * @module
 */
import type { ChatFormat } from '../chat/chat-format.js';
import type { ChatAssistantMessage } from '../chat/messages.js';
import type { TokenSampleResult } from './policy.js';

/**
 * The text of an assistant turn that the chat format could not parse, in the environment's
 * raw-text protocol ({@link ChatFormat.rawActionText}; for the built-in template,
 * {@link ChatTemplate.rawActionText}). The environment then answers a broken call with an
 * `Error: …` tool message (counted toward its error budget), a mixed or multiple call likewise,
 * plain text as a message to the user, and an empty turn by ending the episode (`agent_error`).
 */
export function rawActionText(chat: ChatFormat, tokens: ArrayLike<number>): string {
  return chat.rawActionText(tokens);
}

/** The result of parsing one generated turn. */
export interface ParsedTurn {
  /** What is sent to the environment: the parsed message, or the raw text on a parse failure. */
  action: ChatAssistantMessage | string;
  /** The message recorded in the trajectory. */
  message: ChatAssistantMessage;
  /** Why parsing failed (null when it did not). */
  parseError: string | null;
}

/**
 * Parses a generated assistant turn (never throws). Tool calls get ids `<idPrefix>0`, … —
 * give a prefix unique within the episode (the environment pairs results with calls by id).
 */
export function parseTurn(chat: ChatFormat, tokens: ArrayLike<number>, idPrefix = 'call_'): ParsedTurn {
  const parsed = chat.parseAssistant(tokens, idPrefix);
  if (parsed.ok) return { action: parsed.message, message: parsed.message, parseError: null };
  const raw = chat.rawActionText(tokens);
  return { action: raw, message: { role: 'assistant', content: raw }, parseError: parsed.error };
}

/** Checks a policy's result against the request; returns the problem or null. */
export function checkSampleResult(result: TokenSampleResult, maxTokens: number, vocabSize: number): string | null {
  if (result === null || typeof result !== 'object')
    return `the policy returned ${result === null ? 'null' : typeof result} instead of a sample result`;
  const { tokens, logProbs, finishReason } = result;
  if (tokens === null || typeof tokens !== 'object' || typeof tokens.length !== 'number')
    return 'the sample result has no tokens array';
  if (tokens.length > maxTokens) return `the policy returned ${tokens.length} tokens for maxTokens ${maxTokens}`;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (!Number.isInteger(t) || t < 0 || t >= vocabSize)
      return `sampled token ${i} is ${String(t)}, not an id in [0, ${vocabSize})`;
  }
  if (finishReason !== 'stop' && finishReason !== 'length' && finishReason !== 'context')
    return `finishReason must be 'stop', 'length' or 'context', got ${JSON.stringify(finishReason)}`;
  if (logProbs !== undefined) {
    if (logProbs === null || typeof logProbs !== 'object' || logProbs.length !== tokens.length)
      return `the policy returned ${logProbs?.length ?? 'no'} log-probs for ${tokens.length} tokens`;
    for (let i = 0; i < logProbs.length; i++)
      if (!Number.isFinite(logProbs[i])) return `log-prob ${i} is ${logProbs[i]}`;
  }
  return null;
}
