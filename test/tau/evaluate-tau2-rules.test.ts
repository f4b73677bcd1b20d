// Grading rules checked against tau2-bench's evaluator and retail tools (read there, written
// here from the rules): a failing gold action is skipped and the DB check still scored; ACTION
// is all-or-nothing; modify_pending_order_items behaves as tau2's by default.
import t from 'tap';

import type { Message, RetailDb, RewardType, TaskAction, TauTask, ToolCall } from '../../lib/tau/index.js';
import { createRetailDomain, generateRetailDb, TauEvaluator } from '../../lib/tau/index.js';
import { modifyItemsPriceFixOf } from '../../lib/tau/domains/retail/tools.js';

const db = generateRetailDb({ seed: 11, users: 120, orders: 300 });
const domain = createRetailDomain({ db });

function task(id: string, actions: Omit<TaskAction, 'action_id'>[], basis: RewardType[]): TauTask {
  return {
    id,
    user_scenario: { instructions: 'test' },
    evaluation_criteria: { actions: actions.map((a, i) => ({ action_id: `${id}_${i}`, ...a })), reward_basis: basis },
  };
}

/** A trajectory that makes `calls` in order (each result computed on a fresh copy), then the user stops. */
function trajectory(calls: { name: string; arguments: Record<string, unknown> }[]): Message[] {
  const state = domain.initialState();
  const msgs: Message[] = [
    { role: 'assistant', content: 'Hi! How can I help you today?' },
    { role: 'user', content: 'Hello.' },
  ];
  calls.forEach((c, i) => {
    const call: ToolCall = { id: `c${i}`, name: c.name, arguments: c.arguments, requestor: 'assistant' };
    msgs.push({ role: 'assistant', content: null, toolCalls: [call] });
    msgs.push(domain.tools.call(state, call));
  });
  msgs.push({ role: 'user', content: '###STOP###' });
  return msgs;
}

const pending = [...db.orders.values()].filter((o) => o.status === 'pending');

t.test('a gold write that fails is skipped and the DB check is still scored (tau2)', async (t) => {
  // as in tau2 retail's test split: a gold exchange of delivered items runs on a pending order
  const [a, b] = pending;
  const cancel = { name: 'cancel_pending_order', arguments: { order_id: a.order_id, reason: 'no longer needed' } };
  const badExchange = {
    name: 'exchange_delivered_order_items',
    arguments: {
      order_id: b.order_id,
      item_ids: [b.items[0].item_id],
      new_item_ids: [b.items[0].item_id],
      payment_method_id: b.payment_history[0].payment_method_id,
    },
  };
  const tk = task('gold_fails', [cancel, badExchange], ['DB']);
  const evaluator = new TauEvaluator(domain);

  const good = evaluator.evaluate(tk, {
    taskId: tk.id,
    messages: trajectory([cancel]),
    terminationReason: 'user_stop',
  });
  t.equal(good.reward, 1, 'the gold state is the one the successful gold writes give');
  t.same(good.rewardBreakdown, { DB: 1 }, 'DB is in the breakdown');
  t.same(good.notEvaluated, [], 'DB is evaluated');
  t.ok(good.dbCheck?.dbMatch, 'the DB check is reported');
  t.equal(good.dbCheck?.dbReward, 1);
  t.match(
    good.info.gold_action_errors,
    [
      {
        action_id: 'gold_fails_1',
        name: 'exchange_delivered_order_items',
        error: /Non-delivered order cannot be exchanged/,
      },
    ],
    'the failing gold action is listed as a diagnostic',
  );

  const nothing = evaluator.evaluate(tk, { taskId: tk.id, messages: trajectory([]), terminationReason: 'user_stop' });
  t.equal(nothing.reward, 0, 'without the cancel: DB 0');
  t.same(nothing.rewardBreakdown, { DB: 0 });
  t.equal(nothing.dbCheck?.dbMatch, false);

  const wrong = evaluator.evaluate(tk, {
    taskId: tk.id,
    messages: trajectory([{ ...cancel, arguments: { ...cancel.arguments, reason: 'ordered by mistake' } }]),
    terminationReason: 'user_stop',
  });
  t.same(wrong.rewardBreakdown, { DB: 0 }, 'another cancel reason: DB 0');
});

