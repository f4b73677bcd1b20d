// Every bad argument throws a TypeError (wrong type) or RangeError (wrong value or length)
// naming the argument — through the typed API and through the raw addon — and the process
// keeps working afterwards.
import t, { type Test } from 'tap';

import {
  SinkAttention,
  attentionInfo,
  createBlockMask,
  createMask,
  sinkAttentionBackward,
  sinkAttentionForward,
  type AttentionShape,
} from '../../lib/attention/index.js';
import { DeviceUnavailableError, cudaAvailable } from '../../lib/native/index.js';
import { loadAddon } from '../../lib/native/loader.js';
import { Rng } from './fixtures/reference.js';

// These tests are about the CPU kernels: with a CUDA build on a GPU machine `'auto'` would pick
// the GPU (test/attention/cuda.test.ts covers that), so the default device is pinned to the cpu.
process.env.SINKFLEX_DEVICE = 'cpu';

const shape: AttentionShape = { batch: 2, seqLen: 5, qHeads: 4, kvHeads: 2, headDim: 3 };
const rng = new Rng(3);
const q = rng.floats(2 * 5 * 4 * 3);
const k = rng.floats(2 * 5 * 2 * 3);
const v = rng.floats(2 * 5 * 2 * 3);
const sinks = rng.floats(4);
const fwd = sinkAttentionForward(q, k, v, sinks, shape);
const dOut = rng.floats(q.length);

type Call = () => unknown;
const bad = (t: Test, name: string, call: Call, type: 'TypeError' | 'RangeError', message: RegExp) =>
  t.throws(call, { name: type, message }, name);

t.test('tensor arguments', async (t) => {
  bad(
    t,
    'q not typed',
    () => sinkAttentionForward([1] as unknown as Float32Array, k, v, sinks, shape),
    'TypeError',
    /^q must be a Float32Array, got an Array/,
  );
  bad(
    t,
    'q Float64Array',
    () => sinkAttentionForward(new Float64Array(120) as unknown as Float32Array, k, v, sinks, shape),
    'TypeError',
    /q must be a Float32Array, got Float64Array/,
  );
  bad(
    t,
    'q length',
    () => sinkAttentionForward(q.subarray(1), k, v, sinks, shape),
    'RangeError',
    /^q has length 119, expected 120/,
  );
  bad(t, 'k length', () => sinkAttentionForward(q, q, v, sinks, shape), 'RangeError', /^k has length 120, expected 60/);
  bad(
    t,
    'v length',
    () => sinkAttentionForward(q, k, k.subarray(2), sinks, shape),
    'RangeError',
    /^v has length 58, expected 60/,
  );
  bad(
    t,
    'sinks length',
    () => sinkAttentionForward(q, k, v, sinks.subarray(1), shape),
    'RangeError',
    /^sinks has length 3, expected 4/,
  );
  bad(
    t,
    'sinks type',
    () => sinkAttentionForward(q, k, v, [1, 2, 3, 4] as unknown as Float32Array, shape),
    'TypeError',
    /^sinks must be a Float32Array/,
  );
  bad(
    t,
    'sinks NaN',
    () => sinkAttentionForward(q, k, v, Float32Array.from([0, NaN, 0, 0]), shape),
    'RangeError',
    /sinks\[1\] must be finite/,
  );
  bad(
    t,
    'sinks +Infinity',
    () => sinkAttentionForward(q, k, v, Float32Array.from([0, 0, Infinity, 0]), shape),
    'RangeError',
    /sinks\[2\]/,
  );
  bad(
    t,
    'out length',
    () => sinkAttentionBackward(q, k, v, sinks, fwd.out.subarray(3), fwd.lse, dOut, shape),
    'RangeError',
    /^out has length 117, expected 120/,
  );
  bad(
    t,
    'lse length',
    () => sinkAttentionBackward(q, k, v, sinks, fwd.out, fwd.lse.subarray(1), dOut, shape),
    'RangeError',
    /^lse has length 39, expected 40/,
  );
  bad(
    t,
    'dOut length',
    () => sinkAttentionBackward(q, k, v, sinks, fwd.out, fwd.lse, k, shape),
    'RangeError',
    /^dOut has length 60, expected 120/,
  );
  bad(
    t,
    'dOut type',
    () => sinkAttentionBackward(q, k, v, sinks, fwd.out, fwd.lse, null as unknown as Float32Array, shape),
    'TypeError',
    /^dOut must be a Float32Array, got null/,
  );
  bad(
    t,
    'dLse length',
    () => sinkAttentionBackward(q, k, v, sinks, fwd.out, fwd.lse, dOut, shape, { dLse: new Float32Array(3) }),
    'RangeError',
    /^opts.dLse has length 3, expected 40/,
  );
});

