// Sink attention on devices. Without a GPU: DeviceTensor calls on the 'cpu' device (the CPU
// kernels over tensor memory, bf16 widening/narrowing, results as DeviceTensors, Promise and
// SinkAttention variants) and the argument checks of device calls. With a GPU (skipped with a
// visible message otherwise): every CUDA function — fused and eager, forward and backward,
// Float32Array and DeviceTensor paths, fp32 and bf16 — against the CPU kernels and the float64
// reference (fp32 within 1e-5 relative, bf16 within 1e-2) over every mask kind, GQA, odd sizes,
// softcap, dLse and kvLen/queryOffset; determinism, block-mask conversion, memory and errors.
import t from 'tap';

import {
  SinkAttention,
  and,
  attentionInfo,
  causal,
  createBlockMask,
  documents,
  not,
  or,
  prefix,
  sinkAttentionBackward,
  sinkAttentionBackwardAsync,
  sinkAttentionForward,
  sinkAttentionForwardAsync,
  slidingWindow,
  type AttentionOptions,
  type AttentionShape,
  type MaskSpec,
} from '../../lib/attention/index.js';
import {
  DeviceUnavailableError,
  cudaAvailable,
  isDeviceTensor,
  isOutOfMemoryError,
  memory,
  toDevice,
  type DType,
  type DeviceTensor,
} from '../../lib/native/index.js';
import { loadAddon } from '../../lib/native/loader.js';
import { Rng, bf16Array, expectClose, packedIds, refBackward, refForward } from './fixtures/reference.js';

const kvLenOf = (s: AttentionShape) => s.kvLen ?? s.seqLen;

function inputs(s: AttentionShape, seed: number) {
  const rng = new Rng(seed);
  const Tk = kvLenOf(s);
  return {
    q: rng.floats(s.batch * s.seqLen * s.qHeads * s.headDim),
    k: rng.floats(s.batch * Tk * s.kvHeads * s.headDim),
    v: rng.floats(s.batch * Tk * s.kvHeads * s.headDim),
    sinks: rng.floats(s.qHeads, 1.5),
    dOut: rng.floats(s.batch * s.seqLen * s.qHeads * s.headDim),
    dLse: rng.floats(s.batch * s.qHeads * s.seqLen),
    rng,
  };
}

/** q, k, v, dOut of `s` as DeviceTensors (4-d shapes). */
function tensors(s: AttentionShape, x: ReturnType<typeof inputs>, device: string, dtype: DType) {
  const Tk = kvLenOf(s);
  const opts = { device: device as 'cpu', dtype };
  return {
    q: toDevice(x.q, [s.batch, s.seqLen, s.qHeads, s.headDim], opts),
    k: toDevice(x.k, [s.batch, Tk, s.kvHeads, s.headDim], opts),
    v: toDevice(x.v, [s.batch, Tk, s.kvHeads, s.headDim], opts),
    dOut: toDevice(x.dOut, [s.batch, s.seqLen, s.qHeads, s.headDim], opts),
  };
}

const dispose = (...xs: (DeviceTensor | null | undefined)[]) => xs.forEach((x) => x?.dispose());
const arr = (x: DeviceTensor) => x.toArray();

// ---- without a GPU: 'cpu' DeviceTensors and argument checks -------------------------------------

