/**
 * Run folders and their checkpoints.
 *
 * ```
 * <out>/config.json              the resolved configuration
 * <out>/metrics.jsonl            one JSON object per step and per validation
 * <out>/reference.safetensors    the KL reference policy (when grpo.klCoef > 0)
 * <out>/checkpoints/step-<k>/    policy.safetensors (weights, AdamW moments, tokenizer, sampler RNG,
 *                                trainer state), tokenizer.json, trainer.json, config.json
 * <out>/samples/step-<k>.jsonl   trajectories in OpenAI chat format with rewards
 * <out>/report.html              charts of the curves
 * ```
 *
 * A checkpoint is written into a temporary folder next to its final place, every file is
 * fsynced, and the folder is renamed into place (atomic on one file system); the oldest
 * checkpoints beyond `keep` are then deleted.
 * @module
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

import { ChatTemplate, TransformerPolicy } from '../model/index.js';
import { validateSavedConfig, type TrainConfig, type TrainEnvId } from './config.js';
import { promptSettings, type PromptSettings } from './world.js';

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

/**
 * Saves a checkpoint of step `state.step` atomically and keeps the newest `keep` ones.
 * @returns the checkpoint folder.
 */
export function saveRunCheckpoint(out: string, policy: TransformerPolicy, config: TrainConfig, state: TrainerState, keep: number): string {
  const final = checkpointDir(out, state.step);
  const parent = dirname(final);
  mkdirSync(parent, { recursive: true });
  const tmp = join(parent, `.tmp-step-${state.step}-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  policy.save(join(tmp, 'policy.safetensors'), { trainer: state as unknown as Record<string, unknown> });
  if (policy.tokenizer) writeFileSynced(join(tmp, 'tokenizer.json'), JSON.stringify(policy.tokenizer.toJSON()));
  writeFileSynced(join(tmp, 'config.json'), JSON.stringify(config, null, 2));
  writeFileSynced(join(tmp, 'trainer.json'), JSON.stringify(state, null, 2));
  fsyncDir(tmp);
  rmSync(final, { recursive: true, force: true });
  renameSync(tmp, final);
  fsyncDir(parent);
  const steps = listCheckpoints(out);
  for (const k of steps.slice(0, Math.max(0, steps.length - keep))) rmSync(checkpointDir(out, k), { recursive: true, force: true });
  return final;
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

/** A policy loaded from a run, with everything the agent loop needs to use it as trained. */
export interface LoadedRunPolicy {
  /** The policy (weights, tokenizer, optimizer state). */
  policy: TransformerPolicy;
  /** The chat template over the run's tokenizer. */
  template: ChatTemplate;
  /** The prompt format of the run (system prompt, tools section). */
  prompt: PromptSettings;
  /** The environment id. */
  env: TrainEnvId;
  /** The run's resolved configuration. */
  config: TrainConfig;
  /** The GRPO step of the checkpoint. */
  step: number;
  /** The checkpoint folder. */
  checkpoint: string;
}

/** Resolves a run folder (→ its newest checkpoint) or a checkpoint folder to a checkpoint folder. */
export function resolveCheckpoint(runOrCheckpointDir: string): string {
  const dir = resolve(runOrCheckpointDir);
  if (existsSync(join(dir, 'policy.safetensors')) && existsSync(join(dir, 'trainer.json'))) return dir;
  if (existsSync(join(dir, 'config.json'))) {
    const steps = listCheckpoints(dir);
    if (steps.length === 0) throw new RunFolderError(`run folder ${dir} has no checkpoint yet`);
    return checkpointDir(dir, steps[steps.length - 1]);
  }
  throw new RunFolderError(`${dir} is neither a run folder (config.json) nor a checkpoint folder (policy.safetensors + trainer.json)`);
}

/**
 * Loads the policy of a run folder (its newest checkpoint) or of one checkpoint folder, with
 * the chat template and prompt settings the run trained with, so that evaluation and serving
 * use exactly the training prompt format:
 *
 * ```ts
 * const { policy, template, prompt } = loadRunPolicy('runs/default');
 * new AgentLoop({ policy: new ModelPolicyAdapter(policy), template, systemPrompt: prompt.systemPrompt, renderTools: prompt.renderTools, ... });
 * ```
 */
export function loadRunPolicy(runOrCheckpointDir: string): LoadedRunPolicy {
  const checkpoint = resolveCheckpoint(runOrCheckpointDir);
  const state = readTrainerState(checkpoint);
  const cfgPath = join(checkpoint, 'config.json');
  const config = existsSync(cfgPath) ? validateSavedConfig(JSON.parse(readFileSync(cfgPath, 'utf8'))) : readRunConfig(dirname(dirname(checkpoint)));
  const policy = TransformerPolicy.load(join(checkpoint, 'policy.safetensors'));
  if (!policy.tokenizer) {
    policy.dispose();
    throw new RunFolderError(`${checkpoint}: the checkpoint has no tokenizer`);
  }
  return { policy, template: new ChatTemplate(policy.tokenizer), prompt: promptSettings(config), env: config.env, config, step: state.step, checkpoint };
}
