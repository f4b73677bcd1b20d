/**
 * Batching of spaces and values for vector environments (Gymnasium's `vector.utils`
 * `batch_space`, `create_empty_array`, `concatenate`, `iterate`):
 *
 * - Box → Box of shape `[n, ...shape]`, same dtype; the batch is one flat typed array.
 * - Discrete → MultiDiscrete of `n` copies (an `Int32Array` batch, `Uint32Array` when the
 *   values need it); MultiDiscrete → integer Box `[n, ...shape]`; MultiBinary → int8 Box.
 * - Tuple → Tuple of batched subspaces (an array of batches); Dict → Dict of batched
 *   subspaces (an object of batches).
 * - Text, Sequence, Message and custom spaces → a Tuple of `n` copies (a plain array).
 * @module
 */
import { RandomGenerator } from '../random.js';
import { Box } from './box.js';
import { Dict, Tuple, type AnySpace } from './composite.js';
import { Discrete } from './discrete.js';
import { MultiBinary } from './multi-binary.js';
import { MultiDiscrete } from './multi-discrete.js';
import { flattenNested } from './nested.js';
import { TYPED_ARRAYS, dtypeOf, type DType, type TypedArray } from './space.js';

function childRng(space: AnySpace): RandomGenerator {
  return space.npRandom.clone();
}

/** The dtype of a Discrete batch: int32 when every value fits, else uint32 or float64. */
function discreteDType(space: Discrete): DType {
  const lo = space.start;
  const hi = space.start + space.n - 1;
  if (lo >= -2147483648 && hi <= 2147483647) return 'int32';
  if (lo >= 0 && hi <= 4294967295) return 'uint32';
  return 'float64';
}

/**
 * For spaces whose batch is one flat typed array: its dtype and the number of elements per
 * sub-environment; null for the others.
 */
export function typedBatchLayout(space: AnySpace): { dtype: DType; size: number } | null {
  if (space instanceof Box) return { dtype: space.dtype, size: space.size };
  if (space instanceof Discrete) return { dtype: discreteDType(space), size: 1 };
  if (space instanceof MultiDiscrete) return { dtype: space.dtype, size: space.size };
  if (space instanceof MultiBinary) return { dtype: 'int8', size: space.size };
  return null;
}

/** The space of a batch of `n` values of `space`. */
export function batchSpace(space: AnySpace, n: number): AnySpace {
  if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`batchSpace: n must be a positive integer, got ${n}`);
  if (space instanceof Box) {
    const tile = (arr: ArrayLike<number>, bounded: readonly boolean[], inf: number): number[] => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) for (let j = 0; j < arr.length; j++) out.push(bounded[j] ? arr[j] : inf);
      return out;
    };
    return new Box(
      tile(space.low, space.boundedBelow, -Infinity),
      tile(space.high, space.boundedAbove, Infinity),
      [n, ...space.shape],
      space.dtype,
      childRng(space),
    );
  }
  if (space instanceof Discrete) {
    if (discreteDType(space) === 'float64')
      throw new RangeError('batchSpace: Discrete values beyond the uint32 range cannot be batched');
    const dtype = discreteDType(space) as 'int32' | 'uint32';
    return new MultiDiscrete(new Array<number>(n).fill(space.n), {
      start: new Array<number>(n).fill(space.start),
      dtype,
      seed: childRng(space),
    });
  }
  if (space instanceof MultiDiscrete) {
    const low: number[] = [];
    const high: number[] = [];
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < space.size; j++) {
        low.push(space.start[j]);
        high.push(space.start[j] + space.nvec[j] - 1);
      }
    }
    return new Box(low, high, [n, ...space.shape], space.dtype, childRng(space));
  }
  if (space instanceof MultiBinary) return new Box(0, 1, [n, ...space.shape], 'int8', childRng(space));
  if (space instanceof Tuple) return new Tuple(space.spaces.map((s: AnySpace) => batchSpace(s, n)));
  if (space instanceof Dict) return new Dict(space.keys.map((k) => [k, batchSpace(space.spaces[k], n)] as const));
  return new Tuple(Array.from({ length: n }, () => copySpace(space)));
}

/** A copy of a space with a copy of its generator (Gymnasium deep-copies). */
function copySpace(space: AnySpace): AnySpace {
  const copy = Object.create(Object.getPrototypeOf(space) as object) as AnySpace;
  Object.assign(copy, space);
  copy.npRandom = childRng(space);
  return copy;
}

/** An empty batch for `n` values of `space` (zeros for typed batches, nulls elsewhere). */
export function createEmptyArray(space: AnySpace, n: number): unknown {
  const layout = typedBatchLayout(space);
  if (layout) return new TYPED_ARRAYS[layout.dtype](n * layout.size);
  if (space instanceof Tuple) return space.spaces.map((s: AnySpace) => createEmptyArray(s, n));
  if (space instanceof Dict)
    return Object.fromEntries(space.keys.map((k) => [k, createEmptyArray(space.spaces[k], n)]));
  return new Array<unknown>(n).fill(null);
}

