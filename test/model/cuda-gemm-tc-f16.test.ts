// The float16 operands of the tensor-core GEMM (setMatmulPrecision('medium', { dtype: 'float16' })):
// every output within 2^-12 of the sum of its terms' magnitudes of the float64 product of the
// operands rounded to float16 — rounded here by an independent float64 model of IEEE half
// (11 significant bits, nearest even, subnormals in units of 2^-24, infinity from 65520 on) — on
// random odd sizes, all four transposes, alpha and beta, float32 and bfloat16 operands; the
// values that tell float16 from bfloat16 (1 + 2^-10 kept, 70000 becomes infinity, a subnormal
// 2^-20 kept); linear forward and backward; packed MXFP4 experts give the bits of their bfloat16
// dequantization under float16 too, close to the float64 layer. The setting's argument checks run
// everywhere; the rest needs a CUDA device (the CUDA emulator counts: npm run test:cuda-emulator
// runs it in both thread orders).
import t from 'tap';

import {
  gemm,
  linearBackward,
  linearForward,
  matmulOperandDtype,
  matmulPrecision,
  moeBackward,
  moeForward,
  setMatmulPrecision,
} from '../../lib/model/index.js';
import { cudaAvailable } from '../../lib/native/index.js';
import { loadAddon } from '../../lib/native/loader.js';
import { modelAddon } from '../../lib/model/native.js';
import { type Sizes, refMoe, shape } from './fixtures/moe-reference.js';
import { mxfp4MoeCase } from './fixtures/mxfp4-checks.js';
import { bf16Bits, bf16Values, randn, refGemm, sameBits } from './fixtures/reference.js';
import { f16 as half } from '../attention/fixtures/reference.js';
import { noCudaModelOps } from './fixtures/cuda-skip.js';
import { termScale, worstRelative } from './fixtures/gemm-bound.js';

const BOUND = 2 ** -12;
const copy = (x: Float32Array): Float32Array => Float32Array.from(x);

const halves = (x: ArrayLike<number>): Float64Array => Float64Array.from(x, half);

t.test('the float16 model of the test rounds as IEEE half does', async (t) => {
  t.equal(half(1 + 2 ** -10), 1 + 2 ** -10, 'an 11-bit significand is kept');
  t.equal(half(1 + 2 ** -11), 1, 'a tie goes to the even neighbour');
  t.equal(half(1 + 3 * 2 ** -11), 1 + 2 ** -9, 'a tie goes to the even neighbour (up)');
  t.equal(half(65504), 65504, 'the largest finite half');
  t.equal(half(65519.99), 65504, 'below the midpoint to 65536: 65504');
  t.equal(half(65520), Infinity, 'the midpoint rounds to even: infinity');
  t.equal(half(-(2 ** -20)), -(2 ** -20), 'a subnormal power of two');
  t.equal(half(2 ** -25), 0, 'half the smallest subnormal: a tie to even zero');
  t.equal(half(3 * 2 ** -26), 2 ** -24, 'past it: the smallest subnormal');
});

t.test('the tensor-core operand dtype setting', async (t) => {
  t.teardown(() => setMatmulPrecision('highest'));
  t.equal(matmulOperandDtype(), 'bfloat16', "'bfloat16' by default");
  setMatmulPrecision('medium', { dtype: 'float16' });
  t.equal(matmulPrecision(), 'medium');
  t.equal(matmulOperandDtype(), 'float16');
  setMatmulPrecision('medium');
  t.equal(matmulOperandDtype(), 'bfloat16', "'medium' without a dtype: bfloat16 again");
  setMatmulPrecision('medium', { dtype: 'float16' });
  setMatmulPrecision('highest');
  t.equal(matmulOperandDtype(), 'bfloat16', "'highest' resets it");
  t.throws(() => setMatmulPrecision('highest', { dtype: 'float16' }), {
    name: 'RangeError',
    message: /dtype .*'medium' only/,
  });
  t.throws(() => setMatmulPrecision('medium', { dtype: 'float8' as never }), {
    name: 'RangeError',
    message: /dtype must be 'bfloat16' or 'float16'/,
  });
  t.throws(() => modelAddon().setMatmulPrecision('medium', 16 as never), { name: 'TypeError', message: /dtype/ });
  t.equal(matmulPrecision(), 'highest', 'a refused call changes nothing');

  const a = loadAddon<{ gemmTimeCuda(o: Record<string, unknown>): number }>();
  t.throws(() => a.gemmTimeCuda({ m: 4, n: 4, k: 4, operandDtype: 'float8' }), {
    name: 'RangeError',
    message: /options\.operandDtype/,
  });
  t.throws(() => a.gemmTimeCuda({ m: 4, n: 4, k: 4, operandDtype: 'float16' }), {
    name: 'RangeError',
    message: /options\.operandDtype 'float16' goes with precision 'medium'/,
  });
  if (cudaAvailable() && modelAddon().modelOpsDevices().includes('cuda')) {
    setMatmulPrecision('medium');
    const s = a.gemmTimeCuda({ m: 19, n: 33, k: 24, precision: 'medium', operandDtype: 'float16', iterations: 1 });
    t.ok(s > 0 && Number.isFinite(s), `the timer with float16 operands (${s} s)`);
    t.equal(matmulOperandDtype(), 'bfloat16', 'the setting is restored after the timing');
  }
});

