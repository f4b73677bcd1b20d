/**
 * Sink attention benchmark: eager vs fused forward+backward, measured side by side in one run.
 *
 * 1. Memory at the gpt-oss-20b attention layer shape (64 query heads, 8 kv heads, headDim 64,
 *    batch 1), sliding window 128 and full causal, seqLen 1024…8192: peak bytes of the tracked
 *    allocator over a whole forward+backward (inputs, outputs and gradients are allocated
 *    through it too), eager reported as out of memory where it exceeds `--limit`.
 * 2. Speed at a smaller head count: time, GFLOP/s and fused/eager ratio.
 *
 * GFLOP/s counts the useful work only: 4·headDim flops per visible (query, key) pair and head
 * forward, 10·headDim backward (the same count for both implementations).
 *
 * Run: `npm run build:ts && node dist/bench/attention.js [--limit 16] [--json out.json] [--svg out.svg]`.
 */
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';

import {
  SinkAttention,
  attentionInfo,
  type AttentionImpl,
  type AttentionMask,
  type AttentionShape,
} from '../lib/attention/index.js';
import { backends, isOutOfMemoryError, memory } from '../lib/native/index.js';
import { loadAddon } from '../lib/native/loader.js';
import { memoryChartSvg } from './attention-chart.js';
import { fillUniform as fill } from '../lib/util/random.js';
import { GiB, collectGarbage, fmtBytes, summarize, type Summary } from './common/util.js';
import {
  benchProgram,
  commandLine,
  parseBench,
  runWhenInvoked,
  writeJson,
  type BenchCliSettings,
  type CommonBenchOptions,
} from './common/cli.js';

/** Which mask a row used. */
export type BenchMask = 'window' | 'full';

/** Options of {@link runAttentionBench}. */
export interface AttentionBenchOptions {
  /** Sequence lengths of the memory table (default 1024, 2048, 4096, 8192). */
  memorySeqLens?: number[];
  /** Heads of the memory table (default gpt-oss-20b: 64 query, 8 kv). */
  memoryHeads?: { qHeads: number; kvHeads: number };
  /** Sequence lengths of the speed table (default 1024, 2048, 4096). */
  speedSeqLens?: number[];
  /** Heads of the speed table (default 8 query, 1 kv: the gpt-oss group of one kv head). */
  speedHeads?: { qHeads: number; kvHeads: number };
  /** Head dimension (default 64). */
  headDim?: number;
  /** Sliding window of the `window` mask (default 128). */
  window?: number;
  /** Masks to run (default both). */
  masks?: BenchMask[];
  /** Tracked-memory limit in bytes for every run (default 16 GiB); eager past it is out of memory. */
  limitBytes?: number;
  /** Timed repetitions per speed point (default 3; the median is reported). */
  repeats?: number;
  /** Seed of the random inputs. */
  seed?: number;
  /** Where progress lines go (default console.log); `null` is silent. */
  log?: ((line: string) => void) | null;
}

/** One memory measurement. */
export interface MemoryRow {
  mask: BenchMask;
  seqLen: number;
  impl: AttentionImpl;
  /** Peak tracked bytes of forward+backward including inputs, outputs and gradients; null = out of memory. */
  peakBytes: number | null;
  /** Bytes of q, k, v, sinks, out, lse, dOut, dq, dk, dv and dSinks. */
  ioBytes: number;
  /** Wall time of forward+backward in ms (null when out of memory). */
  ms: number | null;
  /** The out-of-memory message. */
  error?: string;
  /**
   * When out of memory: the bytes the computation held plus the allocation that failed (from
   * the allocator's error), a measured lower bound of the peak it would need.
   */
  oomNeedBytes?: number;
}

/** One speed comparison (medians). */
export interface SpeedRow {
  mask: BenchMask;
  seqLen: number;
  fusedForwardMs: number;
  fusedBackwardMs: number;
  eagerForwardMs: number;
  eagerBackwardMs: number;
  /** Useful GFLOP/s of forward+backward. */
  fusedGflops: number;
  eagerGflops: number;
  /** eager time / fused time (forward+backward). */
  speedup: number;
  /** Forward+backward ms of every repetition: median, min, max. */
  fusedMs?: Summary;
  eagerMs?: Summary;
}

/** Everything a run measured, plus the targets of the issue. */
export interface AttentionBenchResult {
  date: string;
  machine: { cpu: string; threads: number; isa: string };
  memoryShape: { qHeads: number; kvHeads: number; headDim: number; batch: number };
  speedShape: { qHeads: number; kvHeads: number; headDim: number; batch: number };
  limitBytes: number;
  memory: MemoryRow[];
  speed: SpeedRow[];
  targets: { name: string; value: string; met: boolean | null }[];
}

