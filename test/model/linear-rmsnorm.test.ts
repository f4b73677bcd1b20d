import t from 'tap';

import { linearBackward, linearForward, rmsnormBackward, rmsnormForward } from '../../lib/model/index.js';
import {
  closeness,
  dot,
  float32Grad,
  numericGrad,
  pick,
  randn,
  refLinear,
  refRmsNorm,
  sampleIndices,
  sameBits,
} from './fixtures/reference.js';

t.test('linear forward matches the float64 reference (with and without bias, odd sizes)', async (t) => {
  for (const [T, inF, outF] of [
    [1, 1, 1],
    [5, 7, 9],
    [129, 33, 65],
    [257, 129, 7],
  ]) {
    const x = randn(T * inF, T);
    const w = randn(outF * inF, inF);
    const b = randn(outF, outF);
    const y = linearForward({ x, weight: w, bias: b, rows: T, inFeatures: inF, outFeatures: outF });
    t.ok(closeness(y, refLinear(x, w, b, T, inF, outF), 1e-5, 1e-5 * Math.sqrt(inF)) <= 1, `bias ${T}x${inF}x${outF}`);
    const y0 = linearForward({ x, weight: w, rows: T, inFeatures: inF, outFeatures: outF });
    t.ok(
      closeness(y0, refLinear(x, w, null, T, inF, outF), 1e-5, 1e-5 * Math.sqrt(inF)) <= 1,
      `no bias ${T}x${inF}x${outF}`,
    );
  }
});

t.test('linear backward: finite differences of the float64 forward, accumulation, skipping', async (t) => {
  for (const [T, inF, outF, sampled] of [
    [5, 7, 9, false],
    [70, 33, 65, true],
  ] as const) {
    const x = randn(T * inF, 1);
    const w = randn(outF * inF, 2);
    const b = randn(outF, 3);
    const wy = randn(T * outF, 4); // loss = sum(wy * y)
    const g = linearBackward({ x, weight: w, dy: wy, rows: T, inFeatures: inF, outFeatures: outF });
    const loss = (xx: ArrayLike<number>, ww: ArrayLike<number>, bb: ArrayLike<number>): number =>
      dot(wy, refLinear(xx, ww, bb, T, inF, outF));
    const ix = sampled ? sampleIndices(x.length, 25, 5) : undefined;
    const iw = sampled ? sampleIndices(w.length, 25, 6) : undefined;
    const numX = numericGrad((v) => loss(v, w, b), x, ix);
    const numW = numericGrad((v) => loss(x, v, b), w, iw);
    const numB = numericGrad((v) => loss(x, w, v), b);
    t.ok(closeness(ix ? pick(g.dx!, ix) : g.dx!, numX, 1e-4, 1e-4) <= 1, `dx ${T}x${inF}x${outF}`);
    t.ok(closeness(iw ? pick(g.dweight!, iw) : g.dweight!, numW, 1e-4, 1e-4) <= 1, `dweight ${T}x${inF}x${outF}`);
    t.ok(closeness(g.dbias!, numB, 1e-4, 1e-4) <= 1, `dbias ${T}x${inF}x${outF}`);
    // parameter gradients accumulate; dx accumulates only when asked
    const again = linearBackward({
      x,
      weight: w,
      dy: wy,
      rows: T,
      inFeatures: inF,
      outFeatures: outF,
      dx: g.dx!.slice(),
      dweight: g.dweight!.slice(),
      dbias: g.dbias!.slice(),
      accumulate: true,
    });
    t.ok(
      closeness(
        again.dweight!,
        g.dweight!.map((v) => 2 * v),
        1e-6,
        1e-6,
      ) <= 1,
      'dweight +=',
    );
    t.ok(
      closeness(
        again.dbias!,
        g.dbias!.map((v) => 2 * v),
        1e-6,
        1e-6,
      ) <= 1,
      'dbias +=',
    );
    t.ok(
      closeness(
        again.dx!,
        g.dx!.map((v) => 2 * v),
        1e-6,
        1e-6,
      ) <= 1,
      'dx += with accumulate',
    );
    const over = linearBackward({
      x,
      weight: w,
      dy: wy,
      rows: T,
      inFeatures: inF,
      outFeatures: outF,
      dx: new Float32Array(T * inF).fill(9),
      dweight: null,
      dbias: null,
    });
    t.ok(sameBits(over.dx!, g.dx!), 'dx is overwritten without accumulate');
    t.equal(over.dweight, null);
    t.equal(over.dbias, null);
  }
});

