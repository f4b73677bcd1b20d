/**
 * Composite spaces: `Dict` (named subspaces) and `Tuple` (positional subspaces), as
 * Gymnasium's `spaces.Dict` and `spaces.Tuple`. Seeding a composite space with one integer
 * seeds it and derives one sub-seed per subspace from it; a dict/array of seeds seeds each
 * subspace directly.
 * @module
 */
import { RandomGenerator, type Seed } from '../random.js';
import { Space, subSeeds, type SeedTree, type SpaceJSON } from './space.js';

/** The value type of a space. */
export type SpaceValue<S> = S extends Space<infer T, infer _M, infer _P> ? T : never;
/** The mask type of a space. */
export type SpaceMask<S> = S extends Space<infer _T, infer M, infer _P> ? M : never;
/** The probability type of a space. */
export type SpaceProbability<S> = S extends Space<infer _T, infer _M, infer P> ? P : never;

/** Any space (the widest space type). */
export type AnySpace = Space<unknown, unknown, unknown>;

function isPlainObject(x: unknown): x is Record<string, unknown> {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return false;
  const proto = Object.getPrototypeOf(x) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Options of {@link Dict} and {@link Tuple}. */
export interface CompositeOptions {
  /** Seed (one integer, or a seed per subspace) of the samplers. */
  seed?: SeedTree;
}

type DictValue<S extends Record<string, AnySpace>> = { [K in keyof S]: SpaceValue<S[K]> };
type DictMask<S extends Record<string, AnySpace>> = { [K in keyof S]?: SpaceMask<S[K]> | null };
type DictProbability<S extends Record<string, AnySpace>> = { [K in keyof S]?: SpaceProbability<S[K]> | null };

/**
 * A dictionary of named subspaces. From an object the keys are sorted (as Gymnasium sorts a
 * mapping); from an array of `[key, space]` pairs their order is kept.
 */
export class Dict<S extends Record<string, AnySpace> = Record<string, AnySpace>> extends Space<
  DictValue<S>,
  DictMask<S>,
  DictProbability<S>
> {
  /** The subspaces by key. */
  readonly spaces: Readonly<S>;
  /** The keys, in order. */
  readonly keys: readonly string[];

  constructor(spaces: S | ReadonlyArray<readonly [string, AnySpace]>, options: CompositeOptions = {}) {
    const pairs: Array<[string, AnySpace]> = Array.isArray(spaces)
      ? (spaces as ReadonlyArray<readonly [string, AnySpace]>).map(([k, v]) => [k, v])
      : Object.entries(spaces as S).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const record: Record<string, AnySpace> = {};
    for (const [key, space] of pairs) {
      if (typeof key !== 'string') throw new TypeError(`Dict keys must be strings, got ${String(key)}`);
      if (!(space instanceof Space))
        throw new TypeError(`Dict space for key "${key}" must be a Space, got ${String(space)}`);
      if (key in record) throw new RangeError(`Dict key "${key}" appears twice`);
      record[key] = space;
    }
    super(null, null);
    this.spaces = record as S;
    this.keys = pairs.map(([k]) => k);
    if (options.seed !== undefined) this.seed(options.seed);
  }

  /** The subspace of `key` (undefined when absent). */
  get<K extends keyof S & string>(key: K): S[K] {
    return this.spaces[key];
  }

  /** Seeds every subspace: one integer (sub-seeds derived from it), one seed per key, or null. */
  override seed(seed?: SeedTree): SeedTree {
    const out: Record<string, SeedTree> = {};
    if (seed === undefined || seed === null) {
      for (const k of this.keys) out[k] = this.spaces[k].seed(null);
    } else if (typeof seed === 'number' || typeof seed === 'bigint') {
      this.rng = new RandomGenerator(seed);
      const subs = subSeeds(seed as Seed, this.keys.length);
      this.keys.forEach((k, i) => (out[k] = this.spaces[k].seed(subs[i])));
    } else if (isPlainObject(seed)) {
      const given = Object.keys(seed);
      if (given.length !== this.keys.length || !this.keys.every((k) => k in seed)) {
        throw new RangeError(`The seed keys (${given.join(', ')}) must equal the space keys (${this.keys.join(', ')})`);
      }
      for (const k of this.keys) out[k] = this.spaces[k].seed((seed as Record<string, SeedTree>)[k]);
    } else {
      throw new TypeError(`Dict.seed expects an integer, a dict of seeds or null, got ${JSON.stringify(seed)}`);
    }
    return out;
  }

  /** A sample of every subspace, with optional per-key masks or probabilities. */
  sample(mask?: DictMask<S> | null, probability?: DictProbability<S> | null): DictValue<S> {
    this.checkMaskProbability(mask, probability);
    for (const [what, given] of [
      ['mask', mask],
      ['probability', probability],
    ] as const) {
      if (given !== undefined && given !== null) {
        if (!isPlainObject(given)) throw new TypeError(`Dict sample ${what} must be an object keyed like the space`);
        for (const k of Object.keys(given))
          if (!(k in this.spaces)) throw new RangeError(`Dict sample ${what} has unknown key "${k}"`);
      }
    }
    const out: Record<string, unknown> = {};
    for (const k of this.keys) {
      out[k] = this.spaces[k].sample(
        (mask as Record<string, unknown> | null | undefined)?.[k] ?? null,
        (probability as Record<string, unknown> | null | undefined)?.[k] ?? null,
      );
    }
    return out as DictValue<S>;
  }

  contains(x: unknown): boolean {
    if (!isPlainObject(x)) return false;
    const keys = Object.keys(x);
    if (keys.length !== this.keys.length) return false;
    return this.keys.every((k) => Object.prototype.hasOwnProperty.call(x, k) && this.spaces[k].contains(x[k]));
  }

  equals(other: unknown): boolean {
    return (
      other instanceof Dict &&
      other.keys.length === this.keys.length &&
      this.keys.every((k, i) => other.keys[i] === k && this.spaces[k].equals(other.spaces[k]))
    );
  }

  override get isNpFlattenable(): boolean {
    return this.keys.every((k) => this.spaces[k].isNpFlattenable);
  }

  toJSON(): SpaceJSON {
    return { type: 'Dict', spaces: this.keys.map((k) => [k, this.spaces[k].toJSON()]) };
  }

  /** `{ key: subspace.toJsonable(values of key) }`. */
  override toJsonable(samples: readonly DictValue<S>[]): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const k of this.keys)
      out[k] = this.spaces[k].toJsonable(samples.map((s) => (s as Record<string, unknown>)[k]));
    return out;
  }

  override fromJsonable(json: unknown): DictValue<S>[] {
    if (!isPlainObject(json)) throw new TypeError('Dict.fromJsonable expects an object keyed like the space');
    const columns = this.keys.map((k) => this.spaces[k].fromJsonable(json[k]) as unknown[]);
    const n = columns[0]?.length ?? 0;
    if (!columns.every((c) => c.length === n))
      throw new RangeError('Dict.fromJsonable: the keys hold different numbers of samples');
    return Array.from(
      { length: n },
      (_, i) => Object.fromEntries(this.keys.map((k, j) => [k, columns[j][i]])) as DictValue<S>,
    );
  }

  toString(): string {
    return `Dict(${this.keys.map((k) => `'${k}': ${this.spaces[k].toString()}`).join(', ')})`;
  }
}

