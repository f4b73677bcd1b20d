// The model ops on CUDA against the CPU ops (fp32 within 1e-5 relative) and the float64
// references, on random odd-sized inputs: GEMM (all transposes, beta, alpha), linear forward
// and backward, RMSNorm, RoPE, SwiGLU (standard and clamped), embedding, log-softmax with
// entropy and temperature, cross-entropy, AdamW and the sum of squares; bfloat16 weights (GEMM
// operands, linear forward and dx, embedding gather, an LM-head-sized product) equal to the
// CUDA float32 kernels over the widened weights bit for bit and to the CPU's bfloat16 path
// within 1e-6 of its scale. Skipped with a visible
// message without a CUDA build and a GPU (the CUDA emulator counts). Without one, the device
// option's CPU paths and errors are checked.
import t from 'tap';

import {
  adamwUpdate,
  crossEntropyBackward,
  crossEntropyForward,
  embeddingBackward,
  embeddingForward,
  gemm,
  linearBackward,
  linearForward,
  logSoftmaxBackward,
  logSoftmaxForward,
  matmul,
  modelOpsDevice,
  rmsnormBackward,
  rmsnormForward,
  ropeBackward,
  ropeForward,
  sumSquares,
  swigluBackward,
  swigluForward,
} from '../../lib/model/index.js';
import { swigluParams } from '../../lib/model/ops.js';
import { modelAddon } from '../../lib/model/native.js';
import {
  bf16Bits,
  bf16Values,
  closeness,
  randint,
  randn,
  refAdamW,
  refGemm,
  refLinear,
  refLogSoftmax,
  refRmsNorm,
  refRope,
  refSwiGlu,
  sameBits,
} from './fixtures/reference.js';
import { noCudaModelOps } from './fixtures/cuda-skip.js';

const copy = (x: Float32Array) => Float32Array.from(x);

t.test('the device option without CUDA model kernels', async (t) => {
  t.equal(modelOpsDevice(), 'cpu', 'ops default to the cpu');
  t.equal(modelOpsDevice('cpu'), 'cpu');
  const cuda = modelAddon().modelOpsDevices().includes('cuda');
  t.equal(modelOpsDevice('auto'), cuda ? 'cuda' : 'cpu');
  if (!cuda) {
    t.throws(() => modelOpsDevice('cuda'), { name: 'DeviceUnavailableError' });
    t.throws(() => modelAddon().sumSquares(new Float32Array(3), 'cuda'), { message: /device 'cuda' is not available/ });
    t.throws(
      () =>
        modelAddon().gemm({
          a: new Float32Array(1),
          b: new Float32Array(1),
          c: new Float32Array(1),
          m: 1,
          n: 1,
          k: 1,
          device: 'cuda',
        }),
      {
        message: /device 'cuda' is not available/,
      },
    );
  }
  t.throws(
    () =>
      modelAddon().gemmAsync({
        a: new Float32Array(1),
        b: new Float32Array(1),
        c: new Float32Array(1),
        m: 1,
        n: 1,
        k: 1,
        device: 'cuda:0',
      }),
    {
      message: /cpu only|not available/,
    },
  );
  t.throws(() => modelAddon().sumSquares(new Float32Array(3), 'tpu'), {
    name: 'RangeError',
    message: /device must be 'cpu', 'cuda'/,
  });
  t.equal(sumSquares(Float32Array.of(1, 2, 3), 'cpu'), 14);
});

const noGpu = noCudaModelOps();

