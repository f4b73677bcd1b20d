/**
 * The reward of generated retail tasks and the scripted user's rules: gold actions compared on
 * every argument, the reward basis per kind, the facts to communicate, orders the customer
 * cannot name, and a user that gives up (scored 0) instead of rewarding incoherence.
 */
import t from 'tap';

import type { Order, RetailRequest, RetailTask, RetailTaskKind, TaskAction } from '../../lib/tau/index.js';
import {
  createRetailDomain,
  ExpertRetailAgent,
  generateRetailDb,
  generateRetailTasks,
  runEpisodeSync,
  ScriptedRetailUser,
  TauEpisode,
} from '../../lib/tau/index.js';
import { actionMatches } from '../../lib/tau/evaluate.js';

const KINDS: RetailTaskKind[] = [
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
];
const WRITES: Partial<Record<RetailTaskKind, string>> = {
  cancel: 'cancel_pending_order',
  modify_address: 'modify_pending_order_address',
  modify_payment: 'modify_pending_order_payment',
  modify_items: 'modify_pending_order_items',
  return: 'return_delivered_order_items',
  exchange: 'exchange_delivered_order_items',
  user_address: 'modify_user_address',
};

const db = generateRetailDb({ seed: 31, users: 80, orders: 200 });
const domain = createRetailDomain({ db });
const only = (kind: RetailTaskKind, count: number, extra: Record<string, number> = {}) =>
  generateRetailTasks(db, {
    seed: 31 + KINDS.indexOf(kind),
    count,
    weights: Object.fromEntries(KINDS.map((k) => [k, k === kind ? 1 : 0])),
    idPrefix: kind,
    ...extra,
  });
const byKind = new Map(KINDS.map((k) => [k, only(k, 12)]));

t.test('gold actions: authentication first, every argument compared, the transfer summary free', async (t) => {
  for (const [kind, tasks] of byKind) {
    for (const task of tasks) {
      const gold = task.evaluation_criteria?.actions as TaskAction[];
      const s = task.sinkflex_scenario;
      t.equal(
        gold[0].name,
        s?.user.auth === 'email' ? 'find_user_id_by_email' : 'find_user_id_by_name_zip',
        `${task.id}: authentication first`,
      );
      for (const a of gold) {
        const expected =
          a.name === 'transfer_to_human_agents' || a.name === 'list_all_product_types' ? [] : Object.keys(a.arguments);
        t.same(a.compare_args, expected, `${task.id} ${a.name}: compare_args`);
      }
      const r = s?.requests[0] as RetailRequest;
      if (r.order_id)
        t.ok(
          gold.some((a) => a.name === 'get_order_details' && a.arguments.order_id === r.order_id),
          `${task.id}: the order look-up`,
        );
      const write = WRITES[r.type]; // after a change of mind, the request finally made
      if (write)
        t.ok(
          gold.some((a) => a.name === write),
          `${task.id}: the write ${write}`,
        );
      if (kind === 'transfer')
        t.ok(
          gold.some((a) => a.name === 'transfer_to_human_agents'),
          `${task.id}: the transfer`,
        );
      if (kind === 'lookup_price')
        t.ok(
          gold.some((a) => a.name === 'get_product_details' && a.arguments.product_id === r.product_id),
          `${task.id}: the product look-up`,
        );
    }
  }
});

t.test('reward basis and communicate_info per kind: the facts asked for, never a transfer phrase', async (t) => {
  for (const [kind, tasks] of byKind) {
    for (const task of tasks) {
      const ec = task.evaluation_criteria;
      const r = task.sinkflex_scenario?.requests[0] as RetailRequest;
      const second = task.sinkflex_scenario?.requests[1];
      const info = ec?.communicate_info ?? [];
      t.same(
        ec?.reward_basis,
        info.length > 0 ? ['DB', 'ACTION', 'COMMUNICATE'] : ['DB', 'ACTION'],
        `${task.id}: basis`,
      );
      t.notOk(
        info.some((x) => /transfer/i.test(x)),
        `${task.id}: no transfer phrase`,
      );
      if (kind === 'lookup_tracking')
        t.equal(
          info[0],
          (db.orders.get(r.order_id as string) as Order).fulfillments[0].tracking_id[0],
          `${task.id}: the tracking id`,
        );
      if (kind === 'lookup_price')
        t.equal(
          Number(info[0]),
          db.products.get(r.product_id as string)?.variants[(r.items ?? [])[0].item_id].price,
          `${task.id}: the price`,
        );
      if (kind === 'refuse')
        t.equal(
          info[0],
          (db.orders.get(r.order_id as string) as Order).status,
          `${task.id}: the status that forbids it`,
        );
      if ((WRITES[kind] || kind === 'transfer') && !second) t.same(info, [], `${task.id}: nothing to communicate`);
    }
  }
});

