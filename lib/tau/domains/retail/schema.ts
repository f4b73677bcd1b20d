/**
 * tau2's retail schema (products with variants, users with payment methods, orders), the
 * copy-on-write database over it, and tau2's canonical hash.
 * @module
 */
import { createHash } from 'node:crypto';

import { canonicalCache, CowMap, cowMapsEqual, deepFreeze, sortedTableJSON } from '../../cow.js';
import type { WorldState } from '../../domain.js';
import { jsonReaders, type JsonReaders } from '../../json-check.js';
import { pyJsonDumps, pyJsonString } from '../../pyjson.js';

/** One variant (item) of a product. */
export interface Variant {
  /** 10-digit item id. */
  readonly item_id: string;
  /** Option values (e.g. color, size). */
  readonly options: Readonly<Record<string, string>>;
  /** Whether it can be ordered. */
  readonly available: boolean;
  /** Price. */
  readonly price: number;
}

/** A product type with its variants. */
export interface Product {
  /** Name, e.g. `T-Shirt`. */
  readonly name: string;
  /** 10-digit product id. */
  readonly product_id: string;
  /** Variants by item id. */
  readonly variants: Readonly<Record<string, Variant>>;
}

/** A postal address. */
export interface Address {
  /** Street line. */
  readonly address1: string;
  /** Second line. */
  readonly address2: string;
  /** City. */
  readonly city: string;
  /** Country. */
  readonly country: string;
  /** State. */
  readonly state: string;
  /** Zip code. */
  readonly zip: string;
}

/** A credit card. */
export interface CreditCard {
  /** Tag. */
  readonly source: 'credit_card';
  /** Id, e.g. `credit_card_7815826`. */
  readonly id: string;
  /** Brand, e.g. visa. */
  readonly brand: string;
  /** Last four digits. */
  readonly last_four: string;
}

/** A PayPal account. */
export interface Paypal {
  /** Tag. */
  readonly source: 'paypal';
  /** Id, e.g. `paypal_5727330`. */
  readonly id: string;
}

/** A gift card with a balance. */
export interface GiftCard {
  /** Tag. */
  readonly source: 'gift_card';
  /** Id, e.g. `gift_card_1725971`. */
  readonly id: string;
  /** Balance. */
  readonly balance: number;
}

/** A payment method (tagged on `source`). */
export type PaymentMethod = CreditCard | Paypal | GiftCard;

/** A customer. */
export interface User {
  /** Id, e.g. `noah_brown_6181`. */
  readonly user_id: string;
  /** Name. */
  readonly name: { readonly first_name: string; readonly last_name: string };
  /** Default address. */
  readonly address: Address;
  /** Email. */
  readonly email: string;
  /** Payment methods by id. */
  readonly payment_methods: Readonly<Record<string, PaymentMethod>>;
  /** Order ids. */
  readonly orders: readonly string[];
}

/** An ordered item. */
export interface OrderItem {
  /** Product name. */
  readonly name: string;
  /** Product id. */
  readonly product_id: string;
  /** Item (variant) id. */
  readonly item_id: string;
  /** Price paid. */
  readonly price: number;
  /** Option values. */
  readonly options: Readonly<Record<string, string>>;
}

/** Order statuses. */
export type OrderStatus =
  | 'processed'
  | 'pending'
  | 'pending (item modified)'
  | 'delivered'
  | 'cancelled'
  | 'exchange requested'
  | 'return requested';

/** All order statuses. */
export const ORDER_STATUSES: readonly OrderStatus[] = [
  'processed',
  'pending',
  'pending (item modified)',
  'delivered',
  'cancelled',
  'exchange requested',
  'return requested',
];

/** A payment or refund. */
export interface OrderPayment {
  /** Kind. */
  readonly transaction_type: 'payment' | 'refund';
  /** Amount. */
  readonly amount: number;
  /** Payment method id. */
  readonly payment_method_id: string;
}

/** A shipment. */
export interface Fulfillment {
  /** Tracking ids. */
  readonly tracking_id: readonly string[];
  /** Item ids shipped. */
  readonly item_ids: readonly string[];
}

