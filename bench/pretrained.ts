/**
 * Benchmark of pretrained models (issue 17): a random model shaped like Qwen3-0.6B (hidden 1024,
 * 28 layers, 16 heads, 8 kv heads, head_dim 128, intermediate 3072, vocab 151936, tied, q/k norm,
 * rope theta 1e6) is written as a BF16 checkpoint to a temporary folder
 * (bench/common/random-hf-checkpoint.ts), then loaded with `loadPretrained` in each dtype:
 *
 * - memory after load, measured in a fresh process per dtype: its resident set (RSS, before →
 *   after, garbage collected) and the tracked native allocator, against the checkpoint's bytes;
 * - forward: `logProbs` tokens/s of one sequence at a few lengths;
 * - sampling: tokens/s through the KV cache (the policy's batched sessions) at batch 1 and a few
 *   sessions;
 * - MXFP4 (`--mxfp4`, on by default): a random gpt-oss checkpoint with MXFP4 experts (gpt-oss-20b's
 *   layer shape, fewer experts and layers): bytes of the experts in the file vs in memory,
 *   dequantized to bf16 at load (`mxfp4: 'bf16'`) and kept packed (`mxfp4: 'packed'`, the default).
 *
 * The machine may be shared: rates come with the process CPU time (`cpu tok/s` = tokens / (CPU
 * seconds / threads): what the pool's threads would reach on dedicated cores) and the 1-minute
 * load average before and after.
 *
 *   node dist/bench/pretrained.js [--quick] [--device cpu|cuda|auto] [--dtypes bfloat16,float32]
 *     [--lengths 128,512,1024] [--sessions 1,4] [--sample-tokens 32] [--no-mxfp4] [--json [file]]
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

// the model layer's modules only: the load measurement's child process imports no more
import type { HfDtypeOption } from '../lib/model/hf/load.js';
import { type PretrainedModel, loadPretrained } from '../lib/model/hf/pretrained.js';
import { opsIsa } from '../lib/model/ops.js';
import type { DeviceRequest } from '../lib/native/device.js';
import { backends } from '../lib/native/index.js';
import { memory } from '../lib/native/memory.js';
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
import { gptOssConfig, qwen3Config, writeRandomHfCheckpoint } from './common/random-hf-checkpoint.js';

const MiB = 2 ** 20;

const seeded = mulberry32;

/** The model shape. */
export interface PretrainedShape {
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  vocab: number;
}

/** Qwen3-0.6B's shape. */
export const QWEN3_06B: PretrainedShape = {
  hidden: 1024,
  layers: 28,
  heads: 16,
  kvHeads: 8,
  headDim: 128,
  intermediate: 3072,
  vocab: 151936,
};
/** The `--quick` shape (same proportions, about 1/40 of the parameters). */
export const QUICK_SHAPE: PretrainedShape = {
  hidden: 256,
  layers: 4,
  heads: 4,
  kvHeads: 2,
  headDim: 64,
  intermediate: 768,
  vocab: 16384,
};

/** Options of {@link runPretrainedBench}. */
export interface PretrainedBenchOptions {
  shape?: PretrainedShape;
  quick?: boolean;
  device?: DeviceRequest;
  dtypes?: ('bfloat16' | 'float32')[];
  /** Sequence lengths of the forward measurement (default 128, 512, 1024). */
  lengths?: number[];
  /** Concurrent sessions of the sampling measurement (default 1, 4). */
  sessions?: number[];
  /** Prompt tokens per session (default 64). */
  promptTokens?: number;
  /** Tokens sampled per session (default 32). */
  sampleTokens?: number;
  /** Measure the MXFP4 memory factor too (default true). */
  mxfp4?: boolean;
  log?: (line: string) => void;
}

/** What a fresh process measures around one load (see {@link measureLoadInChild}). */
interface ChildLoad {
  device: string;
  storeBytes: number;
  trackedBytes: number;
  rssBeforeBytes: number;
  rssAfterBytes: number;
  loadSeconds: number;
  fallback: string | null;
}

