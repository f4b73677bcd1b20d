/**
 * The machine-readable scenario of a telecom task (`task.sinkflex_scenario`): who the user is,
 * what they complain about, where they are, how they behave, and the root causes. The scripted
 * user reads the user-side facts; the expert agent diagnoses from what it is told and may use
 * the root causes only as a hint. `scenarioFromTau2Task` derives one from a tau2 telecom task.
 * @module
 */
import type { TauTask } from '../../task.js';

/** What the user calls about. */
export type TelecomCategory = 'service' | 'mobile_data' | 'mms';

/** tau2's personas: `None` and `Easy` follow instructions well, `Hard` badly. */
export type TelecomPersona = 'None' | 'Easy' | 'Hard';

/** The user side of a telecom task. */
export interface TelecomScenario {
  /** The complaint. */
  category: TelecomCategory;
  /** The user's full name. */
  name: string;
  /** The phone number of the user's line. */
  phone_number: string;
  /** Whether the user is abroad. */
  abroad: boolean;
  /** How the user behaves. */
  persona: TelecomPersona;
  /** Root causes (tau2's issue names, e.g. `airplane_mode_on`). */
  faults: string[];
  /** Whether the agent can fix every root cause (else the right outcome is a transfer). */
  fixable: boolean;
  /** Mobile data: the speed band the user wants (`excellent`, `good`…) and its threshold in Mbps. */
  target?: { description: string; mbps: number };
  /** How much data (GB) the user agrees to refuel; 0 means none. */
  refuelGb: number;
  /** Whether the user accepts to change plan (tau2's users never do). */
  acceptsPlanChange: boolean;
  /** The customer id (oracle; not needed by the user). */
  customer_id?: string;
  /** The line id (oracle). */
  line_id?: string;
}

const CATEGORY: Record<string, TelecomCategory> = {
  service_issue: 'service',
  mobile_data_issue: 'mobile_data',
  mms_issue: 'mms',
};

/**
 * Builds the scenario of a tau2 telecom task from its id (`[mms_issue]a|b[PERSONA:Easy]`),
 * its initialization actions (user info, location, customer and line) and its assertions
 * (target speed, expected failure). Returns null when the task is not a tau2 telecom task.
 */
export function scenarioFromTau2Task(task: TauTask): TelecomScenario | null {
  const m =
    /\[(service_issue|mobile_data_issue|mms_issue)\]([^[]+)(?:\[CUSTOMER:[^\]]*\])?\[PERSONA:(None|Easy|Hard)\]/.exec(
      task.id,
    );
  if (!m) return null;
  const init = task.initial_state?.initialization_actions ?? [];
  const info = init.find((a) => a.func_name === 'set_user_info');
  if (!info) return null;
  const loc = init.find((a) => a.func_name === 'set_user_location');
  const withCustomer = init.find((a) => typeof a.arguments.customer_id === 'string');
  const speed = (task.evaluation_criteria?.env_assertions ?? []).find((a) => a.func_name === 'assert_internet_speed');
  const transfer = (task.evaluation_criteria?.actions ?? []).some((a) => a.name === 'transfer_to_human_agents');
  const instructions = task.user_scenario.instructions;
  const text =
    typeof instructions === 'string'
      ? instructions
      : `${instructions.reason_for_call} ${instructions.task_instructions}`;
  const refuel = /refuel (\d+(?:\.\d+)?) ?GB/i.exec(text);
  const scenario: TelecomScenario = {
    category: CATEGORY[m[1]],
    name: String(info.arguments.name),
    phone_number: String(info.arguments.phone_number),
    abroad: loc?.arguments.abroad === true,
    persona: m[3] as TelecomPersona,
    faults: m[2].split('|'),
    fixable: !transfer,
    refuelGb: refuel ? Number(refuel[1]) : 0,
    acceptsPlanChange: false,
  };
  const speedArgs = speed?.arguments as { expected_speed?: number; expected_desc?: string | null } | undefined;
  if (
    speedArgs &&
    typeof speedArgs.expected_desc === 'string' &&
    typeof speedArgs.expected_speed === 'number' &&
    !transfer
  ) {
    scenario.target = { description: speedArgs.expected_desc.toLowerCase(), mbps: speedArgs.expected_speed };
  } else if (scenario.category === 'mobile_data') scenario.target = { description: 'excellent', mbps: 100 };
  if (withCustomer) {
    scenario.customer_id = String(withCustomer.arguments.customer_id);
    if (typeof withCustomer.arguments.line_id === 'string') scenario.line_id = withCustomer.arguments.line_id;
  }
  return scenario;
}

/** The scenario of a task: its `sinkflex_scenario`, else one derived from a tau2 telecom task. */
export function telecomScenarioOf(task: TauTask): TelecomScenario {
  const s = (task.sinkflex_scenario as TelecomScenario | undefined) ?? scenarioFromTau2Task(task);
  if (!s || typeof s.category !== 'string')
    throw new TypeError(`task ${task.id} has no telecom scenario (not a generated or tau2 telecom task)`);
  return s;
}
