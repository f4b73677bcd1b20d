/**
 * The user's side of the telecom world (tau2's `TelecomUserDB`): a mock phone (SIM, airplane
 * mode, signal, network mode, mobile data, roaming, APN, Wi-Fi and Wi-Fi calling, data saver,
 * VPN, app permissions) and its surroundings (who and where the user is, the signal per
 * technology there, and what the backend lets the line do). Defaults are tau2's.
 * @module
 */
import { createHash } from 'node:crypto';

import { pyJsonDumps } from '../../pyjson.js';

/** SIM states. */
export const SIM_STATUSES = ['active', 'missing', 'locked_pin', 'locked_puk'] as const;
/** A SIM state. */
export type SimStatus = (typeof SIM_STATUSES)[number];
/** Radio technologies. */
export const NETWORK_TECHNOLOGIES = ['none', '2G', '3G', '4G', '5G'] as const;
/** A radio technology. */
export type NetworkTechnology = (typeof NETWORK_TECHNOLOGIES)[number];
/** Network mode preferences. */
export const NETWORK_MODES = ['4g_5g_preferred', '4g_only', '3g_only', '2g_only'] as const;
/** A network mode preference. */
export type NetworkModePreference = (typeof NETWORK_MODES)[number];
/** Signal strengths. */
export const SIGNAL_STRENGTHS = ['none', 'poor', 'fair', 'good', 'excellent'] as const;
/** A signal strength. */
export type SignalStrength = (typeof SIGNAL_STRENGTHS)[number];
/** VPN server performance levels. */
export const PERFORMANCE_LEVELS = ['unknown', 'poor', 'fair', 'good', 'excellent'] as const;
/** A performance level. */
export type PerformanceLevel = (typeof PERFORMANCE_LEVELS)[number];
/** Cellular connection states. */
export const NETWORK_STATUSES = ['connected', 'searching', 'no_service', 'emergency_only'] as const;
/** A cellular connection state. */
export type NetworkStatus = (typeof NETWORK_STATUSES)[number];
/** APN names. */
export const APN_NAMES = ['internet', 'broken'] as const;
/** An APN name. */
export type ApnName = (typeof APN_NAMES)[number];
/** The permissions tracked per app (tau2's `AppPermissions` fields, in order). */
export const APP_PERMISSIONS = ['sms', 'storage', 'phone', 'network'] as const;
/** An app permission. */
export type AppPermission = (typeof APP_PERMISSIONS)[number];

/** APN configuration. */
export interface ApnSettings {
  /** APN name (`broken` means no service). */
  apn_name: ApnName;
  /** Whether the default settings come back at the next reboot. */
  reset_at_reboot: boolean;
  /** APN used for MMS. */
  mms_apn: string | null;
  /** MMS centre URL (null: MMS cannot be sent). */
  mmsc_url: string | null;
  /** MMS proxy. */
  mms_proxy: string | null;
  /** MMS proxy port. */
  mms_port: number | null;
}

/** Details of a VPN connection. */
export interface VpnDetails {
  /** VPN server address. */
  server_address: string | null;
  /** VPN protocol. */
  protocol: string | null;
  /** VPN server performance (poor slows data to 10%). */
  server_performance: PerformanceLevel;
}

/** An app and its permissions. */
export interface AppStatus {
  /** App name. */
  app_name: string;
  /** Permission switches. */
  permissions: Record<AppPermission, boolean>;
}

/** The phone (tau2's `MockPhoneAttributes`, same field order). */
export interface PhoneDevice {
  /** SIM state. */
  sim_card_status: SimStatus;
  /** Whether the SIM is out of its slot. */
  sim_card_missing: boolean;
  /** Airplane mode. */
  airplane_mode: boolean;
  /** Current cellular signal. */
  network_signal_strength: SignalStrength;
  /** Current radio technology. */
  network_technology_connected: NetworkTechnology;
  /** Cellular connection state. */
  network_connection_status: NetworkStatus;
  /** Battery level (0–100, an int). */
  battery_level: number;
  /** Mobile data switch. */
  data_enabled: boolean;
  /** Whether roaming is enabled. */
  roaming_enabled: boolean;
  /** Preferred network mode. */
  network_mode_preference: NetworkModePreference;
  /** APN settings in use. */
  active_apn_settings: ApnSettings;
  /** Wi-Fi radio. */
  wifi_enabled: boolean;
  /** Whether Wi-Fi is connected. */
  wifi_connected: boolean;
  /** Connected Wi-Fi network. */
  wifi_ssid: string | null;
  /** Wi-Fi signal. */
  wifi_signal_strength: SignalStrength;
  /** Wi-Fi calling. */
  wifi_calling_enabled: boolean;
  /** Whether MMS go over Wi-Fi calling (the carrier does not support it). */
  wifi_calling_mms_over_wifi: boolean;
  /** Data saver (slows data to 20%). */
  data_saver_mode: boolean;
  /** VPN switched on in settings. */
  vpn_enabled_setting: boolean;
  /** Whether a VPN tunnel is up. */
  vpn_connected: boolean;
  /** The VPN connection, when up. */
  vpn_details: VpnDetails | null;
  /** Apps by name. */
  app_statuses: Record<string, AppStatus>;
}

