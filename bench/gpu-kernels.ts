#!/usr/bin/env node
/**
 * GPU timings of the GRPO kernels and of one model-op training step, side by side with the
 * CPU kernels in the same run: advantages + policy loss over `tokens` tokens (DeviceTensor
 * inputs on the GPU: no copies timed), and a transformer-layer-like step of the model ops
 * (linear forward/backward with GEMMs, RMSNorm, SwiGLU, log-softmax over the vocabulary,
 * AdamW) called with Float32Arrays — on the GPU those calls include their host<->device copies,
 * which the report says. Without a usable CUDA device it reports that and times only the CPU.
 *
 * Run: `npm run build:ts && node dist/bench/gpu-kernels.js [--tokens 1048576] [--rows 512]
 * [--dim 1024] [--vocab 8192] [--repeats 5] [--quick] [--json [file]]`.
 */

import { computeAdvantages, policyLoss } from '../lib/grpo/index.js';
import { grpoAddon } from '../lib/grpo/native.js';
import { cudaAvailable, toDevice, type DeviceTensor } from '../lib/native/index.js';
import {
  adamwUpdate,
  linearBackward,
  linearForward,
  logSoftmaxBackward,
  logSoftmaxForward,
  rmsnormBackward,
  rmsnormForward,
  swigluBackward,
  swigluForward,
} from '../lib/model/ops.js';
import { modelAddon } from '../lib/model/native.js';
import { fillUniform } from '../lib/util/random.js';
import {
  benchProgram,
  parseBench,
  runWhenInvoked,
  tableLog,
  writeJson,
  type BenchCliSettings,
  type CommonBenchOptions,
} from './common/cli.js';

/** Options of {@link runGpuKernelsBench}. */
export interface GpuKernelsBenchOptions {
  /** Tokens of the GRPO batch (responses of 1024 tokens, groups of 8). Default 1M. */
  tokens?: number;
  /** Rows (tokens) of the model-op step. Default 512. */
  rows?: number;
  /** Model width; the FFN is 4x. Default 1024. */
  dim?: number;
  /** Vocabulary of the log-softmax. Default 8192. */
  vocab?: number;
  /** Timed repeats (median reported) after one warm-up. Default 5. */
  repeats?: number;
}