function maskOf(mask: BenchMask, window: number): AttentionMask {
  return mask === 'window' ? { window } : {};
}

/** Visible (query, key) pairs per head of a causal mask with optional window. */
export function visiblePairs(seqLen: number, window: number): number {
  let n = 0;
  for (let i = 0; i < seqLen; i++) n += window > 0 ? Math.min(i + 1, window) : i + 1;
  return n;
}

function median(xs: number[]): number {
  return summarize(xs).median;
}

function tensors(shape: AttentionShape, tracked: boolean, seed: number) {
  const n = shape.batch * shape.seqLen * shape.qHeads * shape.headDim;
  const nk = shape.batch * shape.seqLen * shape.kvHeads * shape.headDim;
  const alloc = (len: number) => (tracked ? loadAddon().allocTracked(len) : new Float32Array(len));
  return {
    q: fill(alloc(n), seed),
    k: fill(alloc(nk), seed + 1),
    v: fill(alloc(nk), seed + 2),
    dOut: fill(alloc(n), seed + 3),
    sinks: fill(new Float32Array(shape.qHeads), seed + 4),
  };
}

/** The options {@link measureAttentionMemory} and {@link measureAttentionSpeed} use. */
export type MeasureOptions = Pick<Required<AttentionBenchOptions>, 'limitBytes' | 'window' | 'seed'>;

/**
 * Peak tracked bytes of one forward+backward of `impl` at `shape` (inputs, outputs and
 * gradients allocated through the tracked allocator), under `o.limitBytes` above what is
 * allocated now; out of memory is caught and reported in the row.
 */
export async function measureAttentionMemory(
  shape: AttentionShape,
  mask: BenchMask,
  impl: AttentionImpl,
  o: MeasureOptions,
): Promise<MemoryRow> {
  const n = shape.batch * shape.seqLen * shape.qHeads * shape.headDim;
  const nk = shape.batch * shape.seqLen * shape.kvHeads * shape.headDim;
  const ioBytes = 4 * (4 * n + 4 * nk + 2 * shape.qHeads + shape.batch * shape.qHeads * shape.seqLen);
  await collectGarbage();
  const previous = memory.limitBytes();
  const base = memory.currentBytes();
  memory.setLimit(base + o.limitBytes);
  memory.resetPeak();
  const row: MemoryRow = { mask, seqLen: shape.seqLen, impl, peakBytes: null, ioBytes, ms: null };
  let layer: SinkAttention | undefined;
  try {
    const x = tensors(shape, true, o.seed);
    layer = new SinkAttention(shape, { mask: maskOf(mask, o.window), impl, device: 'cpu' });
    const t0 = performance.now();
    layer.forward(x.q, x.k, x.v, x.sinks);
    layer.backward(x.dOut);
    row.ms = performance.now() - t0;
    row.peakBytes = memory.peakBytes() - base;
  } catch (e) {
    if (!isOutOfMemoryError(e)) throw e;
    row.error = e.message;
    if (typeof e.currentBytes === 'number' && typeof e.requestedBytes === 'number')
      row.oomNeedBytes = e.currentBytes + e.requestedBytes - base;
  } finally {
    layer?.release();
    memory.setLimit(previous);
  }
  await collectGarbage();
  return row;
}

/** Forward and backward times of fused and eager, alternating, `repeats` times each (medians). */
export async function measureAttentionSpeed(
  shape: AttentionShape,
  mask: BenchMask,
  o: Pick<MeasureOptions, 'window' | 'seed'> & { repeats: number },
): Promise<SpeedRow> {
  const x = tensors(shape, false, o.seed);
  const times: Record<string, number[]> = { ff: [], fb: [], ef: [], eb: [] };
  const layers = {
    fused: new SinkAttention(shape, { mask: maskOf(mask, o.window), impl: 'fused', device: 'cpu' }),
    eager: new SinkAttention(shape, { mask: maskOf(mask, o.window), impl: 'eager', device: 'cpu' }),
  };
  for (let r = 0; r < o.repeats; r++) {
    for (const impl of ['fused', 'eager'] as const) {
      const layer = layers[impl];
      const t0 = performance.now();
      layer.forward(x.q, x.k, x.v, x.sinks);
      const t1 = performance.now();
      layer.backward(x.dOut);
      const t2 = performance.now();
      times[impl === 'fused' ? 'ff' : 'ef']!.push(t1 - t0);
      times[impl === 'fused' ? 'fb' : 'eb']!.push(t2 - t1);
      await collectGarbage();
    }
  }
  const pairs = visiblePairs(shape.seqLen, mask === 'window' ? o.window : 0) * shape.qHeads * shape.batch;
  const gflop = (14 * shape.headDim * pairs) / 1e9;
  const fused = median(times.ff!) + median(times.fb!);
  const eager = median(times.ef!) + median(times.eb!);
  return {
    mask,
    seqLen: shape.seqLen,
    fusedForwardMs: median(times.ff!),
    fusedBackwardMs: median(times.fb!),
    eagerForwardMs: median(times.ef!),
    eagerBackwardMs: median(times.eb!),
    fusedGflops: gflop / (fused / 1e3),
    eagerGflops: gflop / (eager / 1e3),
    speedup: eager / fused,
    fusedMs: summarize(times.ff!.map((f, i) => f + times.fb![i]!)),
    eagerMs: summarize(times.ef!.map((f, i) => f + times.eb![i]!)),
  };
}