t.test("'cpu' DeviceTensors: same results as Float32Arrays, results stay DeviceTensors", async (t) => {
  const s = { batch: 2, seqLen: 37, qHeads: 4, kvHeads: 2, headDim: 20 };
  const x = inputs(s, 1);
  for (const impl of ['fused', 'eager'] as const) {
    const opts: AttentionOptions = { mask: { window: 9, prefix: 2 }, impl, softcap: 3, device: 'cpu' };
    const want = sinkAttentionForward(x.q, x.k, x.v, x.sinks, s, opts);
    const wantG = sinkAttentionBackward(x.q, x.k, x.v, x.sinks, want.out, want.lse, x.dOut, s, {
      ...opts,
      dLse: x.dLse,
    });
    const d = tensors(s, x, 'cpu', 'float32');
    const sinksT = toDevice(x.sinks, [s.qHeads], { device: 'cpu' });
    const r = sinkAttentionForward(d.q, d.k, d.v, sinksT, s, { ...opts, device: undefined });
    t.ok(isDeviceTensor(r.out) && isDeviceTensor(r.lse), `${impl}: DeviceTensor results`);
    t.same(r.out.shape, d.q.shape);
    t.same(r.lse.shape, [2, 4, 37]);
    t.equal(r.out.dtype, 'float32');
    t.equal(r.out.device, 'cpu');
    t.same(arr(r.out), want.out, `${impl} out`);
    t.same(arr(r.lse), want.lse, `${impl} lse`);
    const dLseT = toDevice(x.dLse, [x.dLse.length], { device: 'cpu' });
    const g = sinkAttentionBackward(d.q, d.k, d.v, x.sinks, r.out, r.lse, d.dOut, s, {
      ...opts,
      device: 'auto',
      dLse: dLseT,
    });
    t.same(g.dk.shape, d.k.shape);
    t.same(arr(g.dq), wantG.dq, `${impl} dq`);
    t.same(arr(g.dk), wantG.dk, `${impl} dk`);
    t.same(arr(g.dv), wantG.dv, `${impl} dv`);
    t.same(arr(g.dSinks!), wantG.dSinks, `${impl} dSinks`);
    const ra = await sinkAttentionForwardAsync(d.q, d.k, d.v, null, s, { ...opts, device: 'cpu' });
    const want0 = sinkAttentionForward(x.q, x.k, x.v, null, s, opts);
    t.same(arr(ra.out), want0.out, `${impl} async, no sinks`);
    const ga = await sinkAttentionBackwardAsync(d.q, d.k, d.v, null, ra.out, want0.lse, d.dOut, s, opts);
    t.equal(ga.dSinks, null, 'no sinks: dSinks null');
    t.same(arr(ga.dv), sinkAttentionBackward(x.q, x.k, x.v, null, want0.out, want0.lse, x.dOut, s, opts).dv);
    dispose(
      d.q,
      d.k,
      d.v,
      d.dOut,
      sinksT,
      dLseT,
      r.out,
      r.lse,
      g.dq,
      g.dk,
      g.dv,
      g.dSinks,
      ra.out,
      ra.lse,
      ga.dq,
      ga.dk,
      ga.dv,
    );
  }
});

t.test("'cpu' bfloat16 DeviceTensors: widened for the kernels, results narrowed", async (t) => {
  const s = { batch: 1, seqLen: 29, qHeads: 2, kvHeads: 1, headDim: 16 };
  const x = inputs(s, 2);
  const [q, k, v, dOut] = [x.q, x.k, x.v, x.dOut].map(bf16Array) as [
    Float32Array,
    Float32Array,
    Float32Array,
    Float32Array,
  ];
  for (const impl of ['fused', 'eager'] as const) {
    const opts: AttentionOptions = { impl, mask: { documentIds: packedIds(x.rng, 1, 29, 3) } };
    const want = sinkAttentionForward(q, k, v, x.sinks, s, { ...opts, device: 'cpu' });
    const d = tensors(s, x, 'cpu', 'bfloat16');
    const r = sinkAttentionForward(d.q, d.k, d.v, x.sinks, s, opts);
    t.equal(r.out.dtype, 'bfloat16');
    t.equal(r.lse.dtype, 'float32', 'lse stays float32');
    t.same(arr(r.out), bf16Array(want.out), `${impl} out = bf16(fp32 kernels on the bf16 inputs)`);
    t.same(arr(r.lse), want.lse);
    const outB = bf16Array(want.out);
    const wantG = sinkAttentionBackward(q, k, v, x.sinks, outB, want.lse, dOut, s, { ...opts, device: 'cpu' });
    const g = sinkAttentionBackward(d.q, d.k, d.v, x.sinks, r.out, r.lse, d.dOut, s, opts);
    t.equal(g.dq.dtype, 'bfloat16');
    t.equal(g.dSinks!.dtype, 'float32');
    t.same(arr(g.dq), bf16Array(wantG.dq));
    t.same(arr(g.dk), bf16Array(wantG.dk));
    t.same(arr(g.dv), bf16Array(wantG.dv));
    t.same(arr(g.dSinks!), wantG.dSinks);
    dispose(d.q, d.k, d.v, d.dOut, r.out, r.lse, g.dq, g.dk, g.dv, g.dSinks);
  }
});

