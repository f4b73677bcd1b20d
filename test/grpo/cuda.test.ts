// GRPO kernels on devices. Without a GPU: 'cpu' DeviceTensor inputs (the CPU kernels over tensor
// memory, DeviceTensor results) and the argument checks of device calls. With a CUDA GRPO build
// and a GPU (the emulator counts; skipped with a visible message otherwise): advantages (every
// estimator, groups of 1 to 300, unsorted ids), the broadcast and the policy loss (every KL
// type, aggregation, entropy, per-row/per-token advantages, rows longer than one block) against
// the CPU kernels (fp32 within 1e-5 relative) and the float64 reference; Float32Array and
// DeviceTensor paths, Promise variants, determinism and identical error messages.
import t from 'tap';

import {
  broadcastAdvantages,
  broadcastAdvantagesAsync,
  computeAdvantages,
  computeAdvantagesAsync,
  policyLoss,
  policyLossAsync,
  type GrpoFloats,
  type KlType,
  type LossAggMode,
  type PolicyLossInputs,
  type PolicyLossOptions,
} from '../../lib/grpo/index.js';
import {
  cudaAvailable,
  isDeviceTensor,
  isOutOfMemoryError,
  memory,
  toDevice,
  type DeviceTensor,
} from '../../lib/native/index.js';
import { loadAddon } from '../../lib/native/loader.js';
import { grpoAddon } from '../../lib/grpo/native.js';
import { closeness, lossInputs, refAdvantages, refPolicyLoss, rng, uniform, type RefKl } from './fixtures/reference.js';

const MODES: LossAggMode[] = ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm'];
const KLS: (RefKl | undefined)[] = [undefined, 'k1', 'k2', 'k3', 'abs'];

