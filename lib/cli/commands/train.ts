/**
 * `sinkflex train`: trains the built-in policy — or a pretrained Hugging Face model with LoRA
 * (`--model-dir DIR`, i.e. `model.source: 'hf:DIR'`) — (SFT warm start, then GRPO) on a
 * generated tau world, with a progress bar and live metrics on a terminal and plain progress
 * lines elsewhere; `npm start` runs it with the defaults.
 * @module
 */
import { join } from 'node:path';

import type { Command } from 'commander';

import {
  ConfigError,
  parseOverride,
  readConfigFile,
  resolveConfig,
  resumeRunFolder,
  ROLLOUT_ENGINE_FIELDS,
  train,
  valSourceName,
  type PresetName,
  type RolloutEnginePatch,
  type TrainConfig,
  type TrainResult,
} from '../../trainer/index.js';
import { ProgressBar, type ProgressStream } from './progress.js';
import { trainProgress } from './train-progress.js';

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
  modelDir?: string;
  resume?: string;
  stopAfter?: string;
  progress?: boolean;
  json?: boolean;
}

function intFlag(v: string | undefined, name: string, min = 0): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min)
    throw new ConfigError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
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
  if (o.modelDir !== undefined) {
    if (o.modelDir === '') throw new ConfigError('--model-dir needs a Hugging Face model folder');
    patches.push({ model: { source: `hf:${o.modelDir}` } });
  }
  return resolveConfig({ preset: (o.preset ?? 'default') as PresetName, patches });
}

/** The default run folder: `runs/<preset>-<UTC timestamp>`. */
export function defaultOut(preset: string, now = new Date()): string {
  return join('runs', `${preset}-${now.toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-')}`);
}

/** What a resumed run may change (the tail of the refusals' messages). */
const RESUME_CHANGES = `a resumed run keeps the configuration in its config.json. What can change on resume: --steps <n> (the new number of GRPO steps: more extends the run, also a finished one), --model-dir <dir> (a pretrained model's base folder at a new place, when its fingerprint is the run's), --stop-after, --set of where episodes are sampled (${ROLLOUT_ENGINE_FIELDS.map((f) => `rollout.${f}`).join(', ')}), --no-progress and --json. To train with another configuration, start a new run (--out).`;

/**
 * The `--set` overrides a resumed run takes: the rollout engine's fields (where episodes are
 * sampled, not what is sampled); any other field is refused, naming it.
 */
export function rolloutEngineOverrides(sets: readonly string[]): RolloutEnginePatch | undefined {
  if (sets.length === 0) return undefined;
  const patch: Record<string, unknown> = {};
  for (const s of sets) {
    const o = parseOverride(s);
    const rollout = o.rollout;
    const keys =
      rollout !== null && typeof rollout === 'object' && !Array.isArray(rollout) && Object.keys(o).length === 1
        ? Object.keys(rollout)
        : [];
    const field = s.slice(0, Math.max(0, s.indexOf('='))).trim();
    if (
      keys.length !== 1 ||
      !(ROLLOUT_ENGINE_FIELDS as readonly string[]).includes(keys[0]) ||
      field.split('.').length !== 2
    ) {
      throw new ConfigError(
        `--set cannot be used with --resume: ${field || s} is not a rollout engine field; ${RESUME_CHANGES}`,
      );
    }
    patch[keys[0]] = (rollout as Record<string, unknown>)[keys[0]];
  }
  return patch as RolloutEnginePatch;
}

/** The flags that describe a new run, which `--resume` refuses (the run's config.json fixes them). */
const NEW_RUN_FLAGS: readonly (readonly [keyof TrainCommandOptions, string])[] = [
  ['config', '--config'],
  ['preset', '--preset'],
  ['sftSteps', '--sft-steps'],
  ['seed', '--seed'],
  ['env', '--env'],
  ['out', '--out'],
];

/** Where `sinkflex train` writes besides `log` (default the process's stdout and stderr). */
export interface TrainCommandStreams {
  /** Decides whether plain progress lines go to `log`: they do when it is not a TTY. */
  stdout?: ProgressStream;
  /** The progress bar (on a TTY), warnings, and plain progress lines with `--json`. */
  stderr?: ProgressStream;
}

/**
 * Runs `sinkflex train` with parsed options; returns the result (the CLI prints a summary).
 *
 * On a terminal the progress bar is drawn on stderr. Where it is not drawn (stderr is not a
 * TTY, or `--no-progress`), and whenever stdout is not a TTY (`npm start > log`, CI), plain
 * lines go to stdout (`log`): phases, validation results, SFT steps about every tenth of the
 * phase and every GRPO step. With `--json` stdout holds only the summary, and the plain lines
 * go to stderr instead (when no bar is drawn there).
 */
