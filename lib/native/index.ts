/**
 * `sinkflex-rl/native`: the native addon (version, build, compute backends), devices and device
 * tensors, the tracked allocator's statistics, and the errors native calls throw.
 * @packageDocumentation
 */
import type { Backend, NativeBuildInfo } from './addon-types.js';
import { loadAddon, packageVersion } from './loader.js';

export type { Backend, CpuBackend, CudaBackend, NativeBuildInfo } from './addon-types.js';
export {
  isDeviceTensor,
  toDevice,
  type DeviceTensor,
  type DType,
  type TensorDevice,
  type ToDeviceOptions,
} from './device-tensor.js';
export { cudaAvailable, resolveDevice, type Device, type DeviceRequest } from './device.js';
export {
  DeviceError,
  DeviceUnavailableError,
  isDeviceError,
  isOutOfMemoryError,
  NativeLoadError,
  OutOfMemoryError,
} from './errors.js';
export { memory, type MemoryDevice, type MemoryStats } from './memory.js';

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
