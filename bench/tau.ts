/**
 * tau world benchmark: episode reset and grading on tau2's retail DB (or a generated one when
 * the tau2 folder is missing) and on tau2's airline DB (when present), and steps per second of
 * the expert agent with the scripted user.
 * Run: `node dist/bench/tau.js [--json]`.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import type { SimulationRun, TauDomain, TauTask, WorldState } from '../lib/tau/index.js';
import {
  createRetailDomain,
  ExpertRetailAgent,
  generateRetailDb,
  generateRetailTasks,
  loadTau2Airline,
  loadTau2Retail,
  runEpisodeSync,
  ScriptedRetailUser,
  TauEpisode,
  TauEvaluator,
} from '../lib/tau/index.js';
import { benchProgram, parseBench, runWhenInvoked, tableLog, writeJson, type BenchCliSettings } from './common/cli.js';

/** Options of {@link runTauBench}. */
export interface TauBenchOptions {
  /** tau2 data folder (default `../shared/tau2` or env SINKFLEX_TAU2_DIR). */
  tau2Dir?: string;
  /** Repetitions for reset timing. Default 2000. */
  resets?: number;
  /** Generated tasks for the episode throughput. Default 200. */
  episodes?: number;
}

/** Reset, grading and hashing times of one domain. */
export interface DomainTimings {
  /** Median reset (initial state) time in ms. */
  resetMedianMs: number;
  /** Median grading time in ms (gold cached after the first call per task). */
  gradeMedianMs: number;
  /** Grading time of the first call per task (gold replay + hashes). */
  gradeFirstMedianMs: number;
  /** Full canonical-JSON SHA-256 of the DB in ms (cached entity strings). */
  hashMs: number;
}

/** Measured numbers (the top-level timings are retail's). */
export interface TauBenchResult extends DomainTimings {
  /** Which DB was used for retail's reset/grading. */
  db: 'tau2' | 'generated';
  /** The same timings on tau2's airline DB and train tasks; null without the airline folder. */
  airline: DomainTimings | null;
  /** Episode steps per second, expert agent + scripted user (reset and grading included). */
  stepsPerSecond: number;
  /** Episodes per second. */
  episodesPerSecond: number;
  /** Expert success rate on those episodes. */
  expertSuccess: number;
}

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** Times `resets` resets of `domain`, and grading and hashing over the gold calls of `tasks`. */
function timeDomain<S extends WorldState>(
  domain: TauDomain<S>,
  tasks: readonly TauTask[],
  resets: number,
): DomainTimings {
  const runs = tasks.map((task) => {
    const state = domain.initialState(task);
    const messages: SimulationRun['messages'] = [];
    for (const [i, a] of (task.evaluation_criteria?.actions ?? []).entries()) {
      const call = { id: `c${i}`, name: a.name, arguments: a.arguments, requestor: 'assistant' as const };
      messages.push({ role: 'assistant', content: null, toolCalls: [call] }, domain.tools.call(state, call));
    }
    return { task, run: { taskId: task.id, messages, terminationReason: 'user_stop' as const } };
  });
  const times: number[] = [];
  for (let i = 0; i < resets; i++) {
    const t0 = performance.now();
    domain.initialState();
    times.push(performance.now() - t0);
  }
  const evaluator = new TauEvaluator(domain);
  const first: number[] = [];
  const again: number[] = [];
  for (const { task, run } of runs) {
    let t0 = performance.now();
    evaluator.evaluate(task, run);
    first.push(performance.now() - t0);
    t0 = performance.now();
    evaluator.evaluate(task, run);
    again.push(performance.now() - t0);
  }
  const s = domain.initialState();
  s.hash();
  const t0 = performance.now();
  s.hash();
  const hashMs = performance.now() - t0;
  return {
    resetMedianMs: median(times),
    gradeMedianMs: again.length ? median(again) : NaN,
    gradeFirstMedianMs: first.length ? median(first) : NaN,
    hashMs,
  };
}

/** Runs the benchmark. */
export function runTauBench(options: TauBenchOptions = {}): TauBenchResult {
  const root = options.tau2Dir ?? process.env.SINKFLEX_TAU2_DIR ?? join(process.cwd(), '..', 'shared', 'tau2');
  const dir = join(root, 'retail');
  const n = options.resets ?? 2000;
  let retail: DomainTimings;
  let which: 'tau2' | 'generated';
  if (existsSync(dir)) {
    const data = loadTau2Retail(dir, { split: 'train' });
    retail = timeDomain(data.domain, data.tasks, n);
    which = 'tau2';
  } else {
    retail = timeDomain(createRetailDomain({ db: generateRetailDb({ seed: 0 }) }), [], n);
    which = 'generated';
  }
  const airlineDir = join(root, 'airline');
  let airline: DomainTimings | null = null;
  if (existsSync(airlineDir)) {
    const data = loadTau2Airline(airlineDir, { split: 'train' });
    airline = timeDomain(data.domain, data.tasks, n);
  }

  const gdb = generateRetailDb({ seed: 1 });
  const gdomain = createRetailDomain({ db: gdb });
  const tasks = generateRetailTasks(gdb, { seed: 1, count: options.episodes ?? 200 });
  const ep = new TauEpisode(gdomain, { user: new ScriptedRetailUser() });
  let steps = 0;
  let ok = 0;
  const t0 = performance.now();
  for (const task of tasks) {
    const r = runEpisodeSync(ep, new ExpertRetailAgent(), task, 0);
    steps += ep.counters.steps;
    if (r.final.reward === 1) ok++;
  }
  const secs = (performance.now() - t0) / 1000;
  return {
    db: which,
    ...retail,
    airline,
    stepsPerSecond: steps / secs,
    episodesPerSecond: tasks.length / secs,
    expertSuccess: ok / tasks.length,
  };
}

/** The command line (the arguments after the script): `[--quick] [--json [file]]`. */
export function main(argv: readonly string[] = process.argv.slice(2), cli: BenchCliSettings = {}): TauBenchResult {
  const program = benchProgram(
    'tau',
    "tau retail and airline worlds: reset, grading and expert episodes (tau2's DBs when present)",
    cli,
  );
  const o = parseBench(program, argv);
  const r = runTauBench(o.quick ? { resets: 200, episodes: 20 } : {});
  const log = tableLog(o.json);
  log(`tau world (${r.db} retail DB)`);
  log(`  reset (initial state)  median ${r.resetMedianMs.toFixed(4)} ms`);
  log(
    `  grade                  median ${r.gradeMedianMs.toFixed(3)} ms (first per task ${r.gradeFirstMedianMs.toFixed(3)} ms)`,
  );
  log(`  full DB SHA-256        ${r.hashMs.toFixed(2)} ms`);
  if (r.airline) {
    log(`tau world (tau2 airline DB)`);
    log(`  reset (initial state)  median ${r.airline.resetMedianMs.toFixed(4)} ms`);
    log(
      `  grade                  median ${r.airline.gradeMedianMs.toFixed(3)} ms (first per task ${r.airline.gradeFirstMedianMs.toFixed(3)} ms)`,
    );
    log(`  full DB SHA-256        ${r.airline.hashMs.toFixed(2)} ms`);
  }
  log(
    `  expert + scripted user ${r.stepsPerSecond.toFixed(0)} steps/s, ${r.episodesPerSecond.toFixed(1)} episodes/s, success ${(r.expertSuccess * 100).toFixed(1)}%`,
  );
  writeJson(o.json, r);
  return r;
}

runWhenInvoked(import.meta.url, 'tau', main);
