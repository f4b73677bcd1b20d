/**
 * The 16 retail agent tools with tau2's arguments, checks (in tau2's order), effects, return
 * values and error messages.
 *
 * `modify_pending_order_items`: tau2 writes the price and options of the *last* new variant
 * onto every modified item (issues #317/#318). We do the same by default, so that grades and
 * published tau2 numbers agree; `{ modifyItemsPriceFix: true }` gives each modified item its own
 * new variant's price and options instead (the fix proposed in tau2 PR #322, not merged). The
 * same tool runs on both sides of grading (trajectory replay and gold replay), so either choice
 * grades consistently.
 * @module
 */
import { z } from 'zod';

import { pyJsonDumps, pyRound2 } from '../../pyjson.js';
import type { Tool } from '../../tools.js';
import { defineTool, ToolError, Toolkit } from '../../tools.js';
import { calculate } from './calculate.js';
import type {
  Address,
  GiftCard,
  Order,
  OrderItem,
  OrderPayment,
  PaymentMethod,
  Product,
  RetailDb,
  User,
  Variant,
} from './schema.js';

/** Options of the retail toolkit. */
export interface RetailToolOptions {
  /**
   * `modify_pending_order_items` gives each modified item its own new variant's price and
   * options (tau2 PR #322). Default false: tau2's behaviour, the last new variant's price and
   * options on every modified item.
   */
  modifyItemsPriceFix?: boolean;
  /**
   * @deprecated The former name with the opposite sense: `modifyItemsQuirk: false` is
   * `modifyItemsPriceFix: true`. Still read; giving both with conflicting values throws.
   */
  modifyItemsQuirk?: boolean;
}

/** Whether `modify_pending_order_items` uses the price fix (see {@link RetailToolOptions}). */
export function modifyItemsPriceFixOf(options: RetailToolOptions): boolean {
  const { modifyItemsPriceFix: fix, modifyItemsQuirk: quirk } = options;
  if (fix !== undefined && typeof fix !== 'boolean')
    throw new TypeError(`modifyItemsPriceFix must be a boolean, got ${typeof fix}`);
  if (quirk !== undefined && typeof quirk !== 'boolean')
    throw new TypeError(`modifyItemsQuirk must be a boolean, got ${typeof quirk}`);
  if (fix !== undefined && quirk !== undefined && fix === quirk) {
    throw new RangeError(
      `modifyItemsPriceFix: ${fix} contradicts the deprecated modifyItemsQuirk: ${quirk}; give only modifyItemsPriceFix`,
    );
  }
  return fix ?? (quirk === undefined ? false : !quirk);
}

const ORDER_ID = z.string().describe("The order id, such as '#W0000000'. Note the '#' at the start of the order id.");
const USER_ID = z.string().describe("The user id, such as 'sara_doe_496'.");
const ITEM_IDS = (what: string) =>
  z.array(z.string()).describe(`The item ids ${what}, each such as '1008292230'. The list may contain duplicates.`);
const PAYMENT_ID = z
  .string()
  .describe(
    "A payment method id of the user, such as 'gift_card_0000000' or 'credit_card_0000000' (see the user or order details).",
  );
const ADDRESS = {
  address1: z.string().describe("First address line, such as '123 Main St'."),
  address2: z.string().describe("Second address line, such as 'Apt 1', or ''."),
  city: z.string().describe("City, such as 'San Francisco'."),
  state: z.string().describe("State, such as 'CA'."),
  country: z.string().describe("Country, such as 'USA'."),
  zip: z.string().describe("Zip code, such as '12345'."),
};

/** Case- and accent-insensitive form for name and email matching. */
export function foldForMatch(s: string): string {
  return s.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase();
}

