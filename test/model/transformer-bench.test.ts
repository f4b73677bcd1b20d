// The model-train benchmark's run function on small sizes: result structure, the eager
// out-of-memory path under a small limit, and the command-line entry writing JSON.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { main, runModelTrainBench } from '../../bench/model-train.js';
import { modelConfig } from '../../lib/model/index.js';

t.test('runModelTrainBench measures training, sampling and step memory side by side', async (t) => {
  const lines: string[] = [];
  const model = modelConfig('tiny', {
    layers: 2,
    width: 32,
    heads: 2,
    kvHeads: 1,
    headDim: 16,
    ffn: 32,
    vocab: 64,
    context: 256,
    window: 16,
  });
  const r = await runModelTrainBench({
    model,
    tokensPerStep: 256,
    docLengths: [64, 128, 4096],
    steps: 1,
    sampleBatches: [1, 3],
    promptTokens: 5,
    sampleTokens: 4,
    memorySeqLens: [128, 1024],
    memoryLimitBytes: 24 * 2 ** 20,
    log: (l) => lines.push(l),
  });
  t.same(
    r.train.map((p) => p.docLength),
    [64, 128],
    'document lengths above the context are skipped',
  );
  for (const p of r.train) {
    t.equal(p.tokensPerStep, 256);
    t.ok(p.tokensPerSecond > 0 && p.cpuTokensPerSecond > 0 && p.stepMs > 0);
  }
  t.same(
    r.sampling.map((s) => s.batch),
    [1, 3],
  );
  t.ok(r.sampling.every((s) => s.tokensPerSecond > 0));
  const fused = r.memory.filter((m) => m.impl === 'fused');
  t.ok(
    fused.every((m) => (m.activationPeakBytes ?? 0) > 0),
    'fused steps fit',
  );
  const eager1024 = r.memory.find((m) => m.impl === 'eager' && m.seqLen === 1024);
  t.equal(eager1024?.activationPeakBytes, null, 'eager past the limit is reported as out of memory');
  t.match(eager1024?.error, /out of memory/);
  const eager128 = r.memory.find((m) => m.impl === 'eager' && m.seqLen === 128);
  const fused128 = r.memory.find((m) => m.impl === 'fused' && m.seqLen === 128);
  t.ok(
    (eager128?.activationPeakBytes ?? 0) > (fused128?.activationPeakBytes ?? Infinity),
    'eager needs more memory than fused',
  );
  t.equal(r.targets.length, 3);
  t.ok(lines.some((l) => /peak tracked memory/.test(l)));
});

t.test('main() runs the quick benchmark and writes JSON', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-bench-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'r.json');
  const log = console.log;
  console.log = () => undefined;
  try {
    await main(['--quick', '--json', file, '--limit', '1']);
  } finally {
    console.log = log;
  }
  const r = JSON.parse(readFileSync(file, 'utf8')) as { train: unknown[]; memoryLimitBytes: number };
  t.equal(r.train.length, 1);
  t.equal(r.memoryLimitBytes, 2 ** 30);
});
