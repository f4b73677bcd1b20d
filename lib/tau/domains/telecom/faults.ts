/**
 * The catalogue of root causes a telecom task can have (tau2's issue names): how each one is
 * set up (`initialization_actions`), how it is fixed (gold actions, by the agent or the user),
 * which group it belongs to (at most one fault per group), in which complaints it may appear,
 * and, for the ones the agent cannot fix, which diagnostic call reveals them.
 * @module
 */
import type { EnvFunctionCall, TaskAction } from '../../task.js';
import type { TelecomCategory } from './scenario.js';

/** What a fault's set-up and fix need to know about the task. */
export interface FaultContext {
  /** The customer. */
  customerId: string;
  /** The user's line. */
  lineId: string;
  /** The line's plan data limit (GB). */
  dataLimitGb: number;
  /** Data already refuelled on the line (GB). */
  refuelledGb: number;
  /** Id for a new overdue bill. */
  overdueBillId: string;
  /** Extra data used beyond the allowance when the allowance is exceeded (GB, below 2). */
  overageGb: number;
  /** A bad network mode for slow-data faults. */
  badMode: '2g_only' | '3g_only' | '4g_only';
}

/** One root cause. */
export interface FaultSpec {
  /** tau2's issue name. */
  name: string;
  /** At most one fault of a group per task. */
  group: string;
  /** Complaints it may cause. */
  categories: readonly TelecomCategory[];
  /** Whether the agent and user can fix it (else the right outcome is a transfer). */
  fixable: boolean;
  /** Whether the user must be abroad. */
  abroad?: boolean;
  /** Set-up calls. */
  init(ctx: FaultContext): EnvFunctionCall[];
  /** Gold fix calls (empty when not fixable). */
  fix(ctx: FaultContext): Omit<TaskAction, 'action_id'>[];
  /** Not fixable: the diagnostic call that reveals it (a gold action when action checks are on). */
  reveal?(ctx: FaultContext): Omit<TaskAction, 'action_id'>;
}

const user = (func_name: string, args: Record<string, unknown> = {}): EnvFunctionCall => ({
  env_type: 'user',
  func_name,
  arguments: args,
});
const agent = (func_name: string, args: Record<string, unknown>): EnvFunctionCall => ({
  env_type: 'assistant',
  func_name,
  arguments: args,
});
const userFix = (name: string, args: Record<string, unknown> = {}): Omit<TaskAction, 'action_id'> => ({
  requestor: 'user',
  name,
  arguments: args,
});
const agentFix = (name: string, args: Record<string, unknown>): Omit<TaskAction, 'action_id'> => ({
  requestor: 'assistant',
  name,
  arguments: args,
});
const line = (c: FaultContext) => ({ customer_id: c.customerId, line_id: c.lineId });
const ALL: readonly TelecomCategory[] = ['service', 'mobile_data', 'mms'];
const DATA: readonly TelecomCategory[] = ['mobile_data', 'mms'];

