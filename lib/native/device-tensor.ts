import { cudaAvailable, resolveDevice, type DeviceRequest } from './device.js';
import { DeviceUnavailableError } from './errors.js';
import { loadAddon } from './loader.js';

/**
 * Element type of a {@link DeviceTensor}: IEEE fp32, bfloat16 (fp32's top 16 bits, rounded to
 * nearest even) or float16 (IEEE half: 11 significant bits, rounded to nearest even; subnormals
 * kept, magnitudes from 65520 on become infinity, as `tensor.to(torch.float16)`).
 */
export type DType = 'float32' | 'bfloat16' | 'float16';

/** Where a {@link DeviceTensor} lives: host memory (`'cpu'`) or a CUDA device (`'cuda:<index>'`). */
export type TensorDevice = 'cpu' | `cuda:${number}`;

/**
 * A tensor that stays on its device between calls (a native handle): kernels that take
 * DeviceTensors read and write device memory directly, so nothing is copied until
 * {@link DeviceTensor.toArray} is called. Its bytes are counted by the tracked allocator of its
 * device (`memory.currentBytes(tensor.device)`). Free it with {@link DeviceTensor.dispose}
 * (garbage collection frees it too, but does not know how full a GPU is). A call still running
 * with a tensor keeps its memory alive even when the tensor is disposed meanwhile.
 */
export interface DeviceTensor {
  /** Dimensions, e.g. `[batch, seqLen, heads, headDim]`. */
  readonly shape: number[];
  readonly dtype: DType;
  /** `'cpu'` or `'cuda:<index>'`. */
  readonly device: TensorDevice;
  /** Number of elements (product of the shape). */
  readonly size: number;
  /** Bytes of device memory held (`size` × 4 for float32, × 2 for bfloat16 and float16). */
  readonly bytes: number;
  /** True after {@link DeviceTensor.dispose}. */
  readonly disposed: boolean;
  /** Copies the values to a new Float32Array on the host (bfloat16 and float16 widened exactly). Throws once disposed. */
  toArray(): Float32Array;
  /** Frees the memory now (idempotent); the handle can no longer be used in calls. */
  dispose(): void;
  /** {@link dispose} (for `using`). */
  [Symbol.dispose](): void;
}

/** Options of {@link toDevice}. */
export interface ToDeviceOptions {
  /**
   * `'cpu'`, `'cuda'` (= `'cuda:0'`), `'cuda:<index>'` or `'auto'` (default: `SINKFLEX_DEVICE`,
   * else `'auto'`, i.e. CUDA when a GPU is usable, else the cpu).
   */
  device?: DeviceRequest | `cuda:${number}`;
  /** Element type on the device (default `'float32'`); bfloat16 and float16 round to nearest even. */
  dtype?: DType;
}

/** Native functions of native/addon/device_tensor.cc. */
interface DeviceTensorAddon {
  DeviceTensor: abstract new (...args: never[]) => DeviceTensor;
  deviceTensorFromArray(data: Float32Array, shape: number[], device: string, dtype: DType): DeviceTensor;
}

function addon(): DeviceTensorAddon {
  return loadAddon<DeviceTensorAddon>();
}

/** The device string the addon takes for a request. */
function deviceString(request: ToDeviceOptions['device']): string {
  if (typeof request === 'string' && request.startsWith('cuda:')) {
    if (!cudaAvailable()) throw new DeviceUnavailableError(request, loadAddon().cudaStatus().reason);
    return request;
  }
  return resolveDevice(request as DeviceRequest | undefined) === 'cuda' ? 'cuda:0' : 'cpu';
}

/**
 * Copies `data` (row-major, `shape`'s product elements) to a device and returns the
 * {@link DeviceTensor}. `device: 'cuda'` without a usable GPU throws DeviceUnavailableError
 * with the reason; a length that does not match the shape throws RangeError.
 */
export function toDevice(data: Float32Array, shape: readonly number[], opts: ToDeviceOptions = {}): DeviceTensor {
  if (typeof opts !== 'object' || opts === null) throw new TypeError('opts must be an object');
  if (!Array.isArray(shape)) throw new TypeError('shape must be an array of integers');
  return addon().deviceTensorFromArray(data, [...shape], deviceString(opts.device), opts.dtype ?? 'float32');
}

/** True when `x` is a {@link DeviceTensor} (disposed or not). */
export function isDeviceTensor(x: unknown): x is DeviceTensor {
  return x instanceof addon().DeviceTensor;
}