export async function runTrainCommand(
  o: TrainCommandOptions,
  log: (line: string) => void = (l) => console.log(l),
  streams: TrainCommandStreams = {},
): Promise<TrainResult> {
  const stdout = streams.stdout ?? process.stdout;
  const stderr = streams.stderr ?? process.stderr;
  const stopAfter = intFlag(o.stopAfter, 'stop-after', 0);
  let config: TrainConfig;
  let out: string;
  let steps: number | undefined;
  let rolloutEngine: RolloutEnginePatch | undefined;
  if (o.resume) {
    const refused = NEW_RUN_FLAGS.filter(
      ([k]) => o[k] !== undefined && !(Array.isArray(o[k]) && o[k].length === 0),
    ).map(([, flag]) => flag);
    if (refused.length > 0) {
      throw new ConfigError(`${refused.join(', ')} cannot be used with --resume: ${RESUME_CHANGES}`);
    }
    steps = intFlag(o.steps, 'steps');
    rolloutEngine = rolloutEngineOverrides(o.set ?? []);
    out = resumeRunFolder(o.resume);
    config = resolveConfig(); // replaced by the run's own config.json
  } else {
    config = configFromFlags(o);
    out = o.out ?? defaultOut(config.preset);
  }
  const bar = new ProgressBar(stderr, o.progress === false ? false : undefined);
  const toStderr = (l: string) => void stderr.write(`${l}\n`);
  let plain: ((line: string) => void) | null = null;
  if (o.json) plain = bar.enabled ? null : toStderr;
  else if (!bar.enabled || !stdout.isTTY) plain = log;
  const onEvent = trainProgress({
    bar,
    plain,
    warn: bar.enabled ? (l) => bar.log(l) : toStderr,
    source: valSourceName(config.env),
  });
  const resumed =
    o.resume && out !== o.resume ? `resuming ${out} (the run of the checkpoint ${o.resume})` : `resuming ${out}`;
  const model =
    config.model.source === 'builtin'
      ? ''
      : `, ${config.model.source.slice(3)} (${config.model.lora ? `LoRA rank ${config.model.lora.rank}` : 'full fine-tuning'})`;
  log(
    `sinkflex train: ${o.resume ? `${resumed}${steps !== undefined ? `, GRPO steps → ${steps}` : ''}` : `${config.preset} preset, ${config.env}${model}, seed ${config.seed}, ${config.grpo.steps} GRPO steps → ${out}`}`,
  );
  try {
    const r = await train(config, {
      out,
      resume: Boolean(o.resume),
      ...(o.resume && o.modelDir !== undefined ? { modelDir: o.modelDir } : {}),
      ...(steps !== undefined ? { steps } : {}),
      ...(stopAfter !== undefined ? { stopAfter } : {}),
      ...(rolloutEngine ? { rolloutEngine } : {}),
      onEvent,
    });
    bar.stop();
    const summary = {
      out: r.out,
      steps: r.step,
      firstValMeanAt1: r.firstValMeanAt1,
      lastValMeanAt1: r.lastValMeanAt1,
      kinds: r.kinds,
      wallS: Math.round(r.wallS),
      cpuS: Math.round(r.cpuS),
    };
    if (o.json) log(JSON.stringify(summary));
    else {
      log(`done: ${r.step} GRPO steps in ${r.wallS.toFixed(0)} s wall (${r.cpuS.toFixed(0)} s CPU)`);
      log(
        `validation mean@1: ${r.firstValMeanAt1?.toFixed(3) ?? '-'} after SFT → ${r.lastValMeanAt1?.toFixed(3) ?? '-'} at the end`,
      );
      if (r.kinds.length > 0)
        log(`by kind: ${r.kinds.map((k) => `${k.kind} ${k.first.toFixed(3)} → ${k.last.toFixed(3)}`).join(', ')}`);
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
    .description(
      'train the built-in policy (or a Hugging Face model with LoRA: --model-dir) with SFT then GRPO on a generated tau world (the default run learns on a 2-core CPU)',
    )
    .option('--config <file>', 'configuration file (.json or .toml), applied over the preset')
    .option('--preset <name>', 'default | smoke (default: default)')
    .option(
      '--set <path=value>',
      'override one field, e.g. --set grpo.lr=3e-4 (repeatable)',
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .option(
      '--steps <n>',
      'GRPO steps (grpo.steps); with --resume: the new total, to extend a run (also a finished one)',
    )
    .option('--sft-steps <n>', 'SFT steps (sft.steps)')
    .option('--seed <n>', 'master seed')
    .option('--env <id>', 'sinkflex/TauRetail-v0 | sinkflex/TauTelecom-v0')
    .option(
      '--model-dir <dir>',
      "train a Hugging Face model folder (gpt-oss, Qwen3, Qwen2, Llama) instead of the built-in model: model.source 'hf:<dir>', LoRA per model.lora (default rank 16, alpha 32, all-linear; --set model.lora=null: full fine-tuning)",
    )
    .option('--out <dir>', 'run folder (default runs/<preset>-<time>)')
    .option(
      '--resume <run>',
      'continue the run in this folder (or of its newest checkpoint folder) from its newest checkpoint; only --steps, --stop-after, --set rollout.<engine field>, --no-progress and --json may be given with it',
    )
    .option('--stop-after <n>', 'stop after this GRPO step (resumable; 0: after SFT)')
    .option('--no-progress', 'plain progress lines instead of the progress bar (as when the output is not a terminal)')
    .option('--json', 'print the final summary as JSON')
    .action(async (opts: TrainCommandOptions) => {
      await runTrainCommand(opts);
    });
}
