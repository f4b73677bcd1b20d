// AsyncVectorEnv: determinism against SyncVectorEnv, the autoreset modes, env sources, the
// async call protocol. The first test uses the default worker, which loads the TypeScript
// sources through the parent's loader (execArgv; transpile-only keeps its start-up shorter);
// the others use a compiled copy (fixtures/compiled.ts), which starts in milliseconds.
process.env.TS_NODE_TRANSPILE_ONLY = '1';

import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import t from 'tap';

import {
  AlreadyPendingCallError,
  AsyncVectorEnv,
  AutoresetMode,
  ClosedEnvironmentError,
  NoAsyncCallError,
  RandomGenerator,
  SyncVectorEnv,
  TimeLimit,
  OrderEnforcing,
  PassiveEnvChecker,
  make,
  makeVec,
  type Env,
} from '../../lib/gym/index.js';
import { dataEquivalence } from '../../lib/gym/utils/data-equivalence.js';
import { resolveEnvSource } from '../../lib/gym/vector/protocol.js';
import { compiledGym, compiledWorkerOptions } from './fixtures/compiled.js';
import { CountingEnv } from './fixtures/envs.js';

const compiled = compiledGym();
const { fixtures, registerModule } = compiled;
const fast = compiledWorkerOptions(compiled);

t.test('same seed, same trajectories: AsyncVectorEnv vs SyncVectorEnv on CartPole', async (t) => {
  const asyncEnvs = await makeVec<Float32Array, Int32Array>('sinkflex/CartPole-v1', 2, {
    vectorizationMode: 'async',
    kwargs: { renderMode: 'ansi' },
    vectorKwargs: { timeoutMs: 30_000 },
  });
  t.teardown(() => asyncEnvs.close());
  t.equal(asyncEnvs.toString(), 'AsyncVectorEnv(sinkflex/CartPole-v1, num_envs=2)');
  t.same(asyncEnvs.aliveWorkers, [0, 1]);
  const syncEnvs = await makeVec<Float32Array, Int32Array>('sinkflex/CartPole-v1', 2, {
    kwargs: { renderMode: 'ansi' },
  });
  t.ok(
    asyncEnvs.observationSpace.equals(syncEnvs.observationSpace) && asyncEnvs.actionSpace.equals(syncEnvs.actionSpace),
    'spaces rebuilt from JSON',
  );
  t.same(asyncEnvs.metadata, syncEnvs.metadata);
  const a0 = await asyncEnvs.reset({ seed: 77 });
  const s0 = syncEnvs.reset({ seed: 77 });
  t.ok(dataEquivalence(a0, s0), 'reset');
  const rng = new RandomGenerator(3);
  let mismatches = 0;
  let episodes = 0;
  for (let step = 0; step < 250; step++) {
    const actions = Int32Array.of(rng.integers(2), rng.integers(2));
    const a = await asyncEnvs.step(actions);
    const s = syncEnvs.step(actions);
    if (!dataEquivalence(a, s)) mismatches++;
    episodes += a[2].filter(Boolean).length;
  }
  t.equal(mismatches, 0, 'observations, rewards, flags and infos are identical at every step');
  t.ok(episodes >= 4, `${episodes} episodes ended and were autoreset (NEXT_STEP)`);

  // attributes and calls through the workers
  t.same(await asyncEnvs.getAttr('maxEpisodeSteps'), [500, 500], 'wrapper attribute');
  t.same(await asyncEnvs.getAttr('gravity'), [9.8, 9.8], 'base env attribute through wrappers');
  await asyncEnvs.setAttr('forceMag', [5, 20]);
  t.same(await asyncEnvs.call('getWrapperAttr', 'forceMag'), [5, 20], 'setAttr per sub-env, call with args');
  await asyncEnvs.setAttr('forceMag', 10);
  t.same(await asyncEnvs.getAttr('forceMag'), [10, 10]);
  await t.rejects(asyncEnvs.setAttr('forceMag', [1]), /Got `1` values for 2 environments/);
  await t.rejects(
    asyncEnvs.call('noSuchAttr'),
    /call failed in 2 sub-environment\(s\): #0: TypeError: .*has no attribute `noSuchAttr`/,
  );
  await t.rejects(
    asyncEnvs.call('getWrapperAttr', 'step'),
    /DataCloneError: the result cannot be sent between threads/,
    'a result that cannot cross threads is an error, not a hang',
  );

  // partial reset with a mask and per-env seeds
  const [obsBefore] = await asyncEnvs.step(Int32Array.of(0, 0));
  const [obsMasked, infoMasked] = await asyncEnvs.reset({ seed: [5, 6], options: { reset_mask: [false, true] } });
  t.same(Array.from(obsMasked.subarray(0, 4)), Array.from(obsBefore.subarray(0, 4)), 'env 0 keeps its observation');
  t.same(
    Array.from(obsMasked.subarray(4)),
    Array.from(make<Float32Array, number>('sinkflex/CartPole-v1').reset({ seed: 6 })[0]),
    'env 1 reset with seed 6',
  );
  t.same(infoMasked, {});

  // the split async API
  asyncEnvs.stepAsync(Int32Array.of(1, 1));
  t.throws(() => asyncEnvs.stepAsync(Int32Array.of(1, 1)), AlreadyPendingCallError);
  t.throws(() => asyncEnvs.resetAsync(), /while waiting for a pending call to `step` to complete/);
  await t.rejects(asyncEnvs.resetWait(), NoAsyncCallError);
  const [, rewards] = await asyncEnvs.stepWait({ timeoutMs: 30_000 });
  t.same(Array.from(rewards), [1, 1]);
  await t.rejects(asyncEnvs.stepWait(), /without any prior call to `stepAsync`/);
  asyncEnvs.callAsync('describe');
  await t.rejects(asyncEnvs.callWait(), /has no attribute `describe`/);
  const frames = await asyncEnvs.render();
  t.equal(frames.length, 2);
  t.ok(
    frames.every((f) => typeof f === 'string' && /^\[-*[|/\\]-*\] x=/.test(f)),
    'render: one ansi frame per sub-env',
  );
  await asyncEnvs.close();
  await asyncEnvs.close();
  t.ok(asyncEnvs.closed);
  t.same(asyncEnvs.aliveWorkers, [], 'threads stopped');
  await t.rejects(asyncEnvs.step(Int32Array.of(0, 0)), ClosedEnvironmentError);
  syncEnvs.close();
});

