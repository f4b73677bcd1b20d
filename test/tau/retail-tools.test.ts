import t from 'tap';

import type { Order, RetailDb } from '../../lib/tau/index.js';
import { createRetailDomain, generateRetailDb } from '../../lib/tau/index.js';

const db = generateRetailDb({ seed: 11, users: 150, orders: 400 });
const domain = createRetailDomain({ db });
let n = 0;
function call(state: RetailDb, name: string, args: Record<string, unknown>) {
  const m = domain.tools.call(state, { id: `t${n++}`, name, arguments: args, requestor: 'assistant' });
  return {
    ...m,
    json: m.error
      ? null
      : (() => {
          try {
            return JSON.parse(m.content);
          } catch {
            return m.content;
          }
        })(),
  };
}
const orders = [...db.orders.values()];
const find = (pred: (o: Order) => boolean) => orders.find(pred) as Order;
const pending = find(
  (o) =>
    o.status === 'pending' &&
    o.items.some((i) =>
      Object.values(db.products.get(i.product_id)!.variants).some((v) => v.available && v.item_id !== i.item_id),
    ),
);
const delivered = find(
  (o) =>
    o.status === 'delivered' &&
    o.items.some((i) =>
      Object.values(db.products.get(i.product_id)!.variants).some((v) => v.available && v.item_id !== i.item_id),
    ),
);
const processed = find((o) => o.status === 'processed');
const altOf = (item: { product_id: string; item_id: string }, available = true) =>
  Object.values(db.products.get(item.product_id)!.variants).find(
    (v) => v.available === available && v.item_id !== item.item_id,
  );

t.test('read tools and their errors', async (t) => {
  const s = domain.initialState();
  const u = db.users.get(pending.user_id)!;
  t.equal(call(s, 'find_user_id_by_email', { email: u.email.toUpperCase() }).content, u.user_id);
  t.equal(call(s, 'find_user_id_by_email', { email: 'x@y.z' }).content, 'Error: User not found');
  t.equal(
    call(s, 'find_user_id_by_name_zip', {
      first_name: u.name.first_name.toLowerCase(),
      last_name: u.name.last_name,
      zip: u.address.zip,
    }).content,
    u.user_id,
  );
  t.equal(
    call(s, 'find_user_id_by_name_zip', { first_name: u.name.first_name, last_name: u.name.last_name, zip: '00000' })
      .content,
    'Error: User not found',
  );
  t.equal(call(s, 'get_user_details', { user_id: u.user_id }).json.email, u.email);
  t.equal(call(s, 'get_user_details', { user_id: 'nobody' }).content, 'Error: User not found');
  t.equal(call(s, 'get_order_details', { order_id: pending.order_id }).json.cancel_reason, null);
  t.equal(call(s, 'get_order_details', { order_id: pending.order_id.slice(1) }).content, 'Error: Order not found');
  const p = [...db.products.values()][0];
  t.equal(
    Object.keys(call(s, 'get_product_details', { product_id: p.product_id }).json.variants).length,
    Object.keys(p.variants).length,
  );
  t.equal(call(s, 'get_product_details', { product_id: '1' }).content, 'Error: Product not found');
  const v = Object.values(p.variants)[0];
  t.same(call(s, 'get_item_details', { item_id: v.item_id }).json, v);
  t.equal(call(s, 'get_item_details', { item_id: p.product_id }).content, 'Error: Item not found');
  const list = JSON.parse(call(s, 'list_all_product_types', {}).content);
  t.equal(Object.keys(list).length, 50);
  t.same(Object.keys(list), Object.keys(list).sort());
  t.equal(call(s, 'transfer_to_human_agents', { summary: 'x' }).content, 'Transfer successful');
  t.equal(call(s, 'calculate', { expression: '1 + 1' }).content, '2.0');
  t.ok(s.equals(domain.initialState()), 'reads change nothing');
});

t.test('cancel_pending_order', async (t) => {
  const s = domain.initialState();
  t.equal(
    call(s, 'cancel_pending_order', { order_id: processed.order_id, reason: 'no longer needed' }).content,
    'Error: Non-pending order cannot be cancelled',
  );
  t.equal(
    call(s, 'cancel_pending_order', { order_id: pending.order_id, reason: 'too expensive' }).content,
    'Error: Invalid reason',
  );
  t.equal(
    call(s, 'cancel_pending_order', { order_id: '#W0', reason: 'no longer needed' }).content,
    'Error: Order not found',
  );
  t.ok(s.equals(domain.initialState()), 'failed calls change nothing');
  const gcOrder = find(
    (o) =>
      o.status === 'pending' &&
      db.users.get(o.user_id)!.payment_methods[o.payment_history[0].payment_method_id].source === 'gift_card',
  );
  const pmId = gcOrder.payment_history[0].payment_method_id;
  const before = (db.users.get(gcOrder.user_id)!.payment_methods[pmId] as { balance: number }).balance;
  const r = call(s, 'cancel_pending_order', { order_id: gcOrder.order_id, reason: 'ordered by mistake' });
  t.equal(r.json.status, 'cancelled');
  t.equal(r.json.cancel_reason, 'ordered by mistake');
  t.same(r.json.payment_history[1], {
    transaction_type: 'refund',
    amount: gcOrder.payment_history[0].amount,
    payment_method_id: pmId,
  });
  t.equal(
    (s.users.get(gcOrder.user_id)!.payment_methods[pmId] as { balance: number }).balance,
    Math.round((before + gcOrder.payment_history[0].amount) * 100) / 100,
    'gift card refunded at once',
  );
  t.equal(
    (db.users.get(gcOrder.user_id)!.payment_methods[pmId] as { balance: number }).balance,
    before,
    'the shared base is untouched',
  );
});

