/**
 * `Sequence(featureSpace, { stack })`: variable-length sequences of elements of one feature
 * space (Gymnasium's `spaces.Sequence`). Unstacked samples are arrays of feature values;
 * stacked samples are one batch (see `batch.ts`), e.g. a flat typed array for a Box feature.
 * @module
 */
import { RandomGenerator } from '../random.js';
import { concatenate, createEmptyArray, iterate, typedBatchLayout } from './batch.js';
import { Dict, Tuple, type AnySpace, type SpaceMask, type SpaceProbability, type SpaceValue } from './composite.js';
import { Space, dtypeOf, subSeeds, type SeedTree, type SpaceJSON } from './space.js';

/** A length restriction: an exact length, a list of allowed lengths, or null (geometric(0.25)). */
export type SequenceLength = number | ArrayLike<number> | null;

/** Options of {@link Sequence}. */
export interface SequenceOptions<Stacked extends boolean> {
  /** Whether samples are stacked into one batch (default false). */
  stack?: Stacked;
  /** Seed: one integer, `[own seed, feature seed]`, or null. */
  seed?: SeedTree;
}

/** The value of a Sequence: an array of features, or one stacked batch. */
export type SequenceValue<S extends AnySpace, Stacked extends boolean> = Stacked extends true
  ? unknown
  : SpaceValue<S>[];

/** Number of items in a stacked batch of `space` values. */
export function batchLength(space: AnySpace, batch: unknown): number | null {
  const layout = typedBatchLayout(space);
  if (layout) {
    if (dtypeOf(batch) === null) return null;
    const len = (batch as ArrayLike<number>).length;
    return layout.size === 0 ? 0 : len % layout.size === 0 ? len / layout.size : null;
  }
  if (space instanceof Tuple)
    return Array.isArray(batch) && batch.length === space.length && space.length > 0
      ? batchLength(space.spaces[0], batch[0])
      : null;
  if (space instanceof Dict) {
    if (typeof batch !== 'object' || batch === null || space.keys.length === 0) return null;
    return batchLength(space.spaces[space.keys[0]], (batch as Record<string, unknown>)[space.keys[0]]);
  }
  return Array.isArray(batch) ? batch.length : null;
}

/** Variable-length sequences of a feature space. */
export class Sequence<S extends AnySpace = AnySpace, Stacked extends boolean = false> extends Space<
  SequenceValue<S, Stacked>,
  readonly [SequenceLength, SpaceMask<S> | null],
  readonly [SequenceLength, SpaceProbability<S> | null]
