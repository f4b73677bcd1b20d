/**
 * `Box(low, high, shape, dtype)`: a (possibly unbounded) box in R^n (Gymnasium's `spaces.Box`).
 * Samples are flat, row-major typed arrays of the box's dtype (`Float32Array` by default) with
 * `shapeSize(shape)` elements; nested number arrays of the right shape are accepted by
 * `contains` too.
 * @module
 */
import type { RandomGenerator, Seed } from '../random.js';
import { flattenNested, formatArray, toNested, type NestedNumbers } from './nested.js';
import {
  DTYPE_RANGE,
  Space,
  TYPED_ARRAYS,
  canCast,
  checkShape,
  dtypeOf,
  formatShape,
  isDType,
  isFloatDType,
  shapeSize,
  type DType,
  type SpaceJSON,
  type TypedArrayMap,
} from './space.js';

/** Options of {@link Box} (an alternative to the positional `shape, dtype, seed`). */
export interface BoxOptions<D extends DType> {
  /** The shape; inferred from array bounds, `[1]` for scalar bounds. */
  shape?: readonly number[];
  /** Element type (default `float32`). */
  dtype?: D;
  /** Seed (or generator) of the sampler. */
  seed?: Seed | RandomGenerator | null;
}

/** A bound: a number (broadcast), nested arrays, or a typed array of the box's size. */
export type BoxBound = NestedNumbers | ArrayLike<number>;

function parseBound(value: BoxBound, name: string): { shape: number[] | null; data: number[] } {
  if (typeof value === 'number') return { shape: null, data: [value] };
  const flat = flattenNested(value);
  if (flat === null) throw new TypeError(`Box ${name} must be a number, nested number arrays or a typed array`);
  return flat;
}

/** A box of `dtype` values between `low` and `high` (inclusive), element by element. */
export class Box<D extends DType = 'float32'> extends Space<TypedArrayMap[D], null, null> {
  declare readonly shape: readonly number[];
  declare readonly dtype: D;
  /** Lower bounds (for integer dtypes, infinite bounds are stored as the dtype's limit). */
  readonly low: TypedArrayMap[D];
  /** Upper bounds. */
  readonly high: TypedArrayMap[D];
  /** Per element: true when the lower bound is finite. */
  readonly boundedBelow: readonly boolean[];
  /** Per element: true when the upper bound is finite. */
  readonly boundedAbove: readonly boolean[];
  /** Number of elements of a sample. */
  readonly size: number;

