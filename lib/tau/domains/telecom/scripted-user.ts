/**
 * A scripted, seeded telecom customer. It states its complaint, answers what the agent asks
 * (phone number, name, whether it is abroad, how much data to refuel, confirmations, plan
 * change), and performs actions on its own phone only when the agent asks for them, by tool
 * name (`toggle_airplane_mode`) or in plain words ("turn off airplane mode"). It reports what
 * its phone shows, grounded in its tool results, and ends with `###STOP###` once its own check
 * shows the problem solved (signal in the status bar, the target speed, MMS can be sent), or
 * `###TRANSFER###` when transferred. The `Hard` persona follows instructions badly: it may
 * worry instead of acting, do only the first of several actions, or forget to say what the
 * screen shows.
 * @module
 */
import { Rng } from '../../rng.js';
import type { TauTask } from '../../task.js';
import type { ToolMessage } from '../../messages.js';
import type { UserReply, UserSimulator, UserTurnInput } from '../../users/types.js';
import type { TelecomScenario } from './scenario.js';
import { telecomScenarioOf } from './scenario.js';

/** Options of {@link ScriptedTelecomUser}. */
export interface ScriptedTelecomUserOptions {
  /** Turns without progress before the user gives up (`###STOP###`). Default 8. */
  patience?: number;
  /** Probability of each bad behaviour of the `Hard` persona per request. Default 0.3. */
  hardness?: number;
}

type Call = { name: string; arguments: Record<string, unknown> };

/** Plain-words patterns per user tool (tool names in the text always count). */
const PHRASES: readonly [string, RegExp][] = [
  ['check_status_bar', /\b(?:check|look at|read|what does)\b[^.?!]{0,40}status bar/],
  ['check_network_status', /\b(?:check|look at|open)\b[^.?!]{0,40}network status/],
  ['check_network_mode_preference', /\b(?:check|look at|what is)\b[^.?!]{0,40}(?:network mode|preferred network)/],
  ['set_network_mode_preference', /\b(?:set|change|switch)\b[^.?!]{0,40}(?:network mode|preferred network)/],
  ['run_speed_test', /\bspeed test\b/],
  ['toggle_airplane_mode', /\b(?:turn|switch|toggle)\b[^.?!]{0,20}airplane mode|airplane mode (?:off|on)\b/],
  ['check_sim_status', /\b(?:check|look at)\b[^.?!]{0,30}\bsim\b/],
  ['reseat_sim_card', /\b(?:re-?seat|reinsert|re-insert|take out)\b[^.?!]{0,30}\bsim\b/],
  ['toggle_data', /\b(?:turn|switch|toggle)\b[^.?!]{0,20}mobile data\b(?! roaming)/],
  ['toggle_roaming', /\b(?:turn|switch|toggle)\b[^.?!]{0,20}(?:data )?roaming/],
  ['check_data_restriction_status', /\b(?:check|look at)\b[^.?!]{0,30}data (?:saver|restriction)/],
  ['toggle_data_saver_mode', /\b(?:turn|switch|toggle)\b[^.?!]{0,20}data saver/],
  ['check_apn_settings', /\b(?:check|look at)\b[^.?!]{0,30}apn/],
  ['reset_apn_settings', /\breset\b[^.?!]{0,20}apn/],
  ['check_wifi_calling_status', /\b(?:check|look at)\b[^.?!]{0,30}wi-?fi calling/],
  ['toggle_wifi_calling', /\b(?:turn|switch|toggle)\b[^.?!]{0,20}wi-?fi calling/],
  ['check_vpn_status', /\b(?:check|look at)\b[^.?!]{0,30}\bvpn\b/],
  ['disconnect_vpn', /\b(?:disconnect|turn off)\b[^.?!]{0,20}\bvpn\b/],
  ['check_app_permissions', /\b(?:check|look at)\b[^.?!]{0,40}permissions/],
  ['grant_app_permission', /\b(?:grant|give)\b[^.?!]{0,60}permission/],
  ['can_send_mms', /\b(?:try|check|test)\b[^.?!]{0,30}(?:send|sending)\b[^.?!]{0,20}(?:mms|picture message)/],
  ['reboot_device', /\b(?:reboot|restart)\b[^.?!]{0,20}(?:phone|device)/],
  ['check_payment_request', /\b(?:check|look at|open)\b[^.?!]{0,30}payment request/],
  ['make_payment', /\b(?:make|complete)\b[^.?!]{0,20}payment|\bpay (?:the|your|that) (?:bill|request)/],
];

