/**
 * How the mock phone behaves (tau2's telecom user-tool semantics): network search, whether
 * mobile data works, the speed test, whether MMS can be sent, the status bar, and the
 * toggles and fixes the user can perform. Pure functions over {@link TelecomUserData}.
 * @module
 */
import { pyRound2 } from '../../pyjson.js';
import type { NetworkModePreference, NetworkTechnology, SignalStrength, SimStatus, TelecomUserData } from './device.js';
import { defaultApnSettings, NETWORK_MODES } from './device.js';

/** The SIM state as the phone reports it (a missing card wins over its status). */
export function simStatus(u: TelecomUserData): SimStatus {
  return u.device.sim_card_missing ? 'missing' : u.device.sim_card_status;
}

function setNoService(u: TelecomUserData): void {
  u.device.network_connection_status = 'no_service';
  u.device.network_technology_connected = 'none';
  u.device.network_signal_strength = 'none';
}

function signalFor(u: TelecomUserData, tech: Exclude<NetworkTechnology, 'none'>): SignalStrength {
  return u.surroundings.signal_strength[tech] ?? 'none';
}

/**
 * tau2's `simulate_network_search`: an active SIM connects with the technology the network
 * mode prefers (4G/5G preferred takes 5G when it has signal here, else 4G) at the local signal
 * strength; a missing or locked SIM, airplane mode, a broken APN or an inactive line leave the
 * phone without service.
 */
export function simulateNetworkSearch(u: TelecomUserData): void {
  const d = u.device;
  if (simStatus(u) === 'active') {
    d.network_connection_status = 'connected';
    const pref = d.network_mode_preference;
    let tech: Exclude<NetworkTechnology, 'none'> = '4G';
    if (pref === '4g_5g_preferred') tech = signalFor(u, '5G') === 'none' ? '4G' : '5G';
    else if (pref === '3g_only') tech = '3G';
    else if (pref === '2g_only') tech = '2G';
    d.network_technology_connected = tech;
    d.network_signal_strength = signalFor(u, tech);
  } else setNoService(u);
  if (d.airplane_mode) setNoService(u);
  if (d.active_apn_settings.apn_name === 'broken') setNoService(u);
  if (!u.surroundings.line_active) setNoService(u);
}

/**
 * Whether mobile data works: no airplane mode, some signal, service, roaming allowed on both
 * the phone and the line when abroad, data switched on, and the data allowance not exceeded.
 */
export function mobileDataWorking(u: TelecomUserData): boolean {
  const d = u.device;
  if (d.airplane_mode || d.network_signal_strength === 'none') return false;
  if (d.network_connection_status === 'no_service') return false;
  if (u.surroundings.is_abroad && (!d.roaming_enabled || !u.surroundings.roaming_allowed)) return false;
  if (!d.data_enabled) return false;
  if (u.surroundings.mobile_data_usage_exceeded) return false;
  return true;
}

/** Speed-test bands (download Mbps): below 1 very poor, 5 poor, 25 fair, 100 good, else excellent. */
export type SpeedDescription = 'Very Poor' | 'Poor' | 'Fair' | 'Good' | 'Excellent';

const TECH_SPEED: Record<NetworkTechnology, [number, number]> = {
  none: [0, 0],
  '2G': [0.1, 0.4],
  '3G': [1, 5],
  '4G': [10, 100],
  '5G': [50, 500],
};
const SIGNAL_FACTOR: Record<SignalStrength, number> = { none: 0, poor: 0.2, fair: 0.5, good: 0.8, excellent: 1 };

/** The band of a speed. */
export function speedBand(mbps: number): SpeedDescription {
  if (mbps < 1) return 'Very Poor';
  if (mbps < 5) return 'Poor';
  if (mbps < 25) return 'Fair';
  if (mbps < 100) return 'Good';
  return 'Excellent';
}

/**
 * tau2's simulated speed test: null with "No Connection" when mobile data does not work;
 * otherwise the middle of the technology's range times the signal factor, times 0.1 with a
 * poorly performing VPN and 0.2 with data saver on, rounded to 2 decimals.
 */
export function speedTest(u: TelecomUserData): {
  mbps: number | null;
  description: SpeedDescription | 'No Connection';
} {
  if (!mobileDataWorking(u)) return { mbps: null, description: 'No Connection' };
  const d = u.device;
  let base = d.vpn_connected && d.vpn_details && d.vpn_details.server_performance === 'poor' ? 0.1 : 1.0;
  if (d.data_saver_mode) base *= 0.2;
  const [lo, hi] = TECH_SPEED[d.network_technology_connected];
  const mbps = pyRound2(((lo + hi) / 2.0) * SIGNAL_FACTOR[d.network_signal_strength] * base);
  return { mbps, description: speedBand(mbps) };
}

/** Whether the messaging app can send MMS: working data, 3G or better, no MMS-over-Wi-Fi calling, an MMSC URL, SMS and storage permissions. */
export function canSendMms(u: TelecomUserData): boolean {
  const d = u.device;
  if (!mobileDataWorking(u)) return false;
  if (d.network_technology_connected === '2G') return false;
  if (d.wifi_calling_enabled && d.wifi_calling_mms_over_wifi) return false;
  if (d.active_apn_settings.mmsc_url === null) return false;
  const app = d.app_statuses.messaging;
  if (!app) return false;
  return app.permissions.storage && app.permissions.sms;
}

