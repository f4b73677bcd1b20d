import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import type { TelecomState, ToolCall } from '../../lib/tau/index.js';
import { createTelecomDomain, loadTau2Telecom, TelecomDb, TelecomUserDb } from '../../lib/tau/index.js';
import { loadTelecomDb } from '../../lib/tau/domains/telecom/loader.js';

// A small hand-written backend (tau2's shape) so every effect below is checked against values
// written here, not against the code's own output.
const DATA = {
  plans: [
    { plan_id: 'P1', name: 'Small', data_limit_gb: 5.0, price_per_month: 40.0, data_refueling_price_per_gb: 2.5 },
    { plan_id: 'P2', name: 'Big', data_limit_gb: 50.0, price_per_month: 80.0, data_refueling_price_per_gb: 1.0 },
  ],
  devices: [
    {
      device_id: 'D1',
      device_type: 'phone',
      model: 'X',
      imei: '1',
      is_esim_capable: true,
      activated: true,
      activation_date: '2025-01-02T03:04:05',
    },
  ],
  lines: [
    {
      line_id: 'L1',
      phone_number: '555-000-0001',
      status: 'Active',
      plan_id: 'P1',
      device_id: 'D1',
      data_used_gb: 1.5,
      data_refueling_gb: 0.0,
      roaming_enabled: false,
      contract_end_date: '2026-01-31',
    },
    {
      line_id: 'L2',
      phone_number: '555-000-0002',
      status: 'Suspended',
      plan_id: 'P2',
      data_used_gb: 0.0,
      roaming_enabled: true,
      suspension_start_date: '2025-02-01',
    },
    { line_id: 'L9', phone_number: '555-000-0009', status: 'Active', plan_id: 'P2' },
  ],
  customers: [
    {
      customer_id: 'C1',
      full_name: 'Ana Müller',
      date_of_birth: '1990-01-01',
      email: 'a@example.com',
      phone_number: '555-999-0000',
      address: { street: '1 A St', city: 'X', state: 'CA', zip_code: '1' },
      account_status: 'Active',
      payment_methods: [],
      line_ids: ['L1', 'L2'],
      bill_ids: ['B1', 'B2'],
    },
    {
      customer_id: 'C2',
      full_name: 'Bo Li',
      date_of_birth: '1980-05-05',
      email: 'b@example.com',
      phone_number: '555-888-0000',
      address: { street: '2 B St', city: 'Y', state: 'NY', zip_code: '2' },
      line_ids: ['L9'],
      bill_ids: ['B3'],
    },
  ],
  bills: [
    {
      bill_id: 'B1',
      customer_id: 'C1',
      period_start: '2025-01-01',
      period_end: '2025-01-31',
      issue_date: '2025-01-05',
      total_due: 40.0,
      due_date: '2025-01-19',
      line_items: [],
      status: 'Paid',
    },
    {
      bill_id: 'B2',
      customer_id: 'C1',
      period_start: '2025-02-01',
      period_end: '2025-02-28',
      issue_date: '2025-02-05',
      total_due: 45.0,
      due_date: '2025-02-19',
      line_items: [],
      status: 'Overdue',
    },
    {
      bill_id: 'B3',
      customer_id: 'C2',
      period_start: '2025-03-01',
      period_end: '2025-03-31',
      issue_date: '2025-03-01',
      total_due: 0.0,
      due_date: '2025-03-15',
      line_items: [],
      status: 'Draft',
    },
  ],
};

const domain = createTelecomDomain({ db: TelecomDb.fromJSON(DATA) });
let n = 0;
function agent(s: TelecomState, name: string, args: Record<string, unknown> = {}) {
  const call: ToolCall = { id: `a${n++}`, name, arguments: args, requestor: 'assistant' };
  const m = domain.tools.call(s, call);
  domain.sync?.(s);
  return { ok: !m.error, text: m.content, json: () => JSON.parse(m.content) as Record<string, unknown> };
}
function user(s: TelecomState, name: string, args: Record<string, unknown> = {}) {
  const m = domain.userTools.call(s, { id: `u${n++}`, name, arguments: args, requestor: 'user' });
  domain.sync?.(s);
  t.equal(m.error, false, `${name} does not fail`);
  return m.content;
}
function onPhone(phone = '555-000-0001'): TelecomState {
  const s = domain.initialState();
  domain.runEnvFunction(s, {
    env_type: 'user',
    func_name: 'set_user_info',
    arguments: { name: 'Ana Müller', phone_number: phone },
  });
  return s;
}

