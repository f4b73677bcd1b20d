// DeviceTensor handles: creation with toDevice, shape/dtype/device/size/bytes, toArray round
// trips (bfloat16 and float16 rounding against the round-to-nearest-even references of the
// attention fixtures),
// dispose, tracked memory, validation errors — on the 'cpu' device everywhere, and on CUDA when
// a GPU is present (skipped with a visible message otherwise).
import t from 'tap';
import type { Test } from 'tap';

import {
  DeviceUnavailableError,
  cudaAvailable,
  isDeviceTensor,
  isOutOfMemoryError,
  memory,
  toDevice,
  type DeviceTensor,
  type DType,
  type MemoryDevice,
} from '../../lib/native/index.js';
import { loadAddon } from '../../lib/native/loader.js';
import { Rng, bf16, f16 } from '../attention/fixtures/reference.js';

const special = Float32Array.from([
  0,
  -0,
  1,
  -1,
  1.00390625,
  1.005859375,
  1.0029296875,
  3.4028234663852886e38,
  -3.4e38,
  1e-40,
  -1e-39,
  Infinity,
  -Infinity,
  NaN,
  65504,
  65519,
  65520,
  -70000,
  2 ** -20,
  2 ** -25,
  3 * 2 ** -26,
  1 + 2 ** -10,
  1 + 2 ** -11,
  0.1,
  1 / 3,
]);

/** The value `v` holds as `dtype`. */
const rounded = (dtype: DType, v: number): number =>
  dtype === 'bfloat16' ? bf16(v) : dtype === 'float16' ? f16(v) : v;

function checkTensor(t: Test, device: MemoryDevice, dtype: DType): void {
  const rng = new Rng(dtype === 'float32' ? 1 : 2);
  const data = rng.floats(2 * 3 * 5, 3);
  const before = memory.currentBytes(device);
  const x = toDevice(data, [2, 3, 5], { device, dtype });
  t.ok(isDeviceTensor(x));
  t.same(x.shape, [2, 3, 5]);
  t.equal(x.dtype, dtype);
  t.equal(x.device, device === 'cuda' ? 'cuda:0' : device);
  t.equal(x.size, 30);
  t.equal(x.bytes, dtype === 'float32' ? 120 : 60);
  t.equal(x.disposed, false);
  t.ok(memory.currentBytes(device) - before >= x.bytes, 'counted by the tracked allocator');
  const back = x.toArray();
  t.ok(back instanceof Float32Array && back !== data);
  t.same(
    Array.from(back),
    Array.from(data, (v) => rounded(dtype, v)),
    `${dtype} round trip`,
  );
  const held = memory.currentBytes(device); // toArray's result is tracked too (until GC)
  x.dispose();
  t.equal(x.disposed, true);
  x.dispose(); // idempotent
  t.equal(held - memory.currentBytes(device), x.bytes, 'dispose frees the bytes');
  t.throws(() => x.toArray(), { message: /disposed/ });
  t.same(x.shape, [2, 3, 5], 'the shape stays readable');

  const s = toDevice(special, [special.length], { device, dtype });
  const got = s.toArray();
  for (let i = 0; i < special.length; i++) {
    const want = rounded(dtype, special[i]!);
    if (!Object.is(got[i], want)) t.fail(`${dtype} special value ${special[i]}: got ${got[i]}, want ${want}`);
  }
  t.pass(`${dtype} special values (signed zeros, ties, subnormals, overflow, infinities, NaN)`);
  s.dispose();

  const beforeBlock = memory.currentBytes(device);
  let scoped: DeviceTensor;
  {
    using y = toDevice(data, [30], { device, dtype });
    scoped = y;
    t.equal(y.disposed, false);
  }
  t.equal(scoped.disposed, true, 'using: disposed at the end of the block');
  t.equal(memory.currentBytes(device), beforeBlock, 'and its bytes freed');
}

t.test('cpu tensors: float32, bfloat16 and float16', async (t) => {
  checkTensor(t, 'cpu', 'float32');
  checkTensor(t, 'cpu', 'bfloat16');
  checkTensor(t, 'cpu', 'float16');
});

t.test('shapes: scalar, empty, default options', async (t) => {
  const scalar = toDevice(Float32Array.of(2.5), [], { device: 'cpu' });
  t.same(scalar.shape, []);
  t.equal(scalar.size, 1);
  t.same(Array.from(scalar.toArray()), [2.5]);
  const empty = toDevice(new Float32Array(0), [4, 0, 3], { device: 'cpu', dtype: 'bfloat16' });
  t.equal(empty.size, 0);
  t.equal(empty.bytes, 0);
  t.equal(empty.toArray().length, 0);
  const saved = process.env.SINKFLEX_DEVICE;
  process.env.SINKFLEX_DEVICE = 'cpu';
  const d = toDevice(Float32Array.of(1, 2), [2]);
  t.equal(d.device, 'cpu', 'SINKFLEX_DEVICE decides without a device option');
  t.equal(d.dtype, 'float32', 'float32 by default');
  if (saved === undefined) delete process.env.SINKFLEX_DEVICE;
  else process.env.SINKFLEX_DEVICE = saved;
  const auto = toDevice(Float32Array.of(1), [1], { device: 'auto' });
  t.equal(auto.device, cudaAvailable() ? 'cuda:0' : 'cpu', "'auto' picks CUDA only when a GPU is usable");
  for (const x of [scalar, empty, d, auto]) x.dispose();
});

