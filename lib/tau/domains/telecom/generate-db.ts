/**
 * A seeded generator of telecom backends in tau2's shape (plans, customers with lines,
 * devices and bills), so the domain runs with no external data. Everything is invented here
 * (names, plans, prices); the same seed gives the same database.
 * @module
 */
import { Rng } from '../../rng.js';
import { addDays } from './backend.js';
import type { TelecomBill, TelecomCustomer, TelecomData, TelecomDevice, TelecomLine, TelecomPlan } from './schema.js';
import { TelecomDb } from './schema.js';
import { optionKeys, refuseUnknownOptions } from '../../../util/options.js';

const GENERATE_TELECOM_DB_KEYS = optionKeys<GenerateTelecomDbOptions>({ seed: true, customers: true });

/** Options of {@link generateTelecomDb}. */
export interface GenerateTelecomDbOptions {
  /** Seed. Default 0. */
  seed?: number;
  /** Number of customers. Default 60. */
  customers?: number;
}

/** The embedded plan catalogue (our own). */
export const GENERATED_PLANS: readonly TelecomPlan[] = [
  { plan_id: 'P2001', name: 'Starter 3', data_limit_gb: 3.0, price_per_month: 30.0, data_refueling_price_per_gb: 6.0 },
  {
    plan_id: 'P2002',
    name: 'Everyday 10',
    data_limit_gb: 10.0,
    price_per_month: 45.0,
    data_refueling_price_per_gb: 4.0,
  },
  { plan_id: 'P2003', name: 'Plus 20', data_limit_gb: 20.0, price_per_month: 60.0, data_refueling_price_per_gb: 2.5 },
  {
    plan_id: 'P2004',
    name: 'Family 40',
    data_limit_gb: 40.0,
    price_per_month: 110.0,
    data_refueling_price_per_gb: 3.0,
  },
  { plan_id: 'P2005', name: 'Max 200', data_limit_gb: 200.0, price_per_month: 90.0, data_refueling_price_per_gb: 0.5 },
  { plan_id: 'P2006', name: 'Connect 1', data_limit_gb: 1.0, price_per_month: 12.0, data_refueling_price_per_gb: 9.0 },
];

const FIRST = [
  'Ava',
  'Liam',
  'Maya',
  'Noah',
  'Iris',
  'Omar',
  'Lena',
  'Theo',
  'Rosa',
  'Felix',
  'Nina',
  'Hugo',
  'Zara',
  'Ivan',
  'Cleo',
  'Ezra',
  'Mila',
  'Otto',
  'Ruth',
  'Kai',
  'Aiko',
  'José',
  'Chloé',
  'Sven',
  'Priya',
  'Malik',
  'Greta',
  'Tomás',
  'Yara',
  'Bruno',
];
const LAST = [
  'Patel',
  'Nguyen',
  'Okafor',
  'Larsen',
  'Moreau',
  'Kowalski',
  'Haddad',
  'Tanaka',
  'Silva',
  'Brennan',
  'Fischer',
  'Ramos',
  'Novak',
  'Ibrahim',
  'Lindqvist',
  'Costa',
  'Mendes',
  'Walsh',
  'Keller',
  'Abbott',
  'Núñez',
  'Oyelaran',
  'Vidal',
  'Sato',
  'Quinn',
];
const STREETS = [
  'Maple Ave',
  'Harbor Rd',
  'Elm St',
  'Cedar Ln',
  'Sunset Blvd',
  'Ridge Dr',
  'Park Pl',
  'Mill St',
  'Lake View Rd',
  'Orchard Way',
];
const CITIES: readonly [string, string, string][] = [
  ['Portland', 'OR', '97201'],
  ['Madison', 'WI', '53703'],
  ['Tucson', 'AZ', '85701'],
  ['Raleigh', 'NC', '27601'],
  ['Boise', 'ID', '83702'],
  ['Albany', 'NY', '12207'],
  ['Reno', 'NV', '89501'],
  ['Dayton', 'OH', '45402'],
];
const PHONES = ['Aurora S2', 'Nimbus 8', 'Pixelate 5', 'Quanta X', 'Horizon Lite', 'Vertex Pro'];

function date(rng: Rng, from: string, days: number): string {
  return addDays(from, rng.int(0, days));
}

function datetime(rng: Rng, from: string, days: number): string {
  return `${date(rng, from, days)} ${String(rng.int(8, 19)).padStart(2, '0')}:${String(rng.int(0, 59)).padStart(2, '0')}:00`;
}

function billFor(
  id: string,
  customerId: string,
  month: string,
  lines: TelecomLine[],
  status: TelecomBill['status'],
): TelecomBill {
  const items = lines.map((l) => {
    const plan = GENERATED_PLANS.find((p) => p.plan_id === l.plan_id) as TelecomPlan;
    return {
      description: `${plan.name} - Line ${l.phone_number}`,
      amount: plan.price_per_month,
      date: `${month}-05`,
      item_type: 'Plan Charge',
    };
  });
  const total = status === 'Draft' ? 0 : items.reduce((s, i) => s + i.amount, 0);
  const periodEnd = addDays(`${nextMonth(month)}-01`, -1);
  return {
    bill_id: id,
    customer_id: customerId,
    period_start: `${month}-01`,
    period_end: periodEnd,
    issue_date: `${month}-${status === 'Draft' ? '01' : '05'}`,
    total_due: total,
    due_date: `${month}-19`,
    line_items: status === 'Draft' ? [] : items,
    status,
  };
}

