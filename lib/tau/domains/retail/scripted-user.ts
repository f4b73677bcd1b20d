/**
 * A scripted, seeded retail customer that follows a generated task's scenario: it states one
 * request at a time, answers what the agent asks (identity, order id, items, payment method,
 * address, reason), confirms only correct actions, can change its mind when the scenario says
 * so, accepts refusals of forbidden requests, and ends with `###STOP###` (or `###TRANSFER###`).
 * It reads the agent's text with keyword rules, so it suits the expert agent and agents that
 * speak plainly; use the LLM simulator for free-form agents.
 * @module
 */
import type { TauTask } from '../../task.js';
import { Rng } from '../../rng.js';
import type { UserReply, UserSimulator, UserTurnInput } from '../../users/types.js';
import type { RetailRequest, RetailScenario } from './scenario.js';
import { describeAddress, describeItem, describeOptions } from './scenario.js';

/** Options of {@link ScriptedRetailUser}. */
export interface ScriptedUserOptions {
  /** Turns without progress before the customer gives up (`###STOP###`). Default 8. */
  patience?: number;
}

const RX = {
  transfer: /transferr?(?:ed|ing)? (?:you )?to a human|human agent.*hold on/,
  identity: /e-?mail|zip|your (?:full )?name|verify|authenticat|identif/,
  orderId: /order (?:id|number)|which order/,
  items: /which items?|what items?|which products?/,
  payment: /payment method|which (?:card|payment)|refund (?:to|should)|pay (?:for )?the (?:price )?difference|receive the refund/,
  address: /new address|which address|full address|the address/,
  reason: /reason/,
  confirm: /confirm|proceed|\(yes\/no\)|shall i|should i|would you like me to|do you want me to|go ahead/,
  confirmStrong: /\(yes\/no\)|do you confirm|shall i proceed|should i proceed|would you like me to proceed/,
  done: /(?:has|have) been (?:cancel+ed|updated|changed|modified|submitted|processed|requested)|successfully|is now/,
  refusal: /can ?not|can't|unable to|not able to|not possible|isn't possible|not allowed|only .* can be/,
  anythingElse: /anything else/,
};

function intro(r: RetailRequest): string {
  switch (r.type) {
    case 'cancel':
      return "I'd like to cancel an order.";
    case 'modify_address':
      return "I need to change the shipping address of an order that hasn't shipped yet.";
    case 'modify_payment':
      return "I'd like to change the payment method of one of my orders.";
    case 'modify_items':
      return "I'd like to change some items in an order I placed.";
    case 'return':
      return 'I want to return some items I received.';
    case 'exchange':
      return "I'd like to exchange some items from an order I received.";
    case 'user_address':
      return 'I moved and need to update my default address.';
    case 'lookup_tracking':
      return `Could you tell me the tracking number of my order ${r.order_id}?`;
    case 'lookup_price':
      return `How much does ${describeItem((r.items ?? [])[0])} cost?`;
    case 'refuse':
      return r.wanted === 'cancel' ? `I want to cancel my order ${r.order_id}.` : r.wanted === 'return' ? `I want to return ${describeItem((r.items ?? [])[0])} from order ${r.order_id}.` : `I need to change the shipping address of my order ${r.order_id}.`;
    case 'transfer':
      return `I want to ${r.topic}.`;
  }
}

/** The scripted retail customer. */
export class ScriptedRetailUser implements UserSimulator {
  private scenario: RetailScenario | null = null;
  private rng = new Rng(0);
  private index = 0;
  private revealed = false;
  private confirmed = false;
  private identityGiven = false;
  private refusals = 0;
  private idle = 0;
  private readonly patience: number;

  /** @param options - patience. */
  constructor(options: ScriptedUserOptions = {}) {
    this.patience = options.patience ?? 8;
  }

  /** Starts a conversation; the task must carry a `sinkflex_scenario` (generated tasks). */
  reset(task: TauTask, seed: number): void {
    const s = task.sinkflex_scenario as RetailScenario | undefined;
    if (!s || !Array.isArray(s.requests)) throw new TypeError(`ScriptedRetailUser: task ${task.id} has no sinkflex_scenario (use the LLM user simulator for tau2 tasks)`);
    this.scenario = s;
    this.rng = new Rng(seed);
    this.index = 0;
    this.revealed = false;
    this.confirmed = false;
    this.identityGiven = false;
    this.refusals = 0;
    this.idle = 0;
  }

  private get request(): RetailRequest | undefined {
    return this.scenario?.requests[this.index];
  }

  /** The request as currently presented (the initial one until the change of mind). */
  private get presented(): RetailRequest {
    const r = this.request as RetailRequest;
    return r.initial && !this.revealed ? r.initial : r;
  }

  private next(prefix: string): string {
    this.index++;
    this.revealed = false;
    this.confirmed = false;
    this.refusals = 0;
    const r = this.request;
    if (!r) return `${prefix} ${this.rng.pick(["That's all I needed, thank you!", 'That was everything, thanks!'])} ###STOP###`.trim();
    return `${prefix} I also have another request: ${intro(r.initial ?? r)}`.trim();
  }

