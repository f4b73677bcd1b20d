import t from 'tap';

import { grpoAddon } from '../../lib/grpo/native.js';

import { policyLoss, policyLossAsync, type PolicyLossInputs, type PolicyLossOptions } from '../../lib/grpo/index.js';
import { DeviceUnavailableError } from '../../lib/native/index.js';
import { lossInputs } from './fixtures/reference.js';

const shape = { batch: 3, responseLen: 4 };
function inputs(): PolicyLossInputs {
  const inp = lossInputs(5, 3, 4, { ref: true, entropy: true, perTokenAdv: true });
  inp.responseMask.fill(1);
  return inp;
}

t.test('length mismatches and wrong types name the argument', async (t) => {
  for (const key of ['logProbs', 'oldLogProbs', 'responseMask', 'refLogProbs', 'entropy'] as const) {
    const inp = { ...inputs(), [key]: new Float32Array(11) };
    t.throws(
      () => policyLoss(inp, shape),
      { name: 'RangeError', message: new RegExp(`^${key} has length 11, expected 12`) },
      key,
    );
    const wrong = { ...inputs(), [key]: new Float64Array(12) };
    t.throws(() => policyLoss(wrong as unknown as PolicyLossInputs, shape), {
      name: 'TypeError',
      message: new RegExp(`^${key} must be a Float32Array, got Float64Array`),
    });
  }
  t.throws(() => policyLoss({ ...inputs(), advantages: new Float32Array(5) }, shape), {
    name: 'RangeError',
    message: /advantages has length 5, expected 12 \(batch \* responseLen\) or 3 \(batch\)/,
  });
  const { logProbs: _drop, ...noLogProbs } = inputs();
  t.throws(() => policyLoss(noLogProbs as PolicyLossInputs, shape), {
    name: 'TypeError',
    message: /logProbs must be a Float32Array, got undefined/,
  });
  t.throws(() => policyLoss(inputs(), { batch: 0, responseLen: 4 }), {
    name: 'RangeError',
    message: /shape.batch must be in \[1/,
  });
  t.throws(() => policyLoss(inputs(), { batch: 3, responseLen: 0 }), {
    name: 'RangeError',
    message: /shape.responseLen must be in \[1/,
  });
  t.throws(() => policyLoss(inputs(), { batch: 3 } as never), {
    name: 'TypeError',
    message: /shape.responseLen must be an integer, got undefined/,
  });
  t.throws(() => policyLoss(inputs(), null as never), { name: 'TypeError', message: /shape must be an object/ });
  t.throws(() => policyLoss(null as never, shape), { name: 'TypeError', message: /inp must be an object/ });
  t.throws(() => policyLoss({ ...inputs(), logprobs: new Float32Array(12) } as never, shape), {
    name: 'RangeError',
    message: /inp\.logprobs is not an option of policyLoss \(known: logProbs, /,
  });
});

t.test('bad values: mask other than 0/1, NaN/Infinity at unmasked tokens', async (t) => {
  const at = (key: keyof PolicyLossInputs, j: number, v: number) => {
    const inp = inputs();
    inp[key]![j] = v;
    return inp;
  };
  t.throws(() => policyLoss(at('responseMask', 6, 0.5), shape), {
    name: 'RangeError',
    message: /^responseMask\[1, 2\] is 0\.5\d*; mask values must be 0 or 1/,
  });
  t.throws(() => policyLoss(at('responseMask', 11, -1), shape), {
    name: 'RangeError',
    message: /^responseMask\[2, 3\] is -1/,
  });
  t.throws(() => policyLoss(at('responseMask', 0, Number.NaN), shape), {
    name: 'RangeError',
    message: /^responseMask\[0, 0\] is NaN/,
  });
  t.throws(() => policyLoss(at('logProbs', 5, Number.NaN), shape), {
    name: 'RangeError',
    message: /^logProbs\[1, 1\] is NaN at an unmasked token/,
  });
  t.throws(() => policyLoss(at('oldLogProbs', 2, Infinity), shape), {
    name: 'RangeError',
    message: /^oldLogProbs\[0, 2\] is Infinity/,
  });
  t.throws(() => policyLoss(at('advantages', 9, -Infinity), shape), {
    name: 'RangeError',
    message: /^advantages\[2, 1\] is -Infinity/,
  });
  t.throws(() => policyLoss(at('refLogProbs', 3, Number.NaN), shape), {
    name: 'RangeError',
    message: /^refLogProbs\[0, 3\] is NaN/,
  });
  t.throws(() => policyLoss(at('entropy', 7, Number.NaN), shape), {
    name: 'RangeError',
    message: /^entropy\[1, 3\] is NaN/,
  });
  const perRow = { ...inputs(), advantages: new Float32Array([1, Number.NaN, 2]) };
  t.throws(() => policyLoss(perRow, shape), { name: 'RangeError', message: /^advantages\[1\] is NaN/ });
  // The first bad token in row-major order is reported, whatever the thread count.
  const two = at('logProbs', 10, Number.NaN);
  two.oldLogProbs[4] = Number.NaN;
  t.throws(() => policyLoss(two, shape), { message: /^oldLogProbs\[1, 0\]/ });
  await t.rejects(policyLossAsync(at('responseMask', 1, 3), shape), {
    name: 'RangeError',
    message: /responseMask\[0, 1\] is 3/,
  });
  await t.rejects(policyLossAsync(at('logProbs', 1, Number.NaN), shape), {
    name: 'RangeError',
    message: /logProbs\[0, 1\] is NaN/,
  });
});

t.test('bad options', async (t) => {
  const bad: [PolicyLossOptions, string, RegExp][] = [
    [{ clipLow: -0.1 }, 'RangeError', /clipLow must be in \[0, 1\], got -0\.1/],
    [{ clipLow: 1.5 }, 'RangeError', /clipLow must be in \[0, 1\]/],
    [{ clipLow: Number.NaN }, 'RangeError', /clipLow must be in \[0, 1\], got nan/],
    [{ clipHigh: -1 }, 'RangeError', /clipHigh must be a finite number >= 0/],
    [{ clipHigh: Infinity }, 'RangeError', /clipHigh must be a finite number >= 0/],
    [{ dualClipC: 1 }, 'RangeError', /dualClipC must be a finite number > 1, got 1/],
    [{ dualClipC: 0.5 }, 'RangeError', /dualClipC must be a finite number > 1/],
    [{ klCoef: -0.1 }, 'RangeError', /klCoef must be a finite number >= 0/],
    [{ entropyCoef: Infinity }, 'RangeError', /entropyCoef must be finite/],
    [
      { klType: 'k5' as never },
      'RangeError',
      /klType must be one of 'k1', 'k2', 'k3', 'abs', 'kl', 'mse', 'low_var_kl', got 'k5'/,
    ],
    [
      { aggMode: 'mean' as never },
      'RangeError',
      /aggMode must be one of 'token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm'/,
    ],
    [{ lossScale: 0 }, 'RangeError', /lossScale must be a finite number > 0/],
    [{ globalTokenCount: 0 }, 'RangeError', /globalTokenCount must be a finite number > 0/],
    [{ globalSeqCount: -2 }, 'RangeError', /globalSeqCount must be a finite number > 0/],
    [{ clipLow: '0.2' as never }, 'TypeError', /clipLow must be a number/],
    [{ klType: 3 as never }, 'TypeError', /klType must be a string/],
    [{ clip: 0.2 } as never, 'RangeError', /opts\.clip is not an option of policyLoss \(known: .*clipLow/],
    [{ device: 'gpu' as never }, 'RangeError', /device must be 'cpu', 'cuda' or 'auto', got 'gpu'/],
    [{ out: new Float32Array(5) }, 'RangeError', /out has length 5, expected 12/],
  ];
  for (const [opts, name, message] of bad) {
    t.throws(() => policyLoss(inputs(), shape, opts), { name, message }, JSON.stringify(opts));
  }
  t.throws(() => policyLoss(inputs(), shape, 'fast' as never), {
    name: 'TypeError',
    message: /opts must be an object/,
  });
  const { refLogProbs: _r, entropy: _e, ...plain } = inputs();
  t.throws(() => policyLoss(plain, shape, { klType: 'k1' }), {
    name: 'RangeError',
    message: /klType needs refLogProbs/,
  });
  t.throws(() => policyLoss(plain, shape, { klCoef: 0.1 }), {
    name: 'RangeError',
    message: /klCoef is not 0 but there are no refLogProbs/,
  });
  t.throws(() => policyLoss(plain, shape, { entropyCoef: 0.1 }), {
    name: 'RangeError',
    message: /entropyCoef is not 0 but there is no entropy input/,
  });
  const inp = inputs();
  t.throws(() => policyLoss(inp, shape, { out: inp.logProbs }), {
    name: 'RangeError',
    message: /out must not overlap an input array/,
  });
  // Without CUDA GRPO kernels (test/grpo/cuda.test.ts covers the GPU).
  if (!grpoAddon().grpoDevices().includes('cuda'))
    t.throws(() => policyLoss(inp, shape, { device: 'cuda' }), DeviceUnavailableError);
  await t.rejects(policyLossAsync(inp, shape, { dualClipC: 1 }), { name: 'RangeError', message: /dualClipC/ });
  t.equal(typeof policyLoss(inp, shape, { device: 'cpu' }).loss, 'number');
  t.equal(typeof policyLoss(inp, shape, { device: 'auto' }).loss, 'number');
});
