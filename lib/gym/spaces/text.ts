/**
 * `Text(maxLength, { minLength = 1, charset = alphanumeric })`: strings of characters from a
 * character set with a length in [minLength, maxLength] (Gymnasium's `spaces.Text`). Lengths
 * count Unicode code points.
 * @module
 */
import type { RandomGenerator, Seed } from '../random.js';
import { Space, checkBinaryMask, checkProbability, type SpaceJSON } from './space.js';

/** The default character set: digits, upper- and lower-case ASCII letters (62 characters). */
export const ALPHANUMERIC = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Options of {@link Text}. */
export interface TextOptions {
  /** Minimum length (default 1). */
  minLength?: number;
  /** The allowed characters, as a string or a list of single characters (default {@link ALPHANUMERIC}). */
  charset?: string | readonly string[];
  /** Seed (or generator) of the sampler. */
  seed?: Seed | RandomGenerator | null;
}

/** `[length | null, charsetMask | null]`: a fixed length and/or a 0/1 mask over the character list. */
export type TextMask = readonly [number | null, ArrayLike<number> | null];

/** Strings over a character set. */
export class Text extends Space<string, TextMask, TextMask> {
  /** Maximum length. */
  readonly maxLength: number;
  /** Minimum length. */
  readonly minLength: number;
  /** The characters, in sampling order. */
  readonly characterList: readonly string[];
  private readonly characterSet: ReadonlySet<string>;

  constructor(maxLength: number, options: TextOptions = {}) {
    const minLength = options.minLength ?? 1;
    if (!Number.isSafeInteger(maxLength) || !Number.isSafeInteger(minLength)) {
      throw new TypeError(`Text: minLength and maxLength must be integers, got ${minLength}, ${maxLength}`);
    }
    if (minLength < 0) throw new RangeError(`Text: minLength must be non-negative, got ${minLength}`);
    if (maxLength < minLength)
      throw new RangeError(`Text: maxLength (${maxLength}) must be >= minLength (${minLength})`);
    const chars =
      typeof options.charset === 'string' || options.charset === undefined
        ? Array.from(options.charset ?? ALPHANUMERIC)
        : [...options.charset];
    if (!chars.every((c) => typeof c === 'string' && Array.from(c).length === 1))
      throw new TypeError('Text: charset must hold single characters');
    const unique = [...new Set(chars)];
    if (unique.length === 0 && minLength > 0)
      throw new RangeError('Text: an empty charset allows no string of positive length');
    super(null, null, options.seed);
    this.maxLength = maxLength;
    this.minLength = minLength;
    this.characterList = unique;
    this.characterSet = new Set(unique);
  }

  /** The character set as one string. */
  get characters(): string {
    return this.characterList.join('');
  }

  /** Index of a character in {@link Text.characterList} (-1 when absent). */
  characterIndex(char: string): number {
    return this.characterList.indexOf(char);
  }

  /**
   * A random string: the length is uniform in [minLength, maxLength] unless fixed by the mask;
   * each character is uniform over the set, or over the characters whose mask entry is 1, or
   * weighted by a probability vector over the character list.
   */
  sample(mask?: TextMask | null, probability?: TextMask | null): string {
    this.checkMaskProbability(mask, probability);
    const given = mask ?? probability ?? null;
    let length: number | null = null;
    let weights: ArrayLike<number> | null = null;
    if (given !== null) {
      if (!Array.isArray(given) || given.length !== 2)
        throw new TypeError('Text sample mask/probability must be [length | null, array | null]');
      length = given[0];
      weights = given[1];
      if (length !== null) {
        if (!Number.isInteger(length))
          throw new TypeError(`Text sample length must be an integer, got ${String(length)}`);
        if (length < this.minLength || length > this.maxLength) {
          throw new RangeError(
            `Text sample length must be between ${this.minLength} and ${this.maxLength}, got ${length}`,
          );
        }
      }
    }
    length ??= this.npRandom.integers(this.minLength, this.maxLength + 1);
    const n = this.characterList.length;
    let pool: readonly string[] = this.characterList;
    let p: ArrayLike<number> | undefined;
    if (weights !== null && mask) {
      checkBinaryMask(weights, n, 'Text sample charset mask');
      pool = this.characterList.filter((_, i) => weights![i] === 1);
      if (pool.length === 0) {
        if (this.minLength === 0) return '';
        throw new RangeError(
          `Trying to sample with a minimum length > 0 (${this.minLength}) but the character mask is all zero meaning that no character could be sampled.`,
        );
      }
    } else if (weights !== null) {
      p = checkProbability(weights, n, 'Text sample charset probability');
    }
    let out = '';
    for (let i = 0; i < length; i++) out += p ? this.npRandom.choice(pool, { p }) : this.npRandom.choice(pool);
    return out;
  }

  contains(x: unknown): boolean {
    if (typeof x !== 'string') return false;
    const chars = Array.from(x);
    return (
      chars.length >= this.minLength && chars.length <= this.maxLength && chars.every((c) => this.characterSet.has(c))
    );
  }

  equals(other: unknown): boolean {
    return (
      other instanceof Text &&
      other.minLength === this.minLength &&
      other.maxLength === this.maxLength &&
      other.characterList.length === this.characterList.length &&
      other.characterList.every((c) => this.characterSet.has(c))
    );
  }

  toJSON(): SpaceJSON {
    return { type: 'Text', maxLength: this.maxLength, minLength: this.minLength, charset: this.characters };
  }

  override fromJsonable(json: unknown): string[] {
    if (!Array.isArray(json) || !json.every((s) => typeof s === 'string'))
      throw new TypeError('Text.fromJsonable expects an array of strings');
    return [...json];
  }

  toString(): string {
    return `Text(${this.minLength}, ${this.maxLength}, charset=${this.characters})`;
  }
}
