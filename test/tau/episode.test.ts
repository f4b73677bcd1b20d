import t from 'tap';

import type { RetailTask, UserReply } from '../../lib/tau/index.js';
import {
  createRetailDomain,
  ExpertRetailAgent,
  generateRetailDb,
  generateRetailTasks,
  passHatK,
  RandomAgent,
  runEpisode,
  runEpisodeSync,
  ScriptedRetailUser,
  TauEpisode,
} from '../../lib/tau/index.js';

const db = generateRetailDb({ seed: 7, users: 200, orders: 400 });
const domain = createRetailDomain({ db });
const tasks = generateRetailTasks(db, { seed: 7, count: 150 });

t.test('generated world has tau2 shape and every task kind', async (t) => {
  const s = db.statistics();
  t.equal(s.products, 50);
  t.ok(s.variants > 300);
  for (const st of ['pending', 'delivered', 'processed', 'cancelled']) t.ok(s.statuses[st] > 0, st);
  for (const src of ['credit_card', 'paypal', 'gift_card']) t.ok(s.paymentMethods[src] > 0, src);
  const kinds = new Set(tasks.map((x) => x.sinkflex_scenario?.kind));
  for (const k of [
    'cancel',
    'modify_address',
    'modify_payment',
    'modify_items',
    'return',
    'exchange',
    'user_address',
    'lookup_tracking',
    'lookup_price',
    'refuse',
    'transfer',
  ])
    t.ok(kinds.has(k as never), k);
  t.ok(
    tasks.some((x) => x.sinkflex_scenario?.requests.some((r) => r.initial)),
    'some change of mind',
  );
  t.ok(
    tasks.some((x) => (x.sinkflex_scenario?.requests.length ?? 0) > 1),
    'some two-request tasks',
  );
  t.same(generateRetailTasks(db, { seed: 7, count: 5 }), tasks.slice(0, 5), 'same seed, same tasks');
  t.equal(generateRetailDb({ seed: 7, users: 200, orders: 400 }).hash(), db.hash(), 'same seed, same db');
});

t.test('expert agent solves >= 95% of generated tasks with the scripted user; random stays near 0', async (t) => {
  const ep = new TauEpisode(domain, { user: new ScriptedRetailUser() });
  const failures: string[] = [];
  const results = [];
  for (const task of tasks) {
    const r = runEpisodeSync(ep, new ExpertRetailAgent(), task, 1);
    results.push({ taskId: task.id, reward: r.final.reward });
    if (r.final.reward !== 1) failures.push(`${task.id} ${task.description?.purpose} ${r.final.terminationReason}`);
  }
  const rate = 1 - failures.length / tasks.length;
  t.ok(rate >= 0.95, `expert success ${rate} (failures: ${failures.join('; ')})`);
  t.equal(passHatK(results, 1), rate);
  let random = 0;
  for (const task of tasks.slice(0, 60)) random += runEpisodeSync(ep, new RandomAgent(), task, 2).final.reward;
  t.ok(random / 60 <= 0.05, `random agent mean reward ${random / 60}`);
});

t.test('same seed, same trajectory', async (t) => {
  const ep = new TauEpisode(domain, { user: new ScriptedRetailUser() });
  const a = runEpisodeSync(ep, new RandomAgent(), tasks[3], 5).trajectory;
  const b = runEpisodeSync(ep, new RandomAgent(), tasks[3], 5).trajectory;
  t.same(a, b);
});

t.test('bad actions never throw; they cost an error or end with agent_error', async (t) => {
  const task = tasks.find((x) => x.sinkflex_scenario?.kind === 'cancel') as RetailTask;
  const ep = new TauEpisode(domain, { user: new ScriptedRetailUser(), maxErrors: 10 });
  const first = ep.resetSync(task, 0);
  t.same(
    first.observation.map((m) => m.role),
    ['assistant', 'user'],
    'greeting + first user message',
  );
  t.equal(ep.tools.length, 16);
  const bad: unknown[] = [
    { toolCalls: [{ name: 'no_such_tool', arguments: {} }] },
    { tool_calls: [{ id: 'x', type: 'function', function: { name: 'get_order_details', arguments: '{not json' } }] },
    { toolCalls: [{ name: 'get_order_details', arguments: { order_id: 42 } }] },
    { toolCalls: [{ name: 'get_order_details', arguments: {} }] },
    { toolCalls: [{ name: 'get_order_details', arguments: { order_id: '#W1', extra: 1 } }] },
    { content: 'Let me look.', toolCalls: [{ name: 'get_order_details', arguments: { order_id: '#W1' } }] },
    {
      toolCalls: [
        { name: 'get_user_details', arguments: { user_id: 'a' } },
        { name: 'get_user_details', arguments: { user_id: 'b' } },
      ],
    },
    '<tool_call>{"name": "get_order_details", "arguments": {</tool_call>',
    { toolCalls: [{ name: 'get_order_details', arguments: [1] }] },
  ];
  const messages: string[] = [];
  for (const a of bad) {
    const step = ep.actSync(a);
    t.equal(step.done, false);
    t.equal(step.observation.length >= 1, true);
    const tm = step.observation[step.observation.length - 1];
    t.equal(tm.role, 'tool');
    t.match(String(tm.content), /^Error: /);
    messages.push(String(tm.content));
  }
  t.match(messages[0], "Tool 'no_such_tool' not found");
  t.match(messages[1], /could not parse the arguments/);
  t.match(messages[2], /argument 'order_id'/);
  t.match(messages[3], /missing required argument 'order_id'/);
  t.match(messages[4], /unexpected argument/);
  t.match(messages[5], /not both/);
  t.match(messages[6], /only one tool call/);
  t.equal(ep.counters.errors, 9);
  const last = ep.actSync({ toolCalls: [{ name: 'nope', arguments: {} }] });
  t.equal(last.done, true);
  t.equal(last.terminationReason, 'too_many_errors');
  t.equal(last.reward, 0);
  t.match(String(last.rewardInfo?.info.note), /too_many_errors/);
  t.same(ep.actSync('hello').observation, [], 'acting after the end is a no-op');

  for (const junk of [
    null,
    42,
    [],
    { role: 'user', content: 'x' },
    { content: '   ' },
    { content: 5 },
    { toolCalls: 'x' },
  ]) {
    ep.resetSync(task, 0);
    const s = ep.actSync(junk);
    t.equal(s.terminationReason, 'agent_error', JSON.stringify(junk));
    t.equal(s.reward, 0);
  }
});

