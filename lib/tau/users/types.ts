/**
 * The user-simulator contract shared by the scripted and the LLM simulators.
 * @module
 */
import type { Message, ToolMessage } from '../messages.js';
import type { TauTask } from '../task.js';
import type { OpenAIToolSchema } from '../tools.js';

/** The stop markers a user may emit; any of them ends the conversation (`user_stop`). */
export const STOP_MARKERS = ['###STOP###', '###TRANSFER###', '###OUT-OF-SCOPE###'] as const;

/** One of {@link STOP_MARKERS}. */
export type StopMarker = (typeof STOP_MARKERS)[number];

/** The stop marker contained in `text`, if any. */
export function findStopMarker(text: string | null | undefined): StopMarker | null {
  if (!text) return null;
  for (const m of STOP_MARKERS) if (text.includes(m)) return m;
  return null;
}

/** What a simulator sees when asked for its next message. */
export interface UserTurnInput {
  /** The whole trajectory so far (the simulator decides what a user can see of it). */
  history: readonly Message[];
  /** The agent's latest text message (the greeting at the start). */
  agentText: string;
  /** Results of this user's own tool calls made since its last text message. */
  toolResults: readonly ToolMessage[];
}

/** The simulator's next message: text for the agent, or calls to the user's own tools. */
export interface UserReply {
  /** Text for the agent (may contain a stop marker). */
  content?: string | null;
  /** Calls to user tools (dual control). */
  toolCalls?: { name: string; arguments: Record<string, unknown> }[];
  /**
   * The user gives up with its request unresolved (scripted users): the text is still shown,
   * and the conversation ends with `user_give_up`, which scores 0.
   */
  giveUp?: boolean;
}

/** A simulated user. `respond` may be synchronous (scripted) or asynchronous (LLM). */
export interface UserSimulator {
  /** Starts a new conversation for `task`; `userTools` are the schemas of the user's tools. */
  reset(task: TauTask, seed: number, userTools: readonly OpenAIToolSchema[]): void;
  /** The next user message. */
  respond(input: UserTurnInput): UserReply | Promise<UserReply>;
}