/** Loads `dir` in this process and measures it (the child side of {@link measureLoadInChild}). */
async function measureLoad(dir: string, dtype: HfDtypeOption, device: DeviceRequest): Promise<ChildLoad> {
  const gc = collector();
  gc();
  const rss0 = process.memoryUsage().rss;
  const tracked0 = memory.currentBytes();
  const t0 = performance.now();
  const m = await loadPretrained(dir, { dtype, device });
  const loadSeconds = (performance.now() - t0) / 1000;
  gc();
  const r: ChildLoad = {
    device: m.device,
    storeBytes: m.bytes,
    trackedBytes: memory.currentBytes() - tracked0,
    rssBeforeBytes: rss0,
    rssAfterBytes: process.memoryUsage().rss,
    loadSeconds,
    fallback: m.fallback,
  };
  m.dispose();
  return r;
}

/** Runs {@link measureLoad} in a child process of this module (so each dtype starts from a fresh resident set). */
function measureLoadInChild(dir: string, dtype: HfDtypeOption, device: DeviceRequest): Promise<ChildLoad> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ['--child-load', JSON.stringify({ dir, dtype, device })], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    let result: ChildLoad | null = null;
    child.on('message', (m) => {
      const msg = m as { ok: true; result: ChildLoad } | { ok: false; error: string };
      if (msg.ok) result = msg.result;
      else reject(new Error(`the load measurement failed: ${msg.error}`));
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      result ? resolve(result) : reject(new Error(`the load measurement process exited with ${code}`)),
    );
  });
}

/** Memory of one load. */
export interface LoadPoint {
  dtype: string;
  device: string;
  checkpointBytes: number;
  /** Bytes of the parameter store. */
  storeBytes: number;
  /** Tracked native bytes the load added (store, RoPE tables, model). */
  trackedBytes: number;
  rssBeforeBytes: number;
  rssAfterBytes: number;
  loadSeconds: number;
}

/** One forward measurement. */
export interface ForwardPoint {
  dtype: string;
  length: number;
  ms: number;
  tokensPerSecond: number;
  cpuMs: number;
  cpuTokensPerSecond: number;
}

/** One sampling measurement. */
export interface SamplingPoint {
  dtype: string;
  sessions: number;
  promptTokens: number;
  sampledTokens: number;
  prefillMs: number;
  decodeMs: number;
  tokensPerSecond: number;
  cpuTokensPerSecond: number;
}

/** The MXFP4 measurement. */
export interface Mxfp4Point {
  shape: Record<string, number>;
  fileBytes: number;
  fileExpertBytes: number;
  storeBytes: number;
  storeExpertBytes: number;
  /** Expert weights in memory / in the file, dequantized to bf16. */
  expertFactor: number;
  /** Whole store / whole file, dequantized to bf16. */
  totalFactor: number;
  /** Expert weights in memory, kept packed (the loader's default). */
  packedStoreExpertBytes: number;
  /** Packed expert weights in memory / in the file. */
  packedExpertFactor: number;
  /** Whole store / whole file, experts packed. */
  packedTotalFactor: number;
}

/** Everything one run measured. */
export interface PretrainedBenchResult {
  machine: {
    cpu: string;
    threads: number;
    isa: string;
    loadAverageBefore: number;
    loadAverageAfter: number;
    date: string;
  };
  shape: PretrainedShape;
  parameters: number;
  checkpointBytes: number;
  loads: LoadPoint[];
  forward: ForwardPoint[];
  sampling: SamplingPoint[];
  mxfp4: Mxfp4Point | null;
}

/** A function running the garbage collector (V8's, exposed at run time). */
function collector(): () => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  return () => {
    gc();
    gc();
  };
}

const mib = (b: number): string => `${(b / MiB).toFixed(0)} MiB`;
const cpuMs = (c: NodeJS.CpuUsage): number => (c.user + c.system) / 1000;

async function measureForward(
  m: PretrainedModel,
  dtype: string,
  lengths: number[],
  threads: number,
  log: (l: string) => void,
): Promise<ForwardPoint[]> {
  const r = seeded(7);
  const out: ForwardPoint[] = [];
  const vocab = m.modelConfig.vocab;
  await m.logProbs([Array.from({ length: 16 }, () => Math.floor(r() * vocab))]); // warm-up
  for (const length of lengths) {
    const seq = Array.from({ length }, () => Math.floor(r() * vocab));
    const reps = length <= 256 ? 3 : 1;
    let best: ForwardPoint | null = null;
    for (let i = 0; i < reps; i++) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await m.logProbs([seq]);
      const ms = performance.now() - t0;
      const c = cpuMs(process.cpuUsage(c0));
      const p: ForwardPoint = {
        dtype,
        length,
        ms,
        tokensPerSecond: (length / ms) * 1000,
        cpuMs: c,
        cpuTokensPerSecond: (length / (c / threads)) * 1000,
      };
      if (!best || p.ms < best.ms) best = p;
    }
    const p = best as ForwardPoint;
    out.push(p);
    log(
      `${dtype.padEnd(9)} ${String(length).padStart(6)}  ${p.ms.toFixed(0).padStart(8)}  ${p.tokensPerSecond.toFixed(1).padStart(9)}  ${p.cpuMs.toFixed(0).padStart(8)}  ${p.cpuTokensPerSecond.toFixed(1).padStart(11)}`,
    );
  }
  return out;
}

