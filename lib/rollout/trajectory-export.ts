/**
 * Trajectory export: one JSON object per episode in OpenAI chat format — `messages` (system
 * prompt first, then the dialogue: user, assistant with `tool_calls`, tool results), `tools`,
 * `reward`, `task_id`, `seed`, `termination` — the shape SFT and rejection-sampling pipelines
 * read (filter on `reward` to keep successes). A policy that logs its turns (e.g. an
 * OpenAI-compatible server's token ids and log-probs, `OpenAIChatPolicy.takeTurnLog`) adds them
 * as `turns`.
 * @module
 */
import { writeFileSync } from 'node:fs';

import type { ChatMessage, ToolSchema } from '../chat/messages.js';
import type { EpisodeRecord } from './episode-record.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

/** One exported episode; `Turn` is the type of the policy's per-turn log. */
export interface TrajectoryLine<Turn = unknown> {
  /** The conversation in OpenAI chat format. */
  messages: ChatMessage[];
  /** The tools offered (OpenAI function schemas). */
  tools: readonly ToolSchema[];
  /** The episode's reward. */
  reward: number;
  /** The task. */
  task_id: string;
  /** The episode seed. */
  seed: number;
  /** Why it ended. */
  termination: string;
  /** Whether a limit ended it. */
  truncated: boolean;
  /** Whether an infrastructure failure ended it. */
  aborted: boolean;
  /** The failure, when aborted. */
  error: string | null;
  /** Group id and sample index (the trial). */
  uid: string;
  /** Trial index within the task. */
  trial: number;
  /** Assistant turns. */
  num_turns: number;
  /** The environment's reward breakdown. */
  reward_info: unknown;
  /** The policy's per-turn log (a server's token ids, log-probs, endpoint), when given. */
  turns?: Turn[];
}

const EXPORT_KEYS = optionKeys<ExportOptions>({ skipAborted: true, minReward: true, turnLog: true });

/** Options of {@link trajectoryLines}. */
export interface ExportOptions<Turn = unknown> {
  /** Leave out aborted episodes. Default false. */
  skipAborted?: boolean;
  /** Keep only episodes whose reward is at least this (rejection sampling). */
  minReward?: number;
  /** Per-episode turn logs (e.g. `OpenAIChatPolicy.takeTurnLog`). */
  turnLog?: (record: EpisodeRecord) => Turn[] | undefined;
}

/** One line per kept episode. */
export function trajectoryLines<Turn = unknown>(
  records: readonly EpisodeRecord[],
  options: ExportOptions<Turn> = {},
): TrajectoryLine<Turn>[] {
  refuseUnknownOptions(options, EXPORT_KEYS, 'trajectoryLines (trajectoriesToJsonl, writeTrajectories)');
  const out: TrajectoryLine<Turn>[] = [];
  for (const r of records) {
    if (options.skipAborted && r.aborted) continue;
    if (options.minReward !== undefined && !(r.reward >= options.minReward)) continue;
    const line: TrajectoryLine<Turn> = {
      messages: r.messages.map((m) => ({ ...m })),
      tools: r.tools,
      reward: r.reward,
      task_id: r.taskId,
      seed: r.seed,
      termination: r.termination,
      truncated: r.truncated,
      aborted: r.aborted,
      error: r.error,
      uid: r.uid,
      trial: r.sampleIndex,
      num_turns: r.numTurns,
      reward_info: r.rewardInfo ?? null,
    };
    const turns = options.turnLog?.(r);
    if (turns) line.turns = turns;
    out.push(line);
  }
  return out;
}

/** The JSONL text of {@link trajectoryLines} (one object per line, trailing newline). */
export function trajectoriesToJsonl<Turn = unknown>(
  records: readonly EpisodeRecord[],
  options: ExportOptions<Turn> = {},
): string {
  return trajectoryLines(records, options)
    .map((l) => JSON.stringify(l) + '\n')
    .join('');
}

/** Writes {@link trajectoriesToJsonl} to `path`; returns the number of lines. */
export function writeTrajectories<Turn = unknown>(
  path: string,
  records: readonly EpisodeRecord[],
  options: ExportOptions<Turn> = {},
): number {
  const lines = trajectoryLines(records, options);
  writeFileSync(path, lines.map((l) => JSON.stringify(l) + '\n').join(''));
  return lines.length;
}
