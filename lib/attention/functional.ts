import {
  DeviceUnavailableError,
  isDeviceTensor,
  resolveDevice,
  type Device,
  type DeviceRequest,
  type DeviceTensor,
} from '../native/index.js';
import { BlockMask, nativeShape } from './block-mask.js';
import {
  attentionAddon,
  type NativeAttentionOptions,
  type NativeForwardResult,
  type NativeGradients,
  type NativeHandle,
} from './native.js';
import type {
  AttentionBackwardOptions,
  AttentionForwardResult,
  AttentionGradients,
  AttentionOptions,
  AttentionShape,
  AttentionTensor,
  DeviceAttentionForwardResult,
  DeviceAttentionGradients,
} from './types.js';

const FORWARD_KEYS = ['mask', 'blockMask', 'scale', 'softcap', 'impl', 'device', 'blockSize', 'cpuKernel'];
const BACKWARD_KEYS = [...FORWARD_KEYS, 'dLse', 'backwardSplit'];

/**
 * The device an attention call runs on: {@link resolveDevice} of the request, except that
 * `'auto'` stays on the CPU while this build has no CUDA attention kernels, and an explicit
 * `'cuda'` then throws {@link DeviceUnavailableError}.
 */
export function resolveAttentionDevice(request?: DeviceRequest): Device {
  const device = resolveDevice(request);
  if (device === 'cuda' && !attentionAddon().attentionInfo().cudaKernels) {
    const explicit = request === 'cuda' || (request === undefined && process.env.SINKFLEX_DEVICE === 'cuda');
    if (explicit) throw new DeviceUnavailableError('cuda', 'this build has no CUDA sink-attention kernels');
    return 'cpu';
  }
  return device;
}

/**
 * The device string of a call: the tensors' own device for DeviceTensor inputs (RangeError
 * when `request` names another kind of device), else {@link resolveAttentionDevice}.
 */
function callDevice(request: DeviceRequest | undefined, q: AttentionTensor | undefined): string {
  if (q === undefined || !isDeviceTensor(q)) return resolveAttentionDevice(request);
  if (request !== undefined && request !== 'auto' && !q.device.startsWith(request)) {
    throw new RangeError(`opts.device is '${request}' but the tensors are on '${q.device}'`);
  }
  return q.device;
}

/** @internal Checks the options object and converts it for the addon (`q` decides the device of DeviceTensor calls). */
export function nativeOptions(
  opts: AttentionBackwardOptions | undefined,
  backward: boolean,
  q?: AttentionTensor,
): NativeAttentionOptions {
  if (opts === undefined) return { device: callDevice(undefined, q) };
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) throw new TypeError('opts must be an object');
  const allowed = backward ? BACKWARD_KEYS : FORWARD_KEYS;
  for (const key of Object.keys(opts)) {
    if (!allowed.includes(key))
      throw new RangeError(`opts has an unknown field '${key}' (allowed: ${allowed.join(', ')})`);
  }
  if (opts.blockMask !== undefined && !(opts.blockMask instanceof BlockMask)) {
    throw new TypeError('opts.blockMask must be a BlockMask from createBlockMask()');
  }
  const n: NativeAttentionOptions = {
    mask: opts.mask,
    blockMask: opts.blockMask?.handle,
    scale: opts.scale,
    softcap: opts.softcap,
    impl: opts.impl,
    device: callDevice(opts.device, q),
    isa: opts.cpuKernel,
    blockSize: opts.blockSize,
  };
  if (backward) {
    n.dLse = opts.dLse;
    n.backwardSplit = opts.backwardSplit;
  }
  return n;
}

function forwardResult(r: NativeForwardResult): AttentionForwardResult | DeviceAttentionForwardResult {
  return { out: r.out, lse: r.lse } as AttentionForwardResult | DeviceAttentionForwardResult;
}

