// bfloat16 / F16 conversions against references written from the definitions: the nearest
// representable value (ties to the even pattern), found by comparing neighbours in float64.
import t from 'tap';

import {
  bf16FromNumber,
  bf16ToF32,
  bf16ToNumber,
  f16ToF32,
  f16ToNumber,
  f32ToBf16,
  f32ToF16,
} from '../../../lib/model/hf/numeric.js';
import { rng } from '../fixtures/reference.js';

/** Value of bf16 bits from the definition: sign, 8-bit exponent (bias 127), 7-bit fraction. */
function bf16Ref(bits: number): number {
  const s = bits & 0x8000 ? -1 : 1;
  const e = (bits >> 7) & 0xff;
  const f = bits & 0x7f;
  if (e === 0xff) return f === 0 ? s * Infinity : NaN;
  return e === 0 ? s * f * 2 ** -133 : s * (1 + f / 128) * 2 ** (e - 127);
}

/** Nearest-even rounding of `x` among the finite patterns of a 16-bit format (value(bits) monotone in bits for each sign). */
function roundRef(x: number, value: (b: number) => number, maxFinite: number, infBits: number): number {
  if (Number.isNaN(x)) return -1;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  // binary search the largest pattern with value <= a
  let lo = 0;
  let hi = maxFinite;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (value(mid) <= a) lo = mid;
    else hi = mid - 1;
  }
  const below = lo;
  const above = below + 1; // may be the infinity pattern
  const vb = value(below);
  const va = above === infBits ? value(maxFinite) + (value(maxFinite) - value(maxFinite - 1)) : value(above); // overflow threshold: one more step
  if (a === vb) return sign | below;
  const db = a - vb;
  const da = va - a;
  const pick = db < da ? below : da < db ? above : (below & 1) === 0 ? below : above;
  return sign | pick;
}

t.test('bfloat16: widening is exact, narrowing rounds to nearest even', async (t) => {
  for (const bits of [0x0000, 0x8000, 0x3f80, 0xbf80, 0x0001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x7f80, 0xff80]) {
    t.equal(bf16ToNumber(bits), bf16Ref(bits), `bits ${bits.toString(16)}`);
  }
  t.ok(Number.isNaN(bf16ToNumber(0x7fc0)));
  // Hand-picked ties and near-ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 → even (1).
  t.equal(bf16FromNumber(1 + 2 ** -8), 0x3f80);
  t.equal(bf16FromNumber(1 + 3 * 2 ** -8), 0x3f82, 'halfway above an odd pattern rounds up to even');
  t.equal(bf16FromNumber(1 + 2 ** -8 + 2 ** -20), 0x3f81, 'just above halfway rounds up');
  t.equal(bf16FromNumber(3.4028234663852886e38), 0x7f80, 'float32 max rounds to infinity');
  t.equal(bf16FromNumber(-0), 0x8000);
  t.equal(bf16FromNumber(NaN), 0x7fc0);
  t.equal(bf16FromNumber(2 ** -133), 0x0001, 'smallest subnormal');

  const r = rng(11);
  const xs = new Float32Array(20000);
  for (let i = 0; i < xs.length; i++) xs[i] = (r() - 0.5) * 2 ** Math.floor(r() * 80 - 40);
  xs[0] = 2 ** -130 * 1.37;
  xs[1] = -(2 ** 127) * 1.999;
  const got = f32ToBf16(xs);
  let bad = 0;
  for (let i = 0; i < xs.length; i++) if (got[i] !== roundRef(xs[i], bf16Ref, 0x7f7f, 0x7f80)) bad++;
  t.equal(bad, 0, 'random float32 values round like the reference');
  const back = bf16ToF32(got);
  for (let i = 0; i < 50; i++) t.equal(back[i], bf16Ref(got[i]));
  const special = f32ToBf16(new Float32Array([NaN, Infinity, -Infinity]));
  t.same(Array.from(special), [0x7fc0, 0x7f80, 0xff80]);
});

t.test('F16: exact widening of every pattern, nearest-even narrowing', async (t) => {
  const all = new Uint16Array(65536);
  for (let i = 0; i < 65536; i++) all[i] = i;
  const wide = f16ToF32(all);
  const back = f32ToF16(wide);
  let mismatches = 0;
  for (let i = 0; i < 65536; i++) {
    const isNan = (i & 0x7c00) === 0x7c00 && (i & 0x3ff) !== 0;
    if (isNan) {
      if (!Number.isNaN(wide[i]) || (back[i] & 0x7fff) !== 0x7e00) mismatches++;
    } else if (back[i] !== i || wide[i] !== f16ToNumber(i)) mismatches++;
  }
  t.equal(mismatches, 0, 'every F16 pattern survives F16 → float32 → F16');
  t.equal(f16ToNumber(0x3c00), 1);
  t.equal(f16ToNumber(0x0001), 2 ** -24);
  t.equal(f16ToNumber(0x7bff), 65504);

  const r = rng(5);
  const xs = new Float32Array(20000);
  for (let i = 0; i < xs.length; i++) xs[i] = (r() - 0.5) * 2 ** Math.floor(r() * 50 - 30);
  xs[0] = 65520; // halfway between 65504 and the overflow step: rounds to infinity
  xs[1] = 65519;
  xs[2] = 2 ** -25; // halfway between 0 and the smallest subnormal: even (0)
  xs[3] = 2 ** -25 * 1.0001;
  xs[4] = 3 * 2 ** -25; // halfway between subnormals 1 and 2: even (2)
  const got = f32ToF16(xs);
  let bad = 0;
  for (let i = 0; i < xs.length; i++) if (got[i] !== roundRef(xs[i], f16ToNumber, 0x7bff, 0x7c00)) bad++;
  t.equal(bad, 0, 'random float32 values round like the reference');
  t.same(Array.from(got.subarray(0, 5)), [0x7c00, 0x7bff, 0x0000, 0x0001, 0x0002]);
});
