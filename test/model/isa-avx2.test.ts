// Forces the avx2 kernel table (SINKFLEX_CPU_FEATURES is read when the addon first selects its
// kernels, which happens after this line) and checks every op against the references.
process.env.SINKFLEX_CPU_FEATURES = 'avx2';

import t from 'tap';

import { opsIsa } from '../../lib/model/index.js';
import { backends } from '../../lib/native/index.js';
import { checkMemorySavers } from './fixtures/memory-savers.js';
import { checkMxfp4Moe } from './fixtures/mxfp4-checks.js';
import { checkAllOps } from './fixtures/op-checks.js';

const cpu = backends()[0];
const supported = cpu?.name === 'cpu' && cpu.features.includes('avx2') && cpu.features.includes('fma');

t.test('avx2 kernels match the float64 references', { skip: supported ? false : 'this CPU has no avx2' }, async (t) => {
  t.equal(opsIsa(), 'avx2');
  checkAllOps(t);
});

t.test(
  'avx2 kernels: chunked LM head and activation checkpointing = the plain step',
  { skip: supported ? false : 'this CPU has no avx2' },
  async (t) => {
    t.equal(opsIsa(), 'avx2');
    checkMemorySavers(t, 'cpu');
  },
);

t.test(
  'avx2: MXFP4 packed experts = dequantized experts, bit for bit',
  { skip: supported ? false : 'this CPU has no avx2' },
  async (t) => {
    checkMxfp4Moe(t);
  },
);
