/**
 * The training run, as a pipeline of phases (lib/trainer/pipeline/): prepare the run (check
 * everything, nothing written) → open the model → SFT warm start with the first validation →
 * GRPO steps with periodic validation, checkpoints (resumable exactly), metrics, samples and the
 * report → finish. The model is a {@link ModelHandle} (the built-in transformer, or a Hugging
 * Face model with LoRA adapters or in full, lib/trainer/open-model.ts): the phases never ask
 * which kind it is.
 * @module
 */
import { performance } from 'node:perf_hooks';

import type { TrainConfig } from './config.js';
import type { ModelHandle, ReferencePolicy } from './model-handle.js';
import { grpoPhase } from './pipeline/grpo-phase.js';
import { openRolloutEngine, openRunModel, startRunFolder, validator } from './pipeline/open-phase.js';
import { prepareRun } from './pipeline/prepare.js';
import { RunContext } from './pipeline/run-context.js';
import { sftPhase } from './pipeline/sft-phase.js';
import { kindGains } from './report.js';
import type { RolloutEngine } from './rollout-engine.js';
import type { TrainOptions, TrainResult } from './train-types.js';

export { runModelConfig } from './builtin-model.js';
export { samplesJsonl, stepTasks } from './pipeline/grpo-phase.js';
export type { PolicyUpdate, TrainEvent, TrainOptions, TrainResult } from './train-types.js';

/** The last phase: the final report, the `done` event and the result of the call. */
function finish(ctx: RunContext, wall0: number, cpu0: NodeJS.CpuUsage): TrainResult {
  ctx.writeReport();
  ctx.emit({ kind: 'phase', phase: 'done', message: `done: ${ctx.state.step} GRPO steps` });
  const cpu = process.cpuUsage(cpu0);
  const { out, config, source } = ctx.run;
  const val = ctx.rows.filter((r) => r.phase === 'val');
  const key = `val-core/${source}/reward/mean@1`;
  return {
    out,
    config,
    rows: ctx.rows,
    firstValMeanAt1: val.length ? (val[0][key] as number) : null,
    lastValMeanAt1: val.length ? (val[val.length - 1][key] as number) : null,
    kinds: kindGains(ctx.rows, source),
    step: ctx.state.step,
    wallS: (performance.now() - wall0) / 1000,
    cpuS: (cpu.user + cpu.system) / 1e6,
  };
}

/**
 * Runs (or resumes) a training run in `options.out`. The same configuration and seed give the
 * same metrics (except `timing_s/*`), also across a stop and a resume.
 */
export async function train(config: TrainConfig, options: TrainOptions): Promise<TrainResult> {
  const wall0 = performance.now();
  const cpu0 = process.cpuUsage();
  const ctx = new RunContext(await prepareRun(config, options, options.onEvent ?? (() => undefined)), options, wall0);
  const model: ModelHandle = await openRunModel(ctx);
  let engine: RolloutEngine | null = null;
  let reference: ReferencePolicy | null = null;
  try {
    startRunFolder(ctx, model); // writing starts here
    engine = openRolloutEngine(ctx, model);
    const validate = validator(ctx, model, engine);
    await sftPhase(ctx, model, validate);
    if (ctx.run.config.grpo.klCoef > 0) reference = await model.openReference(ctx.run.out);
    // a resumed run's weights are its checkpoint's: announced before its first rollout
    if (ctx.run.resumeFrom) await ctx.notifyUpdate(model, ctx.state.step);
    await grpoPhase(ctx, model, engine, reference, validate);
    return finish(ctx, wall0, cpu0);
  } catch (e) {
    engine?.dispose();
    if (!options.resume && !ctx.checkpointed) ctx.undoFailedStart(model.runFiles);
    throw e;
  } finally {
    engine?.dispose();
    reference?.dispose();
    model.dispose();
  }
}
