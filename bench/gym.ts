/**
 * Gym benchmark, measured side by side in one run:
 *
 * 1. CartPole steps/s of the bare environment vs through `make` (PassiveEnvChecker,
 *    OrderEnforcing, TimeLimit), same actions, interleaved rounds.
 * 2. AsyncVectorEnv (one worker thread per sub-environment) vs SyncVectorEnv on a CPU-heavy
 *    environment (bench/gym-heavy-env.ts), same seeds and actions, interleaved rounds.
 *
 * Run: `npm run build:ts && node dist/bench/gym.js [--json [file]] [--quick]`.
 * @module
 */
import { availableParallelism, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';

import { AsyncVectorEnv, CartPoleEnv, RandomGenerator, SyncVectorEnv, make, type Env } from '../lib/gym/index.js';
import { HeavyEnv } from './gym-heavy-env.js';
import { benchProgram, parseBench, runWhenInvoked, writeJson, type BenchCliSettings } from './common/cli.js';

/** Options of {@link runGymBench}. */
export interface GymBenchOptions {
  /** CartPole steps per round (default 200000). */
  cartpoleSteps?: number;
  /** Vector steps per round (default 30). */
  vectorSteps?: number;
  /** Sub-environments (default: the number of CPUs, at least 2). */
  numEnvs?: number;
  /** Work iterations per heavy step (default 200000). */
  workIterations?: number;
  /** Interleaved rounds after a warm-up; the best round of each side counts (default 20). */
  rounds?: number;
  /** Print a summary (default true). */
  print?: boolean;
}

/** The measured numbers. */
export interface GymBenchResult {
  cpus: number;
  cartpole: { steps: number; bareStepsPerSec: number; madeStepsPerSec: number; wrapperOverhead: number };
  vector: {
    numEnvs: number;
    workIterations: number;
    steps: number;
    syncStepsPerSec: number;
    asyncStepsPerSec: number;
    speedup: number;
    /** Process CPU time / wall time during the best async round (how many cores the workers got). */
    asyncCoresUsed: number;
  };
  /** The 1-minute load average before the run (other processes competing for the CPUs). */
  loadAverage: number;
}

function cartpoleRound(env: Env<Float32Array, number>, actions: Uint8Array): number {
  env.reset({ seed: 0 });
  const start = performance.now();
  for (let i = 0; i < actions.length; i++) {
    const r = env.step(actions[i]);
    if (r[2] || r[3]) env.reset();
  }
  return actions.length / ((performance.now() - start) / 1000);
}

/** Runs both measurements and returns (and by default prints) the numbers. */
export async function runGymBench(options: GymBenchOptions = {}): Promise<GymBenchResult> {
  const cpus = availableParallelism();
  const loadAverage = loadavg()[0];
  const steps = options.cartpoleSteps ?? 200_000;
  const rounds = options.rounds ?? 20;
  const rng = new RandomGenerator(0);
  const actions = Uint8Array.from({ length: steps }, () => rng.integers(2));
  const bare = new CartPoleEnv();
  const made = make<Float32Array, number>('sinkflex/CartPole-v1');
  let bareBest = 0;
  let madeBest = 0;
  cartpoleRound(bare, actions); // warm-up (JIT)
  cartpoleRound(made, actions);
  for (let r = 0; r < rounds; r++) {
    // alternate which side goes first
    const order = r % 2 === 0 ? [bare, made] : [made, bare];
    for (const env of order) {
      const rate = cartpoleRound(env, actions);
      if (env === bare) bareBest = Math.max(bareBest, rate);
      else madeBest = Math.max(madeBest, rate);
    }
  }

  const numEnvs = options.numEnvs ?? Math.max(2, cpus);
  const workIterations = options.workIterations ?? 200_000;
  const vectorSteps = options.vectorSteps ?? 30;
  const here = import.meta.url;
  const heavyModule = new URL(here.endsWith('.ts') ? './gym-heavy-env.ts' : './gym-heavy-env.js', here).href;
  const syncEnvs = new SyncVectorEnv<Float32Array, Int32Array>(
    Array.from({ length: numEnvs }, () => () => new HeavyEnv({ workIterations })),
  );
  const asyncEnvs = await AsyncVectorEnv.create<Float32Array, Int32Array>(
    Array.from({ length: numEnvs }, () => ({
      module: heavyModule,
      exportName: 'HeavyEnv',
      kwargs: { workIterations },
    })),
  );
  try {
    const vecActions = Array.from({ length: vectorSteps }, () =>
      Int32Array.from({ length: numEnvs }, () => rng.integers(2)),
    );
    let syncBest = 0;
    let asyncBest = 0;
    let asyncCores = 0;
    syncEnvs.reset({ seed: 0 }); // warm-up
    await asyncEnvs.reset({ seed: 0 });
    for (const a of vecActions.slice(0, 20)) {
      syncEnvs.step(a);
      await asyncEnvs.step(a);
    }
    for (let r = 0; r < rounds; r++) {
      syncEnvs.reset({ seed: r });
      let start = performance.now();
      for (const a of vecActions) syncEnvs.step(a);
      syncBest = Math.max(syncBest, (vectorSteps * numEnvs) / ((performance.now() - start) / 1000));
      await asyncEnvs.reset({ seed: r });
      const cpu = process.cpuUsage();
      start = performance.now();
      for (const a of vecActions) await asyncEnvs.step(a);
      const wallMs = performance.now() - start;
      const used = process.cpuUsage(cpu);
      const rate = (vectorSteps * numEnvs) / (wallMs / 1000);
      if (rate > asyncBest) {
        asyncBest = rate;
        asyncCores = (used.user + used.system) / 1000 / wallMs;
      }
    }
    const result: GymBenchResult = {
      cpus,
      cartpole: { steps, bareStepsPerSec: bareBest, madeStepsPerSec: madeBest, wrapperOverhead: bareBest / madeBest },
      vector: {
        numEnvs,
        workIterations,
        steps: vectorSteps,
        syncStepsPerSec: syncBest,
        asyncStepsPerSec: asyncBest,
        speedup: asyncBest / syncBest,
        asyncCoresUsed: asyncCores,
      },
      loadAverage,
    };
    if (options.print ?? true) {
      const f = (n: number): string => Math.round(n).toLocaleString('en-US');
      console.log(
        `gym benchmark (${cpus} CPUs, load average ${loadAverage.toFixed(2)}, best of ${rounds} interleaved rounds)`,
      );
      console.log(`  CartPole bare            ${f(bareBest)} steps/s`);
      console.log(
        `  CartPole via make()      ${f(madeBest)} steps/s   (bare / made = ${(bareBest / madeBest).toFixed(2)}x)`,
      );
      console.log(`  SyncVectorEnv  x${numEnvs} heavy  ${f(syncBest)} env-steps/s`);
      console.log(
        `  AsyncVectorEnv x${numEnvs} heavy  ${f(asyncBest)} env-steps/s   (async / sync = ${(asyncBest / syncBest).toFixed(2)}x, ${asyncCores.toFixed(2)} cores busy)`,
      );
    }
    return result;
  } finally {
    syncEnvs.close();
    await asyncEnvs.close();
  }
}

/** The command line (the arguments after the script): `[--quick] [--json [file]]`. */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<GymBenchResult> {
  const program = benchProgram(
    'gym',
    'Gymnasium env step rates: CartPole bare vs make(), sync vs async vector envs',
    cli,
  );
  const o = parseBench(program, argv);
  const result = await runGymBench({
    ...(o.quick ? { cartpoleSteps: 50_000, vectorSteps: 100, rounds: 2 } : {}),
    print: o.json !== true,
  });
  writeJson(o.json, result);
  return result;
}

runWhenInvoked(import.meta.url, 'gym', main);
