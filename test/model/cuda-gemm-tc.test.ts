// The bfloat16 tensor-core GEMM of the CUDA model ops (native/model/cuda_gemm_tc.cuh), selected by
// setMatmulPrecision('medium'): every output within 2^-12 of the sum of its terms' magnitudes
// (|alpha| sum_k |a_k b_k| + |beta c|) of the float64 product of the bfloat16-rounded operands,
// on random odd sizes (M, N, K not multiples of the 128 x 128 x 32 tiles, one row, K = 0), all
// four transposes, alpha and beta, float32 and bfloat16 operands; a product whose float32 operands
// are not bfloat16 numbers shows the rounding; linear forward and backward (dx accumulated, dweight
// accumulated, bias), the MoE layer (grouped expert GEMMs) and a whole transformer forward and
// backward close to the CPU's float32 result; packed MXFP4 experts give the bits of their
// bfloat16 dequantization (forward and input gradient) and stay close to the float64 layer.
// 'highest' gives back the float32 kernel bit for bit; on a GPU below compute capability 8.0 (the
// emulator pretending 7.5) 'medium' runs the float32 kernel and says so once. The setting's argument checks run
// everywhere; the rest needs a CUDA device (the CUDA emulator counts: npm run test:cuda-emulator
// runs it in both thread orders).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import t from 'tap';

import {
  type MoeWeights,
  Transformer,
  gemm,
  linearBackward,
  linearForward,
  matmulPrecision,
  modelConfig,
  moeBackward,
  moeForward,
  setMatmulPrecision,
} from '../../lib/model/index.js';
import { bf16ToNumber } from '../../lib/model/hf/numeric.js';
import { cudaAvailable } from '../../lib/native/index.js';
import { loadAddon } from '../../lib/native/loader.js';
import { modelAddon } from '../../lib/model/native.js';
import { type Sizes, refMoe, shape, weightsFor } from './fixtures/moe-reference.js';
import { dequantize, mxfp4MoeCase, randomMxfp4 } from './fixtures/mxfp4-checks.js';
import { bf16Bits, bf16Values, randint, randn, refGemm, sameBits } from './fixtures/reference.js';
import { randomizeStore } from './fixtures/transformer-reference.js';
import { noCudaModelOps } from './fixtures/cuda-skip.js';
import { termScale, worstRelative } from './fixtures/gemm-bound.js';

const BOUND = 2 ** -12;
const copy = (x: Float32Array): Float32Array => Float32Array.from(x);
const rounded = (x: Float32Array): Float32Array => bf16Values(bf16Bits(x));

t.test('the matmul precision setting', async (t) => {
  t.equal(matmulPrecision(), 'highest', "'highest' by default");
  t.throws(() => setMatmulPrecision('high' as never), {
    name: 'RangeError',
    message: /precision must be 'highest' or 'medium'/,
  });
  t.throws(() => modelAddon().setMatmulPrecision(3 as never), { name: 'TypeError', message: /precision/ });
  setMatmulPrecision('medium');
  t.equal(matmulPrecision(), 'medium');
  setMatmulPrecision('highest');
  t.equal(matmulPrecision(), 'highest');
});

interface TimerAddon {
  gemmTimeCuda(o: Record<string, unknown>): number;
}

