#!/usr/bin/env node
/**
 * The built-in transformer on the GPU against the same policy on the CPU, side by side in one
 * run: one training step (forward + backward of packed micro-batches, AdamW with clipping) and
 * one batched sampling run (several sessions: prefill of a prompt, then decoding), with the same
 * seeds on both devices. Also reports how far the GPU's loss is from the CPU's. Without a usable
 * CUDA device (or without the CUDA model kernels) it times the CPU only and says so.
 *
 * Run: `npm run build:ts && node dist/bench/transformer-gpu.js [--model small] [--tokens 2048]
 * [--doc 512] [--sessions 8] [--prompt 64] [--sample 32] [--repeats 2] [--quick] [--json [file]]`.
 */
import { performance } from 'node:perf_hooks';

import { cudaAvailable } from '../lib/native/index.js';
import { type ModelConfig, modelConfig, packSequences, TransformerPolicy } from '../lib/model/index.js';
import { modelAddon } from '../lib/model/native.js';
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

/** Options of {@link runTransformerGpuBench}. */
export interface TransformerGpuBenchOptions {
  /** A preset name or a full config. Default `'small'` (8 layers, width 512) with context 1024. */
  model?: 'tiny' | 'small' | ModelConfig;
  /** Tokens of the training step. Default 2048. */
  tokens?: number;
  /** Tokens per document of the packed step (the last one may be shorter). Default 512. */
  docLength?: number;
  /** Micro-batches the step's tokens are split into. Default 2. */
  microBatches?: number;
  /** Sessions sampling at once. Default 8. */
  sessions?: number;
  /** Prompt tokens per session. Default 64. */
  promptTokens?: number;
  /** Tokens sampled per session. Default 32. */
  sampleTokens?: number;
  /** Timed repeats after one warm-up (the median is reported). Default 2. */
  repeats?: number;
}

/** One timed stage on both devices. */
export interface TransformerGpuRow {
  stage: string;
  cpuMs: number;
  /** null without a usable GPU with the CUDA model kernels. */
  gpuMs: number | null;
  /** cpuMs / gpuMs. */
  speedup: number | null;
  /** Tokens per second on the CPU and on the GPU (null without a GPU). */
  cpuTokensPerSecond: number;
  gpuTokensPerSecond: number | null;
}

