import { resolveDevice, type DeviceRequest } from '../native/device.js';
import { isDeviceTensor } from '../native/device-tensor.js';
import { DeviceUnavailableError } from '../native/errors.js';
import { grpoAddon, type GrpoNativeDevice } from './native.js';

/**
 * The device a GRPO kernel runs on: `request`, else `SINKFLEX_DEVICE`, else `'auto'`.
 * `'auto'` takes CUDA only when a GPU is usable and this build has CUDA GRPO kernels, otherwise
 * the CPU; an explicit `'cuda'` that cannot be honoured throws {@link DeviceUnavailableError}.
 */
export function grpoDevice(request?: DeviceRequest): GrpoNativeDevice {
  const device = resolveDevice(request);
  if (device === 'cuda' && !grpoAddon().grpoDevices().includes('cuda')) {
    const asked = request ?? process.env.SINKFLEX_DEVICE;
    if (asked === 'cuda') throw new DeviceUnavailableError('cuda', 'this build has no CUDA GRPO kernels');
    return 'cpu';
  }
  return device;
}

/**
 * The device of a call with these float inputs: when one of them is a DeviceTensor the call runs
 * on the tensors' device (absent result), unless `request` names one explicitly ('cpu', 'cuda'),
 * which must then match (the addon throws RangeError otherwise); else {@link grpoDevice}.
 */
export function grpoCallDevice(inputs: readonly unknown[], request?: DeviceRequest): GrpoNativeDevice | undefined {
  if (inputs.some((x) => x !== undefined && isDeviceTensor(x))) {
    return request === undefined || request === 'auto' ? undefined : request;
  }
  return grpoDevice(request);
}
