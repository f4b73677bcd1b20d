import t from 'tap';

import { grpoAddon } from '../../lib/grpo/native.js';

import {
  broadcastAdvantages,
  broadcastAdvantagesAsync,
  computeAdvantages,
  computeAdvantagesAsync,
  type AdvantageEstimator,
} from '../../lib/grpo/index.js';
import { DeviceUnavailableError } from '../../lib/native/index.js';
import { closeness, refAdvantages, rng, uniform } from './fixtures/reference.js';

/** Random rewards and shuffled, non-contiguous group ids; every group has >= minSize members. */
function batchOf(seed: number, groups: number, maxSize: number, minSize: number, idPool: number[]) {
  const r = rng(seed);
  const ids: number[] = [];
  const used = new Set<number>();
  for (let g = 0; g < groups; g++) {
    let id: number;
    do id = idPool[Math.floor(r() * idPool.length)]! + (idPool.length < groups ? g * 7919 : 0);
    while (used.has(id));
    used.add(id);
    const size = minSize + Math.floor(r() * (maxSize - minSize + 1));
    for (let k = 0; k < size; k++) ids.push(id);
  }
  for (let i = ids.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  // Rewards: continuous values, plus runs of repeated values (binary-reward-like groups).
  const rewards = ids.map(() => (r() < 0.3 ? Math.round(r()) : uniform(r, -2, 3)));
  return { rewards: Float32Array.from(rewards), groupIds: Int32Array.from(ids) };
}

const SPARSE_IDS = [-2147483648, 2147483647, -1, 0, 1, 65536, -65537, 1 << 24, 123456789, -987654321];

t.test('every estimator matches the float64 reference on random groups', async (t) => {
  const estimators: AdvantageEstimator[] = ['grpo', 'rloo', 'grpo_passk'];
  const shapes = [
    { groups: 1, maxSize: 1, pool: [42] },
    { groups: 3, maxSize: 5, pool: [3, 1000000, -7] },
    { groups: 37, maxSize: 9, pool: SPARSE_IDS },
    { groups: 4001, maxSize: 11, pool: [0] }, // > one parallel task of groups (16384 responses)
  ];
  let seed = 1;
  for (const estimator of estimators) {
    for (const s of shapes) {
      const minSize = estimator === 'grpo_passk' ? 2 : 1;
      const { rewards, groupIds } = batchOf(seed++, s.groups, Math.max(s.maxSize, minSize), minSize, s.pool);
      for (const normByStd of [true, false]) {
        for (const eps of [1e-6, 0.1, 0]) {
          const got = computeAdvantages(rewards, groupIds, { estimator, normByStd, eps });
          const want = refAdvantages(rewards, groupIds, { estimator, normByStd, eps });
          t.ok(got instanceof Float32Array && got.length === rewards.length);
          const c = closeness(got, want, 2e-6, 1e-6);
          if (c > 1) t.fail(`${estimator} n=${rewards.length} normByStd=${normByStd} eps=${eps}: closeness ${c}`);
        }
      }
    }
  }
  t.pass('all shapes within tolerance');
});

t.test('hand-computed values (VERL conventions)', async (t) => {
  // One group [1, 0, 0, 1]: mean 0.5, unbiased std sqrt(1/3).
  const a = computeAdvantages(new Float32Array([1, 0, 0, 1]), new Int32Array([9, 9, 9, 9]));
  const v = 0.5 / (Math.sqrt(1 / 3) + 1e-6);
  t.ok(closeness(a, [v, -v, -v, v], 1e-6, 0) <= 1, `${Array.from(a)}`);
  // Dr. GRPO: no std.
  t.same(
    Array.from(computeAdvantages(new Float32Array([1, 0, 0, 1]), new Int32Array(4), { normByStd: false })),
    [0.5, -0.5, -0.5, 0.5],
  );
  // RLOO: r - mean of the others.
  t.same(
    Array.from(computeAdvantages(new Float32Array([1, 2, 6]), new Int32Array(3), { estimator: 'rloo' })),
    [-3, -1.5, 4.5],
  );
  // pass@k: only the best gets (r_max - r_2nd) / (std + eps).
  const p = computeAdvantages(new Float32Array([0.5, 2, 1]), new Int32Array([4, 4, 4]), { estimator: 'grpo_passk' });
  t.equal(p[0], 0);
  t.equal(p[2], 0);
  t.ok(Math.abs(p[1]! - 1 / (0.7637626158259734 + 1e-6)) < 1e-6);
});

t.test('edge cases: group of one, equal rewards, ties', async (t) => {
  // A group of one: mean 0, std 1.
  const single = computeAdvantages(new Float32Array([0.75, 3, 1]), new Int32Array([5, 6, 6]));
  t.equal(single[0], Math.fround(0.75 / (1 + 1e-6)), 'grpo: r / (1 + eps)');
  t.equal(
    computeAdvantages(new Float32Array([0.75]), new Int32Array([0]), { normByStd: false })[0],
    0.75,
    'Dr. GRPO: r - 0',
  );
  t.equal(
    computeAdvantages(new Float32Array([0.75]), new Int32Array([0]), { estimator: 'rloo' })[0],
    0.75,
    'rloo: keeps its reward (VERL)',
  );
  // Equal rewards give exactly 0, for any eps (also 0, where the std is 0 too).
  for (const eps of [1e-6, 0]) {
    for (const estimator of ['grpo', 'rloo', 'grpo_passk'] as const) {
      const eq = computeAdvantages(new Float32Array([0.1, 0.1, 0.1, 0.3, 0.3]), new Int32Array([1, 1, 1, 2, 2]), {
        estimator,
        eps,
      });
      t.same(Array.from(eq), [0, 0, 0, 0, 0], `${estimator} eps=${eps}`);
    }
  }
  // pass@k with a tie at the top: the gap is 0.
  t.same(
    Array.from(computeAdvantages(new Float32Array([1, 1, 0]), new Int32Array(3), { estimator: 'grpo_passk' })),
    [0, 0, 0],
  );
});

t.test('results do not depend on the order of the responses', async (t) => {
  const { rewards, groupIds } = batchOf(77, 50, 8, 1, SPARSE_IDS);
  const base = computeAdvantages(rewards, groupIds);
  const perm = Array.from(rewards.keys()).reverse();
  const again = computeAdvantages(
    Float32Array.from(perm.map((i) => rewards[i]!)),
    Int32Array.from(perm.map((i) => groupIds[i]!)),
  );
  // Sums run in index order, so reversed groups may differ in the last bit only.
  t.ok(closeness(Float32Array.from(perm.map((i) => base[i]!)), again, 1e-6, 1e-7) <= 1);
  t.same(computeAdvantages(rewards, groupIds), base, 'same input, same bits');
});

t.test('async variant and caller-provided output', async (t) => {
  const { rewards, groupIds } = batchOf(5, 20, 6, 2, SPARSE_IDS);
  for (const estimator of ['grpo', 'rloo', 'grpo_passk'] as const) {
    t.same(
      await computeAdvantagesAsync(rewards, groupIds, { estimator }),
      computeAdvantages(rewards, groupIds, { estimator }),
    );
  }
  const out = new Float32Array(rewards.length).fill(Number.NaN);
  t.equal(computeAdvantages(rewards, groupIds, { out }), out, 'returns opts.out');
  t.same(out, computeAdvantages(rewards, groupIds));
  t.throws(() => computeAdvantages(rewards, groupIds, { out: rewards }), {
    name: 'RangeError',
    message: /out must not overlap/,
  });
  t.throws(() => computeAdvantages(rewards, groupIds, { out: new Float32Array(3) }), {
    name: 'RangeError',
    message: /out has length 3/,
  });
});

t.test('bad input to computeAdvantages', async (t) => {
  const r = new Float32Array([1, 2, 3]);
  const g = new Int32Array([0, 0, 1]);
  t.throws(() => computeAdvantages(new Float32Array(0), new Int32Array(0)), {
    name: 'RangeError',
    message: /rewards must not be empty/,
  });
  t.throws(() => computeAdvantages(r, new Int32Array(2)), {
    name: 'RangeError',
    message: /groupIds has length 2, expected 3/,
  });
  t.throws(() => computeAdvantages(new Float32Array([1, Number.NaN, 3]), g), {
    name: 'RangeError',
    message: /rewards\[1\] is NaN/,
  });
  t.throws(() => computeAdvantages(new Float32Array([1, 2, -Infinity]), g), {
    name: 'RangeError',
    message: /rewards\[2\] is -Infinity/,
  });
  t.throws(() => computeAdvantages(Float64Array.from(r) as unknown as Float32Array, g), {
    name: 'TypeError',
    message: /rewards must be a Float32Array, got Float64Array/,
  });
  t.throws(() => computeAdvantages(r, [0, 0, 1] as unknown as Int32Array), {
    name: 'TypeError',
    message: /groupIds must be an Int32Array/,
  });
  t.throws(() => computeAdvantages(r, g, { estimator: 'ppo' as AdvantageEstimator }), {
    name: 'RangeError',
    message: /estimator must be one of 'grpo', 'rloo', 'grpo_passk'/,
  });
  t.throws(() => computeAdvantages(r, g, { eps: -1 }), {
    name: 'RangeError',
    message: /eps must be a finite number >= 0/,
  });
  t.throws(() => computeAdvantages(r, g, { eps: Number.NaN }), { name: 'RangeError', message: /eps/ });
  t.throws(() => computeAdvantages(r, g, { eps: '0.1' as unknown as number }), {
    name: 'TypeError',
    message: /eps must be a number/,
  });
  t.throws(() => computeAdvantages(r, g, { normByStd: 1 as unknown as boolean }), {
    name: 'TypeError',
    message: /normByStd must be a boolean/,
  });
  t.throws(() => computeAdvantages(r, g, { estimator: 'grpo_passk' }), {
    name: 'RangeError',
    message: /grpo_passk needs at least 2 responses per group, but group 1 \(response 2\) has 1/,
  });
  t.throws(() => computeAdvantages(r, g, { epsilon: 1 } as never), {
    name: 'RangeError',
    message: /opts\.epsilon is not an option of computeAdvantages \(known: estimator, normByStd, eps, device, out\)/,
  });
  // Without CUDA GRPO kernels (test/grpo/cuda.test.ts covers the GPU).
  if (!grpoAddon().grpoDevices().includes('cuda'))
    t.throws(() => computeAdvantages(r, g, { device: 'cuda' }), DeviceUnavailableError);
  t.throws(() => computeAdvantages(r, g, { device: 'gpu' as never }), {
    name: 'RangeError',
    message: /device must be/,
  });
  await t.rejects(computeAdvantagesAsync(new Float32Array([Number.NaN]), new Int32Array(1)), {
    name: 'RangeError',
    message: /rewards\[0\] is NaN/,
  });
  await t.rejects(computeAdvantagesAsync(r, g, { estimator: 'grpo_passk' }), { name: 'RangeError' });
});

t.test('broadcastAdvantages multiplies by the mask', async (t) => {
  const r = rng(11);
  for (const [batch, len] of [
    [1, 1],
    [3, 7],
    [5, 40000],
    [130, 513],
  ] as const) {
    const adv = Float32Array.from({ length: batch }, () => uniform(r, -2, 2));
    const mask = Float32Array.from({ length: batch * len }, () => (r() < 0.7 ? 1 : 0));
    const got = broadcastAdvantages(adv, mask, batch, len);
    let ok = got.length === batch * len;
    for (let j = 0; j < batch * len && ok; j++) ok = got[j] === adv[Math.floor(j / len)]! * mask[j]!;
    t.ok(ok, `[${batch}, ${len}]`);
    t.same(await broadcastAdvantagesAsync(adv, mask, batch, len), got);
  }
  const out = new Float32Array(6);
  t.equal(broadcastAdvantages(new Float32Array([2, -1]), new Float32Array([1, 1, 0, 0, 1, 1]), 2, 3, { out }), out);
  t.same(Array.from(out), [2, 2, 0, 0, -1, -1]);
});

t.test('bad input to broadcastAdvantages', async (t) => {
  const adv = new Float32Array([1, 2]);
  const mask = new Float32Array([1, 0, 1, 1]);
  t.throws(() => broadcastAdvantages(adv, mask, 0, 2), { name: 'RangeError', message: /batch must be in \[1/ });
  t.throws(() => broadcastAdvantages(adv, mask, 2, 3), {
    name: 'RangeError',
    message: /responseMask has length 4, expected 6/,
  });
  t.throws(() => broadcastAdvantages(adv, mask, 4, 1), { name: 'RangeError', message: /adv has length 2, expected 4/ });
  t.throws(() => broadcastAdvantages(adv, new Float32Array([1, 0, 0.5, 1]), 2, 2), {
    name: 'RangeError',
    message: /responseMask\[1, 0\] is 0\.5/,
  });
  t.throws(() => broadcastAdvantages(adv, new Float32Array([1, Number.NaN, 1, 1]), 2, 2), {
    name: 'RangeError',
    message: /responseMask\[0, 1\] is NaN/,
  });
  t.throws(() => broadcastAdvantages(new Float32Array([1, Infinity]), mask, 2, 2), {
    name: 'RangeError',
    message: /adv\[1\] is Infinity/,
  });
  t.throws(() => broadcastAdvantages(adv, mask, 2, 2, { out: mask }), { name: 'RangeError', message: /overlap/ });
  t.throws(() => broadcastAdvantages(adv, mask, 2.5, 2), { name: 'RangeError', message: /batch must be an integer/ });
  await t.rejects(broadcastAdvantagesAsync(adv, new Float32Array([1, 0, 2, 1]), 2, 2), {
    name: 'RangeError',
    message: /responseMask\[1, 0\] is 2/,
  });
});
