/**
 * The seeded pseudo-random generator of the gym layer (the role of NumPy's `np.random.Generator`
 * in Gymnasium): **xoshiro256\*\*** (Blackman & Vigna, 2018; 256-bit state, period 2^256 - 1),
 * seeded through **SplitMix64** exactly as its authors recommend (the four state words are the
 * first four SplitMix64 outputs of the seed). It is deterministic (same seed, same stream, on
 * every platform: only 32-bit integer arithmetic is used), seedable, copyable
 * ({@link RandomGenerator.getState}/{@link RandomGenerator.setState}/{@link RandomGenerator.clone})
 * and splittable: {@link RandomGenerator.split} hands out the current stream and moves this
 * generator 2^128 draws ahead with the published jump polynomial, so split streams never overlap
 * in practice.
 *
 * The streams are not NumPy's (NumPy uses PCG64 seeded by SeedSequence), so sampled values differ
 * from Python's for the same seed; everything else (which distribution each space uses) follows
 * Gymnasium.
 * @module
 */

const TWO32 = 4294967296;
const TWO53 = 9007199254740992;
const MASK64 = (1n << 64n) - 1n;

/** A seed: a non-negative integer (a safe JS number, or a bigint below 2^64). */
export type Seed = number | bigint;

/** The serialisable state of a {@link RandomGenerator}. */
export interface RandomState {
  /** Always `xoshiro256**`. */
  algorithm: 'xoshiro256**';
  /** The four 64-bit state words, each as 16 lowercase hex digits. */
  state: [string, string, string, string];
}

/** Options of {@link RandomGenerator.choice}. */
export interface ChoiceOptions {
  /** Probabilities of each item (non-negative, summing to 1 within 1e-8). */
  p?: ArrayLike<number>;
}

/**
 * One step of SplitMix64 (Steele, Lea & Flood, 2014): advances `state` by the golden gamma and
 * returns the mixed output; both as unsigned 64-bit bigints.
 */
export function splitMix64(state: bigint): { state: bigint; value: bigint } {
  const next = (state + 0x9e3779b97f4a7c15n) & MASK64;
  let z = next;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return { state: next, value: z ^ (z >> 31n) };
}

/** Validates a seed and returns it as an unsigned 64-bit bigint. */
export function seedToBigInt(seed: Seed, name = 'seed'): bigint {
  if (typeof seed === 'bigint') {
    if (seed < 0n || seed > MASK64) throw new RangeError(`${name} must be in [0, 2^64), got ${seed}`);
    return seed;
  }
  if (typeof seed !== 'number' || !Number.isInteger(seed)) {
    throw new TypeError(`${name} must be a non-negative integer (number or bigint), got ${String(seed)}`);
  }
  if (seed < 0 || seed > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`${name} must be a non-negative safe integer, got ${seed}`);
  }
  return BigInt(seed);
}

/** A fresh random seed (53 bits of OS entropy, so it stays a safe JS number). */
export function randomSeed(): number {
  const words = new Uint32Array(2);
  globalThis.crypto.getRandomValues(words);
  return (words[0] & 0x1fffff) * TWO32 + words[1];
}

const JUMP = [0x180ec6d33cfd0aban, 0xd5a61266f0c9392cn, 0xa9582618e03fc9aan, 0x39abdc4529b1661cn];
const LONG_JUMP = [0x76e15d3efefdcbbfn, 0xc5004e441c522fb3n, 0x77710069854ee241n, 0x39109bb02acbe635n];

/**
 * xoshiro256** with NumPy-like sampling methods. The state is 4 × 64 bits held as 8 × 32-bit
 * halves (high, low) so that stepping needs no bigint arithmetic.
 */
export class RandomGenerator {
  /** State words as [hi0, lo0, hi1, lo1, hi2, lo2, hi3, lo3]. */
  private readonly s = new Uint32Array(8);
  private outHi = 0;
  private outLo = 0;
  /** The seed this generator was created from (`-1` when it was built from a raw state). */
  readonly seed: Seed;

  /** Creates a generator from `seed`; without one, from a fresh random seed (see {@link RandomGenerator.seed}). */
  constructor(seed?: Seed | null) {
    const chosen = seed ?? randomSeed();
    let sm = seedToBigInt(chosen);
    for (let i = 0; i < 4; i++) {
      const r = splitMix64(sm);
      sm = r.state;
      this.s[2 * i] = Number(r.value >> 32n);
      this.s[2 * i + 1] = Number(r.value & 0xffffffffn);
    }
    if (this.s.every((w) => w === 0)) this.s[1] = 1; // the all-zero state is the one fixed point
    this.seed = chosen;
  }

  /** A generator whose state is `state` (see {@link RandomGenerator.getState}); its `seed` is -1. */
  static fromState(state: RandomState): RandomGenerator {
    const g = new RandomGenerator(0);
    g.setState(state);
    (g as { seed: Seed }).seed = -1;
    return g;
  }

