/**
 * Benchmark of the model ops: GEMM GFLOP/s at square and model-shaped sizes, side by side with
 * a naive scalar triple loop and the machine's measured FMA peak (all in one run), and the
 * throughput of every non-attention op of a `tiny`-preset training step (embedding, RMSNorm,
 * projections, RoPE, SwiGLU, LM head, cross-entropy, their backwards, AdamW).
 *
 *   node dist/bench/model-ops.js [--quick] [--json [file]] [--svg file]
 */
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';

import {
  ParamStore,
  crossEntropyBackward,
  crossEntropyForward,
  embeddingBackward,
  embeddingForward,
  gemm,
  gemmInfo,
  linearBackward,
  linearForward,
  modelConfig,
  rmsnormBackward,
  rmsnormForward,
  ropeBackward,
  ropeForward,
  swigluBackward,
  swigluForward,
} from '../lib/model/index.js';
import { fmaPeakGflops, gemmNaive } from '../lib/model/ops.js';
import { backends } from '../lib/native/index.js';
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

/** Options of {@link runModelOpsBench}. */
export interface ModelOpsBenchOptions {
  /** Fewer and smaller cases (a smoke run). */
  quick?: boolean;
  /** Print progress lines (default true). */
  log?: (line: string) => void;
}

/** One GEMM measurement. */
export interface GemmResult {
  m: number;
  n: number;
  k: number;
  transA: boolean;
  transB: boolean;
  /** What the shape is in the model, e.g. `'tiny: MLP up (forward)'`. */
  label: string;
  gflops: number;
  /** The naive triple loop on the same problem (square sizes only). */
  naiveGflops: number | null;
  /** gflops / naiveGflops. */
  speedupVsNaive: number | null;
  /** gflops / the measured FMA peak. */
  fractionOfPeak: number;
}

/** Everything the benchmark measured. */
export interface ModelOpsBenchResult {
  kernel: string;
  threads: number;
  features: string[];
  /** Measured FMA throughput of all kernel threads (GFLOP/s), the best of several short runs. */
  peakGflops: number;
  /** The 1-minute load average before and after the run (other processes share the cores). */
  loadAverage: [number, number];
  gemm: GemmResult[];
  /** Non-attention ops of one tiny-preset training step. */
  tinyStep: { tokens: number; seconds: number; tokensPerSecond: number; gemmGflop: number };
}

/** Best-of-`rounds` seconds per call of fn, each round repeating fn for at least `minSeconds`. */
function timeIt(fn: () => void, minSeconds: number, rounds = 3): number {
  fn();
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    let reps = 0;
    const t0 = performance.now();
    let dt: number;
    do {
      fn();
      reps++;
      dt = (performance.now() - t0) / 1000;
    } while (dt < minSeconds);
    best = Math.min(best, dt / reps);
  }
  return best;
}

function random(n: number, seed: number): Float32Array {
  return fillUniform(new Float32Array(n), seed);
}

