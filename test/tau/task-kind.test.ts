/**
 * taskKind: the generator's kind of a retail task (the first stated request, before a change of
 * mind), the issue category of a telecom task (generated, or tau2's from its id), none for
 * other tasks; explainReward: a reward breakdown in words, check by check.
 */
import t from 'tap';

import type { RetailTaskKind, RewardInfo, TauTask } from '../../lib/tau/index.js';
import {
  explainReward,
  generateRetailDb,
  generateRetailTasks,
  generateTelecomDb,
  generateTelecomTasks,
  TASK_KIND_PATTERN,
  taskKind,
} from '../../lib/tau/index.js';

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
const db = generateRetailDb({ seed: 5, users: 60, orders: 150 });

t.test('retail: the kind the generator was asked for', async (t) => {
  for (const kind of KINDS) {
    const tasks = generateRetailTasks(db, {
      seed: 7,
      count: 4,
      weights: Object.fromEntries(KINDS.map((k) => [k, k === kind ? 1 : 0])),
      secondRequest: 0,
    });
    t.same(tasks.map(taskKind), [kind, kind, kind, kind], kind);
  }
  // a change of mind (cancel → modify address, return → exchange) keeps the kind first stated
  const changed = generateRetailTasks(db, {
    seed: 8,
    count: 6,
    weights: Object.fromEntries(KINDS.map((k) => [k, k === 'cancel' || k === 'return' ? 1 : 0])),
    changeOfMind: 1,
    secondRequest: 0,
  });
  const purposes = changed.map((x) => x.description?.purpose ?? '');
  t.ok(
    purposes.every((p) => /^generated (cancel->modify_address|return->exchange)$/.test(p)),
    purposes.join('; '),
  );
  t.same(
    changed.map(taskKind),
    purposes.map((p) => (/cancel->/.test(p) ? 'cancel' : 'return')),
  );
  const mixed = generateRetailTasks(db, { seed: 9, count: 40 });
  t.ok(
    mixed.every((x) => KINDS.includes(taskKind(x) as RetailTaskKind) && TASK_KIND_PATTERN.test(taskKind(x) as string)),
  );
  t.ok(new Set(mixed.map(taskKind)).size >= 5, 'several kinds in a default mix');
});

t.test('telecom: the issue category; tau2 tasks by their id; others none', async (t) => {
  const tasks = generateTelecomTasks(generateTelecomDb({ seed: 3, customers: 30 }), { seed: 3, count: 12 });
  for (const task of tasks) t.equal(`[${taskKind(task)}_issue]`, /\[\w+_issue\]/.exec(task.id)?.[0], task.id);
  t.ok(new Set(tasks.map(taskKind)).size >= 2, 'several categories');
  const tau2: TauTask = {
    id: '[mms_issue]airplane_mode_on|bad_network_preference[PERSONA:Easy]',
    user_scenario: { persona: null, instructions: 'You cannot send MMS.' },
    initial_state: {
      initialization_actions: [
        { env_type: 'user', func_name: 'set_user_info', arguments: { name: 'Ann Lee', phone_number: '555-123-4567' } },
      ],
    },
  };
  t.equal(taskKind(tau2), 'mms');
  t.equal(
    taskKind({ id: '17', user_scenario: { persona: null, instructions: 'x' } }),
    null,
    'a tau2 retail task has no kind',
  );
  t.equal(
    taskKind({ id: 'x', user_scenario: { persona: null, instructions: 'x' }, sinkflex_scenario: { something: 1 } }),
    null,
  );
});

t.test('explainReward: the product of the basis, then every check', async (t) => {
  const info: RewardInfo = {
    reward: 0,
    rewardBasis: ['DB', 'ACTION', 'COMMUNICATE'],
    rewardBreakdown: { DB: 1, ACTION: 0, COMMUNICATE: 0 },
    notEvaluated: [],
    dbCheck: { dbMatch: true, dbReward: 1, goldHash: 'g', predictedHash: 'g' },
    envAssertions: [{ funcName: 'assert_mobile_data_on', met: false, note: 'data is off' }],
    actionChecks: [
      {
        action: { action_id: 'a0', name: 'find_user_id_by_email', arguments: { email: 'a@b.c' } },
        actionMatch: true,
        actionReward: 1,
      },
      {
        action: { action_id: 'a1', name: 'get_order_details', arguments: { order_id: '#W1' } },
        actionMatch: false,
        actionReward: 0,
      },
    ],
    communicateChecks: [{ info: '1Z999', met: false, justification: "Information '1Z999' not communicated." }],
    nlAssertions: null,
    info: {},
  };
  t.same(explainReward(info), [
    { ok: null, text: 'reward 0 = DB 1 × ACTION 0 × COMMUNICATE 0 (basis DB, ACTION, COMMUNICATE)' },
    { ok: true, text: 'database matches the gold database' },
    { ok: false, text: 'env assertion assert_mobile_data_on fails: data is off (diagnostic, not in the basis)' },
    { ok: true, text: 'gold action called: find_user_id_by_email({"email":"a@b.c"})' },
    { ok: false, text: 'gold action missed: get_order_details({"order_id":"#W1"})' },
    { ok: false, text: "fact not communicated: '1Z999'" },
  ]);
  const premature = explainReward(
    JSON.parse(
      JSON.stringify({
        ...info,
        reward: 0,
        rewardBreakdown: {},
        dbCheck: null,
        envAssertions: [],
        actionChecks: [],
        communicateChecks: [],
        info: { note: 'Simulation terminated prematurely. Termination reason: user_give_up' },
      }),
    ) as Record<string, unknown>,
  );
  t.same(
    premature,
    [
      { ok: null, text: 'reward 0 (basis DB, ACTION, COMMUNICATE)' },
      { ok: null, text: 'Simulation terminated prematurely. Termination reason: user_give_up' },
    ],
    'as read back from JSON',
  );
  t.same(explainReward(null), []);
  t.same(explainReward({ nothing: 1 }), [], 'not a reward breakdown');
});
