/**
 * Seeded random helpers over the project's one generator (lib/util/random.ts, mulberry32) so
 * that generated worlds, tasks and simulated users are identical for identical seeds.
 * @module
 */
import { mulberry32 } from '../util/random.js';

/** Seeded pseudo-random numbers. */
export class Rng {
  private readonly draw: () => number;

  /** @param seed - any integer (same seed, same sequence). */
  constructor(seed: number) {
    this.draw = mulberry32(Math.trunc(seed) ^ 0x9e3779b9);
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.draw();
  }

  /** Integer in [lo, hi] inclusive. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** One element. */
  pick<T>(list: readonly T[]): T {
    if (list.length === 0) throw new RangeError('Rng.pick: empty list');
    return list[Math.floor(this.next() * list.length)];
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** A string of `n` random digits (first digit nonzero). */
  digits(n: number): string {
    let s = String(this.int(1, 9));
    for (let i = 1; i < n; i++) s += String(this.int(0, 9));
    return s;
  }

  /** Picks an index with the given weights. */
  weighted(weights: readonly number[]): number {
    const total = weights.reduce((a, b) => a + b, 0);
    let r = this.next() * total;
    for (let i = 0; i < weights.length; i++) {
      r -= weights[i];
      if (r < 0) return i;
    }
    return weights.length - 1;
  }

  /** A shuffled copy. */
  shuffle<T>(list: readonly T[]): T[] {
    const a = list.slice();
    for (let i = a.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [a[i], a[j]] = [a[j], a[i]];
    }
    return a;
  }

  /** `k` distinct elements. */
  sample<T>(list: readonly T[], k: number): T[] {
    return this.shuffle(list).slice(0, k);
  }
}
