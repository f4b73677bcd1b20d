// bfloat16 weights on the machine's own kernel table (the ISA tests run the same checks on the
// avx2 and generic tables): GEMM paths, linear forward/backward, embedding, and the errors.
import t from 'tap';

import { linearBackward, linearForward, opsIsa } from '../../lib/model/index.js';
import { checkBf16Ops } from './fixtures/op-checks.js';

t.test(
  `bfloat16 weights on the ${opsIsa()} kernels match float32 of the widened weights and the float64 reference`,
  async (t) => {
    checkBf16Ops(t);
  },
);

t.test('bfloat16 weights: errors name the argument', async (t) => {
  const x = new Float32Array(6);
  t.throws(() => linearForward({ x, weight: new Uint16Array(5), rows: 2, inFeatures: 3, outFeatures: 2 }), {
    name: 'RangeError',
    message: /^weight must have 6 elements, got 5/,
  });
  t.throws(
    () =>
      linearBackward({
        x,
        weight: new Uint16Array(6),
        dy: new Float32Array(4),
        dweight: new Float32Array(6),
        rows: 2,
        inFeatures: 3,
        outFeatures: 2,
      }),
    {
      name: 'TypeError',
      message: /dweight must be null for a bfloat16 weight/,
    },
  );
});