t.test('a gold action with compare_args does not match a call that leaves the argument out', async (t) => {
  const gold: TaskAction = {
    action_id: 'a',
    name: 'get_order_details',
    arguments: { order_id: '#W1234567' },
    compare_args: ['order_id'],
  };
  const call = (args: Record<string, unknown>) => ({
    id: 'c',
    name: 'get_order_details',
    arguments: args,
    requestor: 'assistant' as const,
  });
  t.notOk(actionMatches(gold, call({})), 'no order id: no match');
  t.notOk(actionMatches(gold, call({ order_id: '#W7654321' })), 'another order: no match');
  t.ok(actionMatches(gold, call({ order_id: '#W1234567' })));
  t.ok(
    actionMatches({ ...gold, compare_args: null }, call({})),
    "without compare_args tau2's rule compares the call's own arguments: an empty call matches (why the generator lists them)",
  );
});

t.test(
  'a customer who does not know the order id describes it and never leaks it; gold needs their orders and the right one',
  async (t) => {
    const tasks = generateRetailTasks(db, {
      seed: 77,
      count: 200,
      weights: {
        cancel: 1,
        modify_address: 1,
        return: 1,
        exchange: 1,
        modify_items: 1,
        modify_payment: 1,
        user_address: 0,
        lookup_tracking: 0,
        lookup_price: 0,
        refuse: 0,
        transfer: 0,
      },
      secondRequest: 0,
      changeOfMind: 0,
    });
    const unknown = tasks.filter((x) => x.sinkflex_scenario?.requests[0].knowsOrderId === false);
    t.ok(unknown.length >= 10, `${unknown.length} tasks with an unknown order id`);
    const ep = new TauEpisode(domain, { user: new ScriptedRetailUser() });
    for (const task of unknown) {
      const r = task.sinkflex_scenario?.requests[0] as RetailRequest;
      const id = r.order_id as string;
      t.ok(
        r.orderHint && (db.orders.get(id) as Order).items.some((i) => i.name === r.orderHint?.name),
        `${task.id}: described by one of its items`,
      );
      const ins = task.user_scenario.instructions as { reason_for_call: string };
      t.notOk(ins.reason_for_call.includes(id), `${task.id}: the instructions do not give the id`);
      const gold = task.evaluation_criteria?.actions as TaskAction[];
      t.same(
        gold.filter((a) => a.name === 'get_order_details').map((a) => a.arguments.order_id),
        [id],
        `${task.id}: only the right order's look-up is required`,
      );
      t.ok(
        gold.some((a) => a.name === 'get_user_details'),
        `${task.id}: the user's details (their orders)`,
      );
      const run = runEpisodeSync(ep, new ExpertRetailAgent(), task, 2);
      t.equal(run.final.reward, 1, `${task.id}: the expert solves it`);
      const said = run.trajectory
        .filter((m) => m.role === 'user')
        .map((m) => m.content ?? '')
        .join('\n');
      t.notOk(said.includes(id), `${task.id}: the customer never says the id`);
    }
  },
);

function firstOf(kind: RetailTaskKind, pred: (x: RetailTask) => boolean = () => true): RetailTask {
  const task = (byKind.get(kind) ?? []).find(
    (x) => (x.sinkflex_scenario?.requests.length ?? 0) === 1 && !x.sinkflex_scenario?.requests[0].initial && pred(x),
  );
  if (!task) throw new Error(`no single-request ${kind} task`);
  return task;
}

