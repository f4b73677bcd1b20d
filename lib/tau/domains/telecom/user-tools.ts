/**
 * The user's 30 tools on their own phone (tau2's telecom user tools: status checks, toggles
 * and fixes, speed test, MMS check, payment), with tau2's texts; the phone set-up functions
 * tasks use in `initialization_actions` (`set_user_info`, `turn_roaming_off`, `break_vpn`…);
 * and the phone assertions tasks use in `env_assertions`. Only the simulated user calls these
 * tools; their calls and results are never shown to the agent.
 * @module
 */
import { z } from 'zod';

import { pyFloatRepr } from '../../pyjson.js';
import type { Tool } from '../../tools.js';
import { defineTool, Toolkit } from '../../tools.js';
import type { AppPermission, TelecomUserData, VpnDetails } from './device.js';
import { APN_NAMES, APP_PERMISSIONS, NETWORK_MODES, NETWORK_STATUSES } from './device.js';
import {
  canSendMms,
  connectVpn,
  disconnectVpn,
  mobileDataWorking,
  reboot,
  setNetworkMode,
  simStatus,
  simulateNetworkSearch,
  speedTest,
  statusBar,
  toggleAirplaneMode,
  toggleData,
  toggleDataSaver,
  toggleRoaming,
  toggleWifi,
  toggleWifiCalling,
} from './phone.js';
import type { TelecomState } from './state.js';

type T = Tool<TelecomState>;
const withBar = (u: TelecomUserData, text: string) => `${text}\nStatus Bar: ${statusBar(u)}`;
const onOff = (b: boolean) => (b ? 'ON' : 'OFF');
const yesNo = (b: boolean) => (b ? 'Yes' : 'No');

