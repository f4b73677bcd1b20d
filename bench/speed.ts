/**
 * `sinkflex bench speed`: time, tokens/s and GFLOP/s of fused vs eager attention (forward +
 * backward at one layer shape) and of a whole training step of the built-in model, measured
 * side by side in one run (the implementations alternate within every repetition), with the
 * machine's FMA peak measured by the native kernels (`fmaPeakGflops`) as the reference line.
 *
 * GFLOP counts useful work only, the same for both implementations: attention 4·headDim flops
 * per visible (query, key) pair and head forward, 10·headDim backward; a training step adds
 * 6·(parameters − embedding table) per token for the matrices. Time numbers depend on other jobs on the machine:
 * the load average is reported before and after.
 *
 * Run: `sinkflex bench speed [options]` or `node dist/bench/speed.js [options]`.
 */
import type { AttentionImpl } from '../lib/attention/index.js';
import { Transformer } from '../lib/model/index.js';
import { fmaPeakGflops } from '../lib/model/ops.js';
import { mulberry32 } from '../lib/util/random.js';
import {
  benchProgram,
  commandLine,
  parseBench,
  runWhenInvoked,
  writeJson,
  type BenchCliSettings,
  type CommonBenchOptions,
} from './common/cli.js';
import { memoryChart } from './common/chart.js';
import { measureAttentionSpeed, visiblePairs, type BenchMask } from './attention.js';
import {
  type AttentionLayerShape,
  attentionShape,
  parseIntList,
  parseNames,
  parsePositive,
  parsePositiveInt,
  speedSchema,
  validateOptions,
} from './common/options.js';
import { type BenchModel, BENCH_MODELS, benchModelConfig, measureTrainStep, stepGflop } from './common/train-step.js';
import {
  type MachineInfo,
  type Summary,
  fmtSummary,
  machineInfo,
  markdownTable,
  summarize,
  writeBenchFiles,
} from './common/util.js';

/** Options of {@link runSpeedBench}. */
export interface SpeedBenchOptions {
  /** Attention shape (default 8 query heads, 1 kv head, headDim 64, window 128: one kv group of gpt-oss-20b). */
  shape?: AttentionLayerShape;
  /** Masks (default both). */
  masks?: BenchMask[];
  /** Sequence lengths of the attention rows (default 1024, 2048, 4096). */
  attentionSeqLens?: number[];
  /** Sequence lengths of the training-step rows (default 1024, 4096). */
  stepSeqLens?: number[];
  /** Models of the training-step rows (default `tiny`). */
  models?: BenchModel[];
  /** Layers of the models (default: the preset's). */
  layers?: number;
  /** Timed repetitions per point after one warm-up (default 3). */
  repeats?: number;
  /** Seconds of the FMA peak measurement (default 0.5). */
  peakSeconds?: number;
  /** Seed (default 1). */
  seed?: number;
  /** Only `cpu` is timed here (the GPU has bench/attention-gpu.ts). */
  device?: 'cpu' | 'cuda';
  /** Progress lines (default console.log); null is silent. */
  log?: ((line: string) => void) | null;
}

/** Fused vs eager at one point. */
export interface SpeedPoint {
  /** `attention/<mask>` or `step/<model>`. */
  what: string;
  seqLen: number;
  /** Useful GFLOP of one forward+backward (or training step). */
  gflop: number;
  fusedMs: Summary;
  eagerMs: Summary;
  /** Tokens per second of the median. */
  fusedTokensPerSecond: number;
  eagerTokensPerSecond: number;
  fusedGflops: number;
  eagerGflops: number;
  /** Fraction of the measured FMA peak the fused median reaches. */
  fusedPeakFraction: number;
  /** eager median / fused median. */
  speedup: number;
}

/** Everything one run measured. */
export interface SpeedBenchResult {
  bench: 'speed';
  date: string;
  machine: MachineInfo;
  /** Measured FMA throughput of all kernel threads (GFLOP/s): the reference line. */
  fmaPeakGflops: number;
  shape: AttentionLayerShape;
  points: SpeedPoint[];
  markdown: string;
  loadAverageAfter: number;
}

function point(what: string, seqLen: number, gflop: number, f: Summary, e: Summary, peak: number): SpeedPoint {
  return {
    what,
    seqLen,
    gflop,
    fusedMs: f,
    eagerMs: e,
    fusedTokensPerSecond: seqLen / (f.median / 1e3),
    eagerTokensPerSecond: seqLen / (e.median / 1e3),
    fusedGflops: gflop / (f.median / 1e3),
    eagerGflops: gflop / (e.median / 1e3),
    fusedPeakFraction: gflop / (f.median / 1e3) / peak,
    speedup: e.median / f.median,
  };
}

