// The API around the kernels: Promise variants, the SinkAttention helper, tracked memory of
// eager vs fused, out-of-memory handling, determinism (also across thread counts), vector code
// and tile-size independence, device selection.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import t from 'tap';

import { resolveAttentionDevice } from '../../lib/attention/functional.js';
import {
  SinkAttention,
  attentionInfo,
  createBlockMask,
  sinkAttentionBackward,
  sinkAttentionBackwardAsync,
  sinkAttentionForward,
  sinkAttentionForwardAsync,
  type AttentionShape,
} from '../../lib/attention/index.js';
import { DeviceUnavailableError, OutOfMemoryError, memory } from '../../lib/native/index.js';
import { Rng, expectClose, packedIds } from './fixtures/reference.js';

// These tests are about the CPU kernels: with a CUDA build on a GPU machine `'auto'` would pick
// the GPU (test/attention/cuda.test.ts covers that), so the default device is pinned to the cpu.
process.env.SINKFLEX_DEVICE = 'cpu';

function inputs(shape: AttentionShape, seed: number) {
  const rng = new Rng(seed);
  const kvLen = shape.kvLen ?? shape.seqLen;
  return {
    q: rng.floats(shape.batch * shape.seqLen * shape.qHeads * shape.headDim),
    k: rng.floats(shape.batch * kvLen * shape.kvHeads * shape.headDim),
    v: rng.floats(shape.batch * kvLen * shape.kvHeads * shape.headDim),
    sinks: rng.floats(shape.qHeads),
    dOut: rng.floats(shape.batch * shape.seqLen * shape.qHeads * shape.headDim),
    rng,
  };
}

const gc = (globalThis as { gc?: () => void }).gc;

t.test('Promise variants give the same results as the synchronous calls', async (t) => {
  const shape = { batch: 2, seqLen: 70, qHeads: 4, kvHeads: 1, headDim: 20 };
  const x = inputs(shape, 1);
  for (const impl of ['fused', 'eager'] as const) {
    const opts = { mask: { window: 9, prefix: 1 }, impl };
    const a = sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, opts);
    const pending = sinkAttentionForwardAsync(x.q, x.k, x.v, x.sinks, shape, opts);
    t.ok(pending instanceof Promise);
    const b = await pending;
    t.same(b.out, a.out, `${impl} async out`);
    t.same(b.lse, a.lse, `${impl} async lse`);
    const ga = sinkAttentionBackward(x.q, x.k, x.v, x.sinks, a.out, a.lse, x.dOut, shape, opts);
    const gb = await sinkAttentionBackwardAsync(x.q, x.k, x.v, x.sinks, a.out, a.lse, x.dOut, shape, opts);
    t.same(gb, ga, `${impl} async gradients`);
  }
  await t.rejects(
    sinkAttentionForwardAsync(x.q, x.k, x.v, x.sinks, { ...shape, qHeads: 3 }),
    RangeError,
    'validation errors reject',
  );
  await t.rejects(sinkAttentionBackwardAsync(x.q, x.k, x.v, x.sinks, x.q, x.q, x.dOut, shape), RangeError);
  // several at once (they share the kernel thread pool)
  const all = await Promise.all([1, 2, 3].map(() => sinkAttentionForwardAsync(x.q, x.k, x.v, x.sinks, shape)));
  for (const r of all) t.same(r.out, all[0]!.out);
});

t.test('SinkAttention keeps what the backward needs', async (t) => {
  const shape = { batch: 1, seqLen: 50, qHeads: 2, kvHeads: 2, headDim: 8 };
  const x = inputs(shape, 2);
  const dLse = x.rng.floats(100);
  for (const impl of ['fused', 'eager'] as const) {
    const mask = { window: 12 };
    const layer = new SinkAttention(shape, { mask, impl, backwardSplit: 'groups' });
    t.equal(layer.blockMask === undefined, impl === 'eager', `${impl} block mask built once for fused`);
    t.notOk(layer.hasSaved);
    const r = layer.forward(x.q, x.k, x.v, x.sinks);
    t.ok(layer.hasSaved);
    const ref = sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, { mask, impl });
    t.same(r.out, ref.out, `${impl} forward`);
    const g = layer.backward(x.dOut, { dLse, retain: true });
    const refG = sinkAttentionBackward(x.q, x.k, x.v, x.sinks, ref.out, ref.lse, x.dOut, shape, { mask, impl, dLse });
    expectClose(t, g.dq, refG.dq, `${impl} dq`, 1e-6);
    expectClose(t, g.dk, refG.dk, `${impl} dk`, 1e-6);
    expectClose(t, g.dSinks!, refG.dSinks!, `${impl} dSinks`, 1e-6);
    t.ok(layer.hasSaved, 'retain keeps the state');
    const g2 = layer.backward(x.dOut, { dLse });
    t.same(g2.dq, g.dq, 'a second backward gives the same gradients');
    t.notOk(layer.hasSaved, 'released after the backward');
    t.throws(() => layer.backward(x.dOut), /needs a forward first/);
    const ra = await layer.forwardAsync(x.q, x.k, x.v, x.sinks);
    t.same(ra.out, r.out, `${impl} forwardAsync`);
    const ga = await layer.backwardAsync(x.dOut, { dLse });
    t.same(ga.dq, g.dq, `${impl} backwardAsync`);
    layer.forward(x.q, x.k, x.v);
    const noSink = layer.backward(x.dOut);
    t.equal(noSink.dSinks, null, 'no sinks: dSinks null');
    layer.release();
    layer.release();
  }
});

