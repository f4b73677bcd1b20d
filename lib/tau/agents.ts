/**
 * The agent contract for driving a {@link TauEpisode} directly (tests, demonstrations,
 * baselines), `runEpisode`, and a random baseline agent.
 * @module
 */
import type { AssistantAction } from './action.js';
import type { WorldState } from './domain.js';
import type { EpisodeStep, TauEpisode } from './episode.js';
import type { Message } from './messages.js';
import { Rng } from './rng.js';
import type { TauTask } from './task.js';
import type { OpenAIToolSchema } from './tools.js';

/** What an agent is told when a conversation starts. */
export interface AgentContext {
  /** The task (scripted agents may read its scenario; learned policies should not). */
  task: TauTask;
  /** Tool schemas. */
  tools: readonly OpenAIToolSchema[];
  /** The policy. */
  policy: string;
  /** Seed. */
  seed: number;
}

/** An agent: one action per observation. */
export interface TauAgent {
  /** Starts a conversation. */
  reset(context: AgentContext): void;
  /** The next action given the new messages. */
  act(observation: readonly Message[]): AssistantAction | Promise<AssistantAction>;
}

/** A finished episode. */
export interface EpisodeResult {
  /** The last step (done, reward, breakdown). */
  final: EpisodeStep;
  /** Every message after the task's history. */
  trajectory: Message[];
  /** Number of agent actions. */
  actions: number;
}

/** Runs one conversation of `agent` on `task` through `episode` (async user simulators allowed). */
export async function runEpisode<S extends WorldState>(
  episode: TauEpisode<S>,
  agent: TauAgent,
  task: TauTask,
  seed = 0,
  maxActions = 1000,
): Promise<EpisodeResult> {
  let step = await episode.reset(task, seed);
  agent.reset({ task, tools: episode.tools, policy: episode.policy, seed });
  let actions = 0;
  while (!step.done && actions < maxActions) {
    step = await episode.act(await agent.act(step.observation));
    actions++;
  }
  return { final: step, trajectory: episode.trajectory(), actions };
}

/** Synchronous {@link runEpisode} for synchronous users and agents. */
export function runEpisodeSync<S extends WorldState>(
  episode: TauEpisode<S>,
  agent: TauAgent,
  task: TauTask,
  seed = 0,
  maxActions = 1000,
): EpisodeResult {
  let step = episode.resetSync(task, seed);
  agent.reset({ task, tools: episode.tools, policy: episode.policy, seed });
  let actions = 0;
  while (!step.done && actions < maxActions) {
    const a = agent.act(step.observation);
    if (a instanceof Promise) throw new TypeError('runEpisodeSync: the agent is asynchronous; use runEpisode');
    step = episode.actSync(a);
    actions++;
  }
  return { final: step, trajectory: episode.trajectory(), actions };
}

const PHRASES = [
  'Sure.',
  'Let me check that for you.',
  'Could you tell me more?',
  'Okay.',
  'Thanks for waiting.',
  'Hello there.',
  'I understand.',
];

/**
 * A random baseline: each turn it either says a generic phrase or calls a random tool with
 * arguments made of strings it has seen (ids from tool results and user messages) or random
 * values. It never follows the policy; its reward should stay near 0.
 */
export class RandomAgent implements TauAgent {
  private rng = new Rng(0);
  private tools: readonly OpenAIToolSchema[] = [];
  private seen: string[] = [];

  /** Starts a conversation. */
  reset(context: AgentContext): void {
    this.rng = new Rng(context.seed + 7919);
    this.tools = context.tools;
    this.seen = [];
  }

  /** A random action. */
  act(observation: readonly Message[]): AssistantAction {
    for (const m of observation) {
      for (const tok of (m.content ?? '').match(
        /#W\d{7}|\b\d{10}\b|[a-z]+_[a-z]+_\d{4}|(?:credit_card|paypal|gift_card)_\d{7}|[\w.]+@example\.com/g,
      ) ?? [])
        this.seen.push(tok);
    }
    if (this.rng.chance(0.4) || this.tools.length === 0) return { role: 'assistant', content: this.rng.pick(PHRASES) };
    const tool = this.rng.pick(this.tools);
    const props = (tool.function.parameters.properties ?? {}) as Record<string, { type?: string }>;
    const args: Record<string, unknown> = {};
    const value = () =>
      this.seen.length > 0 && this.rng.chance(0.7) ? this.rng.pick(this.seen) : this.rng.digits(this.rng.int(3, 10));
    for (const [k, schema] of Object.entries(props)) args[k] = schema.type === 'array' ? [value()] : value();
    return { role: 'assistant', content: null, toolCalls: [{ name: tool.function.name, arguments: args }] };
  }
}
