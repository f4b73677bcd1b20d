#!/usr/bin/env node
/**
 * TFLOP/s of the CUDA GEMMs against the device's dense bfloat16 tensor-core peak: 4096^3 and the
 * gpt-oss-20b layer shapes (width 2880, 64 query / 8 kv heads of 64, 32 experts of ffn 2880 with
 * top-4, vocabulary 201088) for a step of `tokens` tokens, forward (x W^T) and input gradient
 * (dy W), with the float32 kernel ('highest'), the tensor-core kernel on float32 operands and
 * on bfloat16 weights ('medium'), and on bfloat16 weights with float16 operands ('medium' with
 * dtype float16; float16 and bfloat16 tensor cores have the same rate). Operands live in device memory (no copies timed). The peak is
 * worked out at run time: the multiprocessor count the addon reports x the maximum SM clock
 * `nvidia-smi` reports x the dense bfloat16 FLOP per clock of one multiprocessor of the device's
 * compute capability (8.0: 2048, 8.6/8.7/8.9: 512, 9.0: 4096, 10.0: 8192; others: no peak).
 * With `--attention <attention-gpu.json>` it also prints the TFLOP/s of each forward and backward
 * that bench/attention-gpu.js measured (ours and PyTorch's), counting the masked-in
 * query-key pairs: forward 4 D flops a pair per head, backward 2.5x that.
 *
 * Run: `npm run build:ts && node dist/bench/gemm-gpu.js [--tokens 4096] [--iterations 10] [--quick]
 * [--attention file [--only-attention]] [--json [file]]`. Without a usable CUDA device it says so.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

import { backends, cudaAvailable } from '../lib/native/index.js';
import { loadAddon } from '../lib/native/loader.js';
import {
  benchProgram,
  parseBench,
  runWhenInvoked,
  tableLog,
  writeJson,
  type BenchCliSettings,
  type CommonBenchOptions,
} from './common/cli.js';

/** One timed GEMM configuration. */
export interface GemmGpuRow {
  /** What the shape is, e.g. `qkv forward`. */
  shape: string;
  m: number;
  n: number;
  k: number;
  /** `fp32` (float32 kernel), `tc fp32 operands`, `tc bf16 weight` or `tc fp16 operands`. */
  kernel: string;
  ms: number;
  tflops: number;
  /** Fraction of the dense bf16 peak (null when the peak is unknown). */
  ofPeak: number | null;
}

/** Everything one run measured. */
export interface GemmGpuResult {
  device: string;
  /** Dense bfloat16 peak in TFLOP/s and how it was worked out (null when unknown). */
  peakTflops: number | null;
  peakNote: string;
  rows: GemmGpuRow[];
  /** TFLOP/s of the attention benchmark's rows, when `--attention` was given. */
  attention: {
    impl: string;
    mask: string;
    seqLen: number;
    forwardTflops: number | null;
    backwardTflops: number | null;
  }[];
}

interface TimerAddon {
  gemmTimeCuda(o: {
    m: number;
    n: number;
    k: number;
    transA?: boolean;
    transB?: boolean;
    aDtype?: string;
    bDtype?: string;
    precision?: string;
    operandDtype?: string;
    iterations?: number;
  }): number;
}

/** Dense bf16 FLOP per clock of one multiprocessor, by compute capability. */
const PER_SM: Record<string, number> = { '8.0': 2048, '8.6': 512, '8.7': 512, '8.9': 512, '9.0': 4096, '10.0': 8192 };

/** The device's dense bf16 peak (TFLOP/s), from the addon's device info and nvidia-smi's max SM clock. */
export function bf16Peak(): { tflops: number | null; note: string } {
  const dev = backends().find((b) => b.name === 'cuda');
  if (dev === undefined) return { tflops: null, note: 'no CUDA device' };
  const cc = dev.computeCapability,
    sms = dev.multiProcessors,
    perSm = PER_SM[cc];
  if (perSm === undefined) return { tflops: null, note: `no per-SM bf16 rate known for compute capability ${cc}` };
  let mhz = NaN;
  try {
    mhz = Number(
      execFileSync('nvidia-smi', ['--query-gpu=clocks.max.sm', '--format=csv,noheader,nounits'], {
        encoding: 'utf8',
      }).split('\n')[0],
    );
  } catch {
    // below
  }
  if (!(mhz > 0)) return { tflops: null, note: 'nvidia-smi gave no maximum SM clock' };
  return {
    tflops: (sms * mhz * 1e6 * perSm) / 1e12,
    note: `${sms} SMs x ${mhz} MHz x ${perSm} bf16 FLOP/clk/SM (compute capability ${cc})`,
  };
}

/** The query-key pairs of a causal mask over `s` tokens, with a sliding window of `w` (0 = full). */
export function maskedPairs(s: number, w: number): number {
  if (w <= 0 || w >= s) return (s * (s + 1)) / 2;
  return (w * (w + 1)) / 2 + (s - w) * w;
}

