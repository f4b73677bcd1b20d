/**
 * The SFT phase of a run (once, before the first GRPO step): the copy-task warm-up when the
 * model wants one, the expert's demonstrations (in the training world and the demonstration
 * worlds, sharing the episodes round-robin) made into training sequences the model's way, SFT,
 * then the KL reference, the first validation (step 0) and the first checkpoint.
 * @module
 */
import { performance } from 'node:perf_hooks';

import { mixSeed, type EpisodeRecord } from '../../rollout/index.js';
import type { ModelHandle } from '../model-handle.js';
import { collectDemonstrations, runInductionWarmup, runSft } from '../sft.js';
import { demonstrationWorlds, trainEnvFactory } from '../world.js';
import type { Validate } from './open-phase.js';
import type { RunContext } from './run-context.js';

/** The copy-task warm-up (logged every 25 steps and at its end). */
async function inductionWarmup(ctx: RunContext, model: ModelHandle): Promise<void> {
  const { config } = ctx.run;
  ctx.emit({
    kind: 'phase',
    phase: 'sft',
    message: `induction warm-up (${config.sft.inductionSteps} steps of copy data)`,
  });
  const t0 = performance.now();
  const losses = await runInductionWarmup(model.policy, config.sft, config.seed, (step, loss) => {
    ctx.emit({ kind: 'sft', step, total: config.sft.inductionSteps, loss });
    if (step % 25 === 0 || step === config.sft.inductionSteps)
      ctx.log({ step: 0, phase: 'induction', 'induction/step': step, 'induction/loss': loss });
  });
  ctx.log({
    step: 0,
    phase: 'induction-summary',
    'induction/final_loss': losses[losses.length - 1],
    'timing_s/induction': (performance.now() - t0) / 1000,
  });
}

/** The expert's successful episodes: the training tasks (unless `world.fresh`), then each demonstration world's tasks. */
async function demonstrations(
  ctx: RunContext,
  model: ModelHandle,
): Promise<{ kept: EpisodeRecord[]; all: EpisodeRecord[] }> {
  const { config, tw, env, prompt, limits } = ctx.run;
  const format = model.demonstrations;
  // with fresh worlds the run's world is held out for validation: demonstrations come from the
  // demonstration worlds only (each keeps the seed it has without fresh worlds)
  const sources = [
    ...(config.world.fresh ? [] : [{ world: tw.world, taskIds: tw.trainIds, env, seedIndex: 0 }]),
    ...demonstrationWorlds(config).map((d, i) => ({
      world: d.world,
      taskIds: [...d.trainIds, ...d.valIds],
      env: trainEnvFactory(config, d.world),
      seedIndex: i + 1,
    })),
  ];
  const demos: { kept: EpisodeRecord[]; all: EpisodeRecord[] } = { kept: [], all: [] };
  for (const [k, src] of sources.entries()) {
    const count = Math.floor(config.sft.episodes / sources.length) + (k < config.sft.episodes % sources.length ? 1 : 0);
    const got = await collectDemonstrations({
      world: src.world,
      taskIds: src.taskIds,
      env: src.env,
      count,
      chat: format.chat,
      prompt,
      limits: format.limits(limits),
      seed: src.seedIndex === 0 ? mixSeed(config.seed, 0xde0) : mixSeed(config.seed, 0xde0, src.seedIndex),
    });
    demos.kept.push(...got.kept);
    demos.all.push(...got.all);
  }
  return demos;
}

/** Runs the SFT phase unless the run did already (see the module description). */
export async function sftPhase(ctx: RunContext, model: ModelHandle, validate: Validate): Promise<void> {
  if (ctx.state.sftDone) return;
  const { config, prompt, limits, out } = ctx.run;
  if (config.sft.inductionSteps > 0 && model.demonstrations.induction) await inductionWarmup(ctx, model);
  ctx.emit({ kind: 'phase', phase: 'demonstrations', message: 'collecting expert demonstrations' });
  const t0 = performance.now();
  const demos = await demonstrations(ctx, model);
  const rendered = model.demonstrations.sequences(demos.kept, {
    renderTools: prompt.renderTools,
    maxTokens: limits.maxContextTokens,
  });
  const seqs = rendered.sequences;
  const dropped = demos.all.length - demos.kept.length + rendered.tooLong;
  const demoS = (performance.now() - t0) / 1000;
  ctx.emit({ kind: 'phase', phase: 'sft', message: `SFT on ${seqs.length} demonstrations` });
  const t1 = performance.now();
  const infos = await runSft(model.policy, seqs, config.sft, config.seed, (i) => {
    ctx.emit({ kind: 'sft', step: i.step, total: config.sft.steps, loss: i.loss });
    if (i.step % 10 === 0 || i.step === config.sft.steps)
      ctx.log({
        step: 0,
        phase: 'sft',
        'sft/step': i.step,
        'sft/loss': i.loss,
        'sft/grad_norm': i.gradNorm,
        'sft/lr': i.lr,
        'sft/tokens': i.tokens,
        ...(config.sft.observationWeight > 0 ? { 'sft/observation_loss': i.observationLoss } : {}),
      });
  });
  const tokens = seqs.map((s) => s.tokens.length);
  ctx.log({
    step: 0,
    phase: 'sft-summary',
    'sft/demonstrations': seqs.length,
    'sft/demonstrations_dropped': dropped,
    'sft/demo_tokens/mean': tokens.length ? tokens.reduce((a, b) => a + b, 0) / tokens.length : 0,
    'sft/steps': infos.length,
    'sft/final_loss': infos.length ? infos[infos.length - 1].loss : 0,
    'timing_s/demonstrations': demoS,
    'timing_s/sft': (performance.now() - t1) / 1000,
  });
  ctx.state = { ...ctx.state, sftDone: true };
  if (config.grpo.klCoef > 0) await model.saveReference(out);
  await ctx.notifyUpdate(model, 0);
  await validate(0);
  await ctx.saveCheckpoint(model);
  ctx.writeReport();
}