t.test('agent look-up tools', async (t) => {
  const s = domain.initialState();
  t.equal(
    agent(s, 'get_customer_by_phone', { phone_number: '555-999-0000' }).json().customer_id,
    'C1',
    'contact number',
  );
  t.equal(
    agent(s, 'get_customer_by_phone', { phone_number: '(555) 000 0002' }).json().customer_id,
    'C1',
    'a line number, any format',
  );
  const miss = agent(s, 'get_customer_by_phone', { phone_number: '555-123-4567' });
  t.same([miss.ok, miss.text], [false, 'Error: Customer with phone number 555-123-4567 not found']);
  t.equal(agent(s, 'get_customer_by_id', { customer_id: 'C2' }).json().full_name, 'Bo Li');
  t.equal(agent(s, 'get_customer_by_id', { customer_id: 'C7' }).text, 'Error: Customer with ID C7 not found');
  t.same(
    (
      JSON.parse(agent(s, 'get_customer_by_name', { full_name: 'ana muller', dob: '1990-01-01' }).text) as {
        customer_id: string;
      }[]
    ).map((c) => c.customer_id),
    ['C1'],
    'name folded',
  );
  t.same(
    JSON.parse(agent(s, 'get_customer_by_name', { full_name: 'Ana Müller', dob: '1990-01-02' }).text),
    [],
    'dob must match',
  );
  const c1 = agent(s, 'get_customer_by_id', { customer_id: 'C1' }).json();
  t.same(
    Object.keys(c1),
    [
      'customer_id',
      'full_name',
      'date_of_birth',
      'email',
      'phone_number',
      'address',
      'account_status',
      'payment_methods',
      'line_ids',
      'bill_ids',
      'created_at',
      'last_extension_date',
      'goodwill_credit_used_this_year',
    ],
    "tau2's field order",
  );
  t.equal(c1.created_at, '2025-01-01 00:00:00', "default created_at as Python's str(datetime)");
  t.match(
    agent(s, 'get_customer_by_id', { customer_id: 'C1' }).text,
    '"goodwill_credit_used_this_year": 0.0',
    'floats print as Python floats',
  );
  t.equal(agent(s, 'get_details_by_id', { id: 'L1' }).json().plan_id, 'P1');
  t.equal(agent(s, 'get_details_by_id', { id: 'D1' }).json().activation_date, '2025-01-02 03:04:05');
  t.equal(agent(s, 'get_details_by_id', { id: 'B2' }).json().status, 'Overdue');
  t.equal(agent(s, 'get_details_by_id', { id: 'P2' }).json().name, 'Big');
  t.equal(agent(s, 'get_details_by_id', { id: 'C2' }).json().email, 'b@example.com');
  t.equal(agent(s, 'get_details_by_id', { id: 'X1' }).text, 'Error: Unknown ID format or type: X1');
  t.equal(agent(s, 'get_details_by_id', { id: 'D9' }).text, 'Error: Device with ID D9 not found');
  t.equal(agent(s, 'get_details_by_id', { id: 'L7' }).text, 'Error: Line with ID L7 not found');
  t.equal(agent(s, 'get_details_by_id', { id: 'P7' }).text, 'Error: Plan with ID P7 not found');
  t.equal(agent(s, 'get_details_by_id', { id: 'B7' }).text, 'Error: Bill with ID B7 not found');
  const bills = JSON.parse(agent(s, 'get_bills_for_customer', { customer_id: 'C1' }).text) as { bill_id: string }[];
  t.same(
    bills.map((b) => b.bill_id),
    ['B2', 'B1'],
    'newest issue date first',
  );
  t.same((JSON.parse(agent(s, 'get_bills_for_customer', { customer_id: 'C1', limit: 1 }).text) as unknown[]).length, 1);
  t.same(
    JSON.parse(agent(s, 'get_bills_for_customer', { customer_id: 'C1', limit: -1 }).text),
    [bills[0]],
    "Python's [:-1]",
  );
  t.same(agent(s, 'get_data_usage', { customer_id: 'C1', line_id: 'L1' }).json(), {
    line_id: 'L1',
    data_used_gb: 1.5,
    data_limit_gb: 5.0,
    data_refueling_gb: 0.0,
    cycle_end_date: '2025-02-28',
  });
  t.equal(
    agent(s, 'get_data_usage', { customer_id: 'C1', line_id: 'L9' }).text,
    'Error: Line L9 not found for customer C1',
  );
  t.equal(agent(s, 'transfer_to_human_agents', { summary: 'x' }).text, 'Transfer successful');
  t.equal(domain.tools.tools.length, 13);
  t.same(
    domain.tools.tools
      .filter((x) => x.mutates)
      .map((x) => x.name)
      .sort(),
    ['disable_roaming', 'enable_roaming', 'refuel_data', 'resume_line', 'send_payment_request', 'suspend_line'],
  );
});

