import t from 'tap';

import { gemm, gemmAsync, gemmInfo, matmul, opsIsa } from '../../lib/model/index.js';
import { gemmNaive } from '../../lib/model/ops.js';
import { closeness, randn, refGemm, sameBits } from './fixtures/reference.js';

// Sizes from the brief (1, 7, 33, 129, 257) in combinations that cover every path: the small-M
// kernel (M <= 8, A untransposed), the packed path with ragged edges in M, N and K, several K
// blocks (K > 384, the packed depth), the threaded path and the serial one.
const SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [1, 7, 33],
  [7, 33, 129],
  [33, 1, 257],
  [33, 129, 7],
  [129, 257, 33],
  [257, 129, 1],
  [129, 33, 257],
  [257, 257, 129],
  [12, 32, 800],
  [300, 31, 65],
  [45, 70, 777],
];

function tol(k: number): number {
  // float32 accumulation of k products of values in [-1, 1]
  return 2e-6 * Math.sqrt(k + 1) * 8;
}

t.test('gemm matches the float64 reference for every transpose combination and odd sizes', async (t) => {
  let seed = 1;
  for (const [m, n, k] of SHAPES) {
    for (const transA of [false, true]) {
      for (const transB of [false, true]) {
        const a = randn(m * k, seed++);
        const b = randn(k * n, seed++);
        const c0 = randn(m * n, seed++);
        const product = refGemm(transA, transB, m, n, k, 1, a, b, 0, c0);
        for (const [alpha, beta] of [
          [1, 0],
          [0.7, 0.3],
          [-1.5, 1],
        ]) {
          const c = c0.slice();
          gemm({ a, b, c, m, n, k, transA, transB, alpha, beta });
          const ref = product.map((p, i) => alpha * p + beta * c0[i]);
          const err = closeness(c, ref, 1e-5, tol(k));
          if (err > 1)
            t.fail(
              `m=${m} n=${n} k=${k} transA=${transA} transB=${transB} alpha=${alpha} beta=${beta}: closeness ${err}`,
            );
        }
      }
    }
  }
  t.pass(`all shapes match (${gemmInfo().kernel})`);
});

t.test('beta = 0 never reads C (NaN in C does not leak); K = 0 scales C', async (t) => {
  for (const [m, n, k] of [
    [5, 9, 3],
    [40, 70, 20],
  ]) {
    const a = randn(m * k, 11);
    const b = randn(k * n, 12);
    const c = new Float32Array(m * n).fill(Number.NaN);
    gemm({ a, b, c, m, n, k, beta: 0 });
    t.ok(c.every(Number.isFinite), `beta=0 overwrites C (${m}x${n})`);
    t.ok(closeness(c, refGemm(false, false, m, n, k, 1, a, b, 0, c), 1e-5, 1e-5) <= 1);
  }
  const c = randn(12, 3);
  const before = c.slice();
  gemm({ a: new Float32Array(0), b: new Float32Array(0), c, m: 3, n: 4, k: 0, beta: 0.5 });
  t.same(
    Array.from(c),
    Array.from(before, (x) => Math.fround(x * 0.5)),
  );
  gemm({ a: new Float32Array(0), b: new Float32Array(0), c, m: 3, n: 4, k: 0, beta: 0 });
  t.ok(c.every((x) => x === 0));
  // empty outputs are fine
  gemm({ a: new Float32Array(0), b: new Float32Array(5), c: new Float32Array(0), m: 0, n: 5, k: 1 });
});

t.test('the naive loop, the async variant and matmul agree with gemm; results are deterministic', async (t) => {
  const [m, n, k] = [65, 97, 130];
  const a = randn(m * k, 21);
  const b = randn(k * n, 22);
  const c1 = new Float32Array(m * n);
  const c2 = new Float32Array(m * n);
  const c3 = new Float32Array(m * n);
  gemm({ a, b, c: c1, m, n, k, transB: true });
  gemmNaive({ a, b, c: c2, m, n, k, transB: true });
  await gemmAsync({ a, b, c: c3, m, n, k, transB: true });
  const ref = refGemm(false, true, m, n, k, 1, a, b, 0, c1);
  t.ok(closeness(c2, ref, 1e-5, tol(k)) <= 1, 'naive matches the reference');
  t.ok(sameBits(c3, c1), 'async gives the same bits');
  const c4 = matmul(a, b, m, n, k, { transB: true });
  t.ok(sameBits(c4, c1), 'matmul gives the same bits');
  const again = new Float32Array(m * n);
  gemm({ a, b, c: again, m, n, k, transB: true });
  t.same(Buffer.from(again.buffer), Buffer.from(c1.buffer), 'a second run is bit-identical');
  const info = gemmInfo();
  t.equal(info.isa, opsIsa());
  t.ok(info.mr >= 1 && info.nr >= 1 && info.kernel.includes(`${info.mr}x${info.nr}`));
});

