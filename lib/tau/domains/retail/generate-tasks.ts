/**
 * Seeded generation of retail tasks over a database: every kind (cancel, modify address /
 * payment / items, return, exchange, default address, lookups, requests the policy must refuse,
 * transfers), some with a change of mind or a second request, each with gold actions, tau2's
 * structured user instructions, a machine-readable scenario and a reward basis. Gold write
 * actions are checked to run without error on the database.
 * @module
 */
import { pyFloatRepr } from '../../pyjson.js';
import { Rng } from '../../rng.js';
import type { RewardType, StructuredUserInstructions, TaskAction, TauTask } from '../../task.js';
import { createRetailDomain } from './domain.js';
import { randomAddress } from './generate-db.js';
import type { RetailRequest, RetailScenario, RetailTaskKind, ScenarioItem } from './scenario.js';
import { describeAddress, describeItem, describeOptions, describePayment } from './scenario.js';
import type { Order, RetailDb, User, Variant } from './schema.js';
import { optionKeys, refuseUnknownOptions } from '../../../util/options.js';

/** A generated retail task. */
export type RetailTask = TauTask<RetailScenario>;

const GENERATE_TASKS_KEYS = optionKeys<GenerateTasksOptions>({
  seed: true,
  count: true,
  weights: true,
  changeOfMind: true,
  secondRequest: true,
  idPrefix: true,
});

/** Options of {@link generateRetailTasks}. */
export interface GenerateTasksOptions {
  /** Seed. Default 0. */
  seed?: number;
  /** Number of tasks. Default 100. */
  count?: number;
  /** Relative weight of each kind (default: every kind, writes more often). */
  weights?: Partial<Record<RetailTaskKind, number>>;
  /** Probability of a change of mind (cancel→address, return→exchange). Default 0.15. */
  changeOfMind?: number;
  /** Probability of a second request. Default 0.15. */
  secondRequest?: number;
  /** Id prefix. Default `gen`. */
  idPrefix?: string;
}

const DEFAULT_WEIGHTS: Record<RetailTaskKind, number> = {
  cancel: 12,
  modify_address: 9,
  modify_payment: 7,
  modify_items: 12,
  return: 12,
  exchange: 12,
  user_address: 6,
  lookup_tracking: 6,
  lookup_price: 5,
  refuse: 10,
  transfer: 6,
};

const TRANSFER_TOPICS = [
  'file a complaint about a package that arrived damaged and ask for compensation',
  'change the email address of the account',
  'get a price adjustment because an item you bought went on sale',
  'ask for an order to be split into two shipments',
  'report a fraudulent charge on the account',
];

interface Ctx {
  rng: Rng;
  db: RetailDb;
  user: User;
}

function availableAlternatives(db: RetailDb, productId: string, itemId: string): Variant[] {
  const p = db.products.get(productId);
  return p ? Object.values(p.variants).filter((v) => v.available && v.item_id !== itemId) : [];
}

function ordersOf(ctx: Ctx, pred: (o: Order) => boolean): Order[] {
  return ctx.user.orders.map((id) => ctx.db.orders.get(id) as Order).filter((o) => o && pred(o));
}

function pickItems(ctx: Ctx, order: Order, max: number, needAlternative: boolean): ScenarioItem[] {
  const seen = new Set<string>();
  const candidates = order.items.filter((it) => {
    if (seen.has(it.item_id)) return false;
    seen.add(it.item_id);
    return !needAlternative || availableAlternatives(ctx.db, it.product_id, it.item_id).length > 0;
  });
  const chosen = ctx.rng.sample(candidates, Math.min(candidates.length, ctx.rng.int(1, max)));
  return chosen.map((it) => {
    const item: ScenarioItem = {
      item_id: it.item_id,
      product_id: it.product_id,
      name: it.name,
      options: { ...it.options },
    };
    if (needAlternative) {
      const v = ctx.rng.pick(availableAlternatives(ctx.db, it.product_id, it.item_id));
      item.new_item_id = v.item_id;
      item.new_options = { ...v.options };
    }
    return item;
  });
}

function paymentFor(ctx: Ctx, diff: number, exclude?: string): string | null {
  const pms = Object.values(ctx.user.payment_methods).filter(
    (pm) => pm.id !== exclude && (pm.source !== 'gift_card' || pm.balance >= diff),
  );
  const giftCards = Object.values(ctx.user.payment_methods).filter((pm) => pm.source === 'gift_card');
  const usable = pms.filter((pm) => pm.source !== 'gift_card' || giftCards.length === 1);
  return usable.length > 0 ? ctx.rng.pick(usable).id : null;
}