const SIGNAL_ICON: Record<SignalStrength, string> = {
  none: '📵 No Signal',
  poor: '📶¹ Poor',
  fair: '📶² Fair',
  good: '📶³ Good',
  excellent: '📶⁴ Excellent',
};

/** The status bar text (icons joined by ` | `), as tau2 renders it. */
export function statusBar(u: TelecomUserData): string {
  const d = u.device;
  const parts: string[] = [];
  if (d.airplane_mode) parts.push('✈️ Airplane Mode');
  else {
    parts.push(SIGNAL_ICON[d.network_signal_strength] ?? '📵 No Signal');
    if (d.network_technology_connected !== 'none') parts.push(d.network_technology_connected);
    if (d.data_enabled && d.network_technology_connected !== 'none') {
      parts.push('📱 Data Enabled');
      if (d.data_saver_mode) parts.push('🔽 Data Saver');
    } else parts.push('📵 Data Disabled');
  }
  if (d.wifi_enabled && d.wifi_connected) parts.push(d.wifi_ssid ? `📡 Connected to ${d.wifi_ssid}` : '📡 Enabled');
  if (d.vpn_connected) parts.push('🔒 VPN Connected');
  parts.push(`🔋 ${d.battery_level}%`);
  return parts.join(' | ');
}

/** Disconnects the VPN; false when none was connected. */
export function disconnectVpn(u: TelecomUserData): boolean {
  if (!u.device.vpn_connected) return false;
  u.device.vpn_connected = false;
  u.device.vpn_details = null;
  return true;
}

/** Connects the VPN with tau2's default server (excellent performance); null when already connected. */
export function connectVpn(u: TelecomUserData): true | null {
  if (u.device.vpn_connected) return null;
  u.device.vpn_connected = true;
  u.device.vpn_details = { server_address: '192.168.1.1', protocol: 'OpenVPN', server_performance: 'excellent' };
  return true;
}

/** Toggles airplane mode (turning it on drops Wi-Fi and the VPN; off starts a search); returns the new state. */
export function toggleAirplaneMode(u: TelecomUserData): boolean {
  const d = u.device;
  const wasOn = d.airplane_mode;
  d.airplane_mode = !wasOn;
  if (wasOn) {
    d.network_connection_status = 'searching';
    if (d.wifi_enabled) {
      d.wifi_connected = false;
      d.wifi_ssid = null;
      d.wifi_signal_strength = 'none';
    }
  } else {
    d.wifi_connected = false;
    d.wifi_ssid = null;
    d.wifi_signal_strength = 'none';
    if (d.vpn_connected) disconnectVpn(u);
  }
  simulateNetworkSearch(u);
  return d.airplane_mode;
}

/** Toggles the mobile data switch (then searches); returns the new state. */
export function toggleData(u: TelecomUserData): boolean {
  u.device.data_enabled = !u.device.data_enabled;
  simulateNetworkSearch(u);
  return u.device.data_enabled;
}

/** Toggles data roaming (then searches); returns the new state. */
export function toggleRoaming(u: TelecomUserData): boolean {
  u.device.roaming_enabled = !u.device.roaming_enabled;
  simulateNetworkSearch(u);
  return u.device.roaming_enabled;
}

/** Toggles data saver; returns the new state. */
export function toggleDataSaver(u: TelecomUserData): boolean {
  u.device.data_saver_mode = !u.device.data_saver_mode;
  return u.device.data_saver_mode;
}

/** Toggles Wi-Fi (not possible in airplane mode: null); turning it off disconnects. */
export function toggleWifi(u: TelecomUserData): boolean | null {
  const d = u.device;
  if (d.airplane_mode) return null;
  d.wifi_enabled = !d.wifi_enabled;
  if (!d.wifi_enabled) {
    d.wifi_connected = false;
    d.wifi_ssid = null;
    d.wifi_signal_strength = 'none';
  }
  return d.wifi_enabled;
}

/** Toggles Wi-Fi calling; returns the new state. */
export function toggleWifiCalling(u: TelecomUserData): boolean {
  u.device.wifi_calling_enabled = !u.device.wifi_calling_enabled;
  return u.device.wifi_calling_enabled;
}

/** Sets the network mode (then searches); null for an unknown mode (nothing changes). */
export function setNetworkMode(u: TelecomUserData, mode: string): NetworkModePreference | null {
  if (!(NETWORK_MODES as readonly string[]).includes(mode)) return null;
  u.device.network_mode_preference = mode as NetworkModePreference;
  simulateNetworkSearch(u);
  return mode as NetworkModePreference;
}

/** Reboots: applies a pending APN reset, then restarts network services (a search). Returns the log lines. */
export function reboot(u: TelecomUserData): string[] {
  const lines: string[] = [];
  if (u.device.active_apn_settings.reset_at_reboot) {
    lines.push('Resetting APN settings...');
    u.device.active_apn_settings = defaultApnSettings();
  }
  lines.push('Restarting network services...');
  u.device.network_connection_status = 'searching';
  simulateNetworkSearch(u);
  return lines;
}