/** A SyncVectorEnv of counting envs wrapped like `make('test/Counting-v0')` does. */
function syncCounting(lengths: number[], mode: AutoresetMode): SyncVectorEnv<Float32Array, number[]> {
  return new SyncVectorEnv(
    lengths.map(
      (length) => () =>
        new TimeLimit(
          new OrderEnforcing(new PassiveEnvChecker(new CountingEnv({ length })) as Env<Float32Array, number>),
          50,
        ) as Env,
    ),
    { autoresetMode: mode },
  );
}

t.test('SAME_STEP through workers, mixed sources (registered id with imports, async env module export)', async (t) => {
  const envs = await AsyncVectorEnv.create<Float32Array, number[]>(
    [
      { id: 'test/Counting-v0', kwargs: { length: 2 }, imports: [registerModule] },
      { module: fixtures, exportName: 'AsyncCountingEnv', kwargs: { length: 3 } },
    ],
    { autoresetMode: AutoresetMode.SAME_STEP, timeoutMs: 30_000, ...fast },
  );
  t.teardown(() => envs.close());
  t.equal(envs.metadata.autoresetMode, AutoresetMode.SAME_STEP);
  const reference = syncCounting([2, 3], AutoresetMode.SAME_STEP);
  t.ok(dataEquivalence(await envs.reset({ seed: 1 }), reference.reset({ seed: 1 })), 'reset');
  let sawFinal = 0;
  for (let step = 0; step < 8; step++) {
    const actions = [step % 2, 1 - (step % 2)];
    const a = await envs.step(actions);
    const s = reference.step(actions);
    if (!dataEquivalence(a, s)) t.fail(`step ${step} differs: ${JSON.stringify(a[4])} vs ${JSON.stringify(s[4])}`);
    if (a[4].final_obs) {
      sawFinal++;
      const fo = a[4].final_obs as Array<Float32Array | null>;
      const mask = a[4]._final_obs as boolean[];
      if (
        !Array.isArray(fo) ||
        fo.length !== 2 ||
        fo.some((o, i) => (mask[i] ? !(o instanceof Float32Array) : o !== null))
      ) {
        t.fail(
          `step ${step}: final_obs must hold one entry per sub-env (null where no episode ended), got ${JSON.stringify(fo)}`,
        );
      }
    }
  }
  t.ok(sawFinal >= 3, 'final_obs/final_info came back from the workers');
  await t.rejects(
    envs.call('describe', '#'),
    /call failed in 1 sub-environment\(s\): #1: TypeError: .*has no attribute `describe`/,
    'only the AsyncCountingEnv lacks it: the failure names its index',
  );
  t.same(
    await envs.getAttr('maxEpisodeSteps').catch((e: Error) => e.message),
    'call failed in 1 sub-environment(s): #1: TypeError: <AsyncCountingEnv instance> has no attribute `maxEpisodeSteps`',
  );
});