/** An order (optional fields are null until an action sets them, as in tau2's model). */
export interface Order {
  /** Id, `#W` + 7 digits. */
  readonly order_id: string;
  /** Owner. */
  readonly user_id: string;
  /** Shipping address. */
  readonly address: Address;
  /** Items. */
  readonly items: readonly OrderItem[];
  /** Status. */
  readonly status: OrderStatus;
  /** Shipments. */
  readonly fulfillments: readonly Fulfillment[];
  /** Payments and refunds. */
  readonly payment_history: readonly OrderPayment[];
  /** Cancel reason. */
  readonly cancel_reason: 'no longer needed' | 'ordered by mistake' | null;
  /** Items to exchange (sorted). */
  readonly exchange_items: readonly string[] | null;
  /** Items exchanged for (sorted). */
  readonly exchange_new_items: readonly string[] | null;
  /** Payment method for the exchange difference. */
  readonly exchange_payment_method_id: string | null;
  /** Exchange price difference. */
  readonly exchange_price_difference: number | null;
  /** Items to return (sorted). */
  readonly return_items: readonly string[] | null;
  /** Refund method for the return. */
  readonly return_payment_method_id: string | null;
}

/** The retail database as plain JSON (the shape of tau2's `db.json`). */
export interface RetailData {
  /** Products by id. */
  products: Record<string, Product>;
  /** Users by id. */
  users: Record<string, User>;
  /** Orders by id. */
  orders: Record<string, Order>;
}

const readers = jsonReaders('retail db');
const fail: JsonReaders['fail'] = readers.fail; // explicitly typed so that TypeScript narrows after it
const { str, num, obj, arr, strMap, strList, optStrList, optStr } = readers;

/** Normalizes an address (tau2 field order). */
export function toAddress(v: unknown, where = 'address'): Address {
  const o = obj(v, where);
  return {
    address1: str(o.address1, `${where}.address1`),
    address2: str(o.address2, `${where}.address2`),
    city: str(o.city, `${where}.city`),
    country: str(o.country, `${where}.country`),
    state: str(o.state, `${where}.state`),
    zip: str(o.zip, `${where}.zip`),
  };
}

function toProduct(v: unknown, where: string): Product {
  const o = obj(v, where);
  const variants: Record<string, Variant> = {};
  for (const [k, x] of Object.entries(obj(o.variants, `${where}.variants`))) {
    const w = `${where}.variants.${k}`;
    const vo = obj(x, w);
    if (typeof vo.available !== 'boolean') fail(`${w}.available`, 'expected a boolean');
    variants[k] = {
      item_id: str(vo.item_id, `${w}.item_id`),
      options: strMap(vo.options, `${w}.options`),
      available: vo.available,
      price: num(vo.price, `${w}.price`),
    };
  }
  return { name: str(o.name, `${where}.name`), product_id: str(o.product_id, `${where}.product_id`), variants };
}

function toPayment(v: unknown, where: string): PaymentMethod {
  const o = obj(v, where);
  const id = str(o.id, `${where}.id`);
  switch (o.source) {
    case 'credit_card':
      return {
        source: 'credit_card',
        id,
        brand: str(o.brand, `${where}.brand`),
        last_four: str(o.last_four, `${where}.last_four`),
      };
    case 'paypal':
      return { source: 'paypal', id };
    case 'gift_card':
      return { source: 'gift_card', id, balance: num(o.balance, `${where}.balance`) };
    default:
      return fail(`${where}.source`, `unknown payment source ${JSON.stringify(o.source)}`);
  }
}

function toUser(v: unknown, where: string): User {
  const o = obj(v, where);
  const name = obj(o.name, `${where}.name`);
  const pms: Record<string, PaymentMethod> = {};
  for (const [k, x] of Object.entries(obj(o.payment_methods, `${where}.payment_methods`)))
    pms[k] = toPayment(x, `${where}.payment_methods.${k}`);
  return {
    user_id: str(o.user_id, `${where}.user_id`),
    name: {
      first_name: str(name.first_name, `${where}.name.first_name`),
      last_name: str(name.last_name, `${where}.name.last_name`),
    },
    address: toAddress(o.address, `${where}.address`),
    email: str(o.email, `${where}.email`),
    payment_methods: pms,
    orders: strList(o.orders, `${where}.orders`),
  };
}

