/**
 * Seeded generation of telecom fault scenarios in tau2's task format: a complaint (no service,
 * mobile data, MMS), one to three root causes from {@link TELECOM_FAULTS} (each needed for
 * the complaint, at most one per group, sometimes one the agent cannot fix), a user at home or
 * abroad, sometimes where there is no 5G, and a persona that follows instructions well or
 * badly. Tasks are graded by end-state assertions on the phone and the backend (service is
 * back, mobile data works at the target speed, MMS can be sent, the overdue bill is paid, the
 * data was refuelled) plus, optionally, action checks. Every task is verified by simulation:
 * broken after set-up, fixed by its gold actions, and broken again without any one root cause's
 * fix.
 * @module
 */
import { callDomainTool } from '../../domain.js';
import { Rng } from '../../rng.js';
import type {
  EnvAssertion,
  EnvFunctionCall,
  RewardType,
  StructuredUserInstructions,
  TaskAction,
  TauTask,
} from '../../task.js';
import { TELECOM_TODAY } from './backend.js';
import type { SignalStrength } from './device.js';
import type { TelecomDomain } from './domain.js';
import { createTelecomDomain } from './domain.js';
import type { FaultContext, FaultSpec } from './faults.js';
import { FAULT_GROUP_ORDER, TELECOM_FAULTS } from './faults.js';
import { canSendMms, speedBand, speedTest } from './phone.js';
import type { TelecomCategory, TelecomPersona, TelecomScenario } from './scenario.js';
import type { TelecomDb, TelecomLine } from './schema.js';
import type { TelecomState } from './state.js';
import { optionKeys, refuseUnknownOptions } from '../../../util/options.js';

/** A generated telecom task. */
export type TelecomTask = TauTask<TelecomScenario>;

const GENERATE_TELECOM_TASKS_KEYS = optionKeys<GenerateTelecomTasksOptions>({
  seed: true,
  count: true,
  categories: true,
  maxFaults: true,
  unfixableRate: true,
  personas: true,
  actionChecks: true,
  idPrefix: true,
});

/** Options of {@link generateTelecomTasks}. */
export interface GenerateTelecomTasksOptions {
  /** Seed. Default 0. */
  seed?: number;
  /** Number of tasks. Default 100. */
  count?: number;
  /** Relative weight of each complaint. Default service 1, mobile data 1.2, MMS 1.2. */
  categories?: Partial<Record<TelecomCategory, number>>;
  /** Most root causes per task (1–3). Default 3. */
  maxFaults?: number;
  /** Probability that one root cause cannot be fixed (the right outcome is a transfer). Default 0.12. */
  unfixableRate?: number;
  /** Relative weight of each persona. Default equal. */
  personas?: Partial<Record<TelecomPersona, number>>;
  /** Gold action checks in the reward: only for unfixable tasks (tau2's way, default) or always. */
  actionChecks?: 'unfixable' | 'always';
  /** Id prefix. Default `gen`. */
  idPrefix?: string;
}

const PERSONA_TEXT: Record<TelecomPersona, string | null> = {
  None: null,
  Easy: 'You are 41 and work in an office; you use your phone every day for work and family. You know the usual phone features but are no expert, and you like clear, step-by-step guidance. You are friendly and patient, you ask questions when something is unclear, and you report back carefully after each step.',
  Hard: 'You are 64 and retired; you use your phone for calls, texts and photos of your grandchildren. Technology makes you nervous and words like "APN" or "VPN" mean nothing to you. You only share information when you are asked for it, you worry that changing settings might delete your photos, and you sometimes get an instruction wrong or forget to say what the screen shows.',
};

const REASON: Record<TelecomCategory, (target: string) => string> = {
  service: () => "For the past few hours your phone has been showing 'No Service': you cannot call or text.",
  mobile_data: (target) =>
    `Your mobile data does not work properly: it stops working or is very slow. You want ${target} internet speed on your phone and will not accept anything slower. You have no Wi-Fi where you are.`,
  mms: () =>
    'For the past few hours you have not been able to send picture messages (MMS) from your messaging app. You want to be able to send them again.',
};

