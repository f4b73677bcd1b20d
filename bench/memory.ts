/**
 * `sinkflex bench memory`: the paper's memory table. Peak tracked memory (the native
 * allocator's counters; on CUDA the device's) of
 *
 * 1. the attention path, forward + backward at one layer shape (default gpt-oss-20b: 64 query
 *    heads, 8 kv heads, headDim 64; its layers alternate a 128-key window and full causal, so
 *    both masks are measured), inputs, outputs and gradients included;
 * 2. a whole training step (forward, backward, AdamW) of the built-in transformer on one
 *    sequence, parameters + gradients + AdamW moments counted apart from the activations;
 *
 * for eager and fused attention side by side, over sequence lengths, under one memory limit
 * (default: the device's memory — on the CPU two thirds of the RAM — or `limitBytes`). Past the
 * limit the allocator throws and the row says out of memory, with the bytes held plus the failed
 * request as a measured lower bound of the need. Every number is measured by running the real
 * computation; points whose estimated work exceeds `maxGflop` are skipped (and say so), except
 * where the shorter point of the same series already shows the allocation will fail first.
 *
 * Run: `sinkflex bench memory [options]` or `node dist/bench/memory.js [options]`.
 */
import { totalmem } from 'node:os';

import type { AttentionImpl } from '../lib/attention/index.js';
import { Transformer } from '../lib/model/index.js';
import { backends, memory } from '../lib/native/index.js';
import { mulberry32 } from '../lib/util/random.js';
import { runAttentionGpuBench } from './attention-gpu.js';
import { measureAttentionMemory, visiblePairs, type BenchMask } from './attention.js';
import {
  benchProgram,
  commandLine,
  parseBench,
  runWhenInvoked,
  writeJson,
  type BenchCliSettings,
  type CommonBenchOptions,
} from './common/cli.js';
import { memoryChart, type ChartPoint } from './common/chart.js';
import {
  type AttentionLayerShape,
  attentionShape,
  memorySchema,
  parseGiB,
  parseIntList,
  parseNames,
  parsePositive,
  parsePositiveInt,
  validateOptions,
} from './common/options.js';
import { type BenchModel, BENCH_MODELS, benchModelConfig, measureTrainStep, stepGflop } from './common/train-step.js';
import {
  type MachineInfo,
  type Summary,
  collectGarbage,
  fmtBytes,
  fmtSummary,
  machineInfo,
  markdownTable,
  summarize,
  writeBenchFiles,
} from './common/util.js';

/** Options of {@link runMemoryBench}. */
export interface MemoryBenchOptions {
  /** Attention layer shape (default gpt-oss-20b: 64/8 heads, headDim 64, window 128). */
  shape?: AttentionLayerShape;
  /** Masks of the attention path (default both: gpt-oss alternates them). */
  masks?: BenchMask[];
  /** Sequence lengths of the attention path (default 1024…65536, powers of two). */
  attentionSeqLens?: number[];
  /** Sequence lengths of the training step (default 1024…32768). */
  stepSeqLens?: number[];
  /** Models of the training-step table (default `small`). */
  models?: BenchModel[];
  /** Layers of the models (default: the preset's; `gpt-oss` 2). */
  layers?: number;
  /** Tracked-memory limit in bytes (default: the device's memory; on the CPU 2/3 of the RAM). */
  limitBytes?: number;
  /** Points estimated above this many GFLOP are skipped (default 2000). */
  maxGflop?: number;
  /** Repetitions of every point (default 1; the peak is the largest, the time median/min/max). */
  repeats?: number;
  /** Seed of the random inputs (default 1). */
  seed?: number;
  /** `cpu` (default) or `cuda` (attention path on the GPU through the CUDA benchmark; the model trains on the CPU only). */
  device?: 'cpu' | 'cuda';
  /** Progress lines (default console.log); null is silent. */
  log?: ((line: string) => void) | null;
}

/** How a point ended. */
export type PointStatus = 'ok' | 'oom' | 'skipped';

