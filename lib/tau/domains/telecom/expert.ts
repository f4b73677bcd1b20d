/**
 * A scripted expert telecom agent that diagnoses like the tech-support manual says, from what
 * it observes only (it does not read the task's root causes): it identifies the customer and
 * the line from the phone number the user gives, checks the backend (line status, bills,
 * roaming, data usage), then asks the user to run checks and fixes on their phone, naming each
 * action by its tool name and bundling related checks, reads the results the user reports,
 * fixes what it can on the backend (payment request, resume line, roaming, refuel after the
 * user agrees to the price), and transfers when the cause is beyond policy (locked SIM, ended
 * contract, data cap reached). One tool call or one message per turn.
 * @module
 */
import type { AssistantAction } from '../../action.js';
import type { AgentContext, TauAgent } from '../../agents.js';
import type { Message } from '../../messages.js';
import { pyFixed2 } from './backend.js';
import type { TelecomCategory } from './scenario.js';

type Json = Record<string, unknown>;
const TRANSFER_TEXT = 'YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.';
const TODAY = '2025-02-25';
const BANDS = ['very poor', 'poor', 'fair', 'good', 'excellent'];

/** What the expert knows about the phone (undefined = not known, or stale after a change). */
interface PhoneKnowledge {
  airplane?: boolean;
  signal?: boolean;
  sim?: 'active' | 'missing' | 'locked';
  apnBroken?: boolean;
  mmscSet?: boolean;
  dataEnabled?: boolean;
  roamingOn?: boolean;
  tech?: string;
  speed?: { ok: boolean; mbps: number; band: string };
  dataSaver?: boolean;
  mode?: string;
  vpnPoor?: boolean;
  wifiCalling?: boolean;
  perms?: { sms: boolean; storage: boolean };
  mms?: boolean;
  paid?: string;
}

/** The expert agent. */
export class ExpertTelecomAgent implements TauAgent {
  private category: TelecomCategory | null = null;
  private target = 'excellent';
  private phone: string | null = null;
  private abroad: boolean | undefined;
  private askedAbroad = false;
  private customer: Json | null = null;
  private line: Json | null = null;
  private linesToCheck: string[] = [];
  private usage: Json | null = null;
  private plan: Json | null = null;
  private bills: Json[] | null = null;
  private k: PhoneKnowledge = {};
  private lastRequest: string[] = [];
  private repeats = 0;
  private needReboot = false;
  private refuel: 'none' | 'ask' | 'confirm' | 'do' | 'done' | 'declined' = 'none';
  private refuelGb = 0;
  private suspension: 'none' | 'sent' | 'verify' | 'resume' | 'reboot' | 'done' = 'none';
  private overdueBill: Json | null = null;
  private planOffered = false;
  private transferred = false;
  private actions = 0;
  private pendingCall: string | null = null;

  /** Starts a conversation (the task is not read: the expert works from observations). */
  reset(context: AgentContext): void {
    void context;
    Object.assign(this, new ExpertTelecomAgent());
  }

  private say(content: string): AssistantAction {
    return { role: 'assistant', content };
  }

  private call(name: string, args: Json): AssistantAction {
    this.pendingCall = name;
    return { role: 'assistant', content: null, toolCalls: [{ name, arguments: args }] };
  }

  private ask(tools: string[], intro: string): AssistantAction {
    this.lastRequest = tools;
    return this.say(`${intro} ${describe(tools)} Then tell me exactly what your phone shows.`);
  }

  private transfer(): AssistantAction {
    this.transferred = true;
    return this.call('transfer_to_human_agents', {
      summary: `Customer ${this.customer?.customer_id ?? ''} (${this.phone ?? 'unknown number'}): ${this.category ?? 'technical'} issue that cannot be solved within policy.`,
    });
  }