/** The command line (the arguments after the script). */
export function main(argv: readonly string[] = process.argv.slice(2), cli: BenchCliSettings = {}): GemmGpuResult {
  const program = benchProgram(
    'gemm-gpu',
    'TFLOP/s of the CUDA GEMMs (float32, bf16 and fp16 tensor-core kernels) against the device peak',
    cli,
  )
    .option('--tokens <n>', 'tokens of the gpt-oss-20b layer shapes (default 4096; quick: 1024)')
    .option('--iterations <n>', 'timed launches after a warm-up (default 10; quick: 3)')
    .option('--attention <file>', "bench/attention-gpu.js's JSON, to print its TFLOP/s")
    .option('--only-attention', 'time no GEMM (with --attention)');
  type Options = CommonBenchOptions & {
    tokens?: string;
    iterations?: string;
    attention?: string;
    onlyAttention?: boolean;
  };
  const values = parseBench<Options>(program, argv, { tokens: '1024', iterations: '3' });
  const T = Number(values.tokens ?? 4096),
    iterations = Number(values.iterations ?? 10);
  const log = tableLog(values.json);
  const peak = bf16Peak();
  const dev = backends().find((b) => b.name === 'cuda');
  const result: GemmGpuResult = {
    device: dev ? `${dev.deviceName} (${dev.computeCapability})` : 'none',
    peakTflops: peak.tflops,
    peakNote: peak.note,
    rows: [],
    attention: [],
  };
  const gpu = cudaAvailable();
  if (!gpu) log('gemm gpu: no usable CUDA device, no GEMM to time');
  else
    log(
      `gemm gpu: ${result.device}, dense bf16 peak ${peak.tflops === null ? 'unknown' : `${peak.tflops.toFixed(0)} TFLOP/s`} (${peak.note})`,
    );
  const addon = loadAddon<TimerAddon>();
  const D = 2880,
    Q = 64 * 64,
    KV = 8 * 64,
    F = 2880,
    E = 32,
    TOPK = 4,
    V = 201088;
  const perExpert = Math.max(1, Math.round((T * TOPK) / E));
  // [label, m, n, k, transB]: forward x W^T (transB) or input gradient dy W.
  const shapes: [string, number, number, number, boolean][] = [
    ['4096^3', 4096, 4096, 4096, true],
    [`qkv forward (${T} tokens)`, T, Q + 2 * KV, D, true],
    ['qkv input gradient', T, D, Q + 2 * KV, false],
    ['o forward', T, D, Q, true],
    [`expert gate_up forward (${perExpert} rows)`, perExpert, 2 * F, D, true],
    ['expert down forward', perExpert, D, F, true],
    ['expert down input gradient', perExpert, F, D, false],
    ...(values.quick
      ? []
      : [[`lm head forward (vocabulary ${V})`, T, V, D, true] as [string, number, number, number, boolean]]),
  ];
  // [label, precision, weight dtype, tensor-core operand dtype]
  const kernels: [string, string, string, string][] = [
    ['fp32', 'highest', 'float32', 'bfloat16'],
    ['tc fp32 operands', 'medium', 'float32', 'bfloat16'],
    ['tc bf16 weight', 'medium', 'bfloat16', 'bfloat16'],
    ['tc fp16 operands', 'medium', 'bfloat16', 'float16'],
  ];
  for (const [shape, m, n, k, transB] of values.onlyAttention || !gpu ? [] : shapes) {
    for (const [kernel, precision, bDtype, operandDtype] of kernels) {
      if (kernel === 'fp32' && m * n * k > 2 ** 37) continue; // the float32 kernel on the LM head: minutes
      const s = addon.gemmTimeCuda({ m, n, k, transB, bDtype, precision, operandDtype, iterations });
      const tflops = (2 * m * n * k) / s / 1e12;
      const row: GemmGpuRow = {
        shape,
        m,
        n,
        k,
        kernel,
        ms: s * 1e3,
        tflops,
        ofPeak: peak.tflops === null ? null : tflops / peak.tflops,
      };
      result.rows.push(row);
      const pct = row.ofPeak === null ? '' : `, ${(100 * row.ofPeak).toFixed(1)}% of peak`;
      log(`gemm gpu: ${shape} ${m}x${n}x${k}, ${kernel}: ${row.ms.toFixed(3)} ms, ${tflops.toFixed(1)} TFLOP/s${pct}`);
    }
  }
  if (values.attention !== undefined) {
    type Row = { impl: string; mask: string; seqLen: number; forwardMs: number | null; backwardMs: number | null };
    const a = JSON.parse(readFileSync(values.attention, 'utf8')) as {
      shape: { qHeads: number; headDim: number; batch: number; window: number };
      rows: Row[];
      torch: Row[] | null;
    };
    for (const r of [...a.rows, ...(a.torch ?? [])]) {
      const pairs = maskedPairs(r.seqLen, r.mask === 'window' ? a.shape.window : 0);
      const fwd = 4 * a.shape.headDim * pairs * a.shape.qHeads * a.shape.batch;
      const f = r.forwardMs === null ? null : fwd / (r.forwardMs * 1e-3) / 1e12;
      const b = r.backwardMs === null ? null : (2.5 * fwd) / (r.backwardMs * 1e-3) / 1e12;
      result.attention.push({ impl: r.impl, mask: r.mask, seqLen: r.seqLen, forwardTflops: f, backwardTflops: b });
      const fmt = (x: number | null) =>
        x === null
          ? 'n/a'
          : `${x.toFixed(1)} TFLOP/s${peak.tflops === null ? '' : ` (${((100 * x) / peak.tflops).toFixed(1)}%)`}`;
      log(`attention gpu: ${r.impl} ${r.mask} ${r.seqLen} tokens: forward ${fmt(f)}, backward ${fmt(b)}`);
    }
  }
  writeJson(values.json, result);
  return result;
}

runWhenInvoked(import.meta.url, 'gemm-gpu', main);
