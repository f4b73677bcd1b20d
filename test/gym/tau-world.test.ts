// The one builder of generated tau worlds (loadTauWorld): the generator options the trainer
// uses (task-kind weights, change of mind, second request; telecom faults and unfixable rate),
// `distinct` (the first `count` tasks of distinct scenarios), their checks, and the cache key.
// buildWorld of the trainer is this builder with its config: the same world object.
import t from 'tap';

import { loadTauWorld, TauWorld } from '../../lib/gym/index.js';
import { clearTauWorldCache } from '../../lib/gym/envs/tau-world.js';
import { generateRetailDb, generateRetailTasks } from '../../lib/tau/index.js';
import { buildWorld, resolveConfig } from '../../lib/trainer/index.js';

const small = { kind: 'generated', seed: 3, users: 30, orders: 60 } as const;
const NO_KINDS = {
  cancel: 0,
  modify_address: 0,
  modify_payment: 0,
  modify_items: 0,
  return: 0,
  exchange: 0,
  user_address: 0,
  lookup_tracking: 0,
  lookup_price: 0,
  refuse: 0,
  transfer: 0,
};
/** Tracking look-ups only, on a database of 5 users: 4 distinct scenarios. */
const FEW = { weights: { ...NO_KINDS, lookup_tracking: 1 }, changeOfMind: 0, secondRequest: 0, users: 5, orders: 5 };
const scenario = (w: TauWorld, id: string) => JSON.stringify(w.task(id).sinkflex_scenario);

t.test('generator options reach the task generator', async (t) => {
  const onlyCancel = loadTauWorld('retail', { ...small, count: 12, weights: { ...NO_KINDS, cancel: 1 } });
  const kinds = new Set(onlyCancel.tasks.map((task) => (task.sinkflex_scenario as { kind: string }).kind));
  t.same([...kinds], ['cancel'], 'weights: only the kind with weight');
  const direct = generateRetailTasks(generateRetailDb({ seed: 3, users: 30, orders: 60 }), {
    seed: 3,
    count: 12,
    changeOfMind: 1,
    secondRequest: 0,
  });
  const world = loadTauWorld('retail', { ...small, count: 12, changeOfMind: 1, secondRequest: 0 });
  t.same(
    world.tasks.map((task) => task.sinkflex_scenario),
    direct.map((task) => task.sinkflex_scenario),
    'changeOfMind / secondRequest as the generator takes them',
  );
  const telecom = loadTauWorld('telecom', {
    kind: 'generated',
    seed: 1,
    count: 10,
    customers: 30,
    maxFaults: 1,
    unfixableRate: 0,
  });
  t.equal(telecom.tasks.length, 10);
});

t.test('distinct: the first count tasks of distinct scenarios', async (t) => {
  const all = loadTauWorld('retail', { ...small, count: 40 });
  const d = loadTauWorld('retail', { ...small, count: 12, distinct: true });
  t.not(d, all);
  t.equal(d.tasks.length, 12);
  const sigs = d.taskIds.map((id) => scenario(d, id));
  t.equal(new Set(sigs).size, 12, 'no scenario twice');
  const firsts: string[] = [];
  for (const task of generateRetailTasks(generateRetailDb({ seed: 3, users: 30, orders: 60 }), {
    seed: 3,
    count: 48,
  })) {
    const sig = JSON.stringify(task.sinkflex_scenario);
    if (!firsts.includes(sig)) firsts.push(sig);
  }
  t.same(sigs, firsts.slice(0, 12), 'first occurrences, in generation order, from 4 × count generated');
  t.throws(
    () => loadTauWorld('retail', { kind: 'generated', seed: 0, count: 10, distinct: true, ...FEW }),
    /only 4 distinct tasks for count 10/,
  );
  t.equal(loadTauWorld('retail', { ...small, count: 12, distinct: true }), d, 'cached per configuration');
  clearTauWorldCache();
  t.not(loadTauWorld('retail', { ...small, count: 12, distinct: true }), d, 'rebuilt after clearing the cache');
});

t.test('bad generator options name the field', async (t) => {
  t.throws(() => loadTauWorld('retail', { ...small, changeOfMind: 2 }), /tasks\.changeOfMind must be a probability/);
  t.throws(() => loadTauWorld('retail', { ...small, secondRequest: -0.1 }), /tasks\.secondRequest/);
  t.throws(() => loadTauWorld('retail', { ...small, weights: { cancel: -1 } }), /tasks\.weights\.cancel/);
  t.throws(() => loadTauWorld('retail', { ...small, weights: [] as never }), /tasks\.weights must be an object/);
  t.throws(() => loadTauWorld('telecom', { kind: 'generated', maxFaults: 4 }), /tasks\.maxFaults must be 1, 2 or 3/);
  t.throws(() => loadTauWorld('telecom', { kind: 'generated', maxFaults: 0 }), /tasks\.maxFaults/);
  t.throws(() => loadTauWorld('telecom', { kind: 'generated', unfixableRate: Number.NaN }), /tasks\.unfixableRate/);
  t.throws(() => loadTauWorld('retail', { ...small, distinct: 'yes' as never }), /tasks\.distinct must be a boolean/);
});

t.test("the trainer's world is the gym builder's", async (t) => {
  const config = resolveConfig({ preset: 'smoke' });
  const tw = buildWorld(config);
  const w = config.world;
  const same = loadTauWorld('retail', {
    kind: 'generated',
    seed: w.seed,
    count: w.trainTasks + w.valTasks,
    distinct: true,
    users: w.users,
    orders: w.orders,
    weights: w.kinds,
    changeOfMind: w.changeOfMind,
    secondRequest: w.secondRequest,
  });
  t.equal(tw.world, same, 'one world object (one cache)');
  t.same([...tw.trainIds, ...tw.valIds], same.taskIds);
  t.equal(tw.trainIds.length, w.trainTasks);
  const { weights, ...db } = FEW;
  const tooMany = resolveConfig({ preset: 'smoke', patches: [{ world: { ...db, kinds: weights } }] });
  t.throws(() => buildWorld(tooMany), /^world \(trainTasks \+ valTasks = 12 tasks.*only 4 distinct tasks for count 12/);
});