  /** Advances the state once; the 64-bit output is left in outHi/outLo. */
  private step(): void {
    const s = this.s;
    const hi = s[2];
    const lo = s[3];
    // result = rotl(s1 * 5, 7) * 9
    const m5lo = Math.imul(lo, 5) >>> 0;
    const m5hi = (Math.imul(hi, 5) + Math.floor((lo * 5) / TWO32)) >>> 0;
    const rhi = ((m5hi << 7) | (m5lo >>> 25)) >>> 0;
    const rlo = ((m5lo << 7) | (m5hi >>> 25)) >>> 0;
    this.outLo = Math.imul(rlo, 9) >>> 0;
    this.outHi = (Math.imul(rhi, 9) + Math.floor((rlo * 9) / TWO32)) >>> 0;
    // t = s1 << 17
    const thi = ((hi << 17) | (lo >>> 15)) >>> 0;
    const tlo = (lo << 17) >>> 0;
    s[4] ^= s[0];
    s[5] ^= s[1];
    s[6] ^= s[2];
    s[7] ^= s[3];
    s[2] ^= s[4];
    s[3] ^= s[5];
    s[0] ^= s[6];
    s[1] ^= s[7];
    s[4] ^= thi;
    s[5] ^= tlo;
    // s3 = rotl(s3, 45): swap the halves, then rotate by 13
    const h3 = s[6];
    const l3 = s[7];
    s[6] = ((l3 << 13) | (h3 >>> 19)) >>> 0;
    s[7] = ((h3 << 13) | (l3 >>> 19)) >>> 0;
  }

  /** The next raw 64-bit output. */
  nextUint64(): bigint {
    this.step();
    return (BigInt(this.outHi) << 32n) | BigInt(this.outLo);
  }

  /** The next 32 random bits (the high half of a 64-bit output). */
  nextUint32(): number {
    this.step();
    return this.outHi;
  }

  /** A float in [0, 1) with 53 random bits (the top 53 bits of one output, as NumPy's `random()`). */
  random(): number {
    this.step();
    return (this.outHi * 2097152 + (this.outLo >>> 11)) / TWO53;
  }

  /** An unbiased integer in [0, n) for 1 <= n <= 2^53 (rejection sampling). */
  private below(n: number): number {
    if (n <= TWO32) {
      const limit = TWO32 - (TWO32 % n);
      for (;;) {
        const x = this.nextUint32();
        if (x < limit) return x % n;
      }
    }
    const limit = TWO53 - (TWO53 % n);
    for (;;) {
      this.step();
      const x = this.outHi * 2097152 + (this.outLo >>> 11);
      if (x < limit) return x % n;
    }
  }

  /**
   * A random integer: `integers(high)` in [0, high), `integers(low, high)` in [low, high)
   * (NumPy's `Generator.integers` with `endpoint=False`). Bounds are integers within ±2^53 and
   * the range may span at most 2^53.
   */
  integers(low: number, high?: number): number {
    const lo = high === undefined ? 0 : low;
    const hi = high === undefined ? low : high;
    const ok = (v: number): boolean => Number.isInteger(v) && Math.abs(v) <= TWO53;
    if (!ok(lo) || !ok(hi)) {
      throw new TypeError(`integers: bounds must be integers within ±2^53, got low=${lo}, high=${hi}`);
    }
    if (hi <= lo) throw new RangeError(`integers: high must be greater than low, got low=${lo}, high=${hi}`);
    const span = hi - lo;
    if (span > TWO53) throw new RangeError(`integers: the range ${span} exceeds 2^53`);
    return lo + this.below(span);
  }

  /** A float in [low, high) (uniform). */
  uniform(low = 0, high = 1): number {
    return low + (high - low) * this.random();
  }

  /** A normal sample (Box–Muller transform on two uniforms; one output per call). */
  normal(loc = 0, scale = 1): number {
    const u1 = 1 - this.random(); // (0, 1]
    const u2 = this.random();
    return loc + scale * Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }

  /** An exponential sample with the given scale (inverse transform). */
  exponential(scale = 1): number {
    return -scale * Math.log(1 - this.random());
  }

  /** A geometric sample: the number of Bernoulli(p) trials up to the first success (>= 1). */
  geometric(p: number): number {
    if (!(p > 0 && p <= 1)) throw new RangeError(`geometric: p must be in (0, 1], got ${p}`);
    if (p === 1) return 1;
    const u = this.random();
    return Math.max(1, Math.ceil(Math.log1p(-u) / Math.log1p(-p)));
  }