/** One attention-path measurement. */
export interface AttentionMemoryPoint {
  mask: BenchMask;
  seqLen: number;
  impl: AttentionImpl;
  status: PointStatus;
  /** Peak tracked bytes of forward+backward, inputs, outputs and gradients included (null unless ok). */
  peakBytes: number | null;
  /** Wall time of forward+backward per repetition (null unless ok). */
  ms: Summary | null;
  /** Estimated GFLOP of the point. */
  gflop: number;
  /** When out of memory: bytes held + the failed request, a measured lower bound of the need. */
  oomNeedBytes?: number;
  /** Why it was skipped, or the out-of-memory message. */
  note?: string;
}

/** One training-step measurement. */
export interface StepMemoryPoint {
  model: BenchModel;
  seqLen: number;
  impl: AttentionImpl;
  status: PointStatus;
  /** Parameters, gradients and AdamW moments (allocated before the step). */
  stateBytes: number;
  /** Peak above the state during the step (null unless ok). */
  activationPeakBytes: number | null;
  /** stateBytes + activationPeakBytes (null unless ok). */
  totalPeakBytes: number | null;
  ms: Summary | null;
  gflop: number;
  /** When out of memory: a measured lower bound of the activation need. */
  oomNeedBytes?: number;
  note?: string;
}

/** Eager vs fused at one point. */
export interface Comparison {
  /** `attention/<mask>` or `step/<model>`. */
  what: string;
  seqLen: number;
  /** eager peak / fused peak (whole step: total peaks); a lower bound when eager ran out of memory. */
  ratio: number | null;
  /** 1 − fused / eager of the total peak. */
  reduction: number | null;
  /** True when eager ran out of memory and the numbers are lower bounds from its need. */
  lowerBound: boolean;
}

/** Everything one run measured. */
export interface MemoryBenchResult {
  bench: 'memory';
  date: string;
  machine: MachineInfo;
  device: string;
  limitBytes: number;
  shape: AttentionLayerShape;
  attention: AttentionMemoryPoint[];
  steps: {
    model: BenchModel;
    parameters: number;
    stateBytes: number;
    config: Record<string, unknown>;
    points: StepMemoryPoint[];
  }[];
  comparisons: Comparison[];
  /** Longest sequence that fitted, per series (`fused attention/window`, …). */
  longestFit: Record<string, number | null>;
  targets: { name: string; value: string; met: boolean }[];
  /** The tables as Markdown. */
  markdown: string;
  /** Load average at the end (time numbers depend on it, memory numbers do not). */
  loadAverageAfter: number;
}

function defaultLimit(device: 'cpu' | 'cuda'): number {
  if (device === 'cuda') {
    const gpu = backends().find((b) => b.name === 'cuda');
    if (gpu && gpu.name === 'cuda') return gpu.totalMemory;
  }
  return Math.floor((totalmem() * 2) / 3);
}

/** Decides whether to run a point: affordable, or the series' last point shows it will fail at allocation. */
function shouldRun(
  gflop: number,
  maxGflop: number,
  previous: { status: PointStatus; peak: number | null } | undefined,
  limit: number,
): boolean {
  if (gflop <= maxGflop) return true;
  if (!previous) return false;
  return previous.status === 'oom' || (previous.peak !== null && previous.peak > limit / 4);
}