const GOAL: Record<TelecomCategory, (target: string) => string> = {
  service: () => 'You consider the issue solved once your status bar shows that you have signal.',
  mobile_data: (target) => `You consider the issue solved only when a speed test shows ${target} speed.`,
  mms: () => 'You consider the issue solved only when your phone says your messaging app can send MMS messages.',
};

const OWN_GROUPS: Record<TelecomCategory, readonly string[]> = {
  service: ['airplane', 'sim', 'apn', 'suspension'],
  mobile_data: ['roaming', 'data_mode', 'data_saver', 'network_pref', 'vpn', 'data_usage'],
  mms: ['network_pref', 'wifi_calling', 'apn_mms', 'app_permission'],
};

const TICKET_GOAL: Record<TelecomCategory, (target: string) => string> = {
  service: () => 'They will consider the issue resolved when the status bar shows that they have signal.',
  mobile_data: (target) =>
    `They will consider the issue resolved when a speed test shows ${target} speed. They will refuel up to 2.0 GB of data if needed but will not change their plan.`,
  mms: () => 'They will consider the issue resolved when an MMS message can be sent.',
};

const BAND_FLOOR: Record<string, number> = { excellent: 100, good: 25, fair: 5, poor: 1, 'very poor': 0 };

function eligibleLines(db: TelecomDb): { line: TelecomLine; customerId: string; name: string }[] {
  const out: { line: TelecomLine; customerId: string; name: string }[] = [];
  for (const c of db.customers.values()) {
    const bills = c.bill_ids.map((id) => db.bills.get(id));
    if (bills.some((b) => !b || b.status === 'Overdue' || b.status === 'Awaiting Payment')) continue;
    for (const id of c.line_ids) {
      const l = db.lines.get(id);
      if (!l || l.status !== 'Active' || !db.plans.has(l.plan_id)) continue;
      if (l.contract_end_date !== null && l.contract_end_date < TELECOM_TODAY) continue;
      const dev = l.device_id ? db.devices.get(l.device_id) : undefined;
      if (dev && dev.device_type !== 'phone') continue;
      out.push({ line: l, customerId: c.customer_id, name: c.full_name });
    }
  }
  return out;
}

/** Whether the complaint is solved in `state` (the user's own criterion). */
export function telecomGoalMet(
  state: TelecomState,
  category: TelecomCategory,
  target?: { description: string; mbps: number },
): boolean {
  const u = state.user.data;
  if (category === 'service') return u.device.network_connection_status === 'connected';
  if (category === 'mms') return canSendMms(u);
  const r = speedTest(u);
  return (
    r.mbps !== null &&
    r.mbps >= (target?.mbps ?? 100) &&
    r.description.toLowerCase() === (target?.description ?? 'excellent')
  );
}

function pickWeighted<K extends string>(rng: Rng, weights: Record<K, number>): K {
  const keys = Object.keys(weights) as K[];
  return keys[rng.weighted(keys.map((k) => weights[k]))];
}

interface Draft {
  category: TelecomCategory;
  faults: FaultSpec[];
  abroad: boolean;
  no5g: SignalStrength | null;
  ctx: FaultContext;
  pick: { line: TelecomLine; customerId: string; name: string };
}