/** A payment the agent asked the user to make. */
export interface PaymentRequest {
  /** Bill id, e.g. `B1001`. */
  bill_id: string;
  /** Amount (USD). */
  amount_due: number;
  /** Whether the user paid it. */
  paid: boolean;
}

/** Where the user is and what the backend allows (tau2's `UserSurroundings`). */
export interface Surroundings {
  /** User name. */
  name: string | null;
  /** The user's phone number (links the phone to a line). */
  phone_number: string | null;
  /** Whether the user is abroad. */
  is_abroad: boolean;
  /** Whether the user's line allows roaming (synced). */
  roaming_allowed: boolean;
  /** Signal per technology where the user is. */
  signal_strength: Record<Exclude<NetworkTechnology, 'none'>, SignalStrength>;
  /** Whether the line's allowance is used up (synced). */
  mobile_data_usage_exceeded: boolean;
  /** Whether the user's line is active (synced). */
  line_active: boolean;
  /** The payment the agent asked for (synced from the backend). */
  payment_request: PaymentRequest | null;
}

/** The user's database. */
export interface TelecomUserData {
  /** The phone. */
  device: PhoneDevice;
  /** Where the user is. */
  surroundings: Surroundings;
}

/** tau2's default APN settings (what a reset restores at reboot). */
export function defaultApnSettings(): ApnSettings {
  return {
    apn_name: 'internet',
    reset_at_reboot: false,
    mms_apn: 'mms',
    mmsc_url: 'http://mms.carrier.com/mms/wapenc',
    mms_proxy: null,
    mms_port: null,
  };
}

/** A healthy phone with tau2's defaults. */
export function defaultDevice(): PhoneDevice {
  return {
    sim_card_status: 'active',
    sim_card_missing: false,
    airplane_mode: false,
    network_signal_strength: 'good',
    network_technology_connected: '5G',
    network_connection_status: 'connected',
    battery_level: 80,
    data_enabled: true,
    roaming_enabled: false,
    network_mode_preference: '4g_5g_preferred',
    active_apn_settings: defaultApnSettings(),
    wifi_enabled: false,
    wifi_connected: false,
    wifi_ssid: null,
    wifi_signal_strength: 'none',
    wifi_calling_enabled: false,
    wifi_calling_mms_over_wifi: false,
    data_saver_mode: false,
    vpn_enabled_setting: false,
    vpn_connected: false,
    vpn_details: null,
    app_statuses: {
      messaging: { app_name: 'messaging', permissions: { sms: true, storage: true, phone: true, network: false } },
      browser: { app_name: 'browser', permissions: { sms: false, storage: true, phone: false, network: true } },
    },
  };
}