async function attentionPoints(o: ResolvedOptions, log: (l: string) => void): Promise<AttentionMemoryPoint[]> {
  const s = o.shape;
  if (o.device === 'cuda') {
    const r = await runAttentionGpuBench({
      seqLens: o.attentionSeqLens,
      heads: { qHeads: s.qHeads, kvHeads: s.kvHeads },
      headDim: s.headDim,
      window: s.window,
      masks: o.masks,
      dtype: 'float32',
      limitBytes: o.limitBytes,
      repeats: o.repeats,
      torch: false,
      log: null,
    });
    return r.rows.map((g) => ({
      mask: g.mask,
      seqLen: g.seqLen,
      impl: g.impl,
      status: g.peakBytes !== null ? 'ok' : /out of memory/i.test(g.note ?? '') ? 'oom' : 'skipped',
      peakBytes: g.peakBytes,
      ms: g.forwardMs !== null && g.backwardMs !== null ? summarize([g.forwardMs + g.backwardMs]) : null,
      gflop: 0,
      ...(g.note ? { note: g.note } : {}),
    }));
  }
  const out: AttentionMemoryPoint[] = [];
  log(
    `attention path, forward+backward: ${s.qHeads} q heads, ${s.kvHeads} kv heads, headDim ${s.headDim}, window ${s.window}, batch 1, limit ${fmtBytes(o.limitBytes)}`,
  );
  for (const mask of o.masks) {
    const last = new Map<AttentionImpl, { status: PointStatus; peak: number | null }>();
    for (const seqLen of o.attentionSeqLens) {
      for (const impl of ['fused', 'eager'] as const) {
        const pairs = impl === 'eager' ? seqLen * seqLen : visiblePairs(seqLen, mask === 'window' ? s.window : 0);
        const gflop = (14 * s.headDim * s.qHeads * pairs) / 1e9;
        const p: AttentionMemoryPoint = { mask, seqLen, impl, status: 'skipped', peakBytes: null, ms: null, gflop };
        if (!shouldRun(gflop, o.maxGflop, last.get(impl), o.limitBytes)) {
          p.note = `skipped: about ${gflop.toFixed(0)} GFLOP > --max-gflop ${o.maxGflop}`;
        } else {
          const times: number[] = [];
          for (let r = 0; r < o.repeats && p.status !== 'oom'; r++) {
            const row = await measureAttentionMemory(
              { batch: 1, seqLen, qHeads: s.qHeads, kvHeads: s.kvHeads, headDim: s.headDim },
              mask,
              impl,
              { limitBytes: o.limitBytes, window: s.window, seed: o.seed },
            );
            if (row.peakBytes === null) {
              p.status = 'oom';
              p.peakBytes = null;
              p.note = row.error;
              if (row.oomNeedBytes !== undefined) p.oomNeedBytes = row.oomNeedBytes;
            } else {
              p.status = 'ok';
              p.peakBytes = Math.max(p.peakBytes ?? 0, row.peakBytes);
              times.push(row.ms!);
            }
          }
          if (p.status === 'ok') p.ms = summarize(times);
        }
        last.set(impl, { status: p.status, peak: p.peakBytes });
        out.push(p);
        log(
          `  ${mask.padEnd(6)} ${String(seqLen).padStart(6)} ${impl.padEnd(5)} ${pointText(p.status, p.peakBytes, p.oomNeedBytes)}${p.ms ? `  ${fmtSummary(p.ms)} ms` : ''}`,
        );
      }
    }
  }
  return out;
}

function pointText(status: PointStatus, peak: number | null, need?: number): string {
  if (status === 'ok') return fmtBytes(peak);
  if (status === 'oom') return need !== undefined ? `OOM (needs > ${fmtBytes(need)})` : 'OOM';
  return 'skipped';
}

