/**
 * The validation transcripts of a run: at each validation the trainer writes a few episodes per
 * task kind to `<out>/validation/step-<k>.jsonl` (the same tasks every time: the first tasks of
 * each kind in validation order, their first trial), so that the report can show how the
 * policy's conversations change and can be regenerated from the run folder alone.
 * @module
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import type { ChatFormat, ChatMessage } from '../chat/index.js';
import type { EpisodeRecord, EvaluationResult } from '../rollout/index.js';
import { RunFolderError, writeTextAtomic } from './checkpoint.js';

/** Episodes per task kind written at each validation. */
export const VALIDATION_TRANSCRIPTS_PER_KIND = 3;

/** One validation episode as written to `validation/step-<k>.jsonl` (one JSON object per line). */
export interface ValidationTranscript {
  /** The GRPO step after which the validation ran (0: after SFT). */
  step: number;
  /** The task's kind, or null when it has none (tau2 retail tasks). */
  kind: string | null;
  /** The task. */
  task_id: string;
  /** The trial (sample index within the task). */
  trial: number;
  /** The episode's seed. */
  seed: number;
  /** The reward (0 for an aborted episode). */
  reward: number;
  /** Why the episode ended. */
  termination: string;
  /** Ended by a failure of the policy, the user simulator or the environment. */
  aborted: boolean;
  /** Ended by a limit. */
  truncated: boolean;
  /** Assistant turns. */
  num_turns: number;
  /** The failure's message, when aborted. */
  error: string | null;
  /** The conversation in OpenAI chat format, without the system message (the run's prompt, see config.json). */
  messages: ChatMessage[];
  /**
   * The last model turn when a limit cut it off (`turn_token_limit`, `context_limit`): its
   * tokens decoded (special tokens by name). It is in no message, so without it a transcript
   * would not show what the model was writing. Null otherwise.
   */
  cut_turn: string | null;
  /** The environment's reward breakdown (tau's RewardInfo), or null. */
  reward_info: unknown;
}

/** The transcripts of one validation. */
export interface ValidationLog {
  /** The GRPO step (0: after SFT). */
  step: number;
  /** Its transcripts, grouped by kind in order of the kinds' first task. */
  transcripts: ValidationTranscript[];
}

/**
 * The text of an episode's last model turn when a limit cut it off (its tokens end the
 * response, unparsed and without a stop token; they are in no message), or null.
 */
export function cutTurnText(
  e: Pick<EpisodeRecord, 'termination' | 'responseIds' | 'responseMask'>,
  format: Pick<ChatFormat, 'tokenizer' | 'stopTokens'>,
): string | null {
  if (e.termination !== 'turn_token_limit' && e.termination !== 'context_limit') return null;
  let i = e.responseMask.length;
  while (i > 0 && e.responseMask[i - 1] === 1) i--;
  const tail = e.responseIds.slice(i);
  if (tail.length === 0 || format.stopTokens.includes(tail[tail.length - 1])) return null;
  return format.tokenizer.decode(tail);
}

/** Options of {@link selectValidationTranscripts}. */
export interface SelectTranscriptsOptions {
  /** Episodes per kind. Default {@link VALIDATION_TRANSCRIPTS_PER_KIND}. */
  perKind?: number;
  /** The chat format of the policy: decodes a turn cut off by a limit (`cut_turn`; without it, null). */
  format?: Pick<ChatFormat, 'tokenizer' | 'stopTokens'>;
}

/**
 * Picks the transcripts of a validation: for each kind (in order of its first task; tasks
 * without a kind form one group), the first `perKind` tasks' first trials (then further trials
 * when there are fewer tasks than `perKind`).
 */