function toOrder(v: unknown, where: string): Order {
  const o = obj(v, where);
  const status = str(o.status, `${where}.status`);
  if (!ORDER_STATUSES.includes(status as OrderStatus)) fail(`${where}.status`, `unknown status ${status}`);
  const reason = optStr(o.cancel_reason, `${where}.cancel_reason`);
  if (reason !== null && reason !== 'no longer needed' && reason !== 'ordered by mistake')
    fail(`${where}.cancel_reason`, 'invalid reason');
  return {
    order_id: str(o.order_id, `${where}.order_id`),
    user_id: str(o.user_id, `${where}.user_id`),
    address: toAddress(o.address, `${where}.address`),
    items: arr(o.items, `${where}.items`).map((x, i) => {
      const w = `${where}.items[${i}]`;
      const it = obj(x, w);
      return {
        name: str(it.name, `${w}.name`),
        product_id: str(it.product_id, `${w}.product_id`),
        item_id: str(it.item_id, `${w}.item_id`),
        price: num(it.price, `${w}.price`),
        options: strMap(it.options, `${w}.options`),
      };
    }),
    status: status as OrderStatus,
    fulfillments: arr(o.fulfillments, `${where}.fulfillments`).map((x, i) => {
      const f = obj(x, `${where}.fulfillments[${i}]`);
      return {
        tracking_id: strList(f.tracking_id, `${where}.fulfillments[${i}].tracking_id`),
        item_ids: strList(f.item_ids, `${where}.fulfillments[${i}].item_ids`),
      };
    }),
    payment_history: arr(o.payment_history, `${where}.payment_history`).map((x, i) => {
      const w = `${where}.payment_history[${i}]`;
      const p = obj(x, w);
      if (p.transaction_type !== 'payment' && p.transaction_type !== 'refund')
        fail(`${w}.transaction_type`, 'expected payment or refund');
      return {
        transaction_type: p.transaction_type,
        amount: num(p.amount, `${w}.amount`),
        payment_method_id: str(p.payment_method_id, `${w}.payment_method_id`),
      };
    }),
    cancel_reason: reason as Order['cancel_reason'],
    exchange_items: optStrList(o.exchange_items, `${where}.exchange_items`),
    exchange_new_items: optStrList(o.exchange_new_items, `${where}.exchange_new_items`),
    exchange_payment_method_id: optStr(o.exchange_payment_method_id, `${where}.exchange_payment_method_id`),
    exchange_price_difference:
      o.exchange_price_difference === null || o.exchange_price_difference === undefined
        ? null
        : num(o.exchange_price_difference, `${where}.exchange_price_difference`),
    return_items: optStrList(o.return_items, `${where}.return_items`),
    return_payment_method_id: optStr(o.return_payment_method_id, `${where}.return_payment_method_id`),
  };
}

/** Validates and normalizes one entity of a table (used for `initialization_data` patches). */
export function normalizeEntity(
  table: 'products' | 'users' | 'orders',
  value: unknown,
  where: string,
): Product | User | Order {
  return deepFreeze(
    table === 'products' ? toProduct(value, where) : table === 'users' ? toUser(value, where) : toOrder(value, where),
  );
}

/** Canonical (sorted-key, Python-style) JSON of a frozen entity, cached per object. */
export const canonicalEntity: (entity: object) => string = canonicalCache((entity: object) =>
  pyJsonDumps(entity, { sortKeys: true }),
);

type Table = 'products' | 'users' | 'orders';
const TABLES: readonly Table[] = ['orders', 'products', 'users']; // sorted, as sort_keys orders them