/** Runs the speed benchmark (options checked first). */
export async function runSpeedBench(options: SpeedBenchOptions = {}): Promise<SpeedBenchResult> {
  const o = validateOptions(speedSchema, options, 'speed benchmark') as SpeedBenchOptions;
  if ((o.device ?? 'cpu') !== 'cpu')
    throw new RangeError('speed benchmark: only --device cpu is timed here; on a GPU run bench/attention-gpu.ts');
  const shape = o.shape ?? { qHeads: 8, kvHeads: 1, headDim: 64, window: 128 };
  const masks = o.masks ?? ['window', 'full'];
  const seqLens = o.attentionSeqLens ?? [1024, 2048, 4096];
  const stepSeqLens = o.stepSeqLens ?? [1024, 4096];
  const models = o.models ?? ['tiny'];
  const repeats = o.repeats ?? 3;
  const seed = o.seed ?? 1;
  const log = options.log === null ? () => undefined : (options.log ?? ((l: string) => console.log(l)));
  const machine = machineInfo();
  const peak = fmaPeakGflops(o.peakSeconds ?? 0.5);
  log(
    `speed benchmark — ${machine.cpu}, ${machine.threads} threads, load average ${machine.loadAverage.toFixed(2)}, measured FMA peak ${peak.toFixed(1)} GFLOP/s`,
  );
  const points: SpeedPoint[] = [];
  for (const mask of masks) {
    for (const seqLen of seqLens) {
      const s = await measureAttentionSpeed(
        { batch: 1, seqLen, qHeads: shape.qHeads, kvHeads: shape.kvHeads, headDim: shape.headDim },
        mask,
        { window: shape.window, seed, repeats },
      );
      const gflop =
        (14 * shape.headDim * shape.qHeads * visiblePairs(seqLen, mask === 'window' ? shape.window : 0)) / 1e9;
      const p = point(`attention/${mask}`, seqLen, gflop, s.fusedMs!, s.eagerMs!, peak);
      points.push(p);
      log(
        `  ${p.what} ${seqLen}: fused ${fmtSummary(p.fusedMs)} ms, eager ${fmtSummary(p.eagerMs)} ms, ${p.speedup.toFixed(1)}x`,
      );
    }
  }
  const random = mulberry32(seed);
  for (const name of models) {
    if (stepSeqLens.length === 0) break;
    const config = benchModelConfig(name, Math.max(...stepSeqLens), o.layers);
    const model = Transformer.create(config, seed);
    try {
      const parameters = model.store.numel;
      for (const seqLen of stepSeqLens) {
        const times: Record<AttentionImpl, number[]> = { fused: [], eager: [] };
        for (let r = 0; r <= repeats; r++) {
          for (const impl of ['fused', 'eager'] as const) {
            const m = measureTrainStep(model, seqLen, impl, Number.MAX_SAFE_INTEGER, random);
            if (r > 0) times[impl].push(m.ms!); // repetition 0 warms up
          }
        }
        const gflop = stepGflop(config, parameters, seqLen, 'fused');
        const p = point(`step/${name}`, seqLen, gflop, summarize(times.fused), summarize(times.eager), peak);
        points.push(p);
        log(
          `  ${p.what} ${seqLen}: fused ${fmtSummary(p.fusedMs)} ms, eager ${fmtSummary(p.eagerMs)} ms, ${p.speedup.toFixed(1)}x`,
        );
      }
    } finally {
      model.dispose();
    }
  }
  const after = machineInfo().loadAverage;
  const rows = points.map((p) => [
    p.what,
    String(p.seqLen),
    fmtSummary(p.fusedMs),
    fmtSummary(p.eagerMs),
    `${p.speedup.toFixed(1)}×`,
    p.fusedTokensPerSecond.toFixed(0),
    p.eagerTokensPerSecond.toFixed(0),
    p.fusedGflops.toFixed(1),
    p.eagerGflops.toFixed(1),
    `${(p.fusedPeakFraction * 100).toFixed(1)}%`,
  ]);
  const markdown = [
    `Fused vs eager, median (min–max) of ${repeats} after a warm-up; measured FMA peak ${peak.toFixed(1)} GFLOP/s on ${machine.threads} threads; load average ${machine.loadAverage.toFixed(2)} → ${after.toFixed(2)}:`,
    '',
    markdownTable(
      [
        'what',
        'seqLen',
        'fused ms',
        'eager ms',
        'eager / fused',
        'fused tokens/s',
        'eager tokens/s',
        'fused GFLOP/s',
        'eager GFLOP/s',
        'fused % of peak',
      ],
      rows,
    ),
    '',
  ].join('\n');
  log('');
  log(markdown);
  return {
    bench: 'speed',
    date: new Date().toISOString(),
    machine,
    fmaPeakGflops: peak,
    shape,
    points,
    markdown,
    loadAverageAfter: after,
  };
}