/** Rewards in groups of random sizes (1..maxGroup), ids shuffled and sparse. */
function groupedRewards(seed: number, groups: number, maxGroup: number, minGroup = 1) {
  const r = rng(seed);
  const rewards: number[] = [];
  const ids: number[] = [];
  for (let g = 0; g < groups; g++) {
    const size = minGroup + Math.floor(r() * (maxGroup - minGroup + 1));
    const id = Math.floor(uniform(r, -1e9, 1e9));
    for (let k = 0; k < size; k++) {
      rewards.push(r() < 0.3 ? Math.round(r() * 2) / 2 : uniform(r, -2, 3));
      ids.push(id);
    }
  }
  // shuffle responses (ids stay attached)
  for (let i = rewards.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [rewards[i], rewards[j]] = [rewards[j]!, rewards[i]!];
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  return { rewards: Float32Array.from(rewards), ids: Int32Array.from(ids) };
}

function asArray(x: Float32Array | DeviceTensor): Float32Array {
  return isDeviceTensor(x) ? x.toArray() : x;
}

function toTensors(inp: PolicyLossInputs, device: 'cpu' | 'cuda'): PolicyLossInputs<DeviceTensor> {
  const d = (a: Float32Array) => toDevice(a, [a.length], { device });
  return {
    logProbs: d(inp.logProbs),
    oldLogProbs: d(inp.oldLogProbs),
    advantages: d(inp.advantages),
    responseMask: d(inp.responseMask),
    ...(inp.refLogProbs ? { refLogProbs: d(inp.refLogProbs) } : {}),
    ...(inp.entropy ? { entropy: d(inp.entropy) } : {}),
  };
}

function disposeAll(inp: PolicyLossInputs<DeviceTensor>): void {
  for (const v of Object.values(inp)) (v as DeviceTensor).dispose();
}

// ---- without a GPU: 'cpu' DeviceTensors ---------------------------------------------------------

t.test("'cpu' DeviceTensor inputs run the CPU kernels and return DeviceTensors", async (t) => {
  const { rewards, ids } = groupedRewards(3, 9, 7);
  const rT = toDevice(rewards, [rewards.length], { device: 'cpu' });
  const adv = computeAdvantages(rT, ids);
  t.ok(isDeviceTensor(adv));
  t.same(adv.shape, [rewards.length]);
  t.equal(adv.device, 'cpu');
  t.same(adv.toArray(), computeAdvantages(rewards, ids, { device: 'cpu' }), 'same bits as the Float32Array call');
  const advAsync = await computeAdvantagesAsync(rT, ids, { estimator: 'rloo' });
  t.same(advAsync.toArray(), computeAdvantages(rewards, ids, { estimator: 'rloo', device: 'cpu' }));

  const batch = 5,
    len = 7;
  const inp = lossInputs(11, batch, len, { ref: true, entropy: true });
  const mT = toDevice(inp.responseMask, [batch, len], { device: 'cpu' });
  const advRow = computeAdvantages(rewards.subarray(0, batch), ids.subarray(0, batch), { device: 'cpu' });
  const tok = broadcastAdvantages(advRow, mT, batch, len);
  t.ok(isDeviceTensor(tok), 'a DeviceTensor mask makes the result a DeviceTensor');
  t.same(asArray(tok), broadcastAdvantages(advRow, inp.responseMask, batch, len, { device: 'cpu' }));
  t.same((tok as DeviceTensor).shape, [batch, len]);
  const tokAsync = await broadcastAdvantagesAsync(advRow, mT, batch, len);
  t.same(asArray(tokAsync), asArray(tok));

  const dT = toTensors(inp, 'cpu');
  const shape = { batch, responseLen: len };
  const want = policyLoss(inp, shape, { aggMode: 'seq-mean-token-mean', entropyCoef: 0.01, device: 'cpu' });
  const got = policyLoss(dT, shape, { aggMode: 'seq-mean-token-mean', entropyCoef: 0.01 });
  t.ok(isDeviceTensor(got.dLogProbs));
  t.same(got.dLogProbs.toArray(), want.dLogProbs);
  t.same(got.metrics, want.metrics);
  t.equal(got.loss, want.loss);
  const gotAsync = await policyLossAsync(dT, shape, { aggMode: 'seq-mean-token-mean', entropyCoef: 0.01 });
  t.same(gotAsync.dLogProbs.toArray(), want.dLogProbs);
  // Mixed: Float32Arrays next to DeviceTensors are read where the call runs.
  const mixed = policyLoss<GrpoFloats>({ ...inp, logProbs: dT.logProbs }, shape);
  t.same(asArray(mixed.dLogProbs), policyLoss(inp, shape, { device: 'cpu' }).dLogProbs);

  // Argument checks of device calls.
  t.throws(() => computeAdvantages(rT, ids, { out: new Float32Array(rewards.length) }), {
    name: 'RangeError',
    message: /out cannot be used with DeviceTensor arguments/,
  });
  const bf = toDevice(rewards, [rewards.length], { device: 'cpu', dtype: 'bfloat16' });
  t.throws(() => computeAdvantages(bf, ids), { name: 'TypeError', message: /rewards must be a float32 DeviceTensor/ });
  t.throws(() => computeAdvantages(toDevice(rewards.subarray(1), [rewards.length - 1], { device: 'cpu' }), ids), {
    name: 'RangeError',
    message: /groupIds/,
  });
  t.throws(
    () =>
      broadcastAdvantages(
        advRow,
        toDevice(inp.responseMask.subarray(1), [batch * len - 1], { device: 'cpu' }),
        batch,
        len,
      ),
    {
      name: 'RangeError',
      message: /responseMask has 34 elements, expected 35/,
    },
  );
  t.throws(() => policyLoss<GrpoFloats>({ ...inp, entropy: bf }, shape), {
    name: 'TypeError',
    message: /entropy must be a float32/,
  });
  t.throws(() => policyLoss({ ...inp, logProbs: new Int32Array(3) as unknown as Float32Array }, shape), {
    name: 'TypeError',
    message: /logProbs must be a Float32Array, got Int32Array/,
  });
  const gone = toDevice(rewards, [rewards.length], { device: 'cpu' });
  gone.dispose();
  t.throws(() => computeAdvantages(gone, ids), { message: /rewards is a disposed DeviceTensor/ });
  if (!cudaAvailable()) {
    t.throws(() => computeAdvantages(rT, ids, { device: 'cuda' }), { message: /device 'cuda' is not available/ });
  } else {
    t.throws(() => computeAdvantages(rT, ids, { device: 'cuda' }), {
      name: 'RangeError',
      message: /opts.device is cuda:0 but the DeviceTensor arguments are on cpu/,
    });
  }
  const bad = Float32Array.from(rewards);
  bad[4] = NaN;
  const badT = toDevice(bad, [bad.length], { device: 'cpu' });
  t.throws(() => computeAdvantages(badT, ids), { name: 'RangeError', message: /rewards\[4\] is NaN/ });
  for (const x of [rT, adv, advAsync, mT, tok, tokAsync, got.dLogProbs, gotAsync.dLogProbs, bf, badT])
    (x as DeviceTensor).dispose();
  disposeAll(dT);
});

// ---- with a GPU -----------------------------------------------------------------------------------

const noGpu = !cudaAvailable()
  ? `no CUDA device: ${loadAddon().cudaStatus().reason}`
  : !grpoAddon().grpoDevices().includes('cuda')
    ? 'no CUDA device: this build has no CUDA GRPO kernels'
    : false;

t.test(
  'CUDA advantages and broadcast against the CPU kernels and the float64 reference',
  { skip: noGpu },
  async (t) => {
    const cases = [
      { seed: 1, groups: 37, max: 9, min: 1 },
      { seed: 2, groups: 5, max: 300, min: 129 }, // groups wider than a block
      { seed: 3, groups: 1, max: 1, min: 1 },
    ];
    for (const c of cases) {
      const { rewards, ids } = groupedRewards(c.seed, c.groups, c.max, c.min);
      for (const estimator of ['grpo', 'rloo', 'grpo_passk'] as const) {
        if (estimator === 'grpo_passk' && c.min < 2) continue;
        for (const normByStd of [true, false]) {
          const opts = { estimator, normByStd, eps: c.seed === 2 ? 0 : 1e-6 };
          const label = `seed ${c.seed} ${estimator} normByStd=${normByStd}`;
          const cpu = computeAdvantages(rewards, ids, { ...opts, device: 'cpu' });
          const gpu = computeAdvantages(rewards, ids, { ...opts, device: 'cuda' });
          t.ok(closeness(gpu, cpu, 1e-5, 1e-7) <= 1, `${label}: Float32Array path vs cpu`);
          t.ok(closeness(gpu, refAdvantages(rewards, ids, opts), 1e-5, 1e-6) <= 1, `${label}: vs float64 reference`);
          const rT = toDevice(rewards, [rewards.length], { device: 'cuda' });
          const dev = computeAdvantages(rT, ids, opts);
          t.equal(dev.device, 'cuda:0');
          t.same(dev.toArray(), gpu, `${label}: DeviceTensor path, same bits`);
          rT.dispose();
          dev.dispose();
        }
      }
    }
    const { rewards, ids } = groupedRewards(4, 11, 6, 2);
    const asyncGpu = await computeAdvantagesAsync(rewards, ids, { device: 'cuda', estimator: 'grpo_passk' });
    t.same(asyncGpu, computeAdvantages(rewards, ids, { device: 'cuda', estimator: 'grpo_passk' }), 'Promise variant');
    const out = new Float32Array(rewards.length);
    t.equal(computeAdvantages(rewards, ids, { device: 'cuda', out }), out, 'opts.out is filled');
    t.same(out, asyncGpu.length ? computeAdvantages(rewards, ids, { device: 'cuda' }) : out);

    // Errors: the CPU's messages.
    const bad = Float32Array.from(rewards);
    bad[7] = Infinity;
    bad[3] = NaN;
    t.throws(() => computeAdvantages(bad, ids, { device: 'cuda' }), {
      name: 'RangeError',
      message: /^rewards\[3\] is NaN/,
    });
    const solo = Int32Array.from(ids);
    solo[5] = 123456789;
    t.throws(() => computeAdvantages(rewards, solo, { device: 'cuda', estimator: 'grpo_passk' }), {
      name: 'RangeError',
      message: /grpo_passk needs at least 2 responses per group, but group 123456789 \(response 5\) has 1/,
    });

    // Broadcast: exact.
    const batch = 7,
      len = 2100; // rows cross the 2048-token blocks
    const r = rng(9);
    const adv = Float32Array.from({ length: batch }, () => uniform(r, -2, 2));
    const mask = Float32Array.from({ length: batch * len }, () => (r() < 0.7 ? 1 : 0));
    const want = broadcastAdvantages(adv, mask, batch, len, { device: 'cpu' });
    t.same(broadcastAdvantages(adv, mask, batch, len, { device: 'cuda' }), want, 'broadcast, Float32Array path');
    const mT = toDevice(mask, [batch, len], { device: 'cuda' });
    const tok = broadcastAdvantages(adv, mT, batch, len) as DeviceTensor;
    t.same(tok.toArray(), want, 'broadcast, DeviceTensor path');
    t.same(await broadcastAdvantagesAsync(adv, mask, batch, len, { device: 'cuda' }), want, 'broadcast Promise');
    mask[batch * len - 3] = 0.5;
    t.throws(() => broadcastAdvantages(adv, mask, batch, len, { device: 'cuda' }), {
      name: 'RangeError',
      message: /responseMask\[6, 2097\] is 0.5/,
    });
    adv[2] = NaN;
    t.throws(() => broadcastAdvantages(adv, mT, batch, len), { name: 'RangeError', message: /adv\[2\] is NaN/ });
    mT.dispose();
    tok.dispose();
  },
);

t.test('CUDA policy loss against the CPU kernel and the float64 reference', { skip: noGpu }, async (t) => {
  const shapes = [
    { batch: 5, len: 2051 }, // several blocks per row
    { batch: 9, len: 37 },
  ];
  let n = 0;
  for (const { batch, len } of shapes) {
    for (const kl of KLS) {
      for (const aggMode of MODES) {
        const perTokenAdv = n % 2 === 0;
        const entropy = n % 3 !== 1;
        const inp = lossInputs(100 + n++, batch, len, { perTokenAdv, ref: kl !== undefined, entropy });
        const opts: PolicyLossOptions = {
          aggMode,
          clipHigh: 0.28,
          ...(kl ? { klType: kl as KlType, klCoef: 0.05 } : {}),
          ...(entropy ? { entropyCoef: 0.003 } : {}),
          ...(aggMode === 'seq-mean-token-sum-norm' ? { lossScale: 1000 } : {}),
        };
        const label = `${batch}x${len} kl=${kl} ${aggMode} perTokenAdv=${perTokenAdv} entropy=${entropy}`;
        const shape = { batch, responseLen: len };
        const cpu = policyLoss(inp, shape, { ...opts, device: 'cpu' });
        const gpu = policyLoss(inp, shape, { ...opts, device: 'cuda' });
        const ref = refPolicyLoss(inp, batch, len, { ...opts, klType: kl });
        const near = (a: number | undefined, b: number, rtol: number, atol: number) =>
          a !== undefined && Math.abs(a - b) <= rtol * Math.abs(b) + atol;
        t.ok(near(gpu.loss, cpu.loss, 1e-5, 1e-7), `${label}: loss ${gpu.loss} vs cpu ${cpu.loss}`);
        t.ok(near(gpu.loss, ref.loss, 2e-6, 1e-6), `${label}: loss vs float64 reference`);
        for (const [k, v] of Object.entries(cpu.metrics)) {
          const g = (gpu.metrics as unknown as Record<string, number>)[k];
          if (!near(g, v, 1e-5, 1e-7)) t.fail(`${label}: ${k} ${g} vs cpu ${v}`);
        }
        t.same(Object.keys(gpu.metrics).sort(), Object.keys(cpu.metrics).sort(), `${label}: metric names`);
        // Relative to each element, plus 1e-6 of the largest (the KL and clip terms cancel).
        const scale = Math.max(...cpu.dLogProbs.map(Math.abs));
        const w = closeness(gpu.dLogProbs, cpu.dLogProbs, 1e-5, 1e-6 * scale + 1e-12);
        t.ok(w <= 1, `${label}: dLogProbs vs cpu (worst ${w.toFixed(3)})`);
        if (n % 5 === 0) {
          const dT = toTensors(inp, 'cuda');
          const dev = policyLoss(dT, shape, opts);
          t.equal(dev.dLogProbs.device, 'cuda:0');
          t.same(dev.dLogProbs.shape, [batch, len]);
          t.same(dev.dLogProbs.toArray(), gpu.dLogProbs, `${label}: DeviceTensor path, same bits`);
          t.equal(dev.loss, gpu.loss, `${label}: DeviceTensor path, same loss`);
          dev.dLogProbs.dispose();
          disposeAll(dT);
        }
      }
    }
  }
  const inp = lossInputs(7, 4, 300, { ref: true, entropy: true });
  const shape = { batch: 4, responseLen: 300 };
  const a = policyLoss(inp, shape, { device: 'cuda', entropyCoef: 0.01 });
  const b = await policyLossAsync(inp, shape, { device: 'cuda', entropyCoef: 0.01 });
  t.same(b.dLogProbs, a.dLogProbs, 'Promise variant, deterministic');
  t.equal(b.loss, a.loss);
  const globals = { globalTokenCount: 777, device: 'cuda' as const };
  t.ok(
    Math.abs(policyLoss(inp, shape, globals).loss - policyLoss(inp, shape, { ...globals, device: 'cpu' }).loss) < 1e-6,
    'globalTokenCount',
  );
  const empty = { ...inp, responseMask: new Float32Array(1200) };
  const none = policyLoss(empty, shape, { device: 'cuda' });
  t.equal(none.loss, 0, 'nothing unmasked: loss 0');
  t.equal(Math.max(...none.dLogProbs.map(Math.abs)), 0, 'and gradient 0');

  // Errors: the CPU's messages.
  const badMask = { ...inp, responseMask: Float32Array.from(inp.responseMask) };
  badMask.responseMask[2 * 300 + 17] = 2;
  t.throws(() => policyLoss(badMask, shape, { device: 'cuda' }), {
    name: 'RangeError',
    message: /responseMask\[2, 17\] is 2/,
  });
  const badLp = { ...inp, responseMask: new Float32Array(1200).fill(1), logProbs: Float32Array.from(inp.logProbs) };
  badLp.logProbs[301] = -Infinity;
  t.throws(() => policyLoss(badLp, shape, { device: 'cuda' }), {
    name: 'RangeError',
    message: /logProbs\[1, 1\] is -Infinity/,
  });
  const badEnt = { ...badLp, logProbs: inp.logProbs, entropy: Float32Array.from(inp.entropy!) };
  badEnt.entropy[5] = NaN;
  const dT = toTensors(badEnt, 'cuda');
  t.throws(() => policyLoss(dT, shape, { entropyCoef: 0.1 }), {
    name: 'RangeError',
    message: /entropy\[0, 5\] is NaN/,
  });
  disposeAll(dT);
});

t.test(
  'CUDA GRPO: device memory is freed, out of memory is catchable, mixed devices are refused',
  { skip: noGpu },
  async (t) => {
    const inp = lossInputs(21, 6, 500, { ref: true });
    const shape = { batch: 6, responseLen: 500 };
    const { rewards, ids } = groupedRewards(22, 7, 5);
    const base = memory.currentBytes('cuda');
    policyLoss(inp, shape, { device: 'cuda' });
    computeAdvantages(rewards, ids, { device: 'cuda' });
    broadcastAdvantages(inp.advantages, inp.responseMask, 6, 500, { device: 'cuda' });
    t.equal(memory.currentBytes('cuda'), base, 'Float32Array calls leave no device memory behind');
    let caught: unknown;
    try {
      memory.withLimit(base + 4096, () => policyLoss(inp, shape, { device: 'cuda' }), 'cuda');
    } catch (e) {
      caught = e;
    }
    t.ok(isOutOfMemoryError(caught), 'past the tracked device limit: OutOfMemoryError');
    t.equal(memory.currentBytes('cuda'), base, 'nothing leaked after the out-of-memory error');
    const onGpu = toDevice(inp.logProbs, [6, 500], { device: 'cuda' });
    const onCpu = toDevice(inp.oldLogProbs, [6, 500], { device: 'cpu' });
    t.throws(() => policyLoss<GrpoFloats>({ ...inp, logProbs: onGpu, oldLogProbs: onCpu }, shape), {
      name: 'RangeError',
      message: /the DeviceTensor arguments are on different devices \(cuda:0 and cpu\)/,
    });
    t.throws(() => policyLoss<GrpoFloats>({ ...inp, logProbs: onGpu }, shape, { device: 'cpu' }), {
      name: 'RangeError',
      message: /opts.device is cpu but the DeviceTensor arguments are on cuda:0/,
    });
    onGpu.dispose();
    onCpu.dispose();
  },
);