type TupleValue<S extends readonly AnySpace[]> = { -readonly [K in keyof S]: SpaceValue<S[K]> };
type TupleMask<S extends readonly AnySpace[]> = { [K in keyof S]: SpaceMask<S[K]> | null };
type TupleProbability<S extends readonly AnySpace[]> = { [K in keyof S]: SpaceProbability<S[K]> | null };

/** A fixed-length sequence of subspaces; samples are arrays. */
export class Tuple<S extends readonly AnySpace[] = AnySpace[]> extends Space<
  TupleValue<S>,
  TupleMask<S>,
  TupleProbability<S>
> {
  /** The subspaces. */
  readonly spaces: S;

  constructor(spaces: S, options: CompositeOptions = {}) {
    if (!Array.isArray(spaces)) throw new TypeError('Tuple expects an array of spaces');
    spaces.forEach((s, i) => {
      if (!(s instanceof Space)) throw new TypeError(`Tuple space ${i} must be a Space, got ${String(s)}`);
    });
    super(null, null);
    this.spaces = [...spaces] as unknown as S;
    if (options.seed !== undefined) this.seed(options.seed);
  }

  /** Number of subspaces. */
  get length(): number {
    return this.spaces.length;
  }

  /** The subspace at `index`. */
  at(index: number): AnySpace {
    return this.spaces[index];
  }

  /** Seeds every subspace: one integer (sub-seeds derived from it), one seed per subspace, or null. */
  override seed(seed?: SeedTree): SeedTree {
    if (seed === undefined || seed === null) return this.spaces.map((s) => s.seed(null));
    if (typeof seed === 'number' || typeof seed === 'bigint') {
      this.rng = new RandomGenerator(seed);
      const subs = subSeeds(seed, this.spaces.length);
      return this.spaces.map((s, i) => s.seed(subs[i]));
    }
    if (Array.isArray(seed)) {
      if (seed.length !== this.spaces.length) {
        throw new RangeError(
          `Expects that the subspaces of seeds equals the number of subspaces. Actual length of seeds: ${seed.length}, length of subspaces: ${this.spaces.length}`,
        );
      }
      return this.spaces.map((s, i) => s.seed(seed[i]));
    }
    throw new TypeError(`Tuple.seed expects an integer, an array of seeds or null, got ${JSON.stringify(seed)}`);
  }

  /** A sample of every subspace, with optional per-position masks or probabilities. */
  sample(mask?: TupleMask<S> | null, probability?: TupleProbability<S> | null): TupleValue<S> {
    this.checkMaskProbability(mask, probability);
    for (const [what, given] of [
      ['mask', mask],
      ['probability', probability],
    ] as const) {
      if (given !== undefined && given !== null && (!Array.isArray(given) || given.length !== this.spaces.length)) {
        throw new RangeError(`Tuple sample ${what} must be an array of ${this.spaces.length} entries`);
      }
    }
    const m = mask as readonly unknown[] | null | undefined;
    const p = probability as readonly unknown[] | null | undefined;
    return this.spaces.map((s, i) => s.sample(m?.[i] ?? null, p?.[i] ?? null)) as TupleValue<S>;
  }

  contains(x: unknown): boolean {
    return Array.isArray(x) && x.length === this.spaces.length && this.spaces.every((s, i) => s.contains(x[i]));
  }

  equals(other: unknown): boolean {
    return (
      other instanceof Tuple &&
      other.spaces.length === this.spaces.length &&
      this.spaces.every((s, i) => s.equals(other.spaces[i]))
    );
  }

  override get isNpFlattenable(): boolean {
    return this.spaces.every((s) => s.isNpFlattenable);
  }

  toJSON(): SpaceJSON {
    return { type: 'Tuple', spaces: this.spaces.map((s) => s.toJSON()) };
  }

  /** One JSON list per subspace: `[subspace_i.toJsonable(values at i)]`. */
  override toJsonable(samples: readonly TupleValue<S>[]): unknown[] {
    return this.spaces.map((s, i) => s.toJsonable(samples.map((x) => (x as unknown[])[i])));
  }

  override fromJsonable(json: unknown): TupleValue<S>[] {
    if (!Array.isArray(json) || json.length !== this.spaces.length)
      throw new TypeError(`Tuple.fromJsonable expects ${this.spaces.length} lists`);
    const columns = this.spaces.map((s, i) => s.fromJsonable(json[i]) as unknown[]);
    const n = columns[0]?.length ?? 0;
    if (!columns.every((c) => c.length === n))
      throw new RangeError('Tuple.fromJsonable: the positions hold different numbers of samples');
    return Array.from({ length: n }, (_, i) => columns.map((c) => c[i]) as TupleValue<S>);
  }

  toString(): string {
    return `Tuple(${this.spaces.map((s) => s.toString()).join(', ')})`;
  }
}
