/**
 * Helpers shared by the benchmarks: statistics over repetitions, byte formatting, Markdown
 * tables, garbage collection between measurements, the machine description and the JSON + SVG
 * output files.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, extname, join, basename } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

import { backends } from '../../lib/native/index.js';

/** 2^30 bytes. */
export const GiB = 2 ** 30;

/** Median, minimum and maximum of repeated measurements. */
export interface Summary {
  median: number;
  min: number;
  max: number;
  /** How many values. */
  n: number;
}

/** Summarises repeated measurements (the median of an even count is the mean of the middle two). */
export function summarize(values: readonly number[]): Summary {
  if (values.length === 0) throw new RangeError('summarize: no values');
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { median, min: s[0]!, max: s[s.length - 1]!, n: s.length };
}

/** Formats a summary of milliseconds as `median (min–max)`. */
export function fmtSummary(s: Summary, digits = 0): string {
  return s.n === 1
    ? s.median.toFixed(digits)
    : `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
}

/** Bytes as MiB or GiB; `null` prints as `OOM`. */
export function fmtBytes(b: number | null): string {
  if (b === null) return 'OOM';
  if (b >= GiB) return `${(b / GiB).toFixed(2)} GiB`;
  return `${(b / 2 ** 20).toFixed(1)} MiB`;
}

/** A GitHub-flavoured Markdown table. */
export function markdownTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(headers), line(headers.map(() => '---')), ...rows.map(line)].join('\n');
}

let cachedGc: (() => void) | undefined;
/** A full garbage collection, then two event-loop turns so native finalizers release their bytes. */
export async function collectGarbage(): Promise<void> {
  if (!cachedGc) {
    const exposed = (globalThis as { gc?: () => void }).gc;
    if (exposed) {
      cachedGc = exposed;
    } else {
      setFlagsFromString('--expose-gc');
      cachedGc = runInNewContext('gc') as () => void;
    }
  }
  for (let i = 0; i < 2; i++) {
    cachedGc();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The machine a benchmark ran on. */
export interface MachineInfo {
  cpu: string;
  /** Threads of the native kernel pool. */
  threads: number;
  /** 1-minute load average when the description was taken (others' jobs slow time numbers, never memory numbers). */
  loadAverage: number;
}

/** Describes this machine now. */
export function machineInfo(): MachineInfo {
  const cpu = backends().find((b) => b.name === 'cpu');
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    threads: cpu?.name === 'cpu' ? cpu.threads : 1,
    loadAverage: loadavg()[0] ?? 0,
  };
}

/** The SVG path written next to a JSON path: `out/x.json` → `out/x.svg`. */
export function svgPathFor(jsonPath: string): string {
  const ext = extname(jsonPath);
  return join(dirname(jsonPath), `${basename(jsonPath, ext)}.svg`);
}

/** Writes the result as JSON and, when given, the chart next to it; returns the paths written. */
export function writeResult(jsonPath: string, result: unknown, svg?: string): { json: string; svg?: string } {
  mkdirSync(dirname(jsonPath), { recursive: true });
  writeFileSync(jsonPath, JSON.stringify(result, null, 2) + '\n');
  if (svg === undefined) return { json: jsonPath };
  const svgPath = svgPathFor(jsonPath);
  writeFileSync(svgPath, svg);
  return { json: jsonPath, svg: svgPath };
}

/**
 * The files of a benchmark run from the command line: with `jsonPath`, `{ command, ...result }`
 * as JSON there and `chart(result)` as SVG beside it (see {@link writeResult}), then a line
 * saying where; without it, nothing.
 */
export function writeBenchFiles<R extends object>(
  jsonPath: string | undefined,
  command: string,
  result: R,
  chart: (r: R) => string,
): void {
  if (!jsonPath) return;
  const written = writeResult(jsonPath, { command, ...result }, chart(result));
  console.log(`\nwrote ${written.json} and ${written.svg}`);
}
