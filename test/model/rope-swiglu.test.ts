import t from 'tap';

import { ropeBackward, ropeForward, swigluBackward, swigluForward } from '../../lib/model/index.js';
import { swigluParams } from '../../lib/model/ops.js';
import {
  closeness,
  dot,
  float32Grad,
  numericGrad,
  pick,
  randint,
  randn,
  refRope,
  refSwiGlu,
  sampleIndices,
  sameBits,
} from './fixtures/reference.js';

t.test('rope forward matches the rotate-half reference for per-token positions', async (t) => {
  for (const [T, H, Dh, theta, maxPos] of [
    [1, 1, 2, 10000, 1],
    [4, 3, 6, 10000, 50],
    [70, 4, 64, 150000, 4096],
    [33, 2, 34, 500, 300],
  ]) {
    const x = randn(T * H * Dh, T + H);
    const positions = randint(T, Dh, 0, maxPos);
    const out = ropeForward({ x, positions, rows: T, heads: H, headDim: Dh, theta });
    t.ok(closeness(out, refRope(x, positions, T, H, Dh, theta), 1e-5, 2e-6) <= 1, `${T}x${H}x${Dh} theta ${theta}`);
    const inPlace = x.slice();
    ropeForward({ x: inPlace, positions, rows: T, heads: H, headDim: Dh, theta, out: inPlace });
    t.ok(sameBits(inPlace, out), 'out may be x');
  }
});

t.test('rope: packed documents restart positions (a document alone = the same document packed)', async (t) => {
  const [H, Dh] = [2, 8];
  const docA = randn(5 * H * Dh, 1);
  const docB = randn(3 * H * Dh, 2);
  const packed = new Float32Array([...docA, ...docB]);
  const positions = Int32Array.from([0, 1, 2, 3, 4, 0, 1, 2]);
  const out = ropeForward({ x: packed, positions, rows: 8, heads: H, headDim: Dh });
  const aloneB = ropeForward({ x: docB, positions: Int32Array.from([0, 1, 2]), rows: 3, heads: H, headDim: Dh });
  t.ok(sameBits(out.subarray(5 * H * Dh), aloneB));
  // position 0 is the identity
  t.ok(sameBits(out.subarray(0, H * Dh), docA.subarray(0, H * Dh)));
});

t.test('rope backward: finite differences (full and sampled), in place', async (t) => {
  for (const [T, H, Dh, sampled] of [
    [4, 3, 6, false],
    [65, 4, 32, true],
  ] as const) {
    const theta = 10000;
    const x = randn(T * H * Dh, 5);
    const positions = randint(T, 6, 0, 1000);
    const wy = randn(T * H * Dh, 7);
    const dx = ropeBackward({ dy: wy, positions, rows: T, heads: H, headDim: Dh, theta });
    const idx = sampled ? sampleIndices(x.length, 40, 8) : undefined;
    const num = numericGrad((v) => dot(wy, refRope(v, positions, T, H, Dh, theta)), x, idx);
    t.ok(closeness(idx ? pick(dx, idx) : dx, num, 1e-4, 1e-5) <= 1, `dx ${T}x${H}x${Dh}`);
    const dy = wy.slice();
    ropeBackward({ dy, dx: dy, positions, rows: T, heads: H, headDim: Dh, theta });
    t.ok(sameBits(dy, dx), 'dx may be dy');
  }
});

/** Moves values that sit within 1e-3 of a clamp edge away from it (finite differences straddle no kink). */
function awayFromKinks(a: Float32Array, limit: number): Float32Array {
  for (let i = 0; i < a.length; i++) if (Math.abs(Math.abs(a[i]) - limit) < 1e-3) a[i] += 0.01;
  return a;
}