t.test('CUDA GEMM and linear against the CPU and float64', { skip: noGpu }, async (t) => {
  let seed = 500;
  for (const [m, n, k] of [
    [1, 7, 33],
    [67, 29, 45],
    [13, 130, 1],
    [5, 3, 0],
  ]) {
    for (const [ta, tb] of [
      [false, false],
      [false, true],
      [true, false],
      [true, true],
    ] as const) {
      const a = randn(m! * k!, seed++),
        b = randn(k! * n!, seed++),
        c0 = randn(m! * n!, seed++);
      for (const [alpha, beta] of [
        [1, 0],
        [0.75, -1.25],
      ]) {
        const cpu = copy(c0),
          gpu = copy(c0);
        gemm({ a, b, c: cpu, m: m!, n: n!, k: k!, transA: ta, transB: tb, alpha, beta, device: 'cpu' });
        gemm({ a, b, c: gpu, m: m!, n: n!, k: k!, transA: ta, transB: tb, alpha, beta, device: 'cuda' });
        const label = `gemm ${m}x${n}x${k} ${ta ? 'T' : 'N'}${tb ? 'T' : 'N'} alpha ${alpha} beta ${beta}`;
        t.ok(closeness(gpu, cpu, 1e-5, 1e-5) <= 1, `${label}: vs cpu`);
        t.ok(
          closeness(gpu, refGemm(ta, tb, m!, n!, k!, alpha, a, b, beta, c0), 1e-5, 2e-5) <= 1,
          `${label}: vs float64`,
        );
      }
    }
  }
  t.same(matmul(randn(6, 1), randn(6, 2), 2, 2, 3, { device: 'cuda' }).length, 4, 'matmul on the device');

  const T = 19,
    inF = 37,
    outF = 23;
  const x = randn(T * inF, 1),
    w = randn(outF * inF, 2),
    b = randn(outF, 3),
    dy = randn(T * outF, 4);
  const yc = linearForward({ x, weight: w, bias: b, rows: T, inFeatures: inF, outFeatures: outF });
  const yg = linearForward({ x, weight: w, bias: b, rows: T, inFeatures: inF, outFeatures: outF, device: 'cuda' });
  t.ok(closeness(yg, yc, 1e-5, 1e-6) <= 1, 'linear forward vs cpu');
  t.ok(closeness(yg, refLinear(x, w, b, T, inF, outF), 1e-5, 1e-5) <= 1, 'linear forward vs float64');
  const dx0 = randn(T * inF, 5),
    dw0 = randn(outF * inF, 6),
    db0 = randn(outF, 7);
  const opts = { x, weight: w, dy, rows: T, inFeatures: inF, outFeatures: outF, accumulate: true };
  const gc = linearBackward({ ...opts, dx: copy(dx0), dweight: copy(dw0), dbias: copy(db0) });
  const gg = linearBackward({ ...opts, dx: copy(dx0), dweight: copy(dw0), dbias: copy(db0), device: 'cuda' });
  t.ok(closeness(gg.dx!, gc.dx!, 1e-5, 1e-6) <= 1, 'linear dx (accumulated) vs cpu');
  t.ok(closeness(gg.dweight!, gc.dweight!, 1e-5, 1e-6) <= 1, 'linear dweight vs cpu');
  t.ok(closeness(gg.dbias!, gc.dbias!, 1e-5, 1e-6) <= 1, 'linear dbias vs cpu');
  const only = linearBackward({
    x,
    weight: w,
    dy,
    rows: T,
    inFeatures: inF,
    outFeatures: outF,
    dx: null,
    dweight: null,
    device: 'cuda',
  });
  t.ok(
    closeness(
      only.dbias!,
      linearBackward({ x, weight: w, dy, rows: T, inFeatures: inF, outFeatures: outF, dx: null, dweight: null }).dbias!,
      1e-6,
      1e-7,
    ) <= 1,
    'dbias only',
  );
});

