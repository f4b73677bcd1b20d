/**
 * A scripted expert retail agent for generated tasks. It reads the task's scenario as an
 * oracle of what the customer wants, but behaves like a policy-following agent: it
 * authenticates first, asks for each detail, looks orders and products up with the tools,
 * lists the action and waits for a "yes" before any write, reports the result, refuses what
 * the policy forbids, transfers when out of scope, and follows a change of mind. One tool call
 * or one plain message per turn, so a small model can imitate its demonstrations.
 * @module
 */
import type { AssistantAction } from '../../action.js';
import type { AgentContext, TauAgent } from '../../agents.js';
import type { Message } from '../../messages.js';
import type { RetailRequest, RetailScenario } from './scenario.js';
import { describeAddress, describeItem, describeOptions } from './scenario.js';

type Step = { say: string } | { call: string; args: Record<string, unknown> };

const TRANSFER_TEXT = 'YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.';

/** The expert agent. */
export class ExpertRetailAgent implements TauAgent {
  private scenario: RetailScenario | null = null;
  private queue: Step[] = [];
  private index = 0;
  private current: RetailRequest | null = null;
  private switched = false;
  private fetchedOrders = new Set<string>();
  private fetchedProducts = new Set<string>();
  private userDetails = false;

  /** Starts a conversation; the task must carry a `sinkflex_scenario`. */
  reset(context: AgentContext): void {
    const s = context.task.sinkflex_scenario as RetailScenario | undefined;
    if (!s || !Array.isArray(s.requests))
      throw new TypeError(`ExpertRetailAgent: task ${context.task.id} has no sinkflex_scenario`);
    this.scenario = s;
    this.index = 0;
    this.switched = false;
    this.fetchedOrders.clear();
    this.fetchedProducts.clear();
    this.userDetails = false;
    this.lastOrders.clear();
    this.knownUserOrders = null;
    const u = s.user;
    this.queue = [
      {
        say: 'I can help with that. First, could you please provide your email address, or your first name, last name and zip code, so I can verify your identity?',
      },
      u.auth === 'email'
        ? { call: 'find_user_id_by_email', args: { email: u.email } }
        : { call: 'find_user_id_by_name_zip', args: { first_name: u.first_name, last_name: u.last_name, zip: u.zip } },
    ];
    this.current = s.requests[0] ?? null;
    if (this.current) this.queue.push(...this.plan(this.current.initial ?? this.current));
  }

  private lookupOrder(r: RetailRequest, ask: boolean): Step[] {
    const steps: Step[] = [];
    if (!r.order_id || this.fetchedOrders.has(r.order_id)) return steps;
    if (ask) steps.push({ say: 'Thank you. Could you please tell me the order id?' });
    if (r.knowsOrderId === false) {
      const user = this.scenario as RetailScenario;
      if (!this.userDetails) steps.push({ call: 'get_user_details', args: { user_id: user.user.user_id } });
      this.userDetails = true;
      steps.push({ lazyOrders: r.order_id } as unknown as Step);
    } else steps.push({ call: 'get_order_details', args: { order_id: r.order_id } });
    this.fetchedOrders.add(r.order_id);
    return steps;
  }

  private userLookup(): Step[] {
    if (this.userDetails) return [];
    this.userDetails = true;
    return [{ call: 'get_user_details', args: { user_id: (this.scenario as RetailScenario).user.user_id } }];
  }

  private productLookups(r: RetailRequest): Step[] {
    const steps: Step[] = [];
    for (const it of r.items ?? []) {
      if (this.fetchedProducts.has(it.product_id)) continue;
      this.fetchedProducts.add(it.product_id);
      steps.push({ call: 'get_product_details', args: { product_id: it.product_id } });
    }
    return steps;
  }

