/**
 * `DataProto`: a batch in the manner of VERL's `verl/protocol.py`. Typed-array columns
 * (`Float32Array` / `Int32Array`, row-major, each with a per-row shape) that share one batch
 * dimension, per-sample non-tensor values (any JavaScript values, one per row), and a `meta`
 * dictionary. Operations return new batches and never mutate their inputs; contiguous
 * selections (`slice`, `chunk`, `split`) share the column memory (subarray views), gathers
 * (`selectRows`, `reorder`, `repeat`, `concat`) copy. Inconsistent sizes, shapes, dtypes or
 * conflicting values throw a {@link DataProtoError} naming the column.
 * @module
 */
import { deepEqual } from './deep-equal.js';

/** A column's storage. */
export type TensorData = Float32Array | Int32Array;

/** A column: flat row-major data and the shape of one row (`[]` for a scalar per row). */
export interface TensorColumn {
  /** `batchSize * product(shape)` values. */
  readonly data: TensorData;
  /** The shape of one row. */
  readonly shape: readonly number[];
}

/** Columns as given to {@link DataProto.create}: a column, or flat data whose row shape is inferred as `[data.length / batchSize]`. */
export type TensorInput = TensorColumn | TensorData;

/** What {@link DataProto.create} takes. */
export interface DataProtoInit {
  /** Tensor columns. */
  tensors?: Readonly<Record<string, TensorInput>>;
  /** Non-tensor columns: one value per row. */
  nonTensors?: Readonly<Record<string, readonly unknown[]>>;
  /** Batch-level information (`metrics` is merged specially by {@link DataProto.concat}). */
  meta?: Readonly<Record<string, unknown>>;
  /** The batch size; needed when there is no column, checked otherwise. */
  batchSize?: number;
}

/** Thrown for inconsistent batches and bad arguments (a RangeError: sizes, shapes and values). */
export class DataProtoError extends RangeError {
  constructor(message: string) {
    super(message);
    this.name = 'DataProtoError';
  }
}

/** One row of a batch (VERL's `DataProtoItem`): row views of the tensors and the row's values. */
export interface DataProtoItem {
  /** Row views (they share memory with the batch). */
  tensors: Record<string, TensorData>;
  /** The row's non-tensor values. */
  nonTensors: Record<string, unknown>;
  /** The batch's meta. */
  meta: Readonly<Record<string, unknown>>;
}

/** Which columns {@link DataProto.select} keeps (omitted: all of that kind; an empty list: none). */
export interface SelectKeys {
  /** Tensor columns to keep. */
  tensors?: readonly string[];
  /** Non-tensor columns to keep. */
  nonTensors?: readonly string[];
  /** Meta keys to keep. */
  meta?: readonly string[];
}

function rowSizeOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

function isTensorData(x: unknown): x is TensorData {
  return x instanceof Float32Array || x instanceof Int32Array;
}

function sameDtype(a: TensorData, b: TensorData): boolean {
  return Object.getPrototypeOf(a) === Object.getPrototypeOf(b);
}

function dtypeName(a: TensorData): string {
  return a instanceof Float32Array ? 'float32' : 'int32';
}

function alloc(like: TensorData, length: number): TensorData {
  return like instanceof Float32Array ? new Float32Array(length) : new Int32Array(length);
}