const noGpu = noCudaModelOps();

t.test('CUDA GEMMs on the float16 tensor cores against float64 on the rounded operands', { skip: noGpu }, async (t) => {
  t.teardown(() => setMatmulPrecision('highest'));
  let worst = 0;
  let seed = 5000;
  for (const [m, n, k] of [
    [131, 45, 77],
    [1, 137, 40],
    [70, 3, 161],
  ] as const) {
    for (const [ta, tb] of [
      [false, true],
      [false, false],
      [true, false],
      [true, true],
    ] as const) {
      // Magnitudes from 2^-9 to 2^9: inside float16's normal range, so every operand is rounded
      // to 11 bits (float16's 3 bits more than bfloat16 show in the bound).
      const mag = (x: Float32Array) => x.map((v, i) => v * 2 ** (((i * 7) % 19) - 9));
      const a = mag(randn(m * k, seed++, -1, 1)),
        b = mag(randn(k * n, seed++, -1, 1)),
        c0 = randn(m * n, seed++);
      const bb = bf16Bits(b);
      for (const [which, A, B, Bvalues, alpha, beta] of [
        ['float32', a, b, b, 0.75, -0.5],
        ['b bfloat16 bits', a, bb, bf16Values(bb), -1.25, 1],
      ] as const) {
        const c = copy(c0);
        setMatmulPrecision('medium', { dtype: 'float16' });
        gemm({ a: A, b: B, c, m, n, k, transA: ta, transB: tb, alpha, beta, device: 'cuda' });
        setMatmulPrecision('highest');
        const ar = halves(a),
          br = halves(Bvalues);
        const ref = refGemm(ta, tb, m, n, k, alpha, ar, br, beta, c0);
        const e = worstRelative(c, ref, termScale(ta, tb, m, n, k, alpha, ar, br, beta, c0));
        worst = Math.max(worst, e);
        t.ok(
          e <= BOUND,
          `gemm ${m}x${n}x${k} ${ta ? 'T' : 'N'}${tb ? 'T' : 'N'}, ${which}: within 2^-12 of its terms (${e.toExponential(2)})`,
        );
      }
    }
  }
  t.comment(`float16 tensor-core GEMM vs float64 on float16-rounded operands: worst ${worst.toExponential(2)}`);

  // What tells float16 operands from bfloat16 ones, each a 1 x 1 x 3 product.
  const dot = (av: number, bv: number, dtype?: 'float16'): number => {
    const c = new Float32Array(1);
    setMatmulPrecision('medium', dtype ? { dtype } : {});
    gemm({ a: new Float32Array(3).fill(av), b: new Float32Array(3).fill(bv), c, m: 1, n: 1, k: 3, device: 'cuda' });
    setMatmulPrecision('highest');
    return c[0];
  };
  t.equal(dot(1 + 2 ** -10, 1, 'float16'), 3 * (1 + 2 ** -10), 'float16 keeps 1 + 2^-10');
  t.equal(dot(1 + 2 ** -10, 1), 3, 'bfloat16 rounds it to 1');
  t.equal(dot(70000, 1, 'float16'), Infinity, 'float16: 70000 is past its range (infinity)');
  t.equal(dot(70000, 1), 3 * 70144, 'bfloat16: 70000 rounds to 70144');
  t.equal(dot(2 ** -20, 2, 'float16'), 3 * 2 ** -19, 'float16 keeps the subnormal 2^-20');
  t.equal(dot(1 + 2 ** -11, 1, 'float16'), 3, 'float16 rounds 1 + 2^-11 to even (1)');
});

