/**
 * `sinkflex bench gpt-oss-20b`: gpt-oss-20b at its real shape on the CPU, and a memory plan.
 *
 * 1. Writes a random checkpoint with gpt-oss-20b's config.json and tensor layout (24 layers,
 *    hidden 2880, 64/8 heads of 64, 32 experts top-4 of 2880, vocabulary 201,088, alternating
 *    128-token window, YaRN; MXFP4 experts: about 13.8 GB) to a temporary folder, streamed one
 *    tensor at a time (removed afterwards unless `--keep`); each tensor repeats a random chunk of
 *    2^20 elements, as the values do not change what is measured.
 * 2. Loads it (`loadPretrained`, MXFP4 experts kept packed, fresh LoRA adapters of rank 16 on
 *    the attention projections): load time, resident growth (VmRSS) ÷ checkpoint bytes, tracked
 *    bytes.
 * 3. At each length (default 1,024 and 2,048 tokens, then a third, shorter length that checks the
 *    memory line), on one random sequence: (a) log-probs, (b) one LoRA SFT step (forward,
 *    backward, AdamW), (c) one GRPO policy step (old log-probs, reference log-probs — a second
 *    log-prob pass, the cost of the base-model reference of a LoRA run —, the clipped policy loss
 *    with a KL term, backward, AdamW). Per phase: wall time, tokens/s, the tracked peak above the
 *    loaded model, and the process's peak RSS (VmHWM, reset before each phase through
 *    /proc/self/clear_refs where the kernel allows it).
 * 4. The memory plan: per phase, the tracked peak above the model as fixed + per-token terms
 *    fitted through the first two lengths (the third length is checked against the line), plus
 *    the store's bytes, at 4,096…65,536 tokens; for the CPU and for one GPU. The GPU column uses
 *    the CUDA store's sizes (a CUDA ParamStore holds the same bytes per element as a CPU one:
 *    float32 4, bfloat16 2, MXFP4 17/32, 12 more per trainable element) and the same activation
 *    line (the CUDA transformer keeps the same float32 activations per layer); it leaves out the
 *    CUDA context and allocator slack.
 *
 * The JSON is rewritten after every phase, so an interrupted run keeps what it measured. Before
 * the real shape runs, MemAvailable must be at least `--min-available` GiB (default 18). Time
 * numbers depend on the machine's load (printed); memory numbers do not.
 *
 * Run: `sinkflex bench gpt-oss-20b [--lengths 1024,2048] [--check-length 512] [--json file]`.
 * @module
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import { policyLoss } from '../lib/grpo/index.js';
import {
  type ActivationCheckpointing,
  type LoraTarget,
  type PretrainedModel,
  type Transformer,
  loadPretrained,
  packSequences,
} from '../lib/model/index.js';
import { isOutOfMemoryError, memory } from '../lib/native/index.js';
import {
  benchProgram,
  commandLine,
  parseBench,
  runWhenInvoked,
  type BenchCliSettings,
  type CommonBenchOptions,
} from './common/cli.js';
import { memoryChart, type ChartPoint } from './common/chart.js';
import { parseGiB, parseIntList } from './common/options.js';
import { gptOssConfig, writeRandomHfCheckpoint, type GptOssShape } from './common/random-hf-checkpoint.js';
import {
  GiB,
  type MachineInfo,
  collectGarbage,
  fmtBytes,
  machineInfo,
  markdownTable,
  svgPathFor,
} from './common/util.js';

/** gpt-oss-20b's shape. */
export const GPT_OSS_20B: GptOssShape = {
  hidden: 2880,
  layers: 24,
  heads: 64,
  kvHeads: 8,
  headDim: 64,
  intermediate: 2880,
  vocab: 201088,
  experts: 32,
  topK: 4,
};
/** The scaled shape of `--quick` (same structure, toy sizes). */
export const GPT_OSS_QUICK: GptOssShape = {
  hidden: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 16,
  intermediate: 64,
  vocab: 512,
  experts: 4,
  topK: 2,
};