t.test('gemmTimeCuda (the GEMM benchmark timer): argument checks, and a timing where CUDA runs', async (t) => {
  const a = loadAddon<TimerAddon>();
  t.throws(() => a.gemmTimeCuda({ m: 0, n: 4, k: 4 }), { name: 'RangeError', message: /options\.m/ });
  t.throws(() => a.gemmTimeCuda({ m: 4, n: 4, k: 4, precision: 'low' }), {
    name: 'RangeError',
    message: /options\.precision/,
  });
  t.throws(() => a.gemmTimeCuda({ m: 4, n: 4, k: 4, bDtype: 'float16' }), {
    name: 'RangeError',
    message: /options\.bDtype/,
  });
  t.throws(() => a.gemmTimeCuda({ m: 4, n: 4, k: 4, transA: 1 }), {
    name: 'TypeError',
    message: /options\.transA must be a boolean/,
  });
  t.throws(() => a.gemmTimeCuda({ m: 4, n: 4, k: 4, iteration: 2 }), { name: 'RangeError', message: /iteration/ });
  if (!cudaAvailable() || !modelAddon().modelOpsDevices().includes('cuda')) {
    t.throws(() => a.gemmTimeCuda({ m: 4, n: 4, k: 4 }), { message: /no CUDA GEMM kernels|is not available/ });
    return;
  }
  const s = a.gemmTimeCuda({
    m: 33,
    n: 17,
    k: 40,
    transB: true,
    bDtype: 'bfloat16',
    precision: 'medium',
    iterations: 1,
  });
  t.ok(s > 0 && Number.isFinite(s), `seconds per GEMM (${s})`);
  t.equal(matmulPrecision(), 'highest', 'the setting is restored after the timing');
});

const noGpu = noCudaModelOps();

t.test(
  "CUDA GEMMs on the bfloat16 tensor cores ('medium') against float64 on the rounded operands",
  { skip: noGpu },
  async (t) => {
    t.teardown(() => setMatmulPrecision('highest'));
    let worst = 0;
    let seed = 3000;
    for (const [m, n, k] of [
      [131, 45, 77],
      [1, 137, 40],
      [70, 3, 161],
      [5, 9, 0],
    ] as const) {
      for (const [ta, tb] of [
        [false, true],
        [false, false],
        [true, false],
        [true, true],
      ] as const) {
        const a = randn(m * k, seed++, -2, 2),
          b = randn(k * n, seed++, -2, 2),
          c0 = randn(m * n, seed++);
        const ar = rounded(a),
          br = rounded(b);
        for (const [which, A, B, alpha, beta] of [
          ['float32', a, b, 0.75, -0.5],
          ['b bfloat16', a, bf16Bits(b), 1, 0],
          ['a and b bfloat16', bf16Bits(a), bf16Bits(b), -1.25, 1],
        ] as const) {
          const label = `gemm ${m}x${n}x${k} ${ta ? 'T' : 'N'}${tb ? 'T' : 'N'}, ${which}, alpha ${alpha} beta ${beta}`;
          const c = copy(c0);
          setMatmulPrecision('medium');
          gemm({ a: A, b: B, c, m, n, k, transA: ta, transB: tb, alpha, beta, device: 'cuda' });
          setMatmulPrecision('highest');
          const ref = refGemm(ta, tb, m, n, k, alpha, ar, br, beta, c0);
          const e = worstRelative(c, ref, termScale(ta, tb, m, n, k, alpha, ar, br, beta, c0));
          worst = Math.max(worst, e);
          t.ok(e <= BOUND, `${label}: within 2^-12 of its terms (${e.toExponential(2)})`);
        }
      }
    }
    t.comment(
      `tensor-core GEMM vs float64 on bfloat16-rounded operands: worst ${worst.toExponential(2)} of the terms' magnitudes`,
    );

    // float32 operands that are not bfloat16 numbers: 1 + 2^-10 rounds to 1 on the tensor cores.
    const a = new Float32Array(3).fill(1 + 2 ** -10),
      b = new Float32Array(3).fill(1);
    const medium = new Float32Array(1),
      highest = new Float32Array(1);
    setMatmulPrecision('medium');
    gemm({ a, b, c: medium, m: 1, n: 1, k: 3, device: 'cuda' });
    setMatmulPrecision('highest');
    gemm({ a, b, c: highest, m: 1, n: 1, k: 3, device: 'cuda' });
    t.equal(medium[0], 3, "'medium' rounds float32 operands to bfloat16");
    t.equal(highest[0], 3 * (1 + 2 ** -10), "'highest' keeps them");

    // 'highest' after 'medium': the float32 kernel again, bit for bit.
    const x = randn(37 * 29, 1),
      y = randn(29 * 41, 2);
    const c1 = new Float32Array(37 * 41),
      c2 = new Float32Array(37 * 41);
    gemm({ a: x, b: y, c: c1, m: 37, n: 41, k: 29, device: 'cuda' });
    setMatmulPrecision('medium');
    gemm({ a: x, b: y, c: new Float32Array(37 * 41), m: 37, n: 41, k: 29, device: 'cuda' });
    setMatmulPrecision('highest');
    gemm({ a: x, b: y, c: c2, m: 37, n: 41, k: 29, device: 'cuda' });
    t.ok(sameBits(c1, c2), "'highest' again: the float32 kernel's bits");
  },
);