  private observeTool(content: string): void {
    const name = this.pendingCall;
    this.pendingCall = null;
    let v: unknown;
    try {
      v = JSON.parse(content);
    } catch {
      v = content;
    }
    if (typeof v === 'string' && v.startsWith('Error:')) {
      if (name === 'get_customer_by_phone') this.phone = null; // ask again
      return;
    }
    const o = v as Json;
    if (name === 'get_customer_by_phone' && o && typeof o === 'object') {
      this.customer = o;
      this.linesToCheck = [...((o.line_ids as string[]) ?? [])];
    } else if (name === 'get_details_by_id' && o && typeof o === 'object') {
      if (typeof o.line_id === 'string' && typeof o.phone_number === 'string') {
        if (digits(o.phone_number) === digits(this.phone ?? '')) this.line = o;
      } else if (typeof o.plan_id === 'string' && typeof o.data_limit_gb === 'number') this.plan = o;
      else if (typeof o.bill_id === 'string' && o.status === 'Paid' && this.suspension === 'verify')
        this.suspension = 'resume';
    } else if (name === 'get_data_usage') this.usage = o;
    else if (name === 'get_bills_for_customer' && Array.isArray(v)) this.bills = v as Json[];
    else if (name === 'send_payment_request') this.suspension = 'sent';
    else if (name === 'resume_line') {
      this.suspension = 'reboot';
      if (this.line) this.line = { ...this.line, status: 'Active' };
    } else if (name === 'enable_roaming' && this.line) {
      this.line = { ...this.line, roaming_enabled: true };
      this.invalidate();
    } else if (name === 'refuel_data') {
      this.refuel = 'done';
      if (this.usage)
        this.usage = { ...this.usage, data_refueling_gb: Number(this.usage.data_refueling_gb) + this.refuelGb };
      this.invalidate();
    }
  }

  private invalidate(): void {
    delete this.k.speed;
    delete this.k.mms;
    delete this.k.dataEnabled;
    delete this.k.roamingOn;
    delete this.k.tech;
  }

