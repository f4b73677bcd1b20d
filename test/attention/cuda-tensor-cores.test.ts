// The tensor-core sink-attention kernels (native/attention/cuda_fused_tc_*.cu: bf16 q/k/v on the
// CUDA device, headDim <= 128) against the float64 reference computed on the same bf16-rounded
// inputs. Stated bound: every output (out, lse, dq, dk, dv, dSinks) within 2^-7 in the metric of
// expectClose, |gpu - ref| <= 2^-7 (|ref| + max|ref|) — P and dS are rounded to bf16 before their
// products and the outputs are bf16, so an element carries a few bf16 roundings (2^-9 each)
// relative to its tensor's scale. Every mask kind, GQA, sinks (some -Infinity) and none, softcap,
// scale, dLse, odd lengths, queries after a cache, fully masked rows, headDim 64, 128 and padded
// ones (a multiple of 8 and not); the dispatch (SINKFLEX_ATTENTION_TENSOR_CORES=0 gives the
// fp32-arithmetic kernels' different bits; headDim > 128 and, on the emulator pretending
// compute capability 7.5, a GPU without bf16 tensor cores fall back to those kernels); a
// deterministic backward. The GQA cases cover both dk/dv schedules: whole groups per block, and
// (where the grid would be smaller than 4 blocks per multiprocessor — the emulator reports one)
// the group's heads split over blocks with fp32 partials summed in order. Runs on a GPU or on the CUDA emulator (npm run test:cuda-emulator, both
// thread orders); skipped with a visible reason otherwise.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';

import { type AttentionOptions } from '../../lib/attention/index.js';
import { loadAddon } from '../../lib/native/loader.js';
import { bf16Array, expectClose, refBackward, refForward } from './fixtures/reference.js';
import {
  CASES,
  NAMES,
  caseArgs,
  inputs,
  noCudaAttention,
  runCuda,
  same,
  withoutTensorCores,
} from './fixtures/tensor-core-cases.js';

const BOUND = 2 ** -7;

const noGpu = noCudaAttention();

t.test('tensor-core kernels against the float64 reference on bf16-rounded inputs', { skip: noGpu }, async (t) => {
  for (const [index, c] of CASES.entries()) {
    t.test(c.name, async (t) => {
      const { s, x, sinks, dLse, opts } = caseArgs(c, index);
      const [q, k, v, dOut] = [x.q, x.k, x.v, x.dOut].map(bf16Array) as [
        Float32Array,
        Float32Array,
        Float32Array,
        Float32Array,
      ];
      const ref = { ...refForward(q, k, v, sinks, s, opts), ...refBackward(q, k, v, sinks, dOut, s, opts, dLse) };
      const tc = runCuda(s, x, sinks, opts, dLse);
      for (const name of NAMES) {
        if (name === 'dSinks' && !sinks) {
          t.equal(tc.dSinks, null);
          continue;
        }
        expectClose(t, tc[name]!, ref[name]!, `${name} vs float64 reference`, BOUND);
      }
      // the bf16 results are bf16 numbers
      t.ok(
        same(tc.out, bf16Array(tc.out)) && same(tc.dq, bf16Array(tc.dq)) && same(tc.dk, bf16Array(tc.dk)),
        'bf16 outputs',
      );
      // the tensor-core path ran: the fp32-arithmetic kernels give other bits (and also pass)
      const fp = withoutTensorCores(() => runCuda(s, x, sinks, opts, dLse));
      t.notOk(
        same(tc.out, fp.out) && same(tc.dq, fp.dq) && same(tc.dk, fp.dk) && same(tc.dv, fp.dv),
        'SINKFLEX_ATTENTION_TENSOR_CORES=0 runs other kernels',
      );
      expectClose(t, fp.out, ref.out, 'fp32-arithmetic kernels: out', BOUND);
    });
  }
});

