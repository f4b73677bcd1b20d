/**
 * `MultiDiscrete(nvec, { start })`: a product of Discrete spaces (Gymnasium's
 * `spaces.MultiDiscrete`); element i ranges over start[i] .. start[i] + nvec[i] - 1. Samples
 * are flat, row-major `Int32Array`s by default (Gymnasium uses int64).
 * @module
 */
import type { RandomGenerator, Seed } from '../random.js';
import { Discrete } from './discrete.js';
import { flattenNested, formatArray, toNested, type NestedNumbers } from './nested.js';
import {
  DTYPE_RANGE,
  Space,
  TYPED_ARRAYS,
  canCast,
  checkBinaryMask,
  checkProbability,
  dtypeOf,
  isDType,
  isFloatDType,
  type DType,
  type SpaceJSON,
  type TypedArrayMap,
} from './space.js';

/** Integer dtypes usable by MultiDiscrete. */
export type IntDType = Exclude<DType, 'float32' | 'float64'>;

/** Options of {@link MultiDiscrete}. */
export interface MultiDiscreteOptions<D extends IntDType> {
  /** Integer element type (default `int32`). */
  dtype?: D;
  /** Smallest value of each element (a number is broadcast; default 0). */
  start?: NestedNumbers;
  /** Seed (or generator) of the sampler. */
  seed?: Seed | RandomGenerator | null;
}

/** Per-element masks (one 0/1 array of length nvec[i] per element, row-major), or null for no mask. */
export type MultiDiscreteMask = ReadonlyArray<ArrayLike<number> | null>;

/** A product of discrete ranges. */
export class MultiDiscrete<D extends IntDType = 'int32'> extends Space<
  TypedArrayMap[D],
  MultiDiscreteMask,
  MultiDiscreteMask
