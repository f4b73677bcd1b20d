// The pretrained benchmark (bench/pretrained.ts) in its --quick form through its command-line
// entry: the random checkpoint loads in both dtypes with the expected store sizes (bf16 about the
// file, float32 twice it), forward and sampling rates are measured, the MXFP4 experts take
// 16 / 4.25 times their file bytes once dequantized to bf16 and their file bytes kept packed, and
// the JSON is written.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { type PretrainedBenchResult, main } from '../../../bench/pretrained.js';

t.test('bench/pretrained.ts --quick', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-bench-pretrained-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'r.json');
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void lines.push(a.join(' '));
  let r: PretrainedBenchResult;
  try {
    r = (await main([
      '--quick',
      '--lengths',
      '16,48',
      '--sessions',
      '1,3',
      '--sample-tokens',
      '4',
      '--json',
      file,
    ])) as PretrainedBenchResult;
  } finally {
    console.log = log;
  }
  t.same(JSON.parse(readFileSync(file, 'utf8')).shape, r.shape, 'the JSON is written');
  t.equal(r.shape.hidden, 256);
  const [bf16, f32] = r.loads;
  t.same([bf16.dtype, f32.dtype], ['bfloat16', 'float32']);
  t.ok(
    bf16.storeBytes > 0.99 * r.checkpointBytes && bf16.storeBytes < 1.01 * r.checkpointBytes,
    `bf16 store ${bf16.storeBytes} ≈ file ${r.checkpointBytes}`,
  );
  t.ok(Math.abs(f32.storeBytes / bf16.storeBytes - 2) < 0.02, 'float32 holds twice the bytes');
  t.ok(r.loads.every((l) => l.trackedBytes >= l.storeBytes && l.rssAfterBytes > 0 && l.loadSeconds > 0));
  t.same(
    r.forward.map((p) => [p.dtype, p.length]),
    [
      ['bfloat16', 16],
      ['bfloat16', 48],
      ['float32', 16],
      ['float32', 48],
    ],
  );
  t.ok(r.forward.every((p) => p.tokensPerSecond > 0 && p.cpuTokensPerSecond > 0));
  t.same(
    r.sampling.map((p) => [p.sessions, p.sampledTokens]),
    [
      [1, 4],
      [3, 12],
      [1, 4],
      [3, 12],
    ],
  );
  t.ok(r.sampling.every((p) => p.tokensPerSecond > 0));
  t.ok(
    r.mxfp4 !== null && Math.abs(r.mxfp4.expertFactor - 16 / 4.25) < 1e-9,
    `MXFP4 experts dequantized x${r.mxfp4?.expertFactor}`,
  );
  t.ok(
    r.mxfp4 !== null && Math.abs(r.mxfp4.packedExpertFactor - 1) < 1e-9,
    `MXFP4 experts kept packed x${r.mxfp4?.packedExpertFactor}`,
  );
  t.ok(lines.some((l) => /load average/.test(l)) && lines.some((l) => /MXFP4 experts/.test(l)));
});