/** The non-attention work of one training step of `tiny` on `tokens` tokens, on a real ParamStore. */
function tinyStep(tokens: number): { run: () => void; gemmFlop: number; dispose: () => void } {
  const c = modelConfig('tiny');
  const store = ParamStore.fromConfig(c, 1);
  const T = tokens;
  const qd = c.heads * c.headDim;
  const kvd = c.kvHeads * c.headDim;
  const ids = Int32Array.from({ length: T }, (_, i) => (i * 7919) % c.vocab);
  const targets = Int32Array.from({ length: T }, (_, i) => ((i + 1) * 7919) % c.vocab);
  const positions = Int32Array.from({ length: T }, (_, i) => i % 512);
  const values = new Map(store.names().map((n) => [n, store.view(n)]));
  const grads = new Map(store.names().map((n) => [n, store.view(n, 'grad')]));
  const w = (name: string): Float32Array => values.get(name) as Float32Array;
  const g = (name: string): Float32Array => grads.get(name) as Float32Array;
  const L = c.layers;
  const lin = (x: Float32Array, name: string, inF: number, outF: number, out?: Float32Array): Float32Array =>
    linearForward({ x, weight: w(name), rows: T, inFeatures: inF, outFeatures: outF, out });
  const acts = Array.from({ length: L }, () => ({
    x: new Float32Array(T * c.width),
    n1: new Float32Array(T * c.width),
    r1: new Float32Array(T),
    q: new Float32Array(T * qd),
    k: new Float32Array(T * kvd),
    v: new Float32Array(T * kvd),
    h: new Float32Array(T * c.width),
    n2: new Float32Array(T * c.width),
    r2: new Float32Array(T),
    up: new Float32Array(T * 2 * c.ffn),
    act: new Float32Array(T * c.ffn),
  }));
  const run = (): void => {
    store.zeroGrad();
    let x = embeddingForward({ table: w('embed.weight'), ids, vocab: c.vocab, dim: c.width });
    for (let l = 0; l < L; l++) {
      const a = acts[l];
      const p = `layers.${l}.`;
      a.x.set(x);
      rmsnormForward({ x: a.x, weight: w(`${p}attn_norm.weight`), rows: T, dim: c.width, out: a.n1, rstd: a.r1 });
      lin(a.n1, `${p}attn.q.weight`, c.width, qd, a.q);
      lin(a.n1, `${p}attn.k.weight`, c.width, kvd, a.k);
      lin(a.n1, `${p}attn.v.weight`, c.width, kvd, a.v);
      ropeForward({ x: a.q, out: a.q, positions, rows: T, heads: c.heads, headDim: c.headDim, theta: c.ropeTheta });
      ropeForward({ x: a.k, out: a.k, positions, rows: T, heads: c.kvHeads, headDim: c.headDim, theta: c.ropeTheta });
      // (attention would map q, k, v to its output here; the benchmark feeds q to the output projection)
      const o = lin(a.q, `${p}attn.o.weight`, qd, c.width);
      for (let i = 0; i < o.length; i++) a.h[i] = a.x[i] + o[i];
      rmsnormForward({ x: a.h, weight: w(`${p}mlp_norm.weight`), rows: T, dim: c.width, out: a.n2, rstd: a.r2 });
      lin(a.n2, `${p}mlp.gate_up.weight`, c.width, 2 * c.ffn, a.up);
      swigluForward({ h: a.up, rows: T, ffn: c.ffn, variant: c.swiglu, out: a.act });
      const d = lin(a.act, `${p}mlp.down.weight`, c.ffn, c.width);
      x = new Float32Array(T * c.width);
      for (let i = 0; i < x.length; i++) x[i] = a.h[i] + d[i];
    }
    const { out: nf, rstd: rf } = rmsnormForward({ x, weight: w('norm.weight'), rows: T, dim: c.width });
    const logits = lin(nf, 'lm_head.weight', c.width, c.vocab);
    const ce = crossEntropyForward({ logits, targets, rows: T, vocab: c.vocab });
    crossEntropyBackward({ logits, targets, rows: T, vocab: c.vocab, lse: ce.lse, dlogits: logits });
    const dnf = linearBackward({
      x: nf,
      weight: w('lm_head.weight'),
      dy: logits,
      rows: T,
      inFeatures: c.width,
      outFeatures: c.vocab,
      dweight: g('lm_head.weight'),
      dbias: null,
    }).dx!;
    let dx = rmsnormBackward({
      x,
      weight: w('norm.weight'),
      rstd: rf,
      dy: dnf,
      rows: T,
      dim: c.width,
      dweight: g('norm.weight'),
    }).dx;
    for (let l = L - 1; l >= 0; l--) {
      const a = acts[l];
      const p = `layers.${l}.`;
      const back = (xIn: Float32Array, name: string, dy: Float32Array, inF: number, outF: number): Float32Array =>
        linearBackward({
          x: xIn,
          weight: w(name),
          dy,
          rows: T,
          inFeatures: inF,
          outFeatures: outF,
          dweight: g(name),
          dbias: null,
        }).dx!;
      const dAct = back(a.act, `${p}mlp.down.weight`, dx, c.ffn, c.width);
      const dUp = swigluBackward({ h: a.up, dout: dAct, rows: T, ffn: c.ffn, variant: c.swiglu });
      const dN2 = back(a.n2, `${p}mlp.gate_up.weight`, dUp, c.width, 2 * c.ffn);
      const dh = dx.slice();
      rmsnormBackward({
        x: a.h,
        weight: w(`${p}mlp_norm.weight`),
        rstd: a.r2,
        dy: dN2,
        rows: T,
        dim: c.width,
        dx: dh,
        dweight: g(`${p}mlp_norm.weight`),
        accumulate: true,
      });
      const dq = back(a.q, `${p}attn.o.weight`, dh, qd, c.width);
      ropeBackward({ dy: dq, dx: dq, positions, rows: T, heads: c.heads, headDim: c.headDim, theta: c.ropeTheta });
      const dn1 = back(a.n1, `${p}attn.q.weight`, dq, c.width, qd);
      const dk = ropeBackward({
        dy: a.k,
        positions,
        rows: T,
        heads: c.kvHeads,
        headDim: c.headDim,
        theta: c.ropeTheta,
      });
      linearBackward({
        x: a.n1,
        weight: w(`${p}attn.k.weight`),
        dy: dk,
        rows: T,
        inFeatures: c.width,
        outFeatures: kvd,
        dx: dn1,
        dweight: g(`${p}attn.k.weight`),
        dbias: null,
        accumulate: true,
      });
      linearBackward({
        x: a.n1,
        weight: w(`${p}attn.v.weight`),
        dy: a.v,
        rows: T,
        inFeatures: c.width,
        outFeatures: kvd,
        dx: dn1,
        dweight: g(`${p}attn.v.weight`),
        dbias: null,
        accumulate: true,
      });
      rmsnormBackward({
        x: a.x,
        weight: w(`${p}attn_norm.weight`),
        rstd: a.r1,
        dy: dn1,
        rows: T,
        dim: c.width,
        dx: dh,
        dweight: g(`${p}attn_norm.weight`),
        accumulate: true,
      });
      dx = dh;
    }
    embeddingBackward({ ids, dout: dx, vocab: c.vocab, dim: c.width, dtable: g('embed.weight') });
    store.adamwStep({ lr: 1e-3, weightDecay: 0.1, maxGradNorm: 1 });
  };
  const perLayer = c.width * (qd + 2 * kvd) + qd * c.width + c.width * 2 * c.ffn + c.ffn * c.width;
  const gemmFlop = 6 * T * (L * perLayer + c.width * c.vocab);
  return { run, gemmFlop, dispose: () => store.dispose() };
}

