/**
 * The GRPO phase of a run: steps from the run's state to `grpo.steps` (or `stopAfter`), each a
 * rollout of its tasks, the update against the KL reference, its metrics row and samples, a
 * validation every `val.every` steps and at the end, and checkpoints every `output.saveEvery`
 * steps, at the end and where the call stops.
 * @module
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import type { AnyEnv } from '../../gym/index.js';
import { AgentLoop, mixSeed, type EpisodeRecord } from '../../rollout/index.js';
import type { TrainConfig } from '../config.js';
import { grpoStep } from '../grpo-step.js';
import type { ModelHandle, ReferencePolicy } from '../model-handle.js';
import type { MetricsRow } from '../report.js';
import type { RolloutEngine } from '../rollout-engine.js';
import { seededPermutation } from '../sft.js';
import { stepWorld } from '../world.js';
import type { Validate } from './open-phase.js';
import type { RunContext } from './run-context.js';

/** The training tasks of GRPO step `step` (1-based): passes over a seeded permutation of the training tasks. */
export function stepTasks(config: TrainConfig, trainIds: readonly string[], step: number): string[] {
  const per = config.rollout.tasksPerStep;
  const out: string[] = [];
  let permPass = -1;
  let perm: number[] = [];
  for (let j = 0; j < per; j++) {
    const i = (step - 1) * per + j;
    const pass = Math.floor(i / trainIds.length);
    if (pass !== permPass) {
      perm = seededPermutation(trainIds.length, mixSeed(config.seed, 0x7a5, pass));
      permPass = pass;
    }
    out.push(trainIds[perm[i % trainIds.length]]);
  }
  return out;
}

/** Trajectories in OpenAI chat format with rewards (one JSON object per line). */
export function samplesJsonl(records: readonly EpisodeRecord[], step: number): string {
  return records
    .map((r) =>
      JSON.stringify({
        step,
        task_id: r.taskId,
        uid: r.uid,
        sample_index: r.sampleIndex,
        seed: r.seed,
        reward: r.reward,
        termination: r.termination,
        aborted: r.aborted,
        truncated: r.truncated,
        num_turns: r.numTurns,
        messages: r.messages,
      }),
    )
    .join('\n')
    .concat(records.length > 0 ? '\n' : '');
}

/** One GRPO step (`state.step + 1`): rollout, update, metrics row, samples, validation and checkpoint when due. */
async function step(
  ctx: RunContext,
  model: ModelHandle,
  engine: RolloutEngine,
  loop: AgentLoop | null,
  reference: ReferencePolicy | null,
  validate: Validate,
  last: number,
): Promise<void> {
  const { config, tw, out } = ctx.run;
  const k = ctx.state.step + 1;
  const t0 = performance.now();
  await engine.sync(ctx.state.step); // the servers sample with the policy of the last step
  const syncS = (performance.now() - t0) / 1000;
  // with fresh worlds (`loop` null) the step's tasks come from a world of their own, played in a
  // loop of its own; else every step plays the run world's loop
  let stepLoop: AgentLoop;
  let taskIds: string[];
  if (loop === null) {
    const fresh = stepWorld(config, k);
    stepLoop = makeLoop(ctx, model, engine, ctx.run.envFor(fresh.world));
    taskIds = fresh.taskIds;
  } else {
    stepLoop = loop;
    taskIds = stepTasks(config, tw.trainIds, k);
  }
  let r;
  try {
    r = await grpoStep(
      {
        policy: model.policy,
        loop: stepLoop,
        reference,
        config,
        afterRollout: () => engine.checkOnPolicy(model.policy),
      },
      k,
      taskIds,
    );
  } finally {
    if (stepLoop !== loop) await stepLoop.dispose();
  }
  if (engine.kind !== 'local') Object.assign(r.metrics, engine.takeMetrics(), { 'timing_s/sync_weights': syncS });
  const st = ctx.state;
  ctx.state = {
    ...st,
    step: k,
    skippedSteps: st.skippedSteps + r.skipped,
    abortedEpisodes: st.abortedEpisodes + (r.metrics['rollout/aborted'] ?? 0),
  };
  const row: MetricsRow = {
    step: k,
    phase: 'grpo',
    ...r.metrics,
    'actor/skipped_steps_total': ctx.state.skippedSteps,
    'rollout/aborted_total': ctx.state.abortedEpisodes,
  };
  ctx.log(row);
  ctx.emit({ kind: 'grpo', step: k, total: config.grpo.steps, metrics: r.metrics });
  await ctx.notifyUpdate(model, k);
  if (config.output.samplesPerStep > 0) {
    mkdirSync(join(out, 'samples'), { recursive: true });
    writeFileSync(
      join(out, 'samples', `step-${k}.jsonl`),
      samplesJsonl(r.records.slice(0, config.output.samplesPerStep), k),
    );
  }
  const end = k === config.grpo.steps;
  if (end || (config.val.every > 0 && k % config.val.every === 0)) await validate(k);
  if (end || k === last || (config.output.saveEvery > 0 && k % config.output.saveEvery === 0))
    await ctx.saveCheckpoint(model);
  ctx.writeReport();
}

/** The agent loop of the GRPO rollouts over the environments of `env`. */
function makeLoop(
  ctx: RunContext,
  model: ModelHandle,
  engine: RolloutEngine,
  env: () => AnyEnv | Promise<AnyEnv>,
): AgentLoop {
  const { config, limits, prompt } = ctx.run;
  return new AgentLoop({
    policy: engine.policy,
    chat: model.chat,
    env,
    concurrency: config.rollout.concurrency,
    limits,
    sampling: { temperature: config.rollout.temperature, topP: config.rollout.topP },
    sanityCheck: 'disable',
    systemPrompt: prompt.systemPrompt,
    renderTools: prompt.renderTools,
  });
}

/** Runs the GRPO steps of this call (see the module description); the caller disposes `reference`. */
export async function grpoPhase(
  ctx: RunContext,
  model: ModelHandle,
  engine: RolloutEngine,
  reference: ReferencePolicy | null,
  validate: Validate,
): Promise<void> {
  const config = ctx.run.config;
  // with fresh worlds no episode of the GRPO phase is played in the run's world
  const loop = config.world.fresh ? null : makeLoop(ctx, model, engine, ctx.run.env);
  try {
    const last = Math.min(config.grpo.steps, ctx.options.stopAfter ?? Number.POSITIVE_INFINITY);
    if (ctx.state.step < last)
      ctx.emit({ kind: 'phase', phase: 'grpo', message: `GRPO steps ${ctx.state.step + 1}..${last}` });
    while (ctx.state.step < last) await step(ctx, model, engine, loop, reference, validate, last);
    // a run resumed with as many steps as it has done (`steps`) ends with the validation an
    // uninterrupted run of that length makes at its end
    const s = ctx.state;
    if (s.sftDone && s.step === config.grpo.steps && !ctx.rows.some((r) => r.phase === 'val' && r.step === s.step))
      await validate(s.step);
  } finally {
    await loop?.dispose();
  }
}