t.test('shapes', async (t) => {
  const s = (over: Record<string, unknown>) => ({ ...shape, ...over }) as AttentionShape;
  bad(
    t,
    'shape missing',
    () => sinkAttentionForward(q, k, v, sinks, undefined as unknown as AttentionShape),
    'TypeError',
    /shape must be an object/,
  );
  bad(
    t,
    'batch missing',
    () => sinkAttentionForward(q, k, v, sinks, s({ batch: undefined })),
    'TypeError',
    /shape.batch must be an integer, got undefined/,
  );
  bad(
    t,
    'seqLen 0',
    () => sinkAttentionForward(q, k, v, sinks, s({ seqLen: 0 })),
    'RangeError',
    /shape.seqLen must be in \[1,/,
  );
  bad(
    t,
    'headDim fraction',
    () => sinkAttentionForward(q, k, v, sinks, s({ headDim: 1.5 })),
    'RangeError',
    /shape.headDim must be an integer/,
  );
  bad(
    t,
    'headDim too big',
    () => sinkAttentionForward(q, k, v, sinks, s({ headDim: 2048 })),
    'RangeError',
    /shape.headDim must be in \[1, 1024\]/,
  );
  bad(
    t,
    'negative heads',
    () => sinkAttentionForward(q, k, v, sinks, s({ kvHeads: -2 })),
    'RangeError',
    /shape.kvHeads/,
  );
  bad(
    t,
    'qHeads % kvHeads',
    () => sinkAttentionForward(q, k, v, sinks, s({ qHeads: 3 })),
    'RangeError',
    /shape.qHeads \(3\) must be a multiple of shape.kvHeads \(2\)/,
  );
  bad(
    t,
    'heads as string',
    () => sinkAttentionForward(q, k, v, sinks, s({ qHeads: '4' })),
    'TypeError',
    /shape.qHeads must be an integer, got a string/,
  );
  bad(
    t,
    'unknown field',
    () => sinkAttentionForward(q, k, v, sinks, s({ seqlen: 5 })),
    'RangeError',
    /shape has an unknown field 'seqlen'/,
  );
  bad(
    t,
    'negative queryOffset',
    () => sinkAttentionForward(q, k, v, sinks, s({ queryOffset: -1 })),
    'RangeError',
    /shape.queryOffset/,
  );
  bad(t, 'kvLen 0', () => sinkAttentionForward(q, k, v, sinks, s({ kvLen: 0 })), 'RangeError', /shape.kvLen/);
});

t.test('masks', async (t) => {
  const f = (mask: unknown) => () => sinkAttentionForward(q, k, v, sinks, shape, { mask: mask as never });
  bad(t, 'negative window', f({ window: -1 }), 'RangeError', /opts.mask.window must be in \[0,/);
  bad(t, 'fractional window', f({ window: 2.5 }), 'RangeError', /opts.mask.window must be an integer/);
  bad(t, 'window string', f({ window: '3' }), 'TypeError', /opts.mask.window must be an integer, got a string/);
  bad(t, 'negative prefix', f({ prefix: -4 }), 'RangeError', /opts.mask.prefix/);
  bad(t, 'causal not boolean', f({ causal: 1 }), 'TypeError', /opts.mask.causal must be a boolean/);
  bad(
    t,
    'documentIds length',
    f({ documentIds: new Int32Array(9) }),
    'RangeError',
    /opts.mask.documentIds has length 9, expected 10/,
  );
  bad(
    t,
    'documentIds type',
    f({ documentIds: new Float32Array(10) }),
    'TypeError',
    /opts.mask.documentIds must be an Int32Array, got Float32Array/,
  );
  bad(t, 'unknown mask field', f({ windw: 3 }), 'RangeError', /opts.mask has an unknown field 'windw'/);
  bad(t, 'mask not object', f(5), 'TypeError', /opts.mask must be an object/);
  bad(t, 'bad kind', f({ kind: 'diagonal' }), 'RangeError', /opts.mask.kind must be one of/);
  bad(t, 'tree window 0', f({ kind: 'slidingWindow', window: 0 }), 'RangeError', /opts.mask.window must be in \[1,/);
  bad(t, 'tree prefix', f({ kind: 'prefix', length: -1 }), 'RangeError', /opts.mask.length/);
  bad(
    t,
    'tree ids',
    f({ kind: 'documents', ids: new Int32Array(4) }),
    'RangeError',
    /opts.mask.ids has length 4, expected 10/,
  );
  bad(t, 'and without masks', f({ kind: 'and', masks: [] }), 'RangeError', /opts.mask.masks must not be empty/);
  bad(t, 'or masks not array', f({ kind: 'or', masks: {} }), 'TypeError', /opts.mask.masks must be an array/);
  bad(
    t,
    'nested error path',
    f({ kind: 'and', masks: [{ kind: 'causal' }, { kind: 'not', mask: { window: -2 } }] }),
    'RangeError',
    /opts.mask.masks\[1\].mask.window/,
  );
  bad(t, 'tree extra field', f({ kind: 'causal', window: 3 }), 'RangeError', /opts.mask has an unknown field 'window'/);
  let deep: unknown = { kind: 'causal' };
  for (let i = 0; i < 40; i++) deep = { kind: 'not', mask: deep };
  bad(t, 'too deep', f(deep), 'RangeError', /nested deeper than 32/);
  bad(t, 'createMask checks too', () => createMask({ window: -1 }, shape), 'RangeError', /mask.window/);
  bad(
    t,
    'createBlockMask size',
    () => createBlockMask(undefined, shape, 8),
    'RangeError',
    /blockSize must be in \[16, 256\]/,
  );
  bad(
    t,
    'createBlockMask multiple of 16',
    () => createBlockMask(undefined, shape, 40),
    'RangeError',
    /blockSize must be a multiple of 16/,
  );
  bad(
    t,
    'documents need queries inside the keys',
    () => createMask({ documentIds: new Int32Array(20) }, { ...shape, kvLen: 10, queryOffset: 8 }),
    'RangeError',
    /qOffset \+ qLen \(13\) > kvLen \(10\)/,
  );
});

t.test('options', async (t) => {
  const f = (opts: unknown) => () => sinkAttentionForward(q, k, v, sinks, shape, opts as never);
  bad(t, 'opts not object', f(3), 'TypeError', /opts must be an object/);
  bad(t, 'unknown option', f({ sofcap: 3 }), 'RangeError', /opts has an unknown field 'sofcap'/);
  bad(t, 'dLse in forward', f({ dLse: new Float32Array(40) }), 'RangeError', /unknown field 'dLse'/);
  bad(t, 'scale NaN', f({ scale: NaN }), 'RangeError', /opts.scale must be finite/);
  bad(t, 'scale string', f({ scale: '1' }), 'TypeError', /opts.scale must be a number/);
  bad(t, 'softcap negative', f({ softcap: -1 }), 'RangeError', /opts.softcap must be >= 0/);
  bad(t, 'impl', f({ impl: 'flash' }), 'RangeError', /opts.impl must be one of 'fused', 'eager', got 'flash'/);
  bad(t, 'blockSize', f({ blockSize: 20 }), 'RangeError', /opts.blockSize must be a multiple of 16/);
  bad(t, 'blockSize big', f({ blockSize: 512 }), 'RangeError', /opts.blockSize must be in \[16, 256\]/);
  bad(t, 'cpuKernel', f({ cpuKernel: 'sse4' }), 'RangeError', /opts.isa must be one of/);
  bad(t, 'device', f({ device: 'tpu' }), 'RangeError', /device must be 'cpu', 'cuda' or 'auto'/);
  bad(
    t,
    'backwardSplit',
    () => sinkAttentionBackward(q, k, v, sinks, fwd.out, fwd.lse, dOut, shape, { backwardSplit: 'rows' as never }),
    'RangeError',
    /opts.backwardSplit must be one of/,
  );
  t.throws(
    () => new SinkAttention(shape).backward(dOut),
    { message: /needs a forward first/ },
    'backward before forward',
  );
});

t.test(
  'device cuda without CUDA attention kernels',
  {
    skip:
      cudaAvailable() && attentionInfo().cudaKernels
        ? 'a GPU with CUDA attention kernels is present (test/attention/cuda.test.ts)'
        : false,
  },
  async (t) => {
    t.throws(() => sinkAttentionForward(q, k, v, sinks, shape, { device: 'cuda' }), DeviceUnavailableError);
    t.throws(
      () => sinkAttentionBackward(q, k, v, sinks, fwd.out, fwd.lse, dOut, shape, { device: 'cuda' }),
      DeviceUnavailableError,
    );
    const raw = loadAddon() as unknown as Record<string, (...a: unknown[]) => unknown>;
    t.throws(
      () => raw.attentionForward!(q, k, v, sinks, shape, { device: 'cuda' }),
      /not available|no sink-attention kernels/,
    );
  },
);

t.test('the raw addon validates too', async (t) => {
  const raw = loadAddon() as unknown as Record<string, (...a: unknown[]) => unknown>;
  bad(t, 'no arguments', () => raw.attentionForward!(), 'TypeError', /shape must be an object, got undefined/);
  bad(
    t,
    'no q',
    () => raw.attentionForward!(undefined, k, v, null, shape, {}),
    'TypeError',
    /^q must be a Float32Array, got undefined/,
  );
  bad(
    t,
    'backward without shape',
    () => raw.attentionBackward!(q, k, v, sinks, fwd.out, fwd.lse, dOut),
    'TypeError',
    /shape must be an object/,
  );
  bad(
    t,
    'blockMask handle',
    () => raw.attentionForward!(q, k, v, sinks, shape, { blockMask: {} }),
    'TypeError',
    /opts.blockMask must be a block mask/,
  );
  bad(
    t,
    'saved handle',
    () => raw.attentionBackward!(q, k, v, sinks, fwd.out, fwd.lse, dOut, shape, { impl: 'eager', saved: 3 }),
    'TypeError',
    /opts.saved must be saved state/,
  );
  bad(
    t,
    'saved with fused',
    () => raw.attentionForward!(q, k, v, sinks, shape, { save: true }),
    'RangeError',
    /opts.save needs opts.impl 'eager'/,
  );
  bad(
    t,
    'save not boolean',
    () => raw.attentionForward!(q, k, v, sinks, shape, { impl: 'eager', save: 1 }),
    'TypeError',
    /opts.save must be a boolean/,
  );
  bad(t, 'release garbage', () => raw.attentionReleaseSaved!({}), 'TypeError', /saved must be saved state/);
  const bm = createBlockMask(undefined, shape);
  bad(
    t,
    'block mask handle as saved',
    () => raw.attentionBackward!(q, k, v, sinks, fwd.out, fwd.lse, dOut, shape, { impl: 'eager', saved: bm.handle }),
    'TypeError',
    /opts.saved must be saved state/,
  );
  bad(
    t,
    'createBlockMask blockSize type',
    () => raw.attentionBlockMask!(undefined, shape, '64'),
    'TypeError',
    /blockSize must be an integer/,
  );
  bad(t, 'dense mask shape', () => raw.attentionDenseMask!(undefined, {}), 'TypeError', /shape.batch/);
  const r = raw.attentionForward!(q, k, v, sinks, shape, { impl: 'eager', save: true }) as { saved: object };
  raw.attentionReleaseSaved!(r.saved);
  bad(
    t,
    'released saved state',
    () => raw.attentionBackward!(q, k, v, sinks, fwd.out, fwd.lse, dOut, shape, { impl: 'eager', saved: r.saved }),
    'RangeError',
    /opts.saved was released/,
  );
  bad(
    t,
    'saved with fused backward',
    () =>
      raw.attentionBackward!(q, k, v, sinks, fwd.out, fwd.lse, dOut, shape, {
        saved: (raw.attentionForward!(q, k, v, sinks, shape, { impl: 'eager', save: true }) as { saved: object }).saved,
      }),
    'RangeError',
    /opts.saved needs opts.impl 'eager'/,
  );
  // still usable afterwards
  const again = sinkAttentionForward(q, k, v, sinks, shape);
  t.same(again.out, fwd.out, 'the addon keeps working after errors');
});
