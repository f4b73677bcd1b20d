/**
 * The machine-readable scenario of a generated retail task (`task.sinkflex_scenario`): who the
 * customer is, what they know, and the requests they bring, in order. The scripted user and
 * the expert agent both read it; the gold actions are derived from it.
 * @module
 */
import type { Address, PaymentMethod } from './schema.js';

/** Task kinds of the generator. */
export type RetailTaskKind =
  | 'cancel'
  | 'modify_address'
  | 'modify_payment'
  | 'modify_items'
  | 'return'
  | 'exchange'
  | 'user_address'
  | 'lookup_tracking'
  | 'lookup_price'
  | 'refuse'
  | 'transfer';

/** An item the customer refers to (by name and options), with the replacement when there is one. */
export interface ScenarioItem {
  /** The ordered item id. */
  item_id: string;
  /** Its product id. */
  product_id: string;
  /** Product name. */
  name: string;
  /** Its options. */
  options: Record<string, string>;
  /** Replacement item id (modify items / exchange). */
  new_item_id?: string;
  /** Replacement options. */
  new_options?: Record<string, string>;
}

/** One request of the customer. */
export interface RetailRequest {
  /** What is asked. */
  type: RetailTaskKind;
  /** The order concerned (order-level requests). */
  order_id?: string;
  /** Whether the customer knows the order id (else they describe it by one of its items). */
  knowsOrderId?: boolean;
  /** An item of the order, by which a customer who does not know the order id describes it. */
  orderHint?: { name: string; options: Record<string, string> };
  /** Cancel reason. */
  reason?: 'no longer needed' | 'ordered by mistake';
  /** New address (order or default address). */
  address?: Address;
  /** Payment method to use (new payment, price difference or refund). */
  payment_method_id?: string;
  /** How the customer names that payment method. */
  paymentDescription?: string;
  /** Items concerned. */
  items?: ScenarioItem[];
  /** Lookups: the product id and the answer the agent must say. */
  product_id?: string;
  /** Lookups: the answer string (also the task's communicate_info). */
  answer?: string;
  /** Refusals: what the customer wants that the policy forbids, and the order status that forbids it. */
  wanted?: 'cancel' | 'return' | 'modify_address';
  /** Refusals: the order's status. */
  status?: string;
  /** Transfers: what the customer wants. */
  topic?: string;
  /** Change of mind: the request first stated, replaced by this one when asked to confirm. */
  initial?: RetailRequest;
}

/** The customer and their requests. */
export interface RetailScenario {
  /** The main kind (of the first request). */
  kind: RetailTaskKind;
  /** Who the customer is and how they authenticate. */
  user: {
    user_id: string;
    first_name: string;
    last_name: string;
    zip: string;
    email: string;
    auth: 'email' | 'name_zip';
  };
  /** Requests, handled in order. */
  requests: RetailRequest[];
}

/** `Water Bottle (capacity 750ml, color red)`. */
export function describeOptions(options: Record<string, string>): string {
  return Object.entries(options)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
}

/** `the Water Bottle (capacity 750ml, color red)`. */
export function describeItem(item: { name: string; options: Record<string, string> }): string {
  return `the ${item.name} (${describeOptions(item.options)})`;
}

/** How a customer names a payment method. */
export function describePayment(pm: PaymentMethod): string {
  if (pm.source === 'credit_card') return `my ${pm.brand} credit card ending in ${pm.last_four}`;
  if (pm.source === 'paypal') return 'my PayPal account';
  return `my gift card (${pm.id})`;
}

/** A one-line address. */
export function describeAddress(a: Address): string {
  return `${a.address1}${a.address2 ? `, ${a.address2}` : ''}, ${a.city}, ${a.state} ${a.zip}, ${a.country}`;
}