t.test('agent write tools: preconditions and effects', async (t) => {
  const s = domain.initialState();
  const sus = agent(s, 'suspend_line', { customer_id: 'C1', line_id: 'L1', reason: 'travel' }).json() as {
    message: string;
    line: Record<string, unknown>;
  };
  t.equal(sus.message, 'Line suspended successfully. $5/month holding fee will apply.');
  t.same([sus.line.status, sus.line.suspension_start_date], ['Suspended', '2025-02-25']);
  t.equal(
    agent(s, 'suspend_line', { customer_id: 'C1', line_id: 'L1', reason: 'x' }).text,
    'Error: Line must be active to suspend',
  );
  const res = agent(s, 'resume_line', { customer_id: 'C1', line_id: 'L1' }).json() as { line: Record<string, unknown> };
  t.same([res.line.status, res.line.suspension_start_date], ['Active', null]);
  t.equal(
    agent(s, 'resume_line', { customer_id: 'C1', line_id: 'L1' }).text,
    'Error: Line must be suspended to resume',
  );
  t.equal(agent(s, 'enable_roaming', { customer_id: 'C1', line_id: 'L1' }).text, 'Roaming enabled successfully');
  t.equal(agent(s, 'enable_roaming', { customer_id: 'C1', line_id: 'L1' }).text, 'Roaming was already enabled');
  t.equal(s.db.lines.get('L1')?.roaming_enabled, true);
  t.equal(agent(s, 'disable_roaming', { customer_id: 'C1', line_id: 'L1' }).text, 'Roaming disabled successfully');
  t.equal(agent(s, 'disable_roaming', { customer_id: 'C1', line_id: 'L1' }).text, 'Roaming was already disabled');
  t.equal(
    agent(s, 'send_payment_request', { customer_id: 'C1', bill_id: 'B3' }).text,
    'Error: Bill B3 not found for customer C1',
  );
  t.equal(
    agent(s, 'send_payment_request', { customer_id: 'C1', bill_id: 'B2' }).text,
    'Payment request sent to the customer for bill B2',
  );
  t.equal(s.db.bills.get('B2')?.status, 'Awaiting Payment');
  t.equal(
    agent(s, 'send_payment_request', { customer_id: 'C1', bill_id: 'B1' }).text,
    'Error: A bill is already awaiting payment for this customer',
  );

  // refuel: 1.5 GB at $2.5 = $3.75 on a new draft bill (C1 has none): next month, due 14 days later
  t.equal(
    agent(s, 'refuel_data', { customer_id: 'C1', line_id: 'L1', gb_amount: 0 }).text,
    'Error: Refuel amount must be positive',
  );
  const r = agent(s, 'refuel_data', { customer_id: 'C1', line_id: 'L1', gb_amount: 1.5 });
  t.equal(
    r.text,
    '{"message": "Successfully added 1.5 GB of data for line L1 for $3.75", "new_data_refueling_gb": 1.5, "charge": 3.75}',
  );
  const c1 = s.db.customers.get('C1');
  t.equal(c1?.bill_ids.length, 3, 'a draft bill was added to the customer');
  const draft = s.db.bills.get(c1?.bill_ids[2] as string);
  t.match(draft?.bill_id, /^B[0-9a-f]{8}$/);
  t.same(
    [draft?.status, draft?.period_start, draft?.period_end, draft?.issue_date, draft?.due_date, draft?.total_due],
    ['Draft', '2025-03-01', '2025-03-31', '2025-03-01', '2025-03-15', 3.75],
  );
  t.same(draft?.line_items, [
    { description: 'Data refueling: 1.5 GB at $2.5/GB', amount: 3.75, date: '2025-02-25', item_type: 'Charge' },
  ]);
  agent(s, 'refuel_data', { customer_id: 'C1', line_id: 'L1', gb_amount: 0.5 });
  t.equal(s.db.bills.get(draft?.bill_id as string)?.total_due, 5.0, 'the second charge goes on the same draft');
  t.equal(s.db.lines.get('L1')?.data_refueling_gb, 2.0);
  // C2 has a draft bill already
  const s2 = domain.initialState();
  agent(s2, 'refuel_data', { customer_id: 'C2', line_id: 'L9', gb_amount: 2 });
  t.same([s2.db.bills.get('B3')?.total_due, s2.db.customers.get('C2')?.bill_ids], [2.0, ['B3']]);
  t.equal(domain.initialState().db.lines.get('L1')?.data_refueling_gb, 0, 'the shared initial state is untouched');

  const bad = domain.tools.call(s, {
    id: 'x',
    name: 'refuel_data',
    arguments: { customer_id: 'C1', line_id: 'L1', gb_amount: '2' },
    requestor: 'assistant',
  });
  t.match(bad.content, /argument 'gb_amount'/);
});