/**
 * Sink attention forward (docs/design.md, "Sink attention — semantics"):
 * `L_i = log(exp(s_h) + sum_j exp(z_ij))`, `o_i = sum_j exp(z_ij - L_i) v_j` over the keys the
 * mask allows, with `z_ij = scale * q_i.k_j` (softcapped when asked). `sinks` (`[qHeads]`) may
 * be `null`. A row with no visible key gives `out = 0` and `lse = s_h` (`-Infinity` without a sink).
 *
 * With Float32Arrays the results are Float32Arrays (on CUDA the inputs are copied to the GPU and
 * the results back). With DeviceTensors (q, k, v alike: one device, one dtype; sinks a
 * Float32Array or a float32 DeviceTensor) the call runs on their device and returns
 * DeviceTensors there: `out` in the inputs' dtype, `lse` in float32.
 */
export function sinkAttentionForward(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  sinks: Float32Array | null,
  shape: AttentionShape,
  opts?: AttentionOptions,
): AttentionForwardResult;
export function sinkAttentionForward(
  q: DeviceTensor,
  k: DeviceTensor,
  v: DeviceTensor,
  sinks: Float32Array | DeviceTensor | null,
  shape: AttentionShape,
  opts?: AttentionOptions,
): DeviceAttentionForwardResult;
export function sinkAttentionForward(
  q: AttentionTensor,
  k: AttentionTensor,
  v: AttentionTensor,
  sinks: Float32Array | DeviceTensor | null,
  shape: AttentionShape,
  opts?: AttentionOptions,
): AttentionForwardResult | DeviceAttentionForwardResult {
  return forwardResult(
    attentionAddon().attentionForward(q, k, v, sinks, nativeShape(shape), nativeOptions(opts, false, q)),
  );
}

/** {@link sinkAttentionForward} off the main thread. */
export function sinkAttentionForwardAsync(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  sinks: Float32Array | null,
  shape: AttentionShape,
  opts?: AttentionOptions,
): Promise<AttentionForwardResult>;
export function sinkAttentionForwardAsync(
  q: DeviceTensor,
  k: DeviceTensor,
  v: DeviceTensor,
  sinks: Float32Array | DeviceTensor | null,
  shape: AttentionShape,
  opts?: AttentionOptions,
): Promise<DeviceAttentionForwardResult>;
export async function sinkAttentionForwardAsync(
  q: AttentionTensor,
  k: AttentionTensor,
  v: AttentionTensor,
  sinks: Float32Array | DeviceTensor | null,
  shape: AttentionShape,
  opts?: AttentionOptions,
): Promise<AttentionForwardResult | DeviceAttentionForwardResult> {
  return forwardResult(
    await attentionAddon().attentionForwardAsync(q, k, v, sinks, nativeShape(shape), nativeOptions(opts, false, q)),
  );
}

/**
 * Sink attention backward: gradients of q, k, v and the sinks given `dOut` (and optionally
 * `opts.dLse`), from the forward's `out` and `lse`. dk/dv sum over the query heads of each kv
 * group; dSinks (`null` without sinks) sums over the batch. The eager implementation
 * materialises the probabilities again (use {@link SinkAttention} to keep the forward's).
 * DeviceTensor inputs (q, k, v, out, dOut alike; sinks, lse and dLse Float32Arrays or float32
 * DeviceTensors) give DeviceTensor gradients on their device, dq/dk/dv in the inputs' dtype.
 */
export function sinkAttentionBackward(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  sinks: Float32Array | null,
  out: Float32Array,
  lse: Float32Array,
  dOut: Float32Array,
  shape: AttentionShape,
  opts?: AttentionBackwardOptions,
): AttentionGradients;
export function sinkAttentionBackward(
  q: DeviceTensor,
  k: DeviceTensor,
  v: DeviceTensor,
  sinks: Float32Array | DeviceTensor | null,
  out: DeviceTensor,
  lse: Float32Array | DeviceTensor,
  dOut: DeviceTensor,
  shape: AttentionShape,
  opts?: AttentionBackwardOptions,
): DeviceAttentionGradients;
export function sinkAttentionBackward(
  q: AttentionTensor,
  k: AttentionTensor,
  v: AttentionTensor,
  sinks: Float32Array | DeviceTensor | null,
  out: AttentionTensor,
  lse: Float32Array | DeviceTensor,
  dOut: AttentionTensor,
  shape: AttentionShape,
  opts?: AttentionBackwardOptions,
): AttentionGradients | DeviceAttentionGradients {
  return attentionAddon().attentionBackward(
    q,
    k,
    v,
    sinks,
    out,
    lse,
    dOut,
    nativeShape(shape),
    nativeOptions(opts, true, q),
  );
}

