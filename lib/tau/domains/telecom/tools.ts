/**
 * The agent's 13 telecom tools with tau2's arguments, checks, effects, return values and
 * error messages; the backend set-up functions tasks use in `initialization_actions`
 * (`set_data_usage`, `suspend_line_for_overdue_bill`); and the backend assertions tasks use in
 * `env_assertions`.
 * @module
 */
import { z } from 'zod';

import { pyFloatRepr } from '../../pyjson.js';
import type { Tool } from '../../tools.js';
import { defineTool, ToolError, Toolkit } from '../../tools.js';
import {
  addDays,
  applyOneTimeCharge,
  billById,
  billsAwaitingPayment,
  customerById,
  customerByPhone,
  customersByName,
  firstOfMonth,
  lineById,
  planById,
  pyFixed2,
  targetLine,
  TELECOM_TODAY,
} from './backend.js';
import type { TelecomBill, LineStatus } from './schema.js';
import { LINE_STATUSES } from './schema.js';
import type { TelecomState } from './state.js';

const CUSTOMER_ID = z.string().describe("The customer's id, such as 'C1001'.");
const LINE_ID = z.string().describe("The line's id, such as 'L1001'.");

type T = Tool<TelecomState>;

const getCustomerByPhone: T = defineTool({
  name: 'get_customer_by_phone',
  kind: 'read',
  description: 'Finds the customer whose contact phone number, or one of whose lines, has this phone number.',
  params: { phone_number: z.string().describe('The phone number to look up, such as 555-123-2002.') },
  run: (s, a) => customerByPhone(s.db, a.phone_number),
});

const getCustomerById: T = defineTool({
  name: 'get_customer_by_id',
  kind: 'read',
  description: 'Returns the customer with this customer id.',
  params: { customer_id: CUSTOMER_ID },
  run: (s, a) => customerById(s.db, a.customer_id),
});

const getCustomerByName: T = defineTool({
  name: 'get_customer_by_name',
  kind: 'read',
  description:
    'Lists the customers with this full name and date of birth (the date of birth is required to verify the identity).',
  params: {
    full_name: z.string().describe("The customer's full name."),
    dob: z.string().describe('Date of birth, YYYY-MM-DD.'),
  },
  run: (s, a) => customersByName(s.db, a.full_name, a.dob),
});

const getDetailsById: T = defineTool({
  name: 'get_details_by_id',
  kind: 'read',
  description: 'Returns the customer, line, device, bill or plan with this id (ids start with C, L, D, B or P).',
  params: { id: z.string().describe("The id, such as 'C1001', 'L1002', 'D1001', 'B1002' or 'P1001'.") },
  run: (s, a) => {
    const id = a.id;
    if (id.startsWith('L')) return lineById(s.db, id);
    if (id.startsWith('D')) {
      const d = s.db.devices.get(id);
      if (!d) throw new ToolError(`Device with ID ${id} not found`);
      return d;
    }
    if (id.startsWith('B')) return billById(s.db, id);
    if (id.startsWith('C')) return customerById(s.db, id);
    if (id.startsWith('P')) return planById(s.db, id);
    throw new ToolError(`Unknown ID format or type: ${id}`);
  },
});

const suspendLine: T = defineTool({
  name: 'suspend_line',
  kind: 'write',
  description: 'Suspends an active line of the customer (at most 6 months; a $5/month holding fee applies).',
  params: { customer_id: CUSTOMER_ID, line_id: LINE_ID, reason: z.string().describe('Why the line is suspended.') },
  run: (s, a) => {
    const line = targetLine(s.db, a.customer_id, a.line_id);
    if (line.status !== 'Active') throw new ToolError('Line must be active to suspend');
    const updated = { ...line, status: 'Suspended' as const, suspension_start_date: TELECOM_TODAY };
    s.db.putLine(updated);
    return { message: 'Line suspended successfully. $5/month holding fee will apply.', line: updated };
  },
});