t.test('set-up functions and backend assertions', async (t) => {
  const s = onPhone();
  const fn = (env_type: 'user' | 'assistant', func_name: string, args: Record<string, unknown> = {}) =>
    domain.runEnvFunction(s, { env_type, func_name, arguments: args });
  t.equal(
    fn('assistant', 'set_data_usage', { customer_id: 'C1', line_id: 'L1', data_used_gb: 5.0 }),
    'Data usage set to 5.0 GB for line L1',
  );
  t.equal(s.user.surroundings.mobile_data_usage_exceeded, true, 'used >= limit: exceeded, synced at once');
  t.throws(
    () =>
      fn('assistant', 'suspend_line_for_overdue_bill', {
        customer_id: 'C1',
        line_id: 'L1',
        new_bill_id: 'B99',
        contract_ended: false,
      }),
    /already has an overdue bill/,
  );
  const s3 = domain.initialState();
  domain.runEnvFunction(s3, {
    env_type: 'assistant',
    func_name: 'suspend_line_for_overdue_bill',
    arguments: { customer_id: 'C2', line_id: 'L9', new_bill_id: 'B99', contract_ended: true },
  });
  t.same(s3.db.bills.get('B99'), {
    bill_id: 'B99',
    customer_id: 'C2',
    period_start: '2025-01-01',
    period_end: '2025-01-31',
    issue_date: '2025-01-01',
    total_due: 80.0,
    due_date: '2025-01-15',
    line_items: [{ description: 'Charge for line L9', amount: 80.0, date: '2025-02-25', item_type: 'Charge' }],
    status: 'Overdue',
  });
  t.same(
    [s3.db.lines.get('L9')?.status, s3.db.lines.get('L9')?.contract_end_date, s3.db.customers.get('C2')?.bill_ids],
    ['Suspended', '2025-01-31', ['B3', 'B99']],
  );
  const A = domain.assertions ?? {};
  t.equal(A.assert_overdue_bill_exists(s3, { customer_id: 'C2', overdue_bill_id: 'B99' }), true);
  t.throws(() => A.assert_overdue_bill_exists(s3, { customer_id: 'C2', overdue_bill_id: 'B3' }), /not overdue/);
  t.equal(A.assert_no_overdue_bill(s3, { overdue_bill_id: 'B99' }), false);
  t.equal(A.assert_no_overdue_bill(s3, { overdue_bill_id: 'B1234' }), true, 'absent bill counts as no overdue bill');
  t.equal(A.assert_line_status(s3, { customer_id: 'C2', line_id: 'L9', expected_status: 'Suspended' }), true);
  t.equal(A.assert_data_refueling_amount(s3, { customer_id: 'C2', line_id: 'L9', expected_amount: 0 }), true);
  t.throws(
    () => A.assert_line_status(s3, { customer_id: 'C2', line_id: 'L9', expected_status: 'Gone' }),
    /invalid arguments/,
  );
  t.throws(() => fn('user', 'no_such_function'), /unknown user function/);
  t.throws(() => fn('assistant', 'set_data_usage', { customer_id: 'C1' }), /missing required argument/);
});