  /** Reads every phone output the user quoted, returns whether it contained any. */
  private observeUser(text: string): boolean {
    const k = this.k;
    let seen = false;
    const last = (rx: RegExp) => {
      const all = [...text.matchAll(new RegExp(rx.source, 'g'))];
      if (all.length > 0) seen = true;
      return all.length > 0 ? all[all.length - 1] : null;
    };
    if (
      /is now (?:ON|OFF)|re-seated|Restarting network|set to:|granted to app|disconnected successfully|Payment of|will reset at reboot/.test(
        text,
      )
    )
      this.invalidate();
    const bar = last(/Status Bar: ([^\n]*)/);
    if (bar) {
      k.airplane = bar[1].includes('Airplane Mode');
      k.signal = !k.airplane && !bar[1].includes('No Signal');
    }
    const air = last(/Airplane Mode: (ON|OFF)/);
    if (air) k.airplane = air[1] === 'ON';
    const sim = last(/SIM card is active|No SIM card detected|locked with a P(?:IN|UK) code/);
    if (sim) k.sim = sim[0].startsWith('SIM') ? 'active' : sim[0].startsWith('No') ? 'missing' : 'locked';
    const simLine = last(/SIM Card Status: (\w+)/);
    if (simLine) k.sim = simLine[1] === 'active' ? 'active' : simLine[1] === 'missing' ? 'missing' : 'locked';
    if (last(/re-seated successfully/)) k.sim = 'active';
    const apn = last(/Current APN Name: (\S+)/);
    if (apn) k.apnBroken = apn[1] === 'broken';
    const mmsc = last(/MMSC URL \(for picture messages\): ([^\n]+)/);
    if (mmsc) k.mmscSet = mmsc[1].trim() !== 'Not Set';
    if (last(/will reset at reboot/)) this.needReboot = true;
    if (last(/Restarting network services/)) {
      if (this.needReboot) {
        k.apnBroken = false;
        k.mmscSet = true;
      }
      this.needReboot = false;
      if (this.suspension === 'reboot') this.suspension = 'done';
    }
    const data = last(/Mobile Data (?:Enabled: (Yes|No)|is now (ON|OFF))/);
    if (data) k.dataEnabled = (data[1] ?? data[2]) === 'Yes' || data[2] === 'ON';
    const roam = last(/Data Roaming (?:Enabled: (Yes|No)|is now (ON|OFF))/);
    if (roam) k.roamingOn = roam[1] === 'Yes' || roam[2] === 'ON';
    const tech = last(/Cellular Network Type: (\S+)/);
    if (tech) k.tech = tech[1];
    const speed = last(/Speed Test Result: ([\d.]+) Mbps \(([^)]+)\)|Speed test failed/);
    if (speed)
      k.speed = speed[1]
        ? { ok: true, mbps: Number(speed[1]), band: speed[2].toLowerCase() }
        : { ok: false, mbps: 0, band: 'none' };
    const saver = last(/Data Saver (?:mode|Mode) is (?:now )?(ON|OFF)/);
    if (saver) k.dataSaver = saver[1] === 'ON';
    const mode = last(/(?:Network Mode Preference|Preferred Network Mode set to): (\S+)/);
    if (mode) k.mode = mode[1];
    const vpn = last(
      /VPN is ON and connected[^\n]*|VPN is turned OFF|VPN is turned ON in settings, but currently not connected|VPN disconnected successfully|No active VPN connection/,
    );
    if (vpn)
      k.vpnPoor =
        vpn[0].startsWith('VPN is ON and connected') && /PerformanceLevel\.POOR|performance[^\n]*poor/i.test(vpn[0]);
    const wc = last(/Wi-Fi Calling is (?:currently turned|now) (ON|OFF)/);
    if (wc) k.wifiCalling = wc[1] === 'ON';
    const perms = last(/App 'messaging' (?:has permission for: ([^\n]+)|currently has no permissions granted)/);
    if (perms) {
      const list = perms[1] ?? '';
      k.perms = { sms: /\bsms\b/.test(list), storage: /\bstorage\b/.test(list) };
    }
    for (const g of text.matchAll(/Permission '(\w+)' granted to app 'messaging'/g)) {
      seen = true;
      k.perms = { ...(k.perms ?? { sms: false, storage: false }), [g[1]]: true } as { sms: boolean; storage: boolean };
    }
    const mms = last(/messaging app (can|cannot) send MMS/);
    if (mms) k.mms = mms[1] === 'can';
    const paid = last(/Payment of [\d.]+ USD has been made for bill (\w+)/);
    if (paid) {
      k.paid = paid[1];
      if (this.suspension === 'sent') this.suspension = 'verify';
    }
    if (last(/You have a payment request for bill|No payment request has been made|You do not have a payment request/))
      seen = true;
    return seen;
  }

  private observeUserText(text: string): void {
    const lower = text.toLowerCase();
    if (!this.category) {
      if (/mms|picture message|multimedia/.test(lower)) this.category = 'mms';
      else if (/no service|signal|make or receive calls|can't (?:make|call)/.test(lower)) this.category = 'service';
      else if (/mobile data|internet|speed|data/.test(lower)) this.category = 'mobile_data';
      const t = /\b(excellent|good|fair) (?:internet )?speed/.exec(lower);
      if (t) this.target = t[1];
    }
    const ph = /\b(\d{3}[-. ]?\d{3}[-. ]?\d{4})\b/.exec(text);
    if (ph && !this.phone) this.phone = ph[1];
    if (/\babroad\b|in france|travell?ing/.test(lower) && !/not abroad|at home/.test(lower)) this.abroad = true;
    else if (/at home|not abroad|not travell?ing/.test(lower)) this.abroad = false;
    const gb = /(\d+(?:\.\d+)?) ?gb/.exec(lower);
    if (this.refuel === 'ask' && gb) {
      this.refuelGb = Math.min(Number(gb[1]), this.refuelAllowance());
      this.refuel = 'confirm';
    } else if (this.refuel === 'ask' && /\bno\b|don't want/.test(lower)) this.refuel = 'declined';
    else if (this.refuel === 'confirm') this.refuel = /\byes\b|go ahead/.test(lower) ? 'do' : 'declined';
    if (this.planOffered && /\bno\b|don't want/.test(lower)) this.refuel = 'declined';
  }

  private refuelAllowance(): number {
    return Math.max(0, 2.0 - Number(this.usage?.data_refueling_gb ?? 0));
  }

  private exceeded(): boolean {
    const u = this.usage;
    return !!u && Number(u.data_used_gb) >= Number(u.data_limit_gb) + Number(u.data_refueling_gb);
  }

  /** The next action. */
  act(observation: readonly Message[]): AssistantAction {
    let userText = '';
    for (const m of observation) {
      if (m.role === 'tool' && m.requestor === 'assistant') this.observeTool(m.content);
      else if (m.role === 'user' && typeof m.content === 'string') userText += `${m.content}\n`;
    }
    let quoted = false;
    if (userText) {
      this.observeUserText(userText);
      quoted = this.observeUser(userText);
    }
    if (this.transferred) return this.say(TRANSFER_TEXT);
    if (++this.actions > 60) return this.transfer();
    if (userText && this.lastRequest.length > 0 && !quoted) {
      // the user did not say what the phone shows: never repeat a toggle blindly
      if (++this.repeats > 4) return this.transfer();
      if (/\?/.test(userText) || /haven't done|what should i do/i.test(userText)) {
        return this.say(
          `Don't worry: this is safe and will not delete anything on your phone. ${describe(this.lastRequest)} Then tell me what your phone shows.`,
        );
      }
      return this.say('Thank you. Could you please read me exactly what your screen shows now?');
    }
    if (quoted) this.repeats = 0;
    this.lastRequest = [];
    return this.next();
  }

  private next(): AssistantAction {
    if (!this.category)
      return this.say('I am sorry to hear that. Could you describe the problem you are having with your phone?');
    // identification and backend facts
    if (!this.phone || (this.category !== 'service' && this.abroad === undefined && !this.askedAbroad)) {
      const needAbroad = this.category !== 'service' && this.abroad === undefined;
      this.askedAbroad ||= needAbroad;
      if (!this.phone)
        return this.say(
          `I can help with that. Could you please give me the phone number of the line with the problem?${needAbroad ? ' Also, are you currently traveling abroad?' : ''}`,
        );
      return this.say('Thank you. Are you currently traveling abroad?');
    }
    if (!this.customer) return this.call('get_customer_by_phone', { phone_number: this.phone });
    if (!this.line) {
      const id = this.linesToCheck.shift();
      if (id === undefined) return this.transfer();
      return this.call('get_details_by_id', { id });
    }
    const cid = this.customer.customer_id as string;
    const lid = this.line.line_id as string;
    if (this.line.status === 'Suspended' && this.suspension !== 'done' && this.suspension !== 'reboot') {
      const ended = typeof this.line.contract_end_date === 'string' && this.line.contract_end_date < TODAY;
      if (ended) return this.transfer();
      if (!this.bills) return this.call('get_bills_for_customer', { customer_id: cid });
      this.overdueBill ??= this.bills.find((b) => b.status === 'Overdue' || b.status === 'Awaiting Payment') ?? null;
      const bill = this.overdueBill;
      if (!bill) return this.transfer();
      if (this.suspension === 'none') {
        if (bill.status === 'Awaiting Payment') this.suspension = 'sent';
        else return this.call('send_payment_request', { customer_id: cid, bill_id: bill.bill_id });
      }
      if (this.suspension === 'sent') {
        return this.ask(
          ['check_payment_request', 'make_payment'],
          `Your line ${lid} is suspended because bill ${String(bill.bill_id)} of $${pyFixed2(Number(bill.total_due))} is overdue. I have sent you a payment request for it: please look at it and pay it.`,
        );
      }
      if (this.suspension === 'verify') return this.call('get_details_by_id', { id: bill.bill_id });
      if (this.suspension === 'resume') return this.call('resume_line', { customer_id: cid, line_id: lid });
    }
    if (this.suspension === 'reboot')
      return this.ask(
        ['reboot_device'],
        'The bill is paid and your line is active again. Your phone needs a restart to reconnect.',
      );
    if (this.category !== 'service') {
      if (!this.usage) return this.call('get_data_usage', { customer_id: cid, line_id: lid });
      if (this.abroad && this.line.roaming_enabled === false)
        return this.call('enable_roaming', { customer_id: cid, line_id: lid });
      if (this.exceeded() && this.refuel !== 'done') {
        const needed =
          Number(this.usage.data_used_gb) - Number(this.usage.data_limit_gb) - Number(this.usage.data_refueling_gb);
        const allowance = this.refuelAllowance();
        if (this.refuel === 'declined' || allowance <= needed) {
          if (!this.planOffered && this.refuel !== 'declined') {
            this.planOffered = true;
            return this.say(
              `Your line has used its data allowance (${this.usage.data_used_gb} GB of ${this.usage.data_limit_gb} GB plus ${this.usage.data_refueling_gb} GB refuelled), and the 2 GB refuelling limit for this cycle does not leave enough. The alternative is to change to a plan with more data. Would you like to change your plan?`,
            );
          }
          return this.transfer();
        }
        if (!this.plan) return this.call('get_details_by_id', { id: this.line.plan_id as string });
        if (this.refuel === 'none') {
          this.refuel = 'ask';
          return this.say(
            `Your line has used its monthly data allowance (${this.usage.data_used_gb} GB used of ${this.usage.data_limit_gb} GB), so mobile data is cut off. I can refuel up to ${allowance.toFixed(1)} GB at $${pyFixed2(Number(this.plan.data_refueling_price_per_gb))} per GB. How much data would you like to refuel?`,
          );
        }
        if (this.refuel === 'ask')
          return this.say(`How much data would you like to refuel (up to ${allowance.toFixed(1)} GB)?`);
        if (this.refuel === 'confirm') {
          const cost = this.refuelGb * Number(this.plan.data_refueling_price_per_gb);
          return this.say(
            `Refuelling ${this.refuelGb.toFixed(1)} GB will cost $${pyFixed2(cost)}, added to your next bill. Shall I go ahead (yes/no)?`,
          );
        }
        if (this.refuel === 'do')
          return this.call('refuel_data', { customer_id: cid, line_id: lid, gb_amount: this.refuelGb });
      }
    }
    return this.device();
  }

  /** The phone-side diagnosis: service first, then mobile data, then MMS. */
  private device(): AssistantAction {
    const k = this.k;
    const goal = this.category === 'mobile_data' ? 'run_speed_test' : this.category === 'mms' ? 'can_send_mms' : null;
    const withGoal = (fixes: string[]) => (goal ? [...fixes, goal] : fixes);
    if (k.airplane === undefined || k.signal === undefined) {
      const first =
        this.category === 'service'
          ? []
          : this.category === 'mms'
            ? ['can_send_mms', 'run_speed_test']
            : ['run_speed_test'];
      return this.ask(['check_status_bar', ...first], "Let's start with a few checks on your phone.");
    }
    if (k.airplane)
      return this.ask(
        withGoal(['toggle_airplane_mode']),
        'Airplane mode is on, which turns off all wireless connections, so it has to be turned off.',
      );
    if (!k.signal) {
      if (this.needReboot)
        return this.ask(['reboot_device'], 'Your phone needs a restart for the new settings to take effect.');
      if (k.sim === undefined)
        return this.ask(['check_sim_status'], 'Your phone has no signal, so let us check the SIM card.');
      if (k.sim === 'locked') return this.transfer();
      if (k.sim === 'missing')
        return this.ask(
          ['reseat_sim_card'],
          'Your phone does not detect the SIM card, so it needs to be taken out and put back in.',
        );
      if (k.apnBroken === undefined) return this.ask(['check_apn_settings'], 'Next, let us look at the APN settings.');
      if (k.apnBroken)
        return this.ask(
          ['reset_apn_settings', 'reboot_device'],
          'Your APN settings are incorrect: they need a reset, which applies after a restart.',
        );
      return this.transfer();
    }
    if (this.category === 'service')
      return this.say(
        'Your phone shows signal again, so your service is restored. Is there anything else I can help you with?',
      );
    // mobile data must work (any speed) for both data and MMS complaints
    if (k.speed === undefined)
      return this.ask(
        this.category === 'mms' && k.mms === undefined ? ['can_send_mms', 'run_speed_test'] : ['run_speed_test'],
        'Now let us test your mobile data.',
      );
    if (!k.speed.ok) {
      if (k.dataEnabled === undefined || k.roamingOn === undefined)
        return this.ask(
          ['check_network_status'],
          'Your mobile data is not connecting, so let us look at the network settings.',
        );
      const fixes: string[] = [];
      if (!k.dataEnabled) fixes.push('toggle_data');
      if (this.abroad && !k.roamingOn) fixes.push('toggle_roaming');
      if (fixes.length > 0)
        return this.ask(
          withGoal(fixes),
          fixes.includes('toggle_roaming') && fixes.length === 1
            ? 'You are abroad and data roaming is off on your phone, so it has to be turned on.'
            : 'Some settings that mobile data needs are off.',
        );
      return this.transfer();
    }
    if (this.category === 'mobile_data') {
      if (BANDS.indexOf(k.speed.band) >= BANDS.indexOf(this.target))
        return this.say(
          'Your mobile data now works at the speed you wanted. Is there anything else I can help you with?',
        );
      const checks: string[] = [];
      if (k.dataSaver === undefined) checks.push('check_data_restriction_status');
      if (k.mode === undefined) checks.push('check_network_mode_preference');
      if (k.vpnPoor === undefined) checks.push('check_vpn_status');
      if (checks.length > 0)
        return this.ask(checks, 'Your connection is slower than it should be, so let us look for what slows it down.');
      const fixes: string[] = [];
      if (k.dataSaver) fixes.push('toggle_data_saver_mode');
      if (k.mode !== '4g_5g_preferred') fixes.push('set_network_mode_preference');
      if (k.vpnPoor) fixes.push('disconnect_vpn');
      if (fixes.length === 0) return this.transfer();
      return this.ask(withGoal(fixes), 'I found what needs to change.');
    }
    // MMS
    if (k.mms === undefined) return this.ask(['can_send_mms'], 'Let us check whether your phone can send MMS now.');
    if (k.mms)
      return this.say('Your phone can send picture messages again. Is there anything else I can help you with?');
    const checks: string[] = [];
    if (k.tech === undefined) checks.push('check_network_status');
    if (k.wifiCalling === undefined) checks.push('check_wifi_calling_status');
    if (k.mmscSet === undefined) checks.push('check_apn_settings');
    if (k.perms === undefined) checks.push('check_app_permissions');
    if (checks.length > 0)
      return this.ask(checks, 'Picture messages need a few settings to be right, so let us check them.');
    const fixes: string[] = [];
    if (k.tech === '2G') fixes.push('set_network_mode_preference');
    if (k.wifiCalling) fixes.push('toggle_wifi_calling');
    if (k.perms && !k.perms.sms) fixes.push('grant_app_permission:sms');
    if (k.perms && !k.perms.storage) fixes.push('grant_app_permission:storage');
    if (!k.mmscSet) fixes.push('reset_apn_settings', 'reboot_device');
    if (fixes.length === 0) return this.transfer();
    return this.ask(withGoal(fixes), 'I found what needs to change.');
  }
}

function digits(s: unknown): string {
  return String(s).replace(/\D/g, '');
}

const HOW: Record<string, string> = {
  check_status_bar: '`check_status_bar` (look at your status bar)',
  check_network_status: '`check_network_status`',
  check_network_mode_preference: '`check_network_mode_preference`',
  set_network_mode_preference: '`set_network_mode_preference` with mode 4g_5g_preferred',
  run_speed_test: '`run_speed_test`',
  toggle_airplane_mode: '`toggle_airplane_mode`',
  check_sim_status: '`check_sim_status`',
  reseat_sim_card: '`reseat_sim_card`',
  toggle_data: '`toggle_data` (turn mobile data on)',
  toggle_roaming: '`toggle_roaming` (turn data roaming on)',
  check_data_restriction_status: '`check_data_restriction_status`',
  toggle_data_saver_mode: '`toggle_data_saver_mode` (turn data saver off)',
  check_apn_settings: '`check_apn_settings`',
  reset_apn_settings: '`reset_apn_settings`',
  check_wifi_calling_status: '`check_wifi_calling_status`',
  toggle_wifi_calling: '`toggle_wifi_calling` (turn Wi-Fi calling off)',
  check_vpn_status: '`check_vpn_status`',
  disconnect_vpn: '`disconnect_vpn`',
  check_app_permissions: '`check_app_permissions` for the messaging app',
  'grant_app_permission:sms': '`grant_app_permission` to give the messaging app the sms permission',
  'grant_app_permission:storage': '`grant_app_permission` to give the messaging app the storage permission',
  can_send_mms: '`can_send_mms`',
  reboot_device: '`reboot_device` (restart your phone)',
  check_payment_request: '`check_payment_request`',
  make_payment: '`make_payment`',
};

/** "Please do X, then Y, then Z." with tool names. */
function describe(tools: string[]): string {
  const parts = tools.map((t) => HOW[t] ?? `\`${t}\``);
  return `Please do the following in order: ${parts.join('; then ')}.`;
}
