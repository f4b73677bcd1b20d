import t from 'tap';

import { RandomGenerator, npRandom } from '../../lib/gym/index.js';
import { seedToBigInt, splitMix64 } from '../../lib/gym/random.js';

const M = (1n << 64n) - 1n;
const rotl = (x: bigint, k: bigint): bigint => ((x << k) | (x >> (64n - k))) & M;

/** Plain BigInt reference of SplitMix64 (Steele et al.) and xoshiro256** (Blackman & Vigna). */
function refSplitMix(seed: bigint, n: number): bigint[] {
  let s = seed;
  const out: bigint[] = [];
  for (let i = 0; i < n; i++) {
    s = (s + 0x9e3779b97f4a7c15n) & M;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
    out.push(z ^ (z >> 31n));
  }
  return out;
}

class RefXoshiro {
  s: bigint[];
  constructor(state: bigint[]) {
    this.s = [...state];
  }
  next(): bigint {
    const s = this.s;
    const result = (rotl((s[1] * 5n) & M, 7n) * 9n) & M;
    const t = (s[1] << 17n) & M;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45n);
    return result;
  }
  jump(table: bigint[]): void {
    const acc = [0n, 0n, 0n, 0n];
    for (const word of table) {
      for (let b = 0n; b < 64n; b++) {
        if ((word >> b) & 1n) for (let i = 0; i < 4; i++) acc[i] ^= this.s[i];
        this.next();
      }
    }
    this.s = acc;
  }
}

const stateOf = (g: RandomGenerator): bigint[] => g.getState().state.map((w) => BigInt(`0x${w}`));

t.test('SplitMix64 matches the reference and its published first output', async (t) => {
  t.equal(splitMix64(0n).value, 0xe220a8397b1dcdafn, 'splitmix64(0) first output');
  for (const seed of [0n, 1n, 42n, 123456789n, M]) {
    let s = seed;
    const ours: bigint[] = [];
    for (let i = 0; i < 5; i++) {
      const r = splitMix64(s);
      s = r.state;
      ours.push(r.value);
    }
    t.same(ours, refSplitMix(seed, 5), `seed ${seed}`);
  }
});

t.test('seeding: the state is the first four SplitMix64 outputs of the seed', async (t) => {
  for (const seed of [0, 7, 2 ** 40 + 3, Number.MAX_SAFE_INTEGER]) {
    t.same(stateOf(new RandomGenerator(seed)), refSplitMix(BigInt(seed), 4));
  }
  t.same(stateOf(new RandomGenerator(2n ** 63n + 5n)), refSplitMix(2n ** 63n + 5n, 4), 'bigint seed');
});

t.test('xoshiro256** outputs match the BigInt reference', async (t) => {
  const vec = RandomGenerator.fromState({
    algorithm: 'xoshiro256**',
    state: ['0000000000000001', '0000000000000002', '0000000000000003', '0000000000000004'],
  });
  t.same(
    [vec.nextUint64(), vec.nextUint64(), vec.nextUint64()],
    [11520n, 0n, 1509978240n],
    'published vector for state {1, 2, 3, 4}',
  );
  for (const seed of [1, 99, 31337]) {
    const g = new RandomGenerator(seed);
    const ref = new RefXoshiro(refSplitMix(BigInt(seed), 4));
    let ok = true;
    for (let i = 0; i < 2000; i++) if (g.nextUint64() !== ref.next()) ok = false;
    t.ok(ok, `2000 outputs of seed ${seed}`);
  }
});

t.test('derived draws', async (t) => {
  const g = new RandomGenerator(5);
  const ref = new RefXoshiro(refSplitMix(5n, 4));
  t.equal(g.random(), Number(ref.next() >> 11n) / 2 ** 53, 'random() = top 53 bits / 2^53');
  t.equal(g.nextUint32(), Number(ref.next() >> 32n), 'nextUint32 = high half');
  const h = new RandomGenerator(11);
  const counts = new Array<number>(7).fill(0);
  const n = 70000;
  let outside = 0;
  for (let i = 0; i < n; i++) {
    const v = h.integers(3, 10);
    if (v < 3 || v >= 10 || !Number.isInteger(v)) outside++;
    else counts[v - 3]++;
  }
  t.equal(outside, 0, 'integers stay in [3, 10)');
  const chi2 = counts.reduce((a, c) => a + (c - n / 7) ** 2 / (n / 7), 0);
  t.ok(chi2 < 30, `uniform integers (chi2 ${chi2.toFixed(2)} with 6 dof)`);
  let sum = 0;
  let sq = 0;
  for (let i = 0; i < 20000; i++) {
    const z = h.normal();
    sum += z;
    sq += z * z;
  }
  t.ok(Math.abs(sum / 20000) < 0.05 && Math.abs(sq / 20000 - 1) < 0.05, 'normal has mean 0, variance 1');
  let esum = 0;
  for (let i = 0; i < 20000; i++) esum += h.exponential(2);
  t.ok(Math.abs(esum / 20000 - 2) < 0.1, 'exponential(2) has mean 2');
  let gsum = 0;
  let gmin = Infinity;
  for (let i = 0; i < 20000; i++) {
    const k = h.geometric(0.25);
    gsum += k;
    gmin = Math.min(gmin, k);
  }
  t.equal(gmin, 1, 'geometric support starts at 1');
  t.ok(Math.abs(gsum / 20000 - 4) < 0.15, 'geometric(0.25) has mean 4');
  const big = h.integers(0, 2 ** 53);
  t.ok(Number.isSafeInteger(big) && big >= 0, '53-bit range');
  const picks = [0, 0, 0];
  for (let i = 0; i < 30000; i++) picks[h.choice(3, { p: [0.2, 0, 0.8] })]++;
  t.equal(picks[1], 0, 'zero-probability item never chosen');
  t.ok(Math.abs(picks[0] / 30000 - 0.2) < 0.02, 'p is respected');
  t.equal(h.choice(['only']), 'only');
  const perm = h.permutation(10);
  t.same(
    [...perm].sort((a, b) => a - b),
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    'permutation',
  );
  t.equal(h.bytes(7).length, 7);
  const u = h.uniform(-2, 3);
  t.ok(u >= -2 && u < 3, 'uniform range');
});

