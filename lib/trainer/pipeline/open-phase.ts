/**
 * The second phase of a run: open the model (a resumed run's checkpoint, or a new run's fresh
 * model), then start writing the run folder, and set up the rollout engine and the validation
 * the later phases share.
 * @module
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import { evaluatePolicy, type EvaluationResult } from '../../rollout/index.js';
import { taskKind } from '../../tau/index.js';
import { removeStaleTemporaries, writeTextAtomic } from '../checkpoint.js';
import type { ModelHandle } from '../model-handle.js';
import type { MetricsRow } from '../report.js';
import {
  createRolloutEngine,
  type PublishAdapter,
  type PublishWeights,
  type RolloutEngine,
} from '../rollout-engine.js';
import { removeValidationLogsAfter, selectValidationTranscripts, writeValidationLog } from '../validation-log.js';
import { tokenizerWorld } from '../world.js';
import type { RunContext } from './run-context.js';

/** Opens the run's model: trainable, with a resumed run's optimizer and sampler state. */
export async function openRunModel(ctx: RunContext): Promise<ModelHandle> {
  const { plan, resumeFrom, tw, prompt, config } = ctx.run;
  const run = resumeFrom ? { prompt, env: config.env, config, step: ctx.state.step } : null;
  const model = await plan.open({
    checkpoint: resumeFrom,
    training: true,
    world: tokenizerWorld(config, tw),
    run,
    onPhase: (phase, message) => ctx.emit({ kind: 'phase', phase, message }),
  });
  if (model.fallback)
    ctx.emit({ kind: 'warning', message: `model.device auto: running on the CPU (${model.fallback})` });
  return model;
}

/** Starts writing: removes stale temporaries, writes a new run's config.json and model files, or trims a resumed run's metrics and validation logs to its checkpoint. */
export function startRunFolder(ctx: RunContext, model: ModelHandle): void {
  const { out, config, resumeFrom, configChanged, metricsToKeep } = ctx.run;
  const removed = removeStaleTemporaries(out);
  if (removed.length > 0)
    ctx.emit({
      kind: 'warning',
      message: `removed ${removed.length} temporary file(s) left by an interrupted run: ${removed.join(', ')}`,
    });
  const resume = ctx.options.resume === true;
  if (!resume) mkdirSync(out, { recursive: true });
  if (!resume || configChanged) writeTextAtomic(join(out, 'config.json'), JSON.stringify(config, null, 2));
  model.writeRunFiles(out, resume);
  if (!resume) return;
  if (resumeFrom)
    writeTextAtomic(
      ctx.metricsPath,
      metricsToKeep.map((r) => JSON.stringify(r)).join('\n') + (metricsToKeep.length ? '\n' : ''),
    );
  else rmSync(ctx.metricsPath, { force: true });
  ctx.rows = [...metricsToKeep];
  removeValidationLogsAfter(out, resumeFrom ? ctx.state.step : -1); // redone like the metrics rows
}

/**
 * The run's rollout engine. A LoRA model publishes its adapter to the rollout servers (a PEFT
 * folder per step) unless the caller does; a model without adapters on SGLang publishes a
 * model folder per step (float32: the trained weights exactly; the server holds them in its own --dtype).
 */
export function openRolloutEngine(ctx: RunContext, model: ModelHandle): RolloutEngine {
  const { config, out } = ctx.run;
  const a = model.adapters;
  const publishAdapter: PublishAdapter | undefined =
    ctx.options.publishAdapter ?? (a ? (step: number) => a.save(join(out, 'adapters', `step-${step}`)) : undefined);
  const publishWeights: PublishWeights | undefined =
    a === null && config.rollout.engine === 'sglang' ? (_step: number, dir: string) => model.save(dir) : undefined;
  return createRolloutEngine({
    config,
    policy: model.policy,
    chat: model.chat,
    out,
    ...(publishAdapter ? { publishAdapter } : {}),
    ...(publishWeights ? { publishWeights } : {}),
    onWarning: (message) => ctx.emit({ kind: 'warning', message }),
  });
}

/** A validation of the policy after step `step`: logged, with its transcripts. */
export type Validate = (step: number) => Promise<EvaluationResult>;

/** The run's validation over its held-out tasks (sampled through the rollout engine). */
export function validator(ctx: RunContext, model: ModelHandle, engine: RolloutEngine): Validate {
  const { config, tw, env, limits, prompt, source, out } = ctx.run;
  return async (step) => {
    ctx.emit({ kind: 'phase', phase: 'validation', message: `validation after step ${step}` });
    const t0 = performance.now();
    await engine.sync(step);
    const r = await evaluatePolicy({
      policy: engine.policy,
      chat: model.chat,
      env,
      taskIds: tw.valIds,
      trials: config.val.trials,
      seed: config.val.seed,
      temperature: config.val.temperature,
      limits,
      concurrency: config.rollout.concurrency,
      systemPrompt: prompt.systemPrompt,
      renderTools: prompt.renderTools,
      source,
      taskKind: (id) => taskKind(tw.world.task(id)),
    });
    const row: MetricsRow = {
      step,
      phase: 'val',
      ...r.metrics,
      ...engine.takeMetrics(),
      'timing_s/testing': (performance.now() - t0) / 1000,
    };
    writeValidationLog(out, step, selectValidationTranscripts(r, step, { format: model.chat }));
    ctx.log(row);
    ctx.emit({ kind: 'validation', step, meanAt1: r.meanReward, metrics: r.metrics });
    return r;
  };
}
