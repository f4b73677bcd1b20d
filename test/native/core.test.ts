import t from 'tap';

import {
  DeviceError,
  DeviceUnavailableError,
  OutOfMemoryError,
  backends,
  buildInfo,
  cudaAvailable,
  isDeviceError,
  isOutOfMemoryError,
  memory,
  resolveDevice,
  version,
} from '../../lib/native/index.js';
import { loadAddon } from '../../lib/native/loader.js';

t.test('version and backends', async (t) => {
  t.match(version(), /^\d+\.\d+\.\d+/);
  const list = backends();
  t.equal(list[0]?.name, 'cpu');
  const cpu = list[0];
  if (cpu?.name === 'cpu') {
    t.ok(cpu.threads >= 1);
    t.ok(Array.isArray(cpu.features));
  }
  for (const b of list.slice(1)) {
    t.equal(b.name, 'cuda');
    if (b.name === 'cuda') t.ok(b.totalMemory > 0 && b.deviceName.length > 0);
  }
  const info = buildInfo();
  t.equal(info.napiVersion, 8);
  t.equal(info.version, version(), 'the binary was built from this package version');
  t.equal(loadAddon().version(), version());
  t.equal(typeof info.cudaCompiled, 'boolean');
  t.equal(list.length > 1, cudaAvailable());
});

t.test('tracked memory counts native allocations and their release', async (t) => {
  memory.resetPeak();
  const before = memory.currentBytes();
  const a = loadAddon().allocTracked(250_000);
  t.equal(a.length, 250_000);
  t.ok(memory.currentBytes() >= before + 1_000_000, 'current grows by the allocation');
  t.ok(memory.peakBytes() >= before + 1_000_000, 'peak grows');
  a.fill(1.5);
  t.equal(a[249_999], 1.5);
  const s = memory.stats('cpu');
  t.same(Object.keys(s).sort(), ['currentBytes', 'limitBytes', 'peakBytes']);
  t.equal(s.limitBytes, null);
});

t.test('an allocation over the limit throws a catchable OutOfMemoryError', async (t) => {
  const current = memory.currentBytes();
  const limit = current + 4096;
  let caught: unknown;
  memory.withLimit(limit, () => {
    t.equal(memory.limitBytes(), limit);
    try {
      loadAddon().allocTracked(1_000_000);
    } catch (e) {
      caught = e;
    }
    // still usable under the limit
    t.equal(loadAddon().allocTracked(16).length, 16);
  });
  t.equal(memory.limitBytes(), null, 'withLimit restores the previous limit');
  t.ok(caught instanceof OutOfMemoryError, 'instance of OutOfMemoryError');
  t.ok(isOutOfMemoryError(caught));
  const e = caught as OutOfMemoryError;
  t.equal(e.code, 'ERR_SINKFLEX_OOM');
  t.equal(e.device, 'cpu');
  t.equal(e.requestedBytes, 4_000_000);
  t.equal(e.limitBytes, limit);
  t.match(e.message, /allocTracked requested 3\.81 MiB \(4000000 bytes\)/);
  t.match(e.message, new RegExp(`limit ${limit} bytes`));
  t.notOk(isOutOfMemoryError(new Error('x')));
  t.notOk(isOutOfMemoryError(null));
});

t.test('a device that cannot serve a call throws a DeviceError with a code', async (t) => {
  const addon = loadAddon() as unknown as Record<string, (...args: unknown[]) => unknown>;
  let caught: unknown;
  try {
    addon.memoryStats!('cuda:7');
  } catch (e) {
    caught = e;
  }
  t.ok(caught instanceof DeviceError, `an instance of DeviceError (${String(caught)})`);
  t.ok(isDeviceError(caught));
  const e = caught as DeviceError;
  t.equal(e.name, 'DeviceError');
  t.equal(e.code, 'ERR_SINKFLEX_DEVICE');
  t.match(e.message, /^device 'cuda:7' is not available: /);
  t.notOk(e instanceof DeviceUnavailableError, 'the addon raises the general class');
  const unavailable = new DeviceUnavailableError('cuda', 'no GPU');
  t.ok(unavailable instanceof DeviceError, 'DeviceUnavailableError is a DeviceError');
  t.equal(unavailable.code, 'ERR_SINKFLEX_DEVICE');
  t.equal(unavailable.name, 'DeviceUnavailableError');
  t.ok(isDeviceError({ code: 'ERR_SINKFLEX_DEVICE' }), 'recognised by its code');
  t.notOk(isDeviceError(new Error('x')));
  t.notOk(isDeviceError(null));
  t.throws(() => addon.setErrorClasses!({ OutOfMemoryError }), {
    name: 'TypeError',
    message: /DeviceError must be a class/,
  });
});

t.test('bad calls throw TypeError or RangeError naming the argument', async (t) => {
  const addon = loadAddon() as unknown as Record<string, (...args: unknown[]) => unknown>;
  t.throws(() => addon.allocTracked!('10'), { name: 'TypeError', message: /count must be an integer, got a string/ });
  t.throws(() => addon.allocTracked!(-1), { name: 'RangeError', message: /count must be in/ });
  t.throws(() => addon.allocTracked!(1.5), { name: 'RangeError', message: /count must be an integer/ });
  t.throws(() => addon.allocTracked!(Number.NaN), { name: 'RangeError', message: /count must be an integer/ });
  t.throws(() => addon.memoryStats!(3), { name: 'TypeError', message: /device must be a string, got a number/ });
  t.throws(() => addon.memoryStats!('gpu'), {
    name: 'RangeError',
    message: /device must be 'cpu', 'cuda' or 'cuda:<index>'/,
  });
  t.throws(() => addon.setLimit!('cpu', 0), { name: 'RangeError', message: /bytes must be in/ });
  t.throws(() => addon.setErrorClasses!(5), { name: 'TypeError', message: /classes must be an object/ });
  t.throws(() => addon.setErrorClasses!({}), { name: 'TypeError', message: /OutOfMemoryError must be a class/ });
  t.throws(() => memory.setLimit(-5), { name: 'RangeError' });
});

t.test('device selection', async (t) => {
  t.equal(resolveDevice('cpu'), 'cpu');
  const saved = process.env.SINKFLEX_DEVICE;
  t.teardown(() => {
    if (saved === undefined) delete process.env.SINKFLEX_DEVICE;
    else process.env.SINKFLEX_DEVICE = saved;
  });
  process.env.SINKFLEX_DEVICE = 'cpu';
  t.equal(resolveDevice(), 'cpu', 'SINKFLEX_DEVICE is honoured');
  process.env.SINKFLEX_DEVICE = 'tpu';
  t.throws(() => resolveDevice(), { name: 'RangeError', message: /SINKFLEX_DEVICE must be/ });
  t.throws(() => resolveDevice('tpu' as 'cpu'), { name: 'RangeError', message: /^device must be/ });
  delete process.env.SINKFLEX_DEVICE;
  if (cudaAvailable()) {
    t.equal(resolveDevice('cuda'), 'cuda');
    t.equal(resolveDevice('auto'), 'cuda');
    t.ok(memory.stats('cuda').currentBytes >= 0);
  } else {
    t.equal(resolveDevice(), 'cpu', 'auto falls back to cpu');
    t.throws(() => resolveDevice('cuda'), DeviceUnavailableError);
    t.throws(() => memory.peakBytes('cuda'), { message: /device 'cuda' is not available/ });
    try {
      resolveDevice('cuda');
    } catch (e) {
      t.ok((e as DeviceUnavailableError).reason.length > 0, 'the error says why');
    }
  }
});