function targets(result: AttentionBenchResult): AttentionBenchResult['targets'] {
  const out: AttentionBenchResult['targets'] = [];
  const find = (mask: BenchMask, seqLen: number, impl: AttentionImpl) =>
    result.memory.find((r) => r.mask === mask && r.seqLen === seqLen && r.impl === impl);
  for (const mask of ['window', 'full'] as const) {
    const e = find(mask, 4096, 'eager');
    const f = find(mask, 4096, 'fused');
    if (e && f && f.peakBytes) {
      const ratio = e.peakBytes === null ? Infinity : e.peakBytes / f.peakBytes;
      out.push({
        name: `eager/fused peak memory at 4096 (${mask}) >= 20x`,
        value: e.peakBytes === null ? 'eager OOM' : `${ratio.toFixed(1)}x`,
        met: ratio >= 20,
      });
    }
    const f8 = find(mask, 8192, 'fused');
    if (f8 && f8.peakBytes) {
      const ratio = f8.peakBytes / f8.ioBytes;
      out.push({
        name: `fused peak <= 1.2x inputs+outputs+gradients+LSE at 8192 (${mask})`,
        value: `${ratio.toFixed(3)}x`,
        met: ratio <= 1.2,
      });
    }
    const s = result.speed.find((r) => r.mask === mask && r.seqLen === 4096);
    if (s)
      out.push({
        name: `fused fwd+bwd >= 3x faster than eager at 4096 (${mask})`,
        value: `${s.speedup.toFixed(1)}x`,
        met: s.speedup >= 3,
      });
  }
  return out;
}

/** Runs the benchmark and returns every measurement (also printed through `log`). */
export async function runAttentionBench(options: AttentionBenchOptions = {}): Promise<AttentionBenchResult> {
  const o: Required<AttentionBenchOptions> = {
    memorySeqLens: [1024, 2048, 4096, 8192],
    memoryHeads: { qHeads: 64, kvHeads: 8 },
    speedSeqLens: [1024, 2048, 4096],
    speedHeads: { qHeads: 8, kvHeads: 1 },
    headDim: 64,
    window: 128,
    masks: ['window', 'full'],
    limitBytes: 16 * GiB,
    repeats: 3,
    seed: 1,
    log: console.log,
    ...options,
  };
  const log = o.log ?? (() => undefined);
  const cpu = backends().find((b) => b.name === 'cpu');
  const result: AttentionBenchResult = {
    date: new Date().toISOString(),
    machine: {
      cpu: cpus()[0]?.model ?? 'unknown',
      threads: cpu?.name === 'cpu' ? cpu.threads : 1,
      isa: attentionInfo().isa,
    },
    memoryShape: { ...o.memoryHeads, headDim: o.headDim, batch: 1 },
    speedShape: { ...o.speedHeads, headDim: o.headDim, batch: 1 },
    limitBytes: o.limitBytes,
    memory: [],
    speed: [],
    targets: [],
  };
  log(`sink attention benchmark — ${result.machine.cpu}, ${result.machine.threads} threads, ${result.machine.isa}`);
  if (o.memorySeqLens.length > 0) {
    log(
      `\npeak tracked memory of forward+backward: ${o.memoryHeads.qHeads} q heads, ${o.memoryHeads.kvHeads} kv heads, ` +
        `headDim ${o.headDim}, batch 1, limit ${fmtBytes(o.limitBytes)}`,
    );
    log('mask    seqLen   fused peak   eager peak   eager/fused   fused/io   fused ms   eager ms');
    for (const mask of o.masks) {
      for (const seqLen of o.memorySeqLens) {
        const shape = { batch: 1, seqLen, ...o.memoryHeads, headDim: o.headDim };
        const f = await measureAttentionMemory(shape, mask, 'fused', o);
        const e = await measureAttentionMemory(shape, mask, 'eager', o);
        result.memory.push(f, e);
        const ratio = e.peakBytes !== null && f.peakBytes ? `${(e.peakBytes / f.peakBytes).toFixed(1)}x` : '-';
        log(
          `${mask.padEnd(7)} ${String(seqLen).padStart(6)}   ${fmtBytes(f.peakBytes).padStart(10)}   ${fmtBytes(e.peakBytes).padStart(10)}` +
            `   ${ratio.padStart(11)}   ${f.peakBytes ? (f.peakBytes / f.ioBytes).toFixed(3).padStart(7) + 'x' : '       -'}` +
            `   ${f.ms === null ? '-' : f.ms.toFixed(0).padStart(8)}   ${e.ms === null ? 'OOM' : e.ms.toFixed(0).padStart(8)}`,
        );
      }
    }
  }
  if (o.speedSeqLens.length > 0) {
    log(
      `\nspeed of forward+backward (median of ${o.repeats}): ${o.speedHeads.qHeads} q heads, ${o.speedHeads.kvHeads} kv heads, headDim ${o.headDim}, batch 1`,
    );
    log('mask    seqLen   fused ms (fwd+bwd)   eager ms (fwd+bwd)   fused GFLOP/s   eager GFLOP/s   fused/eager speed');
    for (const mask of o.masks) {
      for (const seqLen of o.speedSeqLens) {
        const s = await measureAttentionSpeed({ batch: 1, seqLen, ...o.speedHeads, headDim: o.headDim }, mask, o);
        result.speed.push(s);
        log(
          `${mask.padEnd(7)} ${String(seqLen).padStart(6)}   ${`${s.fusedForwardMs.toFixed(0)}+${s.fusedBackwardMs.toFixed(0)}`.padStart(18)}` +
            `   ${`${s.eagerForwardMs.toFixed(0)}+${s.eagerBackwardMs.toFixed(0)}`.padStart(18)}   ${s.fusedGflops.toFixed(1).padStart(13)}` +
            `   ${s.eagerGflops.toFixed(1).padStart(13)}   ${s.speedup.toFixed(1).padStart(16)}x`,
        );
      }
    }
  }
  result.targets = targets(result);
  if (result.targets.length > 0) {
    log('\ntargets');
    for (const t of result.targets) log(`  ${t.met ? 'met    ' : 'NOT MET'}  ${t.name}: ${t.value}`);
  }
  return result;
}