t.test('CUDA linear layers with float16 tensor-core operands', { skip: noGpu }, async (t) => {
  t.teardown(() => setMatmulPrecision('highest'));
  const T = 45,
    inF = 39,
    outF = 133;
  const x = randn(T * inF, 21, -2, 2),
    w = randn(outF * inF, 22, -2, 2),
    bias = randn(outF, 23),
    dy = randn(T * outF, 24);
  const wb = bf16Bits(w);
  const bias2 = Float64Array.from({ length: T * outF }, (_, i) => bias[i % outF]);
  for (const [label, weight, wValues] of [
    ['float32 weight', w, w],
    ['bfloat16 weight', wb, bf16Values(wb)],
  ] as const) {
    const xr = halves(x),
      wr = halves(wValues),
      dyr = halves(dy);
    setMatmulPrecision('medium', { dtype: 'float16' });
    const y = linearForward({ x, weight, bias, rows: T, inFeatures: inF, outFeatures: outF, device: 'cuda' });
    setMatmulPrecision('highest');
    const ref = refGemm(false, true, T, outF, inF, 1, xr, wr, 1, bias2);
    const e = worstRelative(y, ref, termScale(false, true, T, outF, inF, 1, xr, wr, 1, bias2));
    t.ok(e <= BOUND, `linear forward, ${label}, bias: within 2^-12 of its terms (${e.toExponential(2)})`);
    const dx0 = randn(T * inF, 25);
    setMatmulPrecision('medium', { dtype: 'float16' });
    const g = linearBackward({
      x,
      weight,
      dy,
      rows: T,
      inFeatures: inF,
      outFeatures: outF,
      accumulate: true,
      dx: copy(dx0),
      dweight: weight instanceof Float32Array ? new Float32Array(outF * inF) : null,
      device: 'cuda',
    });
    setMatmulPrecision('highest');
    const refDx = refGemm(false, false, T, inF, outF, 1, dyr, wr, 1, dx0);
    const eDx = worstRelative(g.dx!, refDx, termScale(false, false, T, inF, outF, 1, dyr, wr, 1, dx0));
    t.ok(eDx <= BOUND, `linear dx (accumulated), ${label}: within 2^-12 of its terms (${eDx.toExponential(2)})`);
    if (weight instanceof Float32Array) {
      const zero = new Float64Array(outF * inF);
      const refDw = refGemm(true, false, outF, inF, T, 1, dyr, xr, 0, zero);
      const eDw = worstRelative(g.dweight!, refDw, termScale(true, false, outF, inF, T, 1, dyr, xr, 0, zero));
      t.ok(eDw <= BOUND, `linear dweight: within 2^-12 of its terms (${eDw.toExponential(2)})`);
    }
  }
});

t.test(
  'MXFP4 experts with float16 operands: packed = bfloat16 dequantization bit for bit',
  { skip: noGpu },
  async (t) => {
    t.teardown(() => setMatmulPrecision('highest'));
    const s: Sizes & { biases: boolean } = { T: 77, D: 32, F: 160, E: 5, K: 3, variant: 'standard', biases: true };
    const { base, bf, packed, x, dout } = mxfp4MoeCase(s, 650, 10);
    const common = { ...shape(s), x, device: 'cuda' as const };
    const noGrads = { drouter: null, drouterBias: null, dgateUpBias: null, ddownBias: null };
    setMatmulPrecision('medium');
    const asBf16 = moeForward({ ...common, ...packed });
    setMatmulPrecision('medium', { dtype: 'float16' });
    const fb = moeForward({ ...common, ...bf });
    const fp = moeForward({ ...common, ...packed });
    const bb = moeBackward({ ...common, ...bf, dout, state: fb.state, ...noGrads });
    const bp = moeBackward({ ...common, ...packed, dout, state: fp.state, ...noGrads });
    setMatmulPrecision('highest');
    t.ok(sameBits(fp.out, fb.out), 'packed forward = dequantized forward, bit for bit');
    t.ok(sameBits(bp.dx, bb.dx), 'packed input gradient = dequantized input gradient, bit for bit');
    t.notOk(sameBits(fp.out, asBf16.out), 'not the bfloat16 operands’ bits');
    const decoded = (m: Uint16Array): Float64Array => Float64Array.from(bf16Values(m));
    const ref = refMoe(s, x, {
      ...base,
      gateUp: decoded(bf.gateUp as Uint16Array),
      down: decoded(bf.down as Uint16Array),
    });
    t.same(Array.from(fp.experts), Array.from(fb.experts), 'the same experts as the dequantized run');
    // The router runs on the tensor cores too: a near tie between two experts' logits may flip
    // against the float64 reference; the outputs are compared on the tokens whose experts agree.
    const same = ref.experts.map((row, i) => row.every((x, j) => fp.experts[i * s.K + j] === x));
    t.ok(
      same.filter(Boolean).length >= s.T - 2,
      `the reference's experts on all but near-tie tokens (${same.filter((x) => !x).length} differ)`,
    );
    let e = 0,
      eb = 0,
      m = 0;
    for (let k = 0; k < ref.out.length; k++) {
      if (!same[Math.floor(k / s.D)]) continue;
      e = Math.max(e, Math.abs(fp.out[k] - ref.out[k]));
      eb = Math.max(eb, Math.abs(asBf16.out[k] - ref.out[k]));
      m = Math.max(m, Math.abs(ref.out[k]));
    }
    t.ok(e / m <= 2 ** -8, `packed forward within 2^-8 of the float64 reference's scale (${(e / m).toExponential(2)})`);
    t.comment(`float16 operands ${(e / m).toExponential(2)} vs bfloat16 ${(eb / m).toExponential(2)} of the scale`);
  },
);
