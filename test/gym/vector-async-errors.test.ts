// AsyncVectorEnv failure handling: sub-environment errors, hung and crashed workers, start-up
// failures. Nothing may hang: every wait has a timeout. The workers run the compiled copy of
// the gym layer (fixtures/compiled.ts) so that the many worker starts stay cheap.

import { spawnSync } from 'node:child_process';

import t from 'tap';

import {
  AsyncVectorEnv,
  VectorEnvError,
  WorkerExitedError,
  WorkerTimeoutError,
  makeVec,
  register,
  registry,
} from '../../lib/gym/index.js';
import { compiledGym, compiledWorkerOptions } from './fixtures/compiled.js';
import { CountingEnv } from './fixtures/envs.js';

const compiled = compiledGym();
const fixtures = compiled.fixtures;
const fast = compiledWorkerOptions(compiled);

/** The VectorEnvError a promise rejects with (throws when it resolves or rejects otherwise). */
async function failure(p: Promise<unknown>): Promise<VectorEnvError> {
  const outcome = await p.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  );
  if (!(outcome instanceof VectorEnvError)) throw outcome;
  return outcome;
}

async function until(condition: () => boolean, ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!condition() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return condition();
}

t.test('errors, timeouts and crashes are reported by index; the vector env stays usable', async (t) => {
  const envs = await AsyncVectorEnv.create<Float32Array, number[]>(
    [
      {
        module: fixtures,
        exportName: 'CountingEnv',
        kwargs: { length: 100, failAtStep: 2, crashOnAction: 1, label: 'zero' },
      },
      { module: fixtures, exportName: 'CountingEnv', kwargs: { length: 100, hangOnAction: 1, label: 'one' } },
    ],
    { timeoutMs: 20_000, ...fast },
  );
  t.teardown(() => envs.close({ terminate: true }));
  await envs.reset({ seed: 0 });
  await envs.step([0, 0]);

  // 1. an exception inside a sub-environment
  const err = await failure(envs.step([0, 0]));
  t.ok(err instanceof VectorEnvError, 'a VectorEnvError');
  const vErr = err as VectorEnvError;
  t.equal(vErr.command, 'step');
  t.same(vErr.indices, [0], 'with the failing index');
  t.ok(vErr.failures[0].error instanceof TypeError, 'and the error rebuilt with its class');
  t.match(vErr.failures[0].error.message, /step 2 failed on purpose \(zero\)/);
  t.match(vErr.failures[0].error.stack ?? '', /CountingEnv\.step/, 'the worker stack is kept');
  t.equal(vErr.cause, vErr.failures[0].error);
  t.match(vErr.message, /step failed in 1 sub-environment\(s\): #0: TypeError: step 2 failed on purpose/);
  t.same(envs.aliveWorkers, [0, 1], "the worker survives its env's exception");
  const [obs] = await envs.reset({ seed: 1 });
  t.same(
    Array.from(obs).filter((_, i) => i % 2 === 0),
    [0, 0],
    'usable again after a reset',
  );
  const resetErr = await failure(envs.reset({ options: { fail: true } }));
  t.same(resetErr.indices, [0, 1], 'a reset failing everywhere lists every index');
  t.ok(resetErr.failures.every((f) => f.error instanceof RangeError));
  await envs.reset();

  // 2. a worker stuck in an endless loop is terminated at the deadline
  const started = Date.now();
  const timeoutErr = await failure(envs.step([0, 1], { timeoutMs: 500 }));
  t.ok(Date.now() - started < 10_000, 'the step returned instead of hanging');
  t.ok(timeoutErr instanceof VectorEnvError);
  t.same(timeoutErr.indices, [1]);
  t.ok(timeoutErr.failures[0].error instanceof WorkerTimeoutError);
  t.match(timeoutErr.failures[0].error.message, /worker 1 did not answer `step` within 500 ms; it was terminated/);
  t.same(envs.aliveWorkers, [0], 'the hung worker is gone');
  await envs.reset({ options: { reset_mask: [true, false] } }).catch(() => undefined);
  t.same(envs.aliveWorkers, [0], 'a reset that does not cover the dead worker leaves it dead');
  const gone = await failure(envs.step([0, 0]));
  t.same(gone.indices, [1]);
  t.ok(gone.failures[0].error instanceof WorkerExitedError, 'a dead worker fails fast');
  t.match(gone.failures[0].error.message, /reset this sub-environment to start a new worker/);
  await t.rejects(envs.call('describe', ''), /#1: WorkerExitedError/);

  // 3. reset restarts dead workers
  const [obs2] = await envs.reset({ seed: 4 });
  t.same(envs.aliveWorkers, [0, 1], 'reset started a new worker');
  const expected1 = new CountingEnv().reset({ seed: 5 })[0];
  t.same(Array.from(obs2.subarray(2)), Array.from(expected1), 'the new worker is seeded like the old one');
  t.same(await envs.getAttr('label'), ['zero', 'one']);

  // 4. a worker that crashes after answering (an uncaught exception in a timer)
  const [, rewards] = await envs.step([1, 0]);
  t.same(Array.from(rewards), [11, 10], 'the step itself succeeded');
  t.ok(await until(() => !envs.aliveWorkers.includes(0)), 'the crash was noticed');
  const crashed = await failure(envs.step([0, 0]));
  t.same(crashed.indices, [0]);
  t.match(crashed.failures[0].error.message, /worker 0 is gone/);
  await envs.reset({ options: { reset_mask: [true, false] } });
  t.same(envs.aliveWorkers, [0, 1], 'a partial reset restarts the crashed worker only');
  const [, r2] = await envs.step([0, 0]);
  t.same(Array.from(r2), [10, 30], 'env 0 restarted at t = 0, env 1 continued (t = 3)');

  // 5. close with a pending hung call: never hangs
  envs.stepAsync([0, 1]);
  const closing = Date.now();
  await envs.close({ timeoutMs: 300 });
  t.ok(Date.now() - closing < 5_000, 'close waited at most its timeout');
  t.same(envs.aliveWorkers, []);
});

t.test('start-up failures terminate every worker and say why', async (t) => {
  const broken = await failure(
    AsyncVectorEnv.create(
      [
        { module: fixtures, exportName: 'CountingEnv' },
        { module: fixtures, exportName: 'BrokenConstructorEnv' },
        'nope/Nothing-v0',
        { module: fixtures, exportName: 'NoSuchExport' },
      ],
      fast,
    ),
  );
  t.equal(broken.command, 'create');
  t.same(broken.indices, [1, 2, 3], 'every failing worker is listed');
  t.match(broken.message, /#1: Error: constructor failed on purpose/);
  t.match(broken.message, /#2: NamespaceNotFound: Namespace nope not found/);
  t.match(broken.message, /#3: GymError: Module .*envs\.(js|ts) has no export `NoSuchExport`/);
  const mismatch = await failure(
    AsyncVectorEnv.create([{ module: fixtures, exportName: 'CountingEnv' }, `sinkflex/CartPole-v1`], fast),
  );
  t.match(mismatch.message, /#1: GymError: the spaces of sub-environment 1 differ from those of sub-environment 0/);
  const badUrl = await failure(
    AsyncVectorEnv.create(['sinkflex/CartPole-v1'], { workerUrl: 'https://example.invalid/worker.js' }),
  );
  t.same(badUrl.indices, [0], 'a worker that cannot even be constructed is a start failure too');
  await t.rejects(AsyncVectorEnv.create([]), RangeError);
  await t.rejects(AsyncVectorEnv.create([5 as never]), TypeError);
  await t.rejects(AsyncVectorEnv.create([{ nothing: 1 } as never]), /needs an `id` or a `module`/);
  await t.rejects(AsyncVectorEnv.create(['a'], { autoresetMode: 'Later' as never }), /Unexpected autoreset mode/);
  register({ id: 'err/Function-v0', entryPoint: (k) => new CountingEnv(k) });
  await t.rejects(
    makeVec('err/Function-v0', 2, { vectorizationMode: 'async' }),
    /function entry point, which worker threads cannot load/,
  );
  registry.delete('err/Function-v0');
});

t.test('idle daemon workers do not keep the process alive', async (t) => {
  const script = `
    import { AsyncVectorEnv } from ${JSON.stringify(compiled.index)};
    const envs = await AsyncVectorEnv.create([{ module: ${JSON.stringify(fixtures)}, exportName: 'CountingEnv' }], { workerUrl: ${JSON.stringify(compiled.workerUrl.href)}, workerOptions: { execArgv: [] } });
    const [obs] = await envs.reset({ seed: 0 });
    console.log('reset', obs.length);
    // no close(): the process must still end
  `;
  const started = Date.now();
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  t.equal(child.status, 0, child.stderr);
  t.match(child.stdout, /reset 2/);
  t.ok(Date.now() - started < 60_000, 'exited by itself');
});
