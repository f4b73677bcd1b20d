import t from 'tap';

import {
  AutoresetMode,
  Box,
  ClosedEnvironmentError,
  Discrete,
  GymError,
  MultiDiscrete,
  SyncVectorEnv,
  make,
  makeVec,
  type Info,
} from '../../lib/gym/index.js';
import { addInfo } from '../../lib/gym/vector/info.js';
import { expandSeeds, splitResetMask } from '../../lib/gym/vector/vector-env.js';
import { AsyncCountingEnv, CountingEnv, WideCountingEnv } from './fixtures/envs.js';

const obsRows = (obs: unknown): number[][] => {
  const a = obs as Float32Array;
  const rows: number[][] = [];
  for (let i = 0; i < a.length; i += 2) rows.push([a[i], a[i + 1]]);
  return rows;
};

t.test('addInfo builds arrays with `_key` masks (Gymnasium _add_info)', async (t) => {
  const infos: Info = {};
  addInfo(infos, { n: 1.5, flag: true, s: 'a', v: Float32Array.of(1, 2), nested: { x: 1 } }, 0, 3);
  addInfo(infos, { n: 2, s: 'c', v: Float32Array.of(3, 4) }, 2, 3);
  t.ok(infos.n instanceof Float64Array);
  t.same(Array.from(infos.n as Float64Array), [1.5, 0, 2], 'numbers: zeros where absent');
  t.same(infos._n, [true, false, true], 'mask');
  t.same(infos.flag, [true, false, false], 'booleans: false where absent');
  t.same(infos._flag, [true, false, false]);
  t.same(infos.s, ['a', null, 'c'], 'other values: null where absent');
  t.same(Array.from(infos.v as Float32Array), [1, 2, 0, 0, 3, 4], 'typed arrays are stacked');
  t.same(infos.nested, { x: Float64Array.of(1, 0, 0), _x: [true, false, false] }, 'dicts are vectorised recursively');
  t.same(infos._nested, [true, false, false]);
  const mixed: Info = {};
  addInfo(mixed, { k: 1 }, 0, 2);
  addInfo(mixed, { k: 'two' }, 1, 2);
  t.same(mixed.k, [1, 'two'], 'mixed kinds fall back to a plain array');
  const mixed2: Info = {};
  addInfo(mixed2, { k: true }, 0, 3);
  addInfo(mixed2, { k: 5 }, 1, 3);
  t.same(mixed2.k, [true, 5, null], 'a boolean column becomes plain with nulls');
  const mixed3: Info = {};
  addInfo(mixed3, { v: Float32Array.of(1, 2) }, 0, 2);
  addInfo(mixed3, { v: Float32Array.of(1, 2, 3) }, 1, 2);
  t.same(
    (mixed3.v as unknown[]).map((x) => Array.from(x as Float32Array)),
    [
      [1, 2],
      [1, 2, 3],
    ],
    'ragged typed arrays become a plain array',
  );
});

t.test('seed and reset_mask helpers', async (t) => {
  t.same(expandSeeds(5, 3), [5, 6, 7], 'an integer seed s gives s + i');
  t.same(expandSeeds(5n, 2), [5n, 6n]);
  t.same(expandSeeds(null, 2), [null, null]);
  t.same(expandSeeds([1, null], 2), [1, null]);
  t.throws(() => expandSeeds([1], 2), /length must match numEnvs=2/);
  t.throws(() => expandSeeds('x' as never, 2), TypeError);
  t.same(splitResetMask({ reset_mask: [true, false], a: 1 }, 2), { mask: [true, false], options: { a: 1 } });
  t.same(splitResetMask({ resetMask: Uint8Array.of(0, 1) }, 2).mask, [false, true]);
  t.same(splitResetMask(null, 2), { mask: null, options: null });
  t.throws(() => splitResetMask({ reset_mask: [false, false] }, 2), /at least one true/);
  t.throws(() => splitResetMask({ reset_mask: [true] }, 2), /length 2/);
  t.throws(() => splitResetMask({ reset_mask: 'x' }, 2), TypeError);
  t.throws(() => splitResetMask({ reset_mask: ['x', 1] }, 2), TypeError);
});