function pyStrRepr(s: string | null): string {
  return s === null ? 'None' : `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** The Python `repr` of a VPN details dict, as tau2's `check_vpn_status` prints it. */
export function vpnDetailsRepr(d: VpnDetails): string {
  return `{'server_address': ${pyStrRepr(d.server_address)}, 'protocol': ${pyStrRepr(d.protocol)}, 'server_performance': <PerformanceLevel.${d.server_performance.toUpperCase()}: '${d.server_performance}'>}`;
}

const SIM_TEXT = {
  active: 'Your SIM card is active and working.',
  missing: 'No SIM card detected in the phone.',
  locked_pin: 'The SIM card is locked with a PIN code.',
  locked_puk: 'The SIM card is locked with a PUK code.',
} as const;

function speedAdvice(desc: string): string {
  switch (desc) {
    case 'Very Poor':
      return 'Connection is very slow. Basic web browsing might be difficult.';
    case 'Poor':
      return 'Connection is slow. Web browsing may be sluggish, streaming difficult.';
    case 'Fair':
      return 'Connection is okay for web browsing and some standard definition streaming.';
    case 'Good':
      return 'Connection is good for most activities, including HD streaming.';
    default:
      return 'Connection is very fast.';
  }
}

function grantedList(p: Record<AppPermission, boolean>): string[] {
  return APP_PERMISSIONS.filter((k) => p[k]).map((k) => k.replace(/_/g, ' ').toLowerCase());
}

const NO_ARGS = {};

function tool(name: string, kind: 'read' | 'write', description: string, run: (u: TelecomUserData) => string): T {
  return defineTool({ name, kind, description, params: NO_ARGS, run: (s) => run(s.user.data) });
}

const APP_NAME = z.string().describe("The app's name, such as 'messaging' or 'browser'.");

/** The user's tools in tau2's order. */
export const TELECOM_USER_TOOLS: readonly T[] = [
  tool(
    'check_status_bar',
    'read',
    "Shows what the phone's status bar at the top of the screen shows: signal strength, mobile data (enabled, disabled, data saver), Wi-Fi, VPN and battery.",
    (u) => `Status Bar: ${statusBar(u)}`,
  ),
  tool(
    'check_network_status',
    'read',
    "Shows the phone's cellular and Wi-Fi connection: airplane mode, SIM, connection, signal, network type, mobile data and data roaming switches.",
    (u) => {
      const d = u.device;
      const lines = [
        `Airplane Mode: ${onOff(d.airplane_mode)}`,
        `SIM Card Status: ${simStatus(u)}`,
        `Cellular Connection: ${d.network_connection_status}`,
        `Cellular Signal: ${d.network_signal_strength}`,
        `Cellular Network Type: ${d.network_technology_connected}`,
        `Mobile Data Enabled: ${yesNo(d.data_enabled)}`,
        `Data Roaming Enabled: ${yesNo(d.roaming_enabled)}`,
        `Wi-Fi Radio: ${onOff(d.wifi_enabled)}`,
        `Wi-Fi Connected: ${yesNo(d.wifi_connected)}`,
      ];
      if (d.wifi_connected) lines.push(`Connected Wi-Fi Network: ${d.wifi_ssid}`);
      return lines.join('\n');
    },
  ),
  tool(
    'check_network_mode_preference',
    'read',
    'Shows which type of cellular network the phone prefers.',
    (u) => `Network Mode Preference: ${u.device.network_mode_preference}`,
  ),
  defineTool({
    name: 'set_network_mode_preference',
    kind: 'write',
    description:
      'Changes which type of cellular network the phone prefers (4g_5g_preferred, 4g_only, 3g_only, 2g_only). Faster networks (4G/5G) use more battery.',
    params: { mode: z.string().describe('One of 4g_5g_preferred, 4g_only, 3g_only, 2g_only.') },
    run: (s, a) => {
      const u = s.user.data;
      const mode = setNetworkMode(u, a.mode);
      if (mode === null)
        return withBar(
          u,
          `Failed to set network mode: '${a.mode}' is not a valid option. Please use one of: ${NETWORK_MODES.join(', ')}`,
        );
      return withBar(u, `Preferred Network Mode set to: ${mode}`);
    },
  }),
  tool(
    'run_speed_test',
    'read',
    'Measures the download speed of the current internet connection and says what it is good for.',
    (u) => {
      const r = speedTest(u);
      if (r.mbps === null) return `Speed test failed: ${r.description}.`;
      return `Speed Test Result: ${r.mbps.toFixed(2)} Mbps (${r.description}). ${speedAdvice(r.description)}`;
    },
  ),
  tool(
    'toggle_airplane_mode',
    'write',
    'Turns airplane mode on or off. When on, all radios are off: cellular, Wi-Fi and Bluetooth.',
    (u) => withBar(u, `Airplane Mode is now ${onOff(toggleAirplaneMode(u))}.`),
  ),
  tool(
    'check_sim_status',
    'read',
    'Shows whether the SIM card works: active, missing, or locked with a PIN or PUK code.',
    (u) => SIM_TEXT[simStatus(u)],
  ),
  tool(
    'reseat_sim_card',
    'write',
    'Takes the SIM card out and puts it back in, which can fix recognition problems.',
    (u) => {
      u.device.sim_card_missing = false;
      simulateNetworkSearch(u);
      return withBar(u, 'SIM card re-seated successfully.');
    },
  ),
  tool(
    'toggle_data',
    'write',
    'Turns mobile data on or off (internet over the cellular network when there is no Wi-Fi).',
    (u) => withBar(u, `Mobile Data is now ${onOff(toggleData(u))}.`),
  ),
  tool(
    'toggle_roaming',
    'write',
    "Turns data roaming on or off. When on, the phone can use data networks outside the carrier's coverage.",
    (u) => withBar(u, `Data Roaming is now ${onOff(toggleRoaming(u))}.`),
  ),
  tool(
    'check_data_restriction_status',
    'read',
    'Shows whether data-limiting features such as data saver mode are on.',
    (u) => (u.device.data_saver_mode ? 'Data Saver mode is ON (limits data usage).' : 'Data Saver mode is OFF.'),
  ),
  tool(
    'toggle_data_saver_mode',
    'write',
    'Turns data saver mode on or off. When on, it reduces data usage, which can slow data down.',
    (u) => withBar(u, `Data Saver Mode is now ${onOff(toggleDataSaver(u))}.`),
  ),
  tool(
    'check_apn_settings',
    'read',
    "Shows the APN settings the phone uses for the carrier's mobile data network: the APN name and the MMSC URL for picture messages.",
    (u) => {
      const a = u.device.active_apn_settings;
      return `Current APN Name: ${a.apn_name || 'Not Set'}\nMMSC URL (for picture messages): ${a.mmsc_url || 'Not Set'}\n(These are technical settings, usually best left unchanged.)`;
    },
  ),
  defineTool({
    name: 'set_apn_settings',
    kind: 'write',
    description: "Sets the phone's APN settings (fields not given take their default values).",
    params: {
      apn_settings: z
        .strictObject({
          apn_name: z.enum(APN_NAMES).optional(),
          reset_at_reboot: z.boolean().optional(),
          mms_apn: z.string().nullable().optional(),
          mmsc_url: z.string().nullable().optional(),
          mms_proxy: z.string().nullable().optional(),
          mms_port: z.number().int().nullable().optional(),
        })
        .describe('APN settings: apn_name (internet), mms_apn, mmsc_url, mms_proxy, mms_port, reset_at_reboot.'),
    },
    run: (s, a) => {
      const u = s.user.data;
      const given = a.apn_settings;
      u.device.active_apn_settings = {
        apn_name: given.apn_name ?? 'internet',
        reset_at_reboot: given.reset_at_reboot ?? false,
        mms_apn: given.mms_apn === undefined ? 'mms' : given.mms_apn,
        mmsc_url: given.mmsc_url === undefined ? 'http://mms.carrier.com/mms/wapenc' : given.mmsc_url,
        mms_proxy: given.mms_proxy ?? null,
        mms_port: given.mms_port ?? null,
      };
      simulateNetworkSearch(u);
      return withBar(u, `APN settings set to: ${u.device.active_apn_settings.apn_name}`);
    },
  }),
  tool(
    'reset_apn_settings',
    'write',
    'Resets the APN settings to their defaults; the reset applies at the next reboot.',
    (u) => {
      u.device.active_apn_settings.reset_at_reboot = true;
      simulateNetworkSearch(u);
      return withBar(u, 'APN settings will reset at reboot.');
    },
  ),
  tool(
    'check_wifi_status',
    'read',
    'Shows whether Wi-Fi is on, which network it is connected to and the signal strength.',
    (u) => {
      const d = u.device;
      if (!d.wifi_enabled) return 'Wi-Fi is turned OFF.';
      if (d.wifi_connected)
        return `Wi-Fi is ON and connected to '${d.wifi_ssid}'. Signal strength: ${d.wifi_signal_strength}.`;
      return 'Wi-Fi is ON but not connected to any network.';
    },
  ),
  tool('toggle_wifi', 'write', "Turns the phone's Wi-Fi radio on or off.", (u) => {
    const r = toggleWifi(u);
    if (r === null) return withBar(u, 'Cannot change Wi-Fi settings while Airplane Mode is ON.');
    return withBar(u, `Wi-Fi is now ${onOff(r)}.`);
  }),
  tool(
    'check_wifi_calling_status',
    'read',
    'Shows whether Wi-Fi calling (calls over Wi-Fi instead of the cellular network) is on.',
    (u) => `Wi-Fi Calling is currently turned ${onOff(u.device.wifi_calling_enabled)}.`,
  ),
  tool('toggle_wifi_calling', 'write', 'Turns Wi-Fi calling on or off.', (u) =>
    withBar(u, `Wi-Fi Calling is now ${onOff(toggleWifiCalling(u))}.`),
  ),
  tool('check_vpn_status', 'read', 'Shows whether a VPN is on and connected, with its connection details.', (u) => {
    const d = u.device;
    if (d.vpn_connected)
      return d.vpn_details
        ? `VPN is ON and connected. Details: ${vpnDetailsRepr(d.vpn_details)}`
        : 'VPN is ON and connected (no specific details available).';
    if (d.vpn_enabled_setting) return 'VPN is turned ON in settings, but currently not connected.';
    return 'VPN is turned OFF.';
  }),
  tool('connect_vpn', 'write', 'Connects to the VPN.', (u) =>
    connectVpn(u) === null ? 'VPN already connected.' : withBar(u, 'VPN connected successfully.'),
  ),
  tool(
    'disconnect_vpn',
    'write',
    'Disconnects the active VPN connection, which can change the connection speed.',
    (u) => withBar(u, disconnectVpn(u) ? 'VPN disconnected successfully.' : 'No active VPN connection to disconnect.'),
  ),
  tool(
    'check_installed_apps',
    'read',
    'Lists the apps installed on the phone.',
    (u) => `The following apps are installed on the phone: ${Object.keys(u.device.app_statuses).join(', ')}`,
  ),
  defineTool({
    name: 'check_app_status',
    kind: 'read',
    description: "Shows an app's details, including its permissions.",
    params: { app_name: APP_NAME },
    run: (s, a) => {
      const app = s.user.data.device.app_statuses[a.app_name];
      if (!app) return `App '${a.app_name}' not found on this phone.`;
      const granted = grantedList(app.permissions);
      const lines = [`Status for App: ${a.app_name}`];
      if (granted.length === 0) lines.push(' - Permissions: None granted.');
      else lines.push(' - Permissions Granted:', ...granted.map((p) => `   - ${p}`));
      return lines.join('\n');
    },
  }),
  defineTool({
    name: 'check_app_permissions',
    kind: 'read',
    description: 'Shows which permissions an app has (storage, SMS, phone, network).',
    params: { app_name: APP_NAME },
    run: (s, a) => {
      const app = s.user.data.device.app_statuses[a.app_name];
      if (!app) return `App '${a.app_name}' not found on this phone.`;
      const granted = grantedList(app.permissions);
      return granted.length === 0
        ? `App '${a.app_name}' currently has no permissions granted.`
        : `App '${a.app_name}' has permission for: ${granted.join(', ')}.`;
    },
  }),
  defineTool({
    name: 'grant_app_permission',
    kind: 'write',
    description: 'Gives an app one permission (such as storage or sms) that it needs to work.',
    params: {
      app_name: APP_NAME,
      permission: z.string().describe('The permission to grant, in lowercase (sms, storage, phone, network).'),
    },
    run: (s, a) => {
      const u = s.user.data;
      const app = u.device.app_statuses[a.app_name];
      const perm = a.permission.toLowerCase();
      let msg: string;
      if (!app) msg = `Error. App '${a.app_name}' not found. Cannot grant permission.`;
      else if (!(APP_PERMISSIONS as readonly string[]).includes(perm))
        msg = `Error. Permission '${perm}' not tracked for app '${a.app_name}', available permissions: [${APP_PERMISSIONS.map((p) => `'${p}'`).join(', ')}]`;
      else {
        app.permissions[perm as AppPermission] = true;
        msg = `Success. Permission '${perm}' granted to app '${a.app_name}'.`;
      }
      return withBar(u, msg);
    },
  }),
  tool('can_send_mms', 'read', 'Checks whether the messaging app can send MMS (picture) messages.', (u) =>
    canSendMms(u) ? 'Your messaging app can send MMS messages.' : 'Your messaging app cannot send MMS messages.',
  ),
  tool('reboot_device', 'write', 'Restarts the phone, which refreshes its services and connections.', (u) =>
    withBar(u, reboot(u).join('\n')),
  ),
  tool('check_payment_request', 'read', 'Shows whether the agent has sent you a payment request.', (u) => {
    const p = u.surroundings.payment_request;
    return p === null
      ? 'No payment request has been made.'
      : `You have a payment request for bill ${p.bill_id} of ${pyFloatRepr(p.amount_due)} USD.`;
  }),
  tool('make_payment', 'write', 'Pays the bill of the payment request the agent sent you.', (u) => {
    const p = u.surroundings.payment_request;
    if (p === null) return 'You do not have a payment request.';
    p.paid = true;
    return `Payment of ${pyFloatRepr(p.amount_due)} USD has been made for bill ${p.bill_id}.`;
  }),
];

/** The user's toolkit. */
export function telecomUserToolkit(): Toolkit<TelecomState> {
  return new Toolkit(TELECOM_USER_TOOLS);
}

function setup(
  name: string,
  params: z.ZodRawShape,
  run: (u: TelecomUserData, a: Record<string, unknown>) => string,
): T {
  return defineTool({
    name,
    kind: 'write',
    description: `Task set-up: ${name.replace(/_/g, ' ')}.`,
    params,
    run: (s, a) => run(s.user.data, a),
  });
}

function turn(
  name: string,
  get: (u: TelecomUserData) => boolean,
  toggle: (u: TelecomUserData) => unknown,
  want: boolean,
  text: string,
): T {
  return setup(name, {}, (u) => {
    if (get(u) !== want) toggle(u);
    return text;
  });
}

/** Phone set-up functions tasks may call in `initialization_actions` (not user tools). */
export const TELECOM_USER_ENV_FUNCTIONS: readonly T[] = [
  setup('set_user_info', { name: z.string(), phone_number: z.string() }, (u, a) => {
    u.surroundings.name = a.name as string;
    u.surroundings.phone_number = a.phone_number as string;
    return `User info set: ${a.name as string}, ${a.phone_number as string}`;
  }),
  setup('set_user_location', { abroad: z.boolean() }, (u, a) => {
    u.surroundings.is_abroad = a.abroad as boolean;
    return `User location set to ${a.abroad ? 'abroad' : 'home'}`;
  }),
  // tau2 flips by toggling (each toggle runs a network search), so reproduce that
  setup('turn_airplane_mode_on', {}, (u) => {
    if (!toggleAirplaneMode(u)) toggleAirplaneMode(u);
    return 'Airplane Mode is now ON.';
  }),
  setup('turn_airplane_mode_off', {}, (u) => {
    if (toggleAirplaneMode(u)) toggleAirplaneMode(u);
    return 'Airplane Mode is now OFF.';
  }),
  setup('turn_data_on', {}, (u) => {
    u.device.data_enabled = true; // tau2 sets the switch without a network search
    return 'Data connection restored.';
  }),
  setup('turn_data_off', {}, (u) => {
    if (toggleData(u)) toggleData(u);
    return 'Data connection broken.';
  }),
  setup('turn_roaming_on', {}, (u) => {
    if (!toggleRoaming(u)) toggleRoaming(u);
    return 'Data Roaming is now ON.';
  }),
  setup('turn_roaming_off', {}, (u) => {
    if (toggleRoaming(u)) toggleRoaming(u);
    return 'Data Roaming is now OFF.';
  }),
  turn('turn_data_saver_mode_on', (u) => u.device.data_saver_mode, toggleDataSaver, true, 'Data Saver Mode is now ON.'),
  turn(
    'turn_data_saver_mode_off',
    (u) => u.device.data_saver_mode,
    toggleDataSaver,
    false,
    'Data Saver Mode is now OFF.',
  ),
  setup('unseat_sim_card', {}, (u) => {
    u.device.sim_card_missing = true;
    simulateNetworkSearch(u);
    return 'SIM card un-seated successfully.';
  }),
  setup('lock_sim_card', { mode: z.enum(['pin', 'puk']) }, (u, a) => {
    u.device.sim_card_status = a.mode === 'pin' ? 'locked_pin' : 'locked_puk';
    simulateNetworkSearch(u);
    return `SIM card locked successfully in ${a.mode as string} mode.`;
  }),
  setup('break_apn_settings', {}, (u) => {
    u.device.active_apn_settings.apn_name = 'broken';
    simulateNetworkSearch(u);
    return 'APN settings broken. Please call reset_apn_settings() to fix.';
  }),
  setup('break_apn_mms_setting', {}, (u) => {
    u.device.active_apn_settings.mmsc_url = null;
    return 'APN MMS setting broken. Please call reset_apn_settings() to fix.';
  }),
  setup('set_wifi_calling', { enabled: z.boolean(), mms_over_wifi: z.boolean().nullable().optional() }, (u, a) => {
    if (u.device.wifi_calling_enabled !== a.enabled) toggleWifiCalling(u);
    let msg = `Wi-Fi Calling is now ${onOff(a.enabled as boolean)}.`;
    if (typeof a.mms_over_wifi === 'boolean') {
      u.device.wifi_calling_mms_over_wifi = a.mms_over_wifi;
      msg += `\nMMS over Wi-Fi is now ${onOff(a.mms_over_wifi)}.`;
    }
    return msg;
  }),
  setup('break_vpn', {}, (u) => {
    connectVpn(u);
    if (u.device.vpn_details) u.device.vpn_details.server_performance = 'poor';
    return 'VPN connection broken.';
  }),
  setup('remove_app_permission', { app_name: z.string(), permission: z.string() }, (u, a) => {
    const app = u.device.app_statuses[a.app_name as string];
    const perm = (a.permission as string).toLowerCase();
    if (!app) return `App '${a.app_name as string}' not found. Cannot remove permission.`;
    if (!(APP_PERMISSIONS as readonly string[]).includes(perm))
      return `Permission '${perm}' not tracked for app '${a.app_name as string}'.`;
    app.permissions[perm as AppPermission] = false;
    return `Permission '${perm}' removed from app '${a.app_name as string}'.`;
  }),
  setup('simulate_network_search', {}, (u) => {
    simulateNetworkSearch(u);
    return 'Network search done.';
  }),
];

function parse<S extends z.ZodRawShape>(
  shape: S,
  args: Record<string, unknown>,
  name: string,
): z.infer<z.ZodObject<S>> {
  const r = z.strictObject(shape).safeParse(args);
  if (!r.success)
    throw new TypeError(
      `${name}: invalid arguments (${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')})`,
    );
  return r.data;
}

const expectBool = { expected_status: z.boolean() };

/** Phone assertions (tau2's `assert_*` functions of the user toolkit). */
export const TELECOM_USER_ASSERTIONS: Readonly<
  Record<string, (state: TelecomState, args: Record<string, unknown>) => boolean>
> = {
  assert_airplane_mode_status: (s, args) =>
    s.user.device.airplane_mode === parse(expectBool, args, 'assert_airplane_mode_status').expected_status,
  assert_service_status: (s, args) =>
    s.user.device.network_connection_status ===
    parse({ expected_status: z.enum(NETWORK_STATUSES) }, args, 'assert_service_status').expected_status,
  assert_mobile_data_status: (s, args) =>
    mobileDataWorking(s.user.data) === parse(expectBool, args, 'assert_mobile_data_status').expected_status,
  assert_mobile_roaming_status: (s, args) =>
    s.user.device.roaming_enabled === parse(expectBool, args, 'assert_mobile_roaming_status').expected_status,
  assert_mobile_data_saver_mode_status: (s, args) =>
    s.user.device.data_saver_mode === parse(expectBool, args, 'assert_mobile_data_saver_mode_status').expected_status,
  assert_internet_speed(s, args) {
    const a = parse(
      { expected_speed: z.number(), expected_desc: z.string().nullable().optional() },
      args,
      'assert_internet_speed',
    );
    const r = speedTest(s.user.data);
    const speed = r.mbps ?? 0;
    if (a.expected_desc === undefined || a.expected_desc === null) return speed >= a.expected_speed;
    return speed >= a.expected_speed && r.description.toLowerCase() === a.expected_desc.toLowerCase();
  },
  assert_internet_not_excellent(s, args) {
    parse({}, args, 'assert_internet_not_excellent');
    return speedTest(s.user.data).description.toLowerCase() !== 'excellent';
  },
  assert_can_send_mms: (s, args) =>
    canSendMms(s.user.data) === parse(expectBool, args, 'assert_can_send_mms').expected_status,
  assert_mobile_data_usage_exceeded: (s, args) =>
    s.user.surroundings.mobile_data_usage_exceeded ===
    parse(expectBool, args, 'assert_mobile_data_usage_exceeded').expected_status,
};
