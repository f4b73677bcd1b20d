import t from 'tap';

import type { Message, TelecomTask, UserReply } from '../../lib/tau/index.js';
import {
  createTelecomDomain,
  ExpertTelecomAgent,
  generateTelecomDb,
  generateTelecomTasks,
  passHatK,
  RandomAgent,
  runEpisodeSync,
  ScriptedTelecomUser,
  TauEpisode,
  TauEvaluator,
  TELECOM_FAULTS,
  toOpenAIMessages,
} from '../../lib/tau/index.js';
import { syncTelecom } from '../../lib/tau/domains/telecom/domain.js';
import { telecomFault } from '../../lib/tau/domains/telecom/faults.js';
import { telecomGoalMet } from '../../lib/tau/domains/telecom/generate-tasks.js';
import { telecomScenarioOf } from '../../lib/tau/domains/telecom/scenario.js';

const db = generateTelecomDb({ seed: 7, customers: 40 });
const domain = createTelecomDomain({ db });
const tasks = generateTelecomTasks(db, { seed: 7, count: 160 });

t.test('generated backends and fault scenarios', async (t) => {
  t.same(db.statistics().num_customers, 40);
  t.equal(generateTelecomDb({ seed: 7, customers: 40 }).hash(), db.hash(), 'same seed, same backend');
  t.not(generateTelecomDb({ seed: 8, customers: 40 }).hash(), db.hash());
  t.same(generateTelecomTasks(db, { seed: 7, count: 6 }), tasks.slice(0, 6), 'same seed, same tasks');
  const seen = new Set(tasks.flatMap((x) => x.sinkflex_scenario?.faults ?? []));
  for (const f of TELECOM_FAULTS) t.ok(seen.has(f.name), `fault ${f.name} generated`);
  for (const c of ['service', 'mobile_data', 'mms'])
    t.ok(
      tasks.some((x) => x.sinkflex_scenario?.category === c),
      c,
    );
  for (const p of ['None', 'Easy', 'Hard'])
    t.ok(
      tasks.some((x) => x.sinkflex_scenario?.persona === p),
      p,
    );
  t.ok(
    tasks.some((x) => (x.sinkflex_scenario?.faults.length ?? 0) >= 3),
    'several root causes',
  );
  t.ok(
    tasks.some((x) => x.sinkflex_scenario?.abroad),
    'users abroad',
  );
  t.ok(
    tasks.some((x) => x.sinkflex_scenario?.target?.description === 'good'),
    'places without 5G: lower target speed',
  );
  const unfixable = tasks.filter((x) => !x.sinkflex_scenario?.fixable);
  t.ok(unfixable.length > 5 && unfixable.length < 40, `${unfixable.length} unfixable tasks`);
  for (const x of unfixable) t.same(x.evaluation_criteria?.actions?.at(-1)?.name, 'transfer_to_human_agents');
  t.ok(
    unfixable.every((x) => x.evaluation_criteria?.reward_basis?.includes('ACTION')),
    'unfixable tasks check the transfer',
  );
  // every task: broken after set-up, fixed by its gold actions (verified against the assertions)
  const evaluator = new TauEvaluator(domain);
  for (const task of tasks.slice(0, 40)) {
    const s = telecomScenarioOf(task);
    t.equal(telecomGoalMet(domain.initialState(task), s.category, s.target), false, `${task.id} starts broken`);
    const gold = evaluator.goldState(task);
    t.same(gold.failed, [], `${task.id}: gold actions run`);
    const holds = (task.evaluation_criteria?.env_assertions ?? []).every((a) =>
      (domain.assertions ?? {})[a.func_name](gold.state, a.arguments),
    );
    t.ok(holds, `${task.id}: gold end state meets the assertions`);
  }
  const always = generateTelecomTasks(db, {
    seed: 1,
    count: 10,
    actionChecks: 'always',
    maxFaults: 1,
    categories: { service: 0, mms: 0 },
  });
  t.ok(
    always.every(
      (x) =>
        x.evaluation_criteria?.reward_basis?.includes('ACTION') &&
        x.sinkflex_scenario?.category === 'mobile_data' &&
        x.sinkflex_scenario.faults.length <= 2,
    ),
  );
  t.throws(() => generateTelecomTasks(db, { maxFaults: 4 }), RangeError);
  t.throws(() => generateTelecomTasks(db, { count: -1 }), RangeError);
  t.throws(() => generateTelecomDb({ customers: 0 }), RangeError);
  t.throws(() => telecomFault('nope'), RangeError);
});