/** Runs the benchmark and returns its measurements. */
export function runModelOpsBench(options: ModelOpsBenchOptions = {}): ModelOpsBenchResult {
  const log = options.log ?? ((line: string) => console.log(line));
  const quick = options.quick ?? false;
  const minSeconds = quick ? 0.05 : 0.25;
  const cpu = backends()[0];
  const info = gemmInfo();
  const loadBefore = loadavg()[0];
  const measurePeak = (): number =>
    Math.max(...Array.from({ length: quick ? 2 : 5 }, () => fmaPeakGflops(quick ? 0.05 : 0.1)));
  let peak = measurePeak();
  log(
    `GEMM kernel ${info.kernel}; ${cpu?.name === 'cpu' ? cpu.threads : '?'} threads; FMA peak (measured) ${peak.toFixed(1)} GFLOP/s; load average ${loadBefore.toFixed(2)}`,
  );
  const squares = quick ? [64, 128] : [128, 256, 512, 1024];
  const T = quick ? 512 : 4096;
  const c = modelConfig('tiny');
  const shapes: [number, number, number, boolean, boolean, string, boolean][] = [
    ...squares.map((s): [number, number, number, boolean, boolean, string, boolean] => [
      s,
      s,
      s,
      false,
      false,
      `square ${s}`,
      s <= 512,
    ]),
    [T, c.heads * c.headDim, c.width, false, true, `tiny: q projection, ${T} tokens (forward)`, false],
    [T, 2 * c.ffn, c.width, false, true, 'tiny: MLP gate_up (forward)', false],
    [T, c.width, c.ffn, false, true, 'tiny: MLP down (forward)', false],
    [T, c.vocab, c.width, false, true, 'tiny: LM head (forward)', false],
    [T, c.width, 2 * c.ffn, false, false, 'tiny: MLP gate_up dx (backward)', false],
    [2 * c.ffn, c.width, T, true, false, 'tiny: MLP gate_up dW (backward)', false],
    [8, 2 * c.ffn, c.width, false, true, 'tiny: MLP gate_up, 8 tokens (decode)', false],
  ];
  const results: GemmResult[] = [];
  let seed = 1;
  for (const [m, n, k, transA, transB, label, withNaive] of shapes) {
    const a = random(m * k, seed++);
    const b = random(k * n, seed++);
    const cc = new Float32Array(m * n);
    const flop = 2 * m * n * k;
    const fast = timeIt(() => gemm({ a, b, c: cc, m, n, k, transA, transB }), minSeconds);
    const naive = withNaive ? timeIt(() => gemmNaive({ a, b, c: cc, m, n, k, transA, transB }), minSeconds, 1) : null;
    const r: GemmResult = {
      m,
      n,
      k,
      transA,
      transB,
      label,
      gflops: flop / fast / 1e9,
      naiveGflops: naive === null ? null : flop / naive / 1e9,
      speedupVsNaive: naive === null ? null : naive / fast,
      fractionOfPeak: flop / fast / 1e9 / peak,
    };
    results.push(r);
    log(
      `${label.padEnd(44)} ${`${m}x${n}x${k}${transA ? ' Aᵀ' : ''}${transB ? ' Bᵀ' : ''}`.padEnd(20)} ${r.gflops.toFixed(1).padStart(7)} GFLOP/s` +
        ` ${(100 * r.fractionOfPeak).toFixed(0).padStart(3)}% of peak` +
        (r.naiveGflops === null
          ? ''
          : `   naive ${r.naiveGflops.toFixed(2)} GFLOP/s (${r.speedupVsNaive!.toFixed(0)}x)`),
    );
  }
  peak = Math.max(peak, measurePeak());
  for (const r of results) r.fractionOfPeak = r.gflops / peak;
  const step = tinyStep(T);
  const seconds = timeIt(step.run, quick ? 0.1 : 1, quick ? 1 : 3);
  step.dispose();
  const tinyResult = { tokens: T, seconds, tokensPerSecond: T / seconds, gemmGflop: step.gemmFlop / 1e9 };
  log(
    `tiny preset, all non-attention ops of a training step (fwd + bwd + AdamW), ${T} tokens: ${seconds.toFixed(3)} s = ${Math.round(tinyResult.tokensPerSecond)} tokens/s (${(step.gemmFlop / seconds / 1e9).toFixed(1)} GFLOP/s in matmuls)`,
  );
  const loadAfter = loadavg()[0];
  log(
    `peak (best of all measurements) ${peak.toFixed(1)} GFLOP/s; load average ${loadBefore.toFixed(2)} -> ${loadAfter.toFixed(2)}`,
  );
  return {
    kernel: info.kernel,
    threads: cpu?.name === 'cpu' ? cpu.threads : 0,
    features: cpu?.name === 'cpu' ? cpu.features : [],
    peakGflops: peak,
    loadAverage: [loadBefore, loadAfter],
    gemm: results,
    tinyStep: tinyResult,
  };
}

