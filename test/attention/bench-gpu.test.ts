// The GPU attention benchmark's run function: without a GPU it reports why and measures
// nothing; with one (or the CUDA emulator build) it runs tiny sizes — the structure of the rows,
// eager out of memory under a small limit, the Markdown table, the CLI entry. The table
// formatting and the PyTorch probe are checked on synthetic input everywhere.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { formatBytes, gpuBenchMarkdown, main, runAttentionGpuBench, runTorch } from '../../bench/attention-gpu.js';
import { cudaAvailable } from '../../lib/native/index.js';
import { loadAddon } from '../../lib/native/loader.js';

t.test('the Markdown table and byte formatting', async (t) => {
  t.equal(formatBytes(3 * 2 ** 30), '3.00 GiB');
  t.equal(formatBytes(5.5 * 2 ** 20), '5.5 MiB');
  t.equal(formatBytes(2048), '2.0 KiB');
  t.equal(formatBytes(null, 'out of memory: ...'), 'OOM');
  t.equal(formatBytes(null, 'skipped: time budget'), '—');
  const md = gpuBenchMarkdown({
    device: 'Test GPU',
    date: '2026-01-02T03:04:05Z',
    limitBytes: 80 * 2 ** 30,
    shape: { qHeads: 64, kvHeads: 8, headDim: 64, batch: 1, window: 128, dtype: 'bfloat16' },
    rows: [
      { mask: 'full', seqLen: 1024, impl: 'fused', peakBytes: 2 ** 30, forwardMs: 1.5, backwardMs: 2.5 },
      {
        mask: 'full',
        seqLen: 1024,
        impl: 'eager',
        peakBytes: null,
        forwardMs: null,
        backwardMs: null,
        note: 'out of memory: x',
      },
    ],
    torch: [
      { mask: 'full', seqLen: 1024, impl: 'flex', peakBytes: 2 ** 29, forwardMs: 1, backwardMs: 2 },
      { mask: 'full', seqLen: 1024, impl: 'sdpa', peakBytes: 2 ** 28, forwardMs: 0.5, backwardMs: 1 },
    ],
  });
  t.match(md, /on Test GPU, 2026-01-02: 64\/8 heads, headDim 64/);
  t.match(md, /eager limit 80\.00 GiB/);
  t.match(md, /\| full \| 1024 \| 1\.00 GiB \| OOM \| 4\.0 \| — \| 512\.0 MiB \| 3\.0 \| 1\.5 \|/);
});

t.test('the PyTorch probe says why it did not run', async (t) => {
  const o = {
    torch: true,
    python: 'python3',
    seqLens: [64],
    heads: { qHeads: 2, kvHeads: 1 },
    headDim: 16,
    window: 8,
    masks: ['full' as const],
    repeats: 1,
    torchBudgetSeconds: 10,
  };
  t.same(
    runTorch({ ...o, torch: false }, () => {}),
    { rows: null, note: 'PyTorch comparison not requested' },
  );
  const missing = runTorch({ ...o, python: join(tmpdir(), 'no-such-python') }, () => {});
  t.equal(missing.rows, null);
  t.match(missing.note, /no PyTorch/);
});

t.test(
  'without a GPU nothing is measured',
  { skip: cudaAvailable() ? 'a CUDA device is present' : false },
  async (t) => {
    const lines: string[] = [];
    const r = await runAttentionGpuBench({ log: (l) => lines.push(l) });
    t.equal(r.available, false);
    t.same(r.rows, []);
    t.match(r.device, /^no CUDA device: /);
    t.same(lines, [r.device]);
    const dir = mkdtempSync(join(tmpdir(), 'sinkflex-gpu-bench-'));
    await main(['--no-torch', '--json', join(dir, 'r.json'), '--markdown', join(dir, 'r.md')]);
    t.equal(JSON.parse(readFileSync(join(dir, 'r.json'), 'utf8')).available, false);
    t.match(readFileSync(join(dir, 'r.md'), 'utf8'), /no CUDA device/);
  },
);

t.test(
  'tiny run on the GPU',
  { skip: cudaAvailable() ? false : `no CUDA device: ${loadAddon().cudaStatus().reason}` },
  async (t) => {
    const r = await runAttentionGpuBench({
      seqLens: [64, 160],
      heads: { qHeads: 2, kvHeads: 1 },
      headDim: 16,
      window: 32,
      limitBytes: 300 * 1024,
      repeats: 1,
      torch: false,
      log: null,
    });
    t.equal(r.available, true);
    t.equal(r.rows.length, 8, 'fused and eager per mask and length');
    t.ok(
      r.rows.filter((x) => x.impl === 'fused').every((x) => x.peakBytes! > 0 && x.forwardMs! > 0 && x.backwardMs! > 0),
    );
    const eager160 = r.rows.filter((x) => x.impl === 'eager' && x.seqLen === 160);
    t.ok(
      eager160.every((x) => x.peakBytes === null && /^out of memory/.test(x.note ?? '')),
      'eager past the limit is OOM',
    );
    t.match(r.markdown, /\| window \| 160 \| [\d.]+ KiB \| OOM \|/);
    t.equal(r.torchNote, 'PyTorch comparison not requested');
    const dir = mkdtempSync(join(tmpdir(), 'sinkflex-gpu-bench-'));
    await main([
      '--seqs',
      '64',
      '--heads',
      '2/1',
      '--head-dim',
      '8',
      '--repeats',
      '1',
      '--no-torch',
      '--json',
      join(dir, 'r.json'),
    ]);
    t.equal(JSON.parse(readFileSync(join(dir, 'r.json'), 'utf8')).rows.length, 4);
  },
);