t.test('re-asks are bounded: after patience messages without progress the user gives up, which scores 0', async (t) => {
  const task = firstOf('cancel', (x) => x.sinkflex_scenario?.user.auth === 'email');
  for (const patience of [0, 2, 4]) {
    const ep = new TauEpisode(domain, { user: new ScriptedRetailUser({ patience }) });
    ep.resetSync(task, 0);
    let step = ep.actSync('Could you give me your email address?');
    t.match(step.observation.at(-1)?.content, /My email is/, 'the first ask is answered');
    t.equal(step.done, false);
    for (let i = 0; i < patience; i++) {
      step = ep.actSync('Could you give me your email address?');
      t.equal(step.done, false, `re-ask ${i + 1} of ${patience}`);
      t.match(step.observation.at(-1)?.content, /^As I said: My email is/);
    }
    step = ep.actSync('Could you give me your email address?');
    t.equal(step.done, true, `gives up after ${patience} re-asks`);
    t.equal(step.terminationReason, 'user_give_up');
    t.equal(step.stopMarker, null);
    t.equal(step.reward, 0);
    t.match(String(step.rewardInfo?.info.note), /user_give_up/);
  }
  // progress resets the count: a new detail, then the same number of re-asks again
  const ep = new TauEpisode(domain, { user: new ScriptedRetailUser({ patience: 1 }) });
  ep.resetSync(task, 0);
  t.equal(ep.actSync('Your email, please?').done, false);
  t.equal(ep.actSync('Hmm.').done, false);
  t.equal(ep.actSync('Which order id?').done, false, 'a new question is progress');
  t.equal(ep.actSync('Hmm.').done, false);
  t.equal(ep.actSync('Hmm.').terminationReason, 'user_give_up');
  t.throws(() => new ScriptedRetailUser({ patience: -1 }), RangeError);
  t.throws(() => new ScriptedRetailUser({ patience: 1.5 }), RangeError);
});

t.test('a give-up scores 0 even after the gold calls were made', async (t) => {
  const task = firstOf('refuse');
  const ep = new TauEpisode(domain, { user: new ScriptedRetailUser() });
  const run = runEpisodeSync(ep, new ExpertRetailAgent(), task, 0);
  t.equal(run.final.reward, 1);
  const sim = ep.simulation();
  if (!sim) throw new Error('no simulation');
  t.equal(ep.evaluator.evaluate(task, { ...sim, terminationReason: 'user_give_up' }).reward, 0);
});

t.test('a transfer ends the conversation only when the agent did transfer it', async (t) => {
  const task = firstOf('transfer', (x) => x.sinkflex_scenario?.user.auth === 'email');
  const ep = new TauEpisode(domain, { user: new ScriptedRetailUser() });
  ep.resetSync(task, 0);
  ep.actSync('Could you give me your email address?');
  let step = ep.actSync('YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.');
  t.equal(step.done, false, 'a claimed transfer that did not happen');
  t.match(step.observation.at(-1)?.content, /nobody has taken over/);
  step = ep.actSync({ toolCalls: [{ name: 'transfer_to_human_agents', arguments: {} }] });
  t.match(step.observation.at(-1)?.content, /^Error: /, 'no summary: the call is rejected');
  step = ep.actSync('YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.');
  t.equal(step.done, false, 'a rejected call is no transfer');
  const email = task.sinkflex_scenario?.user.email as string;
  ep.actSync({ toolCalls: [{ name: 'find_user_id_by_email', arguments: { email } }] });
  ep.actSync({
    toolCalls: [
      { name: 'transfer_to_human_agents', arguments: { summary: 'The user has a request outside my scope.' } },
    ],
  });
  step = ep.actSync('YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.');
  t.equal(step.terminationReason, 'user_stop');
  t.equal(step.stopMarker, '###TRANSFER###');
  t.equal(step.reward, 1, 'authenticated and transferred with a summary');
});

t.test('the user confirms only an action that names the right order', async (t) => {
  const task = firstOf('cancel', (x) => x.sinkflex_scenario?.requests[0].knowsOrderId !== false);
  const id = task.sinkflex_scenario?.requests[0].order_id as string;
  const ep = new TauEpisode(domain, { user: new ScriptedRetailUser() });
  ep.resetSync(task, 0);
  let step = ep.actSync('I will cancel your order. Do you confirm (yes/no)?');
  t.match(step.observation.at(-1)?.content, new RegExp(`^Which order do you mean\\? The order id is ${id}`));
  step = ep.actSync('I will cancel order #W0000000. Do you confirm (yes/no)?');
  t.match(step.observation.at(-1)?.content, /not the right order/);
  step = ep.actSync(`I will cancel order ${id}. Do you confirm (yes/no)?`);
  t.match(step.observation.at(-1)?.content, /^Yes/);
  step = ep.actSync(`I will cancel order ${id}. Do you confirm (yes/no)?`);
  t.match(step.observation.at(-1)?.content, /already confirmed/, 'asking again is no progress');
});
