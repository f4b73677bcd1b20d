import type { Backend, NativeBuildInfo } from './addon-types.js';
import { loadAddon, packageVersion } from './loader.js';

export type { Backend, CpuBackend, CudaBackend, NativeBuildInfo } from './addon-types.js';
export { DeviceError, DeviceUnavailableError, NativeLoadError, OutOfMemoryError, isDeviceError, isOutOfMemoryError } from './errors.js';
export { cudaAvailable, resolveDevice, type Device, type DeviceRequest } from './device.js';
export { memory, type MemoryDevice, type MemoryStats } from './memory.js';
export { isDeviceTensor, toDevice, type DType, type DeviceTensor, type TensorDevice, type ToDeviceOptions } from './device-tensor.js';
export { loadAddon, packageRoot, packageVersion } from './loader.js';

/** The package version (from its package.json). */
export function version(): string {
  return packageVersion();
}

/** The compute backends of this process: `cpu` always, then one entry per usable CUDA device. */
export function backends(): Backend[] {
  return loadAddon().backends();
}

/** How the native addon was built: N-API version, compiler, whether CUDA kernels are inside. */
export function buildInfo(): NativeBuildInfo {
  return loadAddon().buildInfo();
}
