import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import {
  configFromFlags,
  defaultOut,
  runTrainCommand,
  type TrainCommandOptions,
} from '../../lib/cli/commands/train.js';
import type { TrainEvent } from '../../lib/trainer/index.js';
import { formatEvalReport, runEval } from '../../lib/cli/commands/eval.js';
import { listEnvs } from '../../lib/cli/commands/env.js';
import { ProgressBar } from '../../lib/cli/commands/progress.js';
import { trainProgress } from '../../lib/cli/commands/train-progress.js';
import { buildProgram } from '../../lib/cli/main.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-cli-'));

t.test('flags resolve the config: preset ← file ← --set ← flags', async (t) => {
  const file = join(tmp, 'c.toml');
  writeFileSync(file, '[grpo]\nsteps = 11\nlr = 0.002\n');
  const c = configFromFlags({
    preset: 'smoke',
    config: file,
    set: ['grpo.lr=0.003', 'prompt.renderTools=true'],
    steps: '4',
    sftSteps: '2',
    seed: '7',
    env: 'sinkflex/TauTelecom-v0',
  });
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
  const hf = configFromFlags({ preset: 'smoke', modelDir: 'models/Qwen3-0.6B', set: ['model.lora.rank=8'] });
  t.equal(hf.model.source, 'hf:models/Qwen3-0.6B', '--model-dir sets model.source');
  t.same(hf.model.lora, { rank: 8, alpha: 32, targets: 'all-linear', rslora: false }, 'LoRA by default');
  t.equal(
    configFromFlags({ modelDir: 'm', set: ['model.lora=null'] }).model.lora,
    null,
    'model.lora=null: full fine-tuning',
  );
  t.throws(() => configFromFlags({ modelDir: '' }), /--model-dir needs/);
  t.match(defaultOut('smoke', new Date(Date.UTC(2026, 0, 2, 3, 4, 5))), /runs[/\\]smoke-20260102-030405$/);
});

/** A fake stream (not a TTY unless said) that collects what is written. */
function fakeStream(isTTY = false): { isTTY: boolean; columns: number; text: string[]; write: (s: string) => boolean } {
  const text: string[] = [];
  return { isTTY, columns: 100, text, write: (s: string) => text.push(s) > 0 };
}

t.test('sinkflex train (smoke) runs, prints a summary, resumes', async (t) => {
  const out = join(tmp, 'run');
  const lines: string[] = [];
  const err1 = fakeStream();
  const r = await runTrainCommand(
    { preset: 'smoke', out, steps: '2', stopAfter: '1', progress: false, json: true },
    (l) => lines.push(l),
    { stdout: fakeStream(), stderr: err1 },
  );
  t.equal(r.step, 1);
  const summary = JSON.parse(lines[lines.length - 1]) as { steps: number; out: string };
  t.equal(summary.steps, 1);
  t.notOk(
    lines.slice(0, -1).some((l) => l.startsWith('{') || /grpo 1\/2/.test(l)),
    '--json: stdout holds the summary, not the progress lines',
  );
  t.match(err1.text.join(''), /grpo 1\/2 reward/, '--json: the progress lines go to stderr');

  // outside a terminal (npm start > log, CI): plain lines on stdout, no control codes
  const lines2: string[] = [];
  const err2 = fakeStream();
  const r2 = await runTrainCommand({ resume: out }, (l) => lines2.push(l), { stdout: fakeStream(false), stderr: err2 });
  t.equal(r2.step, 2, 'the resumed run uses the run folder’s config (2 steps)');
  const text2 = lines2.join('\n');
  t.match(text2, /\[grpo\] GRPO steps 2\.\.2/, 'phase lines');
  t.match(text2, /^grpo 2\/2 reward [\d.]+ kl \S+ ent [\d.]+ len \d+ [\d.]+s\/step$/m, 'a line per GRPO step');
  t.match(text2, /^validation after step 2: mean@1 [\d.]+, pass\^k pass\^1=/m, 'validation results');
  // eslint-disable-next-line no-control-regex -- the escape character is what the test looks for
  t.notMatch(text2, /\x1b|\r/, 'no terminal control codes');
  t.equal(err2.text.length, 0, 'no bar drawn on a stderr that is not a TTY');
  t.match(text2, /validation mean@1/);
  t.match(text2, /report\.html/);
  t.equal(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).grpo.steps, 2);
});