async function stepPoints(o: ResolvedOptions, log: (l: string) => void): Promise<MemoryBenchResult['steps']> {
  const out: MemoryBenchResult['steps'] = [];
  if (o.stepSeqLens.length === 0) return out;
  const random = mulberry32(o.seed);
  for (const name of o.models) {
    const config = benchModelConfig(name, Math.max(...o.stepSeqLens), o.layers);
    await collectGarbage();
    const before = memory.currentBytes();
    const model = Transformer.create(config, o.seed);
    const stateBytes = memory.currentBytes() - before;
    const parameters = model.store.numel;
    const entry = { model: name, parameters, stateBytes, config: { ...config }, points: [] as StepMemoryPoint[] };
    log(
      `training step (forward + backward + AdamW) of '${name}' on one sequence: ${config.layers} layers, width ${config.width}, ${config.heads}/${config.kvHeads} heads, ` +
        `${(parameters / 1e6).toFixed(1)} M parameters, state (parameters, gradients, AdamW moments) ${fmtBytes(stateBytes)}, limit ${fmtBytes(o.limitBytes)}`,
    );
    try {
      const last = new Map<AttentionImpl, { status: PointStatus; peak: number | null }>();
      for (const seqLen of o.stepSeqLens) {
        for (const impl of ['fused', 'eager'] as const) {
          const gflop = stepGflop(config, parameters, seqLen, impl);
          const p: StepMemoryPoint = {
            model: name,
            seqLen,
            impl,
            status: 'skipped',
            stateBytes,
            activationPeakBytes: null,
            totalPeakBytes: null,
            ms: null,
            gflop,
          };
          const prev = last.get(impl);
          if (!shouldRun(gflop, o.maxGflop, prev && { status: prev.status, peak: prev.peak }, o.limitBytes)) {
            p.note = `skipped: about ${gflop.toFixed(0)} GFLOP > --max-gflop ${o.maxGflop}`;
          } else {
            const times: number[] = [];
            for (let r = 0; r < o.repeats && p.status !== 'oom'; r++) {
              const m = measureTrainStep(model, seqLen, impl, before + o.limitBytes, random);
              if (m.activationPeakBytes === null) {
                p.status = 'oom';
                p.activationPeakBytes = null;
                p.totalPeakBytes = null;
                if (m.error !== undefined) p.note = m.error;
                if (m.oomNeedBytes !== undefined) p.oomNeedBytes = m.oomNeedBytes;
              } else {
                p.status = 'ok';
                p.activationPeakBytes = Math.max(p.activationPeakBytes ?? 0, m.activationPeakBytes);
                p.totalPeakBytes = p.activationPeakBytes + stateBytes;
                times.push(m.ms!);
              }
              await collectGarbage();
            }
            if (p.status === 'ok') p.ms = summarize(times);
          }
          last.set(impl, { status: p.status, peak: p.totalPeakBytes });
          entry.points.push(p);
          log(
            `  ${String(seqLen).padStart(6)} ${impl.padEnd(5)} activations ${pointText(p.status, p.activationPeakBytes, p.oomNeedBytes)}${p.ms ? `  ${fmtSummary(p.ms)} ms` : ''}`,
          );
        }
      }
    } finally {
      model.dispose();
    }
    out.push(entry);
  }
  return out;
}

type ResolvedOptions = Required<Omit<MemoryBenchOptions, 'log' | 'layers'>> & { layers: number | undefined };

function compare(
  what: string,
  seqLen: number,
  fused: number | null,
  eager: number | null,
  eagerNeed: number | undefined,
  base = 0,
): Comparison | null {
  if (fused === null) return null;
  if (eager !== null) return { what, seqLen, ratio: eager / fused, reduction: 1 - fused / eager, lowerBound: false };
  if (eagerNeed === undefined) return null;
  const e = eagerNeed + base;
  return { what, seqLen, ratio: e / fused, reduction: 1 - fused / e, lowerBound: true };
}