const make2 = (mode?: AutoresetMode, lengths = [2, 3]): SyncVectorEnv<Float32Array, Int32Array | number[]> =>
  new SyncVectorEnv<Float32Array, Int32Array | number[]>(
    lengths.map((length) => () => new CountingEnv({ length })),
    { autoresetMode: mode },
  );

t.test('SyncVectorEnv basics', async (t) => {
  const envs = make2();
  t.equal(envs.numEnvs, 2);
  t.equal(envs.toString(), 'SyncVectorEnv(num_envs=2)');
  t.ok(envs.singleObservationSpace instanceof Box);
  t.same((envs.observationSpace as Box).shape, [2, 2], 'batched observation space');
  t.ok(envs.actionSpace instanceof MultiDiscrete, 'batched Discrete is a MultiDiscrete');
  t.equal(envs.metadata.autoresetMode, AutoresetMode.NEXT_STEP, 'default autoreset mode');
  t.equal(envs.metadata.renderFps, 4, 'sub-env metadata');
  t.equal(envs.renderMode, 'ansi');
  const [obs, infos] = envs.reset({ seed: 10 });
  t.ok(obs instanceof Float32Array && obs.length === 4, 'a flat typed batch');
  const single0 = new CountingEnv().reset({ seed: 10 });
  const single1 = new CountingEnv().reset({ seed: 11 });
  t.same(obsRows(obs), [Array.from(single0[0]), Array.from(single1[0])], 'sub-env i is seeded with seed + i');
  t.same(infos._reset, [true, true]);
  t.same(Array.from(infos.start as Float64Array), [single0[1].start, single1[1].start]);
  const [obs2, rewards, terms, truncs, info2] = envs.step(Int32Array.of(1, 0));
  t.same(
    obsRows(obs2).map((r) => r[0]),
    [1, 1],
  );
  t.ok(rewards instanceof Float64Array);
  t.same(Array.from(rewards), [11, 10]);
  t.same(terms, [false, false]);
  t.same(truncs, [false, false]);
  t.same(Array.from(info2.action as Float64Array), [1, 0]);
  t.same(envs.step([0, 0])[0] !== obs2, true, 'copies by default');
  envs.npRandom.random();
  t.equal(envs.npRandom.seed, 10, 'an integer reset seed seeds the vector generator');
  envs.close();
  envs.close();
  t.ok(
    envs.envs.every((e) => (e as CountingEnv).closeCount === 1),
    'close is idempotent',
  );
  t.throws(() => envs.step([0, 0]), ClosedEnvironmentError);
  t.throws(() => envs.reset(), /after a call to `close\(\)`/);
});

t.test('NEXT_STEP autoreset (Gymnasium 1.x default)', async (t) => {
  const envs = make2(AutoresetMode.NEXT_STEP, [2, 5]);
  envs.reset({ seed: 0 });
  envs.step([0, 0]);
  const [obs, rew, term, trunc, info] = envs.step([1, 1]);
  t.same(term, [true, false], 'env 0 terminates at t = 2');
  t.same(Array.from(rew), [21, 21]);
  t.same(obsRows(obs)[0][0], 2, 'the terminal observation is returned as is');
  t.same(info.last, [true, false], 'a boolean info: false where absent');
  t.notOk('final_obs' in info, 'no final_obs in NEXT_STEP');
  const [obs2, rew2, term2, trunc2, info2] = envs.step([1, 1]);
  t.same(obsRows(obs2)[0][0], 0, 'the next step resets env 0: its first observation');
  t.same(Array.from(rew2), [0, 31], 'reward 0 for the resetting sub-env');
  t.same(
    [term2, trunc2],
    [
      [false, false],
      [false, false],
    ],
  );
  t.same(info2._reset, [true, false], 'the reset info of env 0');
  t.same(info2._t, [false, true], 'and the step info of env 1');
  t.same(obsRows(envs.step([0, 0])[0])[0][0], 1, 'then env 0 steps again');
  t.same(trunc, [false, false]);
});