t.test('sinkflex train: plain lines on a terminal only when no bar is drawn', async (t) => {
  const events: TrainEvent[] = [
    { kind: 'phase', phase: 'sft', message: 'SFT on 3 demonstrations' },
    ...Array.from({ length: 20 }, (_, i): TrainEvent => ({ kind: 'sft', step: i + 1, total: 20, loss: 1 / (i + 1) })),
  ];
  // a TTY with a bar: the bar only (plain lines would duplicate it)
  const tty = fakeStream(true);
  const barOn = trainProgress({ bar: new ProgressBar(tty), plain: null, warn: () => undefined, source: 'tau-retail' });
  for (const e of events) barOn(e);
  t.ok(
    tty.text.some((c) => c.includes('SFT on 3')),
    'the bar prints the phase',
  );
  // plain: phases and SFT steps about every tenth of the phase
  const plain: string[] = [];
  const off = trainProgress({
    bar: new ProgressBar(fakeStream(false)),
    plain: (l) => plain.push(l),
    warn: () => undefined,
    source: 'tau-retail',
  });
  for (const e of events) off(e);
  t.same(plain, [
    '[sft] SFT on 3 demonstrations',
    ...[2, 4, 6, 8, 10, 12, 14, 16, 18, 20].map((k) => `sft ${k}/20 loss ${(1 / k).toFixed(3)}`),
  ]);
  const warned: string[] = [];
  trainProgress({
    bar: new ProgressBar(fakeStream(false)),
    plain: null,
    warn: (l) => warned.push(l),
    source: 'tau-retail',
  })({ kind: 'warning', message: 'x' });
  t.same(warned, ['warning: x']);
});

t.test('sinkflex eval on the run: its validation tasks, prompt and limits reproduce its last validation', async (t) => {
  const out = join(tmp, 'run');
  const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as {
    val: { trials: number; seed: number };
  };
  const rows = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const lastVal = rows.filter((r) => r.phase === 'val').pop();
  t.ok(lastVal, 'the run validated');
  const report = await runEval({
    policy: 'builtin',
    checkpoint: out,
    trials: config.val.trials,
    seed: config.val.seed,
    episodeRetries: 0,
  });
  t.match(report.policy, /step 2/, 'the newest checkpoint of the run');
  t.equal(report.meanReward, lastVal?.['val-core/tau-retail/reward/mean@1'], 'same mean@1 as the trainer measured');
  t.ok(report.perKind.length >= 2, `per task kind (${report.perKind.map((k) => k.kind).join(', ')})`);
  for (const k of report.perKind) {
    t.equal(
      k.meanReward,
      lastVal?.[`val-core/tau-retail/${k.kind}/reward/mean@1`],
      `${k.kind}: same mean@1 as the trainer measured`,
    );
    t.equal(k.episodes, lastVal?.[`val-aux/tau-retail/${k.kind}/episodes`]);
  }
  const table = formatEvalReport(report);
  t.match(table, /^kind +tasks +episodes +mean@1 +success$/m, 'the per-kind table');
  for (const k of report.perKind)
    t.match(table, new RegExp(`^${k.kind} +${k.tasks} +${k.episodes} +${k.meanReward.toFixed(4)} `, 'm'));
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
  t.equal(cli.trials, config.val.trials, "sinkflex eval --checkpoint <run>: the run's validation trials");
  t.equal(
    cli.meanReward,
    lastVal?.['val-core/tau-retail/reward/mean@1'],
    'sinkflex eval --checkpoint <run> reproduces the last validation',
  );
  await t.rejects(
    runEval({ policy: 'builtin', checkpoint: out, env: 'sinkflex/TauTelecom-v0', tasks: 'run' }),
    /trained on sinkflex\/TauRetail-v0/,
  );
  await t.rejects(runEval({ policy: 'builtin', tasks: 'run' }), /needs --checkpoint/);
});