function summarizeResult(
  result: Omit<MemoryBenchResult, 'comparisons' | 'longestFit' | 'targets' | 'markdown'>,
): Pick<MemoryBenchResult, 'comparisons' | 'longestFit' | 'targets' | 'markdown'> {
  const comparisons: Comparison[] = [];
  const longestFit: Record<string, number | null> = {};
  const fit = (key: string, seqLen: number, ok: boolean) => {
    if (!(key in longestFit)) longestFit[key] = null;
    if (ok && seqLen > (longestFit[key] ?? 0)) longestFit[key] = seqLen;
  };
  const attnRows: string[][] = [];
  const masks = [...new Set(result.attention.map((p) => p.mask))];
  for (const mask of masks) {
    const rows = result.attention.filter((p) => p.mask === mask);
    for (const seqLen of [...new Set(rows.map((p) => p.seqLen))]) {
      const f = rows.find((p) => p.seqLen === seqLen && p.impl === 'fused')!;
      const e = rows.find((p) => p.seqLen === seqLen && p.impl === 'eager')!;
      fit(`fused attention/${mask}`, seqLen, f.status === 'ok');
      fit(`eager attention/${mask}`, seqLen, e.status === 'ok');
      const c = compare(`attention/${mask}`, seqLen, f.peakBytes, e.peakBytes, e.oomNeedBytes);
      if (c) comparisons.push(c);
      attnRows.push([
        mask,
        String(seqLen),
        pointText(f.status, f.peakBytes, f.oomNeedBytes),
        pointText(e.status, e.peakBytes, e.oomNeedBytes),
        c?.ratio ? `${c.lowerBound ? '> ' : ''}${c.ratio.toFixed(1)}×` : '—',
        f.ms ? fmtSummary(f.ms) : '—',
        e.ms ? fmtSummary(e.ms) : '—',
      ]);
    }
  }
  const stepRows: string[][] = [];
  for (const s of result.steps) {
    for (const seqLen of [...new Set(s.points.map((p) => p.seqLen))]) {
      const f = s.points.find((p) => p.seqLen === seqLen && p.impl === 'fused')!;
      const e = s.points.find((p) => p.seqLen === seqLen && p.impl === 'eager')!;
      fit(`fused step/${s.model}`, seqLen, f.status === 'ok');
      fit(`eager step/${s.model}`, seqLen, e.status === 'ok');
      const c = compare(`step/${s.model}`, seqLen, f.totalPeakBytes, e.totalPeakBytes, e.oomNeedBytes, s.stateBytes);
      if (c) comparisons.push(c);
      stepRows.push([
        s.model,
        String(seqLen),
        fmtBytes(s.stateBytes),
        pointText(f.status, f.activationPeakBytes, f.oomNeedBytes),
        pointText(e.status, e.activationPeakBytes, e.oomNeedBytes),
        f.totalPeakBytes !== null ? fmtBytes(f.totalPeakBytes) : '—',
        e.totalPeakBytes !== null
          ? fmtBytes(e.totalPeakBytes)
          : e.oomNeedBytes !== undefined
            ? `> ${fmtBytes(e.oomNeedBytes + s.stateBytes)}`
            : '—',
        c?.reduction != null ? `${c.lowerBound ? '> ' : ''}${(c.reduction * 100).toFixed(1)}%` : '—',
        f.ms ? fmtSummary(f.ms) : '—',
        e.ms ? fmtSummary(e.ms) : '—',
      ]);
    }
  }
  const targets: MemoryBenchResult['targets'] = [];
  for (const mask of masks) {
    const c = comparisons.find((x) => x.what === `attention/${mask}` && x.seqLen === 4096);
    if (c?.ratio)
      targets.push({
        name: `attention (${mask}): eager/fused peak at 4096 >= 20x`,
        value: `${c.lowerBound ? '> ' : ''}${c.ratio.toFixed(1)}x`,
        met: c.ratio >= 20,
      });
    const lf = longestFit[`fused attention/${mask}`],
      le = longestFit[`eager attention/${mask}`];
    const eagerOomSeen = result.attention.some((p) => p.mask === mask && p.impl === 'eager' && p.status === 'oom');
    if (lf && le && eagerOomSeen)
      targets.push({
        name: `attention (${mask}): longest fused fit / longest eager fit under ${fmtBytes(result.limitBytes)} >= 16x`,
        value: `${lf} / ${le} = ${(lf / le).toFixed(0)}x`,
        met: lf / le >= 16,
      });
  }
  for (const s of result.steps) {
    const c = comparisons.find((x) => x.what === `step/${s.model}` && x.seqLen === 4096);
    if (c?.reduction != null)
      targets.push({
        name: `training step '${s.model}': whole-step peak reduction at 4096 > 19.7% (paper: 28.06 -> 22.52 GB)`,
        value: `${c.lowerBound ? '> ' : ''}${(c.reduction * 100).toFixed(1)}%`,
        met: c.reduction > 0.197,
      });
  }
  const md: string[] = [];
  if (attnRows.length) {
    const sh = result.shape;
    md.push(
      `Attention path, forward + backward (${sh.qHeads} q heads, ${sh.kvHeads} kv heads, headDim ${sh.headDim}, window ${sh.window}, batch 1), peak tracked memory, limit ${fmtBytes(result.limitBytes)}:`,
      '',
    );
    md.push(
      markdownTable(['mask', 'seqLen', 'fused peak', 'eager peak', 'eager / fused', 'fused ms', 'eager ms'], attnRows),
      '',
    );
  }
  if (stepRows.length) {
    md.push(
      `Whole training step (forward + backward + AdamW) on one sequence, limit ${fmtBytes(result.limitBytes)}; state = parameters + gradients + AdamW moments:`,
      '',
    );
    md.push(
      markdownTable(
        [
          'model',
          'seqLen',
          'state',
          'fused activations',
          'eager activations',
          'fused total',
          'eager total',
          'reduction',
          'fused ms',
          'eager ms',
        ],
        stepRows,
      ),
      '',
    );
  }
  if (targets.length)
    md.push(
      markdownTable(
        ['target', 'measured', 'met'],
        targets.map((t) => [t.name, t.value, t.met ? 'yes' : 'no']),
      ),
      '',
    );
  return { comparisons, longestFit, targets, markdown: md.join('\n') };
}