t.test('user tools: checks, toggles and fixes with tau2 texts', async (t) => {
  const s = onPhone();
  const bar = (x: string) => x.split('\nStatus Bar: ')[1];
  t.equal(user(s, 'check_status_bar'), 'Status Bar: 📶³ Good | 5G | 📱 Data Enabled | 🔋 80%');
  t.equal(
    user(s, 'check_network_status'),
    'Airplane Mode: OFF\nSIM Card Status: active\nCellular Connection: connected\nCellular Signal: good\nCellular Network Type: 5G\nMobile Data Enabled: Yes\nData Roaming Enabled: No\nWi-Fi Radio: OFF\nWi-Fi Connected: No',
  );
  t.equal(
    user(s, 'run_speed_test'),
    'Speed Test Result: 220.00 Mbps (Excellent). Connection is very fast.',
    '(50+500)/2 * 0.8 (good signal)',
  );
  const air = user(s, 'toggle_airplane_mode');
  t.equal(air, 'Airplane Mode is now ON.\nStatus Bar: ✈️ Airplane Mode | 🔋 80%');
  t.equal(s.user.device.network_connection_status, 'no_service');
  t.equal(user(s, 'run_speed_test'), 'Speed test failed: No Connection.');
  t.equal(
    user(s, 'toggle_wifi'),
    'Cannot change Wi-Fi settings while Airplane Mode is ON.\nStatus Bar: ✈️ Airplane Mode | 🔋 80%',
  );
  t.equal(
    bar(user(s, 'toggle_airplane_mode')),
    '📶⁴ Excellent | 5G | 📱 Data Enabled | 🔋 80%',
    'a search finds 5G at excellent',
  );
  t.equal(user(s, 'check_network_mode_preference'), 'Network Mode Preference: 4g_5g_preferred');
  t.equal(
    user(s, 'set_network_mode_preference', { mode: '3g_only' }),
    'Preferred Network Mode set to: 3g_only\nStatus Bar: 📶² Fair | 3G | 📱 Data Enabled | 🔋 80%',
  );
  t.equal(
    user(s, 'run_speed_test'),
    'Speed Test Result: 1.50 Mbps (Poor). Connection is slow. Web browsing may be sluggish, streaming difficult.',
    '(1+5)/2 * 0.5',
  );
  t.match(
    user(s, 'set_network_mode_preference', { mode: '6g' }),
    "Failed to set network mode: '6g' is not a valid option. Please use one of: 4g_5g_preferred, 4g_only, 3g_only, 2g_only",
  );
  user(s, 'set_network_mode_preference', { mode: '4g_only' });
  t.equal(
    user(s, 'run_speed_test'),
    'Speed Test Result: 44.00 Mbps (Good). Connection is good for most activities, including HD streaming.',
  );
  user(s, 'set_network_mode_preference', { mode: '2g_only' });
  t.equal(
    user(s, 'run_speed_test'),
    'Speed Test Result: 0.05 Mbps (Very Poor). Connection is very slow. Basic web browsing might be difficult.',
  );
  t.equal(user(s, 'can_send_mms'), 'Your messaging app cannot send MMS messages.', '2G cannot carry MMS');
  user(s, 'set_network_mode_preference', { mode: '4g_5g_preferred' });
  t.equal(user(s, 'can_send_mms'), 'Your messaging app can send MMS messages.');
  t.equal(user(s, 'check_data_restriction_status'), 'Data Saver mode is OFF.');
  t.equal(
    user(s, 'toggle_data_saver_mode'),
    'Data Saver Mode is now ON.\nStatus Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔽 Data Saver | 🔋 80%',
  );
  t.equal(user(s, 'check_data_restriction_status'), 'Data Saver mode is ON (limits data usage).');
  t.equal(
    user(s, 'run_speed_test'),
    'Speed Test Result: 55.00 Mbps (Good). Connection is good for most activities, including HD streaming.',
    '275 * 0.2',
  );
  user(s, 'toggle_data_saver_mode');
  t.equal(user(s, 'check_vpn_status'), 'VPN is turned OFF.');
  t.equal(
    user(s, 'connect_vpn'),
    'VPN connected successfully.\nStatus Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔒 VPN Connected | 🔋 80%',
  );
  t.equal(user(s, 'connect_vpn'), 'VPN already connected.');
  t.equal(
    user(s, 'check_vpn_status'),
    "VPN is ON and connected. Details: {'server_address': '192.168.1.1', 'protocol': 'OpenVPN', 'server_performance': <PerformanceLevel.EXCELLENT: 'excellent'>}",
  );
  t.equal(
    user(s, 'run_speed_test'),
    'Speed Test Result: 275.00 Mbps (Excellent). Connection is very fast.',
    'a good VPN does not slow down',
  );
  t.match(user(s, 'disconnect_vpn'), /^VPN disconnected successfully\./);
  t.match(user(s, 'disconnect_vpn'), /^No active VPN connection to disconnect\./);
  t.equal(
    user(s, 'toggle_data'),
    'Mobile Data is now OFF.\nStatus Bar: 📶⁴ Excellent | 5G | 📵 Data Disabled | 🔋 80%',
  );
  t.equal(user(s, 'run_speed_test'), 'Speed test failed: No Connection.');
  t.match(user(s, 'toggle_data'), /^Mobile Data is now ON\./);
  t.match(user(s, 'toggle_roaming'), /^Data Roaming is now ON\./);
  t.equal(s.user.device.roaming_enabled, true);
  user(s, 'toggle_roaming');
  t.equal(user(s, 'check_sim_status'), 'Your SIM card is active and working.');
  t.equal(
    user(s, 'reseat_sim_card'),
    'SIM card re-seated successfully.\nStatus Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔋 80%',
  );
  t.equal(
    user(s, 'check_apn_settings'),
    'Current APN Name: internet\nMMSC URL (for picture messages): http://mms.carrier.com/mms/wapenc\n(These are technical settings, usually best left unchanged.)',
  );
  t.equal(
    user(s, 'set_apn_settings', { apn_settings: { apn_name: 'broken' } }),
    'APN settings set to: broken\nStatus Bar: 📵 No Signal | 📵 Data Disabled | 🔋 80%',
  );
  t.equal(
    user(s, 'reset_apn_settings'),
    'APN settings will reset at reboot.\nStatus Bar: 📵 No Signal | 📵 Data Disabled | 🔋 80%',
    'the reset waits for a reboot',
  );
  t.equal(
    user(s, 'reboot_device'),
    'Resetting APN settings...\nRestarting network services...\nStatus Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔋 80%',
  );
  t.same(s.user.device.active_apn_settings, {
    apn_name: 'internet',
    reset_at_reboot: false,
    mms_apn: 'mms',
    mmsc_url: 'http://mms.carrier.com/mms/wapenc',
    mms_proxy: null,
    mms_port: null,
  });
  t.equal(
    user(s, 'reboot_device'),
    'Restarting network services...\nStatus Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔋 80%',
  );
  t.equal(user(s, 'check_wifi_status'), 'Wi-Fi is turned OFF.');
  t.match(user(s, 'toggle_wifi'), /^Wi-Fi is now ON\./);
  t.equal(user(s, 'check_wifi_status'), 'Wi-Fi is ON but not connected to any network.');
  t.equal(user(s, 'check_wifi_calling_status'), 'Wi-Fi Calling is currently turned OFF.');
  t.match(user(s, 'toggle_wifi_calling'), /^Wi-Fi Calling is now ON\./);
  t.equal(
    user(s, 'can_send_mms'),
    'Your messaging app can send MMS messages.',
    'Wi-Fi calling alone does not block MMS',
  );
  s.user.device.wifi_calling_mms_over_wifi = true;
  t.equal(user(s, 'can_send_mms'), 'Your messaging app cannot send MMS messages.', 'MMS over Wi-Fi calling does');
  user(s, 'toggle_wifi_calling');
  t.equal(user(s, 'check_installed_apps'), 'The following apps are installed on the phone: messaging, browser');
  t.equal(
    user(s, 'check_app_permissions', { app_name: 'messaging' }),
    "App 'messaging' has permission for: sms, storage, phone.",
  );
  t.equal(
    user(s, 'check_app_status', { app_name: 'browser' }),
    'Status for App: browser\n - Permissions Granted:\n   - storage\n   - network',
  );
  t.equal(user(s, 'check_app_status', { app_name: 'maps' }), "App 'maps' not found on this phone.");
  domain.runEnvFunction(s, {
    env_type: 'user',
    func_name: 'remove_app_permission',
    arguments: { app_name: 'messaging', permission: 'storage' },
  });
  t.equal(user(s, 'can_send_mms'), 'Your messaging app cannot send MMS messages.', 'storage permission needed');
  t.equal(
    user(s, 'grant_app_permission', { app_name: 'messaging', permission: 'Storage' }),
    "Success. Permission 'storage' granted to app 'messaging'.\nStatus Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔋 80%",
  );
  t.match(
    user(s, 'grant_app_permission', { app_name: 'messaging', permission: 'camera' }),
    "Error. Permission 'camera' not tracked for app 'messaging', available permissions: ['sms', 'storage', 'phone', 'network']",
  );
  t.match(
    user(s, 'grant_app_permission', { app_name: 'maps', permission: 'sms' }),
    "Error. App 'maps' not found. Cannot grant permission.",
  );
  t.equal(user(s, 'check_payment_request'), 'No payment request has been made.');
  t.equal(user(s, 'make_payment'), 'You do not have a payment request.');
  t.equal(domain.userTools.tools.length, 30);
  t.same(
    domain.userTools.tools
      .filter((x) => x.mutates)
      .map((x) => x.name)
      .sort(),
    [
      'connect_vpn',
      'disconnect_vpn',
      'grant_app_permission',
      'make_payment',
      'reboot_device',
      'reseat_sim_card',
      'reset_apn_settings',
      'set_apn_settings',
      'set_network_mode_preference',
      'toggle_airplane_mode',
      'toggle_data',
      'toggle_data_saver_mode',
      'toggle_roaming',
      'toggle_wifi',
      'toggle_wifi_calling',
    ],
    "tau2's WRITE user tools",
  );
  const badMode = domain.userTools.call(s, {
    id: 'z',
    name: 'set_apn_settings',
    arguments: { apn_settings: { apn_name: 'other' } },
    requestor: 'user',
  });
  t.equal(badMode.error, true, 'APN settings are validated');
});

