// bench/train-step.ts: the default run's SFT step and GRPO micro-batch in a child process.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { main, type TrainStepBenchResult } from '../../bench/train-step.js';

t.test('one round of one step: the default model, packed steps up to the budget, FLOP counts', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sfx-train-step-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'r.json');
  const log = console.log;
  console.log = () => {};
  try {
    await main(['--quick', '--json', file]);
  } finally {
    console.log = log;
  }
  const r = JSON.parse(readFileSync(file, 'utf8')) as TrainStepBenchResult;
  t.equal(r.config.vocab, 2048);
  t.equal(r.config.tokenShift, true);
  t.equal(r.variants.length, 1);
  const run = r.variants[0].runs[0];
  for (const s of [run.sft, run.grpo]) {
    t.ok(s.tokens > 6000 && s.tokens <= 8192, `tokens ${s.tokens}`);
    t.ok(s.stepMs > 0 && s.cpuMs > 0);
    t.ok(s.gflop.matrices > 0 && s.gflop.attention > 0);
  }
  t.ok(run.grpo.gflop.matrices > run.sft.gflop.matrices, 'a GRPO micro-batch runs three forwards');
  t.ok(run.peakGflops > 0);
});

t.test('bad options are refused by name', async (t) => {
  await t.rejects(main(['--steps', '0']), /--steps must be a positive integer/);
  await t.rejects(main(['--rounds', 'x']), /--rounds must be a positive integer/);
});