t.test("CUDA linear layers and the MoE experts with matmul precision 'medium'", { skip: noGpu }, async (t) => {
  t.teardown(() => setMatmulPrecision('highest'));
  const T = 45,
    inF = 39,
    outF = 133;
  const x = randn(T * inF, 11, -2, 2),
    w = randn(outF * inF, 12, -2, 2),
    bias = randn(outF, 13),
    dy = randn(T * outF, 14);
  const xr = rounded(x),
    wr = rounded(w),
    dyr = rounded(dy);
  for (const [label, weight] of [
    ['float32 weight', w],
    ['bfloat16 weight', bf16Bits(w)],
  ] as const) {
    setMatmulPrecision('medium');
    const y = linearForward({ x, weight, bias, rows: T, inFeatures: inF, outFeatures: outF, device: 'cuda' });
    setMatmulPrecision('highest');
    const bias2 = new Float32Array(T * outF);
    for (let i = 0; i < T * outF; i++) bias2[i] = bias[i % outF];
    // y = x W^T + bias: a GEMM with A = x, B = W (transposed), beta 1 over the broadcast bias.
    const ref = refGemm(false, true, T, outF, inF, 1, xr, wr, 1, bias2);
    const e = worstRelative(y, ref, termScale(false, true, T, outF, inF, 1, xr, wr, 1, bias2));
    t.ok(e <= BOUND, `linear forward, ${label}, bias: within 2^-12 of its terms (${e.toExponential(2)})`);
  }
  const dx0 = randn(T * inF, 15),
    dw0 = randn(outF * inF, 16);
  setMatmulPrecision('medium');
  const g = linearBackward({
    x,
    weight: w,
    dy,
    rows: T,
    inFeatures: inF,
    outFeatures: outF,
    accumulate: true,
    dx: copy(dx0),
    dweight: copy(dw0),
    dbias: new Float32Array(outF),
    device: 'cuda',
  });
  setMatmulPrecision('highest');
  const refDx = refGemm(false, false, T, inF, outF, 1, dyr, wr, 1, dx0);
  const eDx = worstRelative(g.dx!, refDx, termScale(false, false, T, inF, outF, 1, dyr, wr, 1, dx0));
  t.ok(eDx <= BOUND, `linear dx (accumulated): within 2^-12 of its terms (${eDx.toExponential(2)})`);
  const refDw = refGemm(true, false, outF, inF, T, 1, dyr, xr, 1, dw0);
  const eDw = worstRelative(g.dweight!, refDw, termScale(true, false, outF, inF, T, 1, dyr, xr, 1, dw0));
  t.ok(eDw <= BOUND, `linear dweight (accumulated): within 2^-12 of its terms (${eDw.toExponential(2)})`);

  // The MoE layer: the router and the grouped expert GEMMs on the tensor cores, close to the
  // CPU's float32 layer (bfloat16 operands: about 2^-8 relative per product) and not its bits.
  const s = { T: 150, D: 33, F: 21, E: 3, K: 2, variant: 'clamped' as const };
  const mw = weightsFor(s, 77, true);
  const mx = randn(s.T * s.D, 78, -1.5, 1.5);
  const cpu = moeForward({ ...shape(s), ...mw, x: mx });
  setMatmulPrecision('medium');
  const gpu = moeForward({ ...shape(s), ...mw, x: mx, device: 'cuda' });
  setMatmulPrecision('highest');
  const exact = moeForward({ ...shape(s), ...mw, x: mx, device: 'cuda' });
  t.same(Array.from(gpu.experts), Array.from(cpu.experts), 'MoE: the same experts chosen');
  let e = 0,
    m = 0;
  for (let i = 0; i < cpu.out.length; i++) {
    e = Math.max(e, Math.abs(gpu.out[i] - cpu.out[i]));
    m = Math.max(m, Math.abs(cpu.out[i]));
  }
  t.ok(e / m <= 2 ** -6, `MoE output within 2^-6 of the CPU's scale (${(e / m).toExponential(2)})`);
  t.notOk(sameBits(gpu.out, exact.out), "MoE output differs from 'highest' (the tensor-core path ran)");
});