function getOrder(db: RetailDb, id: string): Order {
  const o = db.orders.get(id);
  if (!o) throw new ToolError('Order not found');
  return o;
}
function getUser(db: RetailDb, id: string): User {
  const u = db.users.get(id);
  if (!u) throw new ToolError('User not found');
  return u;
}
function getProduct(db: RetailDb, id: string): Product {
  const p = db.products.get(id);
  if (!p) throw new ToolError('Product not found');
  return p;
}
function getVariant(db: RetailDb, productId: string, itemId: string): Variant {
  const p = getProduct(db, productId);
  const v = Object.prototype.hasOwnProperty.call(p.variants, itemId) ? p.variants[itemId] : undefined;
  if (!v) throw new ToolError('Variant not found');
  return v;
}
function getPaymentMethod(db: RetailDb, userId: string, pmId: string): PaymentMethod {
  const u = getUser(db, userId);
  const pm = Object.prototype.hasOwnProperty.call(u.payment_methods, pmId) ? u.payment_methods[pmId] : undefined;
  if (!pm) throw new ToolError('Payment method not found');
  return pm;
}
function setGiftCardBalance(db: RetailDb, userId: string, card: GiftCard, balance: number): void {
  const u = getUser(db, userId);
  db.putUser({ ...u, payment_methods: { ...u.payment_methods, [card.id]: { ...card, balance } } });
}
function count(list: readonly string[], x: string): number {
  let n = 0;
  for (const y of list) if (y === x) n++;
  return n;
}
function sortedStrings(list: readonly string[]): string[] {
  return [...list].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
function toAddress(a: Record<keyof Address, string>): Address {
  return { address1: a.address1, address2: a.address2, city: a.city, country: a.country, state: a.state, zip: a.zip };
}

/** Builds the 16 retail tools. */
export function retailTools(options: RetailToolOptions = {}): Tool<RetailDb>[] {
  const quirk = !modifyItemsPriceFixOf(options);
  return [
    defineTool<RetailDb, { expression: z.ZodString }>({
      name: 'calculate',
      kind: 'generic',
      description:
        "Calculate the result of a mathematical expression, rounded to 2 decimals. The expression may contain numbers, the operators + - * /, parentheses and spaces, such as '2 + 2'.",
      params: { expression: z.string().describe("The expression to calculate, such as '2 + 2'.") },
      run: (_db, a) => calculate(a.expression),
    }),
    defineTool({
      name: 'cancel_pending_order',
      kind: 'write',
      description:
        "Cancel a pending order (processed or delivered orders cannot be cancelled). Explain the cancellation details and get explicit user confirmation (yes) first. The status becomes 'cancelled' and every payment is refunded: to a gift card immediately, otherwise in 5-7 business days. Returns the order after the cancellation.",
      params: {
        order_id: ORDER_ID,
        reason: z.string().describe("The reason: either 'no longer needed' or 'ordered by mistake'."),
      },
      run: (db: RetailDb, a) => {
        const order = getOrder(db, a.order_id);
        if (order.status !== 'pending') throw new ToolError('Non-pending order cannot be cancelled');
        if (a.reason !== 'no longer needed' && a.reason !== 'ordered by mistake') throw new ToolError('Invalid reason');
        const refunds: OrderPayment[] = [];
        for (const p of order.payment_history) {
          refunds.push({ transaction_type: 'refund', amount: p.amount, payment_method_id: p.payment_method_id });
          const pm = getPaymentMethod(db, order.user_id, p.payment_method_id);
          if (pm.source === 'gift_card') setGiftCardBalance(db, order.user_id, pm, pyRound2(pm.balance + p.amount));
        }
        const updated: Order = {
          ...order,
          status: 'cancelled',
          cancel_reason: a.reason,
          payment_history: [...order.payment_history, ...refunds],
        };
        db.putOrder(updated);
        return updated;
      },
    }),
    defineTool({
      name: 'exchange_delivered_order_items',
      kind: 'write',
      description:
        'Exchange items of a delivered order for other variants of the same products. A delivered order can be returned or exchanged only once. Explain the exchange details and get explicit user confirmation (yes) first. Returns the order after the exchange request.',
      params: {
        order_id: ORDER_ID,
        item_ids: ITEM_IDS('to be exchanged'),
        new_item_ids: ITEM_IDS('to exchange for, each of the same product as the item at the same position'),
        payment_method_id: PAYMENT_ID.describe(
          'The payment method id that pays or receives the price difference, such as gift_card_0000000 or credit_card_0000000.',
        ),
      },
      run: (db: RetailDb, a) => {
        const order = getOrder(db, a.order_id);
        if (order.status !== 'delivered') throw new ToolError('Non-delivered order cannot be exchanged');
        const all = order.items.map((i) => i.item_id);
        for (const id of a.item_ids)
          if (count(a.item_ids, id) > count(all, id)) throw new ToolError(`Number of ${id} not found.`);
        if (a.item_ids.length !== a.new_item_ids.length)
          throw new ToolError('The number of items to be exchanged should match.');
        let diff = 0;
        for (let k = 0; k < a.item_ids.length; k++) {
          const item = order.items.find((i) => i.item_id === a.item_ids[k]);
          if (!item) throw new ToolError(`Item ${a.item_ids[k]} not found`);
          const v = getVariant(db, item.product_id, a.new_item_ids[k]);
          if (!v.available) throw new ToolError(`New item ${a.new_item_ids[k]} not found or available`);
          diff += v.price - item.price;
        }
        diff = pyRound2(diff);
        const pm = getPaymentMethod(db, order.user_id, a.payment_method_id);
        if (pm.source === 'gift_card' && pm.balance < diff)
          throw new ToolError('Insufficient gift card balance to pay for the price difference');
        const updated: Order = {
          ...order,
          status: 'exchange requested',
          exchange_items: sortedStrings(a.item_ids),
          exchange_new_items: sortedStrings(a.new_item_ids),
          exchange_payment_method_id: a.payment_method_id,
          exchange_price_difference: diff,
        };
        db.putOrder(updated);
        return updated;
      },
    }),
    defineTool({
      name: 'find_user_id_by_name_zip',
      kind: 'read',
      description:
        'Find a user id by first name, last name and zip code. Prefer find_user_id_by_email; use this when the user cannot be found by email or does not remember it.',
      params: {
        first_name: z.string().describe("The first name, such as 'John'."),
        last_name: z.string().describe("The last name, such as 'Doe'."),
        zip: z.string().describe("The zip code, such as '12345'."),
      },
      run: (db: RetailDb, a) => {
        const f = foldForMatch(a.first_name);
        const l = foldForMatch(a.last_name);
        for (const [id, u] of db.users.entries()) {
          if (foldForMatch(u.name.first_name) === f && foldForMatch(u.name.last_name) === l && u.address.zip === a.zip)
            return id;
        }
        throw new ToolError('User not found');
      },
    }),
    defineTool({
      name: 'find_user_id_by_email',
      kind: 'read',
      description: 'Find a user id by email address.',
      params: { email: z.string().describe("The email, such as 'something@example.com'.") },
      run: (db: RetailDb, a) => {
        const e = foldForMatch(a.email);
        for (const [id, u] of db.users.entries()) if (foldForMatch(u.email) === e) return id;
        throw new ToolError('User not found');
      },
    }),
    defineTool({
      name: 'get_order_details',
      kind: 'read',
      description: 'Get the status and details of an order.',
      params: { order_id: ORDER_ID },
      run: (db: RetailDb, a) => getOrder(db, a.order_id),
    }),
    defineTool({
      name: 'get_product_details',
      kind: 'read',
      description:
        'Get the inventory details of a product: every variant with its options, availability and price. The product id is not an item id.',
      params: { product_id: z.string().describe("The product id, such as '6086499569' (different from an item id).") },
      run: (db: RetailDb, a) => getProduct(db, a.product_id),
    }),
    defineTool({
      name: 'get_item_details',
      kind: 'read',
      description:
        'Get the inventory details of one item (variant): options, availability and price. The item id is not a product id.',
      params: { item_id: z.string().describe("The item id, such as '6086499569' (different from a product id).") },
      run: (db: RetailDb, a) => {
        for (const p of db.products.values())
          if (Object.prototype.hasOwnProperty.call(p.variants, a.item_id)) return p.variants[a.item_id];
        throw new ToolError('Item not found');
      },
    }),
    defineTool({
      name: 'get_user_details',
      kind: 'read',
      description: 'Get the details of a user: name, address, email, payment methods and order ids.',
      params: { user_id: USER_ID },
      run: (db: RetailDb, a) => getUser(db, a.user_id),
    }),
    defineTool({
      name: 'list_all_product_types',
      kind: 'read',
      description:
        'List the name and product id of every product type, as a JSON object from name to product id sorted by name. The store has 50 product types.',
      params: {},
      run: (db: RetailDb) => {
        const map: Record<string, string> = {};
        for (const p of db.products.values()) map[p.name] = p.product_id;
        return pyJsonDumps(map, { sortKeys: true });
      },
    }),
    defineTool({
      name: 'modify_pending_order_address',
      kind: 'write',
      description:
        'Change the shipping address of a pending order. Explain the change and get explicit user confirmation (yes) first. Returns the order after the change.',
      params: { order_id: ORDER_ID, ...ADDRESS },
      run: (db: RetailDb, a) => {
        const order = getOrder(db, a.order_id);
        if (!order.status.includes('pending')) throw new ToolError('Non-pending order cannot be modified');
        const updated: Order = { ...order, address: toAddress(a) };
        db.putOrder(updated);
        return updated;
      },
    }),
    defineTool({
      name: 'modify_pending_order_items',
      kind: 'write',
      description:
        "Change items of a pending order to other variants of the same products. This can be done only once per order. Explain the changes and get explicit user confirmation (yes) first. The status becomes 'pending (item modified)'. Returns the order after the change.",
      params: {
        order_id: ORDER_ID,
        item_ids: ITEM_IDS('to be modified'),
        new_item_ids: ITEM_IDS('to modify them into, each of the same product as the item at the same position'),
        payment_method_id: PAYMENT_ID.describe(
          'The payment method id that pays or receives the price difference, such as gift_card_0000000 or credit_card_0000000.',
        ),
      },
      run: (db: RetailDb, a) => {
        const order = getOrder(db, a.order_id);
        if (order.status !== 'pending') throw new ToolError('Non-pending order cannot be modified');
        const all = order.items.map((i) => i.item_id);
        for (const id of a.item_ids) if (count(a.item_ids, id) > count(all, id)) throw new ToolError(`${id} not found`);
        if (a.item_ids.length !== a.new_item_ids.length)
          throw new ToolError('The number of items to be exchanged should match');
        let diff = 0;
        const variants: Variant[] = [];
        for (let k = 0; k < a.item_ids.length; k++) {
          if (a.item_ids[k] === a.new_item_ids[k])
            throw new ToolError('The new item id should be different from the old item id');
          const item = order.items.find((i) => i.item_id === a.item_ids[k]);
          if (!item) throw new ToolError(`Item ${a.item_ids[k]} not found`);
          const v = getVariant(db, item.product_id, a.new_item_ids[k]);
          if (!v.available) throw new ToolError(`New item ${a.new_item_ids[k]} not found or available`);
          variants.push(v);
          diff += v.price - item.price;
        }
        const pm = getPaymentMethod(db, order.user_id, a.payment_method_id);
        if (pm.source === 'gift_card' && pm.balance < diff)
          throw new ToolError('Insufficient gift card balance to pay for the new item');
        const history: OrderPayment[] = [
          ...order.payment_history,
          {
            transaction_type: diff > 0 ? 'payment' : 'refund',
            amount: Math.abs(diff),
            payment_method_id: a.payment_method_id,
          },
        ];
        if (pm.source === 'gift_card') setGiftCardBalance(db, order.user_id, pm, pyRound2(pm.balance - diff));
        const items: OrderItem[] = order.items.slice();
        const last = variants[variants.length - 1];
        for (let k = 0; k < a.item_ids.length; k++) {
          const idx = items.findIndex((i) => i.item_id === a.item_ids[k]);
          const v = quirk ? last : variants[k];
          items[idx] = { ...items[idx], item_id: a.new_item_ids[k], price: v.price, options: v.options };
        }
        const updated: Order = { ...order, items, payment_history: history, status: 'pending (item modified)' };
        db.putOrder(updated);
        return updated;
      },
    }),
    defineTool({
      name: 'modify_pending_order_payment',
      kind: 'write',
      description:
        'Change the payment method of a pending order. Explain the change and get explicit user confirmation (yes) first. Returns the order after the change.',
      params: { order_id: ORDER_ID, payment_method_id: PAYMENT_ID },
      run: (db: RetailDb, a) => {
        const order = getOrder(db, a.order_id);
        if (!order.status.includes('pending')) throw new ToolError('Non-pending order cannot be modified');
        const pm = getPaymentMethod(db, order.user_id, a.payment_method_id);
        const first = order.payment_history[0];
        if (order.payment_history.length !== 1 || first.transaction_type !== 'payment') {
          throw new ToolError('There should be exactly one payment for a pending order');
        }
        if (first.payment_method_id === a.payment_method_id)
          throw new ToolError('The new payment method should be different from the current one');
        const amount = first.amount;
        if (pm.source === 'gift_card' && pm.balance < amount)
          throw new ToolError('Insufficient gift card balance to pay for the order');
        const updated: Order = {
          ...order,
          payment_history: [
            ...order.payment_history,
            { transaction_type: 'payment', amount, payment_method_id: a.payment_method_id },
            { transaction_type: 'refund', amount, payment_method_id: first.payment_method_id },
          ],
        };
        if (pm.source === 'gift_card') setGiftCardBalance(db, order.user_id, pm, pyRound2(pm.balance - amount));
        const old = getPaymentMethod(db, order.user_id, first.payment_method_id);
        if (old.source === 'gift_card') setGiftCardBalance(db, order.user_id, old, pyRound2(old.balance + amount));
        db.putOrder(updated);
        return updated;
      },
    }),
    defineTool({
      name: 'modify_user_address',
      kind: 'write',
      description:
        "Change a user's default address. Explain the change and get explicit user confirmation (yes) first. Returns the user after the change.",
      params: { user_id: USER_ID, ...ADDRESS },
      run: (db: RetailDb, a) => {
        const user = getUser(db, a.user_id);
        const updated: User = { ...user, address: toAddress(a) };
        db.putUser(updated);
        return updated;
      },
    }),
    defineTool({
      name: 'return_delivered_order_items',
      kind: 'write',
      description:
        "Request the return of some items of a delivered order. The status becomes 'return requested' and the user gets an email on how to return the items. Explain the return details and get explicit user confirmation (yes) first. Returns the order after the request.",
      params: {
        order_id: ORDER_ID,
        item_ids: ITEM_IDS('to be returned'),
        payment_method_id: PAYMENT_ID.describe(
          'The payment method id that receives the refund: the original payment method or a gift card of the user.',
        ),
      },
      run: (db: RetailDb, a) => {
        const order = getOrder(db, a.order_id);
        if (order.status !== 'delivered') throw new ToolError('Non-delivered order cannot be returned');
        const user = getUser(db, order.user_id);
        const pm = getPaymentMethod(db, user.user_id, a.payment_method_id);
        if (pm.source !== 'gift_card' && a.payment_method_id !== order.payment_history[0]?.payment_method_id) {
          throw new ToolError('Payment method should be the original payment method');
        }
        const all = order.items.map((i) => i.item_id);
        for (const id of a.item_ids)
          if (count(a.item_ids, id) > count(all, id)) throw new ToolError('Some item not found');
        const updated: Order = {
          ...order,
          status: 'return requested',
          return_items: sortedStrings(a.item_ids),
          return_payment_method_id: a.payment_method_id,
        };
        db.putOrder(updated);
        return updated;
      },
    }),
    defineTool({
      name: 'transfer_to_human_agents',
      kind: 'generic',
      description:
        'Transfer the user to a human agent with a summary of the issue. Only transfer when the user explicitly asks for a human agent, or when the request cannot be handled with the policy and the available tools.',
      params: { summary: z.string().describe("A summary of the user's issue.") },
      run: () => 'Transfer successful',
    }),
  ];
}

/** The retail agent toolkit. */
export function retailToolkit(options: RetailToolOptions = {}): Toolkit<RetailDb> {
  return new Toolkit(retailTools(options));
}