  /** The steps that handle one request. */
  private plan(r: RetailRequest): Step[] {
    const id = r.order_id ?? '';
    const items = (r.items ?? []).map(describeItem).join(' and ');
    const changes = (r.items ?? [])
      .map((i) => `${describeItem(i)} to the one with ${describeOptions(i.new_options ?? {})}`)
      .join('; ');
    const addr = r.address ? describeAddress(r.address) : '';
    const confirm = (what: string) => ({ say: `${what} Do you confirm (yes/no)?` });
    switch (r.type) {
      case 'cancel':
        return [
          ...this.lookupOrder(r, true),
          {
            say: `I see order ${id} is pending. What is the reason for the cancellation: 'no longer needed' or 'ordered by mistake'?`,
          },
          confirm(
            `To confirm: I will cancel order ${id} for the reason '${r.reason}'. The payment will be refunded to the original payment method.`,
          ),
          { call: 'cancel_pending_order', args: { order_id: id, reason: r.reason } },
          { say: `Order ${id} has been cancelled. Is there anything else I can help you with?` },
        ];
      case 'modify_address':
        return [
          ...this.lookupOrder(r, true),
          {
            say: `Order ${id} is pending, so its shipping address can be changed. Please tell me the full address you would like to use.`,
          },
          confirm(`To confirm: I will change the shipping address of order ${id} to ${addr}.`),
          { call: 'modify_pending_order_address', args: { order_id: id, ...r.address } },
          { say: `The shipping address of order ${id} has been updated. Is there anything else I can help you with?` },
        ];
      case 'modify_payment':
        return [
          ...this.lookupOrder(r, true),
          { say: 'Which payment method would you like to use instead?' },
          ...this.userLookup(),
          confirm(
            `To confirm: order ${id} will be paid with ${r.payment_method_id}, and the original payment will be refunded.`,
          ),
          { call: 'modify_pending_order_payment', args: { order_id: id, payment_method_id: r.payment_method_id } },
          {
            say: `The payment of order ${id} has been updated to ${r.payment_method_id}. Is there anything else I can help you with?`,
          },
        ];
      case 'modify_items':
      case 'exchange': {
        const verb = r.type === 'exchange' ? 'exchange' : 'modify';
        return [
          ...this.lookupOrder(r, true),
          { say: `Which items would you like to ${verb}, and to which options?` },
          ...this.productLookups(r),
          { say: 'Those options are available. Which payment method should pay or receive the price difference?' },
          ...this.userLookup(),
          confirm(
            `To confirm: in order ${id} I will ${verb} ${changes}, with ${r.payment_method_id} for the price difference. Please make sure these are all the items you want to change: this can only be done once per order.`,
          ),
          {
            call: r.type === 'exchange' ? 'exchange_delivered_order_items' : 'modify_pending_order_items',
            args: {
              order_id: id,
              item_ids: (r.items ?? []).map((i) => i.item_id),
              new_item_ids: (r.items ?? []).map((i) => i.new_item_id),
              payment_method_id: r.payment_method_id,
            },
          },
          {
            say:
              r.type === 'exchange'
                ? `The exchange for order ${id} has been requested; you will receive an email with instructions. Is there anything else I can help you with?`
                : `The items of order ${id} have been modified. Is there anything else I can help you with?`,
          },
        ];
      }
      case 'return':
        return [
          ...this.lookupOrder(r, true),
          { say: 'Which items would you like to return?' },
          {
            say: 'Which payment method should receive the refund? It can be the original payment method or a gift card.',
          },
          ...this.userLookup(),
          confirm(`To confirm: I will return ${items} from order ${id}, with the refund to ${r.payment_method_id}.`),
          {
            call: 'return_delivered_order_items',
            args: {
              order_id: id,
              item_ids: (r.items ?? []).map((i) => i.item_id),
              payment_method_id: r.payment_method_id,
            },
          },
          {
            say: `The return for order ${id} has been requested; you will receive an email explaining how to send the items back. Is there anything else I can help you with?`,
          },
        ];
      case 'user_address':
        return [
          { say: 'Please tell me the full address you would like as your default address.' },
          confirm(`To confirm: I will change your default address to ${addr}.`),
          {
            call: 'modify_user_address',
            args: { user_id: (this.scenario as RetailScenario).user.user_id, ...r.address },
          },
          { say: 'Your default address has been updated. Is there anything else I can help you with?' },
        ];
      case 'lookup_tracking':
        return [...this.lookupOrder(r, false), { answer: 'tracking', order_id: id } as unknown as Step];
      case 'lookup_price': {
        const it = (r.items ?? [])[0];
        return [
          { call: 'list_all_product_types', args: {} },
          { call: 'get_product_details', args: { product_id: r.product_id } },
          { say: `${describeItem(it)} costs $${r.answer}. Is there anything else I can help you with?` },
        ];
      }
      case 'refuse': {
        const what = r.wanted === 'cancel' ? 'cancelled' : r.wanted === 'return' ? 'returned' : 'modified';
        const rule =
          r.wanted === 'return'
            ? 'only delivered orders can be returned'
            : 'only pending orders can be changed or cancelled';
        return [
          ...this.lookupOrder(r, false),
          {
            say: `I'm sorry, but order ${id} is ${r.status}, so it cannot be ${what}: ${rule}. Is there anything else I can help you with?`,
          },
        ];
      }
      case 'transfer':
        return [
          { call: 'transfer_to_human_agents', args: { summary: `The user wants to ${r.topic}.` } },
          { say: TRANSFER_TEXT },
        ];
    }
  }