t.test('modify_pending_order_address / payment / items', async (t) => {
  const s = domain.initialState();
  const addr = { address1: '1 A St', address2: '', city: 'C', state: 'S', country: 'USA', zip: '11111' };
  t.equal(
    call(s, 'modify_pending_order_address', { order_id: delivered.order_id, ...addr }).content,
    'Error: Non-pending order cannot be modified',
  );
  t.same(call(s, 'modify_pending_order_address', { order_id: pending.order_id, ...addr }).json.address, {
    ...addr,
    country: 'USA',
  });

  const u = db.users.get(pending.user_id)!;
  const orig = pending.payment_history[0].payment_method_id;
  t.equal(
    call(s, 'modify_pending_order_payment', { order_id: pending.order_id, payment_method_id: orig }).content,
    'Error: The new payment method should be different from the current one',
  );
  t.equal(
    call(s, 'modify_pending_order_payment', { order_id: pending.order_id, payment_method_id: 'paypal_0' }).content,
    'Error: Payment method not found',
  );
  t.equal(
    call(s, 'modify_pending_order_payment', { order_id: processed.order_id, payment_method_id: orig }).content,
    'Error: Non-pending order cannot be modified',
  );
  const other = Object.values(u.payment_methods).find((pm) => pm.id !== orig && pm.source !== 'gift_card');
  if (other) {
    const r = call(s, 'modify_pending_order_payment', { order_id: pending.order_id, payment_method_id: other.id });
    t.same(
      r.json.payment_history.map((p: { transaction_type: string }) => p.transaction_type),
      ['payment', 'payment', 'refund'],
    );
    t.equal(
      call(s, 'modify_pending_order_payment', { order_id: pending.order_id, payment_method_id: orig }).content,
      'Error: There should be exactly one payment for a pending order',
    );
  }

  const s2 = domain.initialState();
  const item = pending.items.find((i) => altOf(i))!;
  const alt = altOf(item)!;
  const pm = orig;
  t.equal(
    call(s2, 'modify_pending_order_items', {
      order_id: pending.order_id,
      item_ids: [item.item_id],
      new_item_ids: [item.item_id],
      payment_method_id: pm,
    }).content,
    'Error: The new item id should be different from the old item id',
  );
  t.equal(
    call(s2, 'modify_pending_order_items', {
      order_id: pending.order_id,
      item_ids: [item.item_id],
      new_item_ids: [],
      payment_method_id: pm,
    }).content,
    'Error: The number of items to be exchanged should match',
  );
  t.equal(
    call(s2, 'modify_pending_order_items', {
      order_id: pending.order_id,
      item_ids: ['123'],
      new_item_ids: [alt.item_id],
      payment_method_id: pm,
    }).content,
    'Error: 123 not found',
  );
  t.equal(
    call(s2, 'modify_pending_order_items', {
      order_id: pending.order_id,
      item_ids: [item.item_id],
      new_item_ids: ['999'],
      payment_method_id: pm,
    }).content,
    'Error: Variant not found',
  );
  const unavailable = altOf(item, false);
  if (unavailable)
    t.equal(
      call(s2, 'modify_pending_order_items', {
        order_id: pending.order_id,
        item_ids: [item.item_id],
        new_item_ids: [unavailable.item_id],
        payment_method_id: pm,
      }).content,
      `Error: New item ${unavailable.item_id} not found or available`,
    );
  t.ok(s2.equals(domain.initialState()));
  const r = call(s2, 'modify_pending_order_items', {
    order_id: pending.order_id,
    item_ids: [item.item_id],
    new_item_ids: [alt.item_id],
    payment_method_id: pm,
  });
  if (db.users.get(pending.user_id)!.payment_methods[pm].source === 'gift_card' && r.error) {
    t.match(r.content, /Insufficient gift card balance/);
  } else {
    t.equal(r.json.status, 'pending (item modified)');
    const changed = r.json.items.find((i: { item_id: string }) => i.item_id === alt.item_id);
    t.equal(changed.price, alt.price);
    t.same(changed.options, alt.options);
    const last = r.json.payment_history[r.json.payment_history.length - 1];
    t.equal(last.transaction_type, alt.price - item.price > 0 ? 'payment' : 'refund');
    t.equal(last.amount, Math.abs(alt.price - item.price));
    t.equal(
      call(s2, 'modify_pending_order_items', {
        order_id: pending.order_id,
        item_ids: [alt.item_id],
        new_item_ids: [item.item_id],
        payment_method_id: pm,
      }).content,
      'Error: Non-pending order cannot be modified',
      'only once',
    );
    t.equal(
      call(s2, 'cancel_pending_order', { order_id: pending.order_id, reason: 'no longer needed' }).content,
      'Error: Non-pending order cannot be cancelled',
    );
    t.notOk(
      call(s2, 'modify_pending_order_address', { order_id: pending.order_id, ...addr }).error,
      "'pending (item modified)' still takes an address change",
    );
  }
});