const resumeLine: T = defineTool({
  name: 'resume_line',
  kind: 'write',
  description: 'Resumes a suspended (or pending activation) line of the customer.',
  params: { customer_id: CUSTOMER_ID, line_id: LINE_ID },
  run: (s, a) => {
    const line = targetLine(s.db, a.customer_id, a.line_id);
    if (line.status !== 'Suspended' && line.status !== 'Pending Activation')
      throw new ToolError('Line must be suspended to resume');
    const updated = { ...line, status: 'Active' as const, suspension_start_date: null };
    s.db.putLine(updated);
    return { message: 'Line resumed successfully', line: updated };
  },
});

const getBillsForCustomer: T = defineTool({
  name: 'get_bills_for_customer',
  kind: 'read',
  description: "Lists the customer's bills, most recently issued first.",
  params: {
    customer_id: CUSTOMER_ID,
    limit: z.number().int().optional().describe('Maximum number of bills to return (default 12).'),
  },
  run: (s, a) => {
    const c = customerById(s.db, a.customer_id);
    const bills = c.bill_ids.map((id) => billById(s.db, id));
    const sorted = bills
      .map((b, i) => [b, i] as const)
      .sort((x, y) => (x[0].issue_date === y[0].issue_date ? x[1] - y[1] : x[0].issue_date < y[0].issue_date ? 1 : -1));
    return sorted.map((x) => x[0]).slice(0, a.limit ?? 12); // Python's [:limit], negative limits included
  },
});

const sendPaymentRequest: T = defineTool({
  name: 'send_payment_request',
  kind: 'write',
  description:
    "Sends the customer a payment request for one of their bills and sets the bill to 'Awaiting Payment'. Only one bill may await payment at a time. It does not check whether the bill is already paid: check the bill status first.",
  params: { customer_id: CUSTOMER_ID, bill_id: z.string().describe("The bill's id, such as 'B1002'.") },
  run: (s, a) => {
    const c = customerById(s.db, a.customer_id);
    if (billsAwaitingPayment(s.db, c).length !== 0)
      throw new ToolError('A bill is already awaiting payment for this customer');
    if (!c.bill_ids.includes(a.bill_id))
      throw new ToolError(`Bill ${a.bill_id} not found for customer ${a.customer_id}`);
    const bill = billById(s.db, a.bill_id);
    s.db.putBill({ ...bill, status: 'Awaiting Payment' });
    return `Payment request sent to the customer for bill ${bill.bill_id}`;
  },
});

const getDataUsage: T = defineTool({
  name: 'get_data_usage',
  kind: 'read',
  description:
    "Returns a line's data usage in the current billing cycle: data used, the plan's data limit, data refuelled, and the cycle end date.",
  params: { customer_id: CUSTOMER_ID, line_id: LINE_ID },
  run: (s, a) => {
    const line = targetLine(s.db, a.customer_id, a.line_id);
    const plan = planById(s.db, line.plan_id);
    const cycleEnd = addDays(firstOfMonth(addDays(firstOfMonth(TELECOM_TODAY), 32)), -1);
    return {
      line_id: a.line_id,
      data_used_gb: line.data_used_gb,
      data_limit_gb: plan.data_limit_gb,
      data_refueling_gb: line.data_refueling_gb,
      cycle_end_date: cycleEnd,
    };
  },
});

const enableRoaming: T = defineTool({
  name: 'enable_roaming',
  kind: 'write',
  description: 'Enables international roaming on a line of the customer.',
  params: { customer_id: CUSTOMER_ID, line_id: LINE_ID },
  run: (s, a) => {
    const line = targetLine(s.db, a.customer_id, a.line_id);
    if (line.roaming_enabled) return 'Roaming was already enabled';
    s.db.putLine({ ...line, roaming_enabled: true });
    return 'Roaming enabled successfully';
  },
});