  /** The next action. */
  act(observation: readonly Message[]): AssistantAction {
    const s = this.scenario;
    if (!s) throw new Error('ExpertRetailAgent: reset() first');
    for (const m of observation) {
      if (m.role !== 'tool' || m.error) continue;
      try {
        const v = JSON.parse(m.content) as { order_id?: unknown; user_id?: unknown; orders?: unknown };
        if (v && typeof v === 'object' && typeof v.order_id === 'string') this.lastOrders.set(v.order_id, v);
        else if (v && typeof v === 'object' && typeof v.user_id === 'string' && Array.isArray(v.orders))
          this.knownUserOrders = v.orders as string[];
      } catch {
        // plain-text result (user id, calculation)
      }
    }
    const lastUser = [...observation].reverse().find((m) => m.role === 'user');
    const r = this.current;
    if (r && r.initial && !this.switched && lastUser && /changed my mind/i.test(lastUser.content ?? '')) {
      this.switched = true;
      this.queue = this.plan(r);
    }
    for (;;) {
      if (this.queue.length === 0) {
        this.index++;
        this.switched = false;
        this.current = s.requests[this.index] ?? null;
        if (!this.current) return { role: 'assistant', content: 'Is there anything else I can help you with?' };
        this.queue = this.plan(this.current.initial ?? this.current);
        continue;
      }
      const step = this.queue.shift() as Step & { lazyOrders?: string; answer?: string; order_id?: string };
      if (step.lazyOrders) {
        // walk the user's orders until the one described
        const target = step.lazyOrders;
        const user = this.userOrders();
        const calls: Step[] = [];
        for (const id of user) {
          calls.push({ call: 'get_order_details', args: { order_id: id } });
          if (id === target) break;
        }
        this.queue.unshift(...calls);
        continue;
      }
      if (step.answer === 'tracking') {
        const o = this.lastOrders.get(step.order_id as string) as
          { fulfillments?: { tracking_id: string[] }[] } | undefined;
        const t = o?.fulfillments?.[0]?.tracking_id[0] ?? 'not available';
        return {
          role: 'assistant',
          content: `The tracking number of order ${step.order_id} is ${t}. Is there anything else I can help you with?`,
        };
      }
      if ('say' in step) return { role: 'assistant', content: step.say };
      return { role: 'assistant', content: null, toolCalls: [{ name: step.call, arguments: step.args }] };
    }
  }

  private lastOrders = new Map<string, unknown>();

  private knownUserOrders: string[] | null = null;

  private userOrders(): string[] {
    return this.knownUserOrders ?? [];
  }
}
