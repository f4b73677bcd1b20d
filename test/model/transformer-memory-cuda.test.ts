// The chunked LM head and activation checkpointing on the CUDA transformer give the plain
// training step's outputs and gradients (bit for bit, except the head weight's gradient under
// a chunked head: 1e-6 of its largest entry; see fixtures/memory-savers.ts). Skipped with a
// visible message without a CUDA build and a GPU (the CUDA emulator, `npm run
// build:cuda-emulator`, counts).
import t from 'tap';

import { checkMemorySavers } from './fixtures/memory-savers.js';
import { noCudaModelOps } from './fixtures/cuda-skip.js';

const noGpu = noCudaModelOps();

t.test('chunked LM head and activation checkpointing = the plain step (cuda)', { skip: noGpu }, async (t) => {
  checkMemorySavers(t, 'cuda');
});