function nextMonth(month: string): string {
  const [y, m] = month.split('-').map(Number);
  return m === 12 ? `${y + 1}-01` : `${y}-${String(m + 1).padStart(2, '0')}`;
}

/**
 * Generates a backend: the plan catalogue, `customers` customers with one to three lines each
 * (phones mostly, some tablets and watches; active lines with future contract ends, a few
 * suspended), one device per line, and two paid bills, an issued bill and sometimes a draft
 * bill per customer. No bill is overdue, so any line can have an overdue-bill fault.
 */
export function generateTelecomDb(options: GenerateTelecomDbOptions = {}): TelecomDb {
  refuseUnknownOptions(options, GENERATE_TELECOM_DB_KEYS, 'generateTelecomDb');
  const rng = new Rng(options.seed ?? 0);
  const n = options.customers ?? 60;
  if (!Number.isInteger(n) || n < 1) throw new RangeError('customers must be a positive integer');
  const data: TelecomData = {
    plans: GENERATED_PLANS.map((p) => ({ ...p })),
    customers: [],
    lines: [],
    bills: [],
    devices: [],
  };
  const usedPhones = new Set<string>();
  const phone = () => {
    for (;;) {
      const p = `555-${rng.int(200, 899)}-${String(rng.int(0, 9999)).padStart(4, '0')}`;
      if (!usedPhones.has(p)) {
        usedPhones.add(p);
        return p;
      }
    }
  };
  for (let c = 0; c < n; c++) {
    const customerId = `C${3001 + c}`;
    const first = rng.pick(FIRST);
    const last = rng.pick(LAST);
    const [city, state, zip] = rng.pick(CITIES);
    const lineCount = rng.weighted([5, 3, 2]) + 1;
    const lines: TelecomLine[] = [];
    for (let k = 0; k < lineCount; k++) {
      const idx = data.lines.length;
      const kind = k === 0 ? 'phone' : rng.pick(['phone', 'phone', 'tablet', 'watch'] as const);
      const device: TelecomDevice = {
        device_id: `D${4001 + idx}`,
        device_type: kind,
        model: kind === 'phone' ? rng.pick(PHONES) : kind === 'tablet' ? 'Slate Tab 11' : 'Pulse Watch 3',
        imei: kind === 'watch' ? null : rng.digits(15),
        is_esim_capable: rng.chance(0.7),
        activated: true,
        activation_date: datetime(rng, '2024-01-01', 400),
        last_esim_transfer_date: null,
      };
      const plan = kind === 'watch' ? GENERATED_PLANS[5] : rng.pick(GENERATED_PLANS.slice(0, 5));
      const suspended = k > 0 && rng.chance(0.15);
      const line: TelecomLine = {
        line_id: `L${5001 + idx}`,
        phone_number: phone(),
        status: suspended ? 'Suspended' : 'Active',
        plan_id: plan.plan_id,
        device_id: device.device_id,
        data_used_gb: Math.round(rng.next() * plan.data_limit_gb * 0.85 * 10) / 10,
        data_refueling_gb: 0.0,
        roaming_enabled: rng.chance(0.3),
        contract_end_date: date(rng, '2025-06-01', 900),
        last_plan_change_date: date(rng, '2024-01-01', 400),
        last_sim_replacement_date: rng.chance(0.3) ? date(rng, '2024-06-01', 200) : null,
        suspension_start_date: suspended ? date(rng, '2025-01-10', 40) : null,
      };
      data.devices.push(device);
      data.lines.push(line);
      lines.push(line);
    }
    const billIds: string[] = [];
    const addBill = (month: string, status: TelecomBill['status']) => {
      const b = billFor(`B${6001 + data.bills.length}`, customerId, month, lines, status);
      data.bills.push(b);
      billIds.push(b.bill_id);
    };
    addBill('2024-12', 'Paid');
    addBill('2025-01', 'Paid');
    addBill('2025-02', 'Issued');
    if (rng.chance(0.5)) addBill('2025-03', 'Draft');
    const customer: TelecomCustomer = {
      customer_id: customerId,
      full_name: `${first} ${last}`,
      date_of_birth: date(rng, '1950-01-01', 18000),
      email: `${first.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase()}.${last.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase()}${rng.int(1, 99)}@example.com`,
      phone_number: lines[0].phone_number,
      address: { street: `${rng.int(10, 9999)} ${rng.pick(STREETS)}`, city, state, zip_code: zip },
      account_status: 'Active',
      payment_methods: [
        {
          method_type: rng.pick(['Credit Card', 'Debit Card', 'PayPal'] as const),
          account_number_last_4: rng.digits(4),
          expiration_date: `${String(rng.int(1, 12)).padStart(2, '0')}/${rng.int(2025, 2029)}`,
        },
      ],
      line_ids: lines.map((l) => l.line_id),
      bill_ids: billIds,
      created_at: datetime(rng, '2023-01-01', 700),
      last_extension_date: null,
      goodwill_credit_used_this_year: rng.pick([0.0, 0.0, 10.0, 25.0]),
    };
    data.customers.push(customer);
  }
  return TelecomDb.fromJSON(data);
}