export function selectValidationTranscripts(
  result: Pick<EvaluationResult, 'episodes' | 'perTask'>,
  step: number,
  options: SelectTranscriptsOptions = {},
): ValidationTranscript[] {
  const perKind = options.perKind ?? VALIDATION_TRANSCRIPTS_PER_KIND;
  const format = options.format;
  if (!Number.isSafeInteger(perKind) || perKind < 0)
    throw new RangeError(`perKind must be an integer >= 0, got ${perKind}`);
  const kindOf = (e: EpisodeRecord) => result.perTask[e.groupIndex]?.kind ?? null;
  const ordered = [...result.episodes].sort((a, b) => a.sampleIndex - b.sampleIndex || a.groupIndex - b.groupIndex);
  const groups = new Map<string | null, EpisodeRecord[]>();
  for (const t of result.perTask) if (!groups.has(t.kind)) groups.set(t.kind, []);
  for (const e of ordered) {
    const g = groups.get(kindOf(e));
    if (g && g.length < perKind) g.push(e);
  }
  const out: ValidationTranscript[] = [];
  for (const [kind, episodes] of groups) {
    for (const e of episodes) {
      out.push({
        step,
        kind,
        task_id: e.taskId,
        trial: e.sampleIndex,
        seed: e.seed,
        reward: e.aborted || !Number.isFinite(e.reward) ? 0 : e.reward,
        termination: e.termination,
        aborted: e.aborted,
        truncated: e.truncated,
        num_turns: e.numTurns,
        error: e.error,
        messages: e.messages.filter((m) => m.role !== 'system'),
        cut_turn: format ? cutTurnText(e, format) : null,
        reward_info: e.rewardInfo ?? null,
      });
    }
  }
  return out;
}

/** The validation folder of a run. */
export function validationDir(out: string): string {
  return join(out, 'validation');
}

/** The transcript file of the validation after step `step`. */
export function validationFile(out: string, step: number): string {
  return join(validationDir(out), `step-${step}.jsonl`);
}

/** Writes the transcripts of the validation after `step` (atomically: a kill leaves the old file or the new one). */
export function writeValidationLog(out: string, step: number, transcripts: readonly ValidationTranscript[]): void {
  mkdirSync(validationDir(out), { recursive: true });
  writeTextAtomic(
    validationFile(out, step),
    transcripts.map((t) => JSON.stringify(t)).join('\n') + (transcripts.length > 0 ? '\n' : ''),
  );
}

/** The steps that have a validation transcript file, ascending. */
export function listValidationSteps(out: string): number[] {
  const dir = validationDir(out);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((n) => /^step-(\d+)\.jsonl$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

function isTranscript(v: unknown): v is ValidationTranscript {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as Record<string, unknown>;
  return (
    typeof r.step === 'number' &&
    (r.kind === null || typeof r.kind === 'string') &&
    typeof r.task_id === 'string' &&
    typeof r.reward === 'number' &&
    typeof r.termination === 'string' &&
    Array.isArray(r.messages)
  );
}

/** Reads the transcripts of the validation after `step`; a bad line is a {@link RunFolderError} naming the file and the line. */
export function readValidationLog(out: string, step: number): ValidationLog {
  const path = validationFile(out, step);
  const lines = readFileSync(path, 'utf8').split('\n');
  const transcripts: ValidationTranscript[] = [];
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      throw new RunFolderError(`${path}:${i + 1}: not a JSON line: ${line.slice(0, 80)}`);
    }
    if (!isTranscript(v))
      throw new RunFolderError(
        `${path}:${i + 1}: not a validation transcript (needs step, kind, task_id, reward, termination, messages)`,
      );
    transcripts.push(v);
  });
  return { step, transcripts };
}

/**
 * The validations a report shows: the first one (after SFT) and the newest `max - 1`, read from
 * the run folder, ascending; `omitted` says how many others there are.
 */
export function readReportValidations(out: string, max: number): { logs: ValidationLog[]; omitted: number } {
  if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`max must be a positive integer, got ${max}`);
  const steps = listValidationSteps(out);
  const shown = steps.length <= max ? steps : [steps[0], ...steps.slice(steps.length - (max - 1))];
  return { logs: shown.map((s) => readValidationLog(out, s)), omitted: steps.length - shown.length };
}

/** Removes the transcript files of validations after `step` (a resume redoes them; -1: all). */
export function removeValidationLogsAfter(out: string, step: number): void {
  for (const s of listValidationSteps(out)) if (s > step) rmSync(validationFile(out, s), { force: true });
}