t.test(
  'tensor-core backward is deterministic; headDim > 128 falls back to the fp32-arithmetic kernels',
  { skip: noGpu },
  async (t) => {
    const s = { batch: 1, seqLen: 70, qHeads: 4, kvHeads: 2, headDim: 64 };
    const x = inputs(s, 400);
    const opts: AttentionOptions = { mask: { window: 20 } };
    const a = runCuda(s, x, x.sinks, opts, x.dLse);
    const b = runCuda(s, x, x.sinks, opts, x.dLse);
    for (const name of NAMES) t.ok(same(a[name]!, b[name]!), `${name}: the same bits twice`);

    const w = { batch: 1, seqLen: 20, qHeads: 2, kvHeads: 1, headDim: 136 };
    const y = inputs(w, 401);
    const wide = runCuda(w, y, y.sinks, {}, undefined);
    const fp = withoutTensorCores(() => runCuda(w, y, y.sinks, {}, undefined));
    for (const name of NAMES)
      t.ok(same(wide[name]!, fp[name]!), `headDim 136 ${name}: the fp32-arithmetic kernels' bits`);
    const [q, k, v, dOut] = [y.q, y.k, y.v, y.dOut].map(bf16Array) as [
      Float32Array,
      Float32Array,
      Float32Array,
      Float32Array,
    ];
    expectClose(t, wide.dq, refBackward(q, k, v, y.sinks, dOut, w).dq, 'headDim 136 dq vs float64 reference', BOUND);
  },
);

const onEmulator = /emulator/.test(
  loadAddon()
    .backends()
    .find((b) => b.name === 'cuda')?.deviceName ?? '',
);

t.test(
  'a GPU without bf16 tensor cores runs the fp32-arithmetic kernels and says so once',
  {
    skip: noGpu || (!onEmulator ? 'needs the CUDA emulator (SFX_EMU_CC pretends compute capability 7.5)' : false),
  },
  async (t) => {
    const s = { batch: 1, seqLen: 20, qHeads: 2, kvHeads: 1, headDim: 64 };
    const x = inputs(s, 402);
    const want = withoutTensorCores(() => runCuda(s, x, x.sinks, { mask: { window: 7 } }, undefined));
    const script = `
    const a = await import(${JSON.stringify(new URL('../../lib/attention/index.ts', import.meta.url).href)});
    const n = await import(${JSON.stringify(new URL('../../lib/native/index.ts', import.meta.url).href)});
    const { Rng } = await import(${JSON.stringify(new URL('./fixtures/reference.ts', import.meta.url).href)});
    const rng = new Rng(402);  // the inputs() of the parent: q, k, v, dOut, sinks
    const x = { q: rng.floats(2560), k: rng.floats(1280), v: rng.floats(1280), dOut: rng.floats(2560), sinks: rng.floats(2, 1.5) };
    const s = ${JSON.stringify(s)};
    const o = { device: 'cuda', dtype: 'bfloat16' };
    const res = [];
    for (let r = 0; r < 2; r++) {
      const q = n.toDevice(Float32Array.from(x.q), [1, 20, 2, 64], o), k = n.toDevice(Float32Array.from(x.k), [1, 20, 1, 64], o);
      const v = n.toDevice(Float32Array.from(x.v), [1, 20, 1, 64], o), dOut = n.toDevice(Float32Array.from(x.dOut), [1, 20, 2, 64], o);
      const sinks = Float32Array.from(x.sinks);
      const f = a.sinkAttentionForward(q, k, v, sinks, s, { mask: { window: 7 } });
      const g = a.sinkAttentionBackward(q, k, v, sinks, f.out, f.lse, dOut, s, { mask: { window: 7 } });
      res.push([f.out, f.lse, g.dq, g.dk, g.dv, g.dSinks].map((y) => Array.from(y.toArray())));
    }
    console.log(JSON.stringify(res));`;
    const r = spawnSync(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], {
      env: { ...process.env, SFX_EMU_CC: '7.5' },
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      encoding: 'utf8',
    });
    t.equal(r.status, 0, r.stderr);
    const runs = JSON.parse(r.stdout.trim().split('\n').pop()!) as number[][][];
    for (const run of runs) {
      NAMES.forEach((name, i) =>
        t.same(run[i], Array.from(want[name]!), `${name}: the fp32-arithmetic kernels' values`),
      );
    }
    const notes = r.stderr.split('\n').filter((l) => l.includes('bf16/fp16 CUDA attention without tensor cores'));
    t.equal(notes.length, 1, 'said once');
    t.match(notes[0], /older than sm_80/, 'with the reason');
  },
);
