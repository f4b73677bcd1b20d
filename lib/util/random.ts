/**
 * The project's one seeded random generator (mulberry32), used by the tau worlds, the OpenAI
 * client's retry jitter, the tests' random inputs and the benchmarks' data: same seed, same
 * sequence, on every machine.
 *
 * This folder sits below every layer (tau → gym → rollout → trainer): it imports nothing.
 * @module
 */

/**
 * The mulberry32 generator started from the 32-bit state `seed >>> 0` (no mixing): uniform
 * numbers in [0, 1), multiples of 2⁻³².
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Fills `out` with values uniform in [lo, hi) drawn from {@link mulberry32}`(seed)`, in order,
 * and returns it.
 */
export function fillUniform<A extends Float32Array | Float64Array>(out: A, seed: number, lo = -1, hi = 1): A {
  const next = mulberry32(seed);
  for (let i = 0; i < out.length; i++) out[i] = lo + (hi - lo) * next();
  return out;
}