/** Every root cause the generator knows. */
export const TELECOM_FAULTS: readonly FaultSpec[] = [
  {
    name: 'airplane_mode_on',
    group: 'airplane',
    categories: ALL,
    fixable: true,
    init: () => [user('turn_airplane_mode_on')],
    fix: () => [userFix('toggle_airplane_mode')],
  },
  {
    name: 'unseat_sim_card',
    group: 'sim',
    categories: ['service', 'mms'],
    fixable: true,
    init: () => [user('unseat_sim_card')],
    fix: () => [userFix('reseat_sim_card')],
  },
  {
    name: 'lock_sim_card_pin',
    group: 'sim',
    categories: ['service'],
    fixable: false,
    init: () => [user('lock_sim_card', { mode: 'pin' })],
    fix: () => [],
    reveal: () => userFix('check_sim_status'),
  },
  {
    name: 'lock_sim_card_puk',
    group: 'sim',
    categories: ['service'],
    fixable: false,
    init: () => [user('lock_sim_card', { mode: 'puk' })],
    fix: () => [],
    reveal: () => userFix('check_sim_status'),
  },
  {
    name: 'break_apn_settings',
    group: 'apn',
    categories: ['service'],
    fixable: true,
    init: () => [user('break_apn_settings')],
    fix: () => [userFix('reset_apn_settings'), userFix('reboot_device')],
  },
  {
    name: 'overdue_bill_suspension',
    group: 'suspension',
    categories: ['service'],
    fixable: true,
    init: (c) => [
      agent('suspend_line_for_overdue_bill', { ...line(c), new_bill_id: c.overdueBillId, contract_ended: false }),
      user('simulate_network_search'),
    ],
    fix: (c) => [
      agentFix('send_payment_request', { customer_id: c.customerId, bill_id: c.overdueBillId }),
      userFix('make_payment'),
      agentFix('resume_line', line(c)),
      userFix('reboot_device'),
    ],
  },
  {
    name: 'contract_end_suspension',
    group: 'suspension',
    categories: ['service'],
    fixable: false,
    init: (c) => [
      agent('suspend_line_for_overdue_bill', { ...line(c), new_bill_id: c.overdueBillId, contract_ended: true }),
      user('simulate_network_search'),
    ],
    fix: () => [],
    reveal: (c) => ({ ...agentFix('get_details_by_id', { id: c.lineId }), compare_args: ['id'] }),
  },
  {
    name: 'user_abroad_roaming_enabled_off',
    group: 'roaming',
    categories: DATA,
    fixable: true,
    abroad: true,
    init: (c) => [user('turn_roaming_off'), agent('enable_roaming', line(c))],
    fix: () => [userFix('toggle_roaming')],
  },
  {
    name: 'user_abroad_roaming_disabled_on',
    group: 'roaming',
    categories: DATA,
    fixable: true,
    abroad: true,
    init: (c) => [user('turn_roaming_on'), agent('disable_roaming', line(c)), user('simulate_network_search')],
    fix: (c) => [agentFix('enable_roaming', line(c))],
  },
  {
    name: 'user_abroad_roaming_disabled_off',
    group: 'roaming',
    categories: DATA,
    fixable: true,
    abroad: true,
    init: (c) => [user('turn_roaming_off'), agent('disable_roaming', line(c)), user('simulate_network_search')],
    fix: (c) => [agentFix('enable_roaming', line(c)), userFix('toggle_roaming')],
  },
  {
    name: 'data_mode_off',
    group: 'data_mode',
    categories: DATA,
    fixable: true,
    init: () => [user('turn_data_off')],
    fix: () => [userFix('toggle_data')],
  },
  {
    name: 'data_saver_mode_on',
    group: 'data_saver',
    categories: ['mobile_data'],
    fixable: true,
    init: () => [user('turn_data_saver_mode_on')],
    fix: () => [userFix('toggle_data_saver_mode')],
  },
  {
    name: 'bad_network_preference',
    group: 'network_pref',
    categories: DATA,
    fixable: true,
    init: (c) => [user('set_network_mode_preference', { mode: c.badMode })],
    fix: () => [userFix('set_network_mode_preference', { mode: '4g_5g_preferred' })],
  },
  {
    name: 'bad_vpn',
    group: 'vpn',
    categories: ['mobile_data'],
    fixable: true,
    init: () => [user('break_vpn')],
    fix: () => [userFix('disconnect_vpn')],
  },
  {
    name: 'data_usage_exceeded',
    group: 'data_usage',
    categories: DATA,
    fixable: true,
    init: (c) => [
      agent('set_data_usage', { ...line(c), data_used_gb: round1(c.dataLimitGb + c.refuelledGb + c.overageGb) }),
    ],
    fix: (c) => [agentFix('refuel_data', { ...line(c), gb_amount: 2.0 })],
  },
  {
    name: 'data_usage_exceeded_no_refuel',
    group: 'data_usage',
    categories: DATA,
    fixable: false,
    init: (c) => [
      agent('refuel_data', { ...line(c), gb_amount: 2.0 }),
      agent('set_data_usage', { ...line(c), data_used_gb: round1(c.dataLimitGb + c.refuelledGb + 2.0 + c.overageGb) }),
    ],
    fix: () => [],
    reveal: (c) => ({ ...agentFix('get_data_usage', line(c)), compare_args: ['line_id'] }),
  },
  {
    name: 'bad_wifi_calling',
    group: 'wifi_calling',
    categories: ['mms'],
    fixable: true,
    init: () => [user('set_wifi_calling', { enabled: true, mms_over_wifi: true })],
    fix: () => [userFix('toggle_wifi_calling')],
  },
  {
    name: 'break_apn_mms_setting',
    group: 'apn_mms',
    categories: ['mms'],
    fixable: true,
    init: () => [user('break_apn_mms_setting')],
    fix: () => [userFix('reset_apn_settings'), userFix('reboot_device')],
  },
  {
    name: 'break_app_sms_permission',
    group: 'app_permission',
    categories: ['mms'],
    fixable: true,
    init: () => [user('remove_app_permission', { app_name: 'messaging', permission: 'sms' })],
    fix: () => [userFix('grant_app_permission', { app_name: 'messaging', permission: 'sms' })],
  },
  {
    name: 'break_app_storage_permission',
    group: 'app_permission',
    categories: ['mms'],
    fixable: true,
    init: () => [user('remove_app_permission', { app_name: 'messaging', permission: 'storage' })],
    fix: () => [userFix('grant_app_permission', { app_name: 'messaging', permission: 'storage' })],
  },
  {
    name: 'break_app_both_permissions',
    group: 'app_permission',
    categories: ['mms'],
    fixable: true,
    init: () => [
      user('remove_app_permission', { app_name: 'messaging', permission: 'sms' }),
      user('remove_app_permission', { app_name: 'messaging', permission: 'storage' }),
    ],
    fix: () => [
      userFix('grant_app_permission', { app_name: 'messaging', permission: 'sms' }),
      userFix('grant_app_permission', { app_name: 'messaging', permission: 'storage' }),
    ],
  },
];

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

/** A fault by name. */
export function telecomFault(name: string): FaultSpec {
  const f = TELECOM_FAULTS.find((x) => x.name === name);
  if (!f) throw new RangeError(`unknown telecom fault '${name}'`);
  return f;
}

/** Groups in tau2's order of diagnosis (service first, then data, then MMS): fixes are listed in this order. */
export const FAULT_GROUP_ORDER = [
  'airplane',
  'sim',
  'apn',
  'suspension',
  'roaming',
  'data_mode',
  'data_usage',
  'data_saver',
  'network_pref',
  'vpn',
  'wifi_calling',
  'apn_mms',
  'app_permission',
] as const;