t.test('validation', async (t) => {
  const data = new Float32Array(6);
  t.throws(() => toDevice([1, 2] as unknown as Float32Array, [2], { device: 'cpu' }), {
    name: 'TypeError',
    message: /data must be a Float32Array, got an Array/,
  });
  t.throws(() => toDevice(new Float64Array(6) as unknown as Float32Array, [6], { device: 'cpu' }), {
    name: 'TypeError',
    message: /data must be a Float32Array, got Float64Array/,
  });
  t.throws(() => toDevice(data, 6 as unknown as number[], { device: 'cpu' }), {
    name: 'TypeError',
    message: /shape must be an array/,
  });
  t.throws(() => toDevice(data, [4, 2], { device: 'cpu' }), {
    name: 'RangeError',
    message: /data has length 6 but shape holds 8 elements/,
  });
  t.throws(() => toDevice(data, [-1, -6], { device: 'cpu' }), {
    name: 'RangeError',
    message: /shape\[0\] must be in \[0,/,
  });
  t.throws(() => toDevice(data, [2.5, 2], { device: 'cpu' }), {
    name: 'RangeError',
    message: /shape\[0\] must be an integer/,
  });
  t.throws(() => toDevice(data, ['6'] as unknown as number[], { device: 'cpu' }), {
    name: 'TypeError',
    message: /shape\[0\] must be an integer/,
  });
  t.throws(() => toDevice(data, [1, 1, 1, 1, 1, 1, 1, 1, 6], { device: 'cpu' }), {
    name: 'RangeError',
    message: /at most 8/,
  });
  t.throws(() => toDevice(data, [6], { device: 'cpu', dtype: 'float8' as DType }), {
    name: 'RangeError',
    message: /dtype must be one of 'float32', 'bfloat16', 'float16', got 'float8'/,
  });
  t.throws(() => toDevice(data, [6], { device: 'tpu' as 'cpu' }), {
    name: 'RangeError',
    message: /device must be 'cpu', 'cuda' or 'auto'/,
  });
  t.throws(() => toDevice(data, [6], null as unknown as object), {
    name: 'TypeError',
    message: /opts must be an object/,
  });
  const raw = loadAddon() as unknown as {
    DeviceTensor: new (...a: unknown[]) => unknown;
    deviceTensorFromArray: (...a: unknown[]) => unknown;
  };
  t.throws(() => new raw.DeviceTensor(), { name: 'TypeError', message: /use toDevice/ });
  t.throws(() => new raw.DeviceTensor({}), { name: 'TypeError', message: /use toDevice/ });
  t.throws(() => raw.deviceTensorFromArray(data, [6], 'gpu', 'float32'), {
    name: 'RangeError',
    message: /device must be 'cpu', 'cuda' or 'cuda:<index>'/,
  });
  t.throws(() => raw.deviceTensorFromArray(data, [6], 'cpu', 3), {
    name: 'TypeError',
    message: /dtype must be a string/,
  });
  t.equal(isDeviceTensor(data), false);
  t.equal(isDeviceTensor({ shape: [6], dtype: 'float32' }), false);
  t.equal(isDeviceTensor(null), false);
});

t.test('cuda without a GPU', { skip: cudaAvailable() ? 'a CUDA device is present' : false }, async (t) => {
  const data = new Float32Array(4);
  t.throws(() => toDevice(data, [4], { device: 'cuda' }), DeviceUnavailableError);
  t.throws(() => toDevice(data, [4], { device: 'cuda:1' }), DeviceUnavailableError);
  const raw = loadAddon() as unknown as { deviceTensorFromArray: (...a: unknown[]) => unknown };
  t.throws(() => raw.deviceTensorFromArray(data, [4], 'cuda:0', 'float32'), {
    message: /device 'cuda:0' is not available/,
  });
});

const noGpu = cudaAvailable() ? false : `no CUDA device: ${loadAddon().cudaStatus().reason}`;

t.test('cuda tensors', { skip: noGpu }, async (t) => {
  checkTensor(t, 'cuda', 'float32');
  checkTensor(t, 'cuda', 'bfloat16');
  checkTensor(t, 'cuda', 'float16');
  const big = new Float32Array(1 << 20);
  let caught: unknown;
  const before = memory.currentBytes('cuda');
  memory.withLimit(
    before + 1024,
    () => {
      try {
        toDevice(big, [big.length], { device: 'cuda' });
      } catch (e) {
        caught = e;
      }
    },
    'cuda',
  );
  t.ok(isOutOfMemoryError(caught), 'past the tracked limit: OutOfMemoryError');
  t.equal(memory.currentBytes('cuda'), before);
  const x = toDevice(big, [1024, 1024], { device: 'cuda', dtype: 'bfloat16' });
  t.equal(memory.currentBytes('cuda') - before, 2 * big.length);
  x.dispose();
  t.equal(memory.currentBytes('cuda'), before);
});