t.test('SAME_STEP autoreset', async (t) => {
  const envs = make2(AutoresetMode.SAME_STEP, [2, 5]);
  const [first] = envs.reset({ seed: 0 });
  envs.step([0, 0]);
  const [obs, rew, term, , info] = envs.step([1, 0]);
  t.same(term, [true, false]);
  t.same(Array.from(rew), [21, 20], 'the ending step keeps its reward');
  t.same(obsRows(obs)[0][0], 0, "the observation is the new episode's first");
  t.same(info._final_obs, [true, false]);
  const finalObs = info.final_obs as Array<Float32Array | null>;
  t.ok(
    Array.isArray(finalObs) && finalObs.length === 2,
    'final_obs: one entry per sub-environment (not batched), as Gymnasium',
  );
  t.ok(finalObs[0] instanceof Float32Array, 'the ended sub-env: its own last observation');
  t.same(Array.from(finalObs[0]!), [2, obsRows(first)[0][1]], 'the last observation [t = 2, start of that episode]');
  t.equal(finalObs[1], null, 'null where the episode did not end (not a row of zeros)');
  const finalInfo = info.final_info as Info;
  t.same(info._final_info, [true, false]);
  t.same(finalInfo.last, [true, false]);
  t.same(finalInfo._last, [true, false]);
  t.same(Array.from(finalInfo.t as Float64Array), [2, 0]);
  t.same(info._reset, [true, false], 'followed by the reset info');
  t.same(info._t, [false, true], 'env 0 reports no step info at the top level');
  const [obs2, rew2] = envs.step([0, 0]);
  t.same(obsRows(obs2)[0][0], 1, 'no extra reset on the following step');
  t.same(Array.from(rew2), [10, 30]);
});

t.test('DISABLED autoreset and partial resets with reset_mask', async (t) => {
  const envs = make2(AutoresetMode.DISABLED, [1, 3]);
  envs.reset({ seed: 0 });
  const [obs, , term] = envs.step([0, 0]);
  t.same(term, [true, false]);
  t.throws(() => envs.step([0, 0]), /Sub-environment 0 has ended its episode and the autoreset mode is DISABLED/);
  const [obs2, info2] = envs.reset({ seed: [50, null], options: { reset_mask: [true, false] } });
  t.same(obsRows(obs2)[0], [0, new CountingEnv().reset({ seed: 50 })[0][1]], 'env 0 reset with its seed');
  t.same(obsRows(obs2)[1], obsRows(obs)[1], 'env 1 keeps its observation');
  t.same(info2._reset, [true, false], 'infos only for the reset sub-envs');
  const [obs3, , term3] = envs.step([0, 0]);
  t.same(term3, [true, false]);
  t.same(
    obsRows(obs3).map((r) => r[0]),
    [1, 2],
  );
  t.throws(() => envs.reset({ options: { reset_mask: [false, false] } }), /at least one true/);
});

