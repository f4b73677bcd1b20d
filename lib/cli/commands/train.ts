/**
 * `sinkflex train`: trains the built-in policy (SFT warm start, then GRPO) on a generated tau
 * world, with a progress bar and live metrics; `npm start` runs it with the defaults.
 * @module
 */
import { join } from 'node:path';

import type { Command } from 'commander';

import { ConfigError, parseOverride, readConfigFile, resolveConfig, train, valSourceName, type PresetName, type TrainConfig, type TrainEvent, type TrainResult } from '../../trainer/index.js';
import { ProgressBar } from './progress.js';

/** Options of `sinkflex train` as commander parses them. */
export interface TrainCommandOptions {
  config?: string;
  preset?: string;
  set?: string[];
  steps?: string;
  sftSteps?: string;
  seed?: string;
  out?: string;
  env?: string;
  resume?: string;
  stopAfter?: string;
  progress?: boolean;
  json?: boolean;
}

function intFlag(v: string | undefined, name: string, min = 0): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new ConfigError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return n;
}

/** Resolves the configuration of a `train` invocation: preset ← file ← `--set` ← flags. */
export function configFromFlags(o: TrainCommandOptions): TrainConfig {
  const patches: unknown[] = [];
  if (o.config) patches.push(readConfigFile(o.config));
  for (const s of o.set ?? []) patches.push(parseOverride(s));
  const steps = intFlag(o.steps, 'steps');
  const sftSteps = intFlag(o.sftSteps, 'sft-steps');
  const seed = intFlag(o.seed, 'seed');
  if (steps !== undefined) patches.push({ grpo: { steps } });
  if (sftSteps !== undefined) patches.push({ sft: { steps: sftSteps } });
  if (seed !== undefined) patches.push({ seed });
  if (o.env !== undefined) patches.push({ env: o.env });
  return resolveConfig({ preset: (o.preset ?? 'default') as PresetName, patches });
}

/** The default run folder: `runs/<preset>-<UTC timestamp>`. */
export function defaultOut(preset: string, now = new Date()): string {
  return join('runs', `${preset}-${now.toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-')}`);
}

/** Runs `sinkflex train` with parsed options; returns the result (the CLI prints a summary). */
export async function runTrainCommand(o: TrainCommandOptions, log: (line: string) => void = (l) => console.log(l)): Promise<TrainResult> {
  const stopAfter = intFlag(o.stopAfter, 'stop-after', 1);
  const bar = new ProgressBar(process.stderr, o.progress === false ? false : undefined);
  let config: TrainConfig;
  let out: string;
  if (o.resume) {
    out = o.resume;
    config = resolveConfig(); // replaced by the run's own config.json
  } else {
    config = configFromFlags(o);
    out = o.out ?? defaultOut(config.preset);
  }
  const source = valSourceName(config.env);
  const onEvent = (e: TrainEvent) => {
    switch (e.kind) {
      case 'phase':
        bar.log(`[${e.phase}] ${e.message}`);
        break;
      case 'sft':
        if (e.step === 1) bar.start('sft ', e.total);
        bar.update(e.step, `loss ${e.loss.toFixed(3)}`);
        break;
      case 'grpo': {
        const m = e.metrics;
        if (e.step === 1 || bar.render().startsWith('sft')) bar.start('grpo', e.total);
        bar.update(e.step, `reward ${(m['critic/score/mean'] ?? 0).toFixed(3)} kl ${(m['actor/ppo_kl'] ?? 0).toExponential(1)} ent ${(m['actor/entropy'] ?? 0).toFixed(2)} len ${(m['response_length/mean'] ?? 0).toFixed(0)} ${(m['timing_s/step'] ?? 0).toFixed(1)}s/step`);
        break;
      }
      case 'validation':
        bar.log(`validation after step ${e.step}: mean@1 ${e.meanAt1.toFixed(3)}, pass^k ${Object.entries(e.metrics).filter(([k]) => k.startsWith(`val-core/${source}/reward/pass^`)).map(([k, v]) => `${k.slice(k.lastIndexOf('/') + 1)}=${v.toFixed(3)}`).join(' ')}`);
        break;
    }
  };
  log(`sinkflex train: ${o.resume ? `resuming ${out}` : `${config.preset} preset, ${config.env}, seed ${config.seed}, ${config.grpo.steps} GRPO steps → ${out}`}`);
  try {
    const r = await train(config, { out, resume: Boolean(o.resume), ...(stopAfter !== undefined ? { stopAfter } : {}), onEvent });
    bar.stop();
    const summary = { out: r.out, steps: r.step, firstValMeanAt1: r.firstValMeanAt1, lastValMeanAt1: r.lastValMeanAt1, wallS: Math.round(r.wallS), cpuS: Math.round(r.cpuS) };
    if (o.json) log(JSON.stringify(summary));
    else {
      log(`done: ${r.step} GRPO steps in ${r.wallS.toFixed(0)} s wall (${r.cpuS.toFixed(0)} s CPU)`);
      log(`validation mean@1: ${r.firstValMeanAt1?.toFixed(3) ?? '-'} after SFT → ${r.lastValMeanAt1?.toFixed(3) ?? '-'} at the end`);
      log(`report: ${join(r.out, 'report.html')}`);
    }
    return r;
  } catch (e) {
    bar.stop();
    throw e;
  }
}

/** Registers `sinkflex train`. */
export function registerTrain(program: Command): void {
  program
    .command('train')
    .description('train the built-in policy with SFT then GRPO on a generated tau world (the default run learns on a 2-core CPU)')
    .option('--config <file>', 'configuration file (.json or .toml), applied over the preset')
    .option('--preset <name>', 'default | smoke', 'default')
    .option('--set <path=value>', 'override one field, e.g. --set grpo.lr=3e-4 (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--steps <n>', 'GRPO steps (grpo.steps)')
    .option('--sft-steps <n>', 'SFT steps (sft.steps)')
    .option('--seed <n>', 'master seed')
    .option('--env <id>', 'sinkflex/TauRetail-v0 | sinkflex/TauTelecom-v0')
    .option('--out <dir>', 'run folder (default runs/<preset>-<time>)')
    .option('--resume <run>', 'continue the run in this folder from its newest checkpoint')
    .option('--stop-after <n>', 'stop after this GRPO step (resumable)')
    .option('--no-progress', 'no progress bar')
    .option('--json', 'print the final summary as JSON')
    .action(async (opts: TrainCommandOptions) => {
      await runTrainCommand(opts);
    });
}
