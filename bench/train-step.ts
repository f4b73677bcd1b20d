/**
 * The default run's training step on the CPU, measured as the trainer runs it: the built-in
 * model of `DEFAULT_CONFIG` (`tiny` with the run's vocabulary, context and token shift), one
 * SFT step (a packed micro-batch of up to `sft.tokensPerStep` tokens of demonstration-length
 * sequences, observation-weighted cross-entropy: forward, backward, AdamW) and the work of one
 * GRPO micro-batch (`grpo.microBatchTokens`: the old and reference log-probs — forwards without
 * activations —, the actor's forward and backward, AdamW).
 *
 *   node dist/bench/train-step.js [--quick] [--steps n] [--rounds r] [--addons a.node,b.node] [--json [file]]
 *
 * Each variant (the current addon, or each addon file named by `--addons`, loaded through
 * `SINKFLEX_ADDON`; `env:NAME=VALUE` runs the current addon with that environment variable) runs
 * in a child process, the variants alternating round by round, so that a before/after
 * comparison sees the same load on a shared machine. Every step reports wall-clock and process
 * CPU milliseconds; the ratios are of the medians.
 */
import { spawnSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

import { Transformer, isSlidingLayer, opsIsa, packSequences, type ModelConfig } from '../lib/model/index.js';
import { fmaPeakGflops } from '../lib/model/ops.js';
import { backends } from '../lib/native/index.js';
import { runModelConfig } from '../lib/trainer/builtin-model.js';
import { DEFAULT_CONFIG } from '../lib/trainer/config.js';
import { observationWeightedStep } from '../lib/trainer/sft.js';
import { mulberry32 } from '../lib/util/random.js';
import {
  benchProgram,
  parseBench,
  runWhenInvoked,
  tableLog,
  writeJson,
  type BenchCliSettings,
  type CommonBenchOptions,
} from './common/cli.js';

/** Shortest and longest sequence of the synthetic steps (uniform; mean 570 tokens, as the default run's demonstrations and episodes). */
const SEQ_MIN = 160;
const SEQ_MAX = 980;

/** Median milliseconds of each part of a step. */
export interface StepTimes {
  /** Tokens in the packed micro-batch. */
  tokens: number;
  /** Part name -> median wall ms. */
  wallMs: Record<string, number>;
  /** Median wall ms of the whole step. */
  stepMs: number;
  /** Fastest wall ms of the whole step. */
  bestMs: number;
  /** Median process CPU ms of the whole step (all threads). */
  cpuMs: number;
  /** Mean GFLOP of a step: the matrix products (2 per multiply-add) and the attention (as bench/common's stepGflop counts it). */
  gflop: { matrices: number; attention: number };
}

/** What one child process measured. */
export interface VariantRun {
  sft: StepTimes;
  grpo: StepTimes;
  isa: string;
  threads: number;
  /** The FMA peak (GFLOP/s, all threads) measured in the child before its steps. */
  peakGflops: number;
}

/** One variant over all rounds. */
export interface VariantResult {
  name: string;
  runs: VariantRun[];
  /** Medians over the rounds' medians. */
  sftStepMs: number;
  sftCpuMs: number;
  sftTokensPerSecond: number;
  grpoStepMs: number;
  grpoCpuMs: number;
  grpoTokensPerSecond: number;
  /** GFLOP/s of the median steps as a fraction of the child's measured FMA peak (median over rounds). */
  sftPeakFraction: number;
  grpoPeakFraction: number;
}

/** The whole benchmark's result. */
export interface TrainStepBenchResult {
  machine: { cpu: string; threads: number; isa: string; loadAverageBefore: number; loadAverageAfter: number };
  config: ModelConfig;
  variants: VariantResult[];
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : Number.NaN;
}

/** Sequences of `SEQ_MIN..SEQ_MAX` random tokens packed first-fit up to `budget` tokens, loss on all but a 60-token prompt. */
function syntheticSequences(budget: number, vocab: number, r: () => number) {
  const seqs: { tokens: number[]; lossMask: number[] }[] = [];
  let used = 0;
  for (;;) {
    const n = SEQ_MIN + Math.floor(r() * (SEQ_MAX - SEQ_MIN + 1));
    if (used + n > budget) break;
    used += n;
    const tokens = Array.from({ length: n }, () => Math.floor(r() * vocab));
    seqs.push({ tokens, lossMask: tokens.map((_, i) => (i >= 60 ? 1 : 0)) });
  }
  return seqs;
}

/** (query, key) pairs each layer's attention visits in a packed batch (windowed layers see `window` keys at most). */
function attentionPairs(config: ModelConfig, offsets: Int32Array): number {
  let pairs = 0;
  for (let l = 0; l < config.layers; l++) {
    const w = isSlidingLayer(config, l) ? config.window : 0;
    for (let d = 0; d + 1 < offsets.length; d++) {
      const n = offsets[d + 1] - offsets[d];
      pairs += w > 0 && n > w ? (w * (w + 1)) / 2 + (n - w) * w : (n * (n + 1)) / 2;
    }
  }
  return pairs;
}

function summarize(
  tokens: number,
  gflop: StepTimes['gflop'],
  rows: { parts: Record<string, number>; cpu: number }[],
): StepTimes {
  const total = (x: { parts: Record<string, number> }) => Object.values(x.parts).reduce((a, b) => a + b, 0);
  const wallMs: Record<string, number> = {};
  for (const k of Object.keys(rows[0].parts)) wallMs[k] = median(rows.map((x) => x.parts[k]));
  return {
    tokens,
    wallMs,
    stepMs: median(rows.map(total)),
    bestMs: Math.min(...rows.map(total)),
    cpuMs: median(rows.map((x) => x.cpu)),
    gflop,
  };
}

/** GFLOP/s of a median step over the FMA peak. */
function fraction(s: StepTimes, peak: number): number {
  return (s.gflop.matrices + s.gflop.attention) / (s.stepMs / 1000) / peak;
}

/** Measures the steps in this process (the child's work). */
export async function measureSteps(steps: number, seed = 1): Promise<VariantRun> {
  const config = runModelConfig(DEFAULT_CONFIG, DEFAULT_CONFIG.tokenizer.vocabSize);
  const model = Transformer.create(config, seed);
  const r = mulberry32(seed);
  const optimizer = { lr: 1e-4, weightDecay: 0, maxGradNorm: 1 };
  // multiply-adds per token of the matrices (all but the embedding lookup; norms, sinks negligible)
  const matrixParams = model.store.numel - config.vocab * config.width;
  const perHead = config.heads * config.headDim;
  const peakGflops = fmaPeakGflops(0.3);
  try {
    // SFT: observation- and copy-weighted cross-entropy, as runSft with the default sft weights
    const sftRows: { parts: Record<string, number>; cpu: number }[] = [];
    let sftTokens = 0;
    const sftFlop = { matrices: 0, attention: 0 };
    for (let i = 0; i <= steps; i++) {
      const w = observationWeightedStep(
        syntheticSequences(DEFAULT_CONFIG.sft.tokensPerStep, config.vocab, r),
        DEFAULT_CONFIG.sft.observationWeight,
        DEFAULT_CONFIG.sft.copyWeight,
      );
      const dLogProbs = Float32Array.from(w.weights, (x) => -x);
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const f = await model.forwardAsync(w.batch);
      const t1 = performance.now();
      await f.backwardAsync({ dLogProbs });
      f.release();
      const t2 = performance.now();
      model.store.adamwStep(optimizer);
      model.store.zeroGrad();
      const t3 = performance.now();
      const c = process.cpuUsage(c0);
      if (i === 0) continue; // warm-up
      sftTokens += w.batch.tokens.length;
      sftFlop.matrices += (6 * matrixParams * w.batch.tokens.length) / 1e9 / steps;
      sftFlop.attention += (14 * perHead * attentionPairs(config, w.batch.offsets)) / 1e9 / steps;
      sftRows.push({ parts: { forward: t1 - t0, backward: t2 - t1, adamw: t3 - t2 }, cpu: (c.user + c.system) / 1000 });
    }
    // GRPO: one micro-batch's old and reference log-probs, the actor's forward and backward, AdamW
    const grpoRows: { parts: Record<string, number>; cpu: number }[] = [];
    let grpoTokens = 0;
    const grpoFlop = { matrices: 0, attention: 0 };
    const temperature = DEFAULT_CONFIG.rollout.temperature;
    for (let i = 0; i <= steps; i++) {
      const batch = packSequences(syntheticSequences(DEFAULT_CONFIG.grpo.microBatchTokens, config.vocab, r));
      const scored = batch.targets.filter((x) => x >= 0).length;
      const dLogProbs = Float32Array.from(batch.targets, (x) => (x >= 0 ? -(0.5 - r()) / scored : 0));
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await model.logProbsAsync(batch, { temperature });
      await model.logProbsAsync(batch, { temperature });
      const t1 = performance.now();
      const f = await model.forwardAsync(batch, { temperature });
      const t2 = performance.now();
      await f.backwardAsync({ dLogProbs });
      f.release();
      const t3 = performance.now();
      model.store.adamwStep(optimizer);
      model.store.zeroGrad();
      const t4 = performance.now();
      const c = process.cpuUsage(c0);
      if (i === 0) continue;
      grpoTokens += batch.tokens.length;
      // two forwards without activations, one with, one backward
      grpoFlop.matrices += (10 * matrixParams * batch.tokens.length) / 1e9 / steps;
      grpoFlop.attention += (22 * perHead * attentionPairs(config, batch.offsets)) / 1e9 / steps;
      grpoRows.push({
        parts: { 'log-probs x2': t1 - t0, forward: t2 - t1, backward: t3 - t2, adamw: t4 - t3 },
        cpu: (c.user + c.system) / 1000,
      });
    }
    const cpuBackend = backends().find((b) => b.name === 'cpu');
    return {
      sft: summarize(sftTokens / steps, sftFlop, sftRows),
      grpo: summarize(grpoTokens / steps, grpoFlop, grpoRows),
      peakGflops,
      isa: opsIsa(),
      threads: cpuBackend && cpuBackend.name === 'cpu' ? cpuBackend.threads : 1,
    };
  } finally {
    model.dispose();
  }
}

/** Options of {@link runTrainStepBench}. */
export interface TrainStepBenchOptions {
  /** Timed steps per child, after one warm-up (default 6). */
  steps?: number;
  /** Rounds (each runs every variant once, in turn; default 3). */
  rounds?: number;
  /** Variants: '' = the current addon, a path = that addon file, 'env:NAME=VALUE' = the current addon with that variable (default ['']). */
  variants?: string[];
  /** Progress lines (default console.log). */
  log?: (line: string) => void;
}

function childEnv(variant: string): NodeJS.ProcessEnv {
  const env = { ...process.env };
  if (variant.startsWith('env:')) {
    const [name, ...value] = variant.slice(4).split('=');
    env[name] = value.join('=');
  } else if (variant !== '') env.SINKFLEX_ADDON = variant;
  return env;
}

/** Runs every variant `rounds` times in child processes, alternating, and reports the medians. */
export async function runTrainStepBench(options: TrainStepBenchOptions = {}): Promise<TrainStepBenchResult> {
  const log = options.log ?? ((l: string) => console.log(l));
  const steps = options.steps ?? 6;
  const rounds = options.rounds ?? 3;
  const variants = options.variants?.length ? options.variants : [''];
  const config = runModelConfig(DEFAULT_CONFIG, DEFAULT_CONFIG.tokenizer.vocabSize);
  const loadBefore = loadavg()[0];
  const script = fileURLToPath(import.meta.url);
  const runs: VariantRun[][] = variants.map(() => []);
  let isa = '';
  let threads = 0;
  log(`train-step benchmark — ${cpus()[0]?.model ?? 'cpu'}, load average ${loadBefore.toFixed(2)}`);
  log(`model ${JSON.stringify(config)}`);
  for (let round = 0; round < rounds; round++) {
    for (const [v, variant] of variants.entries()) {
      const out = spawnSync(process.execPath, [...process.execArgv, script, '--child', String(steps)], {
        env: childEnv(variant),
        encoding: 'utf8',
        maxBuffer: 1 << 24,
      });
      if (out.status !== 0) throw new Error(`variant ${variant || 'current'} failed: ${out.stderr}`);
      const run = JSON.parse(out.stdout.trim().split('\n').pop() as string) as VariantRun;
      isa = run.isa;
      threads = run.threads;
      runs[v].push(run);
      log(
        `round ${round + 1} ${(variant || 'current').padEnd(24)} SFT ${run.sft.stepMs.toFixed(1)} ms (cpu ${run.sft.cpuMs.toFixed(1)})  GRPO ${run.grpo.stepMs.toFixed(1)} ms (cpu ${run.grpo.cpuMs.toFixed(1)})`,
      );
    }
  }
  const results: VariantResult[] = variants.map((name, v) => {
    const rs = runs[v];
    const sftStepMs = median(rs.map((x) => x.sft.stepMs));
    const grpoStepMs = median(rs.map((x) => x.grpo.stepMs));
    return {
      name: name || 'current',
      runs: rs,
      sftStepMs,
      sftCpuMs: median(rs.map((x) => x.sft.cpuMs)),
      sftTokensPerSecond: (median(rs.map((x) => x.sft.tokens)) / sftStepMs) * 1000,
      grpoStepMs,
      grpoCpuMs: median(rs.map((x) => x.grpo.cpuMs)),
      grpoTokensPerSecond: (median(rs.map((x) => x.grpo.tokens)) / grpoStepMs) * 1000,
      sftPeakFraction: median(rs.map((x) => fraction(x.sft, x.peakGflops))),
      grpoPeakFraction: median(rs.map((x) => fraction(x.grpo, x.peakGflops))),
    };
  });
  log(`\nops ${isa}, ${threads} threads; medians over ${rounds} rounds of ${steps} steps`);
  const g = runs[0][0];
  log(
    `GFLOP a step: SFT ${g.sft.gflop.matrices.toFixed(2)} matrices + ${g.sft.gflop.attention.toFixed(2)} attention, GRPO ${g.grpo.gflop.matrices.toFixed(2)} + ${g.grpo.gflop.attention.toFixed(2)}; FMA peak ${median(runs.flat().map((x) => x.peakGflops)).toFixed(1)} GFLOP/s (median of the children)`,
  );
  log(
    'variant                   SFT ms  SFT cpu ms  SFT tok/s  % peak   GRPO ms  GRPO cpu ms  GRPO tok/s  % peak   parts (SFT | GRPO, ms)',
  );
  for (const x of results) {
    const last = x.runs[x.runs.length - 1];
    const parts = (s: StepTimes) =>
      Object.entries(s.wallMs)
        .map(([k, v]) => `${k} ${v.toFixed(0)}`)
        .join(', ');
    log(
      `${x.name.slice(-24).padEnd(24)} ${x.sftStepMs.toFixed(1).padStart(7)} ${x.sftCpuMs.toFixed(1).padStart(11)} ${x.sftTokensPerSecond.toFixed(0).padStart(10)} ${(100 * x.sftPeakFraction).toFixed(1).padStart(6)}% ${x.grpoStepMs.toFixed(1).padStart(9)} ${x.grpoCpuMs.toFixed(1).padStart(12)} ${x.grpoTokensPerSecond.toFixed(0).padStart(11)} ${(100 * x.grpoPeakFraction).toFixed(1).padStart(6)}%   ${parts(last.sft)} | ${parts(last.grpo)}`,
    );
  }
  if (results.length > 1) {
    const b = results[0];
    for (const x of results.slice(1))
      log(
        `${x.name} vs ${b.name}: SFT step ${(b.sftStepMs / x.sftStepMs).toFixed(2)}x wall, ${(b.sftCpuMs / x.sftCpuMs).toFixed(2)}x cpu; GRPO ${(b.grpoStepMs / x.grpoStepMs).toFixed(2)}x wall, ${(b.grpoCpuMs / x.grpoCpuMs).toFixed(2)}x cpu`,
      );
  }
  const loadAfter = loadavg()[0];
  return {
    machine: {
      cpu: cpus()[0]?.model ?? 'cpu',
      threads,
      isa,
      loadAverageBefore: loadBefore,
      loadAverageAfter: loadAfter,
    },
    config,
    variants: results,
  };
}

/** The command line: `[--quick] [--steps n] [--rounds r] [--addons list] [--json [file]]` (`--child n` is the child's; `--quick`: 1 step, 1 round). */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<TrainStepBenchResult | VariantRun> {
  if (argv[0] === '--child') {
    const run = await measureSteps(Number(argv[1]));
    console.log(JSON.stringify(run));
    return run;
  }
  const program = benchProgram(
    'train-step',
    "the default run's SFT step and GRPO micro-batch on the CPU, variants side by side",
    cli,
  )
    .option('--steps <n>', 'timed steps per child process (default 6)')
    .option('--rounds <n>', 'rounds, each variant once per round (default 3)')
    .option(
      '--addons <list>',
      "comma-separated variants: an addon file (SINKFLEX_ADDON), 'env:NAME=VALUE', or 'current' (default current)",
    );
  const o = parseBench<CommonBenchOptions & { steps?: string; rounds?: string; addons?: string }>(program, argv);
  const int = (name: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`${name} must be a positive integer, got ${v}`);
    return n;
  };
  const result = await runTrainStepBench({
    steps: int('--steps', o.steps) ?? (o.quick === true ? 1 : undefined),
    rounds: int('--rounds', o.rounds) ?? (o.quick === true ? 1 : undefined),
    variants: o.addons?.split(',').map((s) => (s === 'current' ? '' : s)),
    ...(o.json === true ? { log: tableLog(o.json) } : {}),
  });
  writeJson(o.json, result);
  return result;
}

runWhenInvoked(import.meta.url, 'train-step', main);
