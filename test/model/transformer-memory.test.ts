// The chunked LM head and activation checkpointing give the plain training step's outputs and
// gradients bit for bit on the CPU (the default kernel table; isa-avx2.test.ts and
// isa-generic.test.ts run the same checks on the other tables). See fixtures/memory-savers.ts.
import t from 'tap';

import { checkMemorySavers } from './fixtures/memory-savers.js';

t.test('chunked LM head and activation checkpointing = the plain step (cpu)', async (t) => {
  checkMemorySavers(t, 'cpu');
});

t.test('bad memory-saver options are refused naming them', async (t) => {
  const { Transformer } = await import('../../lib/model/index.js');
  const m = Transformer.create(
    {
      layers: 1,
      width: 8,
      heads: 2,
      kvHeads: 1,
      headDim: 4,
      window: 0,
      vocab: 11,
      context: 16,
      ffn: 6,
      ropeTheta: 100,
      normEps: 1e-5,
      initStd: 0.1,
      swiglu: 'standard',
    },
    1,
  );
  const batch = { tokens: Int32Array.of(1, 2, 3), targets: Int32Array.of(2, 3, -1) };
  t.throws(() => m.forward(batch, { activationCheckpointing: 'all' as never }), {
    message: /options\.activationCheckpointing must be 'none' or 'layers'/,
  });
  t.throws(() => m.forward(batch, { lmHeadChunk: -1 }), {
    message: /options\.lmHeadChunk must be a non-negative integer/,
  });
  t.throws(() => m.forward(batch, { lmHeadChunk: 1.5 }), { message: /options\.lmHeadChunk/ });
  const f = m.forward(batch, { lmHeadChunk: 2 });
  f.backward({ dLogProbs: Float32Array.of(1, 1, 1) });
  m.dispose();
});