/** Runs the memory benchmark (options checked first) and returns every measurement. */
export async function runMemoryBench(options: MemoryBenchOptions = {}): Promise<MemoryBenchResult> {
  const checked = validateOptions(memorySchema, options, 'memory benchmark') as MemoryBenchOptions;
  const device = checked.device ?? 'cpu';
  const o: ResolvedOptions = {
    shape: checked.shape ?? attentionShape('gpt-oss-20b'),
    masks: checked.masks ?? ['window', 'full'],
    attentionSeqLens: checked.attentionSeqLens ?? [1024, 2048, 4096, 8192, 16384, 32768, 65536],
    stepSeqLens: checked.stepSeqLens ?? [1024, 2048, 4096, 8192, 16384, 32768],
    models: checked.models ?? ['small'],
    layers: checked.layers,
    limitBytes: checked.limitBytes ?? defaultLimit(device),
    maxGflop: checked.maxGflop ?? 2000,
    repeats: checked.repeats ?? 1,
    seed: checked.seed ?? 1,
    device,
  };
  const log = options.log === null ? () => undefined : (options.log ?? ((l: string) => console.log(l)));
  const machine = machineInfo();
  log(
    `memory benchmark — ${machine.cpu}, ${machine.threads} threads, load average ${machine.loadAverage.toFixed(2)}, device ${device}`,
  );
  const attention = await attentionPoints(o, log);
  const steps = device === 'cpu' ? await stepPoints(o, log) : [];
  if (device !== 'cpu' && o.stepSeqLens.length)
    log('training step: skipped on cuda (the built-in model trains on the CPU)');
  const partial = {
    bench: 'memory' as const,
    date: new Date().toISOString(),
    machine,
    device,
    limitBytes: o.limitBytes,
    shape: o.shape,
    attention,
    steps,
    loadAverageAfter: machineInfo().loadAverage,
  };
  const result: MemoryBenchResult = { ...partial, ...summarizeResult(partial) };
  log('');
  log(result.markdown);
  return result;
}

/** The memory chart: every attention and step series (total peak), out of memory marked. */
export function memoryBenchChart(result: MemoryBenchResult): string {
  const points: ChartPoint[] = [];
  for (const p of result.attention)
    if (p.status !== 'skipped')
      points.push({ series: `${p.impl} attention/${p.mask}`, seqLen: p.seqLen, bytes: p.peakBytes });
  for (const s of result.steps)
    for (const p of s.points)
      if (p.status !== 'skipped')
        points.push({ series: `${p.impl} step/${p.model}`, seqLen: p.seqLen, bytes: p.totalPeakBytes });
  const sh = result.shape;
  return memoryChart(
    points,
    `peak memory, eager vs fused (attention ${sh.qHeads}/${sh.kvHeads} heads d${sh.headDim}; training step)`,
    result.limitBytes,
  );
}