function draft(
  rng: Rng,
  db: TelecomDb,
  lines: ReturnType<typeof eligibleLines>,
  o: Required<Omit<GenerateTelecomTasksOptions, 'idPrefix' | 'seed' | 'count'>>,
  usedBills: Set<string>,
): Draft {
  const category = pickWeighted(rng, { service: 1, mobile_data: 1.2, mms: 1.2, ...o.categories } as Record<
    TelecomCategory,
    number
  >);
  const pick = rng.pick(lines);
  const plan = db.plans.get(pick.line.plan_id) as { data_limit_gb: number };
  const k = Math.min(o.maxFaults, 1 + rng.weighted([0.5, 0.33, 0.17]));
  const allowed = TELECOM_FAULTS.filter((f) => f.categories.includes(category));
  const chosen: FaultSpec[] = [];
  const groups = new Set<string>();
  const add = (f: FaultSpec) => {
    chosen.push(f);
    groups.add(f.group);
  };
  if (rng.chance(o.unfixableRate)) add(rng.pick(allowed.filter((f) => !f.fixable)));
  // at least one fault of the complaint's own kind, so the category is the one the user calls about
  if (!chosen.some((f) => OWN_GROUPS[category].includes(f.group)))
    add(rng.pick(allowed.filter((f) => f.fixable && OWN_GROUPS[category].includes(f.group) && !groups.has(f.group))));
  while (chosen.length < k) {
    const options = allowed.filter((f) => f.fixable && !groups.has(f.group));
    if (options.length === 0) break;
    add(rng.pick(options));
  }
  chosen.sort((a, b) => FAULT_GROUP_ORDER.indexOf(a.group as never) - FAULT_GROUP_ORDER.indexOf(b.group as never));
  const abroad = chosen.some((f) => f.abroad) || (category !== 'service' && rng.chance(0.15));
  const no5g = category === 'mobile_data' && rng.chance(0.2) ? rng.pick(['good', 'excellent'] as const) : null;
  let overdueBillId: string;
  do overdueBillId = `B${rng.digits(7)}`;
  while (db.bills.has(overdueBillId) || usedBills.has(overdueBillId));
  usedBills.add(overdueBillId);
  const modes =
    category === 'mms'
      ? (['2g_only'] as const)
      : no5g
        ? (['2g_only', '3g_only'] as const)
        : (['2g_only', '3g_only', '4g_only'] as const);
  const ctx: FaultContext = {
    customerId: pick.customerId,
    lineId: pick.line.line_id,
    dataLimitGb: plan.data_limit_gb,
    refuelledGb: pick.line.data_refueling_gb,
    overdueBillId,
    overageGb: Math.round((0.1 + rng.next() * 1.4) * 10) / 10,
    badMode: rng.pick(modes),
  };
  return { category, faults: chosen, abroad, no5g, ctx, pick };
}

function initActions(d: Draft): EnvFunctionCall[] {
  const calls: EnvFunctionCall[] = [
    {
      env_type: 'user',
      func_name: 'set_user_info',
      arguments: { name: d.pick.name, phone_number: d.pick.line.phone_number },
    },
  ];
  if (d.no5g) calls.push({ env_type: 'user', func_name: 'simulate_network_search', arguments: {} });
  if (d.abroad) {
    calls.push({ env_type: 'user', func_name: 'set_user_location', arguments: { abroad: true } });
    if (!d.faults.some((f) => f.group === 'roaming')) {
      calls.push({ env_type: 'user', func_name: 'turn_roaming_on', arguments: {} });
      calls.push({
        env_type: 'assistant',
        func_name: 'enable_roaming',
        arguments: { customer_id: d.ctx.customerId, line_id: d.ctx.lineId },
      });
    }
  }
  for (const f of d.faults) calls.push(...f.init(d.ctx));
  return calls;
}

function applyFixes(domain: TelecomDomain, state: TelecomState, fixes: Omit<TaskAction, 'action_id'>[]): void {
  fixes.forEach((a, i) => {
    const res = callDomainTool(domain, state, {
      id: `fix${i}`,
      name: a.name,
      arguments: a.arguments,
      requestor: a.requestor ?? 'assistant',
    });
    if (res.error) throw new Error(`gold fix ${a.name} failed: ${res.content}`);
  });
}

function skeleton(d: Draft, init: EnvFunctionCall[]): TelecomTask {
  const initial_state: TauTask['initial_state'] = { initialization_actions: init };
  if (d.no5g)
    initial_state.initialization_data = {
      user_data: { surroundings: { signal_strength: { '2G': 'poor', '3G': 'fair', '4G': d.no5g, '5G': 'none' } } },
    };
  return { id: 'draft', user_scenario: { instructions: '' }, initial_state };
}

