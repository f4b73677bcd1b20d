import { existsSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import type { Message, TauTask, TelecomDomain } from '../../lib/tau/index.js';
import {
  ExpertTelecomAgent,
  loadTau2Telecom,
  runEpisodeSync,
  scenarioFromTau2Task,
  ScriptedTelecomUser,
  TauEpisode,
  TauEvaluator,
} from '../../lib/tau/index.js';

const DIR = process.env.SINKFLEX_TAU2_DIR
  ? join(process.env.SINKFLEX_TAU2_DIR, 'telecom')
  : join(process.cwd(), '..', 'shared', 'tau2', 'telecom');
const skip = existsSync(DIR) ? false : `tau2 data not found at ${DIR} (set SINKFLEX_TAU2_DIR)`;

/** A conversation made of exactly the task's gold calls (agent and user), each with its real result. */
function goldTrajectory(domain: TelecomDomain, task: TauTask, drop = -1): Message[] {
  const state = domain.initialState(task);
  const msgs: Message[] = [
    { role: 'assistant', content: 'Hi! How can I help you today?' },
    { role: 'user', content: 'Hello.' },
  ];
  for (const [i, a] of (task.evaluation_criteria?.actions ?? []).entries()) {
    if (i === drop) continue;
    const requestor = a.requestor ?? 'assistant';
    const call = { id: `g${i}`, name: a.name, arguments: a.arguments, requestor };
    msgs.push(
      requestor === 'user'
        ? { role: 'user', content: null, toolCalls: [call] }
        : { role: 'assistant', content: null, toolCalls: [call] },
    );
    const kit = requestor === 'user' ? domain.userTools : domain.tools;
    msgs.push(kit.call(state, call));
    domain.sync?.(state);
  }
  msgs.push({ role: 'user', content: 'Thanks. ###STOP###' });
  return msgs;
}

t.test('tau2 telecom files: databases, hashes, the 20 small-set tasks', { skip }, async (t) => {
  const { domain, tasks } = loadTau2Telecom(DIR, { split: 'small' });
  t.equal(tasks.length, 20);
  t.same(domain.db.statistics(), {
    num_plans: 5,
    num_customers: 4,
    num_lines: 9,
    num_bills: 6,
    num_devices: 9,
    num_payment_methods: 4,
  });
  t.match(
    domain.policy,
    /^<main_policy>\n# Telecom Agent Policy[\s\S]*<\/main_policy>\n<tech_support_policy>\n# Introduction[\s\S]*<\/tech_support_policy>$/,
  );
  // sha256(json.dumps(model_dump(), sort_keys=True, default=str)) of tau2's TelecomDB / TelecomUserDB, computed with CPython + pydantic
  const s0 = domain.initialState();
  t.equal(s0.agentHash(), '304cf5ef059852e117ea801ab9a5efc24c9713ec887679dc2e30acceb4b6742d');
  t.equal(s0.userHash(), 'e1f3a8637388808221228ff3f87294444e6b64caf721f5eb243a85d0a9380b28');
  const u = s0.user.data;
  Object.assign(u.surroundings, {
    name: 'John Smith',
    phone_number: '555-123-2002',
    is_abroad: true,
    roaming_allowed: true,
    payment_request: { bill_id: 'B1234321', amount_due: 65.0, paid: false },
  });
  Object.assign(u.device, {
    vpn_connected: true,
    vpn_details: { server_address: '192.168.1.1', protocol: 'OpenVPN', server_performance: 'poor' },
  });
  u.device.active_apn_settings.mmsc_url = null;
  t.equal(
    s0.userHash(),
    '27f2f8d507c2222443a2dc5e560ceb52c24f80d54a6e12b60c9d16f0f0f5968e',
    'a changed phone hashes like CPython too',
  );

  const evaluator = new TauEvaluator(domain);
  for (const task of tasks) {
    const scenario = scenarioFromTau2Task(task);
    t.ok(scenario, `${task.id}: scenario derived`);
    const broken = domain.initialState(task);
    const asserts = task.evaluation_criteria?.env_assertions ?? [];
    const holds = (s: typeof broken) =>
      asserts.every((a) => (domain.assertions ?? {})[a.func_name](s, a.arguments) === (a.assert_value ?? true));
    const fixable = scenario?.fixable === true;
    t.equal(holds(broken), !fixable, `${task.id}: set-up breaks the phone (unfixable tasks assert the broken state)`);
    const full = evaluator.evaluate(task, {
      taskId: task.id,
      messages: goldTrajectory(domain, task),
      terminationReason: 'user_stop',
    });
    t.equal(full.reward, 1, `${task.id}: the gold calls solve it`);
    t.equal(full.dbCheck?.dbMatch, true, `${task.id}: predicted = gold (agent and user DB)`);
    const n = task.evaluation_criteria?.actions?.length ?? 0;
    const partial = evaluator.evaluate(task, {
      taskId: task.id,
      messages: goldTrajectory(domain, task, n - 1),
      terminationReason: 'user_stop',
    });
    t.equal(partial.reward, 0, `${task.id}: without the last gold call it fails`);
  }
  const sus = tasks.find((x) => x.id.includes('overdue_bill_suspension')) as TauTask;
  const s = domain.initialState(sus);
  t.same(
    [
      s.db.lines.get('L1002')?.status,
      s.user.surroundings.line_active,
      s.user.device.network_connection_status,
      s.db.bills.get('B1234321')?.total_due,
    ],
    ['Suspended', false, 'no_service', 65.0],
  );
});

t.test('the expert solves the 20 tau2 small-set tasks when given their root cause', { skip }, async (t) => {
  const { domain, tasks } = loadTau2Telecom(DIR);
  t.equal(tasks.length, 20, 'tasks_small.json is the default without tasks.json');
  const ep = new TauEpisode(domain, { user: new ScriptedTelecomUser(), maxSteps: 200 });
  let solved = 0;
  for (const [i, task] of tasks.entries()) {
    for (const seed of [i, i + 100]) {
      const r = runEpisodeSync(ep, new ExpertTelecomAgent(), task, seed);
      if (r.final.reward === 1) solved++;
      else
        t.comment(
          `${task.id} seed ${seed}: ${r.final.terminationReason} ${JSON.stringify(r.final.rewardInfo?.envAssertions)}`,
        );
    }
  }
  t.ok(solved / 40 >= 0.95, `expert solved ${solved}/40 runs`);
  const lock = tasks.find((x) => x.id.includes('lock_sim_card_pin')) as TauTask;
  const r = runEpisodeSync(ep, new ExpertTelecomAgent(), lock, 3);
  t.equal(r.final.stopMarker, '###TRANSFER###', 'a PIN-locked SIM ends in a transfer');
  t.equal(r.final.rewardInfo?.rewardBreakdown.ACTION, 1);
});