function withPayment(ctx: Ctx, req: RetailRequest, pmId: string): RetailRequest {
  return { ...req, payment_method_id: pmId, paymentDescription: describePayment(ctx.user.payment_methods[pmId]) };
}

/** Builds one request of `kind` for the context's user, or null when the user has no suitable order. */
function makeRequest(ctx: Ctx, kind: RetailTaskKind, usedOrders: Set<string>): RetailRequest | null {
  const { rng } = ctx;
  const free = (o: Order) => !usedOrders.has(o.order_id);
  const knows = rng.chance(0.85);
  const pick = (pred: (o: Order) => boolean) => {
    const list = ordersOf(ctx, (o) => free(o) && pred(o));
    return list.length > 0 ? rng.pick(list) : null;
  };
  switch (kind) {
    case 'cancel': {
      const o = pick((x) => x.status === 'pending');
      return (
        o && {
          type: kind,
          order_id: o.order_id,
          knowsOrderId: knows,
          reason: rng.pick(['no longer needed', 'ordered by mistake'] as const),
        }
      );
    }
    case 'modify_address': {
      const o = pick((x) => x.status === 'pending');
      return o && { type: kind, order_id: o.order_id, knowsOrderId: knows, address: randomAddress(rng) };
    }
    case 'modify_payment': {
      const o = pick((x) => x.status === 'pending' && x.payment_history.length === 1);
      if (!o) return null;
      const pm = paymentFor(ctx, o.payment_history[0].amount, o.payment_history[0].payment_method_id);
      return pm === null ? null : withPayment(ctx, { type: kind, order_id: o.order_id, knowsOrderId: knows }, pm);
    }
    case 'modify_items':
    case 'exchange': {
      const o = pick(
        (x) =>
          x.status === (kind === 'exchange' ? 'delivered' : 'pending') &&
          x.items.some((it) => availableAlternatives(ctx.db, it.product_id, it.item_id).length > 0),
      );
      if (!o) return null;
      const items = pickItems(ctx, o, 2, true);
      const diff = items.reduce(
        (s, it) =>
          s +
          ((ctx.db.products.get(it.product_id)?.variants[it.new_item_id as string].price ?? 0) -
            (o.items.find((x) => x.item_id === it.item_id)?.price ?? 0)),
        0,
      );
      const pm = paymentFor(ctx, Math.max(diff, 0) + 0.01);
      return pm === null
        ? null
        : withPayment(ctx, { type: kind, order_id: o.order_id, knowsOrderId: knows, items }, pm);
    }
    case 'return': {
      const o = pick((x) => x.status === 'delivered');
      if (!o) return null;
      const original = o.payment_history[0].payment_method_id;
      const gift = Object.values(ctx.user.payment_methods).filter((pm) => pm.source === 'gift_card');
      const pm = gift.length === 1 && rng.chance(0.3) ? gift[0].id : original;
      if (ctx.user.payment_methods[pm]?.source === 'gift_card' && gift.length !== 1) return null;
      return withPayment(
        ctx,
        { type: kind, order_id: o.order_id, knowsOrderId: knows, items: pickItems(ctx, o, 3, false) },
        pm,
      );
    }
    case 'user_address':
      return { type: kind, address: randomAddress(rng) };
    case 'lookup_tracking': {
      const o = pick((x) => x.fulfillments.length > 0);
      return o && { type: kind, order_id: o.order_id, knowsOrderId: true, answer: o.fulfillments[0].tracking_id[0] };
    }
    case 'lookup_price': {
      const p = rng.pick([...ctx.db.products.values()]);
      const v = rng.pick(Object.values(p.variants));
      return {
        type: kind,
        product_id: p.product_id,
        items: [{ item_id: v.item_id, product_id: p.product_id, name: p.name, options: { ...v.options } }],
        answer: pyFloatRepr(v.price),
      };
    }
    case 'refuse': {
      const wanted = rng.pick(['cancel', 'return', 'modify_address'] as const);
      const bad = wanted === 'return' ? ['pending', 'processed'] : ['processed', 'delivered'];
      const o = pick((x) => bad.includes(x.status));
      return (
        o && {
          type: kind,
          wanted,
          order_id: o.order_id,
          knowsOrderId: true,
          status: o.status,
          ...(wanted === 'cancel' ? { reason: 'no longer needed' as const } : {}),
          ...(wanted === 'return' ? { items: pickItems(ctx, o, 1, false) } : {}),
          ...(wanted === 'modify_address' ? { address: randomAddress(rng) } : {}),
        }
      );
    }
    case 'transfer':
      return { type: kind, topic: rng.pick(TRANSFER_TOPICS) };
  }
}

