/**
 * GPU sink-attention benchmark at the gpt-oss-20b attention layer shape (64 query heads,
 * 8 kv heads, headDim 64, batch 1; sliding window 128 and full causal), seqLen 1024…32768:
 *
 * 1. peak tracked device memory of one forward+backward, eager vs fused (inputs, outputs and
 *    gradients included; the eager path's [1, 64, T, T + 1] fp32 tensors make it run out of
 *    memory under `--limit` where it would on a GPU of that size);
 * 2. wall time of the forward and of the backward (median of `--repeats`, after one warm-up;
 *    each call returns once the GPU has finished), skipping the rest once `--budget` seconds
 *    are spent;
 * 3. where `python3 -c 'import torch'` works, the same shapes through PyTorch
 *    (bench/torch_attention.py): FlexAttention with the block mask and the sink applied by the
 *    LSE correction, and SDPA (full causal only, no sink) — time and torch's peak memory.
 *
 * Inputs are bf16 DeviceTensors (the kernels accumulate in fp32). Without a GPU it prints the
 * reason and returns no rows.
 *
 * Run: `npm run build:ts && node dist/bench/attention-gpu.js [--seqs 1024,4096] [--json out.json] [--markdown out.md]`.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import {
  createBlockMask,
  sinkAttentionBackward,
  sinkAttentionForward,
  type AttentionImpl,
  type AttentionMask,
  type AttentionShape,
} from '../lib/attention/index.js';
import {
  backends,
  cudaAvailable,
  isOutOfMemoryError,
  memory,
  toDevice,
  type DType,
  type DeviceTensor,
} from '../lib/native/index.js';
import { loadAddon, packageRoot } from '../lib/native/loader.js';
import { fillUniform } from '../lib/util/random.js';
import {
  benchProgram,
  commandLine,
  parseBench,
  runWhenInvoked,
  tableLog,
  writeJson,
  type BenchCliSettings,
  type CommonBenchOptions,
} from './common/cli.js';

/** Which mask a row used. */
export type GpuBenchMask = 'window' | 'full';

/** Options of {@link runAttentionGpuBench}. */
export interface AttentionGpuBenchOptions {
  /** Sequence lengths (default 1024, 2048, 4096, 8192, 16384, 32768). */
  seqLens?: number[];
  /** Heads (default gpt-oss-20b: 64 query, 8 kv). */
  heads?: { qHeads: number; kvHeads: number };
  /** Head dimension (default 64). */
  headDim?: number;
  /** Sliding window of the `window` mask (default 128). */
  window?: number;
  /** Masks to run (default both). */
  masks?: GpuBenchMask[];
  /** Input dtype (default bfloat16). */
  dtype?: DType;
  /** Tracked device-memory limit in bytes (default 80 GiB, an 80 GB GPU); eager past it is out of memory. */
  limitBytes?: number;
  /** Timed repetitions per point (default 3; the median is reported). */
  repeats?: number;
  /** Seconds after which the remaining timed points are skipped (default 150). */
  budgetSeconds?: number;
  /** Seconds bench/torch_attention.py may take, compilation included (default 90). */
  torchBudgetSeconds?: number;
  /** Run bench/torch_attention.py when PyTorch is importable (default true). */
  torch?: boolean;
  /** The Python interpreter (default `python3`). */
  python?: string;
  /** Where progress lines go (default console.log); `null` is silent. */
  log?: ((line: string) => void) | null;
}

/** One measurement of this package's kernels. */
export interface GpuRow {
  mask: GpuBenchMask;
  seqLen: number;
  impl: AttentionImpl;
  /** Peak tracked device bytes of forward+backward (inputs included); null = out of memory or skipped. */
  peakBytes: number | null;
  /** Median forward / backward wall time in ms (null when not measured). */
  forwardMs: number | null;
  backwardMs: number | null;
  /** Out-of-memory or skip note. */
  note?: string;
}

/** One PyTorch measurement (as bench/torch_attention.py reports it). */
export interface TorchRow {
  mask: GpuBenchMask;
  seqLen: number;
  /** `flex` (FlexAttention + sink by LSE correction) or `sdpa` (causal, no sink). */
  impl: 'flex' | 'sdpa';
  peakBytes: number | null;
  forwardMs: number | null;
  backwardMs: number | null;
  note?: string;
}

/** Everything one run measured. */
export interface AttentionGpuBenchResult {
  /** ISO date of the run. */
  date: string;
  /** e.g. `NVIDIA H200 (9.0, 132 SMs)`, or why nothing ran. */
  device: string;
  available: boolean;
  shape: { qHeads: number; kvHeads: number; headDim: number; batch: number; window: number; dtype: DType };
  limitBytes: number;
  rows: GpuRow[];
  torch: TorchRow[] | null;
  /** Why there are no torch rows (or the torch version used). */
  torchNote: string;
  /** The Markdown table. */
  markdown: string;
}

