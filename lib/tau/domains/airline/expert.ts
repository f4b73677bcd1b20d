/**
 * A scripted expert airline agent for tau2's airline tasks: it replays the task's gold actions
 * (`evaluation_criteria.actions`) in order, one tool call per turn, asks the user for an
 * explicit "yes" before each write (as the policy requires), then states each
 * `communicate_info` item and asks whether anything else is needed. After a transfer to a
 * human agent it says so and stops acting. It reads the task as an oracle, so it is a
 * demonstration and test driver (the reward of a correct conversation), not a policy.
 * @module
 */
import type { AssistantAction } from '../../action.js';
import type { AgentContext, TauAgent } from '../../agents.js';
import type { Message } from '../../messages.js';

type Step = { say: string } | { call: string; args: Record<string, unknown> };

const TRANSFER_TEXT = 'YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.';
const CLOSING = 'Is there anything else I can help you with?';

/** The names of the airline tools that change the database. */
const WRITES = new Set([
  'book_reservation',
  'cancel_reservation',
  'send_certificate',
  'update_reservation_baggages',
  'update_reservation_flights',
  'update_reservation_passengers',
]);

function describeCall(name: string, args: Record<string, unknown>): string {
  const what = name.replace(/_/g, ' ');
  const id = args.reservation_id ?? args.user_id;
  return `${what}${typeof id === 'string' ? ` for ${id}` : ''} with these details: ${JSON.stringify(args)}`;
}

/** The expert agent (see the module description). */
export class ExpertAirlineAgent implements TauAgent {
  private queue: Step[] = [];
  private transferred = false;

  /** Plans the conversation from the task's gold actions and communicate info. */
  reset(context: AgentContext): void {
    const ec = context.task.evaluation_criteria;
    this.queue = [];
    this.transferred = false;
    for (const a of ec?.actions ?? []) {
      if ((a.requestor ?? 'assistant') !== 'assistant') continue;
      if (WRITES.has(a.name))
        this.queue.push({ say: `To confirm, I will ${describeCall(a.name, a.arguments)}. Do you confirm (yes/no)?` });
      this.queue.push({ call: a.name, args: a.arguments });
      if (a.name === 'transfer_to_human_agents') this.queue.push({ say: TRANSFER_TEXT });
    }
    const info = ec?.communicate_info ?? [];
    if (info.length > 0) this.queue.push({ say: `Here is what you asked about: ${info.join('; ')}. ${CLOSING}` });
  }

  /** The next action: the next planned step, or the closing question. */
  act(observation: readonly Message[]): AssistantAction {
    void observation;
    const step = this.queue.shift();
    if (!step) return { role: 'assistant', content: this.transferred ? TRANSFER_TEXT : CLOSING };
    if ('say' in step) {
      if (step.say === TRANSFER_TEXT) this.transferred = true;
      return { role: 'assistant', content: step.say };
    }
    return { role: 'assistant', content: null, toolCalls: [{ name: step.call, arguments: step.args }] };
  }
}
