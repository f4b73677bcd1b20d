#!/usr/bin/env node
/**
 * GRPO kernel benchmark: group advantages, their token broadcast and the fused policy loss
 * over 1M–16M tokens, reported as tokens/s and GB/s next to a plain parallel memory copy of
 * the same number of bytes (read + written) measured in the same run, repeat by repeat.
 *
 * Run: `npm run build:ts && node dist/bench/grpo.js [--tokens 1M,4M,16M] [--len 1024]
 * [--group 8] [--repeats 5] [--kl k3|none] [--json] [--out result.json] [--svg chart.svg]`.
 */
import { writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';

import { grpoAddon } from '../lib/grpo/native.js';
import { broadcastAdvantages, computeAdvantages, policyLoss, type KlType } from '../lib/grpo/index.js';
import { backends } from '../lib/native/index.js';
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

/** Options of {@link runGrpoBench}. */
export interface GrpoBenchOptions {
  /** Token counts (batch * responseLen) to run; default 1M, 4M, 16M. */
  tokens?: number[];
  /** Tokens per response; default 1024. */
  responseLen?: number;
  /** Responses per group; default 8. */
  groupSize?: number;
  /** Timed repeats per stage (after one warm-up); the median is reported. Default 5. */
  repeats?: number;
  /** Seed of the random inputs. Default 1. */
  seed?: number;
  /** KL term of the loss (`'none'` for none). Default `'k3'` (VERL's low_var_kl). */
  kl?: KlType | 'none';
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

/** One stage at one size. */
export interface GrpoBenchRow {
  tokens: number;
  batch: number;
  responseLen: number;
  stage: string;
  /** Bytes the stage must read and write at least (every input once, every output once). */
  bytes: number;
  /** Median milliseconds of the stage. */
  ms: number;
  /** Median milliseconds of the copy of the same bytes (half read, half written). */
  copyMs: number;
  tokensPerSec: number;
  gbPerSec: number;
  copyGbPerSec: number;
  /** gbPerSec / copyGbPerSec: the fraction of copy bandwidth the stage reaches (medians). */
  ratioToCopy: number;
  /** Fastest repeat of the stage and of the copy, and their ratio (less sensitive to a busy machine). */
  bestMs: number;
  copyBestMs: number;
  bestRatioToCopy: number;
}

/** The whole run. */
export interface GrpoBenchResult {
  date: string;
  /** `loadavg` is the 1-minute load average when the run ended (other processes share the cores). */
  machine: { cpu: string; cores: number; memoryGiB: number; node: string; loadavg: number };
  kernelThreads: number;
  kernelIsa: string;
  /**
   * The loss (token advantages, same KL setting) on 512K tokens (about 12 MB, which stay in a
   * last-level cache of that size), best of 20 runs: about the compute ceiling, to set against
   * the memory ceiling (copy GB/s / bytes per token).
   */
  inCacheLossTokensPerSec: number;
  options: Required<Omit<GrpoBenchOptions, 'log'>>;
  rows: GrpoBenchRow[];
}

const rng = mulberry32;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

function time(fn: () => unknown): number {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}

/** Runs the benchmark and returns every row (also printed through `log`). */
export function runGrpoBench(options: GrpoBenchOptions = {}): GrpoBenchResult {
  const opts = {
    tokens: options.tokens ?? [1 << 20, 1 << 22, 1 << 24],
    responseLen: options.responseLen ?? 1024,
    groupSize: options.groupSize ?? 8,
    repeats: options.repeats ?? 5,
    seed: options.seed ?? 1,
    kl: options.kl ?? 'k3',
  };
  const log = options.log ?? (() => {});
  const addon = grpoAddon();
  const maxTokens = Math.max(...opts.tokens);
  // Copy buffers for the largest stage: (advantages + broadcast + loss) bytes / 2 floats each.
  const copyFloats = Math.ceil((maxTokens * 40) / 8) + (1 << 20);
  const src = new Float32Array(copyFloats).fill(1);
  const dst = new Float32Array(copyFloats).fill(0);
  const rows: GrpoBenchRow[] = [];

  for (const tokens of opts.tokens) {
    const len = opts.responseLen;
    const batch = Math.max(1, Math.round(tokens / len));
    const n = batch * len;
    const r = rng(opts.seed + tokens);
    const rewards = Float32Array.from({ length: batch }, () => (r() < 0.5 ? 0 : r()));
    const groupIds = Int32Array.from({ length: batch }, (_, i) => Math.floor(i / opts.groupSize) * 7919);
    const logProbs = new Float32Array(n);
    const oldLogProbs = new Float32Array(n);
    const refLogProbs = new Float32Array(n);
    const responseMask = new Float32Array(n);
    for (let i = 0; i < batch; i++) {
      const valid = Math.floor(len * (0.5 + 0.5 * r()));
      for (let t = 0; t < len; t++) {
        const j = i * len + t;
        logProbs[j] = -3 * r() - 0.01;
        oldLogProbs[j] = logProbs[j]! + 0.6 * (r() - 0.5);
        refLogProbs[j] = logProbs[j]! + (r() - 0.5);
        responseMask[j] = t < valid ? 1 : 0;
      }
    }
    const adv = new Float32Array(batch);
    const tokenAdv = new Float32Array(n);
    const grad = new Float32Array(n);
    const withRef = opts.kl === 'none' ? {} : { refLogProbs };
    const lossOpts = opts.kl === 'none' ? {} : { klType: opts.kl, klCoef: 0.001 };
    const refBytes = opts.kl === 'none' ? 0 : 4 * n;
    const shape = { batch, responseLen: len };

    const advantages = () => computeAdvantages(rewards, groupIds, { out: adv });
    const broadcast = () => broadcastAdvantages(adv, responseMask, batch, len, { out: tokenAdv });
    const lossTok = () =>
      policyLoss({ logProbs, oldLogProbs, advantages: tokenAdv, responseMask, ...withRef }, shape, {
        ...lossOpts,
        out: grad,
      });
    const lossRow = () =>
      policyLoss({ logProbs, oldLogProbs, advantages: adv, responseMask, ...withRef }, shape, {
        ...lossOpts,
        out: grad,
      });
    const lossNew = () =>
      policyLoss({ logProbs, oldLogProbs, advantages: tokenAdv, responseMask, ...withRef }, shape, lossOpts);

    const advBytes = 12 * batch;
    const bcBytes = 8 * n + 4 * batch;
    const lossTokBytes = 20 * n + refBytes; // logp, old, adv, mask (+ ref) read; dLogProbs written
    const lossRowBytes = 16 * n + refBytes + 4 * batch;
    const stages: [string, () => unknown, number][] = [
      ['advantages', advantages, advBytes],
      ['broadcast', broadcast, bcBytes],
      ['loss (token advantages)', lossTok, lossTokBytes],
      ['loss (row advantages)', lossRow, lossRowBytes],
      ['loss, new output array', lossNew, lossTokBytes],
      [
        'advantages + broadcast + loss',
        () => (advantages(), broadcast(), lossTok()),
        advBytes + bcBytes + lossTokBytes,
      ],
      ['advantages + loss (row advantages)', () => (advantages(), lossRow()), advBytes + lossRowBytes],
    ];
    for (const [stage, fn, bytes] of stages) {
      const floats = Math.max(1, Math.round(bytes / 8));
      const s = src.subarray(0, floats);
      const d = dst.subarray(0, floats);
      const copy = () => addon.grpoCopy(d, s);
      fn();
      copy();
      const ts: number[] = [];
      const cs: number[] = [];
      for (let k = 0; k < opts.repeats; k++) {
        ts.push(time(fn));
        cs.push(time(copy));
      }
      const ms = median(ts);
      const copyMs = median(cs);
      const gbPerSec = bytes / ms / 1e6;
      const copyGbPerSec = (floats * 8) / copyMs / 1e6;
      const row: GrpoBenchRow = {
        tokens: n,
        batch,
        responseLen: len,
        stage,
        bytes,
        ms,
        copyMs,
        tokensPerSec: (n / ms) * 1e3,
        gbPerSec,
        copyGbPerSec,
        ratioToCopy: gbPerSec / copyGbPerSec,
        bestMs: Math.min(...ts),
        copyBestMs: Math.min(...cs),
        bestRatioToCopy: bytes / Math.min(...ts) / ((floats * 8) / Math.min(...cs)),
      };
      rows.push(row);
      log(formatRow(row));
    }
  }
  const cpu = backends()[0];
  const inCache = inCacheLoss(opts.kl, opts.seed);
  log(`# loss on 512K tokens (12 MB, cache-resident): ${(inCache / 1e6).toFixed(0)} Mtok/s (best of 20)`);
  return {
    date: new Date().toISOString(),
    machine: {
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: cpus().length,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      node: process.version,
      loadavg: loadavg()[0] ?? 0,
    },
    kernelThreads: cpu?.name === 'cpu' ? cpu.threads : 1,
    kernelIsa: addon.grpoKernelIsa(),
    inCacheLossTokensPerSec: inCache,
    options: opts,
    rows,
  };
}

/** Best tokens/s of the loss over 512K tokens that stay in the last-level cache (about the compute ceiling). */
function inCacheLoss(kl: KlType | 'none', seed: number): number {
  const batch = 512;
  const len = 1024;
  const n = batch * len;
  const r = rng(seed);
  const logProbs = Float32Array.from({ length: n }, () => -3 * r() - 0.01);
  const oldLogProbs = logProbs.map((v) => v + 0.6 * (r() - 0.5));
  const refLogProbs = logProbs.map((v) => v + (r() - 0.5));
  const responseMask = Float32Array.from({ length: n }, (_, j) => (j % len < 900 ? 1 : 0));
  const advantages = Float32Array.from({ length: n }, () => r() - 0.5);
  const out = new Float32Array(n);
  const inp = { logProbs, oldLogProbs, advantages, responseMask, ...(kl === 'none' ? {} : { refLogProbs }) };
  const opts = { ...(kl === 'none' ? {} : { klType: kl, klCoef: 0.001 }), out };
  let best = Infinity;
  for (let k = 0; k < 20; k++)
    best = Math.min(
      best,
      time(() => policyLoss(inp, { batch, responseLen: len }, opts)),
    );
  return (n / best) * 1e3;
}

const HEADER =
  'tokens     stage                               ms        Mtok/s     GB/s   copy GB/s  vs copy  best vs best';

/** One table line of a row. */
export function formatRow(r: GrpoBenchRow): string {
  const tok = r.tokens >= 1 << 20 ? `${(r.tokens / (1 << 20)).toFixed(0)}M` : `${r.tokens}`;
  return (
    `${tok.padEnd(10)} ${r.stage.padEnd(34)} ${r.ms.toFixed(2).padStart(8)} ${(r.tokensPerSec / 1e6).toFixed(0).padStart(10)} ` +
    `${r.gbPerSec.toFixed(2).padStart(8)} ${r.copyGbPerSec.toFixed(2).padStart(10)} ${(100 * r.ratioToCopy).toFixed(0).padStart(7)}%` +
    `${(100 * r.bestRatioToCopy).toFixed(0).padStart(13)}%`
  );
}

/** A bar chart (SVG) of each stage's fraction of copy bandwidth, grouped by size. */
export function chartSvg(result: GrpoBenchResult): string {
  const stages = [...new Set(result.rows.map((r) => r.stage))].filter((s) => s !== 'advantages');
  const sizes = [...new Set(result.rows.map((r) => r.tokens))];
  const bw = 14;
  const gap = 24;
  const groupW = stages.length * bw + gap;
  const W = 80 + sizes.length * groupW + 260;
  const H = 260;
  const y = (v: number) => 220 - Math.min(v, 1.2) * 160;
  const colors = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1'];
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">`,
    `<text x="10" y="16" font-size="13">GRPO kernels vs parallel memcpy of the same bytes (${result.kernelIsa}, ${result.kernelThreads} threads)</text>`,
  ];
  for (const v of [0, 0.5, 1]) {
    parts.push(`<line x1="60" x2="${80 + sizes.length * groupW}" y1="${y(v)}" y2="${y(v)}" stroke="#ccc"/>`);
    parts.push(`<text x="28" y="${y(v) + 4}">${v * 100}%</text>`);
  }
  sizes.forEach((size, gi) => {
    const x0 = 80 + gi * groupW;
    stages.forEach((stage, si) => {
      const row = result.rows.find((r) => r.tokens === size && r.stage === stage);
      if (!row) return;
      const top = y(row.ratioToCopy);
      parts.push(
        `<rect x="${x0 + si * bw}" y="${top}" width="${bw - 2}" height="${220 - top}" fill="${colors[si % colors.length]}"/>`,
      );
    });
    parts.push(`<text x="${x0}" y="238">${(size / (1 << 20)).toFixed(0)}M tokens</text>`);
  });
  stages.forEach((stage, si) => {
    const lx = 90 + sizes.length * groupW;
    parts.push(`<rect x="${lx}" y="${40 + si * 16}" width="10" height="10" fill="${colors[si % colors.length]}"/>`);
    parts.push(`<text x="${lx + 14}" y="${49 + si * 16}">${stage}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

function parseTokens(s: string): number[] {
  return s.split(',').map((p) => {
    const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(p.trim());
    if (!m) throw new RangeError(`--tokens: cannot read '${p}'`);
    const mult = m[2]!.toLowerCase() === 'm' ? 1 << 20 : m[2]!.toLowerCase() === 'k' ? 1 << 10 : 1;
    return Math.round(Number(m[1]) * mult);
  });
}

/** The command line (the arguments after the script): prints the table (or JSON with a bare `--json`), writes `--json <file>` and `--svg <file>`. */
export function main(argv: readonly string[] = process.argv.slice(2), cli: BenchCliSettings = {}): GrpoBenchResult {
  const program = benchProgram('grpo', 'GRPO advantages and policy loss kernels: time per stage over token counts', cli)
    .option('--tokens <list>', 'token counts, e.g. 1M,4M,16M (quick: 64k,256k)')
    .option('--len <n>', 'response length')
    .option('--group <n>', 'group size')
    .option('--repeats <n>', 'repeats per point (quick: 2)')
    .option('--seed <n>', 'seed of the random inputs')
    .option('--kl <type>', 'KL estimator: k1 | k2 | k3 | abs | none')
    .option('--svg <file>', 'write the chart as SVG');
  type Options = CommonBenchOptions & {
    tokens?: string;
    len?: string;
    group?: string;
    repeats?: string;
    seed?: string;
    kl?: string;
    svg?: string;
  };
  const values = parseBench<Options>(program, argv, { tokens: '64k,256k', repeats: '2' });
  const log = tableLog(values.json);
  log(HEADER);
  const result = runGrpoBench({
    ...(values.tokens ? { tokens: parseTokens(values.tokens) } : {}),
    ...(values.len ? { responseLen: Number(values.len) } : {}),
    ...(values.group ? { groupSize: Number(values.group) } : {}),
    ...(values.repeats ? { repeats: Number(values.repeats) } : {}),
    ...(values.seed ? { seed: Number(values.seed) } : {}),
    ...(values.kl ? { kl: values.kl as KlType | 'none' } : {}),
    log,
  });
  const m = result.machine;
  log(
    `# ${result.date}, ${m.cpu} (${m.cores} cores, load ${m.loadavg.toFixed(1)}), kernel threads ${result.kernelThreads}, ISA ${result.kernelIsa}, node ${m.node}`,
  );
  writeJson(values.json, result);
  if (values.svg) writeFileSync(values.svg, chartSvg(result));
  return result;
}

runWhenInvoked(import.meta.url, 'grpo', main);