/** The phases measured at each length. */
export type Phase = 'logprobs' | 'sft' | 'grpo';
const PHASES: readonly Phase[] = ['logprobs', 'sft', 'grpo'];

/** Options of {@link runGptOss20bBench}. */
export interface GptOss20bBenchOptions {
  /** The model shape (default gpt-oss-20b). */
  shape?: GptOssShape;
  /** Lengths measured, the first two fit the memory line (default [1024, 2048]). */
  lengths?: number[];
  /** A third length checked against the line (default 512; 0: none). */
  checkLength?: number;
  /** Phases (default all three). */
  phases?: Phase[];
  /** Lengths of the memory plan (default 4096…65536). */
  planLengths?: number[];
  /** LoRA rank on q/k/v/o (default 16). */
  loraRank?: number;
  /** Activation checkpointing of the loaded model (default 'layers'; the LM head is chunked either way). */
  activationCheckpointing?: ActivationCheckpointing;
  /** Folder for the temporary checkpoint (default the OS temporary folder). */
  dir?: string;
  /** Keep the checkpoint (default false). */
  keep?: boolean;
  /** Refuse to start below this MemAvailable (default 18 GiB; 0 for none). */
  minAvailableBytes?: number;
  /** Tracked limit during the phases (default MemAvailable at the start minus 1 GiB). */
  limitBytes?: number;
  /** Rewrite this JSON file after every phase. */
  jsonPath?: string;
  /** The command line, recorded in the JSON. */
  command?: string;
  /** Progress lines (default console.log). */
  log?: (line: string) => void;
}

/** The load measurement. */
export interface LoadPoint {
  checkpointBytes: number;
  writeSeconds: number;
  loadSeconds: number;
  /** VmRSS after minus before the load (after a garbage collection). */
  residentGrowthBytes: number;
  /** residentGrowthBytes / checkpointBytes. */
  residentRatio: number;
  /** The parameter store's bytes (packed experts, bf16 matrices, float32 vectors, LoRA with gradients and moments). */
  storeBytes: number;
  /** Tracked bytes held after the load. */
  trackedBytes: number;
  /** Peak RSS of the process by the end of the load. */
  vmHwmBytes: number;
}

/** One phase at one length. */
export interface PhasePoint {
  phase: Phase;
  tokens: number;
  status: 'ok' | 'oom';
  seconds: number | null;
  tokensPerSecond: number | null;
  /** Process CPU seconds (user + system) of the phase: on a shared machine, tokens / (cpuSeconds / threads) is the rate its own cores would give. */
  cpuSeconds: number | null;
  /** tokens / (cpuSeconds / threads). */
  cpuTokensPerSecond: number | null;
  /** Tracked peak above what the loaded model holds (activations, logits, workspaces). */
  trackedPeakAboveModelBytes: number | null;
  /** Tracked peak in all (model included). */
  trackedPeakBytes: number | null;
  /** Peak RSS (VmHWM) during the phase (since the process started when it could not be reset). */
  vmHwmBytes: number;
  /** Whether VmHWM was reset before the phase. */
  vmHwmReset: boolean;
  /** Out of memory: the error (bytes held and asked). */
  note?: string;
}

/** The memory line of one phase and its plan. */
export interface PlanRow {
  phase: Phase;
  /** Tracked bytes above the model: fixed + perToken · T, through the first two lengths. */
  fixedBytes: number;
  perTokenBytes: number;
  /** The third length: measured vs predicted (relative error). */
  check: { tokens: number; measuredBytes: number; predictedBytes: number; relativeError: number } | null;
  /** Per plan length: CPU and one-GPU totals (model store + line). */
  points: { tokens: number; cpuBytes: number; gpuBytes: number }[];
}

