import {
  appendFileSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { TauEnv, type TauEnvAction } from '../../lib/gym/index.js';
import { cudaAvailable } from '../../lib/native/index.js';
import {
  ScriptedRetailUser,
  taskKind,
  type TauTask,
  type UserSimulator,
  type UserTurnInput,
} from '../../lib/tau/index.js';
import type { OpenAIToolSchema } from '../../lib/tau/index.js';
import {
  buildWorld,
  loadPolicy,
  resolveConfig,
  train,
  type MetricsRow,
  type TrainConfig,
} from '../../lib/trainer/index.js';
import { listCheckpoints } from '../../lib/trainer/checkpoint.js';
import { stepTasks } from '../../lib/trainer/trainer.js';
import { listValidationSteps, readValidationLog } from '../../lib/trainer/validation-log.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-train-'));

function readRows(out: string): MetricsRow[] {
  return readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as MetricsRow);
}

/** Rows without wall-clock fields. */
function untimed(rows: readonly MetricsRow[]): MetricsRow[] {
  return rows.map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !k.startsWith('timing_s/'))));
}

const smoke: TrainConfig = resolveConfig({ preset: 'smoke' });

t.test('the smoke preset runs every stage and writes the run folder; resume equals an uninterrupted run', async (t) => {
  const a = join(tmp, 'a');
  const events: string[] = [];
  const ra = await train(smoke, { out: a, onEvent: (e) => events.push(e.kind === 'phase' ? e.phase : e.kind) });
  t.equal(ra.step, smoke.grpo.steps);
  for (const phase of ['tokenizer', 'demonstrations', 'sft', 'validation', 'grpo', 'done'])
    t.ok(events.includes(phase), `phase ${phase}`);
  t.ok(ra.wallS > 0 && ra.cpuS > 0);
  t.ok(ra.firstValMeanAt1 !== null && ra.lastValMeanAt1 !== null);

  // run folder
  t.same(JSON.parse(readFileSync(join(a, 'config.json'), 'utf8')), smoke, 'config.json holds the resolved config');
  const rows = readRows(a);
  const grpoRows = rows.filter((r) => r.phase === 'grpo');
  t.equal(grpoRows.length, smoke.grpo.steps, 'one row per GRPO step');
  const needed = [
    'actor/pg_loss',
    'actor/pg_clipfrac',
    'actor/ppo_kl',
    'actor/kl_loss',
    'actor/entropy',
    'actor/grad_norm',
    'critic/score/mean',
    'critic/advantages/mean',
    'response_length/mean',
    'rollout/aborted',
    'timing_s/gen',
    'timing_s/old_log_prob',
    'timing_s/ref',
    'timing_s/adv',
    'timing_s/update_actor',
    'timing_s/step',
  ];
  for (const k of needed)
    t.ok(
      grpoRows.every((r) => typeof r[k] === 'number' && Number.isFinite(r[k] as number)),
      `metric ${k}`,
    );
  t.ok(
    grpoRows.every((r) => (r['rollout/logprob_abs_diff'] as number) < 1e-4),
    'old log-probs recomputed at the rollout temperature match the sampler’s',
  );
  const val = rows.filter((r) => r.phase === 'val');
  t.same(
    val.map((r) => r.step),
    [0, 2, 3],
    'validation after SFT, every val.every steps and at the end',
  );
  t.ok(
    val.every(
      (r) =>
        typeof r['val-core/tau-retail/reward/mean@1'] === 'number' &&
        typeof r['val-core/tau-retail/reward/pass^2'] === 'number',
    ),
  );
  // per task kind: the kinds of the validation tasks, each with its episodes
  const valKinds = buildWorld(smoke).valIds.map((id) => taskKind(buildWorld(smoke).world.task(id)) as string);
  t.ok(new Set(valKinds).size >= 2, `several kinds among the validation tasks (${valKinds.join(', ')})`);
  for (const kind of new Set(valKinds)) {
    t.ok(
      val.every((r) => typeof r[`val-core/tau-retail/${kind}/reward/mean@1`] === 'number'),
      `val-core/tau-retail/${kind}/reward/mean@1`,
    );
    t.ok(
      val.every(
        (r) =>
          r[`val-aux/tau-retail/${kind}/episodes`] === smoke.val.trials * valKinds.filter((k) => k === kind).length,
      ),
      `${kind}: episodes`,
    );
  }
  t.same(listValidationSteps(a), [0, 2, 3], 'a transcript file per validation');
  const v0 = readValidationLog(a, 0).transcripts;
  t.same([...new Set(v0.map((x) => x.kind))].sort(), [...new Set(valKinds)].sort(), 'transcripts of every kind');
  t.ok(
    v0.every((x) => x.messages.some((m) => m.role === 'user') && x.messages.every((m) => m.role !== 'system')),
    'conversations without the system prompt',
  );
  const sft = rows.filter((r) => r.phase === 'sft-summary');
  t.equal(sft.length, 1);
  t.ok((sft[0]['sft/demonstrations'] as number) > 0, 'SFT trained on demonstrations');
  t.same(listCheckpoints(a), [2, 3], `keeps the last ${smoke.output.keepCheckpoints} checkpoints`);
  t.same(readdirSync(join(a, 'checkpoints', 'step-3')).sort(), [
    'config.json',
    'policy.safetensors',
    'tokenizer.json',
    'trainer.json',
  ]);
  t.notOk(
    readdirSync(join(a, 'checkpoints')).some((n) => n.startsWith('.tmp')),
    'no temporary folder left',
  );
  t.ok(existsSync(join(a, 'reference.safetensors')), 'the KL reference is saved');
  const samples = readFileSync(join(a, 'samples', 'step-1.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { reward: number; messages: { role: string }[] });
  t.equal(samples.length, smoke.output.samplesPerStep);
  t.ok(
    samples.every(
      (s) =>
        typeof s.reward === 'number' &&
        s.messages[0].role === 'system' &&
        s.messages.some((m) => m.role === 'assistant'),
    ),
    'samples are OpenAI chat conversations with rewards',
  );
  const html = readFileSync(join(a, 'report.html'), 'utf8');
  t.match(html, /<svg/);
  t.match(html, /validation reward/);
  t.match(html, /<h2>Validation by task kind<\/h2>/);
  t.match(html, /<h2>Validation conversations<\/h2>/);
  t.equal((html.match(/<details class="val"/g) ?? []).length, 3, 'the transcripts of each validation');

  // the policy as the run trained it
  const loaded = await loadPolicy(a);
  t.equal(loaded.run?.step, 3);
  t.equal(loaded.checkpoint, join(a, 'checkpoints', 'step-3'), 'the newest checkpoint folder');
  t.equal(loaded.run?.env, 'sinkflex/TauRetail-v0');
  t.equal(loaded.run?.prompt.renderTools, false);
  t.match(loaded.run?.prompt.systemPrompt({}) ?? '', /retail customer service agent/);
  t.equal(loaded.chat.tokenizer.vocabSize, loaded.policy.tokenizer?.vocabSize);
  loaded.policy.dispose();
  const older = await loadPolicy(join(a, 'checkpoints', 'step-2'));
  t.equal(older.run?.step, 2);
  older.policy.dispose();
  const bare = await loadPolicy(join(a, 'checkpoints', 'step-2', 'policy.safetensors'));
  t.equal(bare.run, null, 'a bare .safetensors file: no run');
  t.equal(bare.chat.tokenizer.vocabSize, loaded.chat.tokenizer.vocabSize);
  bare.policy.dispose();
  const empty = join(tmp, 'empty');
  mkdirSync(empty);
  await t.rejects(loadPolicy(empty), /neither a run folder \(config\.json\), a checkpoint folder/);
  await t.rejects(loadPolicy(join(tmp, 'nothing-here')), /no checkpoint at/);
  const fresh = join(tmp, 'fresh-run');
  mkdirSync(fresh);
  writeFileSync(join(fresh, 'config.json'), readFileSync(join(a, 'config.json')));
  copyFileSync(join(a, 'reference.safetensors'), join(fresh, 'reference.safetensors'));
  await t.rejects(
    loadPolicy(fresh),
    /run folder .* has no checkpoint yet/,
    'a run without checkpoints is not loaded from its KL reference',
  );

  // stop after step 1, resume, compare
  const b = join(tmp, 'b');
  const rb1 = await train(smoke, { out: b, stopAfter: 1 });
  t.equal(rb1.step, 1);
  t.same(listCheckpoints(b), [0, 1]);
  await t.rejects(train(smoke, { out: b }), /already holds a run/);
  // ending a stopped run where it stands: it validates at its end as a 1-step run does
  const b1 = join(tmp, 'b1');
  cpSync(b, b1, { recursive: true });
  const rb1end = await train(resolveConfig(), { out: b1, resume: true, steps: 1 });
  t.equal(rb1end.step, 1);
  t.same(
    readRows(b1)
      .filter((r) => r.phase === 'val')
      .map((r) => r.step),
    [0, 1],
    'the end validation of a 1-step run',
  );
  const rb2 = await train(resolveConfig(), { out: b, resume: true });
  t.equal(rb2.step, smoke.grpo.steps);
  t.same(untimed(readRows(b)), untimed(readRows(a)), 'metrics.jsonl identical to the uninterrupted run (timing aside)');
  t.same(
    listValidationSteps(b).map((s) => readValidationLog(b, s)),
    listValidationSteps(a).map((s) => readValidationLog(a, s)),
    'validation transcripts identical too',
  );
  t.match(html, /<title>sinkflex train: a<\/title>/, 'the report is titled with the run folder’s name');
  t.notOk(html.includes(tmp), 'the report holds no machine path');

  // a kill leaves a torn metrics line and temporaries behind: the resume drops and removes them
  const tornB = join(tmp, 'b-torn');
  cpSync(b, tornB, { recursive: true });
  appendFileSync(join(tornB, 'metrics.jsonl'), '{"step":4,"phase":"grpo","actor/pg_l');
  mkdirSync(join(tornB, 'checkpoints', '.tmp-step-4-99999'));
  writeFileSync(join(tornB, 'checkpoints', '.tmp-step-4-99999', 'policy.safetensors'), 'partial');
  writeFileSync(join(tornB, 'report.html.tmp-99999'), 'partial');
  const warnings: string[] = [];
  const rt = await train(resolveConfig(), {
    out: tornB,
    resume: true,
    onEvent: (e) => void (e.kind === 'warning' && warnings.push(e.message)),
  });
  t.equal(rt.step, smoke.grpo.steps);
  t.match(warnings.join('\n'), /metrics\.jsonl: dropped a torn last line/);
  t.match(
    warnings.join('\n'),
    /removed 2 temporary file\(s\) left by an interrupted run: .*\.tmp-step-4-99999.*report\.html\.tmp-99999/,
  );
  t.notOk(
    readdirSync(join(tornB, 'checkpoints')).some((n) => n.startsWith('.tmp')),
    'no stale checkpoint folder',
  );
  t.notOk(existsSync(join(tornB, 'report.html.tmp-99999')));
  t.same(untimed(readRows(tornB)), untimed(readRows(a)), 'the torn row is gone, the rest kept');
  // a bad line that is not the last one is an error naming the file and the line
  const lines = readFileSync(join(tornB, 'metrics.jsonl'), 'utf8').split('\n');
  lines[2] = '{oops';
  writeFileSync(join(tornB, 'metrics.jsonl'), lines.join('\n'));
  await t.rejects(train(resolveConfig(), { out: tornB, resume: true }), {
    name: 'RunFolderError',
    message: /metrics\.jsonl:3: not a JSON line/,
  });
});

t.test('resume with more steps extends a finished run exactly as an uninterrupted longer run', async (t) => {
  // b finished its 3 steps (validations at 0, 2, 3); extend it to 4
  const b = join(tmp, 'b');
  await t.rejects(
    train(resolveConfig(), { out: b, resume: true, steps: 1 }),
    /steps 1: the run's newest checkpoint is at GRPO step 3/,
  );
  await t.rejects(train(smoke, { out: join(tmp, 'new'), steps: 4 }), /steps applies to a resumed run/);
  const rb = await train(resolveConfig(), { out: b, resume: true, steps: 4 });
  t.equal(rb.step, 4);
  const c = join(tmp, 'c');
  const long = resolveConfig({ preset: 'smoke', patches: [{ grpo: { steps: 4 } }] });
  await train(long, { out: c });
  t.same(JSON.parse(readFileSync(join(b, 'config.json'), 'utf8')), long, 'the run’s config.json holds the new total');
  const extended = untimed(readRows(b));
  t.same(
    extended.filter((r) => r.phase === 'val').map((r) => r.step),
    [0, 2, 3, 4],
    'the 3-step run validated at its end, step 3',
  );
  t.same(
    extended.filter((r) => !(r.phase === 'val' && r.step === 3)),
    untimed(readRows(c)),
    'otherwise the same metrics as the uninterrupted 4-step run (timing aside)',
  );

  // the run's newest checkpoint folder resumes the run; an older one is refused
  const again = await train(resolveConfig(), { out: join(b, 'checkpoints', 'step-4'), resume: true, steps: 5 });
  t.equal(again.out, b);
  t.equal(again.step, 5);
  t.same(
    readdirSync(join(b, 'checkpoints', 'step-4')).sort(),
    ['config.json', 'policy.safetensors', 'tokenizer.json', 'trainer.json'],
    'nothing written into the checkpoint folder',
  );
  await t.rejects(
    train(resolveConfig(), { out: join(b, 'checkpoints', 'step-4'), resume: true }),
    /checkpoint of step 4 of the run .*newest checkpoint is step 5/,
  );
});

t.test('a start that fails writes nothing that blocks retrying with the same folder', async (t) => {
  const out = join(tmp, 'failed');
  // fails after the run folder was written (the tokenizer is trained): what it wrote is removed
  await t.rejects(
    train(smoke, {
      out,
      onEvent: (e) => {
        if (e.kind === 'phase' && e.phase === 'demonstrations') throw new Error('interrupted');
      },
    }),
    /interrupted/,
  );
  t.notOk(existsSync(out), 'the folder it created is gone');
  mkdirSync(out);
  writeFileSync(join(out, 'notes.txt'), 'mine');
  await t.rejects(
    train(smoke, {
      out,
      onEvent: (e) => {
        if (e.kind === 'phase' && e.phase === 'demonstrations') throw new Error('interrupted');
      },
    }),
    /interrupted/,
  );
  t.same(readdirSync(out), ['notes.txt'], 'a folder that existed keeps what was there before, nothing else');
  await t.rejects(
    train(smoke, {
      out,
      onEvent: (e) =>
        void (
          e.kind === 'validation' &&
          (() => {
            throw new Error('interrupted after validating');
          })()
        ),
    }),
    /interrupted after validating/,
  );
  t.same(readdirSync(out), ['notes.txt'], 'a start that fails after its first validation removes its transcripts too');
  if (!cudaAvailable()) {
    await t.rejects(train(resolveConfig({ preset: 'smoke', patches: [{ model: { device: 'cuda' } }] }), { out }), {
      name: 'DeviceUnavailableError',
    });
    t.same(readdirSync(out), ['notes.txt'], 'model.device cuda without a GPU fails before writing');
  }
});

/** The scripted user, failing on its second reply for one task. */
class FlakyUser implements UserSimulator {
  private inner = new ScriptedRetailUser();
  private calls = 0;
  private failing = false;
  constructor(readonly taskId: string) {}
  reset(task: TauTask, seed: number, tools: readonly OpenAIToolSchema[]): void {
    this.failing = task.id === this.taskId;
    this.calls = 0;
    void tools;
    this.inner.reset(task, seed);
  }
  respond(input: UserTurnInput) {
    if (this.failing && ++this.calls > 1) throw new Error('user simulator is down');
    return this.inner.respond(input);
  }
}

/** A tau env whose reward computation fails for one task. */
class FailingGraderEnv extends TauEnv {
  failTask = '';
  override step(action: TauEnvAction) {
    if (this.currentTask?.id === this.failTask) throw new Error('reward function failed');
    return super.step(action);
  }
}

t.test('a failing user simulator or reward aborts only its episode; the run goes on', async (t) => {
  const tw = buildWorld(smoke);
  const [graderTask, userTask] = stepTasks(smoke, tw.trainIds, 1);
  const cfg = resolveConfig({
    preset: 'smoke',
    patches: [
      {
        grpo: { steps: 1, klCoef: 0 },
        sft: { steps: 1 },
        val: { every: 0 },
        rollout: { maxTokensPerTurn: 1024, tasksPerStep: 3 },
      },
    ],
  });
  // long turns: the untrained model ends its first turn (samples <|end|>) so the environment is stepped
  const r = await train(cfg, {
    out: join(tmp, 'faults'),
    wrapEnv: () => () => {
      const env = new FailingGraderEnv({
        world: tw.world,
        user: new FlakyUser(userTask),
        maxSteps: cfg.world.maxSteps,
      });
      env.failTask = graderTask;
      return env;
    },
  });
  t.equal(r.step, 1, 'the run finished');
  const row = r.rows.find((x) => x.phase === 'grpo') as MetricsRow;
  t.ok((row['rollout/env_errors'] as number) >= 1, 'the failing reward aborts its episodes');
  t.ok((row['rollout/user_errors'] as number) >= 1, 'the failing user aborts its episodes');
  t.equal(row['rollout/aborted'], (row['rollout/env_errors'] as number) + (row['rollout/user_errors'] as number));
  t.equal(row['rollout/aborted_total'], row['rollout/aborted'], 'counted over the run');
  t.ok((row['rollout/episodes'] as number) > (row['rollout/aborted'] as number), 'the other episodes trained');
  t.ok(Number.isFinite(row['actor/pg_loss'] as number));
});

t.test('sinkflex/TauTelecom-v0 trains (smoke)', async (t) => {
  const cfg = resolveConfig({
    preset: 'smoke',
    patches: [{ env: 'sinkflex/TauTelecom-v0', grpo: { steps: 2 }, val: { every: 0 } }],
  });
  const r = await train(cfg, { out: join(tmp, 'telecom') });
  t.equal(r.step, 2);
  const val = r.rows.filter((x) => x.phase === 'val');
  t.ok(
    val.length === 2 && val.every((x) => typeof x['val-core/tau-telecom/reward/mean@1'] === 'number'),
    'telecom validation metrics',
  );
  t.ok((r.rows.find((x) => x.phase === 'sft-summary')?.['sft/demonstrations'] as number) > 0, 'telecom demonstrations');
  const loaded = await loadPolicy(join(tmp, 'telecom'));
  t.match(loaded.run?.prompt.systemPrompt({}) ?? '', /telecom/);
  loaded.policy.dispose();
});