t.test("SinkAttention with 'cpu' DeviceTensors (eager keeps its probabilities)", async (t) => {
  const s = { batch: 1, seqLen: 50, qHeads: 4, kvHeads: 1, headDim: 8 };
  const x = inputs(s, 3);
  for (const impl of ['fused', 'eager'] as const) {
    const layer = new SinkAttention(s, { impl, mask: { window: 7 } });
    const d = tensors(s, x, 'cpu', 'float32');
    const before = memory.currentBytes('cpu');
    const r = layer.forward(d.q, d.k, d.v, x.sinks);
    if (impl === 'eager') t.ok(memory.currentBytes('cpu') - before > 4 * 50 * 51 * 4, 'probabilities kept');
    const g = layer.backward(d.dOut);
    t.equal(layer.hasSaved, false);
    const want = sinkAttentionForward(x.q, x.k, x.v, x.sinks, s, { impl, mask: { window: 7 }, device: 'cpu' });
    const wantG = sinkAttentionBackward(x.q, x.k, x.v, x.sinks, want.out, want.lse, x.dOut, s, {
      impl,
      mask: { window: 7 },
      device: 'cpu',
    });
    t.same(arr(r.out), want.out, `${impl} out`);
    t.same(arr(g.dq), wantG.dq, `${impl} dq`);
    const ra = await layer.forwardAsync(d.q, d.k, d.v, x.sinks);
    const ga = await layer.backwardAsync(d.dOut);
    t.same(arr(ga.dk), wantG.dk, `${impl} async dk`);
    dispose(
      d.q,
      d.k,
      d.v,
      d.dOut,
      r.out,
      r.lse,
      g.dq,
      g.dk,
      g.dv,
      g.dSinks,
      ra.out,
      ra.lse,
      ga.dq,
      ga.dk,
      ga.dv,
      ga.dSinks,
    );
  }
});

t.test('device calls: argument checks', async (t) => {
  const s = { batch: 1, seqLen: 5, qHeads: 2, kvHeads: 1, headDim: 2 };
  const x = inputs(s, 4);
  const d = tensors(s, x, 'cpu', 'float32');
  const b = tensors(s, x, 'cpu', 'bfloat16');
  const f = () => sinkAttentionForward(d.q, d.k, d.v, null, s);
  const r = f();
  const bad = (fn: () => unknown, name: string, msg: RegExp) => t.throws(fn, { name, message: msg }, msg.source);
  const raw = loadAddon() as unknown as Record<string, (...a: unknown[]) => unknown>;
  bad(() => raw.attentionForward!(d.q, x.k, x.v, null, s, {}), 'TypeError', /^k must be a DeviceTensor \(q is one\)/);
  bad(() => raw.attentionForward!(x.q, d.k, x.v, null, s, {}), 'TypeError', /^k is a DeviceTensor but q is not/);
  bad(() => raw.attentionForward!(d.q, b.k, d.v, null, s, {}), 'TypeError', /^k is bfloat16, but q is float32/);
  bad(
    () => raw.attentionForward!(d.q, d.k, d.q, null, s, {}),
    'RangeError',
    /^v has 20 elements \(shape \[1, 5, 2, 2\]\), expected 10/,
  );
  bad(() => raw.attentionForward!(d.q, d.k, d.v, b.dOut, s, {}), 'TypeError', /^sinks must be float32/);
  bad(() => raw.attentionForward!(d.q, d.k, d.v, d.q, s, {}), 'RangeError', /^sinks has 20 elements, expected 2/);
  bad(
    () => raw.attentionForward!(d.q, d.k, d.v, {}, s, {}),
    'TypeError',
    /^sinks must be a Float32Array, got an object/,
  );
  bad(
    () => raw.attentionBackward!(d.q, d.k, d.v, null, r.out, b.q, d.dOut, s, {}),
    'TypeError',
    /^lse must be float32/,
  );
  bad(
    () => raw.attentionBackward!(d.q, d.k, d.v, null, r.out, r.lse, d.dOut, s, { dLse: d.q }),
    'RangeError',
    /^opts.dLse has 20 elements, expected 10/,
  );
  bad(
    () => raw.attentionBackward!(d.q, d.k, d.v, null, x.q, r.lse, d.dOut, s, {}),
    'TypeError',
    /^out must be a DeviceTensor/,
  );
  bad(
    () => sinkAttentionForward(d.q, d.k, d.v, null, s, { device: 'cuda' }),
    'RangeError',
    /opts.device is 'cuda' but the tensors are on 'cpu'/,
  );
  const sinksNaN = toDevice(Float32Array.of(0, NaN), [2], { device: 'cpu' });
  bad(() => sinkAttentionForward(d.q, d.k, d.v, sinksNaN, s), 'RangeError', /sinks\[1\] must be finite or -Infinity/);
  const gone = toDevice(x.k, [x.k.length], { device: 'cpu' });
  gone.dispose();
  t.throws(() => sinkAttentionForward(d.q, gone, d.v, null, s), { message: /^k is a disposed DeviceTensor/ });
  if (!cudaAvailable()) {
    bad(
      () => raw.attentionForward!(d.q, d.k, d.v, null, s, { device: 'cuda' }),
      'DeviceError',
      /device 'cuda' is not available/,
    );
    t.throws(() => toDevice(x.q, [x.q.length], { device: 'cuda' }), DeviceUnavailableError);
  }
  const cb = attentionInfo();
  t.equal(
    cb.cudaMaxFusedHeadDim === null,
    !cb.cudaKernels,
    'cudaMaxFusedHeadDim is set exactly when CUDA kernels are built in',
  );
  dispose(d.q, d.k, d.v, d.dOut, b.q, b.k, b.v, b.dOut, r.out, r.lse, sinksNaN);
});

