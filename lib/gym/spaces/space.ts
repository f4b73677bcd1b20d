/**
 * The base class of every space (Gymnasium's `gymnasium.spaces.Space`) and the numeric dtypes
 * that Box, MultiDiscrete and MultiBinary samples use.
 * @module
 */
import { RandomGenerator, type Seed } from '../random.js';

/** Element types of array-valued spaces. (There is no int64: JS typed arrays of int64 hold bigints.) */
export interface TypedArrayMap {
  float32: Float32Array;
  float64: Float64Array;
  int8: Int8Array;
  int16: Int16Array;
  int32: Int32Array;
  uint8: Uint8Array;
  uint16: Uint16Array;
  uint32: Uint32Array;
}

/** A dtype name: `float32`, `float64`, `int8`, `int16`, `int32`, `uint8`, `uint16`, `uint32`. */
export type DType = keyof TypedArrayMap;

/** Any of the typed arrays of {@link TypedArrayMap}. */
export type TypedArray = TypedArrayMap[DType];

/** The typed-array constructor of each dtype. */
export const TYPED_ARRAYS: { [D in DType]: { new (n: number | ArrayLike<number>): TypedArrayMap[D] } } = {
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
};

/** The inclusive [min, max] range of each integer dtype; floats are unbounded. */
export const DTYPE_RANGE: Record<DType, [number, number]> = {
  float32: [-Infinity, Infinity],
  float64: [-Infinity, Infinity],
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-2147483648, 2147483647],
  uint8: [0, 255],
  uint16: [0, 65535],
  uint32: [0, 4294967295],
};

/** True for `float32`/`float64`. */
export function isFloatDType(dtype: DType): boolean {
  return dtype === 'float32' || dtype === 'float64';
}

/** True for a valid dtype name. */
export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(TYPED_ARRAYS, value);
}

/** The dtype of a typed array, or null when `value` is not one of {@link TypedArrayMap}. */
export function dtypeOf(value: unknown): DType | null {
  if (value instanceof Float32Array) return 'float32';
  if (value instanceof Float64Array) return 'float64';
  if (value instanceof Int8Array) return 'int8';
  if (value instanceof Int16Array) return 'int16';
  if (value instanceof Int32Array) return 'int32';
  if (value instanceof Uint8Array) return 'uint8';
  if (value instanceof Uint16Array) return 'uint16';
  if (value instanceof Uint32Array) return 'uint32';
  return null;
}

const BITS: Record<DType, number> = {
  float32: 32,
  float64: 64,
  int8: 8,
  int16: 16,
  int32: 32,
  uint8: 8,
  uint16: 16,
  uint32: 32,
};

/**
 * NumPy's `can_cast(from, to)` with the default `safe` casting: true when every value of `from`
 * is exactly representable in `to`.
 */
export function canCast(from: DType, to: DType): boolean {
  if (from === to) return true;
  const fromFloat = isFloatDType(from);
  const toFloat = isFloatDType(to);
  if (fromFloat) return toFloat && BITS[to] >= BITS[from];
  const fromSigned = from.startsWith('int');
  if (toFloat) return BITS[from] < (to === 'float32' ? 24 : 53) || (to === 'float64' && BITS[from] <= 32);
  const toSigned = to.startsWith('int');
  if (fromSigned && !toSigned) return false;
  if (fromSigned === toSigned) return BITS[to] >= BITS[from];
  return BITS[to] > BITS[from]; // unsigned -> signed needs one more bit
}

/** True when `value` can be stored exactly in `dtype`. */
export function representable(value: number, dtype: DType): boolean {
  if (typeof value !== 'number' || Number.isNaN(value)) return isFloatDType(dtype) && Number.isNaN(value);
  if (isFloatDType(dtype))
    return dtype === 'float64' || Number.isNaN(value) || !Number.isFinite(value) || Math.fround(value) === value;
  const [lo, hi] = DTYPE_RANGE[dtype];
  return Number.isInteger(value) && value >= lo && value <= hi;
}

/** A seed tree: what composite spaces accept in `seed()` and return from it. */
export type SeedTree = Seed | null | SeedTree[] | { [key: string]: SeedTree };

/** The JSON description of a space (see {@link spaceFromJSON}). */
export interface SpaceJSON {
  /** The space class: `Discrete`, `Box`, `Dict`, ... */
  type: string;
  [key: string]: unknown;
}

/** Product of a shape's dimensions (1 for the scalar shape `[]`). */
export function shapeSize(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Validates a shape: non-negative integers. */
export function checkShape(shape: unknown, name = 'shape'): number[] {
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new TypeError(`${name} must be an array of non-negative integers, got ${JSON.stringify(shape)}`);
  }
  return [...(shape as number[])];
}

/** Formats a shape as Python does, e.g. `(3,)` or `(2, 4)`. */
export function formatShape(shape: readonly number[]): string {
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
}

/**
 * A space: a set of values with a sampler. `T` is the type of its values, `M` of the mask and
 * `P` of the probability arguments of {@link Space.sample}.
 */