/** What {@link runTransformerGpuBench} measured. */
export interface TransformerGpuResult {
  model: string;
  parameters: number;
  rows: TransformerGpuRow[];
  /** |loss_gpu - loss_cpu| / |loss_cpu| of the first (warm-up) step, null without a GPU. */
  lossRelativeDifference: number | null;
  /** Why there are no GPU timings ('' when there are). */
  gpuUnavailable: string;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** A reproducible token stream in [0, vocab). */
function tokensOf(n: number, seed: number, vocab: number): number[] {
  const next = mulberry32(seed);
  return Array.from({ length: n }, () => Math.floor(next() * vocab));
}

/** Times a training step and a sampling run of the same policy on the CPU and (when usable) the GPU. */
export async function runTransformerGpuBench(options: TransformerGpuBenchOptions = {}): Promise<TransformerGpuResult> {
  const name = typeof options.model === 'string' || options.model === undefined ? (options.model ?? 'small') : 'custom';
  const config =
    typeof options.model === 'object' ? options.model : modelConfig(name as 'tiny' | 'small', { context: 1024 });
  const tokens = options.tokens ?? 2048,
    docLength = options.docLength ?? 512,
    micro = options.microBatches ?? 2;
  const sessions = options.sessions ?? 8,
    promptTokens = options.promptTokens ?? 64,
    sampleTokens = options.sampleTokens ?? 32;
  const repeats = options.repeats ?? 2;
  const gpuUnavailable = !cudaAvailable()
    ? 'no usable CUDA device'
    : !modelAddon().modelOpsDevices().includes('cuda')
      ? 'this build has no CUDA model kernels'
      : '';

  // Micro-batches of packed documents (next-token targets), the same on both devices.
  const docs: number[][] = [];
  for (let at = 0, d = 0; at < tokens; d++) {
    const n = Math.min(docLength, config.context, tokens - at);
    docs.push(tokensOf(n, 1000 + d, config.vocab));
    at += n;
  }
  const per = Math.ceil(docs.length / micro);
  const batches = Array.from({ length: Math.ceil(docs.length / per) }, (_, i) =>
    packSequences(docs.slice(i * per, (i + 1) * per).map((t) => ({ tokens: t }))),
  );
  const optimizer = { lr: 1e-4, maxGradNorm: 1 };
  const prompts = Array.from({ length: sessions }, (_, i) => tokensOf(promptTokens, 50 + i, config.vocab));

  const measure = async (device: 'cpu' | 'cuda') => {
    const policy = TransformerPolicy.create(config, { seed: 1, device });
    try {
      const train: number[] = [];
      let firstLoss = Number.NaN;
      for (let r = 0; r <= repeats; r++) {
        const t0 = performance.now();
        const s = await policy.trainStep(batches, { kind: 'cross-entropy' }, { optimizer });
        if (r === 0) firstLoss = s.loss;
        else train.push(performance.now() - t0);
      }
      const sample: number[] = [];
      for (let r = 0; r <= repeats; r++) {
        const t0 = performance.now();
        await policy.generate(
          prompts.map((prompt, i) => ({ prompt, maxTokens: sampleTokens, temperature: 1, seed: 7 + i })),
        );
        if (r > 0) sample.push(performance.now() - t0);
      }
      return { trainMs: median(train), sampleMs: median(sample), firstLoss, parameters: policy.model.store.numel };
    } finally {
      policy.dispose();
    }
  };

  const cpu = await measure('cpu');
  const gpu = gpuUnavailable === '' ? await measure('cuda') : null;
  const row = (stage: string, cpuMs: number, gpuMs: number | null, n: number): TransformerGpuRow => ({
    stage,
    cpuMs,
    gpuMs,
    speedup: gpuMs === null ? null : cpuMs / gpuMs,
    cpuTokensPerSecond: (n * 1000) / cpuMs,
    gpuTokensPerSecond: gpuMs === null ? null : (n * 1000) / gpuMs,
  });
  return {
    model: `${name} (${config.layers} layers, width ${config.width}, vocab ${config.vocab})`,
    parameters: cpu.parameters,
    rows: [
      row(
        `train step (${tokens} tokens in ${batches.length} micro-batches, AdamW)`,
        cpu.trainMs,
        gpu?.trainMs ?? null,
        tokens,
      ),
      row(
        `sampling (${sessions} sessions: ${promptTokens}-token prompt + ${sampleTokens} tokens)`,
        cpu.sampleMs,
        gpu?.sampleMs ?? null,
        sessions * sampleTokens,
      ),
    ],
    lossRelativeDifference: gpu === null ? null : Math.abs(gpu.firstLoss - cpu.firstLoss) / Math.abs(cpu.firstLoss),
    gpuUnavailable,
  };
}

/** One line: the two stages on both devices. */
export function formatTransformerGpu(r: TransformerGpuResult): string {
  const parts = r.rows.map((x) => {
    const gpu = x.gpuMs === null ? 'gpu n/a' : `gpu ${x.gpuMs.toFixed(1)} ms (${x.speedup!.toFixed(1)}x)`;
    return `${x.stage}: cpu ${x.cpuMs.toFixed(1)} ms, ${gpu}`;
  });
  const note = r.gpuUnavailable
    ? ` — ${r.gpuUnavailable}, CPU only`
    : ` — loss gpu vs cpu ${r.lossRelativeDifference!.toExponential(1)} relative`;
  return `transformer gpu: ${r.model}, ${(r.parameters / 1e6).toFixed(1)}M parameters; ${parts.join('; ')}${note}`;
}

/** The command line (the arguments after the script): prints one line (or JSON with a bare `--json`; `--json <file>` writes it). */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<TransformerGpuResult> {
  const program = benchProgram(
    'transformer-gpu',
    'the built-in transformer on the GPU vs the CPU: a training step and a sampling run',
    cli,
  )
    .option('--model <preset>', "'tiny' or 'small' (default small; quick: tiny)")
    .option('--tokens <n>', 'tokens of the training step (default 2048; quick: 256)')
    .option('--doc <n>', 'tokens per packed document (default 512; quick: 128)')
    .option('--sessions <n>', 'sessions sampling at once (default 8; quick: 2)')
    .option('--prompt <n>', 'prompt tokens per session (default 64; quick: 16)')
    .option('--sample <n>', 'tokens sampled per session (default 32; quick: 8)')
    .option('--repeats <n>', 'timed repeats after a warm-up (default 2; quick: 1)');
  type Options = CommonBenchOptions & {
    model?: string;
    tokens?: string;
    doc?: string;
    sessions?: string;
    prompt?: string;
    sample?: string;
    repeats?: string;
  };
  const values = parseBench<Options>(program, argv, {
    model: 'tiny',
    tokens: '256',
    doc: '128',
    sessions: '2',
    prompt: '16',
    sample: '8',
    repeats: '1',
  });
  const num = (s: string | undefined) => (s === undefined ? undefined : Number(s));
  if (values.model !== undefined && values.model !== 'tiny' && values.model !== 'small')
    throw new RangeError(`--model must be 'tiny' or 'small', got '${values.model}'`);
  const r = await runTransformerGpuBench({
    model: values.model as 'tiny' | 'small' | undefined,
    tokens: num(values.tokens),
    docLength: num(values.doc),
    sessions: num(values.sessions),
    promptTokens: num(values.prompt),
    sampleTokens: num(values.sample),
    repeats: num(values.repeats),
  });
  tableLog(values.json)(formatTransformerGpu(r));
  writeJson(values.json, r);
  return r;
}

runWhenInvoked(import.meta.url, 'transformer-gpu', main);