t.test('CUDA RMSNorm, RoPE, SwiGLU and embedding against the CPU and float64', { skip: noGpu }, async (t) => {
  const T = 11,
    D = 301;
  const x = randn(T * D, 10, -2, 2),
    g = randn(D, 11),
    dy = randn(T * D, 12);
  const fc = rmsnormForward({ x, weight: g, rows: T, dim: D, eps: 1e-5 });
  const fg = rmsnormForward({ x, weight: g, rows: T, dim: D, eps: 1e-5, device: 'cuda' });
  const ref = refRmsNorm(x, g, T, D, 1e-5);
  t.ok(closeness(fg.out, fc.out, 1e-5, 1e-6) <= 1, 'rmsnorm out vs cpu');
  t.ok(closeness(fg.rstd, fc.rstd, 1e-5, 0) <= 1, 'rmsnorm rstd vs cpu');
  t.ok(closeness(fg.out, ref.y, 1e-5, 1e-5) <= 1, 'rmsnorm out vs float64');
  const dg0 = randn(D, 13);
  const bc = rmsnormBackward({ x, weight: g, rstd: fc.rstd, dy, rows: T, dim: D, dweight: copy(dg0) });
  const bg = rmsnormBackward({ x, weight: g, rstd: fc.rstd, dy, rows: T, dim: D, dweight: copy(dg0), device: 'cuda' });
  t.ok(closeness(bg.dx, bc.dx, 1e-5, 1e-6) <= 1, 'rmsnorm dx vs cpu');
  t.ok(closeness(bg.dweight, bc.dweight, 1e-5, 1e-5) <= 1, 'rmsnorm dweight vs cpu');
  const inPlace = copy(dy);
  rmsnormBackward({ x, weight: g, rstd: fc.rstd, dy: inPlace, dx: inPlace, rows: T, dim: D, device: 'cuda' });
  t.ok(closeness(inPlace, bc.dx, 1e-5, 1e-6) <= 1, 'rmsnorm dx written over dy');
  // many short rows (a q/k norm over rows x heads): the gain gradient summed in chunks of rows
  {
    const R = 601,
      Dh = 8;
    const xq = randn(R * Dh, 23, -2, 2),
      gq = randn(Dh, 24, 0.5, 1.5),
      dq = randn(R * Dh, 25),
      dg1 = randn(Dh, 26);
    const f = rmsnormForward({ x: xq, weight: gq, rows: R, dim: Dh, eps: 1e-6 });
    const c = rmsnormBackward({ x: xq, weight: gq, rstd: f.rstd, dy: dq, rows: R, dim: Dh, dweight: copy(dg1) });
    const g2 = rmsnormBackward({
      x: xq,
      weight: gq,
      rstd: f.rstd,
      dy: dq,
      rows: R,
      dim: Dh,
      dweight: copy(dg1),
      device: 'cuda',
    });
    const rs = refRmsNorm(xq, gq, R, Dh, 1e-6).rstd;
    const want = Float64Array.from(dg1);
    for (let r = 0; r < R; r++) for (let d = 0; d < Dh; d++) want[d] += dq[r * Dh + d] * xq[r * Dh + d] * rs[r];
    t.ok(closeness(g2.dweight, c.dweight, 1e-5, 1e-5) <= 1, 'rmsnorm dweight over 601 rows (chunked) vs cpu');
    t.ok(closeness(g2.dweight, want, 1e-5, 1e-4) <= 1, 'and vs float64');
    t.ok(closeness(g2.dx, c.dx, 1e-5, 1e-6) <= 1, 'and dx');
  }

  const H = 3,
    Dh = 10;
  const pos = randint(T, 14, 0, 40);
  const xr = randn(T * H * Dh, 15);
  const rc = ropeForward({ x: xr, positions: pos, rows: T, heads: H, headDim: Dh, theta: 500 });
  const rg = ropeForward({ x: xr, positions: pos, rows: T, heads: H, headDim: Dh, theta: 500, device: 'cuda' });
  t.ok(closeness(rg, rc, 1e-5, 1e-6) <= 1, 'rope forward vs cpu');
  t.ok(closeness(rg, refRope(xr, pos, T, H, Dh, 500), 1e-5, 1e-5) <= 1, 'rope forward vs float64');
  const back = ropeBackward({
    dy: copy(rg),
    dx: undefined,
    positions: pos,
    rows: T,
    heads: H,
    headDim: Dh,
    theta: 500,
    device: 'cuda',
  });
  t.ok(closeness(back, xr, 1e-5, 1e-5) <= 1, 'rope backward inverts the forward');
  t.throws(
    () =>
      ropeForward({
        x: xr,
        positions: Int32Array.from(pos, (p, i) => (i === 4 ? -1 : p)),
        rows: T,
        heads: H,
        headDim: Dh,
        device: 'cuda',
      }),
    {
      name: 'RangeError',
      message: /positions\[4\] = -1 is out of range/,
    },
  );

  const F = 29;
  const h = randn(T * 2 * F, 16, -9, 9),
    dout = randn(T * F, 17);
  for (const variant of ['standard', 'clamped'] as const) {
    const sc = swigluForward({ h, rows: T, ffn: F, variant });
    const sg = swigluForward({ h, rows: T, ffn: F, variant, device: 'cuda' });
    t.ok(closeness(sg, sc, 1e-5, 1e-6) <= 1, `swiglu ${variant} forward vs cpu`);
    t.ok(
      closeness(sg, refSwiGlu(h, T, F, swigluParams(variant)), 1e-5, 1e-5) <= 1,
      `swiglu ${variant} forward vs float64`,
    );
    const dh0 = randn(T * 2 * F, 18);
    const dc = swigluBackward({ h, dout, rows: T, ffn: F, variant, dh: copy(dh0), accumulate: true });
    const dgpu = swigluBackward({ h, dout, rows: T, ffn: F, variant, dh: copy(dh0), accumulate: true, device: 'cuda' });
    t.ok(closeness(dgpu, dc, 1e-5, 1e-6) <= 1, `swiglu ${variant} backward vs cpu`);
  }
  t.throws(() => swigluForward({ h, rows: T, ffn: F, variant: { alpha: 0, limit: 0, upBias: 0 }, device: 'cuda' }), {
    name: 'RangeError',
    message: /swiglu alpha must be a positive finite number/,
  });

  const V = 13,
    E = 9,
    n = 17;
  const table = randn(V * E, 19),
    ids = randint(n, 20, 0, V);
  ids[3] = ids[7]!; // repeated ids accumulate
  t.same(
    embeddingForward({ table, ids, vocab: V, dim: E, device: 'cuda' }),
    embeddingForward({ table, ids, vocab: V, dim: E }),
    'embedding forward: exact',
  );
  const demb = randn(n * E, 21),
    dt0 = randn(V * E, 22);
  t.same(
    embeddingBackward({ ids, dout: demb, vocab: V, dim: E, dtable: copy(dt0), device: 'cuda' }),
    embeddingBackward({ ids, dout: demb, vocab: V, dim: E, dtable: copy(dt0) }),
    'embedding backward: same bits (tokens added in order)',
  );
  t.throws(() => embeddingForward({ table, ids: Int32Array.of(1, 13), vocab: V, dim: E, device: 'cuda' }), {
    name: 'RangeError',
    message: /ids\[1\] = 13 is out of range \[0, 13\)/,
  });
});