t.test('ACTION is all-or-nothing (tau2: 1 if every gold action is matched, else 0)', async (t) => {
  const [a, b] = pending;
  const reads = [
    { name: 'get_order_details', arguments: { order_id: a.order_id } },
    { name: 'get_order_details', arguments: { order_id: b.order_id } },
    { name: 'get_user_details', arguments: { user_id: a.user_id } },
  ];
  const tk = task('actions', reads, ['ACTION']);
  const evaluator = new TauEvaluator(domain);
  const run = (calls: typeof reads) =>
    evaluator.evaluate(tk, { taskId: tk.id, messages: trajectory(calls), terminationReason: 'user_stop' });

  const two = run([reads[0], reads[2]]);
  t.same(two.rewardBreakdown, { ACTION: 0 }, 'two of three matched: 0, not 2/3');
  t.equal(two.reward, 0);
  t.same(
    two.actionChecks.map((c) => c.actionMatch),
    [true, false, true],
    'the per-action matches stay as the diagnostic',
  );
  t.same(
    two.actionChecks.map((c) => c.actionReward),
    [1, 0, 1],
  );

  const all = run([reads[2], reads[1], reads[0]]);
  t.same(all.rewardBreakdown, { ACTION: 1 }, 'every gold action matched (in any order): 1');
  t.equal(all.reward, 1);

  const none = evaluator.evaluate(task('no_actions', [], ['ACTION']), {
    taskId: 'no_actions',
    messages: trajectory([]),
    terminationReason: 'user_stop',
  });
  t.same(none.rewardBreakdown, { ACTION: 1 }, 'no gold actions: 1');
});

/** A pending order with two items of different products that each have another available variant, paid by a non-gift card. */
function modifiableOrder(data: RetailDb) {
  for (const o of data.orders.values()) {
    if (o.status !== 'pending' || o.items.length < 2) continue;
    const pm = o.payment_history[0].payment_method_id;
    if (data.users.get(o.user_id)!.payment_methods[pm].source === 'gift_card') continue;
    const picks: { item: string; next: string; price: number; options: Record<string, string> }[] = [];
    for (const it of o.items) {
      if (picks.some((p) => p.item === it.item_id)) continue;
      const alt = Object.values(data.products.get(it.product_id)!.variants).find(
        (v) => v.available && v.item_id !== it.item_id && !picks.some((p) => p.next === v.item_id),
      );
      if (alt) picks.push({ item: it.item_id, next: alt.item_id, price: alt.price, options: alt.options });
    }
    if (picks.length >= 2 && picks[0].price !== picks[picks.length - 1].price) return { order: o, pm, picks };
  }
  throw new Error('no suitable order in the generated DB');
}

t.test("modify_pending_order_items: tau2's behaviour by default, the price fix as an option", async (t) => {
  const { order, pm, picks } = modifiableOrder(db);
  const call: ToolCall = {
    id: 'm',
    name: 'modify_pending_order_items',
    requestor: 'assistant',
    arguments: {
      order_id: order.order_id,
      item_ids: picks.map((p) => p.item),
      new_item_ids: picks.map((p) => p.next),
      payment_method_id: pm,
    },
  };
  type Items = { items: { item_id: string; price: number; options: unknown }[] };
  const itemsWith = (options: Parameters<typeof createRetailDomain>[0]) => {
    const d = createRetailDomain(options);
    const res = d.tools.call(d.initialState(), call);
    t.notOk(res.error, res.content);
    return (JSON.parse(res.content) as Items).items;
  };
  const last = picks[picks.length - 1];
  const tau2 = itemsWith({ db });
  for (const p of picks) {
    const it = tau2.find((i) => i.item_id === p.next)!;
    t.equal(it.price, last.price, 'default (tau2): the last new variant price on every modified item');
    t.same(it.options, last.options);
  }
  const fixed = itemsWith({ db, modifyItemsPriceFix: true });
  for (const p of picks) {
    const it = fixed.find((i) => i.item_id === p.next)!;
    t.equal(it.price, p.price, 'modifyItemsPriceFix: each item gets its own new variant price');
    t.same(it.options, p.options);
  }
  t.same(itemsWith({ db, modifyItemsQuirk: true }), tau2, 'deprecated modifyItemsQuirk: true is the default');
  t.same(itemsWith({ db, modifyItemsQuirk: false }), fixed, 'deprecated modifyItemsQuirk: false is the fix');
  t.equal(modifyItemsPriceFixOf({}), false);
  t.equal(
    modifyItemsPriceFixOf({ modifyItemsPriceFix: true, modifyItemsQuirk: false }),
    true,
    'agreeing values are accepted',
  );
  t.throws(
    () => createRetailDomain({ db, modifyItemsPriceFix: true, modifyItemsQuirk: true }),
    /modifyItemsPriceFix: true contradicts the deprecated modifyItemsQuirk: true/,
  );
  t.throws(
    () => createRetailDomain({ db, modifyItemsPriceFix: 'yes' as never }),
    /modifyItemsPriceFix must be a boolean, got string/,
  );
});
