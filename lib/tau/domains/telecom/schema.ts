/**
 * The telecom backend (what the agent's tools see): plans, devices, lines, customers and
 * bills in tau2's `TelecomDB` shape. Field order follows tau2's models (tool results print in
 * that order); dates are `YYYY-MM-DD` strings and date-times Python's `str(datetime)` form
 * (`YYYY-MM-DD HH:MM:SS`), as tau2's JSON output and DB hash write them.
 * @module
 */
import { createHash } from 'node:crypto';

import { CowMap, deepFreeze } from '../../cow.js';
import type { WorldState } from '../../domain.js';
import { compareCodePoints, pyJsonDumps, pyJsonString } from '../../pyjson.js';

/** Line statuses. */
export const LINE_STATUSES = ['Active', 'Suspended', 'Pending Activation', 'Closed'] as const;
/** A line status. */
export type LineStatus = (typeof LINE_STATUSES)[number];
/** Bill statuses. */
export const BILL_STATUSES = ['Draft', 'Issued', 'Awaiting Payment', 'Paid', 'Overdue', 'Disputed'] as const;
/** A bill status. */
export type BillStatus = (typeof BILL_STATUSES)[number];
/** Customer account statuses. */
export const ACCOUNT_STATUSES = ['Active', 'Suspended', 'Pending Verification', 'Closed'] as const;
/** An account status. */
export type AccountStatus = (typeof ACCOUNT_STATUSES)[number];
/** Device types. */
export const DEVICE_TYPES = ['phone', 'router', 'tablet', 'watch', 'other'] as const;
/** A device type. */
export type DeviceType = (typeof DEVICE_TYPES)[number];
/** Payment method types. */
export const PAYMENT_METHOD_TYPES = ['Credit Card', 'Debit Card', 'PayPal'] as const;
/** A payment method type. */
export type PaymentMethodType = (typeof PAYMENT_METHOD_TYPES)[number];

/** A service plan. */
export interface TelecomPlan {
  /** Plan id, e.g. `P1001`. */
  plan_id: string;
  /** Display name. */
  name: string;
  /** Monthly data allowance (GB). */
  data_limit_gb: number;
  /** Monthly price (USD). */
  price_per_month: number;
  /** Price of one refuelled GB (USD). */
  data_refueling_price_per_gb: number;
}

/** A device registered with the carrier. */
export interface TelecomDevice {
  /** Device id, e.g. `D1001`. */
  device_id: string;
  /** Kind of device. */
  device_type: DeviceType;
  /** Model name. */
  model: string;
  /** IMEI, when known. */
  imei: string | null;
  /** Whether it takes an eSIM. */
  is_esim_capable: boolean;
  /** Whether it is activated on the network. */
  activated: boolean;
  /** Activation date-time. */
  activation_date: string | null;
  /** Last eSIM transfer date-time. */
  last_esim_transfer_date: string | null;
}

/** A phone line. */
export interface TelecomLine {
  /** Line id, e.g. `L1001`. */
  line_id: string;
  /** Phone number. */
  phone_number: string;
  /** Status. */
  status: LineStatus;
  /** Plan id, e.g. `P1001`. */
  plan_id: string;
  /** The device on the line (null when none). */
  device_id: string | null;
  /** Data used this cycle (GB). */
  data_used_gb: number;
  /** Data refuelled this cycle (GB). */
  data_refueling_gb: number;
  /** Whether roaming is enabled. */
  roaming_enabled: boolean;
  /** Contract end date. */
  contract_end_date: string | null;
  /** Date of the last plan change. */
  last_plan_change_date: string | null;
  /** Date of the last SIM replacement. */
  last_sim_replacement_date: string | null;
  /** Start of the current suspension. */
  suspension_start_date: string | null;
}

/** One charge or credit of a bill. */
export interface TelecomLineItem {
  /** What the item is. */
  description: string;
  /** Amount (USD; negative for credits). */
  amount: number;
  /** Date applied. */
  date: string;
  /** Kind, e.g. `Plan Charge`, `Charge`, `Credit`. */
  item_type: string;
}