> {
  /** The space of each element. */
  readonly featureSpace: S;
  /** Whether samples are stacked. */
  readonly stack: Stacked;

  constructor(featureSpace: S, options: SequenceOptions<Stacked> = {}) {
    if (!(featureSpace instanceof Space))
      throw new TypeError(`Sequence expects a feature Space, got ${String(featureSpace)}`);
    super(null, null);
    this.featureSpace = featureSpace;
    this.stack = (options.stack ?? false) as Stacked;
    if (options.seed !== undefined) this.seed(options.seed);
  }

  /** Seeds the length sampler and the feature space: one integer, `[own, feature]`, or null. */
  override seed(seed?: SeedTree): SeedTree {
    if (seed === undefined || seed === null) return [super.seed(null), this.featureSpace.seed(null)];
    if (typeof seed === 'number' || typeof seed === 'bigint') {
      this.rng = new RandomGenerator(seed);
      const [featureSeed] = subSeeds(seed, 1);
      return [seed, this.featureSpace.seed(featureSeed)];
    }
    if (Array.isArray(seed)) {
      if (seed.length !== 2)
        throw new RangeError(`Expects the seed to have two elements, actual length: ${seed.length}`);
      return [super.seed(seed[0]), this.featureSpace.seed(seed[1])];
    }
    throw new TypeError(`Sequence.seed expects an integer, [seed, featureSeed] or null, got ${JSON.stringify(seed)}`);
  }

  private sampleLength(length: SequenceLength, what: string): number {
    if (length === null || length === undefined) return this.npRandom.geometric(0.25);
    if (typeof length === 'number') {
      if (!Number.isInteger(length) || length < 0)
        throw new RangeError(`Expects the length ${what} to be a non-negative integer, actual value: ${length}`);
      return length;
    }
    const options = Array.from(length);
    if (options.length === 0 || !options.every((v) => Number.isInteger(v) && v >= 0)) {
      throw new RangeError(
        `Expects the length ${what} to hold non-negative integers, actual value: ${JSON.stringify(options)}`,
      );
    }
    return this.npRandom.choice(options);
  }

  /**
   * A random sequence: its length is geometric(0.25) (>= 1) unless `mask[0]` / `probability[0]`
   * fixes it (a number) or lists the allowed lengths (an array); `mask[1]` / `probability[1]`
   * goes to every feature sample.
   */
  sample(
    mask?: readonly [SequenceLength, SpaceMask<S> | null] | null,
    probability?: readonly [SequenceLength, SpaceProbability<S> | null] | null,
  ): SequenceValue<S, Stacked> {
    this.checkMaskProbability(mask, probability);
    const given = mask ?? probability ?? null;
    if (given !== null && (!Array.isArray(given) || given.length !== 2))
      throw new TypeError('Sequence sample mask/probability must be [length, feature mask]');
    const length = this.sampleLength(given ? given[0] : null, mask ? 'mask' : 'probability');
    const items: unknown[] = [];
    for (let i = 0; i < length; i++) {
      items.push(
        mask
          ? this.featureSpace.sample(mask[1] ?? null)
          : this.featureSpace.sample(null, probability ? (probability[1] ?? null) : null),
      );
    }
    if (this.stack)
      return concatenate(this.featureSpace, items, createEmptyArray(this.featureSpace, length)) as SequenceValue<
        S,
        Stacked
      >;
    return items as SequenceValue<S, Stacked>;
  }

  /** The items of a stacked or unstacked sequence value, or null when it is not one. */
  items(x: unknown): unknown[] | null {
    if (!this.stack) return Array.isArray(x) ? x : null;
    const n = batchLength(this.featureSpace, x);
    if (n === null) return null;
    try {
      return iterate(this.featureSpace, x, n);
    } catch {
      return null;
    }
  }

  contains(x: unknown): boolean {
    const items = this.items(x);
    return items !== null && items.every((item) => this.featureSpace.contains(item));
  }

  equals(other: unknown): boolean {
    return other instanceof Sequence && other.stack === this.stack && this.featureSpace.equals(other.featureSpace);
  }

  toJSON(): SpaceJSON {
    return { type: 'Sequence', space: this.featureSpace.toJSON(), stack: this.stack };
  }

  /** One JSON list per sample: `featureSpace.toJsonable(items)`. */
  override toJsonable(samples: readonly SequenceValue<S, Stacked>[]): unknown[] {
    return samples.map((s, i) => {
      const items = this.items(s);
      if (items === null) throw new TypeError(`Sequence.toJsonable: sample ${i} is not a sequence`);
      return this.featureSpace.toJsonable(items);
    });
  }

  override fromJsonable(json: unknown): SequenceValue<S, Stacked>[] {
    if (!Array.isArray(json)) throw new TypeError('Sequence.fromJsonable expects an array');
    return json.map((s) => {
      const items = this.featureSpace.fromJsonable(s) as unknown[];
      return (
        this.stack ? concatenate(this.featureSpace, items, createEmptyArray(this.featureSpace, items.length)) : items
      ) as SequenceValue<S, Stacked>;
    });
  }

  toString(): string {
    return `Sequence(${this.featureSpace.toString()}, stack=${this.stack ? 'True' : 'False'})`;
  }
}