async function measureSampling(
  m: PretrainedModel,
  dtype: string,
  sessionCounts: number[],
  promptTokens: number,
  sampleTokens: number,
  threads: number,
  log: (l: string) => void,
): Promise<SamplingPoint[]> {
  const r = seeded(11);
  const vocab = m.modelConfig.vocab;
  const out: SamplingPoint[] = [];
  for (const n of sessionCounts) {
    const sessions = Array.from({ length: n }, (_, i) => m.policy.createSession({ seed: i + 1 }));
    try {
      for (const s of sessions) s.append(Array.from({ length: promptTokens }, () => Math.floor(r() * vocab)));
      const t0 = performance.now();
      await Promise.all(sessions.map((s) => s.prefill()));
      const t1 = performance.now();
      const c0 = process.cpuUsage();
      const results = await Promise.all(sessions.map((s) => s.sample({ maxTokens: sampleTokens, temperature: 1 })));
      const t2 = performance.now();
      const c = cpuMs(process.cpuUsage(c0));
      const sampled = results.reduce((a, x) => a + x.tokens.length, 0);
      const p: SamplingPoint = {
        dtype,
        sessions: n,
        promptTokens,
        sampledTokens: sampled,
        prefillMs: t1 - t0,
        decodeMs: t2 - t1,
        tokensPerSecond: (sampled / (t2 - t1)) * 1000,
        cpuTokensPerSecond: (sampled / (c / threads)) * 1000,
      };
      out.push(p);
      log(
        `${dtype.padEnd(9)} ${String(n).padStart(8)}  ${p.prefillMs.toFixed(0).padStart(10)}  ${p.decodeMs.toFixed(0).padStart(9)}  ${String(sampled).padStart(7)}  ${p.tokensPerSecond.toFixed(1).padStart(9)}  ${p.cpuTokensPerSecond.toFixed(1).padStart(11)}`,
      );
    } finally {
      for (const s of sessions) s.dispose();
    }
  }
  return out;
}