t.test(
  "MXFP4 experts with matmul precision 'medium': packed = bfloat16 dequantization bit for bit, on the tensor cores",
  { skip: noGpu },
  async (t) => {
    t.teardown(() => setMatmulPrecision('highest'));
    // The packed experts are decoded to bfloat16 as the tensor-core GEMM loads its tiles, so they
    // feed the same bfloat16 values to the same kernel as their dequantization: the same bits,
    // forward and input gradient (the grouped GEMMs with the weight as B, transposed and not).
    // Scale bytes spread around 127 with some float32-subnormal powers (randomMxfp4).
    const cases: Array<Sizes & { biases: boolean; what: string }> = [
      { T: 5, D: 64, F: 96, E: 4, K: 2, variant: 'clamped', biases: true, what: 'few rows per expert' },
      {
        T: 161,
        D: 96,
        F: 64,
        E: 3,
        K: 2,
        variant: 'clamped',
        biases: true,
        what: 'many rows per expert (more than a 128-row tile)',
      },
      {
        T: 77,
        D: 32,
        F: 160,
        E: 5,
        K: 3,
        variant: 'standard',
        biases: false,
        what: 'no biases, ffn past a 128-column tile',
      },
    ];
    for (const [i, s] of cases.entries()) {
      const { base, bf, packed, x, dout } = mxfp4MoeCase(s, 600 + i, 10);
      const common = { ...shape(s), x, device: 'cuda' as const };
      const noGrads = { drouter: null, drouterBias: null, dgateUpBias: null, ddownBias: null };
      const exact = moeForward({ ...common, ...packed });
      setMatmulPrecision('medium');
      const fb = moeForward({ ...common, ...bf });
      const fp = moeForward({ ...common, ...packed });
      const bb = moeBackward({ ...common, ...bf, dout, state: fb.state, ...noGrads });
      const bp = moeBackward({ ...common, ...packed, dout, state: fp.state, ...noGrads });
      setMatmulPrecision('highest');
      t.ok(sameBits(fp.out, fb.out), `${s.what}: packed forward = dequantized forward, bit for bit`);
      t.ok(sameBits(bp.dx, bb.dx), `${s.what}: packed input gradient = dequantized input gradient, bit for bit`);
      t.notOk(sameBits(fp.out, exact.out), `${s.what}: not the 'highest' bits`);

      // The semantics: float64 over the decoded weights (the tensor cores round the activations to
      // bfloat16: about 2^-8 relative per product), as for the bfloat16 experts above.
      const decoded = (m: Uint16Array): Float64Array => Float64Array.from(m, (b) => bf16ToNumber(b));
      const ref = refMoe(s, x, {
        ...base,
        gateUp: decoded(bf.gateUp as Uint16Array),
        down: decoded(bf.down as Uint16Array),
      });
      t.same(Array.from(fp.experts), ref.experts.flat(), `${s.what}: the reference's experts chosen`);
      let e = 0,
        m = 0;
      for (let k = 0; k < ref.out.length; k++) {
        e = Math.max(e, Math.abs(fp.out[k] - ref.out[k]));
        m = Math.max(m, Math.abs(ref.out[k]));
      }
      t.ok(
        e / m <= 2 ** -6,
        `${s.what}: packed forward within 2^-6 of the float64 reference's scale (${(e / m).toExponential(2)})`,
      );
    }
  },
);

