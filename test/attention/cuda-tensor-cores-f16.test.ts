// Sink attention on float16 DeviceTensors: on 'cpu' tensors the CPU kernels over the widened
// inputs, results rounded to float16; on CUDA the tensor-core kernels with fp16 mma (q/k/v, P and
// dS as fp16 operands, fp32 statistics and accumulators) against the float64 reference computed
// on the same fp16-rounded inputs (rounded here by the definition: fixtures' f16). Stated bound:
// every output within 2^-10 in the metric of expectClose, |gpu - ref| <= 2^-10 (|ref| + max|ref|)
// — the outputs, P and dS carry fp16 roundings (2^-12 each) where bf16 has 2^-9, so the bound is
// 8 times bf16's 2^-7. The same cases as the bf16 test (every mask kind, GQA, sinks, softcap,
// scale, dLse, queries after a cache, fully masked rows, padded head dims); the fp32-arithmetic
// kernels (SINKFLEX_ATTENTION_TENSOR_CORES=0) and the eager path on fp16 give other bits within
// the same bound; mixing float16 with bfloat16 tensors is refused. Runs on a GPU or on the CUDA
// emulator (npm run test:cuda-emulator, both thread orders); the 'cpu' parts run everywhere.
import t from 'tap';

import { sinkAttentionBackward, sinkAttentionForward, type AttentionOptions } from '../../lib/attention/index.js';
import { toDevice } from '../../lib/native/index.js';
import { bf16Array, expectClose, f16Array, refBackward, refForward } from './fixtures/reference.js';
import {
  CASES,
  NAMES,
  caseArgs,
  dispose,
  inputs,
  noCudaAttention,
  runCuda,
  same,
  withoutTensorCores,
} from './fixtures/tensor-core-cases.js';

const BOUND = 2 ** -10;

const noGpu = noCudaAttention();

/** The float64 reference of every result on fp16-rounded q, k, v, dOut. */
function reference(
  s: (typeof CASES)[number]['shape'],
  x: ReturnType<typeof inputs>,
  sinks: Float32Array | null,
  opts: AttentionOptions,
  dLse: Float32Array | undefined,
) {
  const [q, k, v, dOut] = [x.q, x.k, x.v, x.dOut].map(f16Array) as [
    Float32Array,
    Float32Array,
    Float32Array,
    Float32Array,
  ];
  return { ...refForward(q, k, v, sinks, s, opts), ...refBackward(q, k, v, sinks, dOut, s, opts, dLse) };
}

t.test("float16 'cpu' DeviceTensors: the CPU kernels on the widened inputs, float16 results", async (t) => {
  const s = { batch: 1, seqLen: 37, qHeads: 4, kvHeads: 2, headDim: 24 };
  const x = inputs(s, 500);
  const opts: AttentionOptions = { mask: { window: 11 } };
  const o = { device: 'cpu' as const, dtype: 'float16' as const };
  const q = toDevice(x.q, [1, 37, 4, 24], o),
    k = toDevice(x.k, [1, 37, 2, 24], o),
    v = toDevice(x.v, [1, 37, 2, 24], o),
    dOut = toDevice(x.dOut, [1, 37, 4, 24], o);
  t.equal(q.dtype, 'float16');
  t.equal(q.bytes, 2 * q.size, 'two bytes an element');
  t.ok(same(q.toArray(), f16Array(x.q)), 'toDevice rounds to float16 as the definition does');
  const f = sinkAttentionForward(q, k, v, x.sinks, s, opts);
  const g = sinkAttentionBackward(q, k, v, x.sinks, f.out, f.lse, dOut, s, opts);
  t.equal(f.out.dtype, 'float16', 'out in the inputs’ dtype');
  t.equal(f.lse.dtype, 'float32', 'lse float32');
  t.equal(g.dq.dtype, 'float16', 'dq in the inputs’ dtype');
  const ref = reference(s, x, x.sinks, opts, undefined);
  expectClose(t, f.out.toArray(), ref.out, 'out vs float64 reference', BOUND);
  expectClose(t, f.lse.toArray(), ref.lse, 'lse vs float64 reference', 1e-5);
  for (const name of ['dq', 'dk', 'dv'] as const)
    expectClose(t, g[name].toArray(), ref[name], `${name} vs float64 reference`, BOUND);
  t.ok(same(f.out.toArray(), f16Array(f.out.toArray())), 'out holds float16 numbers');

  const kb = toDevice(x.k, [1, 37, 2, 24], { device: 'cpu', dtype: 'bfloat16' });
  t.throws(() => sinkAttentionForward(q, kb, v, x.sinks, s, opts), {
    name: 'TypeError',
    message: /k is bfloat16, but q is float16/,
  });
  dispose(q, k, v, dOut, kb, f.out, f.lse, g.dq, g.dk, g.dv, g.dSinks);
});

