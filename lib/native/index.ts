import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { Backend } from './addon-types.js';
import { loadAddon, packageRoot } from './loader.js';

export type { Backend, CpuBackend, CudaBackend } from './addon-types.js';
export { DeviceUnavailableError, NativeLoadError, OutOfMemoryError, isOutOfMemoryError } from './errors.js';
export { cudaAvailable, resolveDevice, type Device, type DeviceRequest } from './device.js';
export { memory, type MemoryDevice, type MemoryStats } from './memory.js';
export { loadAddon, packageRoot } from './loader.js';

let cachedVersion: string | undefined;

/** The package version (from its package.json). */
export function version(): string {
  cachedVersion ??= (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
  return cachedVersion;
}

/** The compute backends of this process: `cpu` always, then one entry per usable CUDA device. */
export function backends(): Backend[] {
  return loadAddon().backends();
}

/** How the native addon was built: N-API version, compiler, whether CUDA kernels are inside. */
export function buildInfo(): { napiVersion: number; cudaCompiled: boolean; compiler: string } {
  return loadAddon().buildInfo();
}
