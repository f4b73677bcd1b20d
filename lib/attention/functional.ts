import { DeviceUnavailableError, resolveDevice, type Device, type DeviceRequest } from '../native/index.js';
import { BlockMask, nativeShape } from './block-mask.js';
import { attentionAddon, type NativeAttentionOptions, type NativeForwardResult, type NativeHandle } from './native.js';
import type {
  AttentionBackwardOptions,
  AttentionForwardResult,
  AttentionGradients,
  AttentionOptions,
  AttentionShape,
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

/** @internal Checks the options object and converts it for the addon. */
export function nativeOptions(opts: AttentionBackwardOptions | undefined, backward: boolean): NativeAttentionOptions {
  if (opts === undefined) return { device: resolveAttentionDevice() };
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) throw new TypeError('opts must be an object');
  const allowed = backward ? BACKWARD_KEYS : FORWARD_KEYS;
  for (const key of Object.keys(opts)) {
    if (!allowed.includes(key)) throw new RangeError(`opts has an unknown field '${key}' (allowed: ${allowed.join(', ')})`);
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
    device: resolveAttentionDevice(opts.device),
    isa: opts.cpuKernel,
    blockSize: opts.blockSize,
  };
  if (backward) {
    n.dLse = opts.dLse;
    n.backwardSplit = opts.backwardSplit;
  }
  return n;
}

/**
 * Sink attention forward (DESIGN.md "Sink attention — semantics"):
 * `L_i = log(exp(s_h) + sum_j exp(z_ij))`, `o_i = sum_j exp(z_ij - L_i) v_j` over the keys the
 * mask allows, with `z_ij = scale * q_i.k_j` (softcapped when asked). `sinks` (`[qHeads]`) may
 * be `null`. A row with no visible key gives `out = 0` and `lse = s_h` (`-Infinity` without a sink).
 */
export function sinkAttentionForward(q: Float32Array, k: Float32Array, v: Float32Array, sinks: Float32Array | null,
  shape: AttentionShape, opts?: AttentionOptions): AttentionForwardResult {
  const r = attentionAddon().attentionForward(q, k, v, sinks, nativeShape(shape), nativeOptions(opts, false));
  return { out: r.out, lse: r.lse };
}

/** {@link sinkAttentionForward} off the main thread. */
export async function sinkAttentionForwardAsync(q: Float32Array, k: Float32Array, v: Float32Array,
  sinks: Float32Array | null, shape: AttentionShape, opts?: AttentionOptions): Promise<AttentionForwardResult> {
  const r = await attentionAddon().attentionForwardAsync(q, k, v, sinks, nativeShape(shape), nativeOptions(opts, false));
  return { out: r.out, lse: r.lse };
}

/**
 * Sink attention backward: gradients of q, k, v and the sinks given `dOut` (and optionally
 * `opts.dLse`), from the forward's `out` and `lse`. dk/dv sum over the query heads of each kv
 * group; dSinks (`null` without sinks) sums over the batch. The eager implementation
 * materialises the probabilities again (use {@link SinkAttention} to keep the forward's).
 */
export function sinkAttentionBackward(q: Float32Array, k: Float32Array, v: Float32Array, sinks: Float32Array | null,
  out: Float32Array, lse: Float32Array, dOut: Float32Array, shape: AttentionShape,
  opts?: AttentionBackwardOptions): AttentionGradients {
  return attentionAddon().attentionBackward(q, k, v, sinks, out, lse, dOut, nativeShape(shape), nativeOptions(opts, true));
}

/** {@link sinkAttentionBackward} off the main thread. */
export async function sinkAttentionBackwardAsync(q: Float32Array, k: Float32Array, v: Float32Array,
  sinks: Float32Array | null, out: Float32Array, lse: Float32Array, dOut: Float32Array, shape: AttentionShape,
  opts?: AttentionBackwardOptions): Promise<AttentionGradients> {
  return attentionAddon().attentionBackwardAsync(q, k, v, sinks, out, lse, dOut, nativeShape(shape),
    nativeOptions(opts, true));
}

/** @internal Forward that can keep the eager probabilities (for SinkAttention). */
export function forwardSaving(q: Float32Array, k: Float32Array, v: Float32Array, sinks: Float32Array | null,
  shape: AttentionShape, opts: AttentionOptions, save: boolean, async: true): Promise<NativeForwardResult>;
export function forwardSaving(q: Float32Array, k: Float32Array, v: Float32Array, sinks: Float32Array | null,
  shape: AttentionShape, opts: AttentionOptions, save: boolean, async: false): NativeForwardResult;
export function forwardSaving(q: Float32Array, k: Float32Array, v: Float32Array, sinks: Float32Array | null,
  shape: AttentionShape, opts: AttentionOptions, save: boolean, async: boolean):
  NativeForwardResult | Promise<NativeForwardResult> {
  const n = { ...nativeOptions(opts, false), save };
  const a = attentionAddon();
  return async ? a.attentionForwardAsync(q, k, v, sinks, nativeShape(shape), n)
    : a.attentionForward(q, k, v, sinks, nativeShape(shape), n);
}

/** @internal Backward with saved eager probabilities. */
export function backwardSaved(args: [Float32Array, Float32Array, Float32Array, Float32Array | null, Float32Array,
  Float32Array, Float32Array], shape: AttentionShape, opts: AttentionBackwardOptions, saved: NativeHandle | undefined,
  async: boolean): AttentionGradients | Promise<AttentionGradients> {
  const n = { ...nativeOptions(opts, true), saved };
  const a = attentionAddon();
  return async ? a.attentionBackwardAsync(...args, nativeShape(shape), n) : a.attentionBackward(...args, nativeShape(shape), n);
}

/** @internal Frees saved eager probabilities now instead of at garbage collection. */
export function releaseSaved(saved: NativeHandle): void {
  attentionAddon().attentionReleaseSaved(saved);
}
