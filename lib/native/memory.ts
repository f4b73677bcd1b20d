import type { NativeMemoryStats } from './addon-types.js';
import { loadAddon } from './loader.js';

/** A device whose native memory is tracked: `'cpu'`, `'cuda'` (= `'cuda:0'`) or `'cuda:<k>'`. */
export type MemoryDevice = 'cpu' | 'cuda' | `cuda:${number}`;

/** Current, peak and limit bytes of one device's tracked allocator. */
export type MemoryStats = NativeMemoryStats;

/**
 * The tracked allocator's counters. Every native kernel allocates through it (workspaces,
 * eager score matrices, outputs), so peak bytes measure a computation's memory.
 */
export const memory = {
  /** Counters of `device` (default `'cpu'`). */
  stats(device: MemoryDevice = 'cpu'): MemoryStats {
    return loadAddon().memoryStats(device);
  },
  /** Bytes currently allocated natively on `device`. */
  currentBytes(device: MemoryDevice = 'cpu'): number {
    return loadAddon().memoryStats(device).currentBytes;
  },
  /** Highest `currentBytes` since the last {@link memory.resetPeak}. */
  peakBytes(device: MemoryDevice = 'cpu'): number {
    return loadAddon().memoryStats(device).peakBytes;
  },
  /** Sets the peak to the current value, to measure the next computation alone. */
  resetPeak(device: MemoryDevice = 'cpu'): void {
    loadAddon().resetPeak(device);
  },
  /**
   * Limits tracked bytes on `device`; an allocation past it throws {@link OutOfMemoryError}.
   * `null` removes the limit.
   */
  setLimit(bytes: number | null, device: MemoryDevice = 'cpu'): void {
    loadAddon().setLimit(device, bytes);
  },
  /** The limit of `device`, or `null` when unlimited. */
  limitBytes(device: MemoryDevice = 'cpu'): number | null {
    return loadAddon().memoryStats(device).limitBytes;
  },
  /**
   * Runs `fn` with `bytes` as the limit of `device` and restores the previous limit after,
   * also when `fn` throws.
   */
  withLimit<T>(bytes: number | null, fn: () => T, device: MemoryDevice = 'cpu'): T {
    const before = loadAddon().memoryStats(device).limitBytes;
    loadAddon().setLimit(device, bytes);
    try {
      return fn();
    } finally {
      loadAddon().setLimit(device, before);
    }
  },
};