const RX = {
  transfer: /transferr?(?:ed|ing) (?:you )?to a human|human agent\W+please hold on/i,
  phone: /phone number|your number|which (?:line|number)|number (?:of|associated)/,
  name: /your (?:full )?name/,
  abroad: /abroad|travel|outside (?:the|your) (?:country|home)|roaming area|which country|where are you/,
  refuelAmount: /how much data|how many (?:gb|gigabytes)/,
  confirm:
    /\(yes\/no\)|shall i|should i|do you (?:want|agree|confirm)|would you like me to|may i|can i go ahead|go ahead\?/,
  planChange: /change (?:your |to a |the )?(?:data )?plan|different plan|upgrade (?:your|to)/,
  fixedClaim:
    /should (?:now )?(?:be )?(?:working|fixed|resolved|restored|back)|is (?:now )?(?:fixed|resolved|restored|working)|try (?:it )?again|test it now/,
  anythingElse: /anything else/,
  readScreen:
    /exactly what|read (?:me|out)|what (?:does|did) (?:it|the screen|your (?:phone|screen)) (?:say|show)|tell me what (?:it|the screen|your phone) (?:says|shows|showed)/,
};

/** The scripted telecom user (synchronous: use `resetSync`/`actSync` or the async API). */
export class ScriptedTelecomUser implements UserSimulator {
  private s: TelecomScenario | null = null;
  private rng = new Rng(0);
  private readonly patience: number;
  private readonly hardness: number;
  private idle = 0;
  private turns = 0;
  private lastOutputs: string[] = [];
  private fixesTried = 0;
  private frustrated = false;
  private vagueReport = false;
  private badBehaviours = 0;
  private pendingWorry = false;
  private refuelAgreed = false;

  /** @param options - patience and the Hard persona's bad-behaviour probability. */
  constructor(options: ScriptedTelecomUserOptions = {}) {
    this.patience = options.patience ?? 8;
    this.hardness = options.hardness ?? 0.3;
  }

  /** Starts a conversation: the task's `sinkflex_scenario`, or one derived from a tau2 telecom task. */
  reset(task: TauTask, seed: number): void {
    this.s = telecomScenarioOf(task);
    this.rng = new Rng(seed * 7919 + 17);
    this.idle = 0;
    this.turns = 0;
    this.lastOutputs = [];
    this.fixesTried = 0;
    this.frustrated = false;
    this.vagueReport = false;
    this.badBehaviours = 0;
    this.pendingWorry = false;
    this.refuelAgreed = false;
  }

  private get hard(): boolean {
    return this.s?.persona === 'Hard';
  }

  private misbehave(): boolean {
    if (!this.hard || this.badBehaviours >= 3 || !this.rng.chance(this.hardness)) return false;
    this.badBehaviours++;
    return true;
  }

  private targetText(): string {
    return this.s?.target?.description ?? 'excellent';
  }

  private complaint(): string {
    const s = this.s as TelecomScenario;
    if (s.category === 'service')
      return "My phone has been showing 'No Service' for the past few hours and I can't make or receive calls.";
    if (s.category === 'mms')
      return "I haven't been able to send picture messages (MMS) from my messaging app for a few hours.";
    return `My mobile data isn't working properly: it either doesn't work at all or it's very slow. I need ${this.targetText()} internet speed on my phone.`;
  }

  private opening(): string {
    const s = this.s as TelecomScenario;
    if (this.hard) return `Hello. ${this.complaint()}`;
    const where = s.category !== 'service' && s.abroad ? ' I am currently abroad in France.' : '';
    return `Hi! ${this.complaint()} I'm ${s.name} and my phone number is ${s.phone_number}.${where}`;
  }