const disableRoaming: T = defineTool({
  name: 'disable_roaming',
  kind: 'write',
  description: 'Disables international roaming on a line of the customer.',
  params: { customer_id: CUSTOMER_ID, line_id: LINE_ID },
  run: (s, a) => {
    const line = targetLine(s.db, a.customer_id, a.line_id);
    if (!line.roaming_enabled) return 'Roaming was already disabled';
    s.db.putLine({ ...line, roaming_enabled: false });
    return 'Roaming disabled successfully';
  },
});

const transferToHumanAgents: T = defineTool({
  name: 'transfer_to_human_agents',
  kind: 'generic',
  description:
    "Transfers the user to a human agent with a summary of the issue. Transfer only when the user explicitly asks for a human agent, or when the policy and your tools cannot solve the user's issue.",
  params: { summary: z.string().describe("A summary of the user's issue.") },
  run: () => 'Transfer successful',
});

const refuelData: T = defineTool({
  name: 'refuel_data',
  kind: 'write',
  description:
    "Adds data to a line of the customer for the current cycle and charges it on the customer's next bill at the plan's refuelling price per GB.",
  params: {
    customer_id: CUSTOMER_ID,
    line_id: LINE_ID,
    gb_amount: z.number().describe('Amount of data to add, in GB.'),
  },
  run: (s, a) => {
    const line = targetLine(s.db, a.customer_id, a.line_id);
    if (a.gb_amount <= 0) throw new ToolError('Refuel amount must be positive');
    const plan = planById(s.db, line.plan_id);
    const charge = a.gb_amount * plan.data_refueling_price_per_gb;
    const refuelled = line.data_refueling_gb + a.gb_amount;
    s.db.putLine({ ...line, data_refueling_gb: refuelled });
    applyOneTimeCharge(
      s.db,
      a.customer_id,
      charge,
      `Data refueling: ${pyFloatRepr(a.gb_amount)} GB at $${pyFloatRepr(plan.data_refueling_price_per_gb)}/GB`,
    );
    return {
      message: `Successfully added ${pyFloatRepr(a.gb_amount)} GB of data for line ${a.line_id} for $${pyFixed2(charge)}`,
      new_data_refueling_gb: refuelled,
      charge,
    };
  },
});

/** The agent's tools in tau2's order. */
export const TELECOM_AGENT_TOOLS: readonly T[] = [
  getCustomerByPhone,
  getCustomerById,
  getCustomerByName,
  getDetailsById,
  suspendLine,
  resumeLine,
  getBillsForCustomer,
  sendPaymentRequest,
  getDataUsage,
  enableRoaming,
  disableRoaming,
  transferToHumanAgents,
  refuelData,
];

/** The agent's toolkit. */
export function telecomAgentToolkit(): Toolkit<TelecomState> {
  return new Toolkit(TELECOM_AGENT_TOOLS);
}

const setDataUsage: T = defineTool({
  name: 'set_data_usage',
  kind: 'write',
  description: 'Task set-up: sets the data used by a line in the current cycle.',
  params: { customer_id: z.string(), line_id: z.string(), data_used_gb: z.number() },
  run: (s, a) => {
    const line = targetLine(s.db, a.customer_id, a.line_id);
    s.db.putLine({ ...line, data_used_gb: a.data_used_gb });
    return `Data usage set to ${pyFloatRepr(a.data_used_gb)} GB for line ${a.line_id}`;
  },
});

