// bench/gemm-gpu.ts without timing GEMMs: the masked query-key pair count behind the attention
// TFLOP/s (against a brute-force count), and the command line turning an attention benchmark's
// JSON into TFLOP/s lines (forward 4 D flops a pair per head, backward 2.5x). The GEMM timings
// themselves run in bench/gpu-check.sh on a GPU; the timer's checks are in
// test/model/cuda-gemm-tc.test.ts.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { main, maskedPairs } from '../../bench/gemm-gpu.js';

t.test('maskedPairs counts the causal (windowed) query-key pairs', async (t) => {
  for (const [s, w] of [
    [1, 0],
    [7, 0],
    [7, 3],
    [7, 7],
    [7, 9],
    [130, 128],
    [300, 128],
  ] as const) {
    let brute = 0;
    for (let i = 0; i < s; i++) for (let j = 0; j <= i; j++) if (w === 0 || i - j < w) brute++;
    t.equal(maskedPairs(s, w), brute, `seq ${s}, window ${w}`);
  }
});

t.test('--only-attention prints the attention rows as TFLOP/s', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sfx-gemm-bench-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'attention-gpu.json');
  writeFileSync(
    file,
    JSON.stringify({
      shape: { qHeads: 64, kvHeads: 8, headDim: 64, batch: 1, window: 128 },
      rows: [{ impl: 'fused', mask: 'full', seqLen: 4096, forwardMs: 2, backwardMs: 5, peakBytes: 1 }],
      torch: [{ impl: 'flex', mask: 'window', seqLen: 4096, forwardMs: null, backwardMs: 1, peakBytes: 1 }],
    }),
  );
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void lines.push(a.join(' '));
  let r;
  try {
    r = main(['--only-attention', '--attention', file]);
  } finally {
    console.log = log;
  }
  t.equal(r.rows.length, 0, 'no GEMM timed');
  const fwd = 4 * 64 * maskedPairs(4096, 0) * 64;
  t.equal(r.attention[0]!.forwardTflops, fwd / 2e-3 / 1e12, 'forward: 4 D flops a pair per head');
  t.equal(r.attention[0]!.backwardTflops, (2.5 * fwd) / 5e-3 / 1e12, 'backward: 2.5x the forward');
  t.equal(r.attention[1]!.forwardTflops, null, 'an unmeasured time stays null');
  t.equal(r.attention[1]!.backwardTflops, (2.5 * 4 * 64 * maskedPairs(4096, 128) * 64) / 1e-3 / 1e12, 'windowed pairs');
  t.equal(lines.filter((l) => l.startsWith('attention gpu: ')).length, 2, 'one line per row');
});