t.test('return and exchange of delivered orders; user address', async (t) => {
  const s = domain.initialState();
  const orig = delivered.payment_history[0].payment_method_id;
  const u = db.users.get(delivered.user_id)!;
  const item = delivered.items.find((i) => altOf(i))!;
  t.equal(
    call(s, 'return_delivered_order_items', { order_id: pending.order_id, item_ids: [], payment_method_id: 'x' })
      .content,
    'Error: Non-delivered order cannot be returned',
  );
  const notOrig = Object.values(u.payment_methods).find((pm) => pm.id !== orig && pm.source !== 'gift_card');
  if (notOrig)
    t.equal(
      call(s, 'return_delivered_order_items', {
        order_id: delivered.order_id,
        item_ids: [item.item_id],
        payment_method_id: notOrig.id,
      }).content,
      'Error: Payment method should be the original payment method',
    );
  t.equal(
    call(s, 'return_delivered_order_items', {
      order_id: delivered.order_id,
      item_ids: [item.item_id, item.item_id, item.item_id, item.item_id, item.item_id, item.item_id],
      payment_method_id: orig,
    }).content,
    'Error: Some item not found',
  );
  const ids = delivered.items.map((i) => i.item_id).reverse();
  const r = call(s, 'return_delivered_order_items', {
    order_id: delivered.order_id,
    item_ids: ids,
    payment_method_id: orig,
  });
  t.equal(r.json.status, 'return requested');
  t.same(r.json.return_items, [...ids].sort());
  t.equal(r.json.return_payment_method_id, orig);

  const s2 = domain.initialState();
  const alt = altOf(item)!;
  t.equal(
    call(s2, 'exchange_delivered_order_items', {
      order_id: pending.order_id,
      item_ids: [],
      new_item_ids: [],
      payment_method_id: orig,
    }).content,
    'Error: Non-delivered order cannot be exchanged',
  );
  t.equal(
    call(s2, 'exchange_delivered_order_items', {
      order_id: delivered.order_id,
      item_ids: ['1'],
      new_item_ids: [alt.item_id],
      payment_method_id: orig,
    }).content,
    'Error: Number of 1 not found.',
  );
  t.equal(
    call(s2, 'exchange_delivered_order_items', {
      order_id: delivered.order_id,
      item_ids: [item.item_id],
      new_item_ids: [],
      payment_method_id: orig,
    }).content,
    'Error: The number of items to be exchanged should match.',
  );
  t.equal(
    call(s2, 'exchange_delivered_order_items', {
      order_id: delivered.order_id,
      item_ids: [item.item_id],
      new_item_ids: [alt.item_id],
      payment_method_id: 'nope',
    }).content,
    'Error: Payment method not found',
  );
  const e = call(s2, 'exchange_delivered_order_items', {
    order_id: delivered.order_id,
    item_ids: [item.item_id],
    new_item_ids: [alt.item_id],
    payment_method_id: orig,
  });
  if (!e.error) {
    t.equal(e.json.status, 'exchange requested');
    t.equal(e.json.exchange_price_difference, Math.round((alt.price - item.price) * 100) / 100);
    t.same(e.json.exchange_new_items, [alt.item_id]);
  } else t.match(e.content, /Insufficient gift card balance/);

  const s3 = domain.initialState();
  const addr = { address1: '9 B Rd', address2: 'Apt 2', city: 'D', state: 'TX', country: 'USA', zip: '22222' };
  t.equal(call(s3, 'modify_user_address', { user_id: 'nobody', ...addr }).content, 'Error: User not found');
  t.same(call(s3, 'modify_user_address', { user_id: u.user_id, ...addr }).json.address, addr);
  t.notOk(s3.equals(domain.initialState()));
  t.not(s3.hash(), domain.initialState().hash());
});