/** A bar chart (SVG) of GEMM GFLOP/s against the naive loop and the peak. */
export function modelOpsSvg(r: ModelOpsBenchResult): string {
  const rowH = 22;
  const width = 760;
  const left = 300;
  const scale = (width - left - 20) / r.peakGflops;
  const rows = r.gemm
    .map((g, i) => {
      const y = 30 + i * rowH;
      const naive =
        g.naiveGflops === null
          ? ''
          : `<rect x="${left}" y="${y + 12}" width="${Math.max(1, g.naiveGflops * scale)}" height="6" fill="#d62728"/>`;
      return `<text x="${left - 6}" y="${y + 12}" font-size="11" text-anchor="end">${g.label}</text><rect x="${left}" y="${y}" width="${g.gflops * scale}" height="11" fill="#1f77b4"/>${naive}<text x="${left + g.gflops * scale + 4}" y="${y + 10}" font-size="10">${g.gflops.toFixed(1)}</text>`;
    })
    .join('');
  const h = 50 + r.gemm.length * rowH;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${h}" font-family="sans-serif"><text x="10" y="16" font-size="13">SGEMM GFLOP/s (${r.kernel}, ${r.threads} threads); blue: blocked kernel, red: naive loop; line: FMA peak ${r.peakGflops.toFixed(0)}</text>${rows}<line x1="${left + r.peakGflops * scale}" y1="24" x2="${left + r.peakGflops * scale}" y2="${h - 10}" stroke="#2ca02c" stroke-dasharray="4"/></svg>`;
}

/** The command line (the arguments after the script): `[--quick] [--json [file]] [--svg file]`. */
export function main(argv: readonly string[] = process.argv.slice(2), cli: BenchCliSettings = {}): ModelOpsBenchResult {
  const program = benchProgram(
    'model-ops',
    'model ops: GEMM GFLOP/s against a naive loop and the FMA peak, and the non-attention ops of a tiny training step',
    cli,
  ).option('--svg <file>', 'write the GEMM chart as SVG');
  const o = parseBench<CommonBenchOptions & { svg?: string }>(program, argv);
  const result = runModelOpsBench({ quick: o.quick === true, ...(o.json === true ? { log: tableLog(o.json) } : {}) });
  writeJson(o.json, result);
  if (o.svg) writeFileSync(o.svg, modelOpsSvg(result));
  return result;
}

runWhenInvoked(import.meta.url, 'model-ops', main);