  constructor(
    low: BoxBound,
    high: BoxBound,
    shapeOrOptions?: readonly number[] | BoxOptions<D>,
    dtype?: D,
    seed?: Seed | RandomGenerator | null,
  ) {
    const options: BoxOptions<D> = Array.isArray(shapeOrOptions)
      ? { shape: shapeOrOptions as readonly number[], dtype, seed }
      : {
          ...((shapeOrOptions as BoxOptions<D> | undefined) ?? {}),
          ...(dtype !== undefined ? { dtype } : {}),
          ...(seed !== undefined ? { seed } : {}),
        };
    const dt = (options.dtype ?? 'float32') as D;
    if (!isDType(dt))
      throw new TypeError(`Box dtype must be one of ${Object.keys(TYPED_ARRAYS).join(', ')}, got ${String(dt)}`);
    const lo = parseBound(low, 'low');
    const hi = parseBound(high, 'high');
    let shape: number[];
    if (options.shape !== undefined && options.shape !== null) shape = checkShape(options.shape, 'Box shape');
    else if (lo.shape !== null) shape = lo.shape;
    else if (hi.shape !== null) shape = hi.shape;
    else shape = [1];
    const size = shapeSize(shape);
    const broadcast = (b: { shape: number[] | null; data: number[] }, name: string): number[] => {
      if (b.shape === null) return new Array<number>(size).fill(b.data[0]);
      if (b.data.length !== size || (options.shape === undefined && b.shape.join() !== shape.join())) {
        throw new RangeError(
          `Box ${name}.shape doesn't match provided shape, ${name}.shape: ${formatShape(b.shape)}, shape: ${formatShape(shape)}`,
        );
      }
      return b.data;
    };
    const lowData = broadcast(lo, 'low');
    const highData = broadcast(hi, 'high');
    const [dmin, dmax] = DTYPE_RANGE[dt];
    const boundedBelow: boolean[] = [];
    const boundedAbove: boolean[] = [];
    for (let i = 0; i < size; i++) {
      const l = lowData[i];
      const h = highData[i];
      if (typeof l !== 'number' || Number.isNaN(l))
        throw new RangeError(`No low value can be equal to NaN, low[${i}]=${l}`);
      if (typeof h !== 'number' || Number.isNaN(h))
        throw new RangeError(`No high value can be equal to NaN, high[${i}]=${h}`);
      boundedBelow.push(l > -Infinity);
      boundedAbove.push(h < Infinity);
      if (!isFloatDType(dt)) {
        if (l === -Infinity) {
          if (dmin === 0) throw new RangeError(`Box unsigned int dtype doesn't support -Infinity, low[${i}]=${l}`);
          lowData[i] = dmin;
        } else if (l === Infinity || !Number.isInteger(l) || l < dmin || l > dmax) {
          throw new RangeError(
            `Box low is out of bounds of the dtype range or not an integer, low[${i}]=${l}, dtype=${dt}`,
          );
        }
        if (h === Infinity) {
          highData[i] = dmax;
        } else if (h === -Infinity || !Number.isInteger(h) || h < dmin || h > dmax) {
          throw new RangeError(
            `Box high is out of bounds of the dtype range or not an integer, high[${i}]=${h}, dtype=${dt}`,
          );
        }
      }
    }
    const lowArr = new TYPED_ARRAYS[dt](lowData) as TypedArrayMap[D];
    const highArr = new TYPED_ARRAYS[dt](highData) as TypedArrayMap[D];
    for (let i = 0; i < size; i++) {
      if (lowArr[i] > highArr[i]) {
        throw new RangeError(
          `Box all low values must be less than or equal to high (some values break this), low[${i}]=${lowArr[i]}, high[${i}]=${highArr[i]}`,
        );
      }
    }
    super(shape, dt, options.seed);
    this.low = lowArr;
    this.high = highArr;
    this.boundedBelow = boundedBelow;
    this.boundedAbove = boundedAbove;
    this.size = size;
  }

  /** Whether the box is bounded `both` ways (default), only `below` or only `above`. */
  isBounded(manner: 'both' | 'below' | 'above' = 'both'): boolean {
    const below = this.boundedBelow.every(Boolean);
    const above = this.boundedAbove.every(Boolean);
    if (manner === 'both') return below && above;
    if (manner === 'below') return below;
    if (manner === 'above') return above;
    throw new RangeError(`manner is not in {'below', 'above', 'both'}, actual value: ${String(manner)}`);
  }

  /**
   * A random sample: per element, uniform on [low, high] when bounded, low + exponential when
   * bounded below only, high - exponential when bounded above only, normal when unbounded;
   * integer dtypes sample [low, high + 1) and floor. Box takes no mask.
   */
  sample(mask?: null, probability?: null): TypedArrayMap[D] {
    if (mask !== undefined && mask !== null)
      throw new TypeError(`Box.sample cannot be provided a mask, actual value: ${String(mask)}`);
    if (probability !== undefined && probability !== null)
      throw new TypeError(`Box.sample cannot be provided a probability, actual value: ${String(probability)}`);
    const rng = this.npRandom;
    const isFloat = isFloatDType(this.dtype);
    const out = new TYPED_ARRAYS[this.dtype](this.size) as TypedArrayMap[D];
    for (let i = 0; i < this.size; i++) {
      const below = this.boundedBelow[i];
      const above = this.boundedAbove[i];
      const lo = this.low[i];
      const hi = isFloat ? this.high[i] : this.high[i] + 1;
      let v: number;
      if (below && above) v = rng.uniform(lo, hi);
      else if (below) v = lo + rng.exponential();
      else if (above) v = this.high[i] - rng.exponential();
      else v = rng.normal();
      if (!isFloat) v = Math.min(Math.max(Math.floor(v), this.low[i]), this.high[i]);
      out[i] = v;
    }
    return out;
  }