  private identity(): string {
    const u = (this.scenario as RetailScenario).user;
    this.identityGiven = true;
    if (u.auth === 'email') return `My email is ${u.email}.`;
    return `I don't remember my email. My name is ${u.first_name} ${u.last_name} and my zip code is ${u.zip}.`;
  }

  private answers(text: string): string[] {
    const r = this.presented;
    const out: string[] = [];
    if (RX.identity.test(text) && !this.identityGiven) out.push(this.identity());
    if (RX.orderId.test(text) && r.order_id) {
      out.push(r.knowsOrderId === false ? `I don't remember the order id, but it's the one with ${describeItem((r.items ?? [])[0] ?? { name: 'items', options: {} })}.` : `The order id is ${r.order_id}.`);
    }
    if (RX.items.test(text) && r.items && r.items.length > 0) {
      const list = r.items.map((i) => (i.new_options ? `${describeItem(i)}, which I want changed to one with ${describeOptions(i.new_options)}` : describeItem(i)));
      out.push(`It's ${list.join('; and ')}. That's all the items.`);
    }
    if (RX.payment.test(text) && r.paymentDescription) out.push(`Please use ${r.paymentDescription}.`);
    if (RX.address.test(text) && r.address) out.push(`The new address is ${describeAddress(r.address)}.`);
    if (RX.reason.test(text) && r.reason) out.push(r.reason === 'no longer needed' ? "I don't need it anymore." : 'I ordered it by mistake.');
    return out;
  }

  /** The customer's next message. */
  respond(input: UserTurnInput): UserReply {
    if (!this.scenario) throw new Error('ScriptedRetailUser: reset() first');
    const text = input.agentText.toLowerCase();
    const isGreeting = input.history.filter((m) => m.role === 'user').length === 0;
    const r = this.request;
    if (!r) return { content: 'Thanks, bye! ###STOP###' };
    if (isGreeting) return { content: `Hi! ${intro(r.initial ?? r)}` };
    if (RX.transfer.test(text)) return { content: '###TRANSFER###' };

    if ((r.type === 'lookup_tracking' || r.type === 'lookup_price') && r.answer && text.replace(/,/g, '').includes(r.answer.toLowerCase())) {
      this.idle = 0;
      return { content: this.next('Great, thank you.') };
    }
    if (this.confirmed && RX.done.test(text)) {
      this.idle = 0;
      return { content: this.next('Thank you!') };
    }
    if (RX.refusal.test(text) && !RX.confirm.test(text)) {
      this.idle = 0;
      if (r.type === 'refuse') return { content: this.next('I see, thanks for explaining.') };
      if (r.type === 'transfer') {
        if (++this.refusals >= 2) return { content: this.next('Alright, never mind.') };
        return { content: 'Then could you transfer me to a human agent, please?' };
      }
      if (++this.refusals >= 2) return { content: this.next('Okay, never mind that then.') };
      return { content: `Are you sure? ${requestReminder(this.presented)}` };
    }
    if (!this.confirmed && (RX.confirmStrong.test(text) || (RX.confirm.test(text) && this.answers(text).length === 0))) {
      this.idle = 0;
      if (r.initial && !this.revealed) {
        this.revealed = true;
        return { content: `Wait, actually I changed my mind. Instead, ${requestReminder(r)}` };
      }
      const ids: string[] = text.match(/#w\d{7}/g) ?? [];
      if (r.order_id && ids.length > 0 && !ids.includes(r.order_id.toLowerCase())) {
        return { content: `No, that's not the right order. It's ${r.order_id}.` };
      }
      this.confirmed = true;
      return { content: this.rng.pick(['Yes, please go ahead.', 'Yes, I confirm.', 'Yes, please proceed.']) };
    }
    const answers = this.answers(text);
    if (answers.length > 0) {
      this.idle = 0;
      return { content: answers.join(' ') };
    }
    if (RX.anythingElse.test(text) && this.index < this.scenario.requests.length) {
      if (r.type === 'refuse' || r.type === 'transfer') return { content: this.next('No, that was it.') };
    }
    if (++this.idle > this.patience) return { content: "This isn't getting anywhere. I'll try again later. ###STOP###" };
    return { content: requestReminder(this.presented) };
  }
}

function requestReminder(r: RetailRequest): string {
  switch (r.type) {
    case 'cancel':
      return `I'd like to cancel order ${r.order_id}.`;
    case 'modify_address':
      return `I'd like the shipping address of order ${r.order_id} changed to ${describeAddress(r.address as never)}.`;
    case 'modify_payment':
      return `I'd like to pay for order ${r.order_id} with ${r.paymentDescription} instead.`;
    case 'modify_items':
    case 'exchange':
      return `I'd like to ${r.type === 'exchange' ? 'exchange' : 'change'} ${(r.items ?? []).map((i) => `${describeItem(i)} for one with ${describeOptions(i.new_options ?? {})}`).join(', and ')} in order ${r.order_id}.`;
    case 'return':
      return `I'd like to return ${(r.items ?? []).map(describeItem).join(' and ')} from order ${r.order_id}.`;
    case 'user_address':
      return `I'd like my default address changed to ${describeAddress(r.address as never)}.`;
    default:
      return intro(r);
  }
}