/** {@link sinkAttentionBackward} off the main thread. */
export function sinkAttentionBackwardAsync(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  sinks: Float32Array | null,
  out: Float32Array,
  lse: Float32Array,
  dOut: Float32Array,
  shape: AttentionShape,
  opts?: AttentionBackwardOptions,
): Promise<AttentionGradients>;
export function sinkAttentionBackwardAsync(
  q: DeviceTensor,
  k: DeviceTensor,
  v: DeviceTensor,
  sinks: Float32Array | DeviceTensor | null,
  out: DeviceTensor,
  lse: Float32Array | DeviceTensor,
  dOut: DeviceTensor,
  shape: AttentionShape,
  opts?: AttentionBackwardOptions,
): Promise<DeviceAttentionGradients>;
export async function sinkAttentionBackwardAsync(
  q: AttentionTensor,
  k: AttentionTensor,
  v: AttentionTensor,
  sinks: Float32Array | DeviceTensor | null,
  out: AttentionTensor,
  lse: Float32Array | DeviceTensor,
  dOut: AttentionTensor,
  shape: AttentionShape,
  opts?: AttentionBackwardOptions,
): Promise<AttentionGradients | DeviceAttentionGradients> {
  return attentionAddon().attentionBackwardAsync(
    q,
    k,
    v,
    sinks,
    out,
    lse,
    dOut,
    nativeShape(shape),
    nativeOptions(opts, true, q),
  );
}

/** @internal Forward that can keep the eager probabilities (for SinkAttention). */
export function forwardSaving(
  q: AttentionTensor,
  k: AttentionTensor,
  v: AttentionTensor,
  sinks: Float32Array | DeviceTensor | null,
  shape: AttentionShape,
  opts: AttentionOptions,
  save: boolean,
  async: true,
): Promise<NativeForwardResult>;
export function forwardSaving(
  q: AttentionTensor,
  k: AttentionTensor,
  v: AttentionTensor,
  sinks: Float32Array | DeviceTensor | null,
  shape: AttentionShape,
  opts: AttentionOptions,
  save: boolean,
  async: false,
): NativeForwardResult;
export function forwardSaving(
  q: AttentionTensor,
  k: AttentionTensor,
  v: AttentionTensor,
  sinks: Float32Array | DeviceTensor | null,
  shape: AttentionShape,
  opts: AttentionOptions,
  save: boolean,
  async: boolean,
): NativeForwardResult | Promise<NativeForwardResult> {
  const n = { ...nativeOptions(opts, false, q), save };
  const a = attentionAddon();
  return async
    ? a.attentionForwardAsync(q, k, v, sinks, nativeShape(shape), n)
    : a.attentionForward(q, k, v, sinks, nativeShape(shape), n);
}

/** @internal Backward with saved eager probabilities. */
export function backwardSaved(
  args: [
    AttentionTensor,
    AttentionTensor,
    AttentionTensor,
    Float32Array | DeviceTensor | null,
    AttentionTensor,
    Float32Array | DeviceTensor,
    AttentionTensor,
  ],
  shape: AttentionShape,
  opts: AttentionBackwardOptions,
  saved: NativeHandle | undefined,
  async: boolean,
): NativeGradients | Promise<NativeGradients> {
  const n = { ...nativeOptions(opts, true, args[0]), saved };
  const a = attentionAddon();
  return async
    ? a.attentionBackwardAsync(...args, nativeShape(shape), n)
    : a.attentionBackward(...args, nativeShape(shape), n);
}

/** @internal Frees saved eager probabilities now instead of at garbage collection. */
export function releaseSaved(saved: NativeHandle): void {
  attentionAddon().attentionReleaseSaved(saved);
}
