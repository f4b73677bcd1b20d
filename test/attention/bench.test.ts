// The attention benchmark's run function on tiny sizes: structure of the results, the
// out-of-memory path under a small limit, targets, the SVG chart and the CLI entry.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { memoryChartSvg } from '../../bench/attention-chart.js';
import { main, runAttentionBench, visiblePairs } from '../../bench/attention.js';

// These tests are about the CPU kernels: with a CUDA build on a GPU machine `'auto'` would pick
// the GPU (test/attention/cuda.test.ts covers that), so the default device is pinned to the cpu.
process.env.SINKFLEX_DEVICE = 'cpu';

t.test('runAttentionBench measures memory and speed side by side', async (t) => {
  const lines: string[] = [];
  const r = await runAttentionBench({
    memorySeqLens: [128, 4096],
    memoryHeads: { qHeads: 2, kvHeads: 1 },
    speedSeqLens: [96],
    speedHeads: { qHeads: 2, kvHeads: 1 },
    headDim: 16,
    window: 32,
    limitBytes: 8 * 2 ** 20,
    repeats: 1,
    log: (l) => lines.push(l),
  });
  t.equal(r.memory.length, 8, 'fused and eager per mask and length');
  const eager4096 = r.memory.filter((m) => m.impl === 'eager' && m.seqLen === 4096);
  t.ok(
    eager4096.every((m) => m.peakBytes === null && /out of memory/.test(m.error ?? '')),
    'eager past the limit is reported as OOM',
  );
  const fused = r.memory.filter((m) => m.impl === 'fused');
  t.ok(
    fused.every((m) => m.peakBytes !== null && m.peakBytes >= m.ioBytes),
    'fused fits and counts its inputs and outputs',
  );
  const e128 = r.memory.find((m) => m.impl === 'eager' && m.seqLen === 128 && m.mask === 'full')!;
  t.ok(e128.peakBytes! > 3 * 4 * 2 * 128 * 129, 'eager peak holds three score-sized tensors');
  t.equal(r.speed.length, 2);
  for (const s of r.speed) {
    t.ok(s.fusedGflops > 0 && s.eagerGflops > 0 && s.speedup > 0);
    t.equal(s.speedup, (s.eagerForwardMs + s.eagerBackwardMs) / (s.fusedForwardMs + s.fusedBackwardMs));
  }
  t.ok(r.targets.some((x) => /at 4096 \(full\)/.test(x.name) && x.value === 'eager OOM' && x.met));
  t.ok(lines.some((l) => /eager\/fused/.test(l)));
  t.equal(visiblePairs(5, 0), 15);
  t.equal(visiblePairs(5, 2), 9);
  const svg = memoryChartSvg(r.memory, 'test <chart>', r.limitBytes);
  t.match(svg, /^<svg/);
  t.match(svg, /test &lt;chart&gt;/);
  t.match(svg, /out of memory/);
});

t.test('the CLI writes JSON and SVG', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-bench-'));
  const log = console.log;
  console.log = () => undefined;
  try {
    await main([
      '--mem-seqs',
      '64',
      '--mem-heads',
      '2/1',
      '--speed-seqs',
      'none',
      '--head-dim',
      '8',
      '--masks',
      'window',
      '--window',
      '16',
      '--limit',
      '1',
      '--json',
      join(dir, 'r.json'),
      '--svg',
      join(dir, 'r.svg'),
    ]);
  } finally {
    console.log = log;
  }
  const json = JSON.parse(readFileSync(join(dir, 'r.json'), 'utf8')) as {
    memory: unknown[];
    speed: unknown[];
    command: string;
  };
  t.equal(json.memory.length, 2);
  t.equal(json.speed.length, 0);
  t.match(json.command, /--mem-seqs 64/);
  t.match(readFileSync(join(dir, 'r.svg'), 'utf8'), /<polyline|<circle/);
});