export abstract class Space<T = unknown, M = unknown, P = unknown> {
  /** The shape of the values for array-valued spaces, else null. */
  readonly shape: readonly number[] | null;
  /** The dtype of array-valued spaces, else null. */
  readonly dtype: DType | null;
  /** The generator behind {@link Space.sample}; created lazily when not seeded. */
  protected rng: RandomGenerator | null = null;

  protected constructor(shape: readonly number[] | null, dtype: DType | null, seed?: Seed | RandomGenerator | null) {
    this.shape = shape;
    this.dtype = dtype;
    if (seed instanceof RandomGenerator) this.rng = seed;
    else if (seed !== undefined && seed !== null) this.seed(seed);
  }

  /** The space's generator (created from a random seed on first use, as in Gymnasium). */
  get npRandom(): RandomGenerator {
    this.rng ??= new RandomGenerator();
    return this.rng;
  }

  set npRandom(value: RandomGenerator) {
    this.rng = value;
  }

  /**
   * Seeds the sampler and returns the seed(s) used. Simple spaces take one seed (null: a random
   * one); composite spaces also take one seed per subspace.
   */
  seed(seed?: SeedTree): SeedTree {
    if (seed !== undefined && seed !== null && typeof seed !== 'number' && typeof seed !== 'bigint') {
      throw new TypeError(`${this.constructor.name}.seed expects an integer or null, got ${JSON.stringify(seed)}`);
    }
    this.rng = new RandomGenerator(seed ?? null);
    return this.rng.seed;
  }

  /** A random element, optionally restricted by `mask` or weighted by `probability` (not both). */
  abstract sample(mask?: M | null, probability?: P | null): T;

  /** True when `x` is an element of this space. */
  abstract contains(x: unknown): boolean;

  /** True when `other` is the same space (same class and parameters; the generators are ignored). */
  abstract equals(other: unknown): boolean;

  /** The space's parameters as JSON (see {@link spaceFromJSON}). */
  abstract toJSON(): SpaceJSON;

  /** Converts a batch of samples to JSON-compatible values. */
  toJsonable(samples: readonly T[]): unknown {
    return samples.map((s) => structuredClone(s));
  }

  /** Converts JSON-compatible values (from {@link Space.toJsonable}) back to samples. */
  fromJsonable(json: unknown): T[] {
    if (!Array.isArray(json)) throw new TypeError(`${this.constructor.name}.fromJsonable expects an array`);
    return json.map((s) => structuredClone(s) as T);
  }

  /** Whether the space flattens to a Box (Gymnasium's `is_np_flattenable`). */
  get isNpFlattenable(): boolean {
    return false;
  }

  /** A readable description, like Gymnasium's `repr`. */
  abstract toString(): string;

  /** Checks that mask and probability are not both given (Gymnasium raises ValueError). */
  protected checkMaskProbability(mask: unknown, probability: unknown): void {
    if (mask !== undefined && mask !== null && probability !== undefined && probability !== null) {
      throw new RangeError(
        `Only one of \`mask\` or \`probability\` can be provided to ${this.constructor.name}.sample`,
      );
    }
  }
}

/** Derives `count` sub-seeds from `seed` as Gymnasium's composite spaces do (integers below 2^31 - 1). */
export function subSeeds(seed: Seed, count: number): number[] {
  const g = new RandomGenerator(seed);
  return Array.from({ length: count }, () => g.integers(2147483647));
}

/** Validates an int8-style 0/1 mask of length n. */
export function checkBinaryMask(mask: unknown, n: number, what: string, allowTwo = false): ArrayLike<number> {
  if (!isNumberArrayLike(mask)) throw new TypeError(`${what} must be an Int8Array or an array of numbers`);
  if (mask.length !== n) throw new RangeError(`${what} must have length ${n}, got ${mask.length}`);
  for (let i = 0; i < n; i++) {
    const v = mask[i];
    if (!(v === 0 || v === 1 || (allowTwo && v === 2))) {
      throw new RangeError(
        `All values of ${what} should be 0${allowTwo ? ', 1 or 2' : ' or 1'}, got ${v} at index ${i}`,
      );
    }
  }
  return mask;
}

/** Validates a probability vector of length n (values in [0, 1], sum 1 within 1e-8). */
export function checkProbability(p: unknown, n: number, what: string): ArrayLike<number> {
  if (!isNumberArrayLike(p)) throw new TypeError(`${what} must be a Float64Array or an array of numbers`);
  if (p.length !== n) throw new RangeError(`${what} must have length ${n}, got ${p.length}`);
  let total = 0;
  for (let i = 0; i < n; i++) {
    if (!(p[i] >= 0 && p[i] <= 1))
      throw new RangeError(`All values of ${what} should be between 0 and 1, got ${p[i]} at index ${i}`);
    total += p[i];
  }
  if (Math.abs(total - 1) > 1e-8) throw new RangeError(`The sum of ${what} should be equal to 1, actual sum: ${total}`);
  return p;
}

/** True for a typed array or an array whose items are all numbers. */
export function isNumberArrayLike(x: unknown): x is ArrayLike<number> {
  if (dtypeOf(x) !== null) return true;
  return Array.isArray(x) && x.every((v) => typeof v === 'number');
}
