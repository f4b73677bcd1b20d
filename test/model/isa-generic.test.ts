// Forces the generic kernel table (SINKFLEX_CPU_FEATURES is read when the addon first selects its
// kernels, which happens after this line) and checks every op against the references.
process.env.SINKFLEX_CPU_FEATURES = 'generic';

import t from 'tap';

import { opsIsa } from '../../lib/model/index.js';
import { checkMemorySavers } from './fixtures/memory-savers.js';
import { checkMxfp4Moe } from './fixtures/mxfp4-checks.js';
import { checkAllOps } from './fixtures/op-checks.js';

t.test('generic kernels match the float64 references', async (t) => {
  t.equal(opsIsa(), 'generic');
  checkAllOps(t);
});

t.test('generic kernels: chunked LM head and activation checkpointing = the plain step', async (t) => {
  t.equal(opsIsa(), 'generic');
  checkMemorySavers(t, 'cpu');
});

t.test('generic: MXFP4 packed experts = dequantized experts, bit for bit', async (t) => {
  checkMxfp4Moe(t);
});