t.test('eager memory grows with seqLen^2 in the tracked allocator, fused memory does not', async (t) => {
  const shape = { batch: 1, seqLen: 600, qHeads: 4, kvHeads: 2, headDim: 16 };
  const x = inputs(shape, 3);
  const tensor = 4 * shape.batch * shape.qHeads * shape.seqLen * (shape.seqLen + 1);
  const io = 4 * (x.q.length * 2 + x.k.length * 2 + 4 * shape.seqLen);
  const peakOf = (fn: () => void) => {
    gc?.();
    memory.resetPeak();
    const base = memory.currentBytes();
    fn();
    return memory.peakBytes() - base;
  };
  const eagerFwd = peakOf(() => sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, { impl: 'eager' }));
  t.ok(eagerFwd >= 2 * tensor, `eager forward holds scores and probabilities (${eagerFwd} >= ${2 * tensor})`);
  const f = sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape);
  const eagerBwd = peakOf(() =>
    sinkAttentionBackward(x.q, x.k, x.v, x.sinks, f.out, f.lse, x.dOut, shape, { impl: 'eager' }),
  );
  t.ok(eagerBwd >= 3 * tensor, `eager backward holds P, dP and dS (${eagerBwd} >= ${3 * tensor})`);
  const fusedFwd = peakOf(() => sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape));
  const fusedBwd = peakOf(() => sinkAttentionBackward(x.q, x.k, x.v, x.sinks, f.out, f.lse, x.dOut, shape));
  const small = io + 2 * 1024 * 1024; // outputs, packed keys/values and per-thread tiles
  t.ok(fusedFwd < small && fusedFwd < tensor / 4, `fused forward stays small (${fusedFwd})`);
  t.ok(fusedBwd < small && fusedBwd < tensor / 4, `fused backward stays small (${fusedBwd})`);

  const layer = new SinkAttention(shape, { impl: 'eager' });
  gc?.();
  const before = memory.currentBytes();
  layer.forward(x.q, x.k, x.v, x.sinks);
  t.ok(
    memory.currentBytes() - before >= tensor,
    'SinkAttention (eager) keeps the probabilities between forward and backward',
  );
  layer.release();
  t.ok(memory.currentBytes() - before < tensor, 'release frees them at once');
});

t.test('out of memory under a tracked limit is a catchable error', async (t) => {
  const shape = { batch: 1, seqLen: 500, qHeads: 4, kvHeads: 1, headDim: 8 };
  const x = inputs(shape, 4);
  gc?.();
  const limit = memory.currentBytes() + 2_000_000;
  let caught: unknown;
  memory.withLimit(limit, () => {
    try {
      sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, { impl: 'eager' });
    } catch (e) {
      caught = e;
    }
    const ok = sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape);
    t.equal(ok.out.length, x.q.length, 'fused fits under the same limit');
  });
  t.ok(caught instanceof OutOfMemoryError, 'eager runs out of memory');
  t.match((caught as Error).message, /eager attention/);
  const previous = memory.limitBytes();
  memory.setLimit(memory.currentBytes() + 1000);
  try {
    await t.rejects(
      sinkAttentionForwardAsync(x.q, x.k, x.v, x.sinks, shape, { impl: 'eager' }),
      OutOfMemoryError,
      'async calls reject with it',
    );
  } finally {
    memory.setLimit(previous);
  }
});

