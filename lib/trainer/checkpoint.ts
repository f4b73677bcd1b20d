/**
 * Run folders and their checkpoints.
 *
 * ```
 * <out>/config.json              the resolved configuration
 * <out>/metrics.jsonl            one JSON object per step and per validation
 * <out>/reference.safetensors    the KL reference policy (when grpo.klCoef > 0)
 * <out>/checkpoints/step-<k>/    policy.safetensors (weights, AdamW moments, tokenizer, sampler RNG,
 *                                trainer state), tokenizer.json, trainer.json, config.json
 *
 * A run of a pretrained model (`model.source: 'hf:<dir>'`, lib/trainer/hf-run.ts) keeps the
 * base model's folder by path and fingerprint (`<out>/base.json`, also in each checkpoint), and
 * its checkpoints hold, besides trainer.json and config.json: with LoRA the adapter as a PEFT
 * folder (`adapter/`) and the adapters' AdamW state (`optimizer.safetensors`), never the frozen
 * base; with full fine-tuning `policy.safetensors` as above (without a tokenizer: the base
 * folder has it). Its KL reference is `<out>/reference-adapter/` (LoRA) or
 * `reference.safetensors`.
 * <out>/samples/step-<k>.jsonl   trajectories in OpenAI chat format with rewards
 * <out>/validation/step-<k>.jsonl a few validation episodes per task kind (transcripts, reward breakdown)
 * <out>/report.html              charts of the curves, validation conversations
 * ```
 *
 * A checkpoint is written into a temporary folder next to its final place, every file is
 * fsynced, and the folder is renamed into place (atomic on one file system); the oldest
 * checkpoints beyond `keep` are then deleted.
 * @module
 */
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join, normalize, resolve } from 'node:path';

import type { TransformerPolicy } from '../model/index.js';
import { validateSavedConfig, type TrainConfig } from './config.js';
import type { MetricsRow } from './report.js';

/** What a checkpoint stores besides the policy (enough for an exact resume). */
export interface TrainerState {
  /** GRPO steps completed (0: right after SFT). */
  step: number;
  /** SFT finished. */
  sftDone: boolean;
  /** Steps skipped for a non-finite gradient norm so far. */
  skippedSteps: number;
  /** Episodes aborted so far (user/grader/policy failures). */
  abortedEpisodes: number;
  /** Wall seconds spent so far (all sessions). */
  elapsedS: number;
  /** Anything else the trainer keeps. */
  extra?: Record<string, unknown>;
}

/** Error of a run folder or checkpoint that cannot be used. */
export class RunFolderError extends Error {
  /** @param message - what is wrong. */
  constructor(message: string) {
    super(message);
    this.name = 'RunFolderError';
  }
}