/** Everything one run measured. */
export interface GptOss20bBenchResult {
  bench: 'gpt-oss-20b';
  date: string;
  machine: MachineInfo;
  shape: GptOssShape;
  config: Record<string, unknown>;
  lora: { rank: number; alpha: number; targets: LoraTarget[] };
  /** Which memory savers the build had (activation checkpointing, chunked LM head). */
  features: string[];
  limitBytes: number;
  memAvailableAtStartBytes: number;
  load: LoadPoint | null;
  phases: PhasePoint[];
  plan: PlanRow[];
  /** The store's bytes on a GPU (the CUDA store's sizes). */
  gpuStoreBytes: number | null;
  /** What was not measured and why. */
  notMeasured: string[];
  loadAverageAfter: number;
  markdown: string;
}

/** Fields of /proc/self/status in bytes (0 where unavailable). */
function procStatus(): { rss: number; hwm: number } {
  try {
    const s = readFileSync('/proc/self/status', 'utf8');
    const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? 0) * 1024;
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return { rss: 0, hwm: 0 };
  }
}

/** Resets VmHWM to the current RSS (Linux: `5` to clear_refs); false where not allowed. */
function resetHwm(): boolean {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

/** MemAvailable in bytes (Infinity where unknown). */
export function memAvailable(): number {
  try {
    const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
    return m ? Number(m[1]) * 1024 : Infinity;
  } catch {
    return Infinity;
  }
}

/** A random sequence of `n` tokens (seeded). */
function randomSequence(n: number, vocab: number, seed: number): number[] {
  let s = seed >>> 0 || 1;
  return Array.from({ length: n }, () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s % vocab;
  });
}

/** One phase's work on `model` (synchronous native calls under the tracked limit). */
function runPhase(
  phase: Phase,
  model: Transformer,
  n: number,
  vocab: number,
  seed: number,
  checkpointing: ActivationCheckpointing,
): void {
  const batch = packSequences([{ tokens: randomSequence(n, vocab, seed) }]);
  const scored = batch.targets.filter((x) => x >= 0).length;
  if (phase === 'logprobs') {
    model.logProbs(batch);
    return;
  }
  if (phase === 'sft') {
    const f = model.forward(batch, { activationCheckpointing: checkpointing });
    try {
      f.backward({ dLogProbs: Float32Array.from(batch.targets, (x) => (x >= 0 ? -1 / scored : 0)) });
    } finally {
      f.release();
    }
  } else {
    const old = model.logProbs(batch);
    const ref = model.logProbs(batch);
    const f = model.forward(batch, { activationCheckpointing: checkpointing });
    try {
      const mask = Float32Array.from(batch.targets, (x) => (x >= 0 ? 1 : 0));
      const advantages = Float32Array.from(batch.targets, (_, i) => ((i * 2654435761) % 1000) / 500 - 1);
      const loss = policyLoss(
        { logProbs: f.logProbs, oldLogProbs: old.logProbs, advantages, responseMask: mask, refLogProbs: ref.logProbs },
        { batch: 1, responseLen: n },
        { klCoef: 0.001, klType: 'low_var_kl', aggMode: 'token-mean' },
      );
      f.backward({ dLogProbs: loss.dLogProbs });
    } finally {
      f.release();
    }
  }
  model.store.adamwStep({ lr: 1e-5, maxGradNorm: 1 });
  model.store.zeroGrad();
}

function fmtRate(p: PhasePoint): string {
  return p.tokensPerSecond === null ? '—' : p.tokensPerSecond.toFixed(1);
}

/** Fits the memory line of each phase and projects it (see the module notes). */
export function memoryPlan(
  phases: readonly PhasePoint[],
  lengths: readonly number[],
  checkLength: number,
  planLengths: readonly number[],
  storeBytes: number,
  gpuStoreBytes: number,
): PlanRow[] {
  const rows: PlanRow[] = [];
  for (const phase of PHASES) {
    const at = (n: number) => phases.find((p) => p.phase === phase && p.tokens === n && p.status === 'ok');
    const fitted = lengths.map(at).filter((p): p is PhasePoint => p !== undefined);
    if (fitted.length < 2) continue;
    const [a, b] = fitted;
    const perTokenBytes = (b.trackedPeakAboveModelBytes! - a.trackedPeakAboveModelBytes!) / (b.tokens - a.tokens);
    const fixedBytes = a.trackedPeakAboveModelBytes! - perTokenBytes * a.tokens;
    const c = checkLength > 0 ? at(checkLength) : undefined;
    const check = c
      ? (() => {
          const predictedBytes = fixedBytes + perTokenBytes * c.tokens;
          return {
            tokens: c.tokens,
            measuredBytes: c.trackedPeakAboveModelBytes!,
            predictedBytes,
            relativeError: (c.trackedPeakAboveModelBytes! - predictedBytes) / c.trackedPeakAboveModelBytes!,
          };
        })()
      : null;
    const points = planLengths.map((tokens) => ({
      tokens,
      cpuBytes: storeBytes + fixedBytes + perTokenBytes * tokens,
      gpuBytes: gpuStoreBytes + fixedBytes + perTokenBytes * tokens,
    }));
    rows.push({ phase, fixedBytes, perTokenBytes, check, points });
  }
  return rows;
}