// ---- with a GPU ------------------------------------------------------------------------------

const info = attentionInfo();
const noGpu = !cudaAvailable()
  ? `no CUDA device: ${loadAddon().cudaStatus().reason}`
  : !info.cudaKernels
    ? 'no CUDA device: this build has no CUDA attention kernels'
    : false;

interface Case {
  name: string;
  shape: AttentionShape;
  mask?: (rng: Rng, s: AttentionShape) => MaskSpec;
  sinks?: boolean | 'some-inf';
  softcap?: number;
  scale?: number;
  dLse?: boolean;
}

const CASES: Case[] = [
  { name: 'seqLen 1, headDim 1', shape: { batch: 1, seqLen: 1, qHeads: 1, kvHeads: 1, headDim: 1 }, sinks: true },
  {
    name: 'seqLen 77, headDim 33, GQA 2, window 5 + prefix 3, batch 2, dLse',
    shape: { batch: 2, seqLen: 77, qHeads: 4, kvHeads: 2, headDim: 33 },
    mask: () => ({ window: 5, prefix: 3 }),
    sinks: true,
    dLse: true,
  },
  {
    name: 'seqLen 129, headDim 64, GQA 8, causal + window 32 + documents, softcap, batch 2',
    shape: { batch: 2, seqLen: 129, qHeads: 8, kvHeads: 1, headDim: 64 },
    mask: (rng, s) => ({ window: 32, documentIds: packedIds(rng, s.batch, s.seqLen, 3) }),
    sinks: true,
    softcap: 4,
    dLse: true,
  },
  {
    name: 'seqLen 130, headDim 80, non-causal symmetric window 17, no sinks',
    shape: { batch: 1, seqLen: 130, qHeads: 2, kvHeads: 2, headDim: 80 },
    mask: () => ({ causal: false, window: 17 }),
  },
  {
    name: 'seqLen 100, headDim 128, or(and(causal, window 9), not(documents)), GQA 4',
    shape: { batch: 2, seqLen: 100, qHeads: 4, kvHeads: 1, headDim: 128 },
    mask: (rng, s) => or(and(causal(), slidingWindow(9)), not(documents(packedIds(rng, s.batch, s.seqLen, 4)))),
    sinks: true,
  },
  {
    name: 'seqLen 70, headDim 200, causal, scale 0.2',
    shape: { batch: 1, seqLen: 70, qHeads: 2, kvHeads: 1, headDim: 200 },
    sinks: true,
    scale: 0.2,
    dLse: true,
  },
  {
    name: 'seqLen 65, headDim 256, or(prefix 2, window 8) without causality',
    shape: { batch: 1, seqLen: 65, qHeads: 2, kvHeads: 1, headDim: 256 },
    mask: () => or(prefix(2), slidingWindow(8)),
    sinks: true,
  },
  {
    name: 'fully masked rows (not causal), sinks, dLse',
    shape: { batch: 2, seqLen: 33, qHeads: 2, kvHeads: 2, headDim: 8 },
    mask: () => not(causal()),
    sinks: true,
    dLse: true,
  },
  {
    name: 'fully masked rows (causal and not window 4), no sinks',
    shape: { batch: 1, seqLen: 40, qHeads: 4, kvHeads: 2, headDim: 8 },
    mask: () => and(causal(), not(slidingWindow(4))),
    dLse: true,
  },
  {
    name: 'queries after a cache: kvLen 150, seqLen 40, queryOffset 110, window 64, GQA 4',
    shape: { batch: 2, seqLen: 40, qHeads: 4, kvHeads: 1, headDim: 24, kvLen: 150, queryOffset: 110 },
    mask: () => ({ window: 64 }),
    sinks: true,
    dLse: true,
  },
  {
    name: 'some sinks -Infinity, no mask at all, softcap 2',
    shape: { batch: 2, seqLen: 90, qHeads: 4, kvHeads: 4, headDim: 12 },
    mask: () => ({ causal: false }),
    sinks: 'some-inf',
    softcap: 2,
  },
];