/** One timed stage on both devices. */
export interface GpuKernelsRow {
  stage: string;
  cpuMs: number;
  /** null without a usable GPU (or without CUDA kernels for the stage). */
  gpuMs: number | null;
  /** cpuMs / gpuMs. */
  speedup: number | null;
  note: string;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function time(repeats: number, f: () => void): number {
  f();
  const ms: number[] = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    f();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

function random(n: number, seed: number, lo = -1, hi = 1): Float32Array {
  return fillUniform(new Float32Array(n), seed, lo, hi);
}

/** Times the GRPO stages and one model-op step on the CPU and (when usable) the GPU. */
export function runGpuKernelsBench(options: GpuKernelsBenchOptions = {}): GpuKernelsRow[] {
  const tokens = options.tokens ?? 1 << 20,
    len = 1024,
    batch = Math.max(1, Math.floor(tokens / len));
  const repeats = options.repeats ?? 5;
  const grpoGpu = cudaAvailable() && grpoAddon().grpoDevices().includes('cuda');
  const opsGpu = cudaAvailable() && modelAddon().modelOpsDevices().includes('cuda');
  const rows: GpuKernelsRow[] = [];
  const row = (stage: string, cpuMs: number, gpuMs: number | null, note: string) =>
    rows.push({ stage, cpuMs, gpuMs, speedup: gpuMs === null ? null : cpuMs / gpuMs, note });

  // GRPO: advantages of `batch` responses and the loss over batch x len tokens.
  const rewards = random(batch, 1, 0, 1);
  const ids = Int32Array.from({ length: batch }, (_, i) => Math.floor(i / 8));
  const n = batch * len;
  const logProbs = random(n, 2, -3, -0.1),
    old = random(n, 3, -3, -0.1),
    ref = random(n, 4, -3, -0.1);
  const mask = random(n, 5, 0, 1).map((v) => (v < 0.8 ? 1 : 0));
  const adv = computeAdvantages(rewards, ids, { device: 'cpu' });
  const inp = { logProbs, oldLogProbs: old, advantages: adv, responseMask: mask, refLogProbs: ref };
  const shape = { batch, responseLen: len };
  const advCpu = time(repeats, () => computeAdvantages(rewards, ids, { device: 'cpu' }));
  const lossCpu = time(repeats, () => policyLoss(inp, shape, { device: 'cpu' }));
  let advGpu: number | null = null,
    lossGpu: number | null = null;
  if (grpoGpu) {
    const d = (a: Float32Array) => toDevice(a, [a.length], { device: 'cuda' });
    const rT = d(rewards);
    const dT = {
      logProbs: d(logProbs),
      oldLogProbs: d(old),
      advantages: d(adv),
      responseMask: d(mask),
      refLogProbs: d(ref),
    };
    advGpu = time(repeats, () => computeAdvantages(rT, ids).dispose());
    lossGpu = time(repeats, () => policyLoss(dT, shape).dLogProbs.dispose());
    for (const x of [rT, ...Object.values(dT)] as DeviceTensor[]) x.dispose();
  }
  row(`grpo advantages (${batch} responses)`, advCpu, advGpu, 'DeviceTensor inputs on the GPU');
  row(`grpo policy loss + grad (${n} tokens, k3)`, lossCpu, lossGpu, 'DeviceTensor inputs on the GPU');

  // One layer-like training step of the model ops.
  const T = options.rows ?? 512,
    D = options.dim ?? 1024,
    F = 4 * D,
    V = options.vocab ?? 8192;
  const x = random(T * D, 6),
    g = random(D, 7, 0.5, 1.5),
    w1 = random(2 * F * D, 8, -0.02, 0.02),
    w2 = random(D * F, 9, -0.02, 0.02);
  const wv = random(V * D, 10, -0.02, 0.02),
    targets = Int32Array.from({ length: T }, (_, i) => (i * 7919) % V);
  const m = new Float32Array(2 * F * D),
    v = new Float32Array(2 * F * D);
  const step = (device: 'cpu' | 'cuda') => {
    const n1 = rmsnormForward({ x, weight: g, rows: T, dim: D, device });
    const h = linearForward({ x: n1.out, weight: w1, rows: T, inFeatures: D, outFeatures: 2 * F, device });
    const a = swigluForward({ h, rows: T, ffn: F, variant: 'clamped', device });
    const y = linearForward({ x: a, weight: w2, rows: T, inFeatures: F, outFeatures: D, device });
    const logits = linearForward({ x: y, weight: wv, rows: T, inFeatures: D, outFeatures: V, device });
    const ls = logSoftmaxForward({ logits, targets, rows: T, vocab: V, device });
    const dlogits = logSoftmaxBackward({
      logits,
      targets,
      rows: T,
      vocab: V,
      lse: ls.lse,
      dlogp: new Float32Array(T).fill(-1 / T),
      device,
    });
    const gy = linearBackward({
      x: y,
      weight: wv,
      dy: dlogits,
      rows: T,
      inFeatures: D,
      outFeatures: V,
      dbias: null,
      device,
    });
    const ga = linearBackward({
      x: a,
      weight: w2,
      dy: gy.dx!,
      rows: T,
      inFeatures: F,
      outFeatures: D,
      dbias: null,
      device,
    });
    const gh = swigluBackward({ h, dout: ga.dx!, rows: T, ffn: F, variant: 'clamped', device });
    const g1 = linearBackward({
      x: n1.out,
      weight: w1,
      dy: gh,
      rows: T,
      inFeatures: D,
      outFeatures: 2 * F,
      dbias: null,
      device,
    });
    rmsnormBackward({ x, weight: g, rstd: n1.rstd, dy: g1.dx!, rows: T, dim: D, device });
    adamwUpdate({ param: w1, grad: g1.dweight!, m, v, step: 1, lr: 1e-9, device });
  };
  const stepCpu = time(Math.min(repeats, 3), () => step('cpu'));
  const stepGpu = opsGpu ? time(Math.min(repeats, 3), () => step('cuda')) : null;
  row(
    `model-op step (${T} tokens, dim ${D}, ffn ${F}, vocab ${V})`,
    stepCpu,
    stepGpu,
    'Float32Array calls: GPU times include host<->device copies',
  );
  return rows;
}

/** The command line (the arguments after the script): prints one line per stage (or JSON with a bare `--json`; `--json <file>` writes it). */
export function main(argv: readonly string[] = process.argv.slice(2), cli: BenchCliSettings = {}): GpuKernelsRow[] {
  const program = benchProgram(
    'gpu-kernels',
    'GRPO kernels and a model-op training step: GPU timings side by side with the CPU',
    cli,
  )
    .option('--tokens <n>', 'tokens of the GRPO batch (default 1048576; quick: 65536)')
    .option('--rows <n>', 'rows (tokens) of the model-op step (default 512; quick: 128)')
    .option('--dim <n>', 'model width, FFN 4x (default 1024; quick: 256)')
    .option('--vocab <n>', 'vocabulary of the log-softmax (default 8192; quick: 2048)')
    .option('--repeats <n>', 'timed repeats after a warm-up (default 5; quick: 2)');
  type Options = CommonBenchOptions & {
    tokens?: string;
    rows?: string;
    dim?: string;
    vocab?: string;
    repeats?: string;
  };
  const values = parseBench<Options>(program, argv, {
    tokens: '65536',
    rows: '128',
    dim: '256',
    vocab: '2048',
    repeats: '2',
  });
  const num = (s: string | undefined) => (s === undefined ? undefined : Number(s));
  const result = runGpuKernelsBench({
    tokens: num(values.tokens),
    rows: num(values.rows),
    dim: num(values.dim),
    vocab: num(values.vocab),
    repeats: num(values.repeats),
  });
  const log = tableLog(values.json);
  if (!cudaAvailable()) log('gpu kernels: no usable CUDA device, CPU timings only');
  for (const r of result) {
    const gpu = r.gpuMs === null ? 'n/a' : `${r.gpuMs.toFixed(2)} ms`;
    const speed = r.speedup === null ? '' : ` (${r.speedup.toFixed(1)}x)`;
    log(`gpu kernels: ${r.stage}: cpu ${r.cpuMs.toFixed(2)} ms, gpu ${gpu}${speed} — ${r.note}`);
  }
  writeJson(values.json, result);
  return result;
}

runWhenInvoked(import.meta.url, 'gpu-kernels', main);
