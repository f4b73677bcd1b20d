/**
 * `MultiBinary(n)`: arrays of 0/1 of a given shape (Gymnasium's `spaces.MultiBinary`); samples
 * are flat, row-major `Int8Array`s.
 * @module
 */
import type { RandomGenerator, Seed } from '../random.js';
import { flattenNested, toNested, type NestedNumbers } from './nested.js';
import {
  Space,
  checkBinaryMask,
  checkProbability,
  checkShape,
  dtypeOf,
  formatShape,
  shapeSize,
  type SpaceJSON,
} from './space.js';

/** Options of {@link MultiBinary}. */
export interface MultiBinaryOptions {
  /** Seed (or generator) of the sampler. */
  seed?: Seed | RandomGenerator | null;
}

/** Binary arrays of a fixed shape. */
export class MultiBinary extends Space<Int8Array, ArrayLike<number>, ArrayLike<number>> {
  declare readonly shape: readonly number[];
  declare readonly dtype: 'int8';
  /** Number of elements of a sample. */
  readonly size: number;
  /** The `n` argument: a length or a shape. */
  readonly n: number | readonly number[];

  /** `n` is a length (one-dimensional) or a shape. */
  constructor(n: number | readonly number[], options: MultiBinaryOptions = {}) {
    const shape = typeof n === 'number' ? checkShape([n], 'MultiBinary n') : checkShape(n, 'MultiBinary n');
    if (!shape.every((d) => d > 0))
      throw new RangeError(`MultiBinary: all shape elements must be greater than 0, got ${formatShape(shape)}`);
    super(shape, 'int8', options.seed);
    this.n = typeof n === 'number' ? n : [...n];
    this.size = shapeSize(shape);
  }

  /**
   * A random sample. `mask` (one value per element) fixes an element to 0 or 1, or leaves it
   * random with 2; `probability` gives the chance of a 1 per element.
   */
  sample(mask?: ArrayLike<number> | null, probability?: ArrayLike<number> | null): Int8Array {
    this.checkMaskProbability(mask, probability);
    const out = new Int8Array(this.size);
    if (mask !== undefined && mask !== null) {
      checkBinaryMask(mask, this.size, 'MultiBinary sample mask', true);
      for (let i = 0; i < this.size; i++) out[i] = mask[i] === 2 ? this.npRandom.integers(2) : mask[i];
      return out;
    }
    if (probability !== undefined && probability !== null) {
      if (probability.length !== this.size)
        throw new RangeError(`MultiBinary sample probability must have length ${this.size}`);
      for (let i = 0; i < this.size; i++) {
        const p = probability[i];
        checkProbability([1 - p, p], 2, `MultiBinary sample probability[${i}]`);
        out[i] = this.npRandom.random() < p ? 1 : 0;
      }
      return out;
    }
    for (let i = 0; i < this.size; i++) out[i] = this.npRandom.integers(2);
    return out;
  }

  contains(x: unknown): boolean {
    let values: ArrayLike<number>;
    if (dtypeOf(x) !== null) {
      values = x as ArrayLike<number>;
      if (values.length !== this.size) return false;
    } else {
      const flat = flattenNested(x);
      if (flat === null || flat.shape.join() !== this.shape.join()) return false;
      values = flat.data;
    }
    for (let i = 0; i < this.size; i++) if (values[i] !== 0 && values[i] !== 1) return false;
    return true;
  }

  equals(other: unknown): boolean {
    return other instanceof MultiBinary && other.shape.join() === this.shape.join();
  }

  override get isNpFlattenable(): boolean {
    return true;
  }

  toJSON(): SpaceJSON {
    return { type: 'MultiBinary', n: typeof this.n === 'number' ? this.n : [...this.n] };
  }

  override toJsonable(samples: readonly Int8Array[]): NestedNumbers[] {
    return samples.map((s) => toNested(s, this.shape));
  }

  override fromJsonable(json: unknown): Int8Array[] {
    if (!Array.isArray(json)) throw new TypeError('MultiBinary.fromJsonable expects an array of samples');
    return json.map((s, i) => {
      const flat = flattenNested(s);
      if (flat === null || flat.data.length !== this.size)
        throw new RangeError(`MultiBinary.fromJsonable: sample ${i} has the wrong shape`);
      return new Int8Array(flat.data);
    });
  }

  toString(): string {
    return `MultiBinary(${typeof this.n === 'number' ? this.n : formatShape(this.shape)})`;
  }
}