/** Runs one case on `device` with Float32Arrays. */
function run(
  c: Case,
  x: ReturnType<typeof inputs>,
  sinks: Float32Array | null,
  dLse: Float32Array | undefined,
  mask: MaskSpec | undefined,
  impl: 'fused' | 'eager',
  device: 'cpu' | 'cuda',
  inputsOverride?: Float32Array[],
) {
  const [q, k, v, dOut] = inputsOverride ?? [x.q, x.k, x.v, x.dOut];
  const opts: AttentionOptions = { mask, scale: c.scale, softcap: c.softcap, impl, device };
  const f = sinkAttentionForward(q!, k!, v!, sinks, c.shape, opts);
  const g = sinkAttentionBackward(q!, k!, v!, sinks, f.out, f.lse, dOut!, c.shape, { ...opts, dLse });
  return { ...f, ...g };
}

t.test('CUDA kernels against the CPU kernels and the float64 reference', { skip: noGpu }, async (t) => {
  for (const [index, c] of CASES.entries()) {
    t.test(c.name, async (t) => {
      const s = c.shape;
      const x = inputs(s, 100 + index);
      let sinks: Float32Array | null = c.sinks ? x.sinks : null;
      if (c.sinks === 'some-inf') {
        sinks = Float32Array.from(x.sinks);
        sinks[1] = sinks[3] = -Infinity;
      }
      const dLse = c.dLse ? x.dLse : undefined;
      const mask = c.mask?.(x.rng, s);
      const refOpts = { mask, scale: c.scale, softcap: c.softcap };
      const ref = {
        ...refForward(x.q, x.k, x.v, sinks, s, refOpts),
        ...refBackward(x.q, x.k, x.v, sinks, x.dOut, s, refOpts, dLse),
      };
      const names = ['out', 'lse', 'dq', 'dk', 'dv', 'dSinks'] as const;
      for (const impl of ['fused', 'eager'] as const) {
        const cpu = run(c, x, sinks, dLse, mask, impl, 'cpu');
        const gpu = run(c, x, sinks, dLse, mask, impl, 'cuda');
        for (const name of names) {
          if (name === 'dSinks' && !sinks) {
            t.equal(gpu.dSinks, null);
            continue;
          }
          expectClose(t, gpu[name]!, ref[name]!, `${impl} ${name} vs float64 reference`);
          expectClose(t, gpu[name]!, cpu[name]!, `${impl} ${name} vs cpu`);
          if (Array.from(gpu[name]!).some(Number.isNaN)) t.fail(`${impl} ${name} has NaN`);
        }
        // DeviceTensors (fp32) run the same kernels in place
        const d = tensors(s, x, 'cuda', 'float32');
        const sinksT = sinks && toDevice(sinks, [s.qHeads], { device: 'cuda' });
        const opts: AttentionOptions = { mask, scale: c.scale, softcap: c.softcap, impl };
        const r = sinkAttentionForward(d.q, d.k, d.v, sinksT, s, opts);
        t.equal(r.out.device, 'cuda:0');
        const g = sinkAttentionBackward(d.q, d.k, d.v, sinksT, r.out, r.lse, d.dOut, s, { ...opts, dLse });
        t.same(
          [arr(r.out), arr(r.lse), arr(g.dq), arr(g.dk), arr(g.dv)],
          [gpu.out, gpu.lse, gpu.dq, gpu.dk, gpu.dv],
          `${impl} DeviceTensor results equal the Float32Array ones`,
        );
        // bf16 inputs: against the CPU on the rounded inputs, within 1e-2
        const rounded = [x.q, x.k, x.v, x.dOut].map(bf16Array);
        const cpuB = run(c, x, sinks, dLse, mask, impl, 'cpu', rounded);
        const b = tensors(s, x, 'cuda', 'bfloat16');
        const rb = sinkAttentionForward(b.q, b.k, b.v, sinks, s, opts);
        expectClose(t, arr(rb.out), cpuB.out, `${impl} bf16 out`, 1e-2);
        expectClose(t, arr(rb.lse), cpuB.lse, `${impl} bf16 lse`, 1e-2);
        const gb = sinkAttentionBackward(b.q, b.k, b.v, sinks, rb.out, rb.lse, b.dOut, s, { ...opts, dLse });
        expectClose(t, arr(gb.dq), cpuB.dq, `${impl} bf16 dq`, 1e-2);
        expectClose(t, arr(gb.dk), cpuB.dk, `${impl} bf16 dk`, 1e-2);
        expectClose(t, arr(gb.dv), cpuB.dv, `${impl} bf16 dv`, 1e-2);
        if (sinks) expectClose(t, arr(gb.dSinks!), cpuB.dSinks!, `${impl} bf16 dSinks`, 1e-2);
        dispose(d.q, d.k, d.v, d.dOut, sinksT, r.out, r.lse, g.dq, g.dk, g.dv, g.dSinks);
        dispose(b.q, b.k, b.v, b.dOut, rb.out, rb.lse, gb.dq, gb.dk, gb.dv, gb.dSinks);
      }
    });
  }
});

