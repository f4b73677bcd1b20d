/**
 * Loading a trained policy for evaluation and serving, from any of the places it is kept:
 *
 * - a training run folder (`config.json`): its newest checkpoint;
 * - a checkpoint folder of a run (`trainer.json` + `policy.safetensors`, or a LoRA run's
 *   `adapter/`);
 * - a bare `.safetensors` file (`TransformerPolicy.save`), or a folder holding such files (the
 *   newest within two levels).
 *
 * A run's checkpoint comes with the run's prompt format, environment, configuration and step,
 * so that `sinkflex eval` and `sinkflex serve` use the policy exactly as it was trained. A run of
 * a pretrained model (`model.source: 'hf:<dir>'`) loads its base folder (refused when its
 * fingerprint changed since the run) with the checkpoint's adapter or weights, and its own chat
 * format. The path is classified by what is on disk ({@link locateCheckpoint}), then loaded once.
 * @module
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

import { ChatTemplate, TransformerPolicy, type ChatFormat, type PretrainedModel } from '../model/index.js';
import { checkpointDir, isCheckpointFolder, listCheckpoints, readRunConfig, readTrainerState, RunFolderError } from './checkpoint.js';
import { hfSourceDir, validateSavedConfig, type TrainConfig, type TrainEnvId } from './config.js';
import { checkRunBase, currentRunBase, loadRunModel, readRunBase } from './hf-run.js';
import { promptSettings, type PromptSettings } from './world.js';

/** Where a policy is kept, as {@link locateCheckpoint} found it. */
export type CheckpointLocation =
  /** A run's checkpoint folder (the run folder's newest, or the one named). */
  | { kind: 'run'; dir: string }
  /** A `.safetensors` file outside any run folder. */
  | { kind: 'file'; file: string };

/** The training run a loaded policy comes from. */
export interface RunInfo {
  /** The prompt format of the run (system prompt, tools section). */
  prompt: PromptSettings;
  /** The environment id. */
  env: TrainEnvId;
  /** The run's resolved configuration. */
  config: TrainConfig;
  /** The GRPO step of the checkpoint. */
  step: number;
}

/** A loaded policy. */
export interface LoadedPolicy {
  /** The policy (weights, tokenizer; a built-in checkpoint's optimizer state). */
  policy: TransformerPolicy;
  /** Its chat format: the built-in template over its tokenizer, or a pretrained model's own. */
  template: ChatFormat;
  /** What was loaded: the checkpoint folder, or the `.safetensors` file. */
  checkpoint: string;
  /** The training run it comes from (a run or checkpoint folder), or null for a bare file. */
  run: RunInfo | null;
  /** A run of a pretrained model: the model (its base folder with the checkpoint's adapter or weights); else null. */
  pretrained: PretrainedModel | null;
  /** Frees the policy (and the pretrained model). Idempotent. */
  dispose(): void;
}

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

/**
 * Classifies `path` (see the module description): a run folder resolves to its newest
 * checkpoint folder, a folder of `.safetensors` files to the newest file. Throws
 * {@link RunFolderError} when nothing loadable is there (a run without checkpoints included).
 */
export function locateCheckpoint(path: string): CheckpointLocation {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) throw new RunFolderError(`no checkpoint at ${path}`);
  if (st.isFile()) return { kind: 'file', file: path };
  const dir = resolve(path);
  if (isCheckpointFolder(dir)) return { kind: 'run', dir };
  if (existsSync(join(dir, 'config.json'))) {
    const steps = listCheckpoints(dir);
    if (steps.length === 0) throw new RunFolderError(`run folder ${dir} has no checkpoint yet`);
    return { kind: 'run', dir: checkpointDir(dir, steps[steps.length - 1]) };
  }
  const file = newestSafetensors(dir, 2);
  if (file === null) throw new RunFolderError(`${dir} is neither a run folder (config.json), a checkpoint folder (policy.safetensors + trainer.json) nor a folder holding a .safetensors checkpoint`);
  return { kind: 'file', file };
}

/** Options of {@link loadPolicy}. */
export interface LoadPolicyOptions {
  /**
   * For a checkpoint of a pretrained model's run: its base model folder at a new place (the
   * folder moved since the run). Used when its fingerprint is the run's (base.json).
   */
  modelDir?: string;
}

/**
 * Loads the policy at `path` (see the module description), on the CPU; a built-in policy must
 * hold a tokenizer. With a run's checkpoint the run's prompt format comes along:
 *
 * ```ts
 * const { policy, template, run, dispose } = await loadPolicy('runs/default');
 * new AgentLoop({ policy: new ModelPolicyAdapter(policy), template, systemPrompt: run?.prompt.systemPrompt, renderTools: run?.prompt.renderTools, ... });
 * ```
 */
export async function loadPolicy(path: string, options: LoadPolicyOptions = {}): Promise<LoadedPolicy> {
  const where = locateCheckpoint(path);
  if (options.modelDir !== undefined && where.kind === 'file') throw new RunFolderError(`--model-dir: ${where.file} is a checkpoint file of the built-in model, which has no base model folder`);
  let run: RunInfo | null = null;
  let file: string;
  if (where.kind === 'run') {
    const state = readTrainerState(where.dir);
    const cfgPath = join(where.dir, 'config.json');
    let config = existsSync(cfgPath) ? validateSavedConfig(JSON.parse(readFileSync(cfgPath, 'utf8'))) : readRunConfig(dirname(dirname(where.dir)));
    run = { prompt: promptSettings(config), env: config.env, config, step: state.step };
    if (options.modelDir !== undefined) {
      if (hfSourceDir(config) === null) throw new RunFolderError(`--model-dir: ${where.dir} is a checkpoint of the built-in model, which has no base model folder`);
      config = { ...config, model: { ...config.model, source: `hf:${resolve(options.modelDir)}` } };
      run = { ...run, config };
    }
    if (hfSourceDir(config) !== null) {
      const base = await currentRunBase(config);
      checkRunBase(readRunBase(where.dir), base);
      const m = await loadRunModel({ ...config, model: { ...config.model, device: 'cpu' } }, base, { checkpoint: where.dir, training: false });
      let template: ChatFormat;
      try {
        template = m.chat;
      } catch (e) {
        m.dispose();
        throw e;
      }
      return { policy: m.policy, template, checkpoint: where.dir, run, pretrained: m, dispose: () => m.dispose() };
    }
    file = join(where.dir, 'policy.safetensors');
  } else file = where.file;
  const policy = TransformerPolicy.load(file);
  const checkpoint = where.kind === 'run' ? where.dir : where.file;
  if (!policy.tokenizer) {
    policy.dispose();
    throw new RunFolderError(`the checkpoint ${checkpoint} has no tokenizer (the chat template needs one; a checkpoint of a pretrained model's run is loaded through its checkpoint folder)`);
  }
  return { policy, template: new ChatTemplate(policy.tokenizer), checkpoint, run, pretrained: null, dispose: () => policy.dispose() };
}
