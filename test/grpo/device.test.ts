import t from 'tap';

import { DeviceUnavailableError } from '../../lib/native/index.js';

// What the GRPO functions do on a machine whose addon sees a usable GPU: resolveDevice says
// 'cuda', but this build's GRPO kernels exist only for the CPU.
t.test('a usable GPU without CUDA GRPO kernels: auto falls back to the CPU, cuda throws', async (t) => {
  const { grpoDevice } = await t.mockImport<typeof import('../../lib/grpo/device.js')>('../../lib/grpo/device.js', {
    '../../lib/native/device.js': { resolveDevice: (req?: string) => (req === 'cpu' ? 'cpu' : 'cuda') },
    '../../lib/grpo/native.js': { grpoAddon: () => ({ grpoDevices: () => ['cpu'] }) },
  });
  t.equal(grpoDevice('auto'), 'cpu');
  t.equal(grpoDevice('cpu'), 'cpu');
  const env = process.env.SINKFLEX_DEVICE;
  try {
    delete process.env.SINKFLEX_DEVICE;
    t.equal(grpoDevice(), 'cpu', 'no request, no SINKFLEX_DEVICE: auto');
    process.env.SINKFLEX_DEVICE = 'cuda';
    t.throws(() => grpoDevice(), DeviceUnavailableError, 'SINKFLEX_DEVICE=cuda is an explicit request');
  } finally {
    if (env === undefined) delete process.env.SINKFLEX_DEVICE;
    else process.env.SINKFLEX_DEVICE = env;
  }
  t.throws(() => grpoDevice('cuda'), {
    name: 'DeviceUnavailableError',
    message: /this build has no CUDA GRPO kernels/,
  });
});

t.test('a GRPO build with CUDA kernels would run on the GPU', async (t) => {
  const { grpoDevice } = await t.mockImport<typeof import('../../lib/grpo/device.js')>('../../lib/grpo/device.js', {
    '../../lib/native/device.js': { resolveDevice: () => 'cuda' },
    '../../lib/grpo/native.js': { grpoAddon: () => ({ grpoDevices: () => ['cpu', 'cuda'] }) },
  });
  t.equal(grpoDevice('cuda'), 'cuda');
  t.equal(grpoDevice('auto'), 'cuda');
});