t.test('gemm argument errors name the argument', async (t) => {
  const a = new Float32Array(6);
  const b = new Float32Array(6);
  const c = new Float32Array(4);
  t.throws(() => gemm({ a, b, c: new Float32Array(5), m: 2, n: 2, k: 3 }), {
    name: 'RangeError',
    message: /^c has length 5, expected 4/,
  });
  t.throws(() => gemm({ a: new Float64Array(6) as unknown as Float32Array, b, c, m: 2, n: 2, k: 3 }), {
    name: 'TypeError',
    message: /^a must be a Float32Array, got Float64Array/,
  });
  t.throws(() => gemm({ a, b, c, m: -1, n: 2, k: 3 }), { name: 'RangeError', message: /^m must be in/ });
  t.throws(() => gemm({ a, b, c, m: 2, n: 2.5, k: 3 }), { name: 'RangeError', message: /^n must be an integer/ });
  t.throws(() => gemm({ a, b, c, m: 2, n: 2, k: 3, transA: 1 as unknown as boolean }), {
    name: 'TypeError',
    message: /^transA must be a boolean/,
  });
  t.throws(() => gemm({ a, b, c, m: 2, n: 2, k: 3, alpha: Number.NaN }), {
    name: 'RangeError',
    message: /^alpha must be finite/,
  });
  const buf = new Float32Array(10);
  t.throws(() => gemm({ a: buf.subarray(0, 6), b, c: buf.subarray(4, 8), m: 2, n: 2, k: 3 }), {
    name: 'RangeError',
    message: /^c must not overlap a/,
  });
  t.throws(() => gemm(null as unknown as Parameters<typeof gemm>[0]), {
    name: 'TypeError',
    message: /^options must be an object/,
  });
  await t.rejects(gemmAsync({ a, b, c: new Float32Array(1), m: 2, n: 2, k: 3 }), {
    name: 'RangeError',
    message: /^c has length 1/,
  });
});

t.test(
  "a row's result does not depend on how many rows share the call (small-M and packed paths agree bit for bit)",
  async (t) => {
    // What batched decoding relies on: a session's logits must be the same whatever other
    // sessions are batched with it, so every M (1 … 300: the small-M path up to 128 rows, the
    // packed path above) must compute each row of C identically. K = 800 spans three depth blocks.
    let seed = 900;
    for (const [n, k] of [
      [37, 800],
      [70, 129],
    ]) {
      for (const transB of [false, true]) {
        const full = 300;
        const a = randn(full * k, seed++);
        const b = randn(k * n, seed++);
        const c0 = randn(full * n, seed++);
        for (const [alpha, beta] of [
          [1, 0],
          [0.7, 1],
        ]) {
          const whole = c0.slice();
          gemm({ a, b, c: whole, m: full, n, k, transB, alpha, beta });
          for (const [start, m] of [
            [0, 1],
            [3, 5],
            [11, 9],
            [40, 77],
            [150, 128],
            [0, 129],
          ]) {
            const c = c0.slice(start * n, (start + m) * n);
            gemm({ a: a.slice(start * k, (start + m) * k), b, c, m, n, k, transB, alpha, beta });
            const same = sameBits(c, whole.subarray(start * n, (start + m) * n));
            if (!same)
              t.fail(
                `rows ${start}..${start + m} of ${full} (n=${n} k=${k} transB=${transB} alpha=${alpha} beta=${beta}) differ from the full call`,
              );
          }
        }
      }
    }
    t.pass(`rows agree (${gemmInfo().kernel})`);
  },
);