/** The retail database: copy-on-write tables of frozen entities. */
export class RetailDb implements WorldState {
  /** Products by id. */
  readonly products: CowMap<Product>;
  /** Users by id. */
  readonly users: CowMap<User>;
  /** Orders by id. */
  readonly orders: CowMap<Order>;

  private constructor(products: CowMap<Product>, users: CowMap<User>, orders: CowMap<Order>) {
    this.products = products;
    this.users = users;
    this.orders = orders;
  }

  /**
   * Validates and normalizes JSON in tau2's `db.json` shape (field order as tau2's models,
   * optional order fields filled with null) and freezes it. Throws TypeError naming a bad field.
   */
  static fromJSON(data: unknown): RetailDb {
    const root = obj(data, 'root');
    const products: Record<string, Product> = {};
    for (const [k, v] of Object.entries(obj(root.products, 'products'))) products[k] = toProduct(v, `products.${k}`);
    const users: Record<string, User> = {};
    for (const [k, v] of Object.entries(obj(root.users, 'users'))) users[k] = toUser(v, `users.${k}`);
    const orders: Record<string, Order> = {};
    for (const [k, v] of Object.entries(obj(root.orders, 'orders'))) orders[k] = toOrder(v, `orders.${k}`);
    return new RetailDb(
      new CowMap(deepFreeze(products)),
      new CowMap(deepFreeze(users)),
      new CowMap(deepFreeze(orders)),
    );
  }

  /** A copy sharing every unchanged entity (O(changed entities)). */
  fork(): this {
    return new RetailDb(this.products.fork(), this.users.fork(), this.orders.fork()) as this;
  }

  /** Replaces an order (frozen). */
  putOrder(order: Order): void {
    this.orders.set(order.order_id, deepFreeze(order));
  }

  /** Replaces a user (frozen). */
  putUser(user: User): void {
    this.users.set(user.user_id, deepFreeze(user));
  }

  /** Replaces a product (frozen). */
  putProduct(product: Product): void {
    this.products.set(product.product_id, deepFreeze(product));
  }

  private table(t: Table): CowMap<object> {
    return this[t] as CowMap<object>;
  }

  /** The canonical JSON tau2 hashes: `json.dumps(model_dump(), sort_keys=True)`. */
  canonicalJSON(): string {
    return `{${TABLES.map((t) => `${pyJsonString(t)}: ${sortedTableJSON(this.table(t), canonicalEntity)}`).join(', ')}}`;
  }

  /** SHA-256 (hex) of {@link canonicalJSON}: tau2's `get_db_hash()`. */
  hash(): string {
    return createHash('sha256').update(this.canonicalJSON(), 'utf8').digest('hex');
  }

  /** Whether the canonical JSON equals `other`'s (fast: unchanged entities are compared by reference). */
  equals(other: this): boolean {
    for (const t of TABLES) {
      const same = cowMapsEqual(this.table(t), other.table(t), canonicalEntity);
      if (same === undefined) return this.canonicalJSON() === other.canonicalJSON();
      if (!same) return false;
    }
    return true;
  }

  /** Plain JSON data (entities shared, frozen). */
  toJSON(): RetailData {
    return { products: this.products.toObject(), users: this.users.toObject(), orders: this.orders.toObject() };
  }

  /** Counts: products, variants, users, orders by status, payment methods by source. */
  statistics(): {
    products: number;
    variants: number;
    users: number;
    orders: number;
    statuses: Record<string, number>;
    paymentMethods: Record<string, number>;
  } {
    let variants = 0;
    for (const p of this.products.values()) variants += Object.keys(p.variants).length;
    const statuses: Record<string, number> = {};
    for (const o of this.orders.values()) statuses[o.status] = (statuses[o.status] ?? 0) + 1;
    const paymentMethods: Record<string, number> = {};
    for (const u of this.users.values())
      for (const pm of Object.values(u.payment_methods))
        paymentMethods[pm.source] = (paymentMethods[pm.source] ?? 0) + 1;
    return {
      products: this.products.size,
      variants,
      users: this.users.size,
      orders: this.orders.size,
      statuses,
      paymentMethods,
    };
  }
}