/** Builds and verifies one task from a draft; null when the draft does not make a valid task. */
function build(
  domain: TelecomDomain,
  d: Draft,
  id: string,
  persona: TelecomPersona,
  actionChecks: 'unfixable' | 'always',
): TelecomTask | null {
  const init = initActions(d);
  const task = skeleton(d, init);
  let broken: TelecomState;
  try {
    broken = domain.initialState(task);
  } catch {
    return null;
  }
  const fixable = d.faults.every((f) => f.fixable);
  const fixes = d.faults.flatMap((f) => f.fix(d.ctx));
  const fixed = broken.fork();
  try {
    applyFixes(domain, fixed, fixes);
  } catch {
    return null;
  }
  let target: { description: string; mbps: number } | undefined;
  if (d.category === 'mobile_data') {
    const r = speedTest(fixed.user.data);
    const desc = fixable && r.mbps !== null ? speedBand(r.mbps).toLowerCase() : 'excellent';
    target = { description: desc, mbps: BAND_FLOOR[desc] };
    if (desc === 'poor' || desc === 'very poor') return null;
  }
  if (telecomGoalMet(broken, d.category, target)) return null;
  if (fixable !== telecomGoalMet(fixed, d.category, target)) return null;
  for (const f of d.faults) {
    if (!f.fixable) continue;
    const partial = broken.fork();
    applyFixes(
      domain,
      partial,
      d.faults.filter((g) => g !== f).flatMap((g) => g.fix(d.ctx)),
    );
    if (telecomGoalMet(partial, d.category, target)) return null; // every root cause must matter
  }
  const lineArgs = { customer_id: d.ctx.customerId, line_id: d.ctx.lineId };
  const assertions: EnvAssertion[] = [];
  if (!fixable) {
    if (d.category === 'service')
      assertions.push({
        env_type: 'user',
        func_name: 'assert_service_status',
        arguments: { expected_status: 'no_service' },
      });
    else if (d.category === 'mobile_data')
      assertions.push({
        env_type: 'user',
        func_name: 'assert_mobile_data_status',
        arguments: { expected_status: false },
      });
    else assertions.push({ env_type: 'user', func_name: 'assert_can_send_mms', arguments: { expected_status: false } });
  } else {
    if (d.category === 'service')
      assertions.push({
        env_type: 'user',
        func_name: 'assert_service_status',
        arguments: { expected_status: 'connected' },
      });
    if (d.category === 'mobile_data') {
      assertions.push({
        env_type: 'user',
        func_name: 'assert_mobile_data_status',
        arguments: { expected_status: true },
      });
      assertions.push({
        env_type: 'user',
        func_name: 'assert_internet_speed',
        arguments: {
          expected_speed: (target as { mbps: number }).mbps,
          expected_desc: (target as { description: string }).description,
        },
      });
    }
    if (d.category === 'mms')
      assertions.push({ env_type: 'user', func_name: 'assert_can_send_mms', arguments: { expected_status: true } });
    if (d.faults.some((f) => f.name === 'overdue_bill_suspension')) {
      assertions.push({
        env_type: 'assistant',
        func_name: 'assert_no_overdue_bill',
        arguments: { overdue_bill_id: d.ctx.overdueBillId },
      });
      assertions.push({
        env_type: 'assistant',
        func_name: 'assert_line_status',
        arguments: { ...lineArgs, expected_status: 'Active' },
      });
    }
    if (d.faults.some((f) => f.name === 'data_usage_exceeded')) {
      assertions.push({
        env_type: 'assistant',
        func_name: 'assert_data_refueling_amount',
        arguments: { ...lineArgs, expected_amount: d.ctx.refuelledGb + 2.0 },
      });
    }
  }
  for (const a of assertions) {
    const fn = (domain.assertions ?? {})[a.func_name];
    if (!fn || !fn(fixable ? fixed : broken, a.arguments)) return null;
  }
  const gold: Omit<TaskAction, 'action_id'>[] = fixable
    ? fixes
    : [
        ...d.faults
          .filter((f) => !f.fixable && f.reveal)
          .map((f) => (f.reveal as NonNullable<FaultSpec['reveal']>)(d.ctx)),
        {
          requestor: 'assistant',
          name: 'transfer_to_human_agents',
          arguments: { summary: 'I cannot fix the issue.' },
          compare_args: [],
        },
      ];
  const basis: RewardType[] = ['ENV_ASSERTION'];
  if (!fixable || actionChecks === 'always') basis.push('ACTION');
  const targetText = target?.description ?? 'excellent';
  const where = d.abroad ? 'abroad in France' : 'at home in the United States';
  const instructions: StructuredUserInstructions = {
    domain: 'telecom',
    reason_for_call: REASON[d.category](targetText),
    known_info: `You are ${d.pick.name} and your phone number is ${d.pick.line.phone_number}. You are currently ${where}.`,
    unknown_info: null,
    task_instructions: `${GOAL[d.category](targetText)} Do what the agent asks on your phone and tell them what the phone shows; never make up what it shows. If a suggested fix does not solve the problem, follow the next suggestions but say you are a little frustrated the first time. You agree to refuel up to 2.0 GB of data if needed, but you do not want to change your plan. If the agent asks you to pay a bill, you accept. If you are unsure whether an action is needed, ask the agent.`,
  };
  const scenario: TelecomScenario = {
    category: d.category,
    name: d.pick.name,
    phone_number: d.pick.line.phone_number,
    abroad: d.abroad,
    persona,
    faults: d.faults.map((f) => f.name),
    fixable,
    ...(target ? { target } : {}),
    refuelGb: 2.0,
    acceptsPlanChange: false,
    customer_id: d.ctx.customerId,
    line_id: d.ctx.lineId,
  };
  return {
    id: `${id}[${d.category}_issue]${scenario.faults.join('|')}[PERSONA:${persona}]`,
    description: {
      purpose: `Resolve a ${d.category.replace('_', ' ')} issue.`,
      relevant_policies: null,
      notes: `Root causes: ${scenario.faults.join(', ')}.`,
    },
    user_scenario: { persona: PERSONA_TEXT[persona], instructions },
    ticket: `The user reports a ${d.category.replace('_', ' ')} problem. Customer name: ${d.pick.name}, phone number: ${d.pick.line.phone_number}, currently ${where}. ${TICKET_GOAL[d.category](targetText)}`,
    initial_state: task.initial_state,
    evaluation_criteria: {
      actions: gold.map((a, i) => ({ action_id: `${a.name}_${i}`, ...a })),
      env_assertions: assertions,
      communicate_info: null,
      nl_assertions: null,
      reward_basis: basis,
    },
    sinkflex_scenario: scenario,
  };
}