t.test('CUDA log-softmax, cross-entropy, AdamW and sum of squares', { skip: noGpu }, async (t) => {
  const T = 9,
    V = 301;
  const logits = randn(T * V, 30, -6, 6);
  const targets = randint(T, 31, 0, V);
  targets[2] = -1;
  for (const temperature of [1, 0.7]) {
    const c = logSoftmaxForward({ logits, targets, rows: T, vocab: V, temperature });
    const g = logSoftmaxForward({ logits, targets, rows: T, vocab: V, temperature, device: 'cuda' });
    const r = refLogSoftmax(logits, targets, T, V, 1 / temperature);
    t.ok(closeness(g.lse, c.lse, 1e-5, 1e-6) <= 1, `lse vs cpu (temperature ${temperature})`);
    t.ok(closeness(g.logp!, c.logp!, 1e-5, 1e-5) <= 1, `logp vs cpu`);
    t.ok(closeness(g.entropy, c.entropy, 1e-5, 1e-5) <= 1, `entropy vs cpu`);
    t.ok(closeness(g.logp!, r.logp, 1e-5, 2e-5) <= 1, `logp vs float64`);
    t.ok(closeness(g.entropy, r.entropy, 1e-5, 2e-5) <= 1, `entropy vs float64`);
    const dlogp = randn(T, 32),
      dentropy = randn(T, 33),
      d0 = randn(T * V, 34);
    const args = { logits, targets, rows: T, vocab: V, temperature, lse: c.lse, entropy: c.entropy, dlogp, dentropy };
    const bc = logSoftmaxBackward({ ...args, dlogits: copy(d0), accumulate: true });
    const bg = logSoftmaxBackward({ ...args, dlogits: copy(d0), accumulate: true, device: 'cuda' });
    t.ok(closeness(bg, bc, 1e-5, 1e-6) <= 1, `log-softmax backward (accumulated) vs cpu`);
    const inPlace = copy(logits);
    logSoftmaxBackward({ ...args, logits: inPlace, dlogits: inPlace, device: 'cuda' });
    t.ok(closeness(inPlace, logSoftmaxBackward(args), 1e-5, 1e-6) <= 1, 'in place over the logits');
  }
  const cc = crossEntropyForward({ logits, targets, rows: T, vocab: V });
  const cg = crossEntropyForward({ logits, targets, rows: T, vocab: V, device: 'cuda' });
  t.equal(cg.count, cc.count);
  t.ok(Math.abs(cg.loss - cc.loss) <= 1e-5 * Math.abs(cc.loss), `cross-entropy ${cg.loss} vs ${cc.loss}`);
  t.ok(closeness(cg.losses, cc.losses, 1e-5, 1e-6) <= 1, 'per-row losses');
  const dcg = crossEntropyBackward({ logits, targets, lse: cc.lse, rows: T, vocab: V, device: 'cuda' });
  t.ok(
    closeness(dcg, crossEntropyBackward({ logits, targets, lse: cc.lse, rows: T, vocab: V }), 1e-5, 1e-7) <= 1,
    'cross-entropy backward',
  );
  t.throws(
    () =>
      crossEntropyForward({
        logits,
        targets: Int32Array.from(targets, (v, i) => (i === 5 ? V : v)),
        rows: T,
        vocab: V,
        device: 'cuda',
      }),
    {
      name: 'RangeError',
      message: /targets\[5\] = 301 is out of range/,
    },
  );

  const n = 1031;
  const p0 = randn(n, 40),
    grad = randn(n, 41),
    m0 = randn(n, 42, -0.1, 0.1),
    v0 = randn(n, 43, 0, 0.01);
  const o = { lr: 1e-2, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.1, gradScale: 0.5 };
  for (const decay of [true, false]) {
    const pc = copy(p0),
      mc = copy(m0),
      vc = copy(v0),
      pg = copy(p0),
      mg = copy(m0),
      vg = copy(v0);
    adamwUpdate({ param: pc, grad, m: mc, v: vc, step: 3, decay, ...o });
    adamwUpdate({ param: pg, grad, m: mg, v: vg, step: 3, decay, ...o, device: 'cuda' });
    t.ok(
      closeness(pg, pc, 1e-5, 1e-7) <= 1 && closeness(mg, mc, 1e-5, 1e-9) <= 1 && closeness(vg, vc, 1e-5, 1e-12) <= 1,
      `adamw decay=${decay} vs cpu`,
    );
    const pr = Float64Array.from(p0),
      mr = Float64Array.from(m0),
      vr = Float64Array.from(v0);
    refAdamW(pr, grad, mr, vr, 3, { ...o, decay });
    t.ok(closeness(pg, pr, 1e-5, 1e-6) <= 1, `adamw decay=${decay} vs float64`);
  }
  t.throws(() => adamwUpdate({ param: p0, grad, m: m0, v: v0, step: 0, device: 'cuda' }), { name: 'RangeError' });
  const big = randn(40000, 44);
  let ref = 0;
  for (const v of big) ref += v * v;
  const ss = sumSquares(big, 'cuda');
  t.ok(Math.abs(ss - ref) <= 1e-6 * ref, `sum of squares ${ss} vs ${ref}`);
  t.equal(sumSquares(big, 'cuda'), ss, 'deterministic');
  t.equal(sumSquares(new Float32Array(0), 'cuda'), 0);
});

