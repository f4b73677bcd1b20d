/**
 * Seed derivation for rollouts: every episode and every generation request gets its own seed,
 * computed from the batch seed and the request's coordinates (group, sample, turn), so results
 * are reproducible and do not depend on scheduling or concurrency.
 * @module
 */

function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * A seed in [0, 2^31) mixed from integers (MurmurHash3-style: each value is folded in and
 * avalanched). The same values in the same order always give the same seed; any change of one
 * value gives an unrelated one.
 */
export function mixSeed(...values: number[]): number {
  let h = 0x9e3779b9;
  for (const v of values) {
    if (!Number.isSafeInteger(v)) throw new RangeError(`mixSeed: values must be safe integers, got ${String(v)}`);
    const lo = v >>> 0;
    const hi = Math.floor(v / 0x100000000) >>> 0;
    h = fmix32((h ^ fmix32(lo + 0x6a09e667)) + Math.imul(h, 31));
    h = fmix32((h ^ fmix32(hi + 0xbb67ae85)) + Math.imul(h, 17));
  }
  return h >>> 1;
}