const suspendLineForOverdueBill: T = defineTool({
  name: 'suspend_line_for_overdue_bill',
  kind: 'write',
  description:
    "Task set-up: adds last month's unpaid plan charge as an overdue bill and suspends the line; with contract_ended the contract also ended last month.",
  params: { customer_id: z.string(), line_id: z.string(), new_bill_id: z.string(), contract_ended: z.boolean() },
  run: (s, a) => {
    const line = lineById(s.db, a.line_id);
    if (line.status !== 'Active') throw new ToolError('Line must be active to suspend for unpaid bill');
    const amount = planById(s.db, line.plan_id).price_per_month;
    if (amount <= 0) throw new ToolError('Amount must be positive for overdue bill');
    const customer = customerById(s.db, a.customer_id);
    if (customer.bill_ids.some((id) => billById(s.db, id).status === 'Overdue'))
      throw new ToolError('Customer already has an overdue bill');
    const lastDayPrev = addDays(firstOfMonth(TELECOM_TODAY), -1);
    const firstDayPrev = firstOfMonth(lastDayPrev);
    const bill: TelecomBill = {
      bill_id: a.new_bill_id,
      customer_id: a.customer_id,
      period_start: firstDayPrev,
      period_end: lastDayPrev,
      issue_date: firstDayPrev,
      total_due: 0 + amount,
      due_date: addDays(firstDayPrev, 14),
      line_items: [
        {
          description: `Charge for line ${line.line_id}`,
          amount,
          date: TELECOM_TODAY,
          item_type: amount > 0 ? 'Charge' : 'Credit',
        },
      ],
      status: 'Overdue',
    };
    s.db.putBill(bill);
    s.db.putCustomer({ ...customer, bill_ids: [...customer.bill_ids, a.new_bill_id] });
    s.db.putLine({
      ...line,
      status: 'Suspended',
      suspension_start_date: TELECOM_TODAY,
      ...(a.contract_ended ? { contract_end_date: lastDayPrev } : {}),
    });
    return `Line ${a.line_id} suspended for unpaid bill ${a.new_bill_id}. Contract ended: ${a.contract_ended ? 'True' : 'False'}`;
  },
});

/** Backend functions that tasks may call in `initialization_actions` besides the agent's tools. */
export const TELECOM_AGENT_ENV_FUNCTIONS: readonly T[] = [setDataUsage, suspendLineForOverdueBill];

function parse<S extends z.ZodRawShape>(
  shape: S,
  args: Record<string, unknown>,
  name: string,
): z.infer<z.ZodObject<S>> {
  const r = z.strictObject(shape).safeParse(args);
  if (!r.success)
    throw new TypeError(
      `${name}: invalid arguments (${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')})`,
    );
  return r.data;
}

/** Backend assertions (tau2's `assert_*` functions of the agent toolkit). Throwing counts as not met. */
export const TELECOM_AGENT_ASSERTIONS: Readonly<
  Record<string, (state: TelecomState, args: Record<string, unknown>) => boolean>
> = {
  assert_data_refueling_amount(s, args) {
    const a = parse(
      { customer_id: z.string(), line_id: z.string(), expected_amount: z.number() },
      args,
      'assert_data_refueling_amount',
    );
    return Math.abs(targetLine(s.db, a.customer_id, a.line_id).data_refueling_gb - a.expected_amount) < 1e-6;
  },
  assert_line_status(s, args) {
    const a = parse(
      { customer_id: z.string(), line_id: z.string(), expected_status: z.enum(LINE_STATUSES) },
      args,
      'assert_line_status',
    );
    return targetLine(s.db, a.customer_id, a.line_id).status === (a.expected_status as LineStatus);
  },
  assert_overdue_bill_exists(s, args) {
    const a = parse({ customer_id: z.string(), overdue_bill_id: z.string() }, args, 'assert_overdue_bill_exists');
    const c = customerById(s.db, a.customer_id);
    if (!c.bill_ids.includes(a.overdue_bill_id)) throw new ToolError(`Overdue bill ${a.overdue_bill_id} not found`);
    if (billById(s.db, a.overdue_bill_id).status !== 'Overdue')
      throw new ToolError(`Overdue bill ${a.overdue_bill_id} is not overdue`);
    return true;
  },
  assert_no_overdue_bill(s, args) {
    const a = parse({ overdue_bill_id: z.string() }, args, 'assert_no_overdue_bill');
    const b = s.db.bills.get(a.overdue_bill_id);
    return b === undefined || b.status === 'Paid';
  },
};