const GB = 1e9;
const gb = (b: number): string =>
  Math.abs(b) >= 0.1 * GB ? `${(b / GB).toFixed(2)} GB` : `${(b / 1e6).toFixed(1)} MB`;

function markdown(r: Omit<GptOss20bBenchResult, 'markdown'>): string {
  const md: string[] = [];
  if (r.features.length) md.push(`Memory savers: ${r.features.join(', ')}.`, '');
  if (r.load) {
    const l = r.load;
    md.push(
      markdownTable(
        ['checkpoint', 'write s', 'load s', 'resident growth', 'growth ÷ checkpoint', 'store', 'peak RSS after load'],
        [
          [
            gb(l.checkpointBytes),
            l.writeSeconds.toFixed(0),
            l.loadSeconds.toFixed(0),
            gb(l.residentGrowthBytes),
            l.residentRatio.toFixed(3),
            gb(l.storeBytes),
            gb(l.vmHwmBytes),
          ],
        ],
      ),
      '',
    );
  }
  if (r.phases.length) {
    md.push(
      markdownTable(
        [
          'phase',
          'tokens',
          'time s',
          'tokens/s',
          'CPU s',
          `tokens/s on ${r.machine.threads} own cores`,
          'tracked peak above model',
          'tracked peak',
          'peak RSS (VmHWM)',
        ],
        r.phases.map((p) => [
          p.phase,
          String(p.tokens),
          p.seconds === null ? (p.status === 'oom' ? 'OOM' : '—') : p.seconds.toFixed(1),
          fmtRate(p),
          p.cpuSeconds === null ? '—' : p.cpuSeconds.toFixed(0),
          p.cpuTokensPerSecond === null ? '—' : p.cpuTokensPerSecond.toFixed(1),
          p.trackedPeakAboveModelBytes === null ? '—' : gb(p.trackedPeakAboveModelBytes),
          p.trackedPeakBytes === null ? '—' : gb(p.trackedPeakBytes),
          `${gb(p.vmHwmBytes)}${p.vmHwmReset ? '' : ' (since start)'}`,
        ]),
      ),
      '',
    );
  }
  for (const row of r.plan) {
    md.push(
      `Memory plan, ${row.phase}: ${gb(row.fixedBytes)} + ${(row.perTokenBytes / 1e6).toFixed(3)} MB/token above the model${row.check ? `; at ${row.check.tokens} tokens measured ${gb(row.check.measuredBytes)}, line ${gb(row.check.predictedBytes)} (${(row.check.relativeError * 100).toFixed(1)}%)` : ''}`,
      '',
    );
    md.push(
      markdownTable(
        ['tokens', ...row.points.map((p) => String(p.tokens))],
        [
          ['CPU', ...row.points.map((p) => gb(p.cpuBytes))],
          ['one GPU', ...row.points.map((p) => gb(p.gpuBytes))],
        ],
      ),
      '',
    );
  }
  if (r.notMeasured.length) md.push(`Not measured: ${r.notMeasured.join('; ')}`, '');
  return md.join('\n');
}