/**
 * Generates `count` verified telecom tasks over a backend (a generated one, or tau2's own).
 * Same database and seed, same tasks. Throws when the database has no eligible line (an active
 * phone line whose customer has no overdue bill).
 */
export function generateTelecomTasks(db: TelecomDb, options: GenerateTelecomTasksOptions = {}): TelecomTask[] {
  refuseUnknownOptions(options, GENERATE_TELECOM_TASKS_KEYS, 'generateTelecomTasks');
  const rng = new Rng(options.seed ?? 0);
  const count = options.count ?? 100;
  const maxFaults = options.maxFaults ?? 3;
  if (!Number.isInteger(count) || count < 0) throw new RangeError('count must be a non-negative integer');
  if (!Number.isInteger(maxFaults) || maxFaults < 1 || maxFaults > 3)
    throw new RangeError('maxFaults must be 1, 2 or 3');
  const o = {
    categories: options.categories ?? {},
    maxFaults,
    unfixableRate: options.unfixableRate ?? 0.12,
    personas: options.personas ?? {},
    actionChecks: options.actionChecks ?? 'unfixable',
  } as const;
  const lines = eligibleLines(db);
  if (lines.length === 0)
    throw new Error(
      'generateTelecomTasks: no eligible line (an active phone line of a customer without overdue bills)',
    );
  const domain = createTelecomDomain({ db });
  const usedBills = new Set<string>();
  const tasks: TelecomTask[] = [];
  for (let i = 0; i < count; i++) {
    let task: TelecomTask | null = null;
    for (let attempt = 0; attempt < 50 && !task; attempt++) {
      const persona = pickWeighted(rng, { None: 1, Easy: 1, Hard: 1, ...o.personas } as Record<TelecomPersona, number>);
      task = build(
        domain,
        draft(rng, db, lines, o, usedBills),
        `${options.idPrefix ?? 'gen'}${i}`,
        persona,
        o.actionChecks,
      );
    }
    if (!task) throw new Error(`generateTelecomTasks: could not build task ${i}`);
    tasks.push(task);
  }
  return tasks;
}