/** Turns parsed command-line strings into {@link MemoryBenchOptions} (refusing nonsense). */
export function memoryOptionsFromCli(opts: Record<string, string | undefined>): MemoryBenchOptions {
  const shape = attentionShape(opts.shape ?? 'gpt-oss-20b');
  if (opts.heads !== undefined) {
    const [q, kv, extra] = opts.heads.split('/');
    if (extra !== undefined || q === undefined) throw new RangeError(`--heads: '${opts.heads}' is not q/kv`);
    shape.qHeads = parsePositiveInt('--heads', q);
    shape.kvHeads = kv === undefined ? shape.qHeads : parsePositiveInt('--heads', kv);
  }
  if (opts.headDim !== undefined) shape.headDim = parsePositiveInt('--head-dim', opts.headDim);
  if (opts.window !== undefined) shape.window = parsePositiveInt('--window', opts.window);
  const out: MemoryBenchOptions = {
    shape,
    masks: parseNames('--masks', opts.masks ?? 'window,full', ['window', 'full'] as const),
    attentionSeqLens: parseIntList('--seqs', opts.seqs ?? ''),
    stepSeqLens: parseIntList('--step-seqs', opts.stepSeqs ?? ''),
    models: parseNames('--model', opts.model ?? 'small', BENCH_MODELS),
    maxGflop: parsePositive('--max-gflop', opts.maxGflop ?? '2000'),
    repeats: parsePositiveInt('--repeats', opts.repeats ?? '1'),
    seed: parsePositiveInt('--seed', opts.seed ?? '1'),
    device: parseNames('--device', opts.device ?? 'cpu', ['cpu', 'cuda'] as const)[0],
  };
  if (opts.layers !== undefined) out.layers = parsePositiveInt('--layers', opts.layers);
  if (opts.limit !== undefined) out.limitBytes = parseGiB('--limit', opts.limit);
  return out;
}

/**
 * The command line (the arguments after the script): peak memory of eager vs fused attention;
 * `--json <file>` writes the results and the chart beside them.
 */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<MemoryBenchResult> {
  const program = benchProgram(
    'memory',
    'peak memory of eager vs fused attention (attention path and whole training step) over sequence lengths, OOM marked',
    cli,
  )
    .option('--shape <name>', 'attention shape: gpt-oss-20b, gpt-oss-120b, small, tiny', 'gpt-oss-20b')
    .option('--heads <q/kv>', 'override the query/kv heads of the shape')
    .option('--head-dim <n>', 'override the head dimension')
    .option('--window <n>', 'override the sliding window')
    .option('--masks <list>', 'masks of the attention path: window, full', 'window,full')
    .option(
      '--seqs <list>',
      'sequence lengths of the attention path (quick: 1024,2048)',
      '1024,2048,4096,8192,16384,32768,65536',
    )
    .option(
      '--step-seqs <list>',
      "sequence lengths of the training step ('none' to skip it; quick: 1024)",
      '1024,2048,4096,8192,16384,32768',
    )
    .option('--model <list>', `models of the training step: ${BENCH_MODELS.join(', ')} (quick: tiny)`, 'small')
    .option('--layers <n>', 'layers of the model (default: the preset, gpt-oss 2)')
    .option('--limit <GiB>', 'memory limit in GiB (default: the device memory; CPU: 2/3 of the RAM)')
    .option('--max-gflop <n>', 'skip points estimated above this many GFLOP', '2000')
    .option('--repeats <n>', 'repetitions of every point', '1')
    .option('--seed <n>', 'seed of the inputs', '1')
    .option('--device <cpu|cuda>', 'device of the attention path', 'cpu');
  const opts = parseBench<CommonBenchOptions & Record<string, string | undefined>>(program, argv, {
    seqs: '1024,2048',
    stepSeqs: '1024',
    model: 'tiny',
  });
  const result = await runMemoryBench({ ...memoryOptionsFromCli(opts), ...(opts.json === true ? { log: null } : {}) });
  const command = commandLine(program, argv);
  if (opts.json === true) writeJson(true, { command, ...result });
  else writeBenchFiles(opts.json, command, result, memoryBenchChart);
  return result;
}

runWhenInvoked(import.meta.url, 'memory', main);