/** A bill. */
export interface TelecomBill {
  /** Bill id, e.g. `B1001`. */
  bill_id: string;
  /** Owner customer id. */
  customer_id: string;
  /** Billing period start. */
  period_start: string;
  /** Billing period end. */
  period_end: string;
  /** Issue date. */
  issue_date: string;
  /** Total due (USD). */
  total_due: number;
  /** Due date. */
  due_date: string;
  /** Charges and credits. */
  line_items: TelecomLineItem[];
  /** Status. */
  status: BillStatus;
}

/** A billing address. */
export interface TelecomAddress {
  /** Street and number. */
  street: string;
  /** City. */
  city: string;
  /** State code. */
  state: string;
  /** Postal code. */
  zip_code: string;
}

/** A stored payment method. */
export interface TelecomPaymentMethod {
  /** Kind of method. */
  method_type: PaymentMethodType;
  /** Last four digits. */
  account_number_last_4: string;
  /** Expiry, MM/YYYY. */
  expiration_date: string;
}

/** A customer. */
export interface TelecomCustomer {
  /** Owner customer id. */
  customer_id: string;
  /** Full name. */
  full_name: string;
  /** Date of birth, YYYY-MM-DD. */
  date_of_birth: string;
  /** Email address. */
  email: string;
  /** Phone number. */
  phone_number: string;
  /** Billing address. */
  address: TelecomAddress;
  /** Account status. */
  account_status: AccountStatus;
  /** Stored payment methods. */
  payment_methods: TelecomPaymentMethod[];
  /** The customer's lines. */
  line_ids: string[];
  /** The customer's bills. */
  bill_ids: string[];
  /** Account creation date-time. */
  created_at: string;
  /** Date of the last payment extension. */
  last_extension_date: string | null;
  /** Goodwill credit used this year (USD). */
  goodwill_credit_used_this_year: number;
}

/** The backend as plain JSON (tau2's `db.toml`/`db.json` content). */
export interface TelecomData {
  /** Plans. */
  plans: TelecomPlan[];
  /** Customers. */
  customers: TelecomCustomer[];
  /** Lines. */
  lines: TelecomLine[];
  /** Bills. */
  bills: TelecomBill[];
  /** Devices. */
  devices: TelecomDevice[];
  /** Newer tau2 versions only: scenario phone number → canonical line number. */
  phone_number_aliases?: Record<string, string>;
}

type Obj = Record<string, unknown>;

function obj(v: unknown, where: string): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new TypeError(`${where}: expected an object`);
  return v as Obj;
}
function str(o: Obj, k: string, where: string): string {
  const v = o[k];
  if (typeof v !== 'string') throw new TypeError(`${where}.${k}: expected a string`);
  return v;
}
function num(o: Obj, k: string, where: string, dflt?: number): number {
  const v = o[k] ?? dflt;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new TypeError(`${where}.${k}: expected a number`);
  return v;
}
function bool(o: Obj, k: string, where: string, dflt?: boolean): boolean {
  const v = o[k] ?? dflt;
  if (typeof v !== 'boolean') throw new TypeError(`${where}.${k}: expected a boolean`);
  return v;
}
function oneOf<T extends string>(o: Obj, k: string, allowed: readonly T[], where: string, dflt?: T): T {
  const v = o[k] ?? dflt;
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v))
    throw new TypeError(`${where}.${k}: expected one of ${allowed.join(', ')}`);
  return v as T;
}
function strList(o: Obj, k: string, where: string): string[] {
  const v = o[k] ?? [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))
    throw new TypeError(`${where}.${k}: expected a list of strings`);
  return v.slice() as string[];
}
function list(o: Obj, k: string, where: string): unknown[] {
  const v = o[k] ?? [];
  if (!Array.isArray(v)) throw new TypeError(`${where}.${k}: expected a list`);
  return v;
}

/** Text of a TOML/JSON date or date-time value (strings, or date objects from a TOML parser). */
function dateText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return v;
  if (typeof v === 'object' && typeof (v as { toString?: unknown }).toString === 'function') return String(v);
  return null;
}

/** A `YYYY-MM-DD` date (accepts a date-time and keeps the date, as pydantic does for midnight). */
export function normalizeDate(v: unknown, where: string): string {
  const s = dateText(v);
  const m = s ? /^(\d{4}-\d{2}-\d{2})(?:[T ]00:00(?::00)?)?$/.exec(s.trim()) : null;
  if (!m) throw new TypeError(`${where}: expected a date YYYY-MM-DD, got ${JSON.stringify(v)}`);
  return m[1];
}