t.test('call, getAttr, setAttr, render and space checks', async (t) => {
  const envs = make2();
  envs.reset();
  t.same(envs.call('describe', '>'), ['>counting:2', '>counting:3'], 'methods are called with args');
  t.same(envs.getAttr('length'), [2, 3]);
  envs.setAttr('label', ['a', 'b']);
  t.same(envs.getAttr('label'), ['a', 'b']);
  envs.setAttr('label', 'same');
  t.same(envs.getAttr('label'), ['same', 'same']);
  t.throws(() => envs.setAttr('label', ['x']), /Got `1` values for 2 environments/);
  t.same(envs.render(), ['same:t=0', 'same:t=0']);
  t.throws(() => envs.call('noSuchAttr'), /has no attribute `noSuchAttr`/);
  const wrapped = new SyncVectorEnv([() => make('sinkflex/CartPole-v1'), () => make('sinkflex/CartPole-v1')]);
  t.same(wrapped.getAttr('maxEpisodeSteps'), [500, 500], 'attributes of wrappers');
  t.same(wrapped.getAttr('gravity'), [9.8, 9.8], 'attributes of the base env through the wrappers');
  t.throws(
    () => new SyncVectorEnv([() => new CountingEnv(), () => new WideCountingEnv()]),
    /observation space of sub-environment 1/,
  );
  class OtherAction extends CountingEnv {
    override readonly actionSpace = new Discrete(3);
  }
  t.throws(() => new SyncVectorEnv([() => new CountingEnv(), () => new OtherAction()]), GymError);
  t.throws(() => new SyncVectorEnv([() => new AsyncCountingEnv() as never]), /is an AsyncEnv/);
  t.throws(() => new SyncVectorEnv([() => ({}) as never]), /did not return an Env/);
  t.throws(() => new SyncVectorEnv([]), RangeError);
  t.throws(() => make2('Sometimes' as never), /Unexpected autoreset mode/);
  const noCopy = new SyncVectorEnv([() => new CountingEnv()], { copy: false });
  const [a] = noCopy.reset();
  const [b] = noCopy.step([0]);
  t.equal(a, b, 'copy: false returns the internal buffer');
});

t.test('SyncVectorEnv on CartPole: same seeds, same trajectories as single envs', async (t) => {
  const envs = await makeVec<Float32Array, Int32Array>('sinkflex/CartPole-v1', 3);
  t.equal(envs.toString(), 'SyncVectorEnv(sinkflex/CartPole-v1, num_envs=3)');
  const singles = [0, 1, 2].map(() => make<Float32Array, number>('sinkflex/CartPole-v1'));
  let [obs] = envs.reset({ seed: 123 });
  const singleObs = singles.map((e, i) => e.reset({ seed: 123 + i })[0]);
  t.same(
    Array.from(obs),
    singleObs.flatMap((o) => Array.from(o)),
  );
  envs.actionSpace.seed(5);
  const done = [false, false, false];
  let mismatch = 0;
  for (let step = 0; step < 300; step++) {
    const actions = envs.actionSpace.sample() as Int32Array;
    const [o, r, te, tr] = envs.step(actions);
    obs = o;
    singles.forEach((e, i) => {
      if (done[i]) {
        const [so] = e.reset();
        if (Array.from(so).join() !== Array.from(obs.subarray(4 * i, 4 * i + 4)).join() || r[i] !== 0) mismatch++;
        done[i] = false;
        return;
      }
      const [so, sr, ste, str] = e.step(actions[i]);
      if (
        Array.from(so).join() !== Array.from(obs.subarray(4 * i, 4 * i + 4)).join() ||
        sr !== r[i] ||
        ste !== te[i] ||
        str !== tr[i]
      )
        mismatch++;
      done[i] = ste || str;
    });
  }
  t.equal(mismatch, 0, 'every sub-env matches a single env stepped with the same actions (NEXT_STEP)');
  envs.close();
  const stats = await makeVec<Float32Array, number[]>('sinkflex/CartPole-v1', 2, {
    makeOptions: { recordEpisodeStatistics: true, maxEpisodeSteps: 3 },
  });
  stats.reset({ seed: 0 });
  stats.step([0, 0]);
  stats.step([0, 0]);
  const [, , , trunc, info] = stats.step([0, 0]);
  t.same(trunc, [true, true], 'makeOptions reach every sub-env');
  const episode = info.episode as Info;
  t.same(info._episode, [true, true], 'RecordEpisodeStatistics infos are vectorised with masks');
  t.same(Array.from(episode.r as Float64Array), [3, 3]);
  t.same(Array.from(episode.l as Float64Array), [3, 3]);
  t.same(episode._r, [true, true]);
  await t.rejects(makeVec('sinkflex/CartPole-v1', 0), RangeError);
  await t.rejects(makeVec('sinkflex/CartPole-v1', 2, { vectorizationMode: 'threads' as never }), /'sync' or 'async'/);
});