t.test('DISABLED through workers, factory exports', async (t) => {
  const envs = await AsyncVectorEnv.create<Float32Array, number[]>(
    [
      { module: fixtures, exportName: 'makeCounting', kwargs: { length: 1 } },
      { module: `${fixtures}#makeCounting`, kwargs: { length: 2 } },
    ],
    { autoresetMode: 'Disabled', timeoutMs: 30_000, ...fast },
  );
  t.teardown(() => envs.close());
  const reference = new SyncVectorEnv(
    [1, 2].map((length) => () => new CountingEnv({ length, label: 'factory' })),
    { autoresetMode: AutoresetMode.DISABLED },
  );
  t.ok(dataEquivalence(await envs.reset({ seed: 3 }), reference.reset({ seed: 3 })));
  t.ok(dataEquivalence(await envs.step([1, 1]), reference.step([1, 1])));
  await t.rejects(
    envs.step([0, 0]),
    /step failed in 1 sub-environment\(s\): #0: GymError: Sub-environment 0 has ended its episode and the autoreset mode is DISABLED/,
  );
  t.same(envs.aliveWorkers, [0, 1], 'a refused step does not kill the worker');
  const resetA = await envs.reset({ options: { reset_mask: [true, false] } });
  t.same(
    Array.from(resetA[0]).filter((_, i) => i % 2 === 0),
    [0, 2],
    'env 0 reset; env 1 kept at t = 2 (its step was taken although env 0 refused)',
  );
  t.same(await envs.getAttr('label'), ['factory', 'factory']);
});

t.test('env sources resolve relative module paths against the cwd', async (t) => {
  const here = new URL('./fixtures/envs.js', import.meta.url).href;
  const rel = `./${relative(process.cwd(), fileURLToPath(here))}`;
  t.same(resolveEnvSource({ module: rel, exportName: 'CountingEnv', kwargs: { length: 2 } }), {
    kind: 'module',
    url: here,
    exportName: 'CountingEnv',
    kwargs: { length: 2 },
    imports: [],
  });
  t.same(resolveEnvSource({ module: `${rel}#makeCounting` }), {
    kind: 'module',
    url: here,
    exportName: 'makeCounting',
    kwargs: {},
    imports: [],
  });
  t.same(resolveEnvSource({ id: 'a/B-v0', imports: [rel] }), {
    kind: 'id',
    id: 'a/B-v0',
    kwargs: {},
    makeOptions: {},
    imports: [here],
  });
  t.same(resolveEnvSource('a/B-v0'), { kind: 'id', id: 'a/B-v0', kwargs: {}, makeOptions: {}, imports: [] });
});
