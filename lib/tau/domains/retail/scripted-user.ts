/**
 * A scripted, seeded retail customer that follows a generated task's scenario: it states one
 * request at a time, answers what the agent asks (identity, order id, items, payment method,
 * address, reason), confirms only an action whose details are right, can change its mind when
 * the scenario says so, accepts refusals of forbidden requests, and ends with `###STOP###` (or
 * `###TRANSFER###`). It does not reward incoherence: each detail it gives moves the
 * conversation forward once (asked again, it repeats it, but that counts as no progress); a
 * claimed transfer that did not happen does not end the conversation; and after `patience`
 * agent messages in a row that do not move its current request forward it gives up (the
 * conversation ends as `user_give_up`, which scores 0: the request is unresolved). It reads
 * the agent's text with keyword rules, so it suits the expert agent and agents that speak
 * plainly; use the LLM simulator for free-form agents.
 * @module
 */
import type { Message } from '../../messages.js';
import type { TauTask } from '../../task.js';
import { Rng } from '../../rng.js';
import type { UserReply, UserSimulator, UserTurnInput } from '../../users/types.js';
import type { RetailRequest, RetailScenario } from './scenario.js';
import { describeAddress, describeItem, describeOptions } from './scenario.js';

/** Options of {@link ScriptedRetailUser}. */
export interface ScriptedUserOptions {
  /**
   * Agent messages in a row that do not move the current request forward (nothing new asked,
   * no right confirmation, no answer, no refusal) that the customer answers with a re-ask;
   * the next one makes it give up (`user_give_up`). Default 4.
   */
  patience?: number;
}

/** What the customer may be asked for, per request (the identity is asked once per conversation). */
type Slot = 'order' | 'items' | 'payment' | 'address' | 'reason';

const RX = {
  transfer: /transferr?(?:ed|ing)? (?:you )?to a human|human agent.*hold on/,
  identity: /e-?mail|zip|your (?:full )?name|verify|authenticat|identif/,
  orderId: /order (?:id|number)|which order/,
  items: /which items?|what items?|which products?/,
  payment:
    /payment method|which (?:card|payment)|refund (?:to|should)|pay (?:for )?the (?:price )?difference|receive the refund/,
  address: /new address|which address|full address|the address/,
  reason: /reason/,
  confirm: /confirm|proceed|\(yes\/no\)|shall i|should i|would you like me to|do you want me to|go ahead/,
  confirmStrong: /\(yes\/no\)|do you confirm|shall i proceed|should i proceed|would you like me to proceed/,
  done: /(?:has|have) been (?:cancel+ed|updated|changed|modified|submitted|processed|requested)|successfully|is now/,
  refusal: /can ?not|can't|unable to|not able to|not possible|isn't possible|not allowed|only .* can be/,
  orderIds: /#w\d{7}/g,
};

const GIVE_UP = "This isn't getting anywhere. I'll try again later.";

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
      return r.wanted === 'cancel'
        ? `I want to cancel my order ${r.order_id}.`
        : r.wanted === 'return'
          ? `I want to return ${describeItem((r.items ?? [])[0])} from order ${r.order_id}.`
          : `I need to change the shipping address of my order ${r.order_id}.`;
    case 'transfer':
      return `I want to ${r.topic}.`;
  }
}

/** How the customer names the order: its id, or (not knowing it) one of its items. */
function orderRef(r: RetailRequest): string {
  if (r.knowsOrderId === false) return r.orderHint ? `my order with ${describeItem(r.orderHint)}` : 'my order';
  return `order ${r.order_id}`;
}

/** The customer's answer when asked which order. */
function orderAnswer(r: RetailRequest): string {
  if (r.knowsOrderId === false)
    return `I don't remember the order id, but it's the one with ${r.orderHint ? describeItem(r.orderHint) : 'the items I mentioned'}.`;
  return `The order id is ${r.order_id}.`;
}

/** Whether the agent really transferred the conversation: a `transfer_to_human_agents` call that succeeded. */
function transferred(history: readonly Message[]): boolean {
  const ok = new Set<string>();
  for (const m of history) if (m.role === 'tool' && m.requestor === 'assistant' && !m.error) ok.add(m.id);
  return history.some(
    (m) =>
      m.role === 'assistant' && (m.toolCalls ?? []).some((c) => c.name === 'transfer_to_human_agents' && ok.has(c.id)),
  );
}