t.test('swiglu forward matches the reference for the standard and clamped (gpt-oss) variants', async (t) => {
  t.same(swigluParams('standard'), { alpha: 1, limit: 0, upBias: 0 });
  t.same(swigluParams('clamped'), { alpha: 1.702, limit: 7, upBias: 1 });
  t.throws(() => swigluParams('relu' as 'standard'), RangeError);
  for (const variant of ['standard', 'clamped'] as const) {
    for (const [T, F] of [
      [1, 1],
      [3, 5],
      [65, 33],
      [300, 129],
    ]) {
      const h = randn(T * 2 * F, F, -10, 10);
      const out = swigluForward({ h, rows: T, ffn: F, variant });
      t.ok(closeness(out, refSwiGlu(h, T, F, swigluParams(variant)), 1e-5, 1e-5) <= 1, `${variant} ${T}x${F}`);
    }
  }
  const custom = { alpha: 0.5, limit: 3, upBias: -0.25 };
  const h = randn(4 * 2 * 9, 77, -5, 5);
  t.ok(
    closeness(swigluForward({ h, rows: 4, ffn: 9, variant: custom }), refSwiGlu(h, 4, 9, custom), 1e-5, 1e-5) <= 1,
    'custom parameters',
  );
  // extreme gates: no overflow to NaN
  const extreme = new Float32Array([-200, 200, -90, 90, 1, 1, 1, 1]);
  const e = swigluForward({ h: extreme, rows: 1, ffn: 4, variant: 'standard' });
  t.ok(e.every(Number.isFinite), 'finite for |gate| up to 200');
  t.ok(closeness(e, refSwiGlu(extreme, 1, 4, swigluParams('standard')), 1e-5, 1e-6) <= 1);
});

t.test('swiglu backward: finite differences for both variants, accumulation', async (t) => {
  for (const variant of ['standard', 'clamped'] as const) {
    const p = swigluParams(variant);
    for (const [T, F, sampled] of [
      [3, 5, false],
      [65, 33, true],
    ] as const) {
      const h = awayFromKinks(randn(T * 2 * F, 11 + F, -10, 10), 7);
      const wy = randn(T * F, 12);
      const dh = swigluBackward({ h, dout: wy, rows: T, ffn: F, variant });
      const idx = sampled ? sampleIndices(h.length, 60, 13) : undefined;
      const num = numericGrad((v) => dot(wy, refSwiGlu(v, T, F, p)), h, idx);
      t.ok(closeness(idx ? pick(dh, idx) : dh, num, 1e-3, 1e-4) <= 1, `${variant} ${T}x${F}`);
      const acc = swigluBackward({ h, dout: wy, rows: T, ffn: F, variant, dh: dh.slice(), accumulate: true });
      t.ok(
        closeness(
          acc,
          dh.map((v) => 2 * v),
          1e-6,
          1e-7,
        ) <= 1,
        'dh +=',
      );
    }
    if (variant === 'clamped') {
      // gradients vanish where the clamps hold
      const h = new Float32Array([9, 2, 1, 8]); // gate 9 > 7 (clamped), gate 2; up 1, up 8 > 7 (clamped)
      const dh = swigluBackward({ h, dout: new Float32Array([1, 1]), rows: 1, ffn: 2, variant });
      t.equal(dh[0], 0, 'clamped gate has no gradient');
      t.equal(dh[3], 0, 'clamped up has no gradient');
      t.not(dh[1], 0);
      t.not(dh[2], 0);
    }
  }
  const [T, F] = [5, 11];
  const h = randn(T * 2 * F, 99, -3, 3);
  const wy = randn(T * F, 98);
  const dh = swigluBackward({ h, dout: wy, rows: T, ffn: F, variant: 'clamped' });
  const idx = sampleIndices(h.length, 12, 97);
  const loss = (): number => dot(wy, swigluForward({ h, rows: T, ffn: F, variant: 'clamped' }));
  t.ok(closeness(pick(dh, idx), float32Grad(loss, h, idx, 1e-2), 3e-2, 3e-2) <= 1, 'native forward/backward agree');
});