/** Python's `str(datetime)`: `YYYY-MM-DD HH:MM:SS` (a bare date means midnight). */
export function normalizeDateTime(v: unknown, where: string): string {
  const s = dateText(v);
  const m = s ? /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(s.trim()) : null;
  if (!m) throw new TypeError(`${where}: expected a date-time YYYY-MM-DDTHH:MM:SS, got ${JSON.stringify(v)}`);
  return `${m[1]} ${m[2] ?? '00'}:${m[3] ?? '00'}:${m[4] ?? '00'}`;
}

function optDate(o: Obj, k: string, where: string): string | null {
  return o[k] === undefined || o[k] === null ? null : normalizeDate(o[k], `${where}.${k}`);
}
function optDateTime(o: Obj, k: string, where: string): string | null {
  return o[k] === undefined || o[k] === null ? null : normalizeDateTime(o[k], `${where}.${k}`);
}
function optStr(o: Obj, k: string, where: string): string | null {
  const v = o[k];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw new TypeError(`${where}.${k}: expected a string or null`);
  return v;
}

/** Validates a plan. */
function toPlan(v: unknown, where: string): TelecomPlan {
  const o = obj(v, where);
  return {
    plan_id: str(o, 'plan_id', where),
    name: str(o, 'name', where),
    data_limit_gb: num(o, 'data_limit_gb', where),
    price_per_month: num(o, 'price_per_month', where),
    data_refueling_price_per_gb: num(o, 'data_refueling_price_per_gb', where),
  };
}

/** Validates a device. */
function toDevice(v: unknown, where: string): TelecomDevice {
  const o = obj(v, where);
  return {
    device_id: str(o, 'device_id', where),
    device_type: oneOf(o, 'device_type', DEVICE_TYPES, where),
    model: str(o, 'model', where),
    imei: optStr(o, 'imei', where),
    is_esim_capable: bool(o, 'is_esim_capable', where),
    activated: bool(o, 'activated', where, false),
    activation_date: optDateTime(o, 'activation_date', where),
    last_esim_transfer_date: optDateTime(o, 'last_esim_transfer_date', where),
  };
}

/** Validates a line. */
function toLine(v: unknown, where: string): TelecomLine {
  const o = obj(v, where);
  return {
    line_id: str(o, 'line_id', where),
    phone_number: str(o, 'phone_number', where),
    status: oneOf(o, 'status', LINE_STATUSES, where, 'Pending Activation'),
    plan_id: str(o, 'plan_id', where),
    device_id: optStr(o, 'device_id', where),
    data_used_gb: num(o, 'data_used_gb', where, 0),
    data_refueling_gb: num(o, 'data_refueling_gb', where, 0),
    roaming_enabled: bool(o, 'roaming_enabled', where, false),
    contract_end_date: optDate(o, 'contract_end_date', where),
    last_plan_change_date: optDate(o, 'last_plan_change_date', where),
    last_sim_replacement_date: optDate(o, 'last_sim_replacement_date', where),
    suspension_start_date: optDate(o, 'suspension_start_date', where),
  };
}

function toLineItem(v: unknown, where: string): TelecomLineItem {
  const o = obj(v, where);
  return {
    description: str(o, 'description', where),
    amount: num(o, 'amount', where),
    date: normalizeDate(o.date, `${where}.date`),
    item_type: str(o, 'item_type', where),
  };
}

/** Validates a bill. */
function toBill(v: unknown, where: string): TelecomBill {
  const o = obj(v, where);
  return {
    bill_id: str(o, 'bill_id', where),
    customer_id: str(o, 'customer_id', where),
    period_start: normalizeDate(o.period_start, `${where}.period_start`),
    period_end: normalizeDate(o.period_end, `${where}.period_end`),
    issue_date: normalizeDate(o.issue_date, `${where}.issue_date`),
    total_due: num(o, 'total_due', where),
    due_date: normalizeDate(o.due_date, `${where}.due_date`),
    line_items: list(o, 'line_items', where).map((x, i) => toLineItem(x, `${where}.line_items[${i}]`)),
    status: oneOf(o, 'status', BILL_STATUSES, where, 'Draft'),
  };
}