/** SVG chart of the speed run: GFLOP/s against sequence length per series, the FMA peak as the limit line. */
export function speedBenchChart(result: SpeedBenchResult): string {
  const pts = result.points.flatMap((p) => [
    { series: `fused ${p.what}`, seqLen: p.seqLen, bytes: p.fusedGflops * 1e9 },
    { series: `eager ${p.what}`, seqLen: p.seqLen, bytes: p.eagerGflops * 1e9 },
  ]);
  return memoryChart(
    pts,
    `GFLOP/s, fused vs eager (line: measured FMA peak ${result.fmaPeakGflops.toFixed(0)} GFLOP/s)`,
    result.fmaPeakGflops * 1e9,
    'FLOP/s (G = 1e9)',
  );
}

/** Turns parsed command-line strings into {@link SpeedBenchOptions}. */
export function speedOptionsFromCli(opts: Record<string, string | undefined>): SpeedBenchOptions {
  const out: SpeedBenchOptions = {
    masks: parseNames('--masks', opts.masks ?? 'window,full', ['window', 'full'] as const),
    attentionSeqLens: parseIntList('--seqs', opts.seqs ?? ''),
    stepSeqLens: parseIntList('--step-seqs', opts.stepSeqs ?? ''),
    models: parseNames('--model', opts.model ?? 'tiny', BENCH_MODELS),
    repeats: parsePositiveInt('--repeats', opts.repeats ?? '3'),
    peakSeconds: parsePositive('--peak-seconds', opts.peakSeconds ?? '0.5'),
    seed: parsePositiveInt('--seed', opts.seed ?? '1'),
  };
  if (opts.shape !== undefined) out.shape = attentionShape(opts.shape);
  if (opts.layers !== undefined) out.layers = parsePositiveInt('--layers', opts.layers);
  return out;
}

/**
 * The command line (the arguments after the script): time and GFLOP/s of fused vs eager
 * attention; `--json <file>` writes the results and the chart beside them.
 */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<SpeedBenchResult> {
  const program = benchProgram(
    'speed',
    'time, tokens/s and GFLOP/s of fused vs eager attention and of a training step, against the measured FMA peak',
    cli,
  )
    .option(
      '--shape <name>',
      'attention shape: gpt-oss-20b, gpt-oss-120b, small, tiny (default: one kv group of gpt-oss-20b, 8/1 heads)',
    )
    .option('--masks <list>', 'masks: window, full', 'window,full')
    .option('--seqs <list>', 'sequence lengths of the attention rows (quick: 1024)', '1024,2048,4096')
    .option(
      '--step-seqs <list>',
      "sequence lengths of the training-step rows ('none' to skip; quick: 1024)",
      '1024,4096',
    )
    .option('--model <list>', `models of the training step: ${BENCH_MODELS.join(', ')}`, 'tiny')
    .option('--layers <n>', 'layers of the model')
    .option('--repeats <n>', 'timed repetitions per point (quick: 1)', '3')
    .option('--peak-seconds <s>', 'seconds of the FMA peak measurement (quick: 0.1)', '0.5')
    .option('--seed <n>', 'seed', '1');
  const opts = parseBench<CommonBenchOptions & Record<string, string | undefined>>(program, argv, {
    seqs: '1024',
    stepSeqs: '1024',
    repeats: '1',
    peakSeconds: '0.1',
  });
  const result = await runSpeedBench({ ...speedOptionsFromCli(opts), ...(opts.json === true ? { log: null } : {}) });
  const command = commandLine(program, argv);
  if (opts.json === true) writeJson(true, { command, ...result });
  else writeBenchFiles(opts.json, command, result, speedBenchChart);
  return result;
}

runWhenInvoked(import.meta.url, 'speed', main);
