/**
 * Opening a model from any of the places it is kept, as one {@link ModelHandle}:
 *
 * - a training run folder (`config.json` of a run): its newest checkpoint;
 * - a checkpoint folder of a run (`trainer.json` + `policy.safetensors`, or a LoRA run's
 *   `adapter/`);
 * - a bare `.safetensors` file of the built-in model (`TransformerPolicy.save`), or a folder
 *   holding such files (the newest within two levels);
 * - a Hugging Face model folder (`config.json` with `model_type`), with a PEFT adapter folder
 *   applied when `adapter` is given.
 *
 * A run's checkpoint comes with the run's prompt format, environment, configuration and step
 * ({@link ModelHandle.run}), so that `sinkflex eval` and `sinkflex serve` use the model exactly
 * as it was trained; a run of a Hugging Face model loads its base folder (refused when its
 * fingerprint changed since the run) with the checkpoint's adapter or weights. The path is
 * classified by what is on disk ({@link locateModel}), then opened once.
 * @module
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

import type { HfDtypeOption } from '../model/index.js';
import type { DeviceRequest } from '../native/index.js';
import { BuiltinModel, planBuiltinRun } from './builtin-model.js';
import {
  checkpointDir,
  isCheckpointFolder,
  listCheckpoints,
  readRunConfig,
  readTrainerState,
  RunFolderError,
} from './checkpoint.js';
import { hfSourceDir, validateSavedConfig, type TrainConfig } from './config.js';
import { HfModel, planHfRun } from './hf-model.js';
import type { ModelHandle, PlanRunModelOptions, RunModelPlan } from './model-handle.js';
import { promptSettings } from './world.js';

/** Where a model is kept, as {@link locateModel} found it. */
export type ModelLocation =
  /** A run's checkpoint folder (the run folder's newest, or the one named). */
  | { kind: 'run'; dir: string }
  /** A `.safetensors` file of the built-in model outside any run folder. */
  | { kind: 'file'; file: string }
  /** A Hugging Face model folder. */
  | { kind: 'hf'; dir: string };

/** The newest `.safetensors` file in `dir` or its sub-folders down to `depth` levels, or null. */
function newestSafetensors(dir: string, depth: number): string | null {
  const found: { file: string; mtime: number }[] = [];
  const walk = (d: string, left: number): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory() && left > 0) walk(p, left - 1);
      else if (e.isFile() && e.name.endsWith('.safetensors')) found.push({ file: p, mtime: statSync(p).mtimeMs });
    }
  };
  walk(dir, depth);
  found.sort((a, b) => b.mtime - a.mtime || b.file.localeCompare(a.file));
  return found.length > 0 ? found[0].file : null;
}

/** Whether the config.json in `dir` is a Hugging Face model's (it names `model_type` or `architectures`). */
function isHfFolder(dir: string): boolean {
  try {
    const c = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    return typeof c === 'object' && c !== null && ('model_type' in c || 'architectures' in c);
  } catch {
    return false;
  }
}

/**
 * Classifies `path` (see the module description): a run folder resolves to its newest
 * checkpoint folder, a folder of `.safetensors` files to the newest file. Throws
 * {@link RunFolderError} naming the path when nothing loadable is there (a run without
 * checkpoints included).
 */
export function locateModel(path: string): ModelLocation {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) throw new RunFolderError(`no checkpoint at ${path} (nor a Hugging Face model folder with config.json)`);
  if (st.isFile()) return { kind: 'file', file: path };
  const dir = resolve(path);
  if (isCheckpointFolder(dir)) return { kind: 'run', dir };
  if (existsSync(join(dir, 'config.json'))) {
    if (isHfFolder(dir)) return { kind: 'hf', dir };
    const steps = listCheckpoints(dir);
    if (steps.length === 0) throw new RunFolderError(`run folder ${dir} has no checkpoint yet`);
    return { kind: 'run', dir: checkpointDir(dir, steps[steps.length - 1]) };
  }
  const file = newestSafetensors(dir, 2);
  if (file === null)
    throw new RunFolderError(
      `${dir} is neither a run folder (config.json), a checkpoint folder (policy.safetensors + trainer.json), a Hugging Face model folder nor a folder holding a .safetensors checkpoint`,
    );
  return { kind: 'file', file };
}