/** Read tools whose repeated gold calls (same arguments) are listed once. */
const READ_ONCE = new Set(['get_user_details', 'get_order_details', 'get_product_details', 'list_all_product_types']);

/** A gold action compared on every one of its arguments (tau2's `compare_args` set explicitly). */
function exact(name: string, args: Record<string, unknown>): Omit<TaskAction, 'action_id'> {
  return { name, arguments: args, compare_args: Object.keys(args) };
}

/**
 * The gold actions of the requests, in the order the expert agent performs them: the calls
 * that a conversation must contain for its reward to show the skill (tau2's `ACTION` basis:
 * every one matched by some call, all-or-nothing). Each is compared on all of its arguments
 * (`compare_args` lists them, so that a call with an argument left out does not match), except
 * the transfer, whose free-text summary is not compared (`compare_args: []`, as tau2's own
 * transfer tasks). The authentication look-up comes first; then, per request, the look-ups
 * that establish the facts (the order, the products, the user's payment methods) and the
 * write, if any. When the customer does not know the order id, the user's details (their
 * orders) and the right order are required, not the other orders the agent may check.
 */
export function goldActions(db: RetailDb, scenario: RetailScenario): Omit<TaskAction, 'action_id'>[] {
  const u = scenario.user;
  const acts: Omit<TaskAction, 'action_id'>[] = [];
  const seen = new Set<string>();
  const push = (a: Omit<TaskAction, 'action_id'>) => {
    const key = JSON.stringify([a.name, a.arguments]);
    if (READ_ONCE.has(a.name) && seen.has(key)) return;
    seen.add(key);
    acts.push(a);
  };
  push(
    u.auth === 'email'
      ? exact('find_user_id_by_email', { email: u.email })
      : exact('find_user_id_by_name_zip', { first_name: u.first_name, last_name: u.last_name, zip: u.zip }),
  );
  const userDetails = () => push(exact('get_user_details', { user_id: u.user_id }));
  for (const r of scenario.requests) {
    if (r.order_id) {
      if (r.knowsOrderId === false) userDetails();
      push(exact('get_order_details', { order_id: r.order_id }));
    }
    const addr = r.address;
    switch (r.type) {
      case 'cancel':
        push(exact('cancel_pending_order', { order_id: r.order_id, reason: r.reason }));
        break;
      case 'modify_address':
        push(exact('modify_pending_order_address', { order_id: r.order_id, ...addr }));
        break;
      case 'modify_payment':
        userDetails();
        push(exact('modify_pending_order_payment', { order_id: r.order_id, payment_method_id: r.payment_method_id }));
        break;
      case 'modify_items':
      case 'exchange':
        for (const pid of new Set((r.items ?? []).map((i) => i.product_id)))
          push(exact('get_product_details', { product_id: pid }));
        userDetails();
        push(
          exact(r.type === 'exchange' ? 'exchange_delivered_order_items' : 'modify_pending_order_items', {
            order_id: r.order_id,
            item_ids: (r.items ?? []).map((i) => i.item_id),
            new_item_ids: (r.items ?? []).map((i) => i.new_item_id),
            payment_method_id: r.payment_method_id,
          }),
        );
        break;
      case 'return':
        userDetails();
        push(
          exact('return_delivered_order_items', {
            order_id: r.order_id,
            item_ids: (r.items ?? []).map((i) => i.item_id),
            payment_method_id: r.payment_method_id,
          }),
        );
        break;
      case 'user_address':
        push(exact('modify_user_address', { user_id: u.user_id, ...addr }));
        break;
      case 'lookup_price':
        push({ name: 'list_all_product_types', arguments: {}, compare_args: [] });
        push(exact('get_product_details', { product_id: r.product_id }));
        break;
      case 'transfer':
        push({
          name: 'transfer_to_human_agents',
          arguments: { summary: `The user wants to ${r.topic}.` },
          compare_args: [],
        });
        break;
      default:
        break; // order look-ups and refusals only read (the order's details, above)
    }
  }
  return acts;
}