t.test('results are deterministic, also across thread counts', async (t) => {
  const shape = { batch: 2, seqLen: 150, qHeads: 4, kvHeads: 2, headDim: 24 };
  const x = inputs(shape, 5);
  const mask = { window: 40, documentIds: packedIds(x.rng, 2, 150, 3) };
  const a = sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, { mask });
  const b = sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, { mask });
  t.same(b.out, a.out, 'same inputs, same bits');
  const digest = (arrays: Float32Array[]) => {
    let h = 0;
    for (const arr of arrays)
      for (const w of new Uint32Array(arr.buffer, arr.byteOffset, arr.length)) h = (Math.imul(h, 31) + w) >>> 0;
    return h;
  };
  const split = (s: 'blocks' | 'groups') => {
    const g = sinkAttentionBackward(x.q, x.k, x.v, x.sinks, a.out, a.lse, x.dOut, shape, { mask, backwardSplit: s });
    return digest([a.out, a.lse, g.dq, g.dk, g.dv, g.dSinks!]);
  };
  const here = [split('blocks'), split('groups')];
  // the same computation in a process with one kernel thread
  const script = `
    const m = await import(${JSON.stringify(new URL('../../lib/index.ts', import.meta.url).href)});
    const ref = await import(${JSON.stringify(new URL('./fixtures/reference.ts', import.meta.url).href)});
    const shape = ${JSON.stringify(shape)};
    const rng = new ref.Rng(5);
    const x = { q: rng.floats(${a.out.length}), k: rng.floats(${x.k.length}), v: rng.floats(${x.v.length}), sinks: rng.floats(4), dOut: rng.floats(${a.out.length}) };
    const mask = { window: 40, documentIds: ref.packedIds(rng, 2, 150, 3) };
    const a = m.sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, { mask });
    const digest = ${digest.toString()};
    const out = ['blocks', 'groups'].map((s) => {
      const g = m.sinkAttentionBackward(x.q, x.k, x.v, x.sinks, a.out, a.lse, x.dOut, shape, { mask, backwardSplit: s });
      return digest([a.out, a.lse, g.dq, g.dk, g.dv, g.dSinks]);
    });
    console.log(JSON.stringify(out));`;
  const child = spawnSync(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], {
    env: { ...process.env, SINKFLEX_NUM_THREADS: '1' },
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    encoding: 'utf8',
  });
  t.equal(child.status, 0, child.stderr);
  t.same(JSON.parse(child.stdout.trim().split('\n').pop()!), here, 'one thread gives the same bits');
});

t.test('every CPU vector code and tile size gives the same results', async (t) => {
  const info = attentionInfo();
  t.ok(info.isas.includes('generic') && info.isas.includes(info.isa));
  t.equal(info.defaultBlockSize, 64);
  t.equal(info.maxHeadDim, 1024);
  t.equal(typeof info.cudaKernels, 'boolean');
  const shape = { batch: 1, seqLen: 300, qHeads: 2, kvHeads: 1, headDim: 40 };
  const x = inputs(shape, 6);
  const mask = { window: 100, prefix: 3 };
  const base = sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, { mask, cpuKernel: 'generic', blockSize: 64 });
  const gBase = sinkAttentionBackward(x.q, x.k, x.v, x.sinks, base.out, base.lse, x.dOut, shape, {
    mask,
    cpuKernel: 'generic',
  });
  for (const cpuKernel of info.isas as ('avx512' | 'avx2' | 'generic')[]) {
    for (const blockSize of [16, 48, 128, 256]) {
      const r = sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, { mask, cpuKernel, blockSize });
      expectClose(t, r.out, base.out, `${cpuKernel} block ${blockSize} out`, 1e-6);
      const g = sinkAttentionBackward(x.q, x.k, x.v, x.sinks, r.out, r.lse, x.dOut, shape, {
        mask,
        cpuKernel,
        blockSize,
      });
      expectClose(t, g.dk, gBase.dk, `${cpuKernel} block ${blockSize} dk`, 1e-6);
    }
  }
  const bm = createBlockMask(mask, shape, 32);
  const viaMask = sinkAttentionForward(x.q, x.k, x.v, x.sinks, shape, { blockMask: bm });
  expectClose(t, viaMask.out, base.out, 'block mask of 32', 1e-6);
});

t.test('device selection', async (t) => {
  t.equal(resolveAttentionDevice('cpu'), 'cpu');
  if (!attentionInfo().cudaKernels) {
    t.equal(resolveAttentionDevice('auto'), 'cpu', 'auto stays on the cpu without CUDA attention kernels');
    t.throws(() => resolveAttentionDevice('cuda'), DeviceUnavailableError);
  }
  const saved = process.env.SINKFLEX_DEVICE;
  process.env.SINKFLEX_DEVICE = 'cpu';
  t.equal(resolveAttentionDevice(), 'cpu');
  if (saved === undefined) delete process.env.SINKFLEX_DEVICE;
  else process.env.SINKFLEX_DEVICE = saved;
});