t.test(
  'tensor-core kernels on float16 against the float64 reference on fp16-rounded inputs',
  { skip: noGpu },
  async (t) => {
    let worst16 = 0,
      worst = 0;
    for (const [index, c] of CASES.entries()) {
      t.test(c.name, async (t) => {
        const { s, x, sinks, dLse, opts } = caseArgs(c, index);
        const ref = reference(s, x, sinks, opts, dLse);
        const tc = runCuda(s, x, sinks, opts, dLse, 'float16');
        for (const name of NAMES) {
          if (name === 'dSinks' && !sinks) {
            t.equal(tc.dSinks, null);
            continue;
          }
          expectClose(t, tc[name]!, ref[name]!, `${name} vs float64 reference`, BOUND);
        }
        t.ok(
          same(tc.out, f16Array(tc.out)) && same(tc.dq, f16Array(tc.dq)) && same(tc.dk, f16Array(tc.dk)),
          'float16 outputs',
        );
        t.notOk(same(tc.out, bf16Array(tc.out)), 'not bfloat16 numbers (the fp16 path ran)');
        const fp = withoutTensorCores(() => runCuda(s, x, sinks, opts, dLse, 'float16'));
        t.notOk(
          same(tc.out, fp.out) && same(tc.dq, fp.dq) && same(tc.dk, fp.dk) && same(tc.dv, fp.dv),
          'SINKFLEX_ATTENTION_TENSOR_CORES=0 runs other kernels',
        );
        expectClose(t, fp.out, ref.out, 'fp32-arithmetic kernels: out', BOUND);
        expectClose(t, fp.dq, ref.dq, 'fp32-arithmetic kernels: dq', BOUND);
        // fp16 against bf16 on the same case: the error of out relative to its scale
        const rel = (a: Float32Array, b: Float64Array | Float32Array) => {
          let e = 0,
            m = 0;
          for (let i = 0; i < b.length; i++) {
            e = Math.max(e, Math.abs(a[i]! - b[i]!));
            m = Math.max(m, Math.abs(b[i]!));
          }
          return e / (m || 1);
        };
        const bf = runCuda(s, x, sinks, opts, dLse, 'bfloat16');
        const [qb, kb, vb] = [x.q, x.k, x.v].map(bf16Array) as [Float32Array, Float32Array, Float32Array];
        worst16 = Math.max(worst16, rel(tc.out, ref.out));
        worst = Math.max(worst, rel(bf.out, refForward(qb, kb, vb, sinks, s, opts).out));
      });
    }
    t.test('float16 against bfloat16', async (t) => {
      t.comment(
        `out vs float64, worst of the cases: float16 ${worst16.toExponential(2)}, bfloat16 ${worst.toExponential(2)}`,
      );
      t.ok(worst16 < worst, 'float16 inputs give the closer out');
    });
  },
);

t.test('eager attention on float16 CUDA tensors: fp32 copies, float16 results', { skip: noGpu }, async (t) => {
  const s = { batch: 2, seqLen: 29, qHeads: 2, kvHeads: 1, headDim: 16 };
  const x = inputs(s, 510);
  const opts: AttentionOptions = { mask: { window: 6 }, impl: 'eager' };
  const tc = runCuda(s, x, x.sinks, opts, x.dLse, 'float16');
  const ref = reference(s, x, x.sinks, opts, x.dLse);
  for (const name of NAMES) expectClose(t, tc[name]!, ref[name]!, `eager ${name} vs float64 reference`, BOUND);
  t.ok(same(tc.dv, f16Array(tc.dv)), 'float16 outputs');
});
