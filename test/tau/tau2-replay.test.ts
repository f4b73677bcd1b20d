import { existsSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import type { Message, RetailDb, SimulationRun, TauTask } from '../../lib/tau/index.js';
import { loadTau2Retail, TauEvaluator } from '../../lib/tau/index.js';
import { loadTau2Tasks } from '../../lib/tau/domains/retail/loader.js';

const DIR = process.env.SINKFLEX_TAU2_DIR
  ? join(process.env.SINKFLEX_TAU2_DIR, 'retail')
  : join(process.cwd(), '..', 'shared', 'tau2', 'retail');

// Task 105's gold exchange pays a 21.1 price difference from a gift card holding 17.0: tau2's own
// gold replay fails there too (tau2 data issue); tau2 logs it, skips it and still scores the DB
// check against the gold state the other gold actions give.
const GOLD_WRITE_FAILS = new Set(['105']);

/** A trajectory made of exactly the gold calls, each followed by its real result. */
function goldTrajectory(
  task: TauTask,
  call: (c: { id: string; name: string; arguments: Record<string, unknown> }) => Message,
): Message[] {
  const msgs: Message[] = [
    { role: 'assistant', content: 'Hi! How can I help you today?' },
    { role: 'user', content: 'Hello.' },
  ];
  for (const [i, a] of (task.evaluation_criteria?.actions ?? []).entries()) {
    const c = { id: `c${i}`, name: a.name, arguments: a.arguments };
    msgs.push({ role: 'assistant', content: null, toolCalls: [{ ...c, requestor: 'assistant' }] });
    msgs.push(call(c));
  }
  msgs.push({ role: 'user', content: '###STOP###' });
  return msgs;
}

t.test(
  'tau2 retail train split',
  { skip: existsSync(DIR) ? false : `tau2 data not found at ${DIR} (set SINKFLEX_TAU2_DIR)` },
  async (t) => {
    const { domain, tasks } = loadTau2Retail(DIR, { split: 'train' });
    t.equal(tasks.length, 74);
    t.same(domain.db.statistics().statuses, { pending: 423, delivered: 373, processed: 102, cancelled: 102 });
    // sha256(json.dumps(model_dump(), sort_keys=True)) of tau2's RetailDB, computed with CPython.
    t.equal(domain.initialState().hash(), 'b25c9cb211f5efcaee5dd646054a73c4a9f43f4f5acc32c10713cd9f9ac20e9c');

    const evaluator = new TauEvaluator(domain);
    let writes = 0;
    let dropTests = 0;
    for (const task of tasks) {
      const state = domain.initialState(task);
      const traj = goldTrajectory(task, (c) => domain.tools.call(state, { ...c, requestor: 'assistant' }));
      const writeResults = traj.filter(
        (m, i) =>
          m.role === 'tool' &&
          domain.tools.get((traj[i - 1] as { toolCalls: { name: string }[] }).toolCalls[0].name)?.mutates,
      );
      writes += writeResults.length;
      const failedWrites = writeResults.filter((m) => (m as { error: boolean }).error);
      if (GOLD_WRITE_FAILS.has(task.id))
        t.equal(failedWrites.length, 1, `task ${task.id}: the known failing gold write`);
      else t.equal(failedWrites.length, 0, `task ${task.id}: every gold write succeeds`);

      const run: SimulationRun = { taskId: task.id, messages: traj, terminationReason: 'user_stop' };
      const info = evaluator.evaluate(
        { ...task, evaluation_criteria: { ...task.evaluation_criteria, reward_basis: ['DB'] } },
        run,
      );
      if (GOLD_WRITE_FAILS.has(task.id)) {
        t.same(info.notEvaluated, [], `task ${task.id}: the DB check is scored although a gold write failed (as tau2)`);
        t.match(
          info.info.gold_action_errors,
          [{ name: 'exchange_delivered_order_items', error: /Insufficient gift card balance/ }],
          'the failed gold write is listed',
        );
      }
      t.equal(info.reward, 1, `task ${task.id}: gold trajectory gets reward 1 on DB`);
      t.equal(info.dbCheck?.goldHash, info.dbCheck?.predictedHash);
      t.ok(
        info.actionChecks.every((c) => c.actionMatch),
        `task ${task.id}: every gold action matched`,
      );

      // the last write that changes the database: dropping it (and its result) gives DB 0
      let writeIdx = -1;
      const probe = domain.initialState(task);
      for (let i = 0; i < traj.length; i++) {
        const m = traj[i];
        if (m.role !== 'assistant' || !m.toolCalls) continue;
        const before = probe.fork();
        domain.tools.call(probe, m.toolCalls[0]);
        if (domain.tools.get(m.toolCalls[0].name)?.mutates && !probe.equals(before)) writeIdx = i;
      }
      if (writeIdx >= 0) {
        const dropped = traj.filter((_, j) => j !== writeIdx && j !== writeIdx + 1);
        const replayState = domain.initialState(task);
        for (let j = 0; j < dropped.length; j++) {
          const d = dropped[j];
          if (d.role === 'assistant' && d.toolCalls) dropped[j + 1] = domain.tools.call(replayState, d.toolCalls[0]);
        }
        t.equal(
          evaluator.evaluate(task, { ...run, messages: dropped }).rewardBreakdown.DB,
          0,
          `task ${task.id}: dropping the last effective write gives DB 0`,
        );
        dropTests++;
      }
      if (writeIdx < 0) continue;
      const wcall = (traj[writeIdx] as { toolCalls: { name: string; arguments: Record<string, unknown> }[] })
        .toolCalls[0];
      const altered = structuredClone(traj);
      const args = (altered[writeIdx] as { toolCalls: { arguments: Record<string, unknown> }[] }).toolCalls[0]
        .arguments;
      if ('reason' in args)
        args.reason = args.reason === 'no longer needed' ? 'ordered by mistake' : 'no longer needed';
      else if ('address1' in args) args.address1 = `${String(args.address1)} X`;
      else if (Array.isArray(args.item_ids) && args.item_ids.length > 1)
        args.item_ids = (args.item_ids as string[]).slice(1);
      else if ('payment_method_id' in args && wcall.name === 'return_delivered_order_items') args.item_ids = [];
      else args.payment_method_id = 'not_a_method';
      const replayState = domain.initialState(task);
      for (let i = 0; i < altered.length; i++) {
        const m = altered[i];
        if (m.role === 'assistant' && m.toolCalls) altered[i + 1] = domain.tools.call(replayState, m.toolCalls[0]);
      }
      t.equal(
        evaluator.evaluate(task, { ...run, messages: altered }).rewardBreakdown.DB,
        0,
        `task ${task.id}: altering a write gives DB 0`,
      );
    }
    t.ok(writes >= 70, `replayed ${writes} gold writes`);
    t.ok(dropTests >= 60, `${dropTests} tasks checked for dropped and altered writes`);
  },
);

t.test('tau2 task loading options and errors', { skip: existsSync(DIR) ? false : 'tau2 data not found' }, async (t) => {
  t.equal(loadTau2Tasks(join(DIR, 'tasks_train.json'), { ids: ['0', '1'] }).length, 2);
  t.equal(loadTau2Tasks(DIR, { split: 'train' }).length, 74);
  t.throws(() => loadTau2Tasks(DIR), /no tasks\.json/);
  t.throws(() => loadTau2Tasks(DIR, { split: 'nope' }), /no tasks\.json or tasks_nope\.json/);
});

t.test(
  'modify_pending_order_items: tau2 by default, each variant its own price with modifyItemsPriceFix',
  { skip: existsSync(DIR) ? false : 'tau2 data not found' },
  async (t) => {
    const fixed = loadTau2Retail(DIR, { split: 'train', modifyItemsPriceFix: true });
    const quirk = loadTau2Retail(DIR, { split: 'train' });
    // find a pending order with two items of different products that both have another available variant
    const db: RetailDb = fixed.domain.db;
    for (const o of db.orders.values()) {
      if (o.status !== 'pending' || o.items.length < 2) continue;
      const picks: [string, string][] = [];
      for (const it of o.items) {
        const alt = Object.values(db.products.get(it.product_id)!.variants).find(
          (v) => v.available && v.item_id !== it.item_id && !picks.some((p) => p[1] === v.item_id),
        );
        if (alt && !picks.some((p) => p[0] === it.item_id)) picks.push([it.item_id, alt.item_id]);
      }
      if (picks.length < 2) continue;
      const pm = o.payment_history[0].payment_method_id;
      if (db.users.get(o.user_id)!.payment_methods[pm].source === 'gift_card') continue;
      const call = {
        id: 'x',
        name: 'modify_pending_order_items',
        requestor: 'assistant' as const,
        arguments: {
          order_id: o.order_id,
          item_ids: picks.map((p) => p[0]),
          new_item_ids: picks.map((p) => p[1]),
          payment_method_id: pm,
        },
      };
      const a = JSON.parse(fixed.domain.tools.call(fixed.domain.initialState(), call).content) as {
        items: { item_id: string; price: number; options: unknown }[];
      };
      const b = JSON.parse(quirk.domain.tools.call(quirk.domain.initialState(), call).content) as typeof a;
      const variantOf = (newId: string) => {
        for (const p of db.products.values()) if (p.variants[newId]) return p.variants[newId];
        throw new Error('variant');
      };
      const last = variantOf(picks[picks.length - 1][1]);
      for (const [, newId] of picks) {
        const own = variantOf(newId);
        t.equal(
          a.items.find((i) => i.item_id === newId)?.price,
          own.price,
          'fixed: each item gets its own variant price',
        );
        t.same(a.items.find((i) => i.item_id === newId)?.options, own.options);
        t.equal(
          b.items.find((i) => i.item_id === newId)?.price,
          last.price,
          'quirk: the last variant price on every item',
        );
        t.same(b.items.find((i) => i.item_id === newId)?.options, last.options);
      }
      return;
    }
    t.fail('no suitable order found');
  },
);
