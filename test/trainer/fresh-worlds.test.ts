import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { TauEnv, type AnyEnv, type TauWorld } from '../../lib/gym/index.js';
import { buildWorld, resolveConfig, train, type MetricsRow, type TrainConfig } from '../../lib/trainer/index.js';
import { validateConfig, validateSavedConfig } from '../../lib/trainer/config.js';
import { stepWorld, tokenizerWorld } from '../../lib/trainer/world.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-fresh-'));

const smoke: TrainConfig = resolveConfig({ preset: 'smoke' });
const fresh: TrainConfig = resolveConfig({ preset: 'smoke', patches: [{ world: { fresh: true } }] });

/** The ids of a world's orders (its database's own ids). */
function orderIds(world: TauWorld): string[] {
  const db = (world.domain as unknown as { db: { orders: { base: Record<string, unknown> } } }).db;
  return Object.keys(db.orders.base).sort();
}

t.test('a step world: its own database and tasksPerStep distinct tasks, the same for the same step', (t) => {
  const run = buildWorld(fresh);
  const a = stepWorld(fresh, 1);
  const b = stepWorld(fresh, 2);
  t.equal(a.taskIds.length, fresh.rollout.tasksPerStep, 'rollout.tasksPerStep tasks');
  t.same(a.taskIds, a.world.taskIds, 'every task of the step world trains');
  t.same(orderIds(stepWorld(fresh, 1).world), orderIds(a.world), 'seeded by the step: the same world again');
  t.not(stepWorld(fresh, 1).world, a.world, 'not cached (a run draws one per step)');
  const runIds = new Set(orderIds(run.world));
  const shared = orderIds(a.world).filter((id) => runIds.has(id)).length;
  t.ok(shared < orderIds(a.world).length / 4, `a new database: ${shared} of its order ids in the run's world`);
  t.not(JSON.stringify(orderIds(a.world)), JSON.stringify(orderIds(b.world)), 'another step, another database');
  t.end();
});

t.test('the tokenizer world: the run world, or with fresh worlds the first demonstration world', (t) => {
  const run = buildWorld(fresh);
  t.equal(tokenizerWorld(smoke, buildWorld(smoke)).world, buildWorld(smoke).world);
  const tok = tokenizerWorld(fresh, run);
  t.not(tok.world, run.world, 'the held-out world trains nothing');
  t.not(JSON.stringify(orderIds(tok.world)), JSON.stringify(orderIds(run.world)));
  t.end();
});

t.test('configuration: fresh worlds need demonstration worlds; saved runs without the field keep one world', (t) => {
  t.throws(() => validateConfig({ ...fresh, sft: { ...fresh.sft, demoWorlds: 0 } }), {
    name: 'ConfigError',
    message: /world\.fresh.*sft\.demoWorlds/,
  });
  t.doesNotThrow(() => validateConfig({ ...fresh, sft: { ...fresh.sft, demoWorlds: 0, episodes: 0 } }));
  const saved = JSON.parse(JSON.stringify(smoke)) as { world: Record<string, unknown> };
  delete saved.world.fresh;
  t.equal(validateSavedConfig(saved).world.fresh, false);
  t.end();
});

t.test(
  'a run with fresh worlds: GRPO plays each step in its own world, validation only the held-out tasks',
  async (t) => {
    const run = buildWorld(fresh);
    const resets: { world: TauWorld; taskId: string }[] = [];
    const wrapEnv = (make: () => AnyEnv) => () => {
      const env = make() as TauEnv;
      const reset = env.reset.bind(env);
      env.reset = (args) => {
        resets.push({ world: env.world, taskId: (args?.options as { taskId: string }).taskId });
        return reset(args);
      };
      return env;
    };
    const out = join(tmp, 'fresh');
    const r = await train(fresh, { out, wrapEnv });
    t.equal(r.step, fresh.grpo.steps);
    const onRun = resets.filter((x) => x.world === run.world);
    t.ok(onRun.length > 0, 'validation plays the run world');
    t.ok(
      onRun.every((x) => run.valIds.includes(x.taskId)),
      'no training task of the run world is played',
    );
    const others = resets.filter((x) => x.world !== run.world);
    const expected = Array.from({ length: fresh.grpo.steps }, (_, i) =>
      JSON.stringify(orderIds(stepWorld(fresh, i + 1).world)),
    );
    const seen = new Set(others.map((x) => JSON.stringify(orderIds(x.world))));
    t.same([...seen].sort(), [...new Set(expected)].sort(), 'the GRPO episodes play the worlds of their steps');
    t.equal(
      others.length,
      fresh.grpo.steps * fresh.rollout.tasksPerStep * fresh.rollout.n,
      'every GRPO episode in a step world',
    );

    // resumed after step 1: the same steps, the same worlds, the same metrics
    const b = join(tmp, 'fresh-resumed');
    await train(fresh, { out: b, stopAfter: 1 });
    await train(fresh, { out: b, resume: true });
    const rows = (dir: string): MetricsRow[] =>
      readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as MetricsRow)
        .map(
          (row) => Object.fromEntries(Object.entries(row).filter(([k]) => !k.startsWith('timing_s/'))) as MetricsRow,
        );
    t.same(rows(b), rows(out), 'resume equals the uninterrupted run');
  },
);