/** The MXFP4 memory factor on a random gpt-oss checkpoint (see the module notes). */
async function measureMxfp4(quick: boolean, gc: () => void, log: (l: string) => void): Promise<Mxfp4Point> {
  const shape = quick
    ? { hidden: 256, layers: 2, heads: 4, kvHeads: 2, headDim: 64, intermediate: 256, vocab: 4096, experts: 4, topK: 2 }
    : {
        hidden: 2880,
        layers: 2,
        heads: 64,
        kvHeads: 8,
        headDim: 64,
        intermediate: 2880,
        vocab: 16384,
        experts: 8,
        topK: 4,
      };
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-bench-mxfp4-'));
  try {
    const ck = await writeRandomHfCheckpoint(dir, gptOssConfig(shape), { mxfp4: true, seed: 3 });
    gc();
    const expertBytes = (m: Awaited<ReturnType<typeof loadPretrained>>): number =>
      m.params
        .info()
        .filter((p) => /mlp\.experts\.(gate_up|down)\.weight$/.test(p.name))
        .reduce((n, p) => n + p.numel * (p.dtype === 'mxfp4' ? 17 / 32 : p.dtype === 'bfloat16' ? 2 : 4), 0);
    const packed = await loadPretrained(dir, { dtype: 'auto', maxPositions: 4096 });
    const packedStoreExpertBytes = expertBytes(packed);
    const packedBytes = packed.bytes;
    packed.dispose();
    gc();
    const m = await loadPretrained(dir, { dtype: 'auto', maxPositions: 4096, mxfp4: 'bf16' });
    try {
      const storeExpertBytes = expertBytes(m);
      const point: Mxfp4Point = {
        shape,
        fileBytes: ck.tensorBytes,
        fileExpertBytes: ck.mxfp4Bytes,
        storeBytes: m.bytes,
        storeExpertBytes,
        expertFactor: storeExpertBytes / ck.mxfp4Bytes,
        totalFactor: m.bytes / ck.tensorBytes,
        packedStoreExpertBytes,
        packedExpertFactor: packedStoreExpertBytes / ck.mxfp4Bytes,
        packedTotalFactor: packedBytes / ck.tensorBytes,
      };
      log(
        `\nMXFP4 experts (gpt-oss, ${JSON.stringify(shape)}): file ${mib(ck.mxfp4Bytes)} → bf16 in memory ${mib(storeExpertBytes)} (x${point.expertFactor.toFixed(3)}); whole model ${mib(ck.tensorBytes)} → ${mib(m.bytes)} (x${point.totalFactor.toFixed(2)}); kept packed: experts ${mib(packedStoreExpertBytes)} (x${point.packedExpertFactor.toFixed(3)}), whole model ${mib(packedBytes)} (x${point.packedTotalFactor.toFixed(2)})`,
      );
      return point;
    } finally {
      m.dispose();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs the benchmark (see the module notes). */
export async function runPretrainedBench(options: PretrainedBenchOptions = {}): Promise<PretrainedBenchResult> {
  const log = options.log ?? ((l: string) => console.log(l));
  const quick = options.quick ?? false;
  const shape = options.shape ?? (quick ? QUICK_SHAPE : QWEN3_06B);
  const dtypes = options.dtypes ?? ['bfloat16', 'float32'];
  const lengths = options.lengths ?? (quick ? [32, 128] : [128, 512, 1024]);
  const sessionCounts = options.sessions ?? (quick ? [1, 2] : [1, 4]);
  const promptTokens = options.promptTokens ?? (quick ? 16 : 64);
  const sampleTokens = options.sampleTokens ?? (quick ? 8 : 32);
  const device = options.device ?? 'cpu';
  const cpuBackend = backends().find((b) => b.name === 'cpu');
  const threads = cpuBackend && cpuBackend.name === 'cpu' ? cpuBackend.threads : 1;
  const gc = collector();
  const loadBefore = loadavg()[0];
  log(
    `pretrained benchmark — ${cpus()[0]?.model ?? 'cpu'}, ${threads} threads, ops ${opsIsa()}, load average ${loadBefore.toFixed(2)}`,
  );

  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-bench-pretrained-'));
  try {
    const t0 = performance.now();
    const ck = await writeRandomHfCheckpoint(dir, qwen3Config(shape), { seed: 1 });
    log(
      `random Qwen3 checkpoint ${JSON.stringify(shape)}: ${ck.parameters} parameters, ${mib(ck.tensorBytes)} BF16, written in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const loads: LoadPoint[] = [];
    const forward: ForwardPoint[] = [];
    const sampling: SamplingPoint[] = [];
    const header = {
      load: 'dtype     device  checkpoint      store    tracked   RSS before → after  (Δ RSS / file)  load s',
      fwd: 'dtype     length        ms     tok/s    cpu ms  cpu tok/s',
      smp: 'dtype     sessions  prefill ms  decode ms  sampled     tok/s  cpu tok/s',
    };
    for (const dtype of dtypes) {
      const c = await measureLoadInChild(dir, dtype, device);
      const p: LoadPoint = {
        dtype,
        device: c.device,
        checkpointBytes: ck.tensorBytes,
        storeBytes: c.storeBytes,
        trackedBytes: c.trackedBytes,
        rssBeforeBytes: c.rssBeforeBytes,
        rssAfterBytes: c.rssAfterBytes,
        loadSeconds: c.loadSeconds,
      };
      loads.push(p);
      const m = await loadPretrained(dir, { dtype: dtype as HfDtypeOption, device });
      try {
        const row = `${dtype.padEnd(9)} ${p.device.padEnd(6)}  ${mib(p.checkpointBytes).padStart(10)} ${mib(p.storeBytes).padStart(10)} ${mib(p.trackedBytes).padStart(10)}   ${mib(p.rssBeforeBytes).padStart(8)} → ${mib(p.rssAfterBytes).padStart(8)}  (${((p.rssAfterBytes - p.rssBeforeBytes) / p.checkpointBytes).toFixed(2)})  ${p.loadSeconds.toFixed(1).padStart(10)}`;
        log(`\nmemory after load (a fresh process)\n${header.load}\n${row}`);
        if (m.fallback) log(`(on the CPU: ${m.fallback})`);
        log(`forward (logProbs of one sequence; best of 3 up to 256 tokens)\n${header.fwd}`);
        forward.push(...(await measureForward(m, dtype, lengths, threads, log)));
        log(
          `sampling through the KV cache (${promptTokens} prompt tokens, ${sampleTokens} sampled per session, temperature 1)\n${header.smp}`,
        );
        sampling.push(...(await measureSampling(m, dtype, sessionCounts, promptTokens, sampleTokens, threads, log)));
      } finally {
        m.dispose();
      }
    }
    const mx = (options.mxfp4 ?? true) ? await measureMxfp4(quick, gc, log) : null;
    const loadAfter = loadavg()[0];
    log(`\nload average ${loadBefore.toFixed(2)} → ${loadAfter.toFixed(2)}`);
    return {
      machine: {
        cpu: cpus()[0]?.model ?? 'cpu',
        threads,
        isa: opsIsa(),
        loadAverageBefore: loadBefore,
        loadAverageAfter: loadAfter,
        date: new Date().toISOString(),
      },
      shape,
      parameters: ck.parameters,
      checkpointBytes: ck.tensorBytes,
      loads,
      forward,
      sampling,
      mxfp4: mx,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function list(flag: string, v: string): number[] {
  const out = v.split(',').map((x) => Number(x.trim()));
  if (out.length === 0 || out.some((n) => !Number.isSafeInteger(n) || n < 1))
    throw new Error(`${flag} must be a comma-separated list of positive integers, got ${v}`);
  return out;
}

/** Command-line entry (the arguments after the script; see the module notes). */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<PretrainedBenchResult | null> {
  if (argv[0] === '--child-load' && process.send) {
    // the child side of measureLoadInChild
    const { dir, dtype, device } = JSON.parse(argv[1]) as { dir: string; dtype: HfDtypeOption; device: DeviceRequest };
    try {
      process.send({ ok: true, result: await measureLoad(dir, dtype, device) });
    } catch (e) {
      process.send({ ok: false, error: e instanceof Error ? e.message : String(e) });
    }
    process.disconnect();
    return null;
  }
  const program = benchProgram(
    'pretrained',
    'pretrained model (random, Qwen3-0.6B-shaped): memory after load vs checkpoint, forward and sampling tokens/s, MXFP4 memory factor',
    cli,
  )
    .option('--device <device>', 'cpu | cuda | auto', 'cpu')
    .option('--dtypes <list>', 'dtypes to load in, comma-separated (bfloat16, float32)', 'bfloat16,float32')
    .option('--lengths <list>', 'forward sequence lengths, comma-separated')
    .option('--sessions <list>', 'concurrent sampling sessions, comma-separated')
    .option('--sample-tokens <n>', 'tokens sampled per session')
    .option('--no-mxfp4', 'skip the MXFP4 memory measurement');
  const o = parseBench<
    CommonBenchOptions & {
      device: string;
      dtypes: string;
      lengths?: string;
      sessions?: string;
      sampleTokens?: string;
      mxfp4: boolean;
    }
  >(program, argv);
  if (!['cpu', 'cuda', 'auto'].includes(o.device))
    throw new Error(`--device must be cpu, cuda or auto, got ${o.device}`);
  const dtypes = o.dtypes.split(',').map((d) => d.trim());
  for (const d of dtypes)
    if (d !== 'bfloat16' && d !== 'float32') throw new Error(`--dtypes: '${d}' is not bfloat16 or float32`);
  const result = await runPretrainedBench({
    quick: o.quick === true,
    device: o.device as DeviceRequest,
    dtypes: dtypes as ('bfloat16' | 'float32')[],
    ...(o.lengths !== undefined ? { lengths: list('--lengths', o.lengths) } : {}),
    ...(o.sessions !== undefined ? { sessions: list('--sessions', o.sessions) } : {}),
    ...(o.sampleTokens !== undefined ? { sampleTokens: list('--sample-tokens', o.sampleTokens)[0] } : {}),
    mxfp4: o.mxfp4,
    log: tableLog(o.json),
  });
  writeJson(o.json, result);
  return result;
}

runWhenInvoked(import.meta.url, 'pretrained', main);