/**
 * What a conversation must communicate (tau2's `communicate_info`): the facts the customer
 * asked for (the tracking number, the price) and, for a refusal, the order status that forbids
 * the request. Empty for writes and transfers, whose outcome is in the database or the calls.
 */
export function communicateInfo(scenario: RetailScenario): string[] {
  return scenario.requests.flatMap((r) =>
    r.type === 'lookup_tracking' || r.type === 'lookup_price'
      ? [r.answer as string]
      : r.type === 'refuse'
        ? [r.status as string]
        : [],
  );
}

/**
 * The reward basis of a generated task: `DB` (the right writes and no other, as tau2's
 * database hash), `ACTION` (every gold call made, all-or-nothing) and, when the task has facts
 * to tell, `COMMUNICATE`. Under it a reward of 1 needs the authentication and the look-ups
 * that establish the facts, for every kind: text alone passes none.
 */
export function rewardBasisFor(communicate: readonly string[]): RewardType[] {
  return communicate.length > 0 ? ['DB', 'ACTION', 'COMMUNICATE'] : ['DB', 'ACTION'];
}

/** The description of an order by one of its items, for a customer who does not know its id. */
function withOrderHint(db: RetailDb, user: User, r: RetailRequest): RetailRequest {
  const initial = r.initial ? withOrderHint(db, user, r.initial) : undefined;
  let out: RetailRequest = initial ? { ...r, initial } : r;
  if (r.order_id && r.knowsOrderId === false && initial?.orderHint && initial.order_id === r.order_id) {
    out = { ...out, orderHint: initial.orderHint };
  } else if (r.order_id && r.knowsOrderId === false) {
    const order = db.orders.get(r.order_id) as Order;
    // an item no other order of the user has, so that the description singles the order out
    const others = new Set(
      user.orders
        .filter((id) => id !== r.order_id)
        .flatMap((id) => (db.orders.get(id)?.items ?? []).map((i) => i.item_id)),
    );
    const pool = (r.items ?? []).length > 0 ? (r.items as ScenarioItem[]) : order.items;
    const it = pool.find((i) => !others.has(i.item_id)) ?? pool[0];
    out = { ...out, orderHint: { name: it.name, options: { ...it.options } } };
  }
  return out;
}

function requestText(r: RetailRequest): string {
  const order = r.order_id
    ? r.knowsOrderId === false && r.orderHint
      ? `your order with ${describeItem(r.orderHint)}`
      : `order ${r.order_id}`
    : 'an order';
  const items = (r.items ?? []).map(describeItem).join(' and ');
  switch (r.type) {
    case 'cancel':
      return `You want to cancel ${order} because it is ${r.reason === 'ordered by mistake' ? 'ordered by mistake' : 'no longer needed'}.`;
    case 'modify_address':
      return `You want the shipping address of ${order} changed to ${describeAddress(r.address as never)}.`;
    case 'modify_payment':
      return `You want to pay for ${order} with ${r.paymentDescription} instead.`;
    case 'modify_items':
    case 'exchange':
      return `You want to ${r.type === 'exchange' ? 'exchange' : 'change'} ${(r.items ?? []).map((i) => `${describeItem(i)} for one with ${describeOptions(i.new_options ?? {})}`).join(', and ')} in ${order}, paying or getting the difference with ${r.paymentDescription}.`;
    case 'return':
      return `You want to return ${items} from ${order}, with the refund to ${r.paymentDescription}.`;
    case 'user_address':
      return `You moved and want your default address changed to ${describeAddress(r.address as never)}.`;
    case 'lookup_tracking':
      return `You want to know the tracking number of ${order}.`;
    case 'lookup_price':
      return `You want to know the price of ${describeItem((r.items ?? [])[0])}.`;
    case 'refuse':
      return r.wanted === 'cancel'
        ? `You want to cancel ${order}.`
        : r.wanted === 'return'
          ? `You want to return ${items} from ${order}.`
          : `You want the shipping address of ${order} changed to ${describeAddress(r.address as never)}.`;
    case 'transfer':
      return `You want to ${r.topic}.`;
  }
}