t.test('limits, stop markers and the replay of malformed calls', async (t) => {
  const task = tasks.find((x) => x.sinkflex_scenario?.kind === 'cancel') as RetailTask;
  const ep = new TauEpisode(domain, { user: new ScriptedRetailUser({ patience: 1000 }), maxSteps: 6 });
  ep.resetSync(task, 0);
  let s = ep.actSync('Sure.');
  t.equal(s.done, false);
  s = ep.actSync('Okay.');
  t.equal(s.done, false);
  s = ep.actSync('Hmm.');
  t.equal(s.terminationReason, 'max_steps');
  t.throws(() => new TauEpisode(domain, { user: new ScriptedRetailUser(), maxSteps: 0 }), RangeError);

  // a rejected write (text + call) is never replayed: the DB stays unchanged and grading reflects that
  const ep2 = new TauEpisode(domain, { user: new ScriptedRetailUser() });
  ep2.resetSync(task, 0);
  const order = task.sinkflex_scenario?.requests[0].order_id as string;
  ep2.actSync({
    content: 'Cancelling now.',
    toolCalls: [{ name: 'cancel_pending_order', arguments: { order_id: order, reason: 'no longer needed' } }],
  });
  t.equal(ep2.state?.orders.get(order)?.status, 'pending');
  const sim = {
    taskId: task.id,
    messages: [...ep2.trajectory(), { role: 'user' as const, content: '###STOP###' }],
    terminationReason: 'user_stop' as const,
  };
  t.equal(ep2.evaluator.evaluate(task, sim).rewardBreakdown.DB, 0);
});

t.test('async user simulators, user errors and the NL judge', async (t) => {
  const task = tasks[0];
  const asyncUser = {
    inner: new ScriptedRetailUser(),
    reset(task2: RetailTask, seed: number) {
      this.inner.reset(task2, seed);
    },
    respond(input: Parameters<ScriptedRetailUser['respond']>[0]): Promise<UserReply> {
      return Promise.resolve(this.inner.respond(input));
    },
  };
  const ep = new TauEpisode(domain, { user: asyncUser as never });
  t.throws(() => ep.resetSync(task, 0), /asynchronous/);
  const r = await runEpisode(ep, new ExpertRetailAgent(), task, 1);
  t.equal(r.final.reward, 1);

  const failing = {
    reset() {},
    respond(): UserReply {
      throw new Error('boom');
    },
  };
  const ep2 = new TauEpisode(domain, { user: failing });
  t.equal(ep2.resetSync(task, 0).terminationReason, 'user_error');

  // NL assertions: reported "not evaluated" without a judge; judged with one
  const nlTask: RetailTask = {
    ...task,
    evaluation_criteria: {
      ...task.evaluation_criteria,
      reward_basis: ['DB', 'NL_ASSERTION'],
      nl_assertions: ['The agent is polite.'],
    },
  };
  const ep3 = new TauEpisode(domain, { user: new ScriptedRetailUser() });
  const r3 = runEpisodeSync(ep3, new ExpertRetailAgent(), nlTask, 1).final;
  t.same(r3.rewardInfo?.notEvaluated, ['NL_ASSERTION']);
  t.equal(r3.rewardInfo?.nlAssertions, null);
  t.equal(ep3.evaluator.evaluate(nlTask, ep3.simulation()!, { unevaluated: 'fail' }).reward, 0);
  const ep4 = new TauEpisode(domain, {
    user: new ScriptedRetailUser(),
    judge: async (_m, a) => a.map(() => ({ met: false, reasoning: 'rude' })),
  });
  const r4 = (await runEpisode(ep4, new ExpertRetailAgent(), nlTask, 1)).final;
  t.equal(r4.reward, 0);
  t.equal(r4.rewardInfo?.nlAssertions?.[0].justification, 'rude');
});

t.test('passHatK', async (t) => {
  const r = [
    { taskId: 'a', reward: 1 },
    { taskId: 'a', reward: 1 },
    { taskId: 'a', reward: 0 },
    { taskId: 'b', reward: 1 },
    { taskId: 'b', reward: 1 },
    { taskId: 'b', reward: 1 },
  ];
  t.equal(passHatK(r, 1), (2 / 3 + 1) / 2);
  t.equal(passHatK(r, 2), (1 / 3 + 1) / 2);
  t.equal(passHatK(r, 3), (0 + 1) / 2);
  t.throws(() => passHatK(r, 4), RangeError);
  t.throws(() => passHatK(r, 0), RangeError);
  t.throws(() => passHatK([], 1), RangeError);
});