t.test('expert solves >= 95% of generated tasks; a random agent stays near 0', async (t) => {
  const ep = new TauEpisode(domain, { user: new ScriptedTelecomUser(), maxSteps: 200 });
  const results = [];
  const failures: string[] = [];
  for (const [i, task] of tasks.entries()) {
    const r = runEpisodeSync(ep, new ExpertTelecomAgent(), task, i);
    results.push({ taskId: task.id, reward: r.final.reward });
    if (r.final.reward !== 1) failures.push(`${task.id} ${r.final.terminationReason}`);
  }
  const rate = 1 - failures.length / tasks.length;
  t.ok(rate >= 0.95, `expert success ${rate} (failures: ${failures.join('; ')})`);
  t.equal(passHatK(results, 1), rate);
  let random = 0;
  for (const [i, task] of tasks.slice(0, 80).entries())
    random += runEpisodeSync(ep, new RandomAgent(), task, 1000 + i).final.reward;
  t.ok(random / 80 <= 0.05, `random agent mean reward ${random / 80}`);
  const a = runEpisodeSync(ep, new RandomAgent(), tasks[5], 3).trajectory;
  t.same(runEpisodeSync(ep, new RandomAgent(), tasks[5], 3).trajectory, a, 'same seed, same trajectory');
});

t.test('user tool calls are never visible to the agent', async (t) => {
  const ep = new TauEpisode(domain, { user: new ScriptedTelecomUser(), maxSteps: 200 });
  const task = tasks.find((x) => x.sinkflex_scenario?.category === 'mms' && x.sinkflex_scenario.fixable) as TelecomTask;
  const expert = new ExpertTelecomAgent();
  let step = ep.resetSync(task, 1);
  expert.reset({ task, tools: ep.tools, policy: ep.policy, seed: 1 });
  const seen: Message[] = [...step.observation];
  while (!step.done) {
    step = ep.actSync(expert.act(step.observation));
    seen.push(...step.observation);
  }
  t.equal(step.reward, 1);
  const traj = ep.trajectory();
  const userCalls = traj.filter((m) => m.role === 'user' && m.toolCalls && m.toolCalls.length > 0);
  t.ok(userCalls.length >= 2, 'the user acted on the phone');
  t.ok(
    traj.some((m) => m.role === 'tool' && m.requestor === 'user'),
    'user tool results are in the trajectory',
  );
  t.notOk(
    seen.some((m) => m.role === 'user' && m.toolCalls && m.toolCalls.length > 0),
    'no user tool call reaches the agent',
  );
  t.notOk(
    seen.some((m) => m.role === 'tool' && m.requestor === 'user'),
    'no user tool result reaches the agent',
  );
  t.notOk(
    toOpenAIMessages(traj).some(
      (m) =>
        m.role === 'tool' &&
        !traj.some((x) => x.role === 'tool' && x.requestor === 'assistant' && x.id === m.tool_call_id),
    ),
    'chat export keeps only agent tool results',
  );
  const names = new Set(ep.tools.map((x) => x.function.name));
  t.notOk(
    ['toggle_airplane_mode', 'check_status_bar', 'make_payment'].some((n) => names.has(n)),
    'the agent is not offered user tools',
  );
  // the agent calling a user tool fails like any unknown tool
  ep.resetSync(task, 2);
  const bad = ep.actSync({ toolCalls: [{ name: 'toggle_airplane_mode', arguments: {} }] });
  t.match(String(bad.observation.at(-1)?.content), "Tool 'toggle_airplane_mode' not found");
});