t.test(
  'CUDA: long sequences, block masks of other sizes, determinism, Promise variants',
  { skip: noGpu },
  async (t) => {
    const s = { batch: 1, seqLen: 1000, qHeads: 8, kvHeads: 1, headDim: 64 };
    const x = inputs(s, 7);
    const mask = { window: 128, prefix: 4 };
    const cpu = run({ name: '', shape: s }, x, x.sinks, x.dLse, mask, 'fused', 'cpu');
    const gpu = run({ name: '', shape: s }, x, x.sinks, x.dLse, mask, 'fused', 'cuda');
    for (const name of ['out', 'lse', 'dq', 'dk', 'dv', 'dSinks'] as const)
      expectClose(t, gpu[name]!, cpu[name]!, `seqLen 1000 ${name}`);
    const again = run({ name: '', shape: s }, x, x.sinks, x.dLse, mask, 'fused', 'cuda');
    t.same(
      [again.dq, again.dk, again.dv, again.dSinks],
      [gpu.dq, gpu.dk, gpu.dv, gpu.dSinks],
      'the backward is deterministic',
    );
    for (const blockSize of [32, 128]) {
      const bm = createBlockMask(mask, s, blockSize);
      const f = sinkAttentionForward(x.q, x.k, x.v, x.sinks, s, { blockMask: bm, device: 'cuda' });
      expectClose(t, f.out, gpu.out, `block mask of ${blockSize}: out`, 1e-6);
      const g = sinkAttentionBackward(x.q, x.k, x.v, x.sinks, f.out, f.lse, x.dOut, s, {
        blockMask: bm,
        device: 'cuda',
        dLse: x.dLse,
      });
      expectClose(t, g.dk, gpu.dk, `block mask of ${blockSize}: dk`, 1e-6);
    }
    const fa = await sinkAttentionForwardAsync(x.q, x.k, x.v, x.sinks, s, { mask, device: 'cuda' });
    t.same(fa.out, gpu.out, 'async forward');
    const ga = await sinkAttentionBackwardAsync(x.q, x.k, x.v, x.sinks, fa.out, fa.lse, x.dOut, s, {
      mask,
      device: 'cuda',
      dLse: x.dLse,
    });
    t.same(ga.dv, gpu.dv, 'async backward');
  },
);