  /**
   * True for a typed array whose dtype casts safely to this box's (NumPy `can_cast`) with
   * `size` elements within the bounds; for nested number arrays of exactly this shape whose
   * values fit the dtype; for a number when the shape is `[]`.
   */
  contains(x: unknown): boolean {
    let values: ArrayLike<number>;
    const xdtype = dtypeOf(x);
    if (xdtype !== null) {
      if (!canCast(xdtype, this.dtype)) return false;
      values = x as ArrayLike<number>;
      if (values.length !== this.size) return false;
    } else {
      const flat = flattenNested(x);
      if (flat === null || flat.shape.join() !== this.shape.join()) return false;
      const isFloat = isFloatDType(this.dtype);
      const [dmin, dmax] = DTYPE_RANGE[this.dtype];
      const cast: number[] = [];
      for (const v of flat.data) {
        if (!isFloat && (!Number.isInteger(v) || v < dmin || v > dmax)) return false;
        cast.push(this.dtype === 'float32' ? Math.fround(v) : v);
      }
      values = cast;
    }
    for (let i = 0; i < this.size; i++) {
      const v = values[i];
      if (!(v >= this.low[i] && v <= this.high[i])) return false;
    }
    return true;
  }

  equals(other: unknown): boolean {
    if (!(other instanceof Box) || other.dtype !== this.dtype || other.shape.join() !== this.shape.join()) return false;
    const close = (a: number, b: number): boolean => a === b || Math.abs(a - b) <= 1e-8 + 1e-5 * Math.abs(b);
    for (let i = 0; i < this.size; i++) {
      if (!close(this.low[i], other.low[i]) || !close(this.high[i], other.high[i])) return false;
    }
    return true;
  }

  override get isNpFlattenable(): boolean {
    return true;
  }

  toJSON(): SpaceJSON {
    const enc = (arr: ArrayLike<number>, bounded: readonly boolean[], sign: string): Array<number | string> =>
      Array.from(arr, (v, i) => (bounded[i] ? v : `${sign}inf`));
    return {
      type: 'Box',
      low: enc(this.low, this.boundedBelow, '-'),
      high: enc(this.high, this.boundedAbove, ''),
      shape: [...this.shape],
      dtype: this.dtype,
    };
  }

  /** Samples as nested number arrays of this box's shape. */
  override toJsonable(samples: readonly TypedArrayMap[D][]): NestedNumbers[] {
    return samples.map((s) => toNested(s, this.shape));
  }

  /** Nested number arrays back to typed arrays of this box's dtype. */
  override fromJsonable(json: unknown): TypedArrayMap[D][] {
    if (!Array.isArray(json)) throw new TypeError('Box.fromJsonable expects an array of samples');
    return json.map((s, i) => {
      const flat = flattenNested(s);
      if (flat === null || flat.data.length !== this.size)
        throw new RangeError(`Box.fromJsonable: sample ${i} does not have shape ${formatShape(this.shape)}`);
      return new TYPED_ARRAYS[this.dtype](flat.data) as TypedArrayMap[D];
    });
  }

  toString(): string {
    const isFloat = isFloatDType(this.dtype);
    const short = (arr: ArrayLike<number>): string => {
      let same = arr.length > 0;
      for (let i = 1; i < arr.length && same; i++) same = arr[i] === arr[0];
      return same ? formatArray([arr[0]], [], isFloat) : formatArray(arr, this.shape, isFloat);
    };
    return `Box(${short(this.low)}, ${short(this.high)}, ${formatShape(this.shape)}, ${this.dtype})`;
  }
}
