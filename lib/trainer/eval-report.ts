/**
 * The report of an evaluation (`sinkflex eval`, {@link runEval}): what was run, whether it
 * really ran, why episodes aborted, and the report as text tables.
 * @module
 */
import type { EvaluationResult } from '../rollout/index.js';

/** What `runEval` returns: the evaluation plus what was run. */
export interface EvalReport extends EvaluationResult {
  /** The policy kind and model. */
  policy: string;
  /** The environment id. */
  env: string;
  /** Tasks evaluated. */
  tasks: number;
  /** Trials per task. */
  trials: number;
  /** Lines written by `--export`. */
  exported?: number;
  /** The server's reachability (openai policy): calls that failed to connect, and why the client stopped early (or null). */
  connection?: { failures: number; stopped: string | null };
  /**
   * Why the evaluation could not really run (every episode aborted, or episodes aborted while
   * the server could not be reached), or null. The CLI exits non-zero when it is set.
   */
  problem: string | null;
}

/** Why `r` is not a real evaluation (see {@link EvalReport.problem}), or null. */
export function evalProblem(r: {
  episodes: readonly unknown[];
  aborted: number;
  connection?: EvalReport['connection'];
}): string | null {
  const n = r.episodes.length;
  const c = r.connection;
  if (c?.stopped) return `${r.aborted} of ${n} episodes aborted; ${c.stopped}`;
  if (n > 0 && r.aborted === n) return `all ${n} episodes aborted`;
  if (c && c.failures > 0 && r.aborted > 0)
    return `${r.aborted} of ${n} episodes aborted; ${c.failures} calls failed to reach the server`;
  return null;
}

/** Lines saying why episodes aborted: `<count> episodes aborted: <error>`, most frequent first. */
export function abortReasons(episodes: readonly { aborted: boolean; error: string | null }[], max = 5): string[] {
  const counts = new Map<string, number>();
  for (const e of episodes) {
    if (!e.aborted) continue;
    const why = (e.error ?? 'no error recorded').split('\n')[0].slice(0, 400);
    counts.set(why, (counts.get(why) ?? 0) + 1);
  }
  const rows = [...counts].sort((a, b) => b[1] - a[1]);
  const lines = rows.slice(0, max).map(([why, k]) => `${k} episode${k === 1 ? '' : 's'} aborted: ${why}`);
  if (rows.length > max) lines.push(`(${rows.length - max} more reasons, see --json)`);
  return lines;
}

/** The report as a text table. */
export function formatEvalReport(r: EvalReport): string {
  const rows: [string, string][] = [
    ['policy', r.policy],
    ['env', r.env],
    ['tasks x trials', `${r.tasks} x ${r.trials} = ${r.episodes.length} episodes`],
    ['mean reward', r.meanReward.toFixed(4)],
    ['success rate', r.successRate.toFixed(4)],
    ...Object.entries(r.passHatK).map(([k, v]): [string, string] => [`pass^${k}`, v.toFixed(4)]),
    ['aborted', `${r.aborted} (${r.retried} reruns)`],
    ...(r.connection && r.connection.failures > 0
      ? [
          [
            'connection',
            `${r.connection.failures} calls failed to reach the server${r.connection.stopped ? '; stopped early' : ''}`,
          ] as [string, string],
        ]
      : []),
    [
      'terminations',
      Object.entries(r.terminations)
        .map(([k, v]) => `${k} ${v}`)
        .join(', '),
    ],
    ['time', `${r.seconds.toFixed(1)} s`],
  ];
  if (r.exported !== undefined) rows.push(['exported', `${r.exported} trajectories`]);
  const w = Math.max(...rows.map(([k]) => k.length));
  const text = rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n');
  return r.perKind.length > 0 ? `${text}\n\n${formatKindTable(r.perKind)}` : text;
}

/** The per-kind results as a text table: kind, tasks, episodes, mean reward (mean@1), success rate. */
export function formatKindTable(perKind: EvaluationResult['perKind']): string {
  const head = ['kind', 'tasks', 'episodes', 'mean@1', 'success'];
  const body = perKind.map((k) => [
    k.kind,
    String(k.tasks),
    String(k.episodes),
    k.meanReward.toFixed(4),
    (k.episodes > 0 ? k.successes / k.episodes : 0).toFixed(4),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(head), ...body.map(line)].join('\n');
}
