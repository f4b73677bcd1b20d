/**
 * Telecom (dual-control) benchmark: reset and grading times, the expert agent with the scripted
 * user on generated fault scenarios (steps/s, success per persona and per number of root
 * causes), a random agent's mean reward, and the expert on tau2's 20 small-set tasks when
 * `../shared/tau2/telecom` exists. Run: `node dist/bench/tau-telecom.js [--json]`.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import type { SimulationRun } from '../lib/tau/index.js';
import {
  createTelecomDomain,
  ExpertTelecomAgent,
  generateTelecomDb,
  generateTelecomTasks,
  loadTau2Telecom,
  RandomAgent,
  runEpisodeSync,
  ScriptedTelecomUser,
  TauEpisode,
} from '../lib/tau/index.js';
import { benchProgram, parseBench, runWhenInvoked, tableLog, writeJson, type BenchCliSettings } from './common/cli.js';

/** Options of {@link runTauTelecomBench}. */
export interface TauTelecomBenchOptions {
  /** tau2 data folder (default `../shared/tau2` or env SINKFLEX_TAU2_DIR). */
  tau2Dir?: string;
  /** Generated tasks. Default 300. */
  episodes?: number;
  /** Seed. Default 0. */
  seed?: number;
}

/** Measured numbers. */
export interface TauTelecomBenchResult {
  /** Median time to build a task's initial state (set-up actions + sync), ms. */
  resetMedianMs: number;
  /** Median time to grade a finished expert episode (replay with sync + assertions), ms. */
  gradeMedianMs: number;
  /** Expert + scripted user: episode steps per second (reset and grading included). */
  stepsPerSecond: number;
  /** Episodes per second. */
  episodesPerSecond: number;
  /** Mean steps per episode. */
  meanSteps: number;
  /** Expert success on generated tasks. */
  expertSuccess: number;
  /** Expert success by persona. */
  expertByPersona: Record<string, number>;
  /** Expert success by number of root causes. */
  expertByFaults: Record<string, number>;
  /** Random agent mean reward on the same tasks. */
  randomMeanReward: number;
  /** Expert success on tau2's small set (3 seeds each), null without the data. */
  tau2SmallSuccess: number | null;
}

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function rate(map: Map<string, [number, number]>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, [ok, n]] of [...map.entries()].sort()) out[k] = ok / n;
  return out;
}

/** Runs the benchmark. */
export function runTauTelecomBench(options: TauTelecomBenchOptions = {}): TauTelecomBenchResult {
  const seed = options.seed ?? 0;
  const db = generateTelecomDb({ seed });
  const domain = createTelecomDomain({ db });
  const tasks = generateTelecomTasks(db, { seed, count: options.episodes ?? 300 });
  const resets: number[] = [];
  for (const task of tasks) {
    const t0 = performance.now();
    domain.initialState(task);
    resets.push(performance.now() - t0);
  }
  const ep = new TauEpisode(domain, { user: new ScriptedTelecomUser(), maxSteps: 200 });
  let steps = 0;
  let ok = 0;
  const byPersona = new Map<string, [number, number]>();
  const byFaults = new Map<string, [number, number]>();
  const runs: { task: (typeof tasks)[number]; run: SimulationRun }[] = [];
  const t0 = performance.now();
  for (const [i, task] of tasks.entries()) {
    const r = runEpisodeSync(ep, new ExpertTelecomAgent(), task, i);
    steps += ep.counters.steps;
    const win = r.final.reward === 1 ? 1 : 0;
    ok += win;
    const s = task.sinkflex_scenario;
    for (const [m, k] of [
      [byPersona, s?.persona ?? '?'],
      [byFaults, String(s?.faults.length ?? 0)],
    ] as const) {
      const [a, b] = m.get(k) ?? [0, 0];
      m.set(k, [a + win, b + 1]);
    }
    const sim = ep.simulation();
    if (sim) runs.push({ task, run: sim });
  }
  const secs = (performance.now() - t0) / 1000;
  const grades: number[] = [];
  for (const { task, run } of runs.slice(0, 100)) {
    const g0 = performance.now();
    ep.evaluator.evaluate(task, run);
    grades.push(performance.now() - g0);
  }
  let random = 0;
  for (const [i, task] of tasks.entries())
    random += runEpisodeSync(ep, new RandomAgent(), task, 10000 + i).final.reward;
  let tau2: number | null = null;
  const dir = join(
    options.tau2Dir ?? process.env.SINKFLEX_TAU2_DIR ?? join(process.cwd(), '..', 'shared', 'tau2'),
    'telecom',
  );
  if (existsSync(dir)) {
    const data = loadTau2Telecom(dir, { split: 'small' });
    const ep2 = new TauEpisode(data.domain, { user: new ScriptedTelecomUser(), maxSteps: 200 });
    let won = 0;
    for (const task of data.tasks)
      for (const s of [0, 1, 2])
        won += runEpisodeSync(ep2, new ExpertTelecomAgent(), task, s).final.reward === 1 ? 1 : 0;
    tau2 = won / (data.tasks.length * 3);
  }
  return {
    resetMedianMs: median(resets),
    gradeMedianMs: median(grades),
    stepsPerSecond: steps / secs,
    episodesPerSecond: tasks.length / secs,
    meanSteps: steps / tasks.length,
    expertSuccess: ok / tasks.length,
    expertByPersona: rate(byPersona),
    expertByFaults: rate(byFaults),
    randomMeanReward: random / tasks.length,
    tau2SmallSuccess: tau2,
  };
}

/** The command line (the arguments after the script): `[--quick] [--json [file]]`. */
export function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): TauTelecomBenchResult {
  const program = benchProgram(
    'tau-telecom',
    "tau telecom world: reset, grading, expert and random agents (tau2's small set when present)",
    cli,
  );
  const o = parseBench(program, argv);
  const r = runTauTelecomBench(o.quick ? { episodes: 30 } : {});
  const log = tableLog(o.json);
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  log('tau world / telecom (generated fault scenarios)');
  log(`  reset (set-up + sync)  median ${r.resetMedianMs.toFixed(3)} ms`);
  log(`  grade                  median ${r.gradeMedianMs.toFixed(3)} ms`);
  log(
    `  expert + scripted user ${r.stepsPerSecond.toFixed(0)} steps/s, ${r.episodesPerSecond.toFixed(1)} episodes/s, ${r.meanSteps.toFixed(1)} steps/episode`,
  );
  log(
    `  expert success         ${pct(r.expertSuccess)}  by persona ${Object.entries(r.expertByPersona)
      .map(([k, v]) => `${k} ${pct(v)}`)
      .join(', ')}; by root causes ${Object.entries(r.expertByFaults)
      .map(([k, v]) => `${k}: ${pct(v)}`)
      .join(', ')}`,
  );
  log(`  random agent           mean reward ${r.randomMeanReward.toFixed(3)}`);
  log(
    `  tau2 small set         ${r.tau2SmallSuccess === null ? 'n/a (no data)' : `expert ${pct(r.tau2SmallSuccess)}`}`,
  );
  writeJson(o.json, r);
  return r;
}

runWhenInvoked(import.meta.url, 'tau-telecom', main);