/** Validates a customer. */
function toCustomer(v: unknown, where: string): TelecomCustomer {
  const o = obj(v, where);
  const a = obj(o.address, `${where}.address`);
  return {
    customer_id: str(o, 'customer_id', where),
    full_name: str(o, 'full_name', where),
    date_of_birth: str(o, 'date_of_birth', where),
    email: str(o, 'email', where),
    phone_number: str(o, 'phone_number', where),
    address: {
      street: str(a, 'street', `${where}.address`),
      city: str(a, 'city', `${where}.address`),
      state: str(a, 'state', `${where}.address`),
      zip_code: str(a, 'zip_code', `${where}.address`),
    },
    account_status: oneOf(o, 'account_status', ACCOUNT_STATUSES, where, 'Pending Verification'),
    payment_methods: list(o, 'payment_methods', where).map((x, i) => {
      const p = obj(x, `${where}.payment_methods[${i}]`);
      const w = `${where}.payment_methods[${i}]`;
      return {
        method_type: oneOf(p, 'method_type', PAYMENT_METHOD_TYPES, w),
        account_number_last_4: str(p, 'account_number_last_4', w),
        expiration_date: str(p, 'expiration_date', w),
      };
    }),
    line_ids: strList(o, 'line_ids', where),
    bill_ids: strList(o, 'bill_ids', where),
    created_at:
      o.created_at === undefined ? '2025-01-01 00:00:00' : normalizeDateTime(o.created_at, `${where}.created_at`),
    last_extension_date: optDate(o, 'last_extension_date', where),
    goodwill_credit_used_this_year: num(o, 'goodwill_credit_used_this_year', where, 0),
  };
}

const canonCache = new WeakMap<object, string>();
function canonical(entity: object): string {
  let s = canonCache.get(entity);
  if (s === undefined) {
    s = pyJsonDumps(entity, { sortKeys: true });
    canonCache.set(entity, s);
  }
  return s;
}

type Table = 'bills' | 'customers' | 'devices' | 'lines' | 'plans';
const TABLES: readonly Table[] = ['bills', 'customers', 'devices', 'lines', 'plans']; // sort_keys order
const ID_KEY: Record<Table, string> = {
  bills: 'bill_id',
  customers: 'customer_id',
  devices: 'device_id',
  lines: 'line_id',
  plans: 'plan_id',
};

function table<T extends object>(items: T[], key: string, where: string): CowMap<T> {
  const rec: Record<string, T> = {};
  for (const it of items) {
    const id = (it as Record<string, unknown>)[key] as string;
    if (Object.prototype.hasOwnProperty.call(rec, id)) throw new TypeError(`${where}: duplicate id ${id}`);
    rec[id] = deepFreeze(it);
  }
  return new CowMap(Object.freeze(rec));
}

/**
 * The telecom backend: copy-on-write tables of frozen entities, kept in tau2's list order
 * (added bills go last, as `list.append` does). Tools replace entities, never mutate them.
 */
export class TelecomDb implements WorldState {
  private constructor(
    /** Plans by id. */ readonly plans: CowMap<TelecomPlan>,
    /** Customers by id. */ readonly customers: CowMap<TelecomCustomer>,
    /** Lines by id. */ readonly lines: CowMap<TelecomLine>,
    /** Bills by id. */ readonly bills: CowMap<TelecomBill>,
    /** Devices by id. */ readonly devices: CowMap<TelecomDevice>,
    /** Phone number aliases (newer tau2 data only), null when the source has none. */ readonly aliases: Readonly<
      Record<string, string>
    > | null,
  ) {}

  /** Validates JSON (or parsed TOML) in tau2's `TelecomDB` shape; throws TypeError naming a bad field. */
  static fromJSON(data: unknown): TelecomDb {
    const root = obj(data, 'root');
    const plans = list(root, 'plans', 'root').map((x, i) => toPlan(x, `plans[${i}]`));
    const customers = list(root, 'customers', 'root').map((x, i) => toCustomer(x, `customers[${i}]`));
    const lines = list(root, 'lines', 'root').map((x, i) => toLine(x, `lines[${i}]`));
    const bills = list(root, 'bills', 'root').map((x, i) => toBill(x, `bills[${i}]`));
    const devices = list(root, 'devices', 'root').map((x, i) => toDevice(x, `devices[${i}]`));
    let aliases: Record<string, string> | null = null;
    if (root.phone_number_aliases !== undefined) {
      const a = obj(root.phone_number_aliases, 'phone_number_aliases');
      aliases = {};
      for (const [k, v] of Object.entries(a)) {
        if (typeof v !== 'string') throw new TypeError(`phone_number_aliases.${k}: expected a string`);
        aliases[k] = v;
      }
      Object.freeze(aliases);
    }
    return new TelecomDb(
      table(plans, 'plan_id', 'plans'),
      table(customers, 'customer_id', 'customers'),
      table(lines, 'line_id', 'lines'),
      table(bills, 'bill_id', 'bills'),
      table(devices, 'device_id', 'devices'),
      aliases,
    );
  }

