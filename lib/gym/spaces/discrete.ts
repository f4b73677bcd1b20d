/**
 * `Discrete(n, { start })`: the integers start, start + 1, ..., start + n - 1 (Gymnasium's
 * `spaces.Discrete`). Samples are plain numbers.
 * @module
 */
import type { RandomGenerator, Seed } from '../random.js';
import { Space, checkBinaryMask, checkProbability, type SpaceJSON } from './space.js';

/** Options of {@link Discrete}. */
export interface DiscreteOptions {
  /** The smallest element (default 0). */
  start?: number;
  /** Seed (or generator) of the sampler. */
  seed?: Seed | RandomGenerator | null;
}

/** A finite set of consecutive integers. */
export class Discrete extends Space<number, ArrayLike<number>, ArrayLike<number>> {
  /** Number of elements. */
  readonly n: number;
  /** The smallest element. */
  readonly start: number;

  constructor(n: number, options: DiscreteOptions = {}) {
    if (!Number.isSafeInteger(n)) throw new TypeError(`Discrete: n must be an integer, got ${String(n)}`);
    if (n <= 0) throw new RangeError(`Discrete: n (counts) have to be positive, got ${n}`);
    const start = options.start ?? 0;
    if (!Number.isSafeInteger(start)) throw new TypeError(`Discrete: start must be an integer, got ${String(start)}`);
    if (!Number.isSafeInteger(start + n - 1)) throw new RangeError('Discrete: start + n - 1 must be a safe integer');
    super([], null, options.seed);
    this.n = n;
    this.start = start;
  }

  /**
   * A random element. `mask` (length n, values 0/1) restricts the choice to the elements whose
   * entry is 1 (when none is, the result is `start`, as in Gymnasium); `probability` (length n,
   * summing to 1) weights them.
   */
  sample(mask?: ArrayLike<number> | null, probability?: ArrayLike<number> | null): number {
    this.checkMaskProbability(mask, probability);
    if (mask !== undefined && mask !== null) {
      checkBinaryMask(mask, this.n, 'Discrete sample mask');
      const valid: number[] = [];
      for (let i = 0; i < this.n; i++) if (mask[i] === 1) valid.push(i);
      if (valid.length === 0) return this.start;
      return this.start + this.npRandom.choice(valid);
    }
    if (probability !== undefined && probability !== null) {
      checkProbability(probability, this.n, 'Discrete sample probability');
      return this.start + this.npRandom.choice(this.n, { p: probability });
    }
    return this.start + this.npRandom.integers(this.n);
  }

  contains(x: unknown): boolean {
    return typeof x === 'number' && Number.isInteger(x) && x >= this.start && x < this.start + this.n;
  }

  equals(other: unknown): boolean {
    return other instanceof Discrete && other.n === this.n && other.start === this.start;
  }

  override get isNpFlattenable(): boolean {
    return true;
  }

  toJSON(): SpaceJSON {
    return { type: 'Discrete', n: this.n, start: this.start };
  }

  override fromJsonable(json: unknown): number[] {
    if (!Array.isArray(json) || !json.every((v) => typeof v === 'number'))
      throw new TypeError('Discrete.fromJsonable expects an array of numbers');
    return [...json];
  }

  toString(): string {
    return this.start === 0 ? `Discrete(${this.n})` : `Discrete(${this.n}, start=${this.start})`;
  }
}
