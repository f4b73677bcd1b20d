// MXFP4 experts kept packed = their bfloat16 dequantization, bit for bit, through the MoE op on
// the CPU (the selected instruction set; isa-avx2 / isa-generic run the same checks on theirs).
import t from 'tap';

import { checkMxfp4Moe } from './fixtures/mxfp4-checks.js';

t.test('MXFP4 packed experts = dequantized experts (CPU)', async (t) => {
  checkMxfp4Moe(t);
});