t.test('the user acts only when asked, and reports what its phone shows', async (t) => {
  const task = tasks.find(
    (x) => x.sinkflex_scenario?.faults.includes('airplane_mode_on') && x.sinkflex_scenario.persona !== 'Hard',
  ) as TelecomTask;
  const ep = new TauEpisode(domain, { user: new ScriptedTelecomUser({ patience: 3 }), maxSteps: 100 });
  let step = ep.resetSync(task, 0);
  t.match(String(step.observation[1].content), /phone number is/);
  for (const text of ['Sure.', 'I understand.', 'Okay.', 'Thanks for waiting.']) {
    if (step.done) break;
    step = ep.actSync(text);
  }
  t.equal(step.done, true, 'an impatient user gives up');
  t.equal(step.stopMarker, '###STOP###');
  t.notOk(
    ep.trajectory().some((m) => m.role === 'user' && m.toolCalls),
    'never asked, never acted',
  );
  t.equal(step.reward, 0);

  ep.resetSync(task, 0);
  step = ep.actSync('Could you please turn off airplane mode on your phone?');
  const calls = ep.trajectory().flatMap((m) => (m.role === 'user' && m.toolCalls ? m.toolCalls : []));
  t.same(
    calls.map((c) => c.name),
    ['toggle_airplane_mode'],
    'plain words work too',
  );
  t.match(
    String(ep.trajectory().find((m) => m.role === 'tool' && m.requestor === 'user')?.content),
    /^Airplane Mode is now OFF\.\nStatus Bar:/,
  );
  t.match(
    String(step.observation.at(-1)?.content),
    /Airplane Mode is now OFF\.\nStatus Bar:|fixed it/,
    'the user quotes its phone, or is satisfied',
  );

  const user = new ScriptedTelecomUser();
  user.reset(task, 0);
  const parse = (s: string) =>
    user
      .requestedActions(s)
      .map((c) => `${c.name}${Object.keys(c.arguments).length ? JSON.stringify(c.arguments) : ''}`);
  t.same(
    parse(
      'Please run `check_status_bar`, then `set_network_mode_preference` with mode 3g_only; then `grant_app_permission` for the messaging app: sms and storage.',
    ),
    [
      'check_status_bar',
      'set_network_mode_preference{"mode":"3g_only"}',
      'grant_app_permission{"app_name":"messaging","permission":"sms"}',
      'grant_app_permission{"app_name":"messaging","permission":"storage"}',
    ],
  );
  t.same(parse('Please restart your phone, then run a speed test.'), ['reboot_device', 'run_speed_test']);
  t.same(parse('Let me check that for you.'), [], 'no action named');
  t.same(
    parse('toggle_data_saver_mode and toggle_data, then toggle_data again'),
    ['toggle_data_saver_mode', 'toggle_data'],
    'each action once per message',
  );
  t.throws(() => user.reset({ id: 'x', user_scenario: { instructions: 'hi' } }, 0), /no telecom scenario/);
});

t.test('a hard persona follows instructions badly; the expert copes', async (t) => {
  const hard = tasks.filter((x) => x.sinkflex_scenario?.persona === 'Hard').slice(0, 30);
  const ep = new TauEpisode(domain, { user: new ScriptedTelecomUser({ hardness: 0.9 }), maxSteps: 200 });
  let ok = 0;
  let worried = 0;
  for (const [i, task] of hard.entries()) {
    const r = runEpisodeSync(ep, new ExpertTelecomAgent(), task, i);
    if (r.final.reward === 1) ok++;
    if (
      r.trajectory.some(
        (m) =>
          m.role === 'user' && /worried|nervous|not sure I understand|not sure what it means/.test(m.content ?? ''),
      )
    )
      worried++;
  }
  t.ok(worried > 10, `${worried} conversations with a confused user`);
  t.ok(ok / hard.length >= 0.95, `expert solved ${ok}/${hard.length}`);
});