const GiB = 2 ** 30;
const DEFAULTS = {
  seqLens: [1024, 2048, 4096, 8192, 16384, 32768],
  heads: { qHeads: 64, kvHeads: 8 },
  headDim: 64,
  window: 128,
  masks: ['window', 'full'] as GpuBenchMask[],
  dtype: 'bfloat16' as DType,
  limitBytes: 80 * GiB,
  repeats: 3,
  budgetSeconds: 150,
  torchBudgetSeconds: 90,
  torch: true,
  python: 'python3',
};

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function maskOf(mask: GpuBenchMask, window: number): AttentionMask {
  return mask === 'window' ? { window } : {};
}

/** Seeded uniform values in [-1, 1). */
function fill(n: number, seed: number): Float32Array {
  return fillUniform(new Float32Array(n), seed);
}

/** `12.30 GiB`, `310.5 MiB`, `12.0 KiB`, `OOM` (out of memory), `—` (not measured). */
export function formatBytes(b: number | null, note?: string): string {
  if (b === null) return note?.startsWith('out of memory') ? 'OOM' : '—';
  if (b >= GiB) return `${(b / GiB).toFixed(2)} GiB`;
  return b >= 2 ** 20 ? `${(b / 2 ** 20).toFixed(1)} MiB` : `${(b / 1024).toFixed(1)} KiB`;
}

function formatMs(a: number | null, b: number | null): string {
  return a === null || b === null ? '—' : `${(a + b).toFixed(1)}`;
}

/** The Markdown table of a result: one line per (mask, seqLen). */
export function gpuBenchMarkdown(
  r: Pick<AttentionGpuBenchResult, 'rows' | 'torch' | 'device' | 'date' | 'shape' | 'limitBytes'>,
): string {
  const s = r.shape;
  const lines = [
    `sink attention fwd+bwd on ${r.device}, ${r.date.slice(0, 10)}: ${s.qHeads}/${s.kvHeads} heads, headDim ${s.headDim}, ` +
      `batch ${s.batch}, ${s.dtype} inputs, window ${s.window}; peaks include inputs and gradients; eager limit ` +
      `${formatBytes(r.limitBytes)}; times in ms (forward + backward)`,
    '',
    '| mask | seqLen | fused peak | eager peak | fused ms | eager ms | flex peak | flex ms | sdpa ms (no sink) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  const keys = [...new Set(r.rows.map((x) => `${x.mask}:${x.seqLen}`))];
  for (const key of keys) {
    const [mask, len] = key.split(':') as [GpuBenchMask, string];
    const seqLen = Number(len);
    const ours = (impl: AttentionImpl) => r.rows.find((x) => x.mask === mask && x.seqLen === seqLen && x.impl === impl);
    const theirs = (impl: 'flex' | 'sdpa') =>
      r.torch?.find((x) => x.mask === mask && x.seqLen === seqLen && x.impl === impl);
    const f = ours('fused'),
      e = ours('eager'),
      fl = theirs('flex'),
      sd = theirs('sdpa');
    lines.push(
      `| ${mask} | ${seqLen} | ${formatBytes(f?.peakBytes ?? null, f?.note)} | ${formatBytes(e?.peakBytes ?? null, e?.note)} | ` +
        `${formatMs(f?.forwardMs ?? null, f?.backwardMs ?? null)} | ${formatMs(e?.forwardMs ?? null, e?.backwardMs ?? null)} | ` +
        `${formatBytes(fl?.peakBytes ?? null, fl?.note)} | ${formatMs(fl?.forwardMs ?? null, fl?.backwardMs ?? null)} | ` +
        `${formatMs(sd?.forwardMs ?? null, sd?.backwardMs ?? null)} |`,
    );
  }
  return lines.join('\n');
}

interface Inputs {
  q: DeviceTensor;
  k: DeviceTensor;
  v: DeviceTensor;
  dOut: DeviceTensor;
  sinks: Float32Array;
}

function makeInputs(shape: AttentionShape, dtype: DType, seed: number): Inputs {
  const { batch: B, seqLen: T, qHeads: Hq, kvHeads: Hkv, headDim: D } = shape;
  const opts = { device: 'cuda' as const, dtype };
  const host = fill(B * T * Hq * D, seed);
  const kv = host.subarray(0, B * T * Hkv * D);
  return {
    q: toDevice(host, [B, T, Hq, D], opts),
    dOut: toDevice(
      host.map((x) => x * 0.5),
      [B, T, Hq, D],
      opts,
    ),
    k: toDevice(kv, [B, T, Hkv, D], opts),
    v: toDevice(
      kv.map((x) => -x),
      [B, T, Hkv, D],
      opts,
    ),
    sinks: fill(Hq, seed + 1),
  };
}

/** One forward+backward: times in ms and the peak, disposing the results. */
function once(
  x: Inputs,
  shape: AttentionShape,
  mask: AttentionMask,
  impl: AttentionImpl,
  blockMask: ReturnType<typeof createBlockMask> | undefined,
): { fwd: number; bwd: number; peak: number } {
  memory.resetPeak('cuda');
  const opts = impl === 'fused' ? { blockMask, impl } : { mask, impl };
  const t0 = performance.now();
  const r = sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, opts);
  const t1 = performance.now();
  const g = sinkAttentionBackward(x.q, x.k, x.v, x.sinks, r.out, r.lse, x.dOut, shape, opts);
  const t2 = performance.now();
  const peak = memory.peakBytes('cuda');
  for (const t of [r.out, r.lse, g.dq, g.dk, g.dv, g.dSinks]) t?.dispose();
  return { fwd: t1 - t0, bwd: t2 - t1, peak };
}