t.test(
  "MXFP4 experts at the ends of the scale range with 'medium': the same bits as their dequantization",
  { skip: noGpu },
  async (t) => {
    t.teardown(() => setMatmulPrecision('highest'));
    // The tensor-core decoder must give the loader's bfloat16 dequantization for every scale byte,
    // as the float32 kernel does: first scale bytes 0-2 (subnormal powers, values down to 2^-128)
    // and up to 158 (values up to 6 x 2^31, whose products stay finite through the layer), then
    // 250-255 (values past float32's range: infinity; 0 x 2^128 is NaN), where the outputs are not
    // finite but must still be the dequantized run's bits.
    const s: Sizes = { T: 40, D: 64, F: 64, E: 2, K: 1, variant: 'standard' };
    const base = weightsFor(s, 700, false);
    const x = randn(s.T * s.D, 703, -1, 1),
      dout = randn(s.T * s.D, 704, -1, 1);
    const common = { ...shape(s), x, device: 'cuda' as const };
    const noGrads = { drouter: null, drouterBias: null, dgateUpBias: null, ddownBias: null };
    for (const [what, ends] of [
      ['subnormal and large finite scales', [0, 1, 2, 150, 155, 158, 100, 127]],
      ['scales past the float32 range', [0, 250, 252, 254, 255, 127]],
    ] as const) {
      const extreme = (numel: number, seed: number): ReturnType<typeof randomMxfp4> => {
        const m = randomMxfp4(numel, seed);
        m.scales.forEach((_, i) => (m.scales[i] = ends[i % ends.length]));
        return m;
      };
      const gateUp = extreme(s.E * 2 * s.F * s.D, 701),
        down = extreme(s.E * s.D * s.F, 702);
      const bf: MoeWeights = { ...base, gateUp: dequantize(gateUp, s.D), down: dequantize(down, s.F) };
      const values = Float64Array.from(bf.gateUp as Uint16Array, (b) => bf16ToNumber(b));
      const finite = ends.every((e) => e < 250);
      if (finite)
        t.ok(
          values.some((v) => v !== 0 && Math.abs(v) < 2 ** -126) && values.some((v) => Math.abs(v) > 2 ** 30),
          `${what}: the weights hold subnormals and values past 2^30`,
        );
      else
        t.ok(
          values.some((v) => v === Infinity) && values.some(Number.isNaN),
          `${what}: the weights hold infinities and NaNs`,
        );
      for (const precision of ['medium', 'highest'] as const) {
        setMatmulPrecision(precision);
        const fb = moeForward({ ...common, ...bf }),
          fp = moeForward({ ...common, ...base, gateUp, down });
        const bb = moeBackward({ ...common, ...bf, dout, state: fb.state, ...noGrads });
        const bp = moeBackward({ ...common, ...base, gateUp, down, dout, state: fp.state, ...noGrads });
        setMatmulPrecision('highest');
        if (finite)
          t.ok(
            fp.out.every(Number.isFinite) && bp.dx.every(Number.isFinite),
            `${what}, '${precision}': the outputs and input gradients are finite`,
          );
        t.ok(sameBits(fp.out, fb.out), `${what}, '${precision}': packed forward = dequantized forward, bit for bit`);
        t.ok(
          sameBits(bp.dx, bb.dx),
          `${what}, '${precision}': packed input gradient = dequantized input gradient, bit for bit`,
        );
      }
    }
  },
);