/** The scripted retail customer. */
export class ScriptedRetailUser implements UserSimulator {
  private scenario: RetailScenario | null = null;
  private rng = new Rng(0);
  private index = 0;
  private revealed = false;
  private confirmed = false;
  private identityGiven = false;
  private slots = new Set<Slot>();
  private refusals = 0;
  private idle = 0;
  private readonly patience: number;

  /** @param options - patience. */
  constructor(options: ScriptedUserOptions = {}) {
    const p = options.patience ?? 4;
    if (!Number.isInteger(p) || p < 0)
      throw new RangeError(`ScriptedRetailUser: patience must be a non-negative integer, got ${p}`);
    this.patience = p;
  }

  /** Starts a conversation; the task must carry a `sinkflex_scenario` (generated tasks). */
  reset(task: TauTask, seed: number): void {
    const s = task.sinkflex_scenario as RetailScenario | undefined;
    if (!s || !Array.isArray(s.requests))
      throw new TypeError(
        `ScriptedRetailUser: task ${task.id} has no sinkflex_scenario (use the LLM user simulator for tau2 tasks)`,
      );
    this.scenario = s;
    this.rng = new Rng(seed);
    this.index = 0;
    this.revealed = false;
    this.confirmed = false;
    this.identityGiven = false;
    this.slots.clear();
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

  /** The next request (or the end of the conversation). */
  private next(prefix: string): string {
    this.index++;
    this.revealed = false;
    this.confirmed = false;
    this.slots.clear();
    this.refusals = 0;
    const r = this.request;
    if (!r)
      return `${prefix} ${this.rng.pick(["That's all I needed, thank you!", 'That was everything, thanks!'])} ###STOP###`.trim();
    return `${prefix} I also have another request: ${intro(r.initial ?? r)}`.trim();
  }

  /** A reply to a message that moved the request forward. */
  private progress(content: string): UserReply {
    this.idle = 0;
    return { content };
  }

  /** A reply to a message that did not: a re-ask, or giving up once patience runs out. */
  private unhelpful(content: string): UserReply {
    if (++this.idle > this.patience) return { content: GIVE_UP, giveUp: true };
    return { content };
  }

  private identity(): string {
    const u = (this.scenario as RetailScenario).user;
    if (u.auth === 'email') return `My email is ${u.email}.`;
    return `I don't remember my email. My name is ${u.first_name} ${u.last_name} and my zip code is ${u.zip}.`;
  }

  /** The answers to what the agent asks; `fresh` when something was asked for the first time. */
  private answers(text: string): { replies: string[]; fresh: boolean } {
    const r = this.presented;
    const replies: string[] = [];
    let fresh = false;
    const give = (slot: Slot | 'identity', reply: string) => {
      replies.push(reply);
      const known = slot === 'identity' ? this.identityGiven : this.slots.has(slot);
      if (!known) fresh = true;
      if (slot === 'identity') this.identityGiven = true;
      else this.slots.add(slot);
    };
    if (RX.identity.test(text)) give('identity', this.identity());
    if (RX.orderId.test(text) && r.order_id) give('order', orderAnswer(r));
    if (RX.items.test(text) && r.items && r.items.length > 0) {
      const list = r.items.map((i) =>
        i.new_options
          ? `${describeItem(i)}, which I want changed to one with ${describeOptions(i.new_options)}`
          : describeItem(i),
      );
      give('items', `It's ${list.join('; and ')}. That's all the items.`);
    }
    if (RX.payment.test(text) && r.paymentDescription) give('payment', `Please use ${r.paymentDescription}.`);
    if (RX.address.test(text) && r.address) give('address', `The new address is ${describeAddress(r.address)}.`);
    if (RX.reason.test(text) && r.reason)
      give('reason', r.reason === 'no longer needed' ? "I don't need it anymore." : 'I ordered it by mistake.');
    return { replies, fresh };
  }

  /** Why the customer will not confirm the action the agent describes (null: it will). */
  private wrongDetails(text: string): string | null {
    const r = this.presented;
    if (r.order_id) {
      const ids: string[] = text.match(RX.orderIds) ?? [];
      if (!ids.includes(r.order_id.toLowerCase()))
        return `${ids.length > 0 ? "No, that's not the right order." : 'Which order do you mean?'} ${orderAnswer(r)}`;
    }
    if (r.type === 'user_address' && r.address && !text.includes(r.address.zip.toLowerCase()))
      return `Which address do you mean? The new address is ${describeAddress(r.address)}.`;
    return null;
  }

  /** The customer's next message. */
  respond(input: UserTurnInput): UserReply {
    if (!this.scenario) throw new Error('ScriptedRetailUser: reset() first');
    const text = input.agentText.toLowerCase();
    const isGreeting = input.history.filter((m) => m.role === 'user').length === 0;
    const r = this.request;
    if (!r) return { content: 'Thanks, bye! ###STOP###' };
    if (isGreeting) return { content: `Hi! ${intro(r.initial ?? r)}` };
    if (RX.transfer.test(text)) {
      if (transferred(input.history)) return { content: '###TRANSFER###' };
      return this.unhelpful(
        `You said I'm being transferred, but nobody has taken over. ${requestReminder(this.presented)}`,
      );
    }
    if (
      (r.type === 'lookup_tracking' || r.type === 'lookup_price') &&
      r.answer &&
      text.replace(/,/g, '').includes(r.answer.toLowerCase())
    ) {
      return this.progress(this.next('Great, thank you.'));
    }
    if (this.confirmed && RX.done.test(text)) return this.progress(this.next('Thank you!'));
    if (RX.refusal.test(text) && !RX.confirm.test(text)) {
      if (r.type === 'refuse') return this.progress(this.next('I see, thanks for explaining.'));
      if (r.type === 'transfer') {
        if (++this.refusals >= 2) return this.progress(this.next('Alright, never mind.'));
        return this.progress('Then could you transfer me to a human agent, please?');
      }
      if (++this.refusals >= 2) return this.progress(this.next('Okay, never mind that then.'));
      return this.progress(`Are you sure? ${requestReminder(this.presented)}`);
    }
    if (RX.confirmStrong.test(text) || (RX.confirm.test(text) && this.answers(text).replies.length === 0)) {
      if (this.confirmed) return this.unhelpful('Yes, I already confirmed. Please go ahead.');
      if (r.initial && !this.revealed) {
        this.revealed = true;
        this.slots.clear();
        return this.progress(`Wait, actually I changed my mind. Instead, ${requestReminder(r)}`);
      }
      const wrong = this.wrongDetails(text);
      if (wrong) return this.unhelpful(wrong);
      this.confirmed = true;
      return this.progress(this.rng.pick(['Yes, please go ahead.', 'Yes, I confirm.', 'Yes, please proceed.']));
    }
    const { replies, fresh } = this.answers(text);
    if (replies.length > 0)
      return fresh ? this.progress(replies.join(' ')) : this.unhelpful(`As I said: ${replies.join(' ')}`);
    return this.unhelpful(requestReminder(this.presented));
  }
}

function requestReminder(r: RetailRequest): string {
  switch (r.type) {
    case 'cancel':
      return `I'd like to cancel ${orderRef(r)}.`;
    case 'modify_address':
      return `I'd like the shipping address of ${orderRef(r)} changed to ${describeAddress(r.address as never)}.`;
    case 'modify_payment':
      return `I'd like to pay for ${orderRef(r)} with ${r.paymentDescription} instead.`;
    case 'modify_items':
    case 'exchange':
      return `I'd like to ${r.type === 'exchange' ? 'exchange' : 'change'} ${(r.items ?? []).map((i) => `${describeItem(i)} for one with ${describeOptions(i.new_options ?? {})}`).join(', and ')} in ${orderRef(r)}.`;
    case 'return':
      return `I'd like to return ${(r.items ?? []).map(describeItem).join(' and ')} from ${orderRef(r)}.`;
    case 'user_address':
      return `I'd like my default address changed to ${describeAddress(r.address as never)}.`;
    default:
      return intro(r);
  }
}