function instructions(s: RetailScenario): StructuredUserInstructions {
  const u = s.user;
  const reasons = s.requests.map((r) =>
    r.initial
      ? `${requestText(r.initial)} But when the agent asks you to confirm, you change your mind: ${requestText(r)}`
      : requestText(r),
  );
  const unknown: string[] = [];
  if (u.auth === 'name_zip') unknown.push('You do not remember your email address.');
  if (s.requests.some((r) => r.knowsOrderId === false || r.initial?.knowsOrderId === false))
    unknown.push('You do not remember the order id; you can describe the order by its items.');
  return {
    domain: 'retail',
    reason_for_call: reasons.join(' '),
    known_info:
      u.auth === 'email'
        ? `You are ${u.first_name} ${u.last_name}. Your email is ${u.email}.`
        : `You are ${u.first_name} ${u.last_name}, zip code ${u.zip}.`,
    unknown_info: unknown.length > 0 ? unknown.join(' ') : null,
    task_instructions:
      'Handle your requests one at a time. Confirm an action only when the agent lists the right details. If the agent says a request is not possible, accept it.',
  };
}

/** Generates `count` tasks over `db` (same seed and database, same tasks). */
export function generateRetailTasks(db: RetailDb, options: GenerateTasksOptions = {}): RetailTask[] {
  refuseUnknownOptions(options, GENERATE_TASKS_KEYS, 'generateRetailTasks');
  const rng = new Rng(options.seed ?? 0);
  const count = options.count ?? 100;
  if (!Number.isInteger(count) || count < 0)
    throw new RangeError('generateRetailTasks: count must be a non-negative integer');
  const weights = { ...DEFAULT_WEIGHTS, ...options.weights };
  const kinds = Object.keys(weights) as RetailTaskKind[];
  const domain = createRetailDomain({ db });
  const users = [...db.users.values()].filter((u) => u.orders.length > 0);
  const tasks: RetailTask[] = [];
  let attempts = 0;
  while (tasks.length < count) {
    if (++attempts > count * 200 + 1000)
      throw new Error('generateRetailTasks: could not find enough suitable users/orders in this database');
    const kind = kinds[rng.weighted(kinds.map((k) => weights[k]))];
    const user = rng.pick(users);
    const ctx: Ctx = { rng, db, user };
    const used = new Set<string>();
    let req = makeRequest(ctx, kind, used);
    if (!req) continue;
    if ((kind === 'cancel' || kind === 'return') && rng.chance(options.changeOfMind ?? 0.15)) {
      const order = db.orders.get(req.order_id as string) as Order;
      const alt =
        kind === 'cancel'
          ? {
              type: 'modify_address' as const,
              order_id: order.order_id,
              knowsOrderId: req.knowsOrderId,
              address: randomAddress(rng),
            }
          : makeRequest(ctx, 'exchange', new Set(user.orders.filter((id) => id !== order.order_id)));
      if (alt) req = { ...alt, knowsOrderId: req.knowsOrderId, initial: req };
    }
    if (req.order_id) used.add(req.order_id);
    const requests = [req];
    if (kind !== 'transfer' && rng.chance(options.secondRequest ?? 0.15)) {
      const second = makeRequest(
        ctx,
        rng.pick(['cancel', 'return', 'modify_address', 'lookup_tracking', 'user_address'] as const),
        used,
      );
      if (second) requests.push(second);
    }
    for (let i = 0; i < requests.length; i++) requests[i] = withOrderHint(db, user, requests[i]);
    const scenario: RetailScenario = {
      kind,
      user: {
        user_id: user.user_id,
        first_name: user.name.first_name,
        last_name: user.name.last_name,
        zip: user.address.zip,
        email: user.email,
        auth: rng.chance(0.6) ? 'email' : 'name_zip',
      },
      requests,
    };
    const gold = goldActions(db, scenario);
    const state = domain.initialState();
    const ok = gold.every(
      (a) => !domain.tools.call(state, { id: 'g', name: a.name, arguments: a.arguments, requestor: 'assistant' }).error,
    );
    if (!ok) continue;
    const id = `${options.idPrefix ?? 'gen'}_${tasks.length}`;
    const communicate = communicateInfo(scenario);
    const basis = rewardBasisFor(communicate);
    tasks.push({
      id,
      description: {
        purpose: `generated ${requests.map((r) => (r.initial ? `${r.initial.type}->${r.type}` : r.type)).join('+')}`,
        relevant_policies: null,
        notes: null,
      },
      user_scenario: { persona: null, instructions: instructions(scenario) },
      initial_state: null,
      evaluation_criteria: {
        actions: gold.map((a, i) => ({ action_id: `${id}_${i}`, ...a })),
        communicate_info: communicate,
        nl_assertions: null,
        reward_basis: basis,
      },
      sinkflex_scenario: scenario,
    });
  }
  return tasks;
}
