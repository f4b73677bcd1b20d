// The chunked LM head and activation checkpointing on the CUDA transformer give the plain
// training step's outputs and gradients (bit for bit, except the head weight's gradient under
// a chunked head: 1e-6 of its largest entry; see fixtures/memory-savers.ts). Skipped with a
// visible message without a CUDA build and a GPU (the CUDA emulator, `npm run
// build:cuda-emulator`, counts).
import t from 'tap';

import { modelAddon } from '../../lib/model/native.js';
import { cudaAvailable } from '../../lib/native/index.js';
import { loadAddon } from '../../lib/native/loader.js';
import { checkMemorySavers } from './fixtures/memory-savers.js';

const noGpu = !cudaAvailable()
  ? `no CUDA device: ${loadAddon().cudaStatus().reason}`
  : !modelAddon().modelOpsDevices().includes('cuda')
    ? 'no CUDA device: this build has no CUDA model kernels'
    : false;

t.test('chunked LM head and activation checkpointing = the plain step (cuda)', { skip: noGpu }, async (t) => {
  checkMemorySavers(t, 'cuda');
});