t.test('env list and the commands are registered', async (t) => {
  const rows = listEnvs();
  const ids = rows.map((r) => r.id);
  t.ok(ids.includes('sinkflex/TauRetail-v0') && ids.includes('sinkflex/TauTelecom-v0'));
  t.same(
    rows
      .filter((r) => r.trainable)
      .map((r) => r.id)
      .sort(),
    ['sinkflex/TauRetail-v0', 'sinkflex/TauTelecom-v0'],
  );
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
  for (const flag of [
    '--config',
    '--preset',
    '--set',
    '--steps',
    '--seed',
    '--out',
    '--env',
    '--resume',
    '--stop-after',
  ])
    t.match(help, flag);
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

t.test(
  'sinkflex train --resume: flags of a new run are refused, --steps extends, checkpoint folders resolve to their run',
  async (t) => {
    const out = join(tmp, 'run');
    const quiet = { stdout: fakeStream(), stderr: fakeStream() };
    const cases: [TrainCommandOptions, string][] = [
      [{ seed: '3' }, '--seed'],
      [{ set: ['grpo.lr=0.1'] }, '--set'],
      [{ preset: 'smoke' }, '--preset'],
      [{ env: 'sinkflex/TauTelecom-v0' }, '--env'],
      [{ config: 'c.toml' }, '--config'],
      [{ sftSteps: '4' }, '--sft-steps'],
      [{ out: join(tmp, 'elsewhere') }, '--out'],
    ];
    for (const [flags, named] of cases) {
      await t.rejects(
        runTrainCommand({ resume: out, ...flags }, () => undefined, quiet),
        {
          name: 'ConfigError',
          message: new RegExp(`^${named} cannot be used with --resume: .*What can change on resume: --steps`),
        },
        `${named} is refused`,
      );
    }
    await t.rejects(
      runTrainCommand({ resume: out, seed: '1', env: 'x' }, () => undefined, quiet),
      /^--seed, --env cannot be used with --resume/,
      'every refused flag is named',
    );
    await t.rejects(
      runTrainCommand({ resume: out, modelDir: 'models/x' }, () => undefined, quiet),
      /modelDir: .* is a run of the built-in model, which has no base model folder/,
      '--model-dir: only for a run of a pretrained model',
    );
    await t.rejects(
      runTrainCommand({ resume: out, steps: '-1' }, () => undefined, quiet),
      /--steps must be an integer >= 0/,
    );
    await t.rejects(
      runTrainCommand({ resume: out, steps: '1' }, () => undefined, quiet),
      /newest checkpoint is at GRPO step 2/,
    );
    t.equal(
      JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).grpo.steps,
      2,
      'a refused resume changes nothing',
    );

    // the newest checkpoint folder resumes its run (eval and serve accept it too); an older one is refused
    t.same(readdirSync(join(out, 'checkpoints')).sort(), ['step-1', 'step-2']);
    await t.rejects(
      runTrainCommand({ resume: join(out, 'checkpoints', 'step-1') }, () => undefined, quiet),
      /step 1 of the run .*newest checkpoint is step 2; resuming continues a run from its newest checkpoint/,
    );
    const lines: string[] = [];
    const r = await runTrainCommand(
      { resume: join(out, 'checkpoints', 'step-2'), steps: '3' },
      (l) => lines.push(l),
      quiet,
    );
    t.match(lines[0], /resuming .*run \(the run of the checkpoint .*step-2\), GRPO steps → 3/);
    t.equal(r.out, out, 'the run folder, not the checkpoint folder');
    t.equal(r.step, 3, '--steps 3 extends the finished 2-step run by one step');
    t.same(
      readdirSync(join(out, 'checkpoints')).sort(),
      ['step-2', 'step-3'],
      'nothing written inside the checkpoint folder',
    );
    t.equal(
      JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).grpo.steps,
      3,
      'the new total is saved with the run',
    );
  },
);
