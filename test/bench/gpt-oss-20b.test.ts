// bench/gpt-oss-20b.ts on the scaled shape (--quick): the random MXFP4 checkpoint is written,
// loaded packed (resident growth about the checkpoint's bytes) and removed; every phase runs at
// every length with its tracked peak and VmHWM; the memory plan's line goes through the first two
// lengths and is checked at the third; the JSON and the chart are written. memoryPlan's arithmetic
// on made-up points.
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { type PhasePoint, main, memoryPlan } from '../../bench/gpt-oss-20b.js';

t.test('memoryPlan: fixed + per-token through two lengths, the third checked', async (t) => {
  const point = (tokens: number, above: number): PhasePoint => ({
    phase: 'sft',
    tokens,
    status: 'ok',
    seconds: 1,
    tokensPerSecond: tokens,
    cpuSeconds: 1,
    cpuTokensPerSecond: tokens,
    trackedPeakAboveModelBytes: above,
    trackedPeakBytes: above + 1000,
    vmHwmBytes: 0,
    vmHwmReset: true,
  });
  const rows = memoryPlan([point(100, 300), point(200, 500), point(50, 210)], [100, 200], 50, [1000], 1000, 900);
  t.equal(rows.length, 1, 'one row per phase with two lengths');
  t.equal(rows[0].perTokenBytes, 2);
  t.equal(rows[0].fixedBytes, 100);
  t.same(rows[0].points, [{ tokens: 1000, cpuBytes: 1000 + 100 + 2000, gpuBytes: 900 + 100 + 2000 }]);
  t.equal(rows[0].check!.predictedBytes, 200);
  t.ok(
    Math.abs(rows[0].check!.relativeError - 10 / 210) < 1e-12,
    'the check says how far the third length is from the line',
  );
});

t.test('sinkflex bench gpt-oss-20b --quick', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-bench-gptoss-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const json = join(dir, 'r.json');
  const log = console.log;
  console.log = () => undefined;
  let r;
  try {
    r = await main(['--quick', '--dir', dir, '--json', json]);
  } finally {
    console.log = log;
  }
  t.same(readdirSync(dir).sort(), ['r.json', 'r.svg'], 'the checkpoint was removed; the JSON and the chart written');
  t.equal(JSON.parse(readFileSync(json, 'utf8')).bench, 'gpt-oss-20b');
  t.ok(existsSync(join(dir, 'r.svg')));
  t.equal(r.shape.layers, 2);
  t.ok(r.load !== null && r.load.checkpointBytes > 0 && r.load.storeBytes > 0 && r.load.loadSeconds > 0);
  t.same(
    r.phases.map((p) => `${p.phase}@${p.tokens}`),
    ['logprobs@32', 'sft@32', 'grpo@32', 'logprobs@64', 'sft@64', 'grpo@64', 'logprobs@16', 'sft@16', 'grpo@16'],
  );
  t.ok(
    r.phases.every(
      (p) => p.status === 'ok' && p.trackedPeakAboveModelBytes! > 0 && p.tokensPerSecond! > 0 && p.vmHwmBytes > 0,
    ),
  );
  t.same(
    r.plan.map((row) => row.phase),
    ['logprobs', 'sft', 'grpo'],
  );
  t.ok(r.plan.every((row) => row.check !== null && row.points.length === 5 && row.perTokenBytes > 0));
  t.match(r.markdown, /Memory plan, grpo/);
});

t.test('the training phases run with the activation checkpointing asked for', async (t) => {
  const perToken = async (mode: string): Promise<Record<string, number>> => {
    const dir = mkdtempSync(join(tmpdir(), 'sinkflex-bench-gptoss-ckpt-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const log = console.log;
    console.log = () => undefined;
    try {
      const r = await main(['--quick', '--dir', dir, '--checkpointing', mode, '--check-length', '0']);
      return Object.fromEntries(r.plan.map((row) => [row.phase, row.perTokenBytes]));
    } finally {
      console.log = log;
    }
  };
  const none = await perToken('none');
  const layers = await perToken('layers');
  for (const phase of ['sft', 'grpo']) {
    t.ok(
      layers[phase] < none[phase],
      `${phase}: 'layers' keeps fewer bytes a token than 'none' (${layers[phase]} < ${none[phase]})`,
    );
  }
});