/** tau2's default surroundings: at home, no user yet, 2G poor / 3G fair / 4G good / 5G excellent. */
export function defaultSurroundings(): Surroundings {
  return {
    name: null,
    phone_number: null,
    is_abroad: false,
    roaming_allowed: false,
    signal_strength: { '2G': 'poor', '3G': 'fair', '4G': 'good', '5G': 'excellent' },
    mobile_data_usage_exceeded: false,
    line_active: true,
    payment_request: null,
  };
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * Merges `patch` into `base` like tau2's `update_pydantic_model_with_dict`: objects merge key
 * by key, anything else replaces. Returns a new value; neither input is changed.
 */
function mergePatch(base: unknown, patch: unknown): unknown {
  if (!isObj(patch) || !isObj(base)) return structuredClone(patch);
  const out: Obj = { ...base };
  for (const [k, v] of Object.entries(patch)) out[k] = mergePatch(base[k], v);
  return out;
}

function check(cond: boolean, where: string, what: string): void {
  if (!cond) throw new TypeError(`${where}: expected ${what}`);
}

function checkShape(
  value: unknown,
  template: unknown,
  where: string,
  enums: Record<string, readonly string[]>,
  key = '',
): void {
  if (key in enums) {
    check(typeof value === 'string' && enums[key].includes(value), where, `one of ${enums[key].join(', ')}`);
    return;
  }
  if (template === null) return; // optional field: null or any JSON scalar / object of its kind (checked by callers)
  if (typeof template === 'boolean') return check(typeof value === 'boolean', where, 'a boolean');
  if (typeof template === 'number')
    return check(typeof value === 'number' && Number.isFinite(value), where, 'a number');
  if (typeof template === 'string') return check(typeof value === 'string', where, 'a string');
  check(isObj(value), where, 'an object');
  const v = value as Obj;
  const t = template as Obj;
  for (const k of Object.keys(v)) if (!(k in t)) throw new TypeError(`${where}.${k}: unknown field`);
  for (const k of Object.keys(t)) checkShape(v[k], t[k], `${where}.${k}`, enums, k);
}

const DEVICE_ENUMS: Record<string, readonly string[]> = {
  sim_card_status: SIM_STATUSES,
  network_signal_strength: SIGNAL_STRENGTHS,
  network_technology_connected: NETWORK_TECHNOLOGIES,
  network_connection_status: NETWORK_STATUSES,
  network_mode_preference: NETWORK_MODES,
  wifi_signal_strength: SIGNAL_STRENGTHS,
  apn_name: APN_NAMES,
  server_performance: PERFORMANCE_LEVELS,
  '2G': SIGNAL_STRENGTHS,
  '3G': SIGNAL_STRENGTHS,
  '4G': SIGNAL_STRENGTHS,
  '5G': SIGNAL_STRENGTHS,
};

function checkOptional(v: unknown, where: string, type: 'string' | 'number'): void {
  check(v === null || typeof v === type, where, `a ${type} or null`);
}

const DEVICE_TEMPLATE = (() => {
  const t = defaultDevice() as unknown as Obj;
  delete t.app_statuses;
  delete t.vpn_details;
  t.wifi_ssid = null;
  t.active_apn_settings = {
    apn_name: 'internet',
    reset_at_reboot: false,
    mms_apn: null,
    mmsc_url: null,
    mms_proxy: null,
    mms_port: null,
  };
  return t;
})();

const SURROUNDINGS_TEMPLATE = (() => {
  const t = defaultSurroundings() as unknown as Obj;
  delete t.payment_request;
  return t;
})();

/** Validates a full user DB (after defaults are merged in); throws TypeError naming a bad field. */
export function checkUserData(data: TelecomUserData): TelecomUserData {
  check(isObj(data.device), 'device', 'an object');
  check(isObj(data.surroundings), 'surroundings', 'an object');
  const d = data.device as unknown as Obj;
  const { app_statuses: apps, vpn_details: vpn, ...rest } = d;
  checkShape(rest, DEVICE_TEMPLATE, 'device', DEVICE_ENUMS);
  checkOptional(d.wifi_ssid, 'device.wifi_ssid', 'string');
  const apn = d.active_apn_settings as Obj;
  for (const k of ['mms_apn', 'mmsc_url', 'mms_proxy'] as const)
    checkOptional(apn[k], `device.active_apn_settings.${k}`, 'string');
  checkOptional(apn.mms_port, 'device.active_apn_settings.mms_port', 'number');
  if (vpn !== null) {
    checkShape(
      vpn,
      { server_address: null, protocol: null, server_performance: 'unknown' },
      'device.vpn_details',
      DEVICE_ENUMS,
    );
    checkOptional((vpn as Obj).server_address, 'device.vpn_details.server_address', 'string');
    checkOptional((vpn as Obj).protocol, 'device.vpn_details.protocol', 'string');
  }
  check(isObj(apps), 'device.app_statuses', 'an object');
  for (const [name, app] of Object.entries(apps as Obj)) {
    checkShape(
      app,
      { app_name: '', permissions: { sms: false, storage: false, phone: false, network: false } },
      `device.app_statuses.${name}`,
      DEVICE_ENUMS,
    );
  }
  const s = data.surroundings as unknown as Obj;
  const { payment_request: pr, ...srest } = s;
  checkShape(srest, SURROUNDINGS_TEMPLATE, 'surroundings', DEVICE_ENUMS);
  checkOptional(s.name, 'surroundings.name', 'string');
  checkOptional(s.phone_number, 'surroundings.phone_number', 'string');
  if (pr !== null)
    checkShape(pr, { bill_id: '', amount_due: 0, paid: false }, 'surroundings.payment_request', DEVICE_ENUMS);
  return data;
}

/** Fills an app's missing permissions with false (tau2's `AppPermissions` defaults). */
function withAppDefaults(apps: unknown): unknown {
  if (!isObj(apps)) return apps;
  const out: Obj = {};
  for (const [k, v] of Object.entries(apps)) {
    out[k] = isObj(v)
      ? {
          ...v,
          permissions: {
            sms: false,
            storage: false,
            phone: false,
            network: false,
            ...(isObj(v.permissions) ? v.permissions : {}),
          },
        }
      : v;
  }
  return out;
}

const INT_KEYS: ReadonlySet<string> = new Set(['battery_level', 'mms_port']);

/** The user's phone and surroundings; plain mutable data, deep-copied on fork (it is small). */
export class TelecomUserDb {
  private constructor(/** The data (mutated in place by user tools and sync). */ public data: TelecomUserData) {}

  /**
   * Builds the user DB from JSON or parsed TOML in tau2's `user_db` shape (`{ device,
   * surroundings }`, either part optional): given fields over tau2's defaults, validated.
   */
  static fromJSON(data: unknown = {}): TelecomUserDb {
    if (!isObj(data)) throw new TypeError('user db: expected an object');
    for (const k of Object.keys(data))
      if (k !== 'device' && k !== 'surroundings') throw new TypeError(`user db: unknown field ${k}`);
    const device = isObj(data.device)
      ? {
          ...data.device,
          ...(data.device.app_statuses !== undefined
            ? { app_statuses: withAppDefaults(data.device.app_statuses) }
            : {}),
        }
      : data.device;
    const merged = {
      device: device === undefined ? defaultDevice() : mergeDefaults(defaultDevice(), device, 'device'),
      surroundings:
        data.surroundings === undefined
          ? defaultSurroundings()
          : mergeDefaults(defaultSurroundings(), data.surroundings, 'surroundings'),
    } as TelecomUserData;
    return new TelecomUserDb(checkUserData(merged));
  }

  /** An independent deep copy. */
  fork(): TelecomUserDb {
    return new TelecomUserDb(structuredClone(this.data));
  }

  /** The phone. */
  get device(): PhoneDevice {
    return this.data.device;
  }

  /** The surroundings. */
  get surroundings(): Surroundings {
    return this.data.surroundings;
  }

  /** Applies a partial update (tau2's `update_pydantic_model_with_dict` on the user DB) and validates. */
  update(patch: unknown): void {
    if (!isObj(patch)) throw new TypeError('user_data: expected an object');
    const next = mergePatch(this.data, patch) as TelecomUserData;
    this.data = checkUserData(next);
  }

  /** `json.dumps(model_dump(), sort_keys=True, default=str)` of tau2's TelecomUserDB. */
  canonicalJSON(): string {
    return pyJsonDumps(this.data, { sortKeys: true, intKeys: INT_KEYS });
  }

  /** SHA-256 (hex) of {@link canonicalJSON}: tau2's user DB hash. */
  hash(): string {
    return createHash('sha256').update(this.canonicalJSON(), 'utf8').digest('hex');
  }
}

/** Default fields for a pydantic model given as a partial dict (`app_statuses` replaces whole). */
function mergeDefaults(defaults: unknown, given: unknown, where: string): unknown {
  if (!isObj(given)) throw new TypeError(`${where}: expected an object`);
  const out: Obj = { ...(defaults as Obj) };
  for (const [k, v] of Object.entries(given)) {
    if (k === 'app_statuses' || k === 'signal_strength' || k === 'vpn_details' || k === 'payment_request')
      out[k] = structuredClone(v);
    else if (isObj(v) && isObj(out[k])) out[k] = mergeDefaults(out[k], v, `${where}.${k}`);
    else out[k] = structuredClone(v);
  }
  return out;
}