/** The command line (the arguments after the script): `node dist/bench/attention.js [options]`. */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<AttentionBenchResult> {
  const list = (s: string) => s.split(',').map((x) => Number.parseInt(x, 10));
  const heads = (s: string) => {
    const [q, kv] = s.split('/').map((x) => Number.parseInt(x, 10));
    return { qHeads: q!, kvHeads: kv ?? q! };
  };
  const program = benchProgram('attention', 'eager vs fused sink attention: peak memory and speed, side by side', cli)
    .option('--limit <GiB>', 'tracked memory limit in GiB', '16')
    .option('--mem-seqs <list>', 'sequence lengths of the memory table (quick: 1024,2048)', '1024,2048,4096,8192')
    .option('--mem-heads <q/kv>', 'heads of the memory table', '64/8')
    .option('--speed-seqs <list>', 'sequence lengths of the speed table (quick: 1024)', '1024,2048,4096')
    .option('--speed-heads <q/kv>', 'heads of the speed table', '8/1')
    .option('--head-dim <n>', 'head dimension', '64')
    .option('--window <n>', 'sliding window of the window mask', '128')
    .option('--masks <list>', 'masks: window, full', 'window,full')
    .option('--repeats <n>', 'timed repetitions per speed point (quick: 1)', '3')
    .option('--svg <file>', 'write the memory chart as SVG');
  const opts = parseBench<CommonBenchOptions & Record<string, string | undefined>>(program, argv, {
    memSeqs: '1024,2048',
    speedSeqs: '1024',
    repeats: '1',
  });
  const seqs = (s: string | undefined) => (s === '' || s === 'none' ? [] : list(s!));
  const result = await runAttentionBench({
    limitBytes: Math.round(Number.parseFloat(opts.limit!) * GiB),
    memorySeqLens: seqs(opts.memSeqs),
    memoryHeads: heads(opts.memHeads!),
    speedSeqLens: seqs(opts.speedSeqs),
    speedHeads: heads(opts.speedHeads!),
    headDim: Number.parseInt(opts.headDim!, 10),
    window: Number.parseInt(opts.window!, 10),
    masks: opts.masks!.split(',') as BenchMask[],
    repeats: Number.parseInt(opts.repeats!, 10),
    ...(opts.json === true ? { log: null } : {}),
  });
  writeJson(opts.json, { command: commandLine(program, argv), ...result });
  if (opts.svg) {
    const m = result.memoryShape;
    writeFileSync(
      opts.svg,
      memoryChartSvg(
        result.memory,
        `sink attention fwd+bwd peak memory (${m.qHeads}/${m.kvHeads} heads, d ${m.headDim})`,
        result.limitBytes,
      ),
    );
  }
  return result;
}

runWhenInvoked(import.meta.url, 'attention', main);
