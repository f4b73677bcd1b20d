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

/** Thrown when `device: 'cuda'` is requested and no usable CUDA device exists. */
export class DeviceUnavailableError extends Error {
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
  return e instanceof OutOfMemoryError || (typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 'ERR_SINKFLEX_OOM');
}