t.test('CUDA: SinkAttention, memory, errors', { skip: noGpu }, async (t) => {
  const s = { batch: 1, seqLen: 300, qHeads: 4, kvHeads: 2, headDim: 64 };
  const x = inputs(s, 8);
  for (const impl of ['fused', 'eager'] as const) {
    const want = run({ name: '', shape: s }, x, x.sinks, undefined, { window: 50 }, impl, 'cpu');
    const layer = new SinkAttention(s, { impl, mask: { window: 50 }, device: 'cuda' });
    const r = layer.forward(x.q, x.k, x.v, x.sinks);
    const g = layer.backward(x.dOut);
    expectClose(t, r.out, want.out, `SinkAttention ${impl} out`);
    expectClose(t, g.dq, want.dq, `SinkAttention ${impl} dq`);
    const d = tensors(s, x, 'cuda', 'float32');
    const dl = new SinkAttention(s, { impl, mask: { window: 50 } });
    const before = memory.currentBytes('cuda');
    const rd = dl.forward(d.q, d.k, d.v, x.sinks);
    if (impl === 'eager')
      t.ok(memory.currentBytes('cuda') - before >= 4 * 300 * 301 * 4, 'eager probabilities kept on the device');
    const gd = dl.backward(d.dOut);
    expectClose(t, arr(gd.dk), want.dk, `SinkAttention ${impl} DeviceTensor dk`);
    dispose(d.q, d.k, d.v, d.dOut, rd.out, rd.lse, gd.dq, gd.dk, gd.dv, gd.dSinks);
  }

  // memory: eager materialises [B, Hq, T, T + 1], fused does not
  const m = { batch: 1, seqLen: 1024, qHeads: 8, kvHeads: 2, headDim: 64 };
  const y = inputs(m, 9);
  const d = tensors(m, y, 'cuda', 'bfloat16');
  const peaks: Record<string, number> = {};
  for (const impl of ['fused', 'eager'] as const) {
    memory.resetPeak('cuda');
    const base = memory.currentBytes('cuda');
    const r = sinkAttentionForward(d.q, d.k, d.v, y.sinks, m, { impl });
    const g = sinkAttentionBackward(d.q, d.k, d.v, y.sinks, r.out, r.lse, d.dOut, m, { impl });
    peaks[impl] = memory.peakBytes('cuda') - base;
    dispose(r.out, r.lse, g.dq, g.dk, g.dv, g.dSinks);
    t.equal(memory.currentBytes('cuda'), base, `${impl}: everything freed`);
  }
  t.ok(peaks.eager! > 3 * 8 * 1024 * 1025 * 4 && peaks.fused! < 8 * 1024 * 1025 * 4, `peaks: ${JSON.stringify(peaks)}`);
  const base = memory.currentBytes('cuda');
  let caught: unknown;
  try {
    memory.withLimit(
      base + 16 * 1024 * 1024,
      () => sinkAttentionForward(d.q, d.k, d.v, y.sinks, m, { impl: 'eager' }),
      'cuda',
    );
  } catch (e) {
    caught = e;
  }
  t.ok(isOutOfMemoryError(caught), 'eager past the tracked limit: OutOfMemoryError');
  t.equal(memory.currentBytes('cuda'), base, 'nothing leaked after the out-of-memory error');
  dispose(d.q, d.k, d.v, d.dOut);

  const wide = { batch: 1, seqLen: 20, qHeads: 1, kvHeads: 1, headDim: 300 };
  const w = inputs(wide, 10);
  t.throws(() => sinkAttentionForward(w.q, w.k, w.v, null, wide, { device: 'cuda' }), {
    name: 'RangeError',
    message: /headDim <= 256/,
  });
  const we = sinkAttentionForward(w.q, w.k, w.v, null, wide, { device: 'cuda', impl: 'eager' });
  expectClose(
    t,
    we.out,
    sinkAttentionForward(w.q, w.k, w.v, null, wide, { device: 'cpu' }).out,
    'eager takes headDim 300',
  );
  const c = tensors(
    { batch: 1, seqLen: 5, qHeads: 1, kvHeads: 1, headDim: 2 },
    inputs({ batch: 1, seqLen: 5, qHeads: 1, kvHeads: 1, headDim: 2 }, 11),
    'cpu',
    'float32',
  );
  const g2 = toDevice(new Float32Array(10), [10], { device: 'cuda' });
  t.throws(() => sinkAttentionForward(c.q, g2, c.v, null, { batch: 1, seqLen: 5, qHeads: 1, kvHeads: 1, headDim: 2 }), {
    name: 'RangeError',
    message: /k is on cuda:0, but q is on cpu/,
  });
  dispose(c.q, c.k, c.v, c.dOut, g2);
});