t.test(
  "a GPU without bf16 tensor cores: 'medium' runs the float32 kernel and says so once",
  {
    skip:
      noGpu ||
      !/emulator/.test(
        loadAddon()
          .backends()
          .find((b) => b.name === 'cuda')?.deviceName ?? '',
      )
        ? 'needs the CUDA emulator (SFX_EMU_CC pretends compute capability 7.5)'
        : false,
  },
  async (t) => {
    const script = `
    const m = await import(${JSON.stringify(new URL('../../lib/model/index.ts', import.meta.url).href)});
    const a = Float32Array.from({ length: 6 }, (_, i) => 1 + 2 ** -10 * (i + 1)), b = Float32Array.from({ length: 6 }, (_, i) => i - 2.5);
    const out = [];
    for (const p of ['highest', 'medium', 'medium']) {
      m.setMatmulPrecision(p);
      const c = new Float32Array(4);
      m.gemm({ a, b, c, m: 2, n: 2, k: 3, device: 'cuda' });
      out.push(Array.from(c));
    }
    console.log(JSON.stringify(out));`;
    const r = spawnSync(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], {
      env: { ...process.env, SFX_EMU_CC: '7.5' },
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      encoding: 'utf8',
    });
    t.equal(r.status, 0, r.stderr);
    const [highest, medium, again] = JSON.parse(r.stdout.trim().split('\n').pop()!) as number[][];
    t.same(medium, highest, "'medium' gave the float32 kernel's values");
    t.same(again, highest, 'and again');
    const notes = r.stderr.split('\n').filter((l) => l.includes("matmul precision 'medium'"));
    t.equal(notes.length, 1, 'said once');
    t.match(notes[0], /compute capability 7\.5.*8\.0 or newer/, 'with the reason');
  },
);

t.test(
  "the CUDA transformer with matmul precision 'medium': forward and backward close to the CPU's float32",
  { skip: noGpu },
  async (t) => {
    t.teardown(() => setMatmulPrecision('highest'));
    const c = modelConfig({
      layers: 2,
      width: 40,
      heads: 4,
      kvHeads: 2,
      headDim: 10,
      window: 0,
      vocab: 61,
      context: 64,
      ffn: 36,
      ropeTheta: 1000,
      normEps: 1e-5,
      initStd: 0.1,
      swiglu: 'clamped',
      bias: true,
    });
    const cpu = Transformer.create(c, 5);
    const gpu = Transformer.create(c, 5, { device: 'cuda' });
    randomizeStore(cpu.store, 105);
    randomizeStore(gpu.store, 105);
    const T = 37;
    const batch = {
      tokens: randint(T, 9, 0, c.vocab),
      targets: randint(T, 10, 0, c.vocab),
      positions: Int32Array.from({ length: T }, (_, i) => i),
      documentIds: new Int32Array(T),
    };
    const exact = gpu.logProbs(batch);
    setMatmulPrecision('medium');
    const f2 = gpu.forward(batch);
    const f1 = cpu.forward(batch);
    let e = 0;
    for (let i = 0; i < T; i++) e = Math.max(e, Math.abs(f2.logProbs[i] - f1.logProbs[i]));
    // A whole-model check that every GEMM of the forward and backward runs on the tensor cores and
    // stays close (each GEMM's own bound is checked above): bfloat16 operands move each product by
    // up to 2^-8 relative, compounded over 2 layers, the norms and the softmax.
    t.ok(e <= 0.1, `log-probs within 0.1 of the CPU's (${e.toExponential(2)}; bfloat16 operands in every GEMM)`);
    t.notOk(sameBits(f2.logProbs, exact.logProbs), "not the 'highest' bits (the tensor cores ran)");
    const dLogProbs = Float32Array.from({ length: T }, (_, i) => Math.sin(i) * 0.5);
    f1.backward({ dLogProbs });
    await f2.backwardAsync({ dLogProbs });
    let worst = 0,
      where = '';
    for (const n of cpu.store.names()) {
      const a = gpu.store.read(n, 'grad'),
        b = cpu.store.read(n, 'grad');
      let d = 0,
        m = 0;
      for (let i = 0; i < b.length; i++) {
        d = Math.max(d, Math.abs(a[i] - b[i]));
        m = Math.max(m, Math.abs(b[i]));
      }
      if (d / Math.max(m, 1e-30) > worst) [worst, where] = [d / Math.max(m, 1e-30), n];
    }
    t.ok(
      worst <= 0.1,
      `every parameter gradient within 10% of its largest value (worst ${worst.toExponential(2)}, ${where})`,
    );
    cpu.dispose();
    gpu.dispose();
  },
);