/** @internal Runs bench/torch_attention.py when asked and possible; otherwise says why not. */
export function runTorch(
  o: Pick<
    typeof DEFAULTS,
    'torch' | 'python' | 'seqLens' | 'heads' | 'headDim' | 'window' | 'masks' | 'repeats' | 'torchBudgetSeconds'
  >,
  log: (l: string) => void,
): { rows: TorchRow[] | null; note: string } {
  if (!o.torch) return { rows: null, note: 'PyTorch comparison not requested' };
  const script = join(packageRoot(), 'bench', 'torch_attention.py');
  if (!existsSync(script)) return { rows: null, note: `${script} is missing` };
  const probe = spawnSync(o.python, ['-c', 'import torch; print(torch.__version__, torch.cuda.is_available())'], {
    encoding: 'utf8',
  });
  if (probe.status !== 0) return { rows: null, note: `no PyTorch (${o.python} -c 'import torch' failed)` };
  const [version, cuda] = probe.stdout.trim().split(' ');
  if (cuda !== 'True') return { rows: null, note: `PyTorch ${version} sees no CUDA device` };
  log(`torch ${version}: running bench/torch_attention.py`);
  const args = [
    script,
    '--seqs',
    o.seqLens.join(','),
    '--heads',
    `${o.heads.qHeads}/${o.heads.kvHeads}`,
    '--head-dim',
    String(o.headDim),
    '--window',
    String(o.window),
    '--masks',
    o.masks.join(','),
    '--repeats',
    String(o.repeats),
    '--budget',
    String(o.torchBudgetSeconds),
  ];
  const p = spawnSync(o.python, args, { encoding: 'utf8', maxBuffer: 1 << 24, stdio: ['ignore', 'pipe', 'inherit'] });
  if (p.status !== 0) return { rows: null, note: `bench/torch_attention.py failed (exit ${p.status})` };
  try {
    return { rows: JSON.parse(p.stdout) as TorchRow[], note: `PyTorch ${version}` };
  } catch {
    return { rows: null, note: 'bench/torch_attention.py printed no JSON' };
  }
}