t.test('phone model: SIM, abroad, data cap and the phone assertions', async (t) => {
  const s = onPhone();
  const fn = (func_name: string, args: Record<string, unknown> = {}) =>
    domain.runEnvFunction(s, { env_type: 'user', func_name, arguments: args });
  const A = domain.assertions ?? {};
  fn('unseat_sim_card');
  t.equal(user(s, 'check_sim_status'), 'No SIM card detected in the phone.');
  t.equal(A.assert_service_status(s, { expected_status: 'no_service' }), true);
  t.equal(A.assert_mobile_data_status(s, { expected_status: false }), true);
  user(s, 'reseat_sim_card');
  fn('lock_sim_card', { mode: 'puk' });
  t.equal(user(s, 'check_sim_status'), 'The SIM card is locked with a PUK code.');
  t.match(user(s, 'reseat_sim_card'), /No Signal/, 'reseating does not unlock a SIM');
  const s2 = onPhone();
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'set_user_location', arguments: { abroad: true } });
  t.equal(A.assert_mobile_data_status(s2, { expected_status: false }), true, 'abroad without roaming: no data');
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'turn_roaming_on', arguments: {} });
  t.equal(A.assert_mobile_roaming_status(s2, { expected_status: true }), true);
  t.equal(A.assert_mobile_data_status(s2, { expected_status: false }), true, 'the line does not allow roaming');
  domain.tools.call(s2, {
    id: 'r',
    name: 'enable_roaming',
    arguments: { customer_id: 'C1', line_id: 'L1' },
    requestor: 'assistant',
  });
  domain.sync?.(s2);
  t.equal(A.assert_mobile_data_status(s2, { expected_status: true }), true, 'both allow roaming: data works');
  t.equal(A.assert_internet_speed(s2, { expected_speed: 200, expected_desc: 'excellent' }), true);
  t.equal(A.assert_internet_speed(s2, { expected_speed: 300 }), false);
  t.equal(A.assert_internet_not_excellent(s2, {}), false);
  t.equal(A.assert_can_send_mms(s2, { expected_status: true }), true);
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'break_vpn', arguments: {} });
  t.equal(
    user(s2, 'run_speed_test'),
    'Speed Test Result: 27.50 Mbps (Good). Connection is good for most activities, including HD streaming.',
    'a poor VPN keeps 10%',
  );
  t.equal(A.assert_internet_not_excellent(s2, {}), true);
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'turn_airplane_mode_on', arguments: {} });
  t.same(
    [s2.user.device.vpn_connected, A.assert_airplane_mode_status(s2, { expected_status: true })],
    [false, true],
    'airplane mode drops the VPN',
  );
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'turn_airplane_mode_off', arguments: {} });
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'turn_data_saver_mode_on', arguments: {} });
  t.equal(A.assert_mobile_data_saver_mode_status(s2, { expected_status: true }), true);
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'turn_data_saver_mode_off', arguments: {} });
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'turn_data_off', arguments: {} });
  t.equal(s2.user.device.data_enabled, false);
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'turn_data_on', arguments: {} });
  domain.runEnvFunction(s2, {
    env_type: 'user',
    func_name: 'set_wifi_calling',
    arguments: { enabled: true, mms_over_wifi: true },
  });
  t.equal(A.assert_can_send_mms(s2, { expected_status: false }), true);
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'set_wifi_calling', arguments: { enabled: false } });
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'break_apn_mms_setting', arguments: {} });
  t.match(user(s2, 'check_apn_settings'), 'MMSC URL (for picture messages): Not Set');
  t.equal(A.assert_can_send_mms(s2, { expected_status: false }), true);
  domain.runEnvFunction(s2, { env_type: 'user', func_name: 'break_apn_settings', arguments: {} });
  t.equal(A.assert_service_status(s2, { expected_status: 'no_service' }), true);
  t.throws(() => A.assert_service_status(s2, { expected_status: 'offline' }), /invalid arguments/);
  t.equal(A.assert_mobile_data_usage_exceeded(s2, { expected_status: false }), true);
});