/** max |a - b| / max |b| over a whole tensor (0 when equal). */
function scaled(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let e = 0;
  let m = 0;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    e = Number.isNaN(d) ? Infinity : Math.max(e, d);
    m = Math.max(m, Math.abs(b[i]));
  }
  return e === 0 ? 0 : e / Math.max(m, 1e-30);
}

t.test(
  'CUDA bfloat16 weights: GEMM, linear, embedding and the LM head equal the widened float32 kernels and the CPU bf16 path',
  { skip: noGpu },
  async (t) => {
    let worst = 0;
    let seed = 800;
    for (const [m, n, k] of [
      [37, 29, 45],
      [1, 130, 67],
      [70, 3, 129],
    ]) {
      for (const [ta, tb] of [
        [false, true],
        [false, false],
        [true, false],
        [true, true],
      ] as const) {
        const a = randn(m! * k!, seed++),
          b = randn(k! * n!, seed++),
          c0 = randn(m! * n!, seed++);
        const a16 = bf16Bits(a),
          b16 = bf16Bits(b);
        const aw = bf16Values(a16),
          bw = bf16Values(b16);
        for (const [which, A, B, Aw, Bw] of [
          ['b', a, b16, a, bw],
          ['a', a16, b, aw, b],
          ['a and b', a16, b16, aw, bw],
        ] as const) {
          const label = `gemm ${m}x${n}x${k} ${ta ? 'T' : 'N'}${tb ? 'T' : 'N'}, ${which} bfloat16`;
          const gpu = copy(c0),
            wide = copy(c0),
            cpu = copy(c0);
          gemm({
            a: A,
            b: B,
            c: gpu,
            m: m!,
            n: n!,
            k: k!,
            transA: ta,
            transB: tb,
            alpha: 0.75,
            beta: -0.5,
            device: 'cuda',
          });
          gemm({
            a: Aw,
            b: Bw,
            c: wide,
            m: m!,
            n: n!,
            k: k!,
            transA: ta,
            transB: tb,
            alpha: 0.75,
            beta: -0.5,
            device: 'cuda',
          });
          gemm({ a: A, b: B, c: cpu, m: m!, n: n!, k: k!, transA: ta, transB: tb, alpha: 0.75, beta: -0.5 });
          t.ok(sameBits(gpu, wide), `${label}: the float32 kernel over the widened operand, bit for bit`);
          const e = scaled(gpu, cpu);
          worst = Math.max(worst, e);
          t.ok(e <= 1e-6, `${label}: the CPU bf16 path within 1e-6 of its scale (${e.toExponential(2)})`);
          t.ok(
            closeness(gpu, refGemm(ta, tb, m!, n!, k!, 0.75, Aw, Bw, -0.5, c0), 1e-5, 2e-5) <= 1,
            `${label}: float64 of the widened operands`,
          );
        }
      }
    }
    // linear forward and dx (the weight is frozen: no dweight), with and without bias
    const T = 41,
      inF = 37,
      outF = 23;
    const x = randn(T * inF, 1),
      w = randn(outF * inF, 2),
      bias = randn(outF, 3),
      dy = randn(T * outF, 4);
    const w16 = bf16Bits(w),
      ww = bf16Values(w16);
    for (const b of [bias, null]) {
      const yg = linearForward({
        x,
        weight: w16,
        bias: b,
        rows: T,
        inFeatures: inF,
        outFeatures: outF,
        device: 'cuda',
      });
      const yw = linearForward({ x, weight: ww, bias: b, rows: T, inFeatures: inF, outFeatures: outF, device: 'cuda' });
      const yc = linearForward({ x, weight: w16, bias: b, rows: T, inFeatures: inF, outFeatures: outF });
      t.ok(sameBits(yg, yw), `linear forward${b ? ' + bias' : ''}: widened float32, bit for bit`);
      worst = Math.max(worst, scaled(yg, yc));
      t.ok(
        scaled(yg, yc) <= 1e-6,
        `linear forward${b ? ' + bias' : ''}: the CPU bf16 path (${scaled(yg, yc).toExponential(2)})`,
      );
      t.ok(closeness(yg, refLinear(x, ww, b, T, inF, outF), 1e-5, 1e-5) <= 1, 'linear forward vs float64');
    }
    const dx0 = randn(T * inF, 5),
      db0 = randn(outF, 6);
    const args = { x, weight: w16, dy, rows: T, inFeatures: inF, outFeatures: outF, accumulate: true, dweight: null };
    const gg = linearBackward({ ...args, dx: copy(dx0), dbias: copy(db0), device: 'cuda' });
    const gw = linearBackward({ ...args, weight: ww, dx: copy(dx0), dbias: copy(db0), device: 'cuda' });
    const gc = linearBackward({ ...args, dx: copy(dx0), dbias: copy(db0) });
    t.ok(sameBits(gg.dx!, gw.dx!), 'linear dx (accumulated): widened float32, bit for bit');
    worst = Math.max(worst, scaled(gg.dx!, gc.dx!));
    t.ok(scaled(gg.dx!, gc.dx!) <= 1e-6, `linear dx: the CPU bf16 path (${scaled(gg.dx!, gc.dx!).toExponential(2)})`);
    t.ok(closeness(gg.dbias!, gc.dbias!, 1e-6, 1e-6) <= 1, 'linear dbias still flows');
    t.throws(
      () =>
        linearBackward({
          x,
          weight: w16,
          dy,
          rows: T,
          inFeatures: inF,
          outFeatures: outF,
          dweight: new Float32Array(outF * inF),
          device: 'cuda',
        }),
      {
        name: 'TypeError',
        message: /dweight must be null for a bfloat16 weight/,
      },
    );
    // embedding gather and the tied LM head (logits = h . table^T) over a bf16 table
    const V = 67,
      D = 24,
      n = 29;
    const table16 = bf16Bits(randn(V * D, 7)),
      ids = randint(n, 8, 0, V);
    const tw = bf16Values(table16);
    t.same(
      embeddingForward({ table: table16, ids, vocab: V, dim: D, device: 'cuda' }),
      embeddingForward({ table: tw, ids, vocab: V, dim: D }),
      'embedding gather: exact widening',
    );
    t.throws(() => embeddingForward({ table: table16, ids: Int32Array.of(2, V), vocab: V, dim: D, device: 'cuda' }), {
      name: 'RangeError',
      message: /ids\[1\] = 67 is out of range/,
    });
    const h = randn(n * D, 9);
    const lg = linearForward({ x: h, weight: table16, rows: n, inFeatures: D, outFeatures: V, device: 'cuda' });
    const lc = linearForward({ x: h, weight: table16, rows: n, inFeatures: D, outFeatures: V });
    worst = Math.max(worst, scaled(lg, lc));
    t.ok(scaled(lg, lc) <= 1e-6, `LM head over a bf16 table: the CPU bf16 path (${scaled(lg, lc).toExponential(2)})`);
    t.comment(`bfloat16 weights on CUDA vs the CPU bf16 path: worst max|Δ|/max|cpu| = ${worst.toExponential(2)}`);
  },
);