/** The chart: measured tracked peaks per phase and the plans (CPU and one GPU). */
export function gptOss20bChart(r: GptOss20bBenchResult): string {
  const points: ChartPoint[] = [];
  for (const p of r.phases) points.push({ series: `measured ${p.phase}`, seqLen: p.tokens, bytes: p.trackedPeakBytes });
  for (const row of r.plan) {
    for (const p of row.points) {
      points.push({ series: `plan CPU ${row.phase}`, seqLen: p.tokens, bytes: p.cpuBytes });
      points.push({ series: `plan GPU ${row.phase}`, seqLen: p.tokens, bytes: p.gpuBytes });
    }
  }
  return memoryChart(
    points,
    `gpt-oss-${r.shape.layers === 24 ? '20b' : 'scaled'} (MXFP4 packed, LoRA r${r.lora.rank}): tracked peak and plan`,
    r.limitBytes,
    'tracked bytes',
  );
}

/** Runs the benchmark (see the module notes). */
export async function runGptOss20bBench(options: GptOss20bBenchOptions = {}): Promise<GptOss20bBenchResult> {
  const log = options.log ?? ((l: string) => console.log(l));
  const shape = options.shape ?? GPT_OSS_20B;
  const lengths = options.lengths ?? [1024, 2048];
  const checkLength = options.checkLength ?? 512;
  const phases = options.phases ?? [...PHASES];
  const planLengths = options.planLengths ?? [4096, 8192, 16384, 32768, 65536];
  const rank = options.loraRank ?? 16;
  if (lengths.length < 1 || lengths.some((n) => !Number.isInteger(n) || n < 2))
    throw new RangeError('lengths must be integers >= 2');
  const available = memAvailable();
  const minAvailable = options.minAvailableBytes ?? 18 * GiB;
  if (available < minAvailable)
    throw new RangeError(
      `MemAvailable is ${fmtBytes(available)}, below the ${fmtBytes(minAvailable)} this run needs (--min-available)`,
    );
  const limitBytes = options.limitBytes ?? (Number.isFinite(available) ? available - GiB : 16 * GiB);
  const lora: { rank: number; alpha: number; targets: LoraTarget[] } = {
    rank,
    alpha: 2 * rank,
    targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
  };
  const config = gptOssConfig(shape);
  const machine = machineInfo();
  const checkpointing = options.activationCheckpointing ?? 'layers';
  const features: string[] = ['chunked LM head', `activation checkpointing: ${checkpointing}`];
  const notMeasured: string[] = [];
  const measured: PhasePoint[] = [];
  let load: LoadPoint | null = null;
  let storeBytes = 0;
  let gpuStoreBytes: number | null = null;
  const result = (): GptOss20bBenchResult => {
    const plan = load
      ? memoryPlan(measured, lengths, checkLength, planLengths, storeBytes, gpuStoreBytes ?? storeBytes)
      : [];
    const partial = {
      bench: 'gpt-oss-20b' as const,
      date: new Date().toISOString(),
      machine,
      shape,
      config,
      lora,
      features,
      limitBytes,
      memAvailableAtStartBytes: available,
      load,
      phases: [...measured],
      plan,
      gpuStoreBytes,
      notMeasured: [...notMeasured],
      loadAverageAfter: machineInfo().loadAverage,
    };
    return { ...partial, markdown: markdown(partial) };
  };
  const save = (): void => {
    if (!options.jsonPath) return;
    const r = result();
    writeFileSync(
      options.jsonPath,
      `${JSON.stringify(options.command !== undefined ? { command: options.command, ...r } : r, null, 2)}\n`,
    );
    writeFileSync(svgPathFor(options.jsonPath), gptOss20bChart(r));
  };
  log(
    `gpt-oss-20b benchmark — ${machine.cpu}, ${machine.threads} threads, load average ${machine.loadAverage.toFixed(2)}; MemAvailable ${fmtBytes(available)}, tracked limit ${fmtBytes(limitBytes)}`,
  );

  const dir = mkdtempSync(join(options.dir ?? tmpdir(), 'sinkflex-gpt-oss-20b-'));
  let model: PretrainedModel | null = null;
  try {
    let t0 = performance.now();
    const ck = await writeRandomHfCheckpoint(dir, config, { mxfp4: true, seed: 20, tile: true });
    const writeSeconds = (performance.now() - t0) / 1000;
    const checkpointBytes = statSync(join(dir, 'model.safetensors')).size;
    log(
      `checkpoint written: ${gb(checkpointBytes)} (${gb(ck.mxfp4Bytes)} MXFP4 experts) in ${writeSeconds.toFixed(0)} s`,
    );
    await collectGarbage();
    const before = procStatus();
    const trackedBefore = memory.currentBytes();
    t0 = performance.now();
    model = await loadPretrained(dir, {
      lora,
      maxPositions: Math.max(...lengths, checkLength, 256),
      mxfp4: 'packed',
      activationCheckpointing: checkpointing,
    });
    const loadSeconds = (performance.now() - t0) / 1000;
    await collectGarbage();
    const after = procStatus();
    storeBytes = model.params.bytes;
    gpuStoreBytes = storeBytes; // the CUDA store's sizes per dtype are the CPU store's (see the module notes)
    load = {
      checkpointBytes,
      writeSeconds,
      loadSeconds,
      residentGrowthBytes: after.rss - before.rss,
      residentRatio: (after.rss - before.rss) / checkpointBytes,
      storeBytes,
      trackedBytes: memory.currentBytes() - trackedBefore,
      vmHwmBytes: after.hwm,
    };
    log(
      `loaded in ${loadSeconds.toFixed(0)} s: resident +${gb(load.residentGrowthBytes)} = ${load.residentRatio.toFixed(3)} × the checkpoint; store ${gb(storeBytes)}`,
    );
    save();
    if (!options.keep) {
      rmSync(dir, { recursive: true, force: true }); // the model is in memory now: free the disk (and its page cache)
    }

    const transformer = model.policy.model;
    const vocab = shape.vocab;
    const order = [...lengths, ...(checkLength > 0 && !lengths.includes(checkLength) ? [checkLength] : [])];
    for (const n of order) {
      for (const phase of phases) {
        await collectGarbage();
        const base = memory.currentBytes();
        memory.resetPeak();
        const reset = resetHwm();
        const p: PhasePoint = {
          phase,
          tokens: n,
          status: 'ok',
          seconds: null,
          tokensPerSecond: null,
          cpuSeconds: null,
          cpuTokensPerSecond: null,
          trackedPeakAboveModelBytes: null,
          trackedPeakBytes: null,
          vmHwmBytes: 0,
          vmHwmReset: reset,
        };
        const start = performance.now();
        const cpu0 = process.cpuUsage();
        try {
          memory.withLimit(limitBytes, () =>
            runPhase(phase, transformer, n, vocab, n + PHASES.indexOf(phase), checkpointing),
          );
          p.seconds = (performance.now() - start) / 1000;
          p.tokensPerSecond = n / p.seconds;
          const cpu = process.cpuUsage(cpu0);
          p.cpuSeconds = (cpu.user + cpu.system) / 1e6;
          p.cpuTokensPerSecond = n / (p.cpuSeconds / machine.threads);
          p.trackedPeakBytes = memory.peakBytes();
          p.trackedPeakAboveModelBytes = p.trackedPeakBytes - base;
        } catch (e) {
          if (!isOutOfMemoryError(e)) throw e;
          transformer.store.zeroGrad();
          p.status = 'oom';
          p.note = e.message;
        }
        p.vmHwmBytes = procStatus().hwm;
        measured.push(p);
        log(
          `${phase.padEnd(8)} ${String(n).padStart(6)} tokens: ${p.status === 'ok' ? `${p.seconds!.toFixed(1)} s (CPU ${p.cpuSeconds!.toFixed(0)} s), ${fmtRate(p)} tokens/s, tracked peak ${gb(p.trackedPeakBytes!)} (+${gb(p.trackedPeakAboveModelBytes!)} above the model)` : `out of memory: ${p.note}`}, VmHWM ${gb(p.vmHwmBytes)}`,
        );
        save();
      }
    }
  } finally {
    model?.dispose();
    if (!options.keep) rmSync(dir, { recursive: true, force: true });
  }
  const r = result();
  save();
  log('');
  log(r.markdown);
  return r;
}