  /** Whether one of the user's own tool outputs shows the goal reached. */
  private goalSeen(output: string): boolean {
    const s = this.s as TelecomScenario;
    if (s.category === 'service') {
      const bar = /Status Bar: ([^\n]*)/.exec(output);
      return bar !== null && !bar[1].includes('No Signal') && !bar[1].includes('Airplane Mode');
    }
    if (s.category === 'mms') return output.includes('Your messaging app can send MMS messages.');
    const m = /Speed Test Result: ([\d.]+) Mbps \(([^)]+)\)/.exec(output);
    const order = ['very poor', 'poor', 'fair', 'good', 'excellent'];
    return (
      m !== null &&
      Number(m[1]) >= (s.target?.mbps ?? 100) &&
      order.indexOf(m[2].toLowerCase()) >= order.indexOf(this.targetText())
    );
  }

  private goalCheck(): Call {
    const c = (this.s as TelecomScenario).category;
    return {
      name: c === 'service' ? 'check_status_bar' : c === 'mms' ? 'can_send_mms' : 'run_speed_test',
      arguments: {},
    };
  }

  /** The actions the agent asks for, in the order the text names them. */
  requestedActions(text: string): Call[] {
    const lower = text.toLowerCase();
    const found: { at: number; name: string; clause: string }[] = [];
    const clauseAt = (at: number) => {
      const start = Math.max(lower.lastIndexOf('.', at), lower.lastIndexOf('\n', at), lower.lastIndexOf(';', at)) + 1;
      const ends = ['.', '\n', ';'].map((c) => lower.indexOf(c, at)).filter((i) => i >= 0);
      return lower.slice(start, ends.length > 0 ? Math.min(...ends) : lower.length);
    };
    const names =
      /\b(check_status_bar|check_network_status|check_network_mode_preference|set_network_mode_preference|run_speed_test|toggle_airplane_mode|check_sim_status|reseat_sim_card|toggle_data_saver_mode|toggle_data|toggle_roaming|check_data_restriction_status|check_apn_settings|reset_apn_settings|check_wifi_status|toggle_wifi_calling|toggle_wifi|check_wifi_calling_status|check_vpn_status|connect_vpn|disconnect_vpn|check_installed_apps|check_app_status|check_app_permissions|grant_app_permission|can_send_mms|reboot_device|check_payment_request|make_payment)\b/g;
    for (const m of lower.matchAll(names))
      found.push({ at: m.index as number, name: m[1], clause: clauseAt(m.index as number) });
    if (found.length === 0) {
      for (const [name, rx] of PHRASES) {
        const g = new RegExp(rx.source, 'g');
        for (const m of lower.matchAll(g))
          found.push({ at: m.index as number, name, clause: clauseAt(m.index as number) });
      }
    }
    found.sort((a, b) => a.at - b.at);
    const calls: Call[] = [];
    for (const f of found) {
      if (f.name === 'set_network_mode_preference')
        calls.push({
          name: f.name,
          arguments: { mode: /\b(4g_5g_preferred|4g_only|3g_only|2g_only)\b/.exec(f.clause)?.[1] ?? '4g_5g_preferred' },
        });
      else if (f.name === 'grant_app_permission') {
        const app = /app_name\W+(\w+)|\bthe (\w+) app\b/.exec(f.clause);
        const perms = [
          ...new Set(
            [
              ...f.clause
                .replace(/grant_app_permission|app_name|permission\b/g, '')
                .matchAll(/\b(sms|storage|phone|network)\b/g),
            ].map((x) => x[1]),
          ),
        ];
        for (const p of perms.length > 0 ? perms : ['storage'])
          calls.push({ name: f.name, arguments: { app_name: app?.[1] ?? app?.[2] ?? 'messaging', permission: p } });
      } else if (f.name === 'check_app_permissions' || f.name === 'check_app_status') {
        const app = /app_name\W+(\w+)|\bthe (\w+) app\b/.exec(f.clause);
        calls.push({ name: f.name, arguments: { app_name: app?.[1] ?? app?.[2] ?? 'messaging' } });
      } else calls.push({ name: f.name, arguments: {} });
    }
    // drop exact repeats (a tool named twice in one message is done once)
    return calls.filter(
      (c, i) =>
        calls.findIndex((d) => d.name === c.name && JSON.stringify(d.arguments) === JSON.stringify(c.arguments)) === i,
    );
  }

  private report(results: readonly ToolMessage[]): UserReply {
    const outputs = results.map((r) => r.content);
    this.lastOutputs = outputs;
    if (outputs.some((o) => this.goalSeen(o)))
      return {
        content: `${this.hard ? 'Oh, thank goodness! That' : 'Great, that'} fixed it. Thank you for your help! ###STOP###`,
      };
    const checkedGoal = outputs.some((o) => /Status Bar:|Speed Test Result|Speed test failed|MMS messages/.test(o));
    let prefix = '';
    if (checkedGoal && this.fixesTried > 0 && !this.frustrated) {
      this.frustrated = true;
      prefix = "Hmm, it's still not working, that's a bit frustrating. ";
    }
    if (this.vagueReport) {
      this.vagueReport = false;
      return { content: `${prefix}Okay, I did it. There's some text on the screen but I'm not sure what it means.` };
    }
    return {
      content: `${prefix}${this.hard ? 'I think I did it right. ' : 'Done. '}Here is what my phone shows:\n${outputs.join('\n')}`,
    };
  }

  /** The next user message. */
  respond(input: UserTurnInput): UserReply {
    const s = this.s;
    if (!s) throw new Error('ScriptedTelecomUser: reset() first');
    this.turns++;
    if (input.toolResults.length > 0) return this.report(input.toolResults);
    if (this.turns === 1) return { content: this.opening() };
    const text = input.agentText;
    const lower = text.toLowerCase();
    if (RX.transfer.test(text)) return { content: '###TRANSFER###' };

    const actions = this.requestedActions(text);
    if (actions.length > 0) {
      this.idle = 0;
      if (!this.pendingWorry && this.misbehave()) {
        this.pendingWorry = true;
        return {
          content: this.rng.pick([
            "Wait, will doing that delete my photos? I'm worried about messing up my phone.",
            "I'm sorry, I'm nervous about changing things on my phone. Is this safe?",
            'Hold on, I am not sure I understand. Do I really need to do this?',
          ]),
        };
      }
      this.pendingWorry = false;
      let todo = actions;
      if (todo.length > 1 && this.misbehave()) todo = todo.slice(0, 1);
      else if (this.misbehave()) this.vagueReport = true;
      if (todo.some((a) => /^(toggle|set|reset|reseat|reboot|grant|disconnect|connect|make)_/.test(a.name)))
        this.fixesTried++;
      if (todo.some((a) => a.name === 'make_payment') && !todo.some((a) => a.name === 'check_payment_request'))
        todo = [{ name: 'check_payment_request', arguments: {} }, ...todo];
      return { content: null, toolCalls: todo };
    }
    if (RX.readScreen.test(lower)) {
      this.idle = 0;
      if (this.lastOutputs.length === 0)
        return { content: "Sorry, I haven't done anything on my phone yet. What should I do?" };
      return { content: `Sorry, here is exactly what it says:\n${this.lastOutputs.join('\n')}` };
    }
    const answers: string[] = [];
    if (RX.phone.test(lower)) answers.push(`My phone number is ${s.phone_number}.`);
    if (RX.name.test(lower)) answers.push(`My name is ${s.name}.`);
    if (RX.abroad.test(lower))
      answers.push(s.abroad ? "Yes, I'm currently abroad in France." : "No, I'm at home in the United States.");
    if (RX.refuelAmount.test(lower))
      answers.push(
        s.refuelGb > 0 ? `I'd like to refuel ${s.refuelGb.toFixed(1)} GB, please.` : "I don't want to buy more data.",
      );
    if (RX.planChange.test(lower))
      answers.push(s.acceptsPlanChange ? 'Yes, I can change my plan.' : "No, I don't want to change my plan.");
    else if (RX.confirm.test(lower)) {
      const refuel = /refuel|\bgb\b|data/.test(lower);
      if (!refuel || (s.refuelGb > 0 && !this.refuelAgreed)) {
        if (refuel) this.refuelAgreed = true;
        answers.push('Yes, please go ahead.');
      } else answers.push('No, thank you.');
    }
    if (answers.length > 0) {
      this.idle = 0;
      return { content: answers.join(' ') };
    }
    if (RX.fixedClaim.test(lower) || RX.anythingElse.test(lower)) {
      this.idle = 0;
      return { content: null, toolCalls: [this.goalCheck()] };
    }
    if (++this.idle > this.patience)
      return { content: "This isn't getting anywhere. I'll try again later. ###STOP###" };
    return {
      content: this.hard
        ? "I'm sorry, I don't understand. What should I do?"
        : `I'm not sure what you need from me. ${this.complaint()}`,
    };
  }
}
