/**
 * Seeded generation of retail databases with the shape and statistics of tau2's retail data:
 * products with variants, users with 1–4 payment methods, orders in every status with
 * fulfillments and payment histories.
 * @module
 */
import { pyRound2 } from '../../pyjson.js';
import { Rng } from '../../rng.js';
import { CATALOG, CITIES, FIRST_NAMES, LAST_NAMES, STREETS } from './catalog.js';
import type {
  Address,
  Order,
  OrderItem,
  OrderStatus,
  PaymentMethod,
  Product,
  RetailData,
  User,
  Variant,
} from './schema.js';
import { RetailDb } from './schema.js';
import { optionKeys, refuseUnknownOptions } from '../../../util/options.js';

const GENERATE_DB_KEYS = optionKeys<GenerateDbOptions>({ seed: true, products: true, users: true, orders: true });

/** Options of {@link generateRetailDb}. */
export interface GenerateDbOptions {
  /** Seed. Default 0. */
  seed?: number;
  /** Number of product types (at most 50). Default 50. */
  products?: number;
  /** Number of users. Default 500. */
  users?: number;
  /** Number of orders. Default 1000. */
  orders?: number;
}

const STATUS_WEIGHTS: [OrderStatus, number][] = [
  ['pending', 0.423],
  ['delivered', 0.373],
  ['processed', 0.102],
  ['cancelled', 0.102],
];

function unique(rng: Rng, used: Set<string>, make: () => string): string {
  for (;;) {
    const s = make();
    if (!used.has(s)) {
      used.add(s);
      return s;
    }
  }
}

/** A random address. */
export function randomAddress(rng: Rng): Address {
  const [city, state, zip] = rng.pick(CITIES);
  return {
    address1: `${rng.int(100, 999)} ${rng.pick(STREETS)}`,
    address2: rng.chance(0.85) ? `Suite ${rng.int(100, 999)}` : '',
    city,
    country: 'USA',
    state,
    zip: zip + String(rng.int(0, 99)).padStart(2, '0'),
  };
}

/** Generates a retail database (same seed, same database). */
export function generateRetailDb(options: GenerateDbOptions = {}): RetailDb {
  refuseUnknownOptions(options, GENERATE_DB_KEYS, 'generateRetailDb');
  const rng = new Rng(options.seed ?? 0);
  const nProducts = Math.min(options.products ?? 50, CATALOG.length);
  const nUsers = options.users ?? 500;
  const nOrders = options.orders ?? 1000;
  for (const [k, v] of [
    ['products', nProducts],
    ['users', nUsers],
    ['orders', nOrders],
  ] as const) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`generateRetailDb: ${k} must be a positive integer`);
  }
  const ids = new Set<string>();
  const data: RetailData = { products: {}, users: {}, orders: {} };

  for (const entry of CATALOG.slice(0, nProducts)) {
    const productId = unique(rng, ids, () => rng.digits(10));
    const dims = Object.entries(entry.options);
    const combos = dims.reduce((n, [, vals]) => n * vals.length, 1);
    const count = Math.min(combos, rng.int(5, 20));
    const seen = new Set<string>();
    const variants: Record<string, Variant> = {};
    while (Object.keys(variants).length < count) {
      const options: Record<string, string> = {};
      for (const [d, vals] of dims) options[d] = rng.pick(vals);
      const key = JSON.stringify(options);
      if (seen.has(key)) continue;
      seen.add(key);
      const itemId = unique(rng, ids, () => rng.digits(10));
      const price = pyRound2(entry.price[0] + rng.next() * (entry.price[1] - entry.price[0]));
      variants[itemId] = { item_id: itemId, options, available: rng.chance(0.8), price };
    }
    data.products[productId] = { name: entry.name, product_id: productId, variants };
  }

  const userIds: string[] = [];
  for (let u = 0; u < nUsers; u++) {
    const first = rng.pick(FIRST_NAMES);
    const last = rng.pick(LAST_NAMES);
    const userId = unique(rng, ids, () => `${first.toLowerCase()}_${last.toLowerCase()}_${rng.int(1000, 9999)}`);
    const nPm = 1 + rng.weighted([0.674, 0.272, 0.044, 0.01]);
    const pms: Record<string, PaymentMethod> = {};
    let hasPaypal = false;
    for (let k = 0; k < nPm; k++) {
      const kind = rng.weighted([0.345, hasPaypal ? 0 : 0.32, 0.335]);
      const id = unique(rng, ids, () => `${['credit_card', 'paypal', 'gift_card'][kind]}_${rng.digits(7)}`);
      if (kind === 0)
        pms[id] = {
          source: 'credit_card',
          id,
          brand: rng.pick(['visa', 'mastercard', 'amex', 'discover']),
          last_four: String(rng.int(0, 9999)).padStart(4, '0'),
        };
      else if (kind === 1) {
        pms[id] = { source: 'paypal', id };
        hasPaypal = true;
      } else pms[id] = { source: 'gift_card', id, balance: rng.int(0, 200) };
    }
    const email = `${first.toLowerCase()}.${last.toLowerCase()}${rng.int(1000, 9999)}@example.com`;
    data.users[userId] = {
      user_id: userId,
      name: { first_name: first, last_name: last },
      address: randomAddress(rng),
      email,
      payment_methods: pms,
      orders: [],
    };
    userIds.push(userId);
  }

  const products = Object.values(data.products) as Product[];
  for (let o = 0; o < nOrders; o++) {
    const orderId = unique(rng, ids, () => `#W${rng.digits(7)}`);
    const user = data.users[rng.pick(userIds)] as User & { orders: string[] };
    const status = STATUS_WEIGHTS[rng.weighted(STATUS_WEIGHTS.map(([, w]) => w))][0];
    const items: OrderItem[] = [];
    const nItems = rng.int(1, 5);
    for (let i = 0; i < nItems; i++) {
      const p = rng.pick(products);
      const v = rng.pick(Object.values(p.variants));
      items.push({ name: p.name, product_id: p.product_id, item_id: v.item_id, price: v.price, options: v.options });
    }
    const total = pyRound2(items.reduce((s, it) => s + it.price, 0));
    const pm = rng.pick(Object.values(user.payment_methods));
    const history: Order['payment_history'][number][] = [
      { transaction_type: 'payment', amount: total, payment_method_id: pm.id },
    ];
    if (status === 'cancelled') history.push({ transaction_type: 'refund', amount: total, payment_method_id: pm.id });
    const fulfillments =
      status === 'pending' ? [] : [{ tracking_id: [rng.digits(12)], item_ids: items.map((i) => i.item_id) }];
    data.orders[orderId] = {
      order_id: orderId,
      user_id: user.user_id,
      address: rng.chance(0.9) ? user.address : randomAddress(rng),
      items,
      status,
      fulfillments,
      payment_history: history,
      cancel_reason: null,
      exchange_items: null,
      exchange_new_items: null,
      exchange_payment_method_id: null,
      exchange_price_difference: null,
      return_items: null,
      return_payment_method_id: null,
    };
    user.orders.push(orderId);
  }
  return RetailDb.fromJSON(data);
}