t.test('user DB loading, validation and patches', async (t) => {
  const u = TelecomUserDb.fromJSON({
    device: { battery_level: 55, app_statuses: { messaging: { app_name: 'messaging', permissions: { sms: true } } } },
  });
  t.same(
    u.device.app_statuses.messaging.permissions,
    { sms: true, storage: false, phone: false, network: false },
    'missing permissions default to false',
  );
  t.equal(u.device.network_mode_preference, '4g_5g_preferred');
  t.match(u.canonicalJSON(), '"battery_level": 55,', 'int fields print as ints');
  t.throws(
    () => TelecomUserDb.fromJSON({ device: { sim_card_status: 'gone' } }),
    /device\.sim_card_status: expected one of/,
  );
  t.throws(() => TelecomUserDb.fromJSON({ device: { flux: 1 } }), /device\.flux: unknown field/);
  t.throws(() => TelecomUserDb.fromJSON({ phone: {} }), /unknown field phone/);
  t.throws(
    () => TelecomUserDb.fromJSON({ surroundings: { is_abroad: 'yes' } }),
    /surroundings\.is_abroad: expected a boolean/,
  );
  const f = u.fork();
  f.update({ surroundings: { is_abroad: true } });
  t.same([f.surroundings.is_abroad, u.surroundings.is_abroad], [true, false], 'forks are independent');
  t.throws(() => f.update({ device: { battery_level: 'full' } }), /battery_level: expected a number/);
  t.throws(
    () => TelecomDb.fromJSON({ ...DATA, lines: [{ ...DATA.lines[0], status: 'Dormant' }] }),
    /lines\[0\]\.status/,
  );
  t.throws(
    () => TelecomDb.fromJSON({ ...DATA, bills: [{ ...DATA.bills[0], due_date: 'soon' }] }),
    /bills\[0\]\.due_date: expected a date/,
  );
  t.throws(() => TelecomDb.fromJSON({ ...DATA, plans: [DATA.plans[0], DATA.plans[0]] }), /duplicate id P1/);
});

