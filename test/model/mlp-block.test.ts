// The ops compose: a pre-norm SwiGLU MLP block with a residual (what the transformer uses),
// h = x + down(swiglu(gate_up(rmsnorm(x)))), run forward and backward with the native ops and
// checked against finite differences of the same block written in float64.
import t from 'tap';

import {
  linearBackward,
  linearForward,
  rmsnormBackward,
  rmsnormForward,
  swigluBackward,
  swigluForward,
} from '../../lib/model/index.js';
import { swigluParams } from '../../lib/model/ops.js';
import {
  closeness,
  dot,
  numericGrad,
  pick,
  randn,
  refLinear,
  refRmsNorm,
  refSwiGlu,
  sampleIndices,
} from './fixtures/reference.js';

const [T, D, F] = [7, 24, 40];
const eps = 1e-5;
const variant = 'clamped' as const;

function refBlock(
  x: ArrayLike<number>,
  g: ArrayLike<number>,
  wUp: ArrayLike<number>,
  wDown: ArrayLike<number>,
): Float64Array {
  const n = refRmsNorm(x, g, T, D, eps).y;
  const up = refLinear(n, wUp, null, T, D, 2 * F);
  const act = refSwiGlu(up, T, F, swigluParams(variant));
  const down = refLinear(act, wDown, null, T, F, D);
  return down.map((v, i) => v + x[i]);
}

t.test('a pre-norm SwiGLU MLP block: native forward and backward match finite differences', async (t) => {
  const x = randn(T * D, 1, -2, 2);
  const g = randn(D, 2, 0.5, 1.5);
  const wUp = randn(2 * F * D, 3, -0.6, 0.6);
  const wDown = randn(D * F, 4, -0.3, 0.3);
  const wy = randn(T * D, 5);

  // forward
  const { out: n, rstd } = rmsnormForward({ x, weight: g, rows: T, dim: D, eps });
  const up = linearForward({ x: n, weight: wUp, rows: T, inFeatures: D, outFeatures: 2 * F });
  const act = swigluForward({ h: up, rows: T, ffn: F, variant });
  const y = linearForward({ x: act, weight: wDown, rows: T, inFeatures: F, outFeatures: D });
  for (let i = 0; i < y.length; i++) y[i] += x[i];
  t.ok(closeness(y, refBlock(x, g, wUp, wDown), 1e-4, 1e-5) <= 1, 'forward');

  // backward: the residual passes wy straight to dx, the branch accumulates into it
  const dDown = linearBackward({ x: act, weight: wDown, dy: wy, rows: T, inFeatures: F, outFeatures: D, dbias: null });
  const dUp = swigluBackward({ h: up, dout: dDown.dx!, rows: T, ffn: F, variant });
  const dGate = linearBackward({ x: n, weight: wUp, dy: dUp, rows: T, inFeatures: D, outFeatures: 2 * F, dbias: null });
  const dx = wy.slice();
  const dNorm = rmsnormBackward({ x, weight: g, rstd, dy: dGate.dx!, rows: T, dim: D, dx, accumulate: true });

  const loss = (xx: ArrayLike<number>, gg: ArrayLike<number>, wu: ArrayLike<number>, wd: ArrayLike<number>): number =>
    dot(wy, refBlock(xx, gg, wu, wd));
  const ix = sampleIndices(x.length, 30, 6);
  const iu = sampleIndices(wUp.length, 30, 7);
  const id = sampleIndices(wDown.length, 30, 8);
  t.ok(
    closeness(
      pick(dNorm.dx, ix),
      numericGrad((v) => loss(v, g, wUp, wDown), x, ix),
      2e-3,
      2e-4,
    ) <= 1,
    'dx',
  );
  t.ok(
    closeness(
      dNorm.dweight,
      numericGrad((v) => loss(x, v, wUp, wDown), g),
      2e-3,
      2e-4,
    ) <= 1,
    'd norm gain',
  );
  t.ok(
    closeness(
      pick(dGate.dweight!, iu),
      numericGrad((v) => loss(x, g, v, wDown), wUp, iu),
      2e-3,
      2e-4,
    ) <= 1,
    'd gate_up',
  );
  t.ok(
    closeness(
      pick(dDown.dweight!, id),
      numericGrad((v) => loss(x, g, wUp, v), wDown, id),
      2e-3,
      2e-4,
    ) <= 1,
    'd down',
  );
});