> {
  declare readonly shape: readonly number[];
  declare readonly dtype: D;
  /** Number of values of each element. */
  readonly nvec: TypedArrayMap[D];
  /** Smallest value of each element. */
  readonly start: TypedArrayMap[D];

  constructor(nvec: NestedNumbers | ArrayLike<number>, options: MultiDiscreteOptions<D> = {}) {
    const dt = (options.dtype ?? 'int32') as D;
    if (!isDType(dt) || isFloatDType(dt))
      throw new TypeError(`MultiDiscrete dtype must be an integer dtype, got ${String(dt)}`);
    const flat = flattenNested(nvec);
    if (flat === null || flat.shape.length === 0)
      throw new TypeError('MultiDiscrete nvec must be an array (or nested arrays) of integers');
    const startFlat = options.start === undefined ? null : flattenNested(options.start);
    if (options.start !== undefined && startFlat === null)
      throw new TypeError('MultiDiscrete start must be a number or nested arrays of integers');
    const start =
      startFlat === null
        ? new Array<number>(flat.data.length).fill(0)
        : startFlat.shape.length === 0
          ? new Array<number>(flat.data.length).fill(startFlat.data[0])
          : startFlat.data;
    if (start.length !== flat.data.length) throw new RangeError('MultiDiscrete start must have the shape of nvec');
    const [dmin, dmax] = DTYPE_RANGE[dt];
    flat.data.forEach((n, i) => {
      if (!Number.isInteger(n) || n <= 0)
        throw new RangeError(`MultiDiscrete nvec must be positive integers, got nvec[${i}]=${n}`);
      const s = start[i];
      if (!Number.isInteger(s) || s < dmin || s + n - 1 > dmax)
        throw new RangeError(`MultiDiscrete start[${i}]=${s} with nvec[${i}]=${n} does not fit ${dt}`);
    });
    super(flat.shape, dt, options.seed);
    this.nvec = new TYPED_ARRAYS[dt](flat.data) as TypedArrayMap[D];
    this.start = new TYPED_ARRAYS[dt](start) as TypedArrayMap[D];
  }

  /** Number of elements of a sample. */
  get size(): number {
    return this.nvec.length;
  }

  /**
   * A random sample; `mask` gives one 0/1 array per element (an all-zero mask yields `start`),
   * `probability` one probability vector per element.
   */
  sample(mask?: MultiDiscreteMask | null, probability?: MultiDiscreteMask | null): TypedArrayMap[D] {
    this.checkMaskProbability(mask, probability);
    const n = this.size;
    const given = mask ?? probability;
    if (given !== undefined && given !== null && (!Array.isArray(given) || given.length !== n)) {
      throw new RangeError(
        `MultiDiscrete sample ${mask ? 'mask' : 'probability'} must be an array of ${n} per-element arrays`,
      );
    }
    const out = new TYPED_ARRAYS[this.dtype](n) as TypedArrayMap[D];
    for (let i = 0; i < n; i++) {
      const ni = this.nvec[i];
      const m = mask?.[i];
      const p = probability?.[i];
      let v: number;
      if (m !== undefined && m !== null) {
        checkBinaryMask(m, ni, `MultiDiscrete sample mask[${i}]`);
        const valid: number[] = [];
        for (let k = 0; k < ni; k++) if (m[k] === 1) valid.push(k);
        v = valid.length === 0 ? 0 : this.npRandom.choice(valid);
      } else if (p !== undefined && p !== null) {
        checkProbability(p, ni, `MultiDiscrete sample probability[${i}]`);
        v = this.npRandom.choice(ni, { p });
      } else {
        v = this.npRandom.integers(ni);
      }
      out[i] = this.start[i] + v;
    }
    return out;
  }

  contains(x: unknown): boolean {
    let values: ArrayLike<number>;
    const xdtype = dtypeOf(x);
    if (xdtype !== null) {
      if (isFloatDType(xdtype) || !canCast(xdtype, 'float64')) return false;
      values = x as ArrayLike<number>;
      if (values.length !== this.size) return false;
    } else {
      const flat = flattenNested(x);
      if (flat === null || flat.shape.join() !== this.shape.join()) return false;
      values = flat.data;
    }
    for (let i = 0; i < this.size; i++) {
      const v = values[i];
      if (!Number.isInteger(v) || v < this.start[i] || v >= this.start[i] + this.nvec[i]) return false;
    }
    return true;
  }

  /** The Discrete space of element `index` of a one-dimensional MultiDiscrete. */
  at(index: number): Discrete {
    if (this.shape.length !== 1) throw new RangeError('MultiDiscrete.at needs a one-dimensional space');
    if (!Number.isInteger(index) || index < 0 || index >= this.size)
      throw new RangeError(`MultiDiscrete.at: index ${index} out of range`);
    return new Discrete(this.nvec[index], { start: this.start[index], seed: this.npRandom.clone() });
  }

  equals(other: unknown): boolean {
    return (
      other instanceof MultiDiscrete &&
      other.shape.join() === this.shape.join() &&
      other.dtype === this.dtype &&
      Array.from(other.nvec).join() === Array.from(this.nvec).join() &&
      Array.from(other.start).join() === Array.from(this.start).join()
    );
  }

  override get isNpFlattenable(): boolean {
    return true;
  }

  toJSON(): SpaceJSON {
    return {
      type: 'MultiDiscrete',
      nvec: toNested(this.nvec, this.shape),
      start: toNested(this.start, this.shape),
      dtype: this.dtype,
    };
  }

  override toJsonable(samples: readonly TypedArrayMap[D][]): NestedNumbers[] {
    return samples.map((s) => toNested(s, this.shape));
  }

  override fromJsonable(json: unknown): TypedArrayMap[D][] {
    if (!Array.isArray(json)) throw new TypeError('MultiDiscrete.fromJsonable expects an array of samples');
    return json.map((s, i) => {
      const flat = flattenNested(s);
      if (flat === null || flat.data.length !== this.size)
        throw new RangeError(`MultiDiscrete.fromJsonable: sample ${i} has the wrong shape`);
      return new TYPED_ARRAYS[this.dtype](flat.data) as TypedArrayMap[D];
    });
  }

  toString(): string {
    const starts = Array.from(this.start).some((s) => s !== 0);
    const nv = formatArray(this.nvec, this.shape, false);
    return starts
      ? `MultiDiscrete(${nv}, start=${formatArray(this.start, this.shape, false)})`
      : `MultiDiscrete(${nv})`;
  }
}