t.test('determinism, state, clone, split and jump', async (t) => {
  const a = new RandomGenerator(2024);
  const b = new RandomGenerator(2024);
  t.same(
    Array.from({ length: 10 }, () => a.random()),
    Array.from({ length: 10 }, () => b.random()),
    'same seed, same stream',
  );
  t.notSame(new RandomGenerator(1).random(), new RandomGenerator(2).random(), 'different seeds differ');
  const state = a.getState();
  const next = [a.random(), a.random()];
  a.setState(state);
  t.same([a.random(), a.random()], next, 'setState replays');
  const c = a.clone();
  t.ok(c.equals(a));
  t.equal(c.seed, 2024);
  t.equal(c.random(), a.random());
  // jump against the reference
  const j = new RandomGenerator(77);
  const ref = new RefXoshiro(stateOf(j));
  j.jump();
  ref.jump([0x180ec6d33cfd0aban, 0xd5a61266f0c9392cn, 0xa9582618e03fc9aan, 0x39abdc4529b1661cn]);
  t.same(stateOf(j), ref.s, 'jump = reference jump polynomial');
  const lj = new RandomGenerator(78);
  const lref = new RefXoshiro(stateOf(lj));
  lj.longJump();
  lref.jump([0x76e15d3efefdcbbfn, 0xc5004e441c522fb3n, 0x77710069854ee241n, 0x39109bb02acbe635n]);
  t.same(stateOf(lj), lref.s, 'longJump = reference');
  // split: the child continues the parent's stream, the parent jumps
  const p = new RandomGenerator(9);
  const expectedChild = p.clone();
  const child = p.split();
  t.equal(child.seed, -1);
  t.equal(child.random(), expectedChild.random(), 'child continues the current stream');
  const jumped = new RandomGenerator(9);
  jumped.jump();
  t.ok(p.equals(jumped), 'parent jumped 2^128');
  const kids = new RandomGenerator(3).spawn(3);
  const firsts = kids.map((k) => k.nextUint64());
  t.equal(new Set(firsts).size, 3, 'spawned streams differ');
  t.same(
    new RandomGenerator(3).spawn(3).map((k) => k.nextUint64()),
    firsts,
    'spawn is deterministic',
  );
  const [g, seed] = npRandom(5);
  t.equal(seed, 5);
  t.ok(g instanceof RandomGenerator);
  const [, fresh] = npRandom();
  t.ok(Number.isSafeInteger(fresh as number), 'random seed is a safe integer');
});

t.test('argument validation', async (t) => {
  t.throws(() => new RandomGenerator(-1), RangeError);
  t.throws(() => new RandomGenerator(1.5), TypeError);
  t.throws(() => new RandomGenerator(2 ** 60), RangeError);
  t.throws(() => seedToBigInt(1n << 64n), RangeError);
  const g = new RandomGenerator(0);
  t.throws(() => g.integers(5, 5), RangeError);
  t.throws(() => g.integers(0.5, 3), TypeError);
  t.throws(() => g.integers(-(2 ** 52), 2 ** 52 + 2), RangeError);
  t.throws(() => g.choice([]), RangeError);
  t.throws(() => g.choice(2, { p: [0.5] }), RangeError);
  t.throws(() => g.choice(2, { p: [0.7, 0.7] }), RangeError);
  t.throws(() => g.choice(2, { p: [-0.5, 1.5] }), RangeError);
  t.throws(() => g.geometric(0), RangeError);
  t.equal(g.geometric(1), 1);
  t.throws(() => g.setState({ algorithm: 'xoshiro256**', state: ['0', '0', '0', '0'] } as never), TypeError);
  t.throws(
    () =>
      g.setState({
        algorithm: 'xoshiro256**',
        state: ['0000000000000000', '0000000000000000', '0000000000000000', '0000000000000000'],
      }),
    RangeError,
  );
  t.throws(() => g.setState({ algorithm: 'pcg64' } as never), TypeError);
});