function writeItem(out: TypedArray, offset: number, size: number, item: unknown, what: string): void {
  if (typeof item === 'number') {
    if (size !== 1) throw new RangeError(`concatenate: ${what} is a number, expected ${size} values`);
    out[offset] = item;
    return;
  }
  const values = dtypeOf(item) !== null ? (item as ArrayLike<number>) : flattenNested(item)?.data;
  if (!values || values.length !== size) throw new RangeError(`concatenate: ${what} must hold ${size} values`);
  for (let j = 0; j < size; j++) out[offset + j] = values[j];
}

/** Writes the values `items` of `space` into the batch `out` (created when absent) and returns it. */
export function concatenate(space: AnySpace, items: readonly unknown[], out?: unknown): unknown {
  const n = items.length;
  const layout = typedBatchLayout(space);
  if (layout) {
    const target = (out ?? new TYPED_ARRAYS[layout.dtype](n * layout.size)) as TypedArray;
    items.forEach((item, i) => writeItem(target, i * layout.size, layout.size, item, `item ${i}`));
    return target;
  }
  if (space instanceof Tuple) {
    const target = (out ?? space.spaces.map(() => undefined)) as unknown[];
    space.spaces.forEach((s: AnySpace, k: number) => {
      target[k] = concatenate(
        s,
        items.map((it) => (it as unknown[])[k]),
        target[k],
      );
    });
    return target;
  }
  if (space instanceof Dict) {
    const target = (out ?? {}) as Record<string, unknown>;
    for (const key of space.keys)
      target[key] = concatenate(
        space.spaces[key],
        items.map((it) => (it as Record<string, unknown>)[key]),
        target[key],
      );
    return target;
  }
  const target = (out ?? new Array<unknown>(n)) as unknown[];
  items.forEach((it, i) => (target[i] = it));
  return target;
}

/**
 * Splits a batch of `space` values into its `n` items. A typed batch may also be given as an
 * array of `n` per-item values (numbers for Discrete, arrays for the others).
 */
export function iterate(space: AnySpace, batch: unknown, n: number): unknown[] {
  const layout = typedBatchLayout(space);
  if (layout) {
    if (
      Array.isArray(batch) &&
      batch.length === n &&
      (layout.size === 1 ? batch.every((v) => typeof v === 'number') : batch.every((v) => typeof v === 'object'))
    ) {
      return layout.size === 1
        ? [...batch]
        : batch.map((v: unknown) =>
            dtypeOf(v) !== null ? v : new TYPED_ARRAYS[layout.dtype](flattenNested(v)?.data ?? []),
          );
    }
    const values = dtypeOf(batch) !== null ? (batch as TypedArray) : flattenNested(batch)?.data;
    if (!values || values.length !== n * layout.size) {
      throw new RangeError(`iterate: expected a batch of ${n} × ${layout.size} values for ${space.toString()}`);
    }
    if (space instanceof Discrete) return Array.from({ length: n }, (_, i) => Number(values[i]));
    const dtype = space instanceof MultiBinary ? 'int8' : layout.dtype;
    return Array.from({ length: n }, (_, i) => {
      const item = new TYPED_ARRAYS[dtype](layout.size);
      for (let j = 0; j < layout.size; j++) item[j] = values[i * layout.size + j];
      return item;
    });
  }
  if (space instanceof Tuple) {
    if (!Array.isArray(batch) || batch.length !== space.spaces.length)
      throw new RangeError(`iterate: expected one batch per Tuple subspace (${space.spaces.length})`);
    const columns = space.spaces.map((s: AnySpace, k: number) => iterate(s, batch[k], n));
    return Array.from({ length: n }, (_, i) => columns.map((c: unknown[]) => c[i]));
  }
  if (space instanceof Dict) {
    if (typeof batch !== 'object' || batch === null)
      throw new RangeError('iterate: expected an object of batches for a Dict space');
    const columns = space.keys.map((k) => iterate(space.spaces[k], (batch as Record<string, unknown>)[k], n));
    return Array.from({ length: n }, (_, i) => Object.fromEntries(space.keys.map((k, j) => [k, columns[j][i]])));
  }
  if (!Array.isArray(batch) || batch.length !== n)
    throw new RangeError(`iterate: expected an array of ${n} values for ${space.toString()}`);
  return [...batch];
}

/** A deep copy of a batch or value: typed arrays, arrays and plain objects are copied; other objects are shared. */
export function deepCopy<T>(value: T): T {
  if (dtypeOf(value) !== null) return (value as unknown as TypedArray).slice() as T;
  if (Array.isArray(value)) return value.map((v: unknown) => deepCopy(v)) as T;
  if (typeof value === 'object' && value !== null) {
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto === Object.prototype || proto === null) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = deepCopy(v);
      return out as T;
    }
  }
  return value;
}
