/**
 * Batched sampling vs one request at a time (issue 24): N seeded sessions of a pretrained model
 * sample at once (the policy batches them, as `sinkflex serve` does for N requests in flight),
 * then the same N one after another. Batching must never be slower than sending the requests one
 * by one: the `ratio` column (batched / one-by-one wall time) stays below 1. The default model
 * is what new users try first: a tiny random Qwen3 (hidden 64, 2 layers) with Qwen3's real
 * 151936-token vocabulary, so the LM head dominates every decoding step; bf16 and float32.
 * The tokens of each session are compared too (`same`: batched = alone, bit for bit).
 *
 * The machine may be shared: each row also gives the process CPU time of both runs.
 *
 *   node dist/bench/concurrency.js [--quick] [--dtypes bfloat16,float32] [--sessions 1,8,16,17,32]
 *     [--prompt-tokens 32] [--sample-tokens 32] [--vocab 151936] [--json [file]]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import { loadPretrained } from '../lib/model/hf/pretrained.js';
import type { GenerativeModel } from '../lib/model/policy.js';
import { opsIsa } from '../lib/model/ops.js';
import {
  benchProgram,
  parseBench,
  runWhenInvoked,
  tableLog,
  writeJson,
  type BenchCliSettings,
  type CommonBenchOptions,
} from './common/cli.js';
import { qwen3Config, writeRandomHfCheckpoint } from './common/random-hf-checkpoint.js';

/** Options of {@link runConcurrencyBench}. */
export interface ConcurrencyBenchOptions {
  dtypes?: ('bfloat16' | 'float32')[];
  /** Sessions in flight (default 1, 8, 16, 17, 20, 32). */
  sessions?: number[];
  /** Prompt tokens per session (default 32). */
  promptTokens?: number;
  /** Tokens sampled per session (default 32). */
  sampleTokens?: number;
  /** Vocabulary size (default 151936, Qwen3's). */
  vocab?: number;
  log?: (line: string) => void;
}

/** One measured row. */
export interface ConcurrencyRow {
  dtype: string;
  sessions: number;
  batchedMs: number;
  oneByOneMs: number;
  /** batchedMs / oneByOneMs (below 1: batching helps). */
  ratio: number;
  batchedCpuMs: number;
  oneByOneCpuMs: number;
  /** Sessions whose batched tokens equal their tokens alone. */
  same: number;
}

/** The result of {@link runConcurrencyBench}. */
export interface ConcurrencyBenchResult {
  isa: string;
  vocab: number;
  rows: ConcurrencyRow[];
}

async function sampleOne(model: GenerativeModel, prompt: number[], seed: number, maxTokens: number): Promise<number[]> {
  const s = model.createSession({ seed });
  try {
    s.append(prompt);
    const r = await s.sample({ maxTokens, temperature: 1, topP: 1, stop: [] });
    return Array.from(r.tokens);
  } finally {
    s.dispose();
  }
}

async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number; cpuMs: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { value, ms, cpuMs: (c.user + c.system) / 1000 };
}