/** Runs the benchmark (see the file comment). */
export async function runAttentionGpuBench(options: AttentionGpuBenchOptions = {}): Promise<AttentionGpuBenchResult> {
  const o = {
    ...DEFAULTS,
    ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
  } as typeof DEFAULTS & { log?: AttentionGpuBenchOptions['log'] };
  const log = o.log === null ? () => {} : (o.log ?? ((l: string) => console.log(l)));
  const shape = { ...o.heads, headDim: o.headDim, batch: 1, window: o.window, dtype: o.dtype };
  const date = new Date().toISOString();
  const base = { date, shape, limitBytes: o.limitBytes, rows: [] as GpuRow[] };
  if (!cudaAvailable()) {
    const device = `no CUDA device: ${loadAddon().cudaStatus().reason}`;
    log(device);
    return { ...base, device, available: false, torch: null, torchNote: 'not run', markdown: '' };
  }
  const gpu = backends().find((b) => b.name === 'cuda');
  const device =
    gpu && gpu.name === 'cuda' ? `${gpu.deviceName} (${gpu.computeCapability}, ${gpu.multiProcessors} SMs)` : 'cuda:0';
  log(`device: ${device}`);
  const started = performance.now();
  const spent = () => (performance.now() - started) / 1000;
  const rows: GpuRow[] = [];
  for (const seqLen of o.seqLens) {
    const s: AttentionShape = {
      batch: 1,
      seqLen,
      qHeads: o.heads.qHeads,
      kvHeads: o.heads.kvHeads,
      headDim: o.headDim,
    };
    const x = makeInputs(s, o.dtype, seqLen);
    for (const maskName of o.masks) {
      const mask = maskOf(maskName, o.window);
      const blockMask = createBlockMask(mask, s);
      for (const impl of ['fused', 'eager'] as const) {
        const row: GpuRow = { mask: maskName, seqLen, impl, peakBytes: null, forwardMs: null, backwardMs: null };
        rows.push(row);
        if (spent() > o.budgetSeconds) {
          row.note = 'skipped: time budget';
          continue;
        }
        try {
          memory.withLimit(
            o.limitBytes,
            () => {
              const first = once(x, s, mask, impl, blockMask);
              row.peakBytes = first.peak;
              const fwd: number[] = [],
                bwd: number[] = [];
              for (let r = 0; r < o.repeats && spent() <= o.budgetSeconds; r++) {
                const m = once(x, s, mask, impl, blockMask);
                fwd.push(m.fwd);
                bwd.push(m.bwd);
              }
              if (fwd.length === 0) {
                fwd.push(first.fwd);
                bwd.push(first.bwd);
              }
              row.forwardMs = median(fwd);
              row.backwardMs = median(bwd);
            },
            'cuda',
          );
        } catch (e) {
          if (!isOutOfMemoryError(e)) throw e;
          row.note = `out of memory: ${(e as Error).message}`;
        }
        log(
          `${maskName} ${seqLen} ${impl}: peak ${formatBytes(row.peakBytes, row.note)}, ` +
            `fwd+bwd ${formatMs(row.forwardMs, row.backwardMs)} ms`,
        );
      }
    }
    for (const t of [x.q, x.k, x.v, x.dOut]) t.dispose();
  }
  const torch = runTorch(o, log);
  const result = { ...base, rows, device, available: true, torch: torch.rows, torchNote: torch.note };
  return { ...result, markdown: gpuBenchMarkdown(result) };
}

/** The command line (the arguments after the script): `node dist/bench/attention-gpu.js [options]`. */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<AttentionGpuBenchResult> {
  const program = benchProgram(
    'attention-gpu',
    'sink attention on the GPU: eager vs fused peak memory and time, and PyTorch where installed',
    cli,
  )
    .option('--seqs <list>', 'sequence lengths (quick: 1024,2048)', DEFAULTS.seqLens.join(','))
    .option('--heads <q/kv>', 'query/kv heads', '64/8')
    .option('--head-dim <n>', 'head dimension', '64')
    .option('--window <n>', 'sliding window of the window mask', '128')
    .option('--masks <list>', 'masks: window, full', 'window,full')
    .option('--dtype <t>', 'input dtype: bfloat16 or float32', 'bfloat16')
    .option('--limit <GiB>', 'tracked device-memory limit in GiB', '80')
    .option('--repeats <n>', 'timed repetitions per point (quick: 1)', '3')
    .option('--budget <s>', 'seconds after which the remaining points are skipped', '150')
    .option('--torch-budget <s>', 'seconds the PyTorch comparison may take (compilation included)', '90')
    .option('--no-torch', 'skip the PyTorch comparison')
    .option('--python <exe>', 'Python interpreter with torch', 'python3')
    .option('--markdown <file>', 'write the Markdown table');
  const opts = parseBench<CommonBenchOptions & Record<string, string | boolean | undefined>>(program, argv, {
    seqs: '1024,2048',
    repeats: '1',
  });
  const [q, kv] = String(opts.heads)
    .split('/')
    .map((x) => Number.parseInt(x, 10));
  const result = await runAttentionGpuBench({
    seqLens: String(opts.seqs)
      .split(',')
      .map((x) => Number.parseInt(x, 10)),
    heads: { qHeads: q!, kvHeads: kv ?? q! },
    headDim: Number.parseInt(String(opts.headDim), 10),
    window: Number.parseInt(String(opts.window), 10),
    masks: String(opts.masks).split(',') as GpuBenchMask[],
    dtype: opts.dtype as DType,
    limitBytes: Math.round(Number.parseFloat(String(opts.limit)) * GiB),
    repeats: Number.parseInt(String(opts.repeats), 10),
    budgetSeconds: Number.parseFloat(String(opts.budget)),
    torchBudgetSeconds: Number.parseFloat(String(opts.torchBudget)),
    torch: opts.torch !== false,
    python: String(opts.python),
    ...(opts.json === true ? { log: null } : {}),
  });
  const log = tableLog(opts.json);
  if (result.available) log(`\n${result.markdown}\n\n${result.torchNote}`);
  writeJson(opts.json, { command: commandLine(program, argv), ...result });
  if (opts.markdown) writeFileSync(String(opts.markdown), `${result.available ? result.markdown : result.device}\n`);
  return result;
}

runWhenInvoked(import.meta.url, 'attention-gpu', main);