function shapeText(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

/** Checks a list of row indices against a batch size and returns it as a plain array. */
function checkIndices(indices: ArrayLike<number>, batchSize: number, what: string): number[] {
  const out = Array.from(indices);
  for (let i = 0; i < out.length; i++) {
    const v = out[i];
    if (!Number.isInteger(v) || v < 0 || v >= batchSize)
      throw new DataProtoError(`${what}[${i}] = ${String(v)} is not a row index of a batch of ${batchSize}`);
  }
  return out;
}

/** A batch of samples (see the module description). */
export class DataProto {
  /** Number of rows. */
  readonly batchSize: number;
  private readonly tensorMap: Map<string, TensorColumn>;
  private readonly nonTensorMap: Map<string, readonly unknown[]>;
  /** Batch-level information (a frozen shallow copy). */
  readonly meta: Readonly<Record<string, unknown>>;

  private constructor(
    batchSize: number,
    tensors: Map<string, TensorColumn>,
    nonTensors: Map<string, readonly unknown[]>,
    meta: Record<string, unknown>,
  ) {
    this.batchSize = batchSize;
    this.tensorMap = tensors;
    this.nonTensorMap = nonTensors;
    this.meta = Object.freeze({ ...meta });
  }

  /**
   * Builds a batch, checking that every column has the same number of rows (the batch size,
   * given or inferred from the first column), that tensor data is a Float32Array or an
   * Int32Array whose length is `batchSize * product(shape)`, that non-tensor columns are
   * arrays of `batchSize` values, and that no name is both a tensor and a non-tensor column.
   * Typed arrays are not copied.
   */
  static create(init: DataProtoInit = {}): DataProto {
    if (init === null || typeof init !== 'object')
      throw new TypeError('DataProto.create expects { tensors, nonTensors, meta, batchSize }');
    let batchSize = init.batchSize;
    if (batchSize !== undefined && (!Number.isInteger(batchSize) || batchSize < 0))
      throw new DataProtoError(`batchSize must be a non-negative integer, got ${String(batchSize)}`);
    const tensors = new Map<string, TensorColumn>();
    const nonTensors = new Map<string, readonly unknown[]>();
    for (const [name, v] of Object.entries(init.nonTensors ?? {})) {
      if (!Array.isArray(v)) throw new TypeError(`non-tensor column '${name}' must be an array (one value per row)`);
      if (batchSize === undefined) batchSize = v.length;
      else if (v.length !== batchSize)
        throw new DataProtoError(`non-tensor column '${name}' has ${v.length} rows but the batch has ${batchSize}`);
      nonTensors.set(name, v);
    }
    for (const [name, input] of Object.entries(init.tensors ?? {})) {
      if (nonTensors.has(name))
        throw new DataProtoError(`'${name}' is given both as a tensor and as a non-tensor column`);
      const data = isTensorData(input) ? input : (input as TensorColumn)?.data;
      if (!isTensorData(data))
        throw new TypeError(
          `tensor column '${name}' must be a Float32Array or an Int32Array (or { data, shape } with one)`,
        );
      let shape: number[];
      if (isTensorData(input)) {
        if (batchSize === undefined)
          throw new DataProtoError(
            `tensor column '${name}' is given without a shape: give batchSize or { data, shape }`,
          );
        if (batchSize === 0) shape = [0];
        else {
          if (data.length % batchSize !== 0)
            throw new DataProtoError(
              `tensor column '${name}' has ${data.length} values, not a multiple of the batch size ${batchSize}`,
            );
          shape = [data.length / batchSize];
        }
      } else {
        const s = (input as TensorColumn).shape;
        if (!Array.isArray(s) || !s.every((d) => Number.isInteger(d) && d >= 0))
          throw new DataProtoError(
            `tensor column '${name}': shape must be an array of non-negative integers, got ${JSON.stringify(s)}`,
          );
        shape = [...s];
      }
      const rs = rowSizeOf(shape);
      if (batchSize === undefined) {
        if (rs === 0)
          throw new DataProtoError(
            `tensor column '${name}' has an empty row shape ${shapeText(shape)}: give batchSize`,
          );
        if (data.length % rs !== 0)
          throw new DataProtoError(
            `tensor column '${name}' has ${data.length} values, not a multiple of its row size ${rs} (shape ${shapeText(shape)})`,
          );
        batchSize = data.length / rs;
      } else if (data.length !== batchSize * rs) {
        throw new DataProtoError(
          `tensor column '${name}' has ${data.length} values but ${batchSize} rows of shape ${shapeText(shape)} need ${batchSize * rs}`,
        );
      }
      tensors.set(name, Object.freeze({ data, shape: Object.freeze(shape) }));
    }
    if (init.meta !== undefined && (init.meta === null || typeof init.meta !== 'object' || Array.isArray(init.meta)))
      throw new TypeError('meta must be an object');
    return new DataProto(batchSize ?? 0, tensors, nonTensors, { ...(init.meta ?? {}) });
  }

  /** Number of rows (same as `batchSize`). */
  get length(): number {
    return this.batchSize;
  }

  /** Names of the tensor columns, in insertion order. */
  get tensorKeys(): string[] {
    return [...this.tensorMap.keys()];
  }

  /** Names of the non-tensor columns, in insertion order. */
  get nonTensorKeys(): string[] {
    return [...this.nonTensorMap.keys()];
  }

  /** Whether a tensor or non-tensor column has this name. */
  has(name: string): boolean {
    return this.tensorMap.has(name) || this.nonTensorMap.has(name);
  }

  /** The tensor column `name` (throws when absent). */
  tensor(name: string): TensorColumn {
    const c = this.tensorMap.get(name);
    if (!c) throw new DataProtoError(`no tensor column '${name}' (has ${this.tensorKeys.join(', ') || 'none'})`);
    return c;
  }

  /** The data of the tensor column `name` (throws when absent). */
  get(name: string): TensorData {
    return this.tensor(name).data;
  }

  /** The data of a float32 column (throws when absent or int32). */
  float32(name: string): Float32Array {
    const d = this.get(name);
    if (!(d instanceof Float32Array)) throw new DataProtoError(`tensor column '${name}' is int32, not float32`);
    return d;
  }

  /** The data of an int32 column (throws when absent or float32). */
  int32(name: string): Int32Array {
    const d = this.get(name);
    if (!(d instanceof Int32Array)) throw new DataProtoError(`tensor column '${name}' is float32, not int32`);
    return d;
  }

  /** The full shape `[batchSize, ...rowShape]` of a tensor column. */
  shape(name: string): number[] {
    return [this.batchSize, ...this.tensor(name).shape];
  }

  /** The values of the non-tensor column `name` (throws when absent). */
  nonTensor<T = unknown>(name: string): readonly T[] {
    const v = this.nonTensorMap.get(name);
    if (!v) throw new DataProtoError(`no non-tensor column '${name}' (has ${this.nonTensorKeys.join(', ') || 'none'})`);
    return v as readonly T[];
  }

  /** A view of row `i` of a tensor column. */
  row(name: string, i: number): TensorData {
    const c = this.tensor(name);
    checkIndices([i], this.batchSize, 'row');
    const rs = rowSizeOf(c.shape);
    return c.data.subarray(i * rs, (i + 1) * rs);
  }

  /** Row `i` (VERL's `batch[i]`). */
  item(i: number): DataProtoItem {
    checkIndices([i], this.batchSize, 'item');
    const tensors: Record<string, TensorData> = {};
    for (const name of this.tensorMap.keys()) tensors[name] = this.row(name, i);
    const nonTensors: Record<string, unknown> = {};
    for (const [name, v] of this.nonTensorMap) nonTensors[name] = v[i];
    return { tensors, nonTensors, meta: this.meta };
  }

  /** A copy with columns or meta added or replaced (same batch size required). */
  assign(init: Omit<DataProtoInit, 'batchSize'>): DataProto {
    const tensors: Record<string, TensorInput> = {};
    for (const [k, c] of this.tensorMap) if (!(init.nonTensors && k in init.nonTensors)) tensors[k] = c;
    const nonTensors: Record<string, readonly unknown[]> = {};
    for (const [k, v] of this.nonTensorMap) if (!(init.tensors && k in init.tensors)) nonTensors[k] = v;
    return DataProto.create({
      tensors: { ...tensors, ...(init.tensors ?? {}) },
      nonTensors: { ...nonTensors, ...(init.nonTensors ?? {}) },
      meta: { ...this.meta, ...(init.meta ?? {}) },
      batchSize: this.batchSize,
    });
  }

  /** A copy without these columns (tensor or non-tensor) or meta keys; unknown names throw. */
  drop(names: readonly string[], metaKeys: readonly string[] = []): DataProto {
    for (const n of names) if (!this.has(n)) throw new DataProtoError(`drop: no column '${n}'`);
    const meta: Record<string, unknown> = { ...this.meta };
    for (const k of metaKeys) {
      if (!(k in meta)) throw new DataProtoError(`drop: no meta key '${k}'`);
      delete meta[k];
    }
    return this.rebuild(
      [...this.tensorMap].filter(([k]) => !names.includes(k)),
      [...this.nonTensorMap].filter(([k]) => !names.includes(k)),
      meta,
      this.batchSize,
    );
  }

  private rebuild(
    tensors: [string, TensorColumn][],
    nonTensors: [string, readonly unknown[]][],
    meta: Record<string, unknown>,
    batchSize: number,
  ): DataProto {
    return new DataProto(batchSize, new Map(tensors), new Map(nonTensors), meta);
  }

  /**
   * Merges the columns and meta of `other` (VERL's `union`): the batch sizes must match, and a
   * name present on both sides must hold equal values (same dtype, row shape and elements for
   * tensors; deep equality for non-tensor values and meta).
   */
  union(other: DataProto): DataProto {
    if (!(other instanceof DataProto)) throw new TypeError('union expects a DataProto');
    if (other.batchSize !== this.batchSize)
      throw new DataProtoError(`union: batch sizes differ (${this.batchSize} and ${other.batchSize})`);
    const tensors = new Map(this.tensorMap);
    for (const [k, c] of other.tensorMap) {
      if (this.nonTensorMap.has(k))
        throw new DataProtoError(`union: '${k}' is a non-tensor column on one side and a tensor column on the other`);
      const mine = tensors.get(k);
      if (mine) {
        if (
          !sameDtype(mine.data, c.data) ||
          shapeText(mine.shape) !== shapeText(c.shape) ||
          !deepEqual(mine.data, c.data)
        ) {
          throw new DataProtoError(
            `union: tensor column '${k}' differs between the two batches (${dtypeName(mine.data)} ${shapeText(mine.shape)} vs ${dtypeName(c.data)} ${shapeText(c.shape)}${sameDtype(mine.data, c.data) && shapeText(mine.shape) === shapeText(c.shape) ? ', different values' : ''})`,
          );
        }
      } else tensors.set(k, c);
    }
    const nonTensors = new Map(this.nonTensorMap);
    for (const [k, v] of other.nonTensorMap) {
      if (this.tensorMap.has(k))
        throw new DataProtoError(`union: '${k}' is a tensor column on one side and a non-tensor column on the other`);
      const mine = nonTensors.get(k);
      if (mine) {
        if (!deepEqual(mine, v))
          throw new DataProtoError(`union: non-tensor column '${k}' differs between the two batches`);
      } else nonTensors.set(k, v);
    }
    const meta: Record<string, unknown> = { ...this.meta };
    for (const [k, v] of Object.entries(other.meta)) {
      if (k in meta && !deepEqual(meta[k], v))
        throw new DataProtoError(`union: meta '${k}' differs between the two batches`);
      meta[k] = v;
    }
    return this.rebuild([...tensors], [...nonTensors], meta, this.batchSize);
  }

  /**
   * Concatenates batches along the batch dimension (VERL's `concat`). All parts must have the
   * same columns with the same dtypes and row shapes, and equal meta except `metrics`: each
   * part's `metrics` (name → number or list) are collected into name → list of values.
   */
  static concat(parts: readonly DataProto[]): DataProto {
    if (!Array.isArray(parts) || parts.length === 0) throw new DataProtoError('concat needs at least one batch');
    parts.forEach((p, i) => {
      if (!(p instanceof DataProto)) throw new TypeError(`concat: part ${i} is not a DataProto`);
    });
    const first = parts[0];
    const nk = first.nonTensorKeys.slice().sort().join('\u0000');
    const total = parts.reduce((s, p) => s + p.batchSize, 0);
    parts.forEach((p, i) => {
      if (p.tensorKeys.slice().sort().join('\u0000') !== first.tensorKeys.slice().sort().join('\u0000')) {
        throw new DataProtoError(
          `concat: part ${i} has tensor columns [${p.tensorKeys.join(', ')}], part 0 has [${first.tensorKeys.join(', ')}]`,
        );
      }
      if (p.nonTensorKeys.slice().sort().join('\u0000') !== nk) {
        throw new DataProtoError(
          `concat: part ${i} has non-tensor columns [${p.nonTensorKeys.join(', ')}], part 0 has [${first.nonTensorKeys.join(', ')}]`,
        );
      }
      for (const k of first.tensorKeys) {
        const a = first.tensor(k);
        const b = p.tensor(k);
        if (!sameDtype(a.data, b.data))
          throw new DataProtoError(
            `concat: tensor column '${k}' is ${dtypeName(b.data)} in part ${i} but ${dtypeName(a.data)} in part 0`,
          );
        if (shapeText(a.shape) !== shapeText(b.shape))
          throw new DataProtoError(
            `concat: tensor column '${k}' has row shape ${shapeText(b.shape)} in part ${i} but ${shapeText(a.shape)} in part 0`,
          );
      }
    });
    const tensors: [string, TensorColumn][] = first.tensorKeys.map((k: string): [string, TensorColumn] => {
      const c = first.tensor(k);
      const out = alloc(c.data, total * rowSizeOf(c.shape));
      let at = 0;
      for (const p of parts) {
        const d = p.get(k);
        out.set(d, at);
        at += d.length;
      }
      return [k, Object.freeze({ data: out, shape: c.shape })];
    });
    const nonTensors: [string, unknown[]][] = first.nonTensorKeys.map((k: string): [string, unknown[]] => [
      k,
      parts.flatMap((p) => [...p.nonTensor(k)]),
    ]);
    const meta: Record<string, unknown> = {};
    const metrics: Record<string, unknown[]> = {};
    let anyMetrics = false;
    parts.forEach((p, i) => {
      for (const [k, v] of Object.entries(p.meta)) {
        if (k === 'metrics') {
          if (v === null || typeof v !== 'object' || Array.isArray(v))
            throw new DataProtoError(`concat: meta.metrics of part ${i} must be an object of name → value`);
          anyMetrics = true;
          for (const [m, x] of Object.entries(v as Record<string, unknown>))
            (metrics[m] ??= []).push(...(Array.isArray(x) ? x : [x]));
          continue;
        }
        if (i === 0) meta[k] = v;
        else if (!(k in meta) || !deepEqual(meta[k], v))
          throw new DataProtoError(`concat: meta '${k}' of part ${i} differs from part 0 (only 'metrics' may differ)`);
      }
      if (i > 0)
        for (const k of Object.keys(meta))
          if (!(k in p.meta)) throw new DataProtoError(`concat: part ${i} has no meta '${k}' (part 0 has it)`);
    });
    if (anyMetrics) meta.metrics = metrics;
    return new DataProto(total, new Map(tensors), new Map(nonTensors), meta);
  }

  /** Rows `[start, end)` (negative indices count from the end, as in `Array.slice`); tensors are views. */
  slice(start = 0, end = this.batchSize): DataProto {
    if (!Number.isInteger(start) || !Number.isInteger(end))
      throw new DataProtoError(`slice bounds must be integers, got ${start}, ${end}`);
    const s = Math.max(0, start < 0 ? this.batchSize + start : Math.min(start, this.batchSize));
    const e = Math.max(s, end < 0 ? this.batchSize + end : Math.min(end, this.batchSize));
    const tensors: [string, TensorColumn][] = [...this.tensorMap].map(([k, c]) => {
      const rs = rowSizeOf(c.shape);
      return [k, Object.freeze({ data: c.data.subarray(s * rs, e * rs), shape: c.shape })];
    });
    const nonTensors: [string, readonly unknown[]][] = [...this.nonTensorMap].map(([k, v]) => [k, v.slice(s, e)]);
    return this.rebuild(tensors, nonTensors, { ...this.meta }, e - s);
  }

  /** `n` equal parts (VERL's `chunk`): the batch size must be divisible by `n` (see {@link padToDivisor}). */
  chunk(n: number): DataProto[] {
    if (!Number.isInteger(n) || n < 1)
      throw new DataProtoError(`chunk: the number of chunks must be a positive integer, got ${String(n)}`);
    if (this.batchSize % n !== 0)
      throw new DataProtoError(
        `chunk: a batch of ${this.batchSize} cannot be split into ${n} equal chunks (pad it with padToDivisor(${n}) first)`,
      );
    const size = this.batchSize / n;
    return Array.from({ length: n }, (_, i) => this.slice(i * size, (i + 1) * size));
  }

  /** Parts of `size` rows (the last one may be smaller), VERL's `split(split_size)`. */
  split(size: number): DataProto[] {
    if (!Number.isInteger(size) || size < 1)
      throw new DataProtoError(`split: the part size must be a positive integer, got ${String(size)}`);
    const out: DataProto[] = [];
    for (let s = 0; s < this.batchSize; s += size) out.push(this.slice(s, s + size));
    return out;
  }

  /**
   * Each row `times` times: interleaved `[a, a, b, b]` (default, how VERL repeats prompts for
   * `rollout.n`) or tiled `[a, b, a, b]`. `options` is `{ interleave }` or the boolean itself.
   */
  repeat(times: number, options: boolean | { interleave?: boolean } = {}): DataProto {
    if (!Number.isInteger(times) || times < 1)
      throw new DataProtoError(`repeat: times must be a positive integer, got ${String(times)}`);
    const interleave = typeof options === 'boolean' ? options : (options.interleave ?? true);
    const idx: number[] = [];
    if (interleave) for (let i = 0; i < this.batchSize; i++) for (let r = 0; r < times; r++) idx.push(i);
    else for (let r = 0; r < times; r++) for (let i = 0; i < this.batchSize; i++) idx.push(i);
    return this.gather(idx);
  }

  /**
   * Keeps some columns and meta keys: `{ tensors, nonTensors, meta }` (an omitted kind is kept
   * whole, an empty list keeps none of it), or a list of column names of either kind (meta
   * kept). Unknown names throw.
   */
  select(keys: SelectKeys | readonly string[]): DataProto {
    if (Array.isArray(keys)) {
      const names = keys as readonly string[];
      for (const n of names) if (!this.has(n)) throw new DataProtoError(`select: no column '${n}'`);
      return this.select({
        tensors: names.filter((n) => this.tensorMap.has(n)),
        nonTensors: names.filter((n) => this.nonTensorMap.has(n)),
      });
    }
    keys = keys as SelectKeys;
    const pick = <V>(map: Map<string, V>, names: readonly string[] | undefined, kind: string): [string, V][] => {
      if (names === undefined) return [...map];
      return names.map((n) => {
        const v = map.get(n);
        if (v === undefined) throw new DataProtoError(`select: no ${kind} column '${n}'`);
        return [n, v];
      });
    };
    let meta: Record<string, unknown> = { ...this.meta };
    if (keys.meta !== undefined) {
      meta = {};
      for (const k of keys.meta) {
        if (!(k in this.meta)) throw new DataProtoError(`select: no meta key '${k}'`);
        meta[k] = this.meta[k];
      }
    }
    return this.rebuild(
      pick(this.tensorMap, keys.tensors, 'tensor'),
      pick(this.nonTensorMap, keys.nonTensors, 'non-tensor'),
      meta,
      this.batchSize,
    );
  }

  /** The rows at `indices` (in that order; repeats allowed) or where a boolean mask of `batchSize` entries is true. Copies. */
  selectRows(indices: ArrayLike<number> | readonly boolean[]): DataProto {
    const arr = Array.from(indices as ArrayLike<number | boolean>);
    if (arr.length > 0 && typeof arr[0] === 'boolean') {
      if (arr.length !== this.batchSize)
        throw new DataProtoError(`selectRows: a boolean mask needs ${this.batchSize} entries, got ${arr.length}`);
      return this.gather(arr.flatMap((b, i) => (b ? [i] : [])));
    }
    return this.gather(checkIndices(arr as number[], this.batchSize, 'selectRows'));
  }

  /** The rows in the order of `permutation` (each index exactly once; VERL's `reorder`). Copies. */
  reorder(permutation: ArrayLike<number>): DataProto {
    const idx = checkIndices(permutation, this.batchSize, 'reorder');
    if (idx.length !== this.batchSize)
      throw new DataProtoError(`reorder: the permutation has ${idx.length} entries, the batch ${this.batchSize} rows`);
    const seen = new Uint8Array(this.batchSize);
    for (const i of idx) {
      if (seen[i]) throw new DataProtoError(`reorder: row ${i} appears twice (not a permutation)`);
      seen[i] = 1;
    }
    return this.gather(idx);
  }

  /**
   * Pads the batch to a multiple of `divisor` by repeating its leading rows (VERL's
   * `pad_dataproto_to_divisor`); `pad` says how many rows were added (remove them with
   * `slice(0, -pad)` after a chunked computation).
   */
  padToDivisor(divisor: number): { batch: DataProto; pad: number } {
    if (!Number.isInteger(divisor) || divisor < 1)
      throw new DataProtoError(`padToDivisor: divisor must be a positive integer, got ${String(divisor)}`);
    if (this.batchSize === 0) return { batch: this, pad: 0 };
    const pad = (divisor - (this.batchSize % divisor)) % divisor;
    if (pad === 0) return { batch: this, pad: 0 };
    const idx = Array.from({ length: this.batchSize }, (_, i) => i);
    for (let i = 0; i < pad; i++) idx.push(i % this.batchSize);
    return { batch: this.gather(idx), pad };
  }

  private gather(idx: readonly number[]): DataProto {
    const tensors: [string, TensorColumn][] = [...this.tensorMap].map(([k, c]) => {
      const rs = rowSizeOf(c.shape);
      const out = alloc(c.data, idx.length * rs);
      for (let j = 0; j < idx.length; j++) out.set(c.data.subarray(idx[j] * rs, (idx[j] + 1) * rs), j * rs);
      return [k, Object.freeze({ data: out, shape: c.shape })];
    });
    const nonTensors: [string, unknown[]][] = [...this.nonTensorMap].map(([k, v]) => [k, idx.map((i) => v[i])]);
    return this.rebuild(tensors, nonTensors, { ...this.meta }, idx.length);
  }

  /** A short description: batch size, columns with dtypes and shapes, meta keys. */
  toString(): string {
    const t = [...this.tensorMap].map(
      ([k, c]) => `${k}: ${dtypeName(c.data)}${shapeText([this.batchSize, ...c.shape])}`,
    );
    return `DataProto(batchSize=${this.batchSize}, tensors={${t.join(', ')}}, nonTensors=[${this.nonTensorKeys.join(', ')}], meta=[${Object.keys(this.meta).join(', ')}])`;
  }
}
