/**
 * Backend look-ups and effects shared by the agent's tools, the task set-up functions and the
 * synchronisation: finding customers, lines, plans and bills the way tau2 does (phone numbers
 * matched on their digits, names case- and accent-insensitively), the fixed "today"
 * (2025-02-25, tau2's `get_today()`), and one-time charges on the next bill.
 * @module
 */
import { createHash } from 'node:crypto';

import { pyRound2 } from '../../pyjson.js';
import { ToolError } from '../../tools.js';
import { foldForMatch } from '../retail/tools.js';
import type { TelecomBill, TelecomCustomer, TelecomLine, TelecomLineItem, TelecomPlan, TelecomDb } from './schema.js';

/** tau2's fixed current date. */
export const TELECOM_TODAY = '2025-02-25';

/** A `YYYY-MM-DD` date moved by `days`. */
export function addDays(date: string, days: number): string {
  const t = Date.parse(`${date}T00:00:00Z`) + days * 86400000;
  return new Date(t).toISOString().slice(0, 10);
}

/** The first day of the month of `date`. */
export function firstOfMonth(date: string): string {
  return `${date.slice(0, 8)}01`;
}

/** The digits of a phone number (format-insensitive matching). */
export function phoneDigits(phone: string): string {
  return phone.replace(/\D/g, '');
}

/** tau2's `get_customer_by_id`. */
export function customerById(db: TelecomDb, id: string): TelecomCustomer {
  const c = db.customers.get(id);
  if (!c) throw new ToolError(`Customer with ID ${id} not found`);
  return c;
}

/** tau2's `get_customer_by_phone`: a customer whose contact number or one of whose lines has these digits. */
export function customerByPhone(db: TelecomDb, phone: string): TelecomCustomer {
  const wanted = phoneDigits(phone);
  if (wanted) {
    for (const c of db.customers.values()) {
      if (phoneDigits(c.phone_number) === wanted) return c;
      for (const id of c.line_ids) {
        const l = db.lines.get(id);
        if (l && phoneDigits(l.phone_number) === wanted) return c;
      }
    }
  }
  throw new ToolError(`Customer with phone number ${phone} not found`);
}

/** tau2's `get_customer_by_name`: every customer with this (folded) name and exact date of birth. */
export function customersByName(db: TelecomDb, fullName: string, dob: string): TelecomCustomer[] {
  const wanted = foldForMatch(fullName);
  return [...db.customers.values()].filter((c) => foldForMatch(c.full_name) === wanted && c.date_of_birth === dob);
}

/** The line with this phone number (aliases honoured); throws when none. */
export function lineByPhone(db: TelecomDb, phone: string): TelecomLine {
  let wanted = phoneDigits(phone);
  if (db.aliases) {
    for (const [alias, canonical] of Object.entries(db.aliases)) {
      if (phoneDigits(alias) === wanted) {
        wanted = phoneDigits(canonical);
        break;
      }
    }
  }
  if (wanted) for (const l of db.lines.values()) if (phoneDigits(l.phone_number) === wanted) return l;
  throw new ToolError(`Line with phone number ${phone} not found`);
}

/** A line by id. */
export function lineById(db: TelecomDb, id: string): TelecomLine {
  const l = db.lines.get(id);
  if (!l) throw new ToolError(`Line with ID ${id} not found`);
  return l;
}

/** A plan by id. */
export function planById(db: TelecomDb, id: string): TelecomPlan {
  const p = db.plans.get(id);
  if (!p) throw new ToolError(`Plan with ID ${id} not found`);
  return p;
}

/** A bill by id. */
export function billById(db: TelecomDb, id: string): TelecomBill {
  const b = db.bills.get(id);
  if (!b) throw new ToolError(`Bill with ID ${id} not found`);
  return b;
}

/** A line of a customer (tau2's `_get_target_line`). */
export function targetLine(db: TelecomDb, customerId: string, lineId: string): TelecomLine {
  const c = customerById(db, customerId);
  if (!c.line_ids.includes(lineId)) throw new ToolError(`Line ${lineId} not found for customer ${customerId}`);
  return lineById(db, lineId);
}

/** The customer's bills in `Awaiting Payment`. */
export function billsAwaitingPayment(db: TelecomDb, customer: TelecomCustomer): TelecomBill[] {
  return customer.bill_ids.map((id) => billById(db, id)).filter((b) => b.status === 'Awaiting Payment');
}

/** Whether the line used up its allowance (data used ≥ plan limit + refuelled data). */
export function dataExceeded(db: TelecomDb, line: TelecomLine): boolean {
  const plan = planById(db, line.plan_id);
  return line.data_used_gb >= plan.data_limit_gb + line.data_refueling_gb;
}

/**
 * The id of a draft bill created by a one-time charge. tau2 draws a random `B` + 8 hex
 * digits; ours is the same shape, derived from the customer and their bill count, so a replay
 * creates the same bill.
 */
export function draftBillId(db: TelecomDb, customer: TelecomCustomer): string {
  for (let salt = 0; ; salt++) {
    const id = `B${createHash('sha256').update(`${customer.customer_id}:${customer.bill_ids.length}:${salt}`).digest('hex').slice(0, 8)}`;
    if (!db.bills.has(id)) return id;
  }
}

/**
 * tau2's `_apply_one_time_charge`: adds a charge (or a credit, when negative) to the
 * customer's first draft bill, creating next month's draft bill when there is none.
 */
export function applyOneTimeCharge(db: TelecomDb, customerId: string, amount: number, description: string): void {
  let customer = customerById(db, customerId);
  let draft: TelecomBill | undefined;
  for (const id of customer.bill_ids) {
    const b = billById(db, id);
    if (b.status === 'Draft') {
      draft = b;
      break;
    }
  }
  if (!draft) {
    const next = firstOfMonth(addDays(firstOfMonth(TELECOM_TODAY), 32));
    const following = firstOfMonth(addDays(next, 32));
    draft = {
      bill_id: draftBillId(db, customer),
      customer_id: customerId,
      period_start: next,
      period_end: addDays(following, -1),
      issue_date: next,
      total_due: 0,
      due_date: addDays(next, 14),
      line_items: [],
      status: 'Draft',
    };
    customer = { ...customer, bill_ids: [...customer.bill_ids, draft.bill_id] };
    db.putCustomer(customer);
  }
  const item: TelecomLineItem = {
    description,
    amount,
    date: TELECOM_TODAY,
    item_type: amount < 0 ? 'Credit' : 'Charge',
  };
  db.putBill({ ...draft, line_items: [...draft.line_items, item], total_due: draft.total_due + amount });
}

/** Python's `f"{x:.2f}"` (the exact binary value rounded half to even). */
export function pyFixed2(x: number): string {
  return pyRound2(x).toFixed(2);
}