t.test('loaders (JSON and TOML), phone number aliases, initialization data', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-telecom-'));
  writeFileSync(
    join(dir, 'db.json'),
    JSON.stringify({ ...DATA, phone_number_aliases: { '+1 555 777 0001': '555-000-0001' } }),
  );
  writeFileSync(join(dir, 'user_db.toml'), '[device]\nbattery_level = 42\n');
  const task = {
    id: 't1',
    user_scenario: { instructions: 'x' },
    initial_state: {
      initialization_data: {
        user_data: { device: { data_saver_mode: true } },
        agent_data: { plans: DATA.plans.slice(0, 1) },
      },
      initialization_actions: [
        { env_type: 'user', func_name: 'set_user_info', arguments: { name: 'A', phone_number: '+1 555 777 0001' } },
      ],
    },
    evaluation_criteria: { reward_basis: ['ENV_ASSERTION'] },
  };
  writeFileSync(join(dir, 'tasks_small.json'), JSON.stringify([task]));
  const { domain: d, tasks } = loadTau2Telecom(dir);
  t.equal(tasks.length, 1);
  t.match(d.policy, /Telecom customer support policy/, 'embedded policy without policy files');
  const s = d.initialState(tasks[0]);
  t.same([s.user.device.battery_level, s.user.device.data_saver_mode, s.db.plans.size], [42, true, 1]);
  t.equal(s.user.surroundings.line_active, true, 'the alias resolves to line L1 during sync');
  t.match(
    s.db.canonicalJSON(),
    /"lines": \[.*\], "phone_number_aliases": \{"\+1 555 777 0001": "555-000-0001"\}, "plans": \[/,
  );
  t.equal(s.db.equals(d.initialState(tasks[0]).db), true);
  t.equal(loadTelecomDb(join(dir, 'db.json')).statistics().num_lines, 3);
  t.throws(() => loadTau2Telecom(tmpdir() + '/does-not-exist-telecom'), /no db\.toml or db\.json/);
  const bad = {
    ...task,
    initial_state: {
      initialization_actions: [
        { env_type: 'assistant', func_name: 'resume_line', arguments: { customer_id: 'C1', line_id: 'L1' } },
      ],
    },
  };
  t.throws(
    () => d.initialState(bad as never),
    /initialization action assistant\.resume_line failed: Line must be suspended to resume/,
  );
  t.throws(
    () => d.initialState({ ...task, initial_state: { initialization_data: { agent_data: { towers: [] } } } } as never),
    /unknown telecom table 'towers'/,
  );
});