/** Runs the benchmark (see the module notes). */
export async function runConcurrencyBench(options: ConcurrencyBenchOptions = {}): Promise<ConcurrencyBenchResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const vocab = options.vocab ?? 151936;
  const promptTokens = options.promptTokens ?? 32;
  const sampleTokens = options.sampleTokens ?? 32;
  const sessions = options.sessions ?? [1, 8, 16, 17, 20, 32];
  const dir = mkdtempSync(join(tmpdir(), 'sfx-bench-concurrency-'));
  const rows: ConcurrencyRow[] = [];
  try {
    await writeRandomHfCheckpoint(
      dir,
      qwen3Config({
        hidden: 64,
        layers: 2,
        heads: 4,
        kvHeads: 2,
        headDim: 16,
        intermediate: 128,
        vocab,
        context: 4096,
      }),
    );
    log(
      `tiny random Qwen3 (hidden 64, 2 layers, vocab ${vocab}); ${promptTokens}-token prompts, ${sampleTokens} tokens per session, T = 1; ops ISA ${opsIsa()}`,
    );
    log('| dtype | sessions | batched | one by one | ratio | batched cpu | one-by-one cpu | same tokens |');
    log('| --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const dtype of options.dtypes ?? ['bfloat16', 'float32']) {
      const m = await loadPretrained(dir, { dtype });
      try {
        const prompt = (i: number): number[] =>
          Array.from({ length: promptTokens }, (_, j) => (i * 7919 + j * 104729 + 13) % vocab);
        await sampleOne(m.policy, prompt(0), 0, 2); // warm-up
        for (const n of sessions) {
          const batched = await timed(() =>
            Promise.all(Array.from({ length: n }, (_, i) => sampleOne(m.policy, prompt(i), i, sampleTokens))),
          );
          const alone = await timed(async () => {
            const out: number[][] = [];
            for (let i = 0; i < n; i++) out.push(await sampleOne(m.policy, prompt(i), i, sampleTokens));
            return out;
          });
          const same = batched.value.filter((t, i) => t.join() === alone.value[i].join()).length;
          const row: ConcurrencyRow = {
            dtype,
            sessions: n,
            batchedMs: batched.ms,
            oneByOneMs: alone.ms,
            ratio: batched.ms / alone.ms,
            batchedCpuMs: batched.cpuMs,
            oneByOneCpuMs: alone.cpuMs,
            same,
          };
          rows.push(row);
          log(
            `| ${dtype} | ${n} | ${row.batchedMs.toFixed(0)} ms | ${row.oneByOneMs.toFixed(0)} ms | **${row.ratio.toFixed(2)}** | ${row.batchedCpuMs.toFixed(0)} ms | ${row.oneByOneCpuMs.toFixed(0)} ms | ${same}/${n} |`,
          );
        }
      } finally {
        m.dispose();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return { isa: opsIsa(), vocab, rows };
}

function list(flag: string, v: string): number[] {
  const out = v.split(',').map((x) => Number(x.trim()));
  for (const x of out)
    if (!Number.isSafeInteger(x) || x < 1) throw new Error(`${flag}: '${v}' is not a list of positive integers`);
  return out;
}

/** Command-line entry (the arguments after the script; see the module notes). */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<ConcurrencyBenchResult> {
  const program = benchProgram(
    'concurrency',
    'batched sampling of N seeded sessions vs the same N one by one (tiny random Qwen3, 151936-token vocabulary): wall and CPU time, ratio, same tokens',
    cli,
  )
    .option('--dtypes <list>', 'dtypes to load in, comma-separated (bfloat16, float32)', 'bfloat16,float32')
    .option('--sessions <list>', 'sessions in flight, comma-separated')
    .option('--prompt-tokens <n>', 'prompt tokens per session')
    .option('--sample-tokens <n>', 'tokens sampled per session')
    .option('--vocab <n>', 'vocabulary size');
  const o = parseBench<
    CommonBenchOptions & {
      dtypes: string;
      sessions?: string;
      promptTokens?: string;
      sampleTokens?: string;
      vocab?: string;
    }
  >(program, argv, { sessions: '1,17', sampleTokens: '8' });
  const dtypes = o.dtypes.split(',').map((d) => d.trim());
  for (const d of dtypes)
    if (d !== 'bfloat16' && d !== 'float32') throw new Error(`--dtypes: '${d}' is not bfloat16 or float32`);
  const result = await runConcurrencyBench({
    dtypes: dtypes as ('bfloat16' | 'float32')[],
    ...(o.sessions !== undefined ? { sessions: list('--sessions', o.sessions) } : {}),
    ...(o.promptTokens !== undefined ? { promptTokens: list('--prompt-tokens', o.promptTokens)[0] } : {}),
    ...(o.sampleTokens !== undefined ? { sampleTokens: list('--sample-tokens', o.sampleTokens)[0] } : {}),
    ...(o.vocab !== undefined ? { vocab: list('--vocab', o.vocab)[0] } : {}),
    log: tableLog(o.json),
  });
  writeJson(o.json, result);
  return result;
}

runWhenInvoked(import.meta.url, 'concurrency', main);
