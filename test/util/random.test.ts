// The project's one seeded generator (lib/util/random.ts): mulberry32 against a BigInt
// reference written from the algorithm's definition (32-bit wrapping arithmetic spelled out),
// and fillUniform's range, order and determinism.
import t from 'tap';

import { fillUniform, mulberry32 } from '../../lib/util/random.js';

const M = 2n ** 32n;
const mul = (a: bigint, b: bigint): bigint => (a * b) % M;

/** mulberry32 from its definition, every step modulo 2^32 in BigInt. */
function reference(seed: number, n: number): number[] {
  let state = BigInt(seed >>> 0);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    state = (state + 0x6d2b79f5n) % M;
    let z = state;
    z = mul(z ^ (z >> 15n), z | 1n);
    z = (z ^ ((z + mul(z ^ (z >> 7n), z | 61n)) % M)) % M;
    out.push(Number(z ^ (z >> 14n)) / 2 ** 32);
  }
  return out;
}

t.test('mulberry32 follows the definition, for several seeds', async (t) => {
  for (const seed of [0, 1, 7, 42, 0x7fffffff, 0xffffffff, -5, 2 ** 33 + 3]) {
    const next = mulberry32(seed);
    t.same(Array.from({ length: 50 }, next), reference(seed, 50), `seed ${seed}`);
  }
});

t.test('mulberry32 draws lie in [0, 1) and differ between seeds', async (t) => {
  const a = mulberry32(3),
    b = mulberry32(4);
  const xs = Array.from({ length: 1000 }, a);
  t.ok(
    xs.every((x) => x >= 0 && x < 1),
    'in [0, 1)',
  );
  t.notSame(xs.slice(0, 10), Array.from({ length: 10 }, b), 'another seed, another sequence');
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  t.ok(Math.abs(mean - 0.5) < 0.05, `mean ${mean} near 1/2`);
});

t.test('fillUniform writes lo + (hi - lo) * draw in order, in float32 and float64', async (t) => {
  const draws = reference(9, 37);
  const f64 = fillUniform(new Float64Array(37), 9, -2, 3);
  t.same(
    Array.from(f64),
    draws.map((u) => -2 + 5 * u),
    'float64',
  );
  const f32 = fillUniform(new Float32Array(37), 9);
  t.same(
    Array.from(f32),
    draws.map((u) => Math.fround(-1 + 2 * u)),
    'float32, default [-1, 1)',
  );
  t.ok(f32.every((x) => x >= -1 && x < 1) && f32.some((x) => x !== 0), 'in range, not zeros');
  const out = new Float32Array(5);
  t.equal(fillUniform(out, 1), out, 'returns the array it filled');
});
