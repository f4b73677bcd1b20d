/**
 * Thrown when a native allocation would exceed a device's tracked memory limit
 * (see {@link memory.setLimit}) or when the system refuses it. Catchable: the process and the
 * addon stay usable.
 */
export class OutOfMemoryError extends Error {
  /** Always `'ERR_SINKFLEX_OOM'`. */
  readonly code = 'ERR_SINKFLEX_OOM';
  /** The device that ran out, e.g. `'cpu'` or `'cuda:0'` (set by the addon). */
  declare readonly device: string;
  /** Bytes the failed allocation asked for. */
  declare readonly requestedBytes: number;
  /** Bytes in use on the device when it failed. */
  declare readonly currentBytes: number;
  /** The tracked limit, or `null` when the system itself refused. */
  declare readonly limitBytes: number | null;

  constructor(message: string) {
    super(message);
    this.name = 'OutOfMemoryError';
  }
}

/**
 * Thrown when a device fails or cannot serve a call: a CUDA runtime call that failed (the
 * message names the call, the file and line and the CUDA error), a device that is not
 * available, kernels this build does not have, a kernel that flagged invalid input. Raised by
 * the addon (converted in one place, native/addon/napi_util.cc) and by the TypeScript layers.
 */
export class DeviceError extends Error {
  /** Always `'ERR_SINKFLEX_DEVICE'`. */
  readonly code = 'ERR_SINKFLEX_DEVICE';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DeviceError';
  }
}

/** A {@link DeviceError}: `device: 'cuda'` was requested and no usable CUDA device exists. */
export class DeviceUnavailableError extends DeviceError {
  constructor(
    /** The device that was asked for. */
    readonly device: string,
    /** Why it is not available (no CUDA in this build, no driver, no GPU). */
    readonly reason: string,
  ) {
    super(`device '${device}' is not available: ${reason}`);
    this.name = 'DeviceUnavailableError';
  }
}

/** Thrown when the native addon cannot be found or loaded. */
export class NativeLoadError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NativeLoadError';
  }
}

/** True when `e` is an out-of-memory error raised by the addon. */
export function isOutOfMemoryError(e: unknown): e is OutOfMemoryError {
  return (
    e instanceof OutOfMemoryError ||
    (typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 'ERR_SINKFLEX_OOM')
  );
}

/** True when `e` is a {@link DeviceError} (also one from another copy of the package: by its code). */
export function isDeviceError(e: unknown): e is DeviceError {
  return (
    e instanceof DeviceError ||
    (typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 'ERR_SINKFLEX_DEVICE')
  );
}