  /**
   * A random item of `items` (or a random integer below `items` when it is a number), uniform or
   * with probabilities `p` (inverse CDF).
   */
  choice<T>(items: readonly T[], options?: ChoiceOptions): T;
  choice(items: number, options?: ChoiceOptions): number;
  choice<T>(items: readonly T[] | number, options: ChoiceOptions = {}): T | number {
    const n = typeof items === 'number' ? items : items.length;
    if (!Number.isSafeInteger(n) || n <= 0) throw new RangeError(`choice: needs at least one item, got ${n}`);
    let index: number;
    if (options.p) {
      const p = options.p;
      if (p.length !== n) throw new RangeError(`choice: p has ${p.length} entries for ${n} items`);
      let total = 0;
      for (let i = 0; i < n; i++) {
        if (!(p[i] >= 0)) throw new RangeError(`choice: probabilities must be non-negative, got p[${i}]=${p[i]}`);
        total += p[i];
      }
      if (Math.abs(total - 1) > 1e-8) throw new RangeError(`choice: probabilities must sum to 1, got ${total}`);
      const u = this.random() * total;
      let acc = 0;
      index = n - 1;
      for (let i = 0; i < n; i++) {
        acc += p[i];
        if (u < acc && p[i] > 0) {
          index = i;
          break;
        }
      }
      while (p[index] === 0 && index > 0) index--; // rounding at the top end: never pick a zero-probability item
    } else {
      index = this.below(n);
    }
    return typeof items === 'number' ? index : items[index];
  }

  /** Shuffles `array` in place (Fisher–Yates) and returns it. */
  shuffle<T, A extends { length: number; [i: number]: T }>(array: A): A {
    for (let i = array.length - 1; i > 0; i--) {
      const j = this.below(i + 1);
      const tmp = array[i];
      array[i] = array[j];
      array[j] = tmp;
    }
    return array;
  }

  /** A random permutation of 0..n-1. */
  permutation(n: number): number[] {
    return this.shuffle(Array.from({ length: n }, (_, i) => i));
  }

  /** `n` random bytes. */
  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i += 4) {
      const x = this.nextUint32();
      for (let k = 0; k < 4 && i + k < n; k++) out[i + k] = (x >>> (8 * k)) & 0xff;
    }
    return out;
  }

  /** The current state (serialisable; restoring it replays the same stream). */
  getState(): RandomState {
    const words: string[] = [];
    for (let i = 0; i < 4; i++) {
      words.push(this.s[2 * i].toString(16).padStart(8, '0') + this.s[2 * i + 1].toString(16).padStart(8, '0'));
    }
    return { algorithm: 'xoshiro256**', state: words as RandomState['state'] };
  }

  /** Restores a state from {@link RandomGenerator.getState}. */
  setState(state: RandomState): void {
    if (!state || state.algorithm !== 'xoshiro256**' || !Array.isArray(state.state) || state.state.length !== 4) {
      throw new TypeError('setState: expected { algorithm: "xoshiro256**", state: [4 hex strings] }');
    }
    const next = new Uint32Array(8);
    state.state.forEach((word, i) => {
      if (typeof word !== 'string' || !/^[0-9a-fA-F]{16}$/.test(word)) {
        throw new TypeError(`setState: state[${i}] must be 16 hex digits, got ${String(word)}`);
      }
      next[2 * i] = parseInt(word.slice(0, 8), 16);
      next[2 * i + 1] = parseInt(word.slice(8), 16);
    });
    if (next.every((w) => w === 0)) throw new RangeError('setState: the all-zero state is invalid');
    this.s.set(next);
  }

  /** True when both generators are in the same state (their next outputs are equal). */
  equals(other: RandomGenerator): boolean {
    for (let i = 0; i < 8; i++) if (this.s[i] !== other.s[i]) return false;
    return true;
  }

  /** An independent copy in the same state, with the same `seed`. */
  clone(): RandomGenerator {
    const g = new RandomGenerator(0);
    g.s.set(this.s);
    (g as { seed: Seed }).seed = this.seed;
    return g;
  }

  private applyJump(table: bigint[]): void {
    const acc = new Uint32Array(8);
    for (const word of table) {
      for (let b = 0; b < 64; b++) {
        if ((word >> BigInt(b)) & 1n) for (let i = 0; i < 8; i++) acc[i] ^= this.s[i];
        this.step();
      }
    }
    this.s.set(acc);
  }

  /** Advances the generator by 2^128 draws (the xoshiro256 jump polynomial). */
  jump(): void {
    this.applyJump(JUMP);
  }

  /** Advances the generator by 2^192 draws. */
  longJump(): void {
    this.applyJump(LONG_JUMP);
  }

  /**
   * Splits off a generator: the result continues this generator's current stream and this
   * generator jumps 2^128 draws ahead, so the two never overlap in practice. Deterministic.
   */
  split(): RandomGenerator {
    const child = this.clone();
    (child as { seed: Seed }).seed = -1;
    this.jump();
    return child;
  }

  /** `n` successive {@link RandomGenerator.split}s. */
  spawn(n: number): RandomGenerator[] {
    return Array.from({ length: n }, () => this.split());
  }
}

/**
 * Gymnasium's `seeding.np_random`: a generator and the seed it used (a fresh random one when
 * `seed` is null or undefined).
 */
export function npRandom(seed?: Seed | null): [RandomGenerator, Seed] {
  const g = new RandomGenerator(seed);
  return [g, g.seed];
}