t.test('synchronisation of the backend into the phone', async (t) => {
  const task = tasks.find((x) => x.sinkflex_scenario?.faults.includes('overdue_bill_suspension')) as TelecomTask;
  const scenario = telecomScenarioOf(task);
  const s = domain.initialState(task);
  const u = s.user.surroundings;
  const billId = (task.evaluation_criteria?.env_assertions ?? []).find((a) => a.func_name === 'assert_no_overdue_bill')
    ?.arguments.overdue_bill_id as string;
  t.same([u.line_active, s.user.device.network_connection_status], [false, 'no_service'], 'suspended line: no service');
  const ep = new TauEpisode(domain, {
    user: { reset() {}, respond: (): UserReply => ({ content: 'ok' }) },
    maxSteps: 100,
  });
  ep.resetSync(task, 0);
  const live = () => ep.state as typeof s;
  ep.actSync({
    toolCalls: [{ name: 'send_payment_request', arguments: { customer_id: scenario.customer_id, bill_id: billId } }],
  });
  t.same(
    live().user.surroundings.payment_request,
    { bill_id: billId, amount_due: live().db.bills.get(billId)?.total_due, paid: false },
    'a bill awaiting payment becomes a payment request on the phone',
  );
  // the user pays on the phone; the next sync marks the bill paid and clears the request
  const pay = domain.userTools.call(live(), { id: 'p', name: 'make_payment', arguments: {}, requestor: 'user' });
  t.match(pay.content, /^Payment of [\d.]+ USD has been made for bill B\d{7}\.$/);
  t.equal(live().db.bills.get(billId)?.status, 'Awaiting Payment', 'not yet synced');
  syncTelecom(live());
  t.same([live().db.bills.get(billId)?.status, live().user.surroundings.payment_request], ['Paid', null]);
  ep.actSync({
    toolCalls: [{ name: 'resume_line', arguments: { customer_id: scenario.customer_id, line_id: scenario.line_id } }],
  });
  t.same(
    [live().user.surroundings.line_active, live().user.device.network_connection_status],
    [true, 'no_service'],
    'synced after the agent step; the phone needs a reboot to notice',
  );
  ep.actSync({
    toolCalls: [
      { name: 'disable_roaming', arguments: { customer_id: scenario.customer_id, line_id: scenario.line_id } },
    ],
  });
  t.equal(live().user.surroundings.roaming_allowed, false);
  ep.actSync({
    toolCalls: [
      { name: 'enable_roaming', arguments: { customer_id: scenario.customer_id, line_id: scenario.line_id } },
    ],
  });
  t.equal(live().user.surroundings.roaming_allowed, true);
  const plain = domain.initialState();
  syncTelecom(plain);
  t.same(plain.user.surroundings.phone_number, null, 'no phone number: nothing to sync');
  plain.user.surroundings.phone_number = '000';
  t.throws(() => syncTelecom(plain), /Wrong scenario, line not found/);
});

t.test('grading: end-state assertions on phone and backend, replayed with sync', async (t) => {
  const task = tasks.find(
    (x) => x.sinkflex_scenario?.faults.includes('data_usage_exceeded') && x.sinkflex_scenario.fixable,
  ) as TelecomTask;
  const s = telecomScenarioOf(task);
  const ev = new TauEvaluator(domain);
  const user = (name: string, args: Record<string, unknown> = {}, id = name): Message[] => [
    { role: 'user', content: null, toolCalls: [{ id, name, arguments: args, requestor: 'user' }] },
  ];
  const run = (msgs: Message[]) => {
    const state = domain.initialState(task);
    const out: Message[] = [{ role: 'assistant', content: 'Hi! How can I help you today?' }];
    for (const m of msgs) {
      out.push(m);
      for (const c of (m.role === 'user' || m.role === 'assistant' ? m.toolCalls : undefined) ?? []) {
        out.push((c.requestor === 'user' ? domain.userTools : domain.tools).call(state, c));
        syncTelecom(state);
      }
    }
    out.push({ role: 'user', content: '###STOP###' });
    return ev.evaluate(task, { taskId: task.id, messages: out, terminationReason: 'user_stop' });
  };
  const gold = (task.evaluation_criteria?.actions ?? []).map((a, i): Message =>
    a.requestor === 'user'
      ? user(a.name, a.arguments, `g${i}`)[0]
      : {
          role: 'assistant',
          content: null,
          toolCalls: [{ id: `g${i}`, name: a.name, arguments: a.arguments, requestor: 'assistant' }],
        },
  );
  const full = run(gold);
  t.equal(full.reward, 1);
  t.ok(
    full.envAssertions.some((a) => a.funcName === 'assert_data_refueling_amount' && a.met),
    'backend assertion met',
  );
  const refuelAt = gold.findIndex((m) => m.role === 'assistant' && m.toolCalls?.[0].name === 'refuel_data');
  const noRefuel = run(gold.filter((_, i) => i !== refuelAt));
  t.equal(noRefuel.reward, 0, 'without the refuel the phone has no data');
  t.ok(noRefuel.envAssertions.some((a) => !a.met && a.funcName === 'assert_data_refueling_amount'));
  const twice = run([
    ...gold,
    {
      role: 'assistant',
      content: null,
      toolCalls: [
        {
          id: 'extra',
          name: 'refuel_data',
          arguments: { customer_id: s.customer_id, line_id: s.line_id, gb_amount: 2.0 },
          requestor: 'assistant',
        },
      ],
    },
  ]);
  t.equal(twice.reward, 0, 'refuelling beyond what was agreed breaks the backend assertion');
  const premature = ev.evaluate(task, { taskId: task.id, messages: [], terminationReason: 'max_steps' });
  t.equal(premature.reward, 0);
});
