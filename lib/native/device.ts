import { loadAddon } from './loader.js';
import { DeviceUnavailableError } from './errors.js';

/** Where a kernel runs: `'cuda'` needs a GPU build and a GPU; `'auto'` picks CUDA when usable. */
export type DeviceRequest = 'cpu' | 'cuda' | 'auto';
/** A resolved device. */
export type Device = 'cpu' | 'cuda';

const DEVICE_REQUESTS: readonly DeviceRequest[] = ['cpu', 'cuda', 'auto'];

/** True when this binary has CUDA kernels and a usable GPU. */
export function cudaAvailable(): boolean {
  return loadAddon().cudaStatus().devices > 0;
}

/**
 * Resolves a device request: the argument, else the `SINKFLEX_DEVICE` environment variable,
 * else `'auto'`. `'cuda'` without a usable GPU throws {@link DeviceUnavailableError} with the reason.
 */
export function resolveDevice(request?: DeviceRequest): Device {
  const fromEnv = process.env.SINKFLEX_DEVICE;
  const req = request ?? (fromEnv === undefined || fromEnv === '' ? 'auto' : fromEnv);
  if (!DEVICE_REQUESTS.includes(req as DeviceRequest)) {
    const origin = request === undefined ? 'SINKFLEX_DEVICE' : 'device';
    throw new RangeError(`${origin} must be 'cpu', 'cuda' or 'auto', got '${String(req)}'`);
  }
  if (req === 'cpu') return 'cpu';
  const status = loadAddon().cudaStatus();
  if (status.devices > 0) return 'cuda';
  if (req === 'cuda') throw new DeviceUnavailableError('cuda', status.reason);
  return 'cpu';
}
