/**
 * The first phase of a run: everything that can fail is checked before anything is written, so
 * that a failed start leaves no run behind and a failed resume changes nothing. It reads a
 * resumed run's configuration, newest checkpoint and metrics, applies the resume options, plans
 * the model (lib/trainer/open-model.ts) and builds the run's world.
 * @module
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

import type { AnyEnv, TauWorld } from '../../gym/index.js';
import { modelOpsDevice } from '../../model/index.js';
import {
  checkpointDir,
  listCheckpoints,
  readMetricsFile,
  readRunConfig,
  readTrainerState,
  resumeRunFolder,
  RunFolderError,
  type TrainerState,
} from '../checkpoint.js';
import { validateConfig, valSourceName, type TrainConfig } from '../config.js';
import type { RunLimits, RunModelPlan } from '../model-handle.js';
import { planRunModel } from '../open-model.js';
import type { MetricsRow } from '../report.js';
import type { TrainEvent, TrainOptions } from '../train-types.js';
import { buildWorld, promptSettings, trainEnvFactory, type PromptSettings, type TrainWorld } from '../world.js';

/** A run checked and ready to start: nothing written yet. */
export interface PreparedRun {
  /** The run folder (absolute). */
  out: string;
  /** The configuration (resumed: the run's, with the resume options applied; the model source resolved). */
  config: TrainConfig;
  /** Whether a resumed run's config.json must be rewritten. */
  configChanged: boolean;
  /** The trainer state to continue from (a new run: step 0). */
  state: TrainerState;
  /** The checkpoint folder a resumed run continues from, or null. */
  resumeFrom: string | null;
  /** The run's model, planned. */
  plan: RunModelPlan;
  /** The world, its prompt format, the environment factory (wrapped by `options.wrapEnv`) and the episode limits. */
  tw: TrainWorld;
  prompt: PromptSettings;
  env: () => AnyEnv | Promise<AnyEnv>;
  /** The environment factory of another world (a fresh world's; wrapped by `options.wrapEnv` too). */
  envFor: (world: TauWorld) => () => AnyEnv | Promise<AnyEnv>;
  limits: RunLimits;
  /** The validation source name (`tau-retail`, …). */
  source: string;
  /** A resumed run's metrics rows up to its checkpoint (the rest is redone identically). */
  metricsToKeep: MetricsRow[];
}

function checkOptions(options: TrainOptions): void {
  if (options.steps !== undefined && !options.resume)
    throw new RunFolderError('steps applies to a resumed run (set grpo.steps in the configuration of a new run)');
  if (options.modelDir !== undefined && !options.resume)
    throw new RunFolderError('modelDir applies to a resumed run (a new run names its base in model.source)');
  if (options.rolloutEngine !== undefined && !options.resume)
    throw new RunFolderError(
      'rolloutEngine applies to a resumed run (set rollout.* in the configuration of a new run)',
    );
  if (options.steps !== undefined && (!Number.isSafeInteger(options.steps) || options.steps < 0))
    throw new RunFolderError(`steps must be an integer >= 0, got ${options.steps}`);
}

/** Checks and prepares a new or resumed run (see the module description). */
export async function prepareRun(
  configIn: TrainConfig,
  options: TrainOptions,
  emit: (e: TrainEvent) => void,
): Promise<PreparedRun> {
  checkOptions(options);
  const out = resolve(options.resume ? resumeRunFolder(options.out) : options.out);
  let config = configIn;
  let state: TrainerState = { step: 0, sftDone: false, skippedSteps: 0, abortedEpisodes: 0, elapsedS: 0 };
  let resumeFrom: string | null = null;
  let configChanged = false;
  if (options.resume) {
    config = readRunConfig(out);
    const steps = listCheckpoints(out);
    if (steps.length > 0) {
      resumeFrom = checkpointDir(out, steps[steps.length - 1]);
      state = readTrainerState(resumeFrom);
    }
    if (options.rolloutEngine !== undefined) {
      const next = validateConfig({ ...config, rollout: { ...config.rollout, ...options.rolloutEngine } });
      if (JSON.stringify(next) !== JSON.stringify(config)) configChanged = true;
      config = next;
    }
    if (options.steps !== undefined && options.steps !== config.grpo.steps) {
      configChanged = true;
      if (options.steps < state.step)
        throw new RunFolderError(
          `steps ${options.steps}: the run's newest checkpoint is at GRPO step ${state.step}; a run can be extended or ended earlier, but not before its newest checkpoint`,
        );
      config = { ...config, grpo: { ...config.grpo, steps: options.steps } };
    }
  } else if (existsSync(join(out, 'config.json'))) {
    throw new RunFolderError(`${out} already holds a run (config.json); use --resume or another --out`);
  }
  modelOpsDevice(config.model.device); // model.device 'cuda' without a usable GPU fails here
  const plan = await planRunModel(config, {
    out,
    checkpoint: resumeFrom,
    resume: options.resume === true,
    ...(options.modelDir !== undefined ? { modelDir: options.modelDir } : {}),
  });
  config = plan.config;
  configChanged ||= plan.changed;
  const tw = buildWorld(config);
  const envFor = (world: TauWorld) => {
    const base = trainEnvFactory(config, world);
    return options.wrapEnv ? options.wrapEnv(base) : base;
  };
  let metricsToKeep: MetricsRow[] = [];
  if (resumeFrom) {
    const metricsPath = join(out, 'metrics.jsonl');
    const read = readMetricsFile(metricsPath);
    if (read.tornLastLine !== null)
      emit({
        kind: 'warning',
        message: `${metricsPath}: dropped a torn last line (a write cut off by a kill; the run resumes from the checkpoint of step ${state.step} and logs it again): ${read.tornLastLine.slice(0, 80)}`,
      });
    // what was logged after the checkpoint is dropped (it will be redone identically)
    metricsToKeep = read.rows.filter((r) => (r.step as number) <= state.step);
  }
  return {
    out,
    config,
    configChanged,
    state,
    resumeFrom,
    plan,
    tw,
    prompt: promptSettings(config),
    env: envFor(tw.world),
    envFor,
    limits: {
      maxTurns: config.rollout.maxTurns,
      maxTokensPerTurn: config.rollout.maxTokensPerTurn,
      maxContextTokens: config.rollout.maxContextTokens,
    },
    source: valSourceName(config.env),
    metricsToKeep,
  };
}