t.test('linear: the native forward and backward agree (float32 finite differences)', async (t) => {
  const [T, inF, outF] = [9, 17, 13];
  const x = randn(T * inF, 7);
  const w = randn(outF * inF, 8);
  const wy = randn(T * outF, 9);
  const g = linearBackward({ x, weight: w, dy: wy, rows: T, inFeatures: inF, outFeatures: outF });
  const loss = (): number => dot(wy, linearForward({ x, weight: w, rows: T, inFeatures: inF, outFeatures: outF }));
  const ix = sampleIndices(x.length, 12, 1);
  const iw = sampleIndices(w.length, 12, 2);
  t.ok(closeness(pick(g.dx!, ix), float32Grad(loss, x, ix), 2e-2, 2e-2) <= 1, 'dx');
  t.ok(closeness(pick(g.dweight!, iw), float32Grad(loss, w, iw), 2e-2, 2e-2) <= 1, 'dweight');
});

t.test('rmsnorm forward matches the reference; in place works', async (t) => {
  for (const [T, D, eps] of [
    [1, 1, 1e-5],
    [3, 5, 1e-6],
    [257, 129, 1e-5],
    [33, 1000, 1e-2],
  ]) {
    const x = randn(T * D, D, -2, 2);
    const g = randn(D, T, 0.5, 1.5);
    const { out, rstd } = rmsnormForward({ x, weight: g, rows: T, dim: D, eps });
    const ref = refRmsNorm(x, g, T, D, eps);
    t.ok(closeness(out, ref.y, 1e-5, 1e-6) <= 1, `y ${T}x${D}`);
    t.ok(closeness(rstd, ref.rstd, 1e-5, 1e-6) <= 1, `rstd ${T}x${D}`);
    const inPlace = x.slice();
    rmsnormForward({ x: inPlace, weight: g, rows: T, dim: D, eps, out: inPlace });
    t.ok(sameBits(inPlace, out), 'out may be x');
  }
});

t.test('rmsnorm backward: finite differences, accumulation, in place', async (t) => {
  for (const [T, D, sampled] of [
    [3, 5, false],
    [4, 33, false],
    [129, 257, true],
  ] as const) {
    const eps = 1e-5;
    const x = randn(T * D, 31, -2, 2);
    const g = randn(D, 32, 0.5, 1.5);
    const wy = randn(T * D, 33);
    const { rstd } = rmsnormForward({ x, weight: g, rows: T, dim: D, eps });
    const grads = rmsnormBackward({ x, weight: g, rstd, dy: wy, rows: T, dim: D });
    const ix = sampled ? sampleIndices(x.length, 30, 3) : undefined;
    const numX = numericGrad((v) => dot(wy, refRmsNorm(v, g, T, D, eps).y), x, ix);
    const numG = numericGrad(
      (v) => dot(wy, refRmsNorm(x, v, T, D, eps).y),
      g,
      sampled ? sampleIndices(D, 30, 4) : undefined,
    );
    t.ok(closeness(ix ? pick(grads.dx, ix) : grads.dx, numX, 1e-3, 1e-4) <= 1, `dx ${T}x${D}`);
    t.ok(
      closeness(sampled ? pick(grads.dweight, sampleIndices(D, 30, 4)) : grads.dweight, numG, 1e-3, 1e-4) <= 1,
      `dweight ${T}x${D}`,
    );
    const acc = rmsnormBackward({
      x,
      weight: g,
      rstd,
      dy: wy,
      rows: T,
      dim: D,
      dx: grads.dx.slice(),
      dweight: grads.dweight.slice(),
      accumulate: true,
    });
    t.ok(
      closeness(
        acc.dx,
        grads.dx.map((v) => 2 * v),
        1e-6,
        1e-7,
      ) <= 1,
      'dx +=',
    );
    t.ok(
      closeness(
        acc.dweight,
        grads.dweight.map((v) => 2 * v),
        1e-6,
        1e-7,
      ) <= 1,
      'dweight +=',
    );
    const dyCopy = wy.slice();
    rmsnormBackward({ x, weight: g, rstd, dy: dyCopy, rows: T, dim: D, dx: dyCopy });
    t.ok(sameBits(dyCopy, grads.dx), 'dx may be dy');
  }
  const [T, D] = [6, 19];
  const x = randn(T * D, 41);
  const g = randn(D, 42, 0.5, 1.5);
  const wy = randn(T * D, 43);
  const { rstd } = rmsnormForward({ x, weight: g, rows: T, dim: D });
  const grads = rmsnormBackward({ x, weight: g, rstd, dy: wy, rows: T, dim: D });
  const loss = (): number => dot(wy, rmsnormForward({ x, weight: g, rows: T, dim: D }).out);
  const ix = sampleIndices(x.length, 10, 9);
  t.ok(closeness(pick(grads.dx, ix), float32Grad(loss, x, ix, 1e-2), 3e-2, 3e-2) <= 1, 'native forward/backward agree');
});