/** Writes `data` to `path` and fsyncs it. */
export function writeFileSynced(path: string, data: string | Uint8Array): void {
  const fd = openSync(path, 'w');
  try {
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function fsyncDir(path: string): void {
  try {
    const fd = openSync(path, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // some file systems refuse to fsync a directory; the rename is still atomic
  }
}

/** Writes a file atomically: a temporary file next to it, fsync, rename. */
export function writeTextAtomic(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSynced(tmp, data);
  renameSync(tmp, path);
}

/** The checkpoint folder of step `k`. */
export function checkpointDir(out: string, step: number): string {
  return join(out, 'checkpoints', `step-${step}`);
}

/** The steps that have a complete checkpoint in `out`, ascending. */
export function listCheckpoints(out: string): number[] {
  const dir = join(out, 'checkpoints');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((name) => /^step-(\d+)$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .filter((k) => existsSync(join(checkpointDir(out, k), 'trainer.json')))
    .sort((a, b) => a - b);
}

/** Whether `dir` is a checkpoint folder: trainer.json and a policy (`policy.safetensors`, or a LoRA run's `adapter/`). */
export function isCheckpointFolder(dir: string): boolean {
  return (
    existsSync(join(dir, 'trainer.json')) &&
    (existsSync(join(dir, 'policy.safetensors')) || existsSync(join(dir, 'adapter', 'adapter_config.json')))
  );
}

interface CheckpointTemp {
  tmp: string;
  final: string;
  parent: string;
}

/** A fresh temporary folder next to the checkpoint folder of `step`. */
function checkpointTemp(out: string, step: number): CheckpointTemp {
  const final = checkpointDir(out, step);
  const parent = dirname(final);
  mkdirSync(parent, { recursive: true });
  const tmp = join(parent, `.tmp-step-${step}-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  return { tmp, final, parent };
}

/** Writes config.json and trainer.json, renames the folder into place, drops checkpoints beyond `keep`. */
function commitCheckpoint(
  out: string,
  c: CheckpointTemp,
  config: TrainConfig,
  state: TrainerState,
  keep: number,
): string {
  writeFileSynced(join(c.tmp, 'config.json'), JSON.stringify(config, null, 2));
  writeFileSynced(join(c.tmp, 'trainer.json'), JSON.stringify(state, null, 2));
  fsyncDir(c.tmp);
  rmSync(c.final, { recursive: true, force: true });
  renameSync(c.tmp, c.final);
  fsyncDir(c.parent);
  const steps = listCheckpoints(out);
  for (const k of steps.slice(0, Math.max(0, steps.length - keep)))
    rmSync(checkpointDir(out, k), { recursive: true, force: true });
  return c.final;
}

/**
 * Saves a checkpoint of step `state.step` atomically — `write` puts its files into a temporary
 * folder, then config.json and trainer.json are written and the folder is renamed into place —
 * and keeps the newest `keep` ones. A failing `write` leaves nothing behind.
 * @returns the checkpoint folder.
 */
export async function writeRunCheckpoint(
  out: string,
  config: TrainConfig,
  state: TrainerState,
  keep: number,
  write: (dir: string) => Promise<void>,
): Promise<string> {
  const c = checkpointTemp(out, state.step);
  try {
    await write(c.tmp);
    return commitCheckpoint(out, c, config, state, keep);
  } catch (e) {
    rmSync(c.tmp, { recursive: true, force: true });
    throw e;
  }
}

/**
 * Saves a checkpoint of the built-in policy (policy.safetensors: weights, AdamW moments,
 * tokenizer, sampler and trainer state; tokenizer.json) of step `state.step` atomically and keeps
 * the newest `keep` ones (as {@link writeRunCheckpoint}).
 * @returns the checkpoint folder.
 */
export function saveRunCheckpoint(
  out: string,
  policy: TransformerPolicy,
  config: TrainConfig,
  state: TrainerState,
  keep: number,
): string {
  const c = checkpointTemp(out, state.step);
  try {
    policy.save(join(c.tmp, 'policy.safetensors'), { trainer: state as unknown as Record<string, unknown> });
    if (policy.tokenizer) writeFileSynced(join(c.tmp, 'tokenizer.json'), JSON.stringify(policy.tokenizer.toJSON()));
    return commitCheckpoint(out, c, config, state, keep);
  } catch (e) {
    rmSync(c.tmp, { recursive: true, force: true });
    throw e;
  }
}

/**
 * Removes the temporaries an interrupted run leaves behind: checkpoint folders being written
 * (`checkpoints/.tmp-step-<k>-<pid>`) and files being replaced atomically (`<name>.tmp-<pid>`
 * in the run folder and in `validation/`, e.g. `metrics.jsonl.tmp-123`). Only one process trains in a run folder at a time, so at the
 * start or resume of a run every such entry is stale.
 * @returns the removed paths, relative to `out`.
 */
export function removeStaleTemporaries(out: string): string[] {
  const removed: string[] = [];
  const ckDir = join(out, 'checkpoints');
  if (existsSync(ckDir)) {
    for (const name of readdirSync(ckDir)) {
      if (!/^\.tmp-step-\d+-\d+$/.test(name)) continue;
      rmSync(join(ckDir, name), { recursive: true, force: true });
      removed.push(join('checkpoints', name));
    }
  }
  for (const sub of ['', 'validation']) {
    const dir = join(out, sub);
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir)) {
      if (!/\.tmp-\d+$/.test(name)) continue;
      rmSync(join(dir, name), { recursive: true, force: true });
      removed.push(sub ? join(sub, name) : name);
    }
  }
  return removed;
}

/** What {@link readMetricsFile} read. */
export interface MetricsFile {
  /** The rows, in file order. */
  rows: MetricsRow[];
  /** A torn last line (a write cut off by a kill), dropped; null when the file ends cleanly. */
  tornLastLine: string | null;
}

/**
 * Reads `metrics.jsonl`. A last line without its newline that is not valid JSON is the trace of
 * a kill during the write: it is dropped and returned as `tornLastLine` (the checkpoint decides
 * where a run resumes; that row is logged again). Any other bad line is a
 * {@link RunFolderError} naming the file and the line number. A missing file has no rows.
 */
export function readMetricsFile(path: string): MetricsFile {
  if (!existsSync(path)) return { rows: [], tornLastLine: null };
  const text = readFileSync(path, 'utf8');
  const lines = text.split('\n');
  const rows: MetricsRow[] = [];
  let tornLastLine: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.trim().length === 0) continue;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch (e) {
      if (i === lines.length - 1) {
        // the last line has no newline after it: the append that wrote it was cut off
        tornLastLine = line;
        break;
      }
      throw new RunFolderError(`${path}:${i + 1}: not a JSON line (${(e as Error).message})`);
    }
    if (row === null || typeof row !== 'object' || Array.isArray(row))
      throw new RunFolderError(`${path}:${i + 1}: a metrics row must be a JSON object`);
    if (typeof (row as MetricsRow).step !== 'number')
      throw new RunFolderError(`${path}:${i + 1}: a metrics row needs a numeric "step"`);
    rows.push(row as MetricsRow);
  }
  return { rows, tornLastLine };
}

/**
 * The run folder that resuming `dir` continues: `dir` itself when it is a run folder
 * (`config.json`), or the run a checkpoint folder (`<run>/checkpoints/step-<k>`, which eval and
 * serve accept) belongs to when it is that run's newest checkpoint. An older checkpoint, a
 * checkpoint outside a run folder or any other folder is refused with a {@link RunFolderError}:
 * resuming continues a run from its newest checkpoint and never starts a new run.
 * @returns the run folder (`dir`, or `dir/../..` normalized).
 */
export function resumeRunFolder(dir: string): string {
  const abs = resolve(dir);
  if (isCheckpointFolder(abs)) {
    const m = /^step-(\d+)$/.exec(basename(abs));
    const run = normalize(join(dir, '..', '..'));
    if (!m || basename(dirname(abs)) !== 'checkpoints' || !existsSync(join(run, 'config.json'))) {
      throw new RunFolderError(
        `${dir} is a checkpoint folder outside a run folder: only a run folder can be resumed (eval and serve load a checkpoint folder)`,
      );
    }
    const steps = listCheckpoints(run);
    const newest = steps[steps.length - 1];
    if (Number(m[1]) !== newest) {
      throw new RunFolderError(
        `${dir} is the checkpoint of step ${m[1]} of the run ${run}, whose newest checkpoint is step ${newest ?? '(none)'}; resuming continues a run from its newest checkpoint: resume ${run} (to branch off an older checkpoint, copy the run folder and delete the newer checkpoints)`,
      );
    }
    return run;
  }
  if (!existsSync(join(abs, 'config.json'))) throw new RunFolderError(`${dir} is not a run folder (no config.json)`);
  return dir;
}

/** Reads a checkpoint's trainer state. */
export function readTrainerState(dir: string): TrainerState {
  const path = join(dir, 'trainer.json');
  if (!existsSync(path)) throw new RunFolderError(`${dir} is not a checkpoint (no trainer.json)`);
  return JSON.parse(readFileSync(path, 'utf8')) as TrainerState;
}

/** Reads and validates `<out>/config.json`. */
export function readRunConfig(out: string): TrainConfig {
  const path = join(out, 'config.json');
  if (!existsSync(path)) throw new RunFolderError(`${out} is not a run folder (no config.json)`);
  return validateSavedConfig(JSON.parse(readFileSync(path, 'utf8')));
}
