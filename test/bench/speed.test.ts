// A tiny real run of `sinkflex bench speed`: fused vs eager attention and training step side
// by side, repetitions summarised, GFLOP/s against the measured FMA peak, JSON + SVG; and a
// layer benchmark passed through `sinkflex bench <name>`.
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { runSpeedBench, speedBenchChart } from '../../bench/speed.js';
import { buildProgram } from '../../lib/cli/main.js';

process.env.SINKFLEX_DEVICE = 'cpu';

t.test('runSpeedBench times fused and eager side by side', async (t) => {
  const r = await runSpeedBench({
    shape: { qHeads: 2, kvHeads: 1, headDim: 16, window: 8 },
    masks: ['full'],
    attentionSeqLens: [96],
    stepSeqLens: [64],
    models: ['tiny'],
    repeats: 2,
    peakSeconds: 0.05,
    log: null,
  });
  t.ok(r.fmaPeakGflops > 0, 'measured peak');
  t.equal(r.points.length, 2);
  const a = r.points[0]!;
  t.equal(a.what, 'attention/full');
  t.equal(a.gflop, (14 * 16 * 2 * ((96 * 97) / 2)) / 1e9, 'useful work of a causal forward+backward');
  t.equal(a.fusedMs.n, 2);
  t.ok(a.fusedMs.min <= a.fusedMs.median && a.fusedMs.median <= a.fusedMs.max);
  t.equal(a.speedup, a.eagerMs.median / a.fusedMs.median);
  t.equal(a.fusedGflops, a.gflop / (a.fusedMs.median / 1e3));
  t.equal(a.fusedPeakFraction, a.fusedGflops / r.fmaPeakGflops);
  t.equal(a.fusedTokensPerSecond, 96 / (a.fusedMs.median / 1e3));
  const s = r.points[1]!;
  t.equal(s.what, 'step/tiny');
  t.equal(s.eagerMs.n, 2);
  t.match(r.markdown, /\| attention\/full \| 96 \|/);
  t.match(r.markdown, /measured FMA peak/);
  t.match(speedBenchChart(r), /FMA peak/);
});

t.test('sinkflex bench speed writes JSON and SVG; layer benches pass through', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-speedbench-'));
  const log = console.log;
  console.log = () => undefined;
  try {
    await buildProgram()
      .exitOverride()
      .parseAsync([
        'node',
        'sinkflex',
        'bench',
        'speed',
        '--shape',
        'tiny',
        '--seqs',
        '64',
        '--masks',
        'window',
        '--step-seqs',
        'none',
        '--repeats',
        '1',
        '--peak-seconds',
        '0.05',
        '--json',
        join(dir, 's.json'),
      ]);
    await buildProgram()
      .exitOverride()
      .parseAsync([
        'node',
        'sinkflex',
        'bench',
        'attention',
        '--mem-seqs',
        '32',
        '--mem-heads',
        '2/1',
        '--speed-seqs',
        'none',
        '--head-dim',
        '8',
        '--masks',
        'window',
        '--window',
        '8',
        '--limit',
        '1',
        '--json',
        join(dir, 'a.json'),
      ]);
  } finally {
    console.log = log;
  }
  const json = JSON.parse(readFileSync(join(dir, 's.json'), 'utf8')) as { bench: string; points: unknown[] };
  t.equal(json.bench, 'speed');
  t.equal(json.points.length, 1);
  t.ok(existsSync(join(dir, 's.svg')));
  t.ok(existsSync(join(dir, 'a.json')), 'the attention bench ran through the CLI');
  await t.rejects(
    buildProgram().exitOverride().parseAsync(['node', 'sinkflex', 'bench', 'speed', '--repeats', '-2']),
    /--repeats: '-2'/,
  );
});