  /** A copy sharing every unchanged entity. */
  fork(): this {
    return new TelecomDb(
      this.plans.fork(),
      this.customers.fork(),
      this.lines.fork(),
      this.bills.fork(),
      this.devices.fork(),
      this.aliases,
    ) as this;
  }

  /** Replaces (or appends) a line. */
  putLine(line: TelecomLine): void {
    this.lines.set(line.line_id, deepFreeze(line));
  }
  /** Replaces (or appends) a bill. */
  putBill(bill: TelecomBill): void {
    this.bills.set(bill.bill_id, deepFreeze(bill));
  }
  /** Replaces (or appends) a customer. */
  putCustomer(customer: TelecomCustomer): void {
    this.customers.set(customer.customer_id, deepFreeze(customer));
  }

  private table(t: Table): CowMap<object> {
    return this[t] as CowMap<object>;
  }

  /** `json.dumps(model_dump(), sort_keys=True, default=str)` of tau2's TelecomDB. */
  canonicalJSON(): string {
    const parts = TABLES.map((t) => `${pyJsonString(t)}: [${[...this.table(t).values()].map(canonical).join(', ')}]`);
    if (this.aliases) {
      const keys = Object.keys(this.aliases).sort(compareCodePoints);
      const body = keys
        .map((k) => `${pyJsonString(k)}: ${pyJsonString((this.aliases as Record<string, string>)[k])}`)
        .join(', ');
      parts.splice(4, 0, `${pyJsonString('phone_number_aliases')}: {${body}}`); // sorts between lines and plans
    }
    return `{${parts.join(', ')}}`;
  }

  /** SHA-256 (hex) of {@link canonicalJSON}: tau2's agent DB hash. */
  hash(): string {
    return createHash('sha256').update(this.canonicalJSON(), 'utf8').digest('hex');
  }

  /** Whether both backends have the same canonical JSON (unchanged entities compared by reference). */
  equals(other: this): boolean {
    if (this.aliases !== other.aliases && JSON.stringify(this.aliases) !== JSON.stringify(other.aliases)) return false;
    for (const t of TABLES) {
      const a = this.table(t);
      const b = other.table(t);
      if (a.base !== b.base || a.size !== b.size) return this.canonicalJSON() === other.canonicalJSON();
      const ka = a.keys();
      const kb = b.keys();
      for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return false;
      for (const k of new Set([...a.changedKeys(), ...b.changedKeys()])) {
        const x = a.get(k);
        const y = b.get(k);
        if (x !== y && (x === undefined || y === undefined || canonical(x) !== canonical(y))) return false;
      }
    }
    return true;
  }

  /** Plain JSON (entities shared, frozen), in tau2's list order. */
  toJSON(): TelecomData {
    const out: TelecomData = {
      plans: [...this.plans.values()],
      customers: [...this.customers.values()],
      lines: [...this.lines.values()],
      bills: [...this.bills.values()],
      devices: [...this.devices.values()],
    };
    if (this.aliases) out.phone_number_aliases = { ...this.aliases };
    return out;
  }

  /** tau2's `get_statistics()`. */
  statistics(): {
    num_plans: number;
    num_customers: number;
    num_lines: number;
    num_bills: number;
    num_devices: number;
    num_payment_methods: number;
  } {
    let pm = 0;
    for (const c of this.customers.values()) pm += c.payment_methods.length;
    return {
      num_plans: this.plans.size,
      num_customers: this.customers.size,
      num_lines: this.lines.size,
      num_bills: this.bills.size,
      num_devices: this.devices.size,
      num_payment_methods: pm,
    };
  }

  /** The table key of an entity kind. */
  static idKey(t: Table): string {
    return ID_KEY[t];
  }
}