/** Plans the model of a run (new, resumed, or loaded): the one place that picks the implementation by `model.source`. */
export function planRunModel(config: TrainConfig, options: PlanRunModelOptions): Promise<RunModelPlan> {
  return (hfSourceDir(config) !== null ? planHfRun : planBuiltinRun)(config, options);
}

/** Options of {@link openModel}. */
export interface OpenModelOptions {
  /** Where the model runs (default cpu). */
  device?: DeviceRequest;
  /** A Hugging Face model folder: how it holds its weights (default auto: as the files store them). */
  dtype?: HfDtypeOption;
  /** A Hugging Face model folder: a PEFT adapter folder to apply. */
  adapter?: string;
  /**
   * A checkpoint of a Hugging Face model's run: its base model folder at a new place (the
   * folder moved since the run). Used when its fingerprint is the run's (base.json).
   */
  modelDir?: string;
}

const OPEN_MODEL_KEYS = new Set(['device', 'dtype', 'adapter', 'modelDir']);

/**
 * Opens the model at `source` (see the module description) as a {@link ModelHandle}; the caller
 * disposes it.
 *
 * ```ts
 * const model = await openModel('runs/default');
 * new AgentLoop({ policy: model.policy, chat: model.chat, systemPrompt: model.run?.prompt.systemPrompt, ... });
 * model.dispose();
 * ```
 */
export async function openModel(source: string, options: OpenModelOptions = {}): Promise<ModelHandle> {
  if (typeof source !== 'string' || source === '')
    throw new TypeError(
      'source must be a path (a run or checkpoint folder, a .safetensors file or a Hugging Face model folder)',
    );
  for (const key of Object.keys(options))
    if (!OPEN_MODEL_KEYS.has(key))
      throw new RangeError(`options.${key} is not an option of openModel (known: ${[...OPEN_MODEL_KEYS].join(', ')})`);
  const where = locateModel(source);
  const device = options.device ?? 'cpu';
  if (where.kind === 'hf') {
    if (options.modelDir !== undefined)
      throw new RunFolderError(
        `modelDir: ${where.dir} is a Hugging Face model folder, not a run's checkpoint (modelDir names the moved base folder of a run)`,
      );
    return HfModel.openFolder(where.dir, {
      device,
      dtype: options.dtype ?? 'auto',
      ...(options.adapter !== undefined ? { adapter: options.adapter } : {}),
    });
  }
  const what = where.kind === 'file' ? where.file : where.dir;
  if (options.adapter !== undefined)
    throw new RunFolderError(
      `adapter: ${what} is not a Hugging Face model folder (a run's checkpoint brings its own adapter)`,
    );
  if (where.kind === 'file') {
    if (options.modelDir !== undefined)
      throw new RunFolderError(
        `modelDir: ${where.file} is a checkpoint file of the built-in model, which has no base model folder`,
      );
    return BuiltinModel.openFile(where.file, device);
  }
  const state = readTrainerState(where.dir);
  const cfgPath = join(where.dir, 'config.json');
  const runDir = dirname(dirname(where.dir));
  const saved = existsSync(cfgPath)
    ? validateSavedConfig(JSON.parse(readFileSync(cfgPath, 'utf8')))
    : readRunConfig(runDir);
  const plan = await planRunModel(saved, {
    out: runDir,
    checkpoint: where.dir,
    resume: true,
    ...(options.modelDir !== undefined ? { modelDir: options.modelDir } : {}),
  });
  const run = { prompt: promptSettings(plan.config), env: plan.config.env, config: plan.config, step: state.step };
  return plan.open({ checkpoint: where.dir, training: false, run, device });
}