/** The command line (arguments after the script or `sinkflex bench gpt-oss-20b`). */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<GptOss20bBenchResult> {
  const program = benchProgram(
    'gpt-oss-20b',
    'gpt-oss-20b at its real shape (random MXFP4 checkpoint, ~13.8 GB): load, log-probs, LoRA SFT and GRPO steps on the CPU, and a memory plan for the CPU and one GPU',
    cli,
  )
    .option('--lengths <list>', 'sequence lengths; the first two fit the memory line (quick: 32,64)', '1024,2048')
    .option('--check-length <n>', 'a third length checked against the line (0: none; quick: 16)', '512')
    .option('--phases <list>', 'phases: logprobs, sft, grpo', 'logprobs,sft,grpo')
    .option('--plan <list>', 'lengths of the memory plan', '4096,8192,16384,32768,65536')
    .option('--rank <n>', 'LoRA rank on q/k/v/o', '16')
    .option('--checkpointing <mode>', 'activation checkpointing: none or layers', 'layers')
    .option('--dir <folder>', 'where to write the temporary checkpoint (default: the OS temporary folder)')
    .option('--keep', 'keep the checkpoint')
    .option('--min-available <GiB>', 'refuse to start below this MemAvailable (quick: 0)', '18')
    .option('--limit <GiB>', 'tracked memory limit of the phases (default: MemAvailable − 1 GiB)');
  const o = parseBench<
    CommonBenchOptions & {
      lengths: string;
      checkLength: string;
      phases: string;
      plan: string;
      rank: string;
      checkpointing: string;
      dir?: string;
      keep?: boolean;
      minAvailable: string;
      limit?: string;
    }
  >(program, argv, { lengths: '32,64', checkLength: '16', minAvailable: '0' });
  const phases = o.phases.split(',').map((s) => s.trim());
  for (const p of phases)
    if (!PHASES.includes(p as Phase))
      throw new RangeError(`--phases: unknown phase '${p}' (known: ${PHASES.join(', ')})`);
  const checkLength = Number(o.checkLength);
  if (!Number.isInteger(checkLength) || checkLength < 0)
    throw new RangeError(`--check-length must be a non-negative integer, got '${o.checkLength}'`);
  const rank = Number(o.rank);
  if (!Number.isInteger(rank) || rank < 1) throw new RangeError(`--rank must be a positive integer, got '${o.rank}'`);
  if (o.checkpointing !== 'none' && o.checkpointing !== 'layers')
    throw new RangeError(`--checkpointing must be none or layers, got '${o.checkpointing}'`);
  const jsonPath = typeof o.json === 'string' ? o.json : undefined;
  const result = await runGptOss20bBench({
    activationCheckpointing: o.checkpointing,
    shape: o.quick ? GPT_OSS_QUICK : GPT_OSS_20B,
    lengths: parseIntList('--lengths', o.lengths),
    checkLength,
    phases: phases as Phase[],
    planLengths: parseIntList('--plan', o.plan),
    loraRank: rank,
    ...(o.dir !== undefined ? { dir: o.dir } : {}),
    keep: o.keep === true,
    minAvailableBytes: Number(o.minAvailable) === 0 ? 0 : parseGiB('--min-available', o.minAvailable),
    ...(o.limit !== undefined ? { limitBytes: parseGiB('--limit', o.limit) } : {}),
    ...(jsonPath !== undefined ? { jsonPath } : {}),
    command: commandLine(program, argv),
    ...(o.json === true ? { log: () => undefined } : {}),
  });
  if (o.json === true) console.log(JSON.stringify({ command: commandLine(program, argv), ...result }, null, 2));
  else if (jsonPath) console.log(`\nwrote ${jsonPath} and ${svgPathFor(jsonPath)}`);
  return result;
}

runWhenInvoked(import.meta.url, 'gpt-oss-20b', main);
