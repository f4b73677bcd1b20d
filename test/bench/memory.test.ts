// A tiny real run of `sinkflex bench memory`: attention path and training step, eager vs fused,
// out of memory under a small limit (caught, with a lower bound), skipping by estimated work,
// the comparisons, Markdown, SVG and JSON, and the CLI.
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { memoryBenchChart, runMemoryBench } from '../../bench/memory.js';
import { buildProgram } from '../../lib/cli/main.js';
import { memory } from '../../lib/native/index.js';

process.env.SINKFLEX_DEVICE = 'cpu';

const MiB = 2 ** 20;

t.test('runMemoryBench measures eager vs fused side by side and catches OOM', async (t) => {
  const lines: string[] = [];
  const shape = { qHeads: 2, kvHeads: 1, headDim: 16, window: 16 };
  const r = await runMemoryBench({
    shape,
    masks: ['window'],
    attentionSeqLens: [64, 2048],
    stepSeqLens: [64, 512],
    models: ['tiny'],
    limitBytes: 40 * MiB,
    repeats: 2,
    log: (l) => lines.push(l),
  });
  t.equal(r.bench, 'memory');
  t.equal(r.limitBytes, 40 * MiB);
  t.equal(r.attention.length, 4);
  const at = (seqLen: number, impl: string) => r.attention.find((p) => p.seqLen === seqLen && p.impl === impl)!;
  // [heads, T, T + 1] fp32 eager scores: three of them in the backward.
  t.ok(at(64, 'eager').peakBytes! >= 3 * 4 * 2 * 64 * 65, 'eager holds score-sized tensors');
  const io = 4 * (4 * 2048 * 2 * 16 + 4 * 2048 * 16);
  t.ok(
    at(2048, 'fused').peakBytes! >= io && at(2048, 'fused').peakBytes! < 2 * io,
    'fused stays near its inputs, outputs and gradients',
  );
  t.equal(at(2048, 'fused').ms!.n, 2, 'two repetitions');
  const oom = at(2048, 'eager');
  t.equal(oom.status, 'oom');
  t.equal(oom.peakBytes, null);
  t.match(oom.note, /out of memory|limit/i);
  t.ok(oom.oomNeedBytes! > 40 * MiB, 'the lower bound exceeds the limit');
  t.equal(memory.limitBytes(), null, 'the limit is restored');
  const c = r.comparisons.find((x) => x.what === 'attention/window' && x.seqLen === 2048)!;
  t.ok(c.lowerBound && c.ratio! > 1);
  t.equal(r.longestFit['fused attention/window'], 2048);
  t.equal(r.longestFit['eager attention/window'], 64);
  t.ok(r.targets.some((x) => /longest fused fit/.test(x.name) && x.value === '2048 / 64 = 32x' && x.met));

  t.equal(r.steps.length, 1);
  const step = r.steps[0]!;
  t.ok(step.stateBytes >= 16 * step.parameters, 'state holds parameters, gradients and two AdamW moments');
  for (const p of step.points) {
    t.equal(p.status, 'ok');
    t.equal(p.totalPeakBytes, p.activationPeakBytes! + step.stateBytes);
  }
  const f512 = step.points.find((p) => p.seqLen === 512 && p.impl === 'fused')!;
  const e512 = step.points.find((p) => p.seqLen === 512 && p.impl === 'eager')!;
  t.ok(e512.activationPeakBytes! > f512.activationPeakBytes!, 'eager keeps its probabilities for the backward');
  const sc = r.comparisons.find((x) => x.what === 'step/tiny' && x.seqLen === 512)!;
  t.equal(sc.reduction, 1 - f512.totalPeakBytes! / e512.totalPeakBytes!);
  t.match(r.markdown, /\| mask \| seqLen \| fused peak \| eager peak \|/);
  t.match(r.markdown, /\| tiny \| 512 \|/);
  t.match(r.markdown, /OOM \(needs > /);
  t.ok(lines.some((l) => /attention path/.test(l)));
  const svg = memoryBenchChart(r);
  t.match(svg, /^<svg/);
  t.match(svg, /eager attention\/window/);
  t.match(svg, /fused step\/tiny/);
  t.match(svg, /out of memory/);
});

t.test('points above --max-gflop are skipped, not faked', async (t) => {
  const r = await runMemoryBench({
    shape: { qHeads: 2, kvHeads: 1, headDim: 8, window: 8 },
    masks: ['full'],
    attentionSeqLens: [32, 4096],
    stepSeqLens: [],
    maxGflop: 0.01,
    limitBytes: 64 * MiB,
    log: null,
  });
  const big = r.attention.filter((p) => p.seqLen === 4096);
  t.ok(big.every((p) => p.status === 'skipped' && p.peakBytes === null && /max-gflop/.test(p.note ?? '')));
  t.equal(r.steps.length, 0);
  t.match(r.markdown, /skipped/);
});

t.test('sinkflex bench lists the benches and bench memory writes JSON and SVG', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-membench-'));
  const out: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void out.push(a.join(' '));
  try {
    await buildProgram().exitOverride().parseAsync(['node', 'sinkflex', 'bench']);
    await buildProgram()
      .exitOverride()
      .parseAsync([
        'node',
        'sinkflex',
        'bench',
        'memory',
        '--shape',
        'tiny',
        '--seqs',
        '32',
        '--masks',
        'full',
        '--step-seqs',
        '32',
        '--model',
        'tiny',
        '--limit',
        '0.25',
        '--json',
        join(dir, 'm.json'),
      ]);
  } finally {
    console.log = log;
  }
  const text = out.join('\n');
  for (const name of ['memory', 'speed', 'attention', 'model-train', 'grpo', 'gym', 'rollout', 'tau'])
    t.match(text, new RegExp(`\\n  ${name} `));
  const json = JSON.parse(readFileSync(join(dir, 'm.json'), 'utf8')) as {
    bench: string;
    attention: unknown[];
    command: string;
  };
  t.equal(json.bench, 'memory');
  t.equal(json.attention.length, 2);
  t.ok(existsSync(join(dir, 'm.svg')));
  await t.rejects(
    buildProgram().exitOverride().parseAsync(['node', 'sinkflex', 'bench', 'memory', '--limit', '0']),
    /--limit: '0'/,
  );
});
