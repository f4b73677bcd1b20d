import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { configFromFlags, defaultOut, runTrainCommand } from '../../lib/cli/commands/train.js';
import { runEval } from '../../lib/cli/commands/eval.js';
import { listEnvs } from '../../lib/cli/commands/env.js';
import { ProgressBar } from '../../lib/cli/commands/progress.js';
import { buildProgram } from '../../lib/cli/main.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-cli-'));

t.test('flags resolve the config: preset ← file ← --set ← flags', async (t) => {
  const file = join(tmp, 'c.toml');
  writeFileSync(file, '[grpo]\nsteps = 11\nlr = 0.002\n');
  const c = configFromFlags({ preset: 'smoke', config: file, set: ['grpo.lr=0.003', 'prompt.renderTools=true'], steps: '4', sftSteps: '2', seed: '7', env: 'sinkflex/TauTelecom-v0' });
  t.equal(c.preset, 'smoke');
  t.equal(c.grpo.steps, 4, '--steps beats the file');
  t.equal(c.grpo.lr, 0.003, '--set beats the file');
  t.equal(c.prompt.renderTools, true);
  t.equal(c.sft.steps, 2);
  t.equal(c.seed, 7);
  t.equal(c.env, 'sinkflex/TauTelecom-v0');
  t.throws(() => configFromFlags({ steps: 'x' }), /--steps/);
  t.throws(() => configFromFlags({ set: ['grpo.lr=-1'] }), /grpo\.lr/);
  t.throws(() => configFromFlags({ env: 'nope' }), /env/);
  t.match(defaultOut('smoke', new Date(Date.UTC(2026, 0, 2, 3, 4, 5))), /runs[/\\]smoke-20260102-030405$/);
});

t.test('sinkflex train (smoke) runs, prints a summary, resumes', async (t) => {
  const out = join(tmp, 'run');
  const lines: string[] = [];
  const r = await runTrainCommand({ preset: 'smoke', out, steps: '2', stopAfter: '1', progress: false, json: true }, (l) => lines.push(l));
  t.equal(r.step, 1);
  const summary = JSON.parse(lines[lines.length - 1]) as { steps: number; out: string };
  t.equal(summary.steps, 1);
  const lines2: string[] = [];
  const r2 = await runTrainCommand({ resume: out, progress: false }, (l) => lines2.push(l));
  t.equal(r2.step, 2, 'the resumed run uses the run folder’s config (2 steps)');
  t.match(lines2.join('\n'), /validation mean@1/);
  t.match(lines2.join('\n'), /report\.html/);
  t.equal(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).grpo.steps, 2);
});

t.test('sinkflex eval on the run: its validation tasks, prompt and limits reproduce its last validation', async (t) => {
  const out = join(tmp, 'run');
  const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as { val: { trials: number; seed: number } };
  const rows = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  const lastVal = rows.filter((r) => r.phase === 'val').pop();
  t.ok(lastVal, 'the run validated');
  const report = await runEval({ policy: 'builtin', checkpoint: out, trials: config.val.trials, seed: config.val.seed, episodeRetries: 0 });
  t.match(report.policy, /step 2/, 'the newest checkpoint of the run');
  t.equal(report.meanReward, lastVal?.['val-core/tau-retail/reward/mean@1'], 'same mean@1 as the trainer measured');
  // the command line too: no flag default may override what the run brings (tasks, trials, seed,
  // limits, temperature, prompt format)
  const printed: string[] = [];
  const log = console.log;
  console.log = (s: string) => void printed.push(s);
  try {
    await buildProgram().parseAsync(['node', 'sinkflex', 'eval', '--checkpoint', out, '--json', '--no-progress']);
  } finally {
    console.log = log;
  }
  const cli = JSON.parse(printed.join('\n')) as { meanReward: number; trials: number };
  t.equal(cli.trials, config.val.trials, 'sinkflex eval --checkpoint <run>: the run\'s validation trials');
  t.equal(cli.meanReward, lastVal?.['val-core/tau-retail/reward/mean@1'], 'sinkflex eval --checkpoint <run> reproduces the last validation');
  await t.rejects(runEval({ policy: 'builtin', checkpoint: out, env: 'sinkflex/TauTelecom-v0', tasks: 'run' }), /trained on sinkflex\/TauRetail-v0/);
  await t.rejects(runEval({ policy: 'builtin', tasks: 'run' }), /needs --checkpoint/);
});

t.test('env list and the commands are registered', async (t) => {
  const rows = listEnvs();
  const ids = rows.map((r) => r.id);
  t.ok(ids.includes('sinkflex/TauRetail-v0') && ids.includes('sinkflex/TauTelecom-v0'));
  t.same(rows.filter((r) => r.trainable).map((r) => r.id).sort(), ['sinkflex/TauRetail-v0', 'sinkflex/TauTelecom-v0']);
  const program = buildProgram();
  const names = program.commands.map((c) => c.name());
  t.ok(names.includes('train') && names.includes('env'));
  const logs: string[] = [];
  const orig = console.log;
  console.log = (s: string) => void logs.push(s);
  try {
    await buildProgram().parseAsync(['node', 'sinkflex', 'env', 'list']);
    await buildProgram().parseAsync(['node', 'sinkflex', 'env', 'list', '--json']);
  } finally {
    console.log = orig;
  }
  t.match(logs[0], /sinkflex\//);
  t.ok(logs.some((l) => l.includes('* sinkflex/TauRetail-v0')));
  t.same((JSON.parse(logs[logs.length - 1]) as unknown[]).length, rows.length);
  const help = program.commands.find((c) => c.name() === 'train')?.helpInformation() ?? '';
  for (const flag of ['--config', '--preset', '--set', '--steps', '--seed', '--out', '--env', '--resume', '--stop-after']) t.match(help, flag);
});

t.test('progress bar: draws on a TTY only', async (t) => {
  const chunks: string[] = [];
  const fake = { isTTY: true, columns: 80, write: (s: string) => chunks.push(s) } as unknown as NodeJS.WriteStream;
  const bar = new ProgressBar(fake);
  bar.start('grpo', 4);
  bar.update(2, 'reward 0.5');
  t.equal(bar.render(8), 'grpo [####----] 2/4 reward 0.5');
  bar.log('validation: 0.5');
  bar.stop();
  t.ok(chunks.some((c) => c.includes('validation: 0.5')));
  const none: string[] = [];
  const quiet = new ProgressBar({ isTTY: false, write: (s: string) => none.push(s) } as unknown as NodeJS.WriteStream);
  quiet.start('x', 1);
  quiet.update(1);
  quiet.log('hidden');
  quiet.stop();
  t.equal(none.length, 0, 'nothing when not a TTY');
});
