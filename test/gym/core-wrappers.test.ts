import t from 'tap';

import {
  AsyncEnv,
  AsyncObservationWrapper,
  AsyncActionWrapper,
  AsyncRewardWrapper,
  AsyncOrderEnforcing,
  AsyncPassiveEnvChecker,
  AsyncRecordEpisodeStatistics,
  AsyncTimeLimit,
  AsyncWrapper,
  Box,
  Discrete,
  Env,
  EnvCheckError,
  EnvSpec,
  NotImplementedError,
  ObservationWrapper,
  ActionWrapper,
  OrderEnforcing,
  PassiveEnvChecker,
  RandomGenerator,
  RecordEpisodeStatistics,
  ResetNeeded,
  RewardWrapper,
  SyncToAsyncEnv,
  TimeLimit,
  TransformAction,
  TransformObservation,
  TransformReward,
  Wrapper,
  captureWarnings,
  captureWarningsAsync,
  logger,
  setWarningHandler,
  toAsyncEnv,
  type ResetArgs,
  type ResetResult,
  type StepResult,
} from '../../lib/gym/index.js';
import { AsyncCountingEnv, CountingEnv } from './fixtures/envs.js';

t.test('Env base: seeding through super.reset, npRandom, metadata, toString', async (t) => {
  const env = new CountingEnv();
  t.equal(env.metadata.renderFps, 4, 'class metadata');
  env.metadata = { renderModes: [] };
  t.same(env.metadata, { renderModes: [] }, 'instance metadata overrides');
  const [o1] = env.reset({ seed: 3 });
  t.equal(env.npRandomSeed, 3);
  const [o2] = env.reset({ seed: 3 });
  t.same(o1, o2, 'same seed, same initial observation');
  const before = env.npRandom.getState();
  env.reset();
  t.notSame(env.npRandom.getState(), before, 'reset without a seed keeps drawing from the same generator');
  env.npRandom = new RandomGenerator(1);
  t.equal(env.npRandomSeed, -1, 'assigning a generator makes the seed unknown');
  const fresh = new CountingEnv();
  t.ok(Number.isSafeInteger(fresh.npRandomSeed as number), 'an unseeded env seeds itself randomly on first use');
  t.equal(env.toString(), '<CountingEnv instance>');
  env.spec = new EnvSpec({ id: 'x/Counting-v0', entryPoint: 'm#e' });
  t.equal(env.toString(), '<CountingEnv<x/Counting-v0>>');
  t.equal(env.unwrapped, env);
  class NoReset extends Env<number, number> {
    observationSpace = new Discrete(2);
    actionSpace = new Discrete(2);
    step(): StepResult<number> {
      return [0, 0, false, false, {}];
    }
  }
  t.throws(() => new NoReset().reset(), NotImplementedError, 'reset must be implemented');
  t.throws(() => new NoReset().render(), NotImplementedError, 'render is not implemented by default');
  t.doesNotThrow(() => new NoReset().close(), 'close is a no-op by default');
  t.equal(env.getWrapperAttr('length'), 3);
  t.throws(() => env.getWrapperAttr('nope'), TypeError);
  t.ok(env.hasWrapperAttr('label'));
  t.ok(env.setWrapperAttr('label', 'renamed'));
  t.equal(env.label, 'renamed');
  t.notOk(env.setWrapperAttr('brandNew', 1, { force: false }));
  t.ok(env.setWrapperAttr('brandNew', 1));
});

t.test('Wrapper passes everything through and can override spaces', async (t) => {
  const base = new CountingEnv({ length: 2 });
  const w = new Wrapper(base);
  t.equal(w.observationSpace, base.observationSpace);
  t.equal(w.actionSpace, base.actionSpace);
  t.equal(w.metadata, base.metadata);
  t.equal(w.renderMode, 'ansi');
  t.equal(w.unwrapped, base);
  t.same(w.reset({ seed: 1 }), base.reset({ seed: 1 }), 'reset passes seed');
  w.reset({ seed: 1 });
  t.same(w.step(1)[1], 11);
  t.equal(w.render(), 'counting:t=1');
  t.equal(w.npRandom, base.npRandom);
  t.equal(w.npRandomSeed, 1);
  w.npRandom = new RandomGenerator(2);
  t.equal(base.npRandomSeed, -1, 'npRandom is set on the wrapped env');
  const space = new Discrete(9);
  w.observationSpace = space as never;
  t.equal(w.observationSpace, space as never, 'override');
  t.equal(base.observationSpace instanceof Box, true, 'base unchanged');
  w.actionSpace = space;
  t.equal(w.actionSpace, space);
  w.metadata = { renderModes: ['x'] };
  t.same(w.metadata.renderModes, ['x']);
  w.renderMode = null;
  t.equal(base.renderMode, null);
  w.spec = new EnvSpec({ id: 'A-v0', entryPoint: 'x#y' });
  t.equal(base.spec?.id, 'A-v0');
  t.equal(w.toString(), '<Wrapper<CountingEnv<A-v0>>>');
  w.close();
  t.equal(base.closeCount, 1);
  t.throws(() => new Wrapper({} as never), TypeError);
  // attribute access through layers
  const outer = new TimeLimit(new OrderEnforcing(base), 5);
  t.equal(outer.getWrapperAttr('length'), 2, 'found on the base env');
  t.equal(outer.getWrapperAttr('maxEpisodeSteps'), 5, 'found on the wrapper');
  t.ok(outer.hasWrapperAttr('label'));
  t.notOk(outer.hasWrapperAttr('nothing'));
  t.ok(outer.setWrapperAttr('label', 'deep'));
  t.equal(base.label, 'deep', 'set on the layer that has it');
  t.notOk(outer.setWrapperAttr('unknownAttr', 1, { force: false }));
  t.ok(outer.setWrapperAttr('unknownAttr', 1));
  t.equal((outer as unknown as Record<string, number>).unknownAttr, 1, 'forced onto the outermost layer');
  t.ok(outer.setWrapperAttr('elapsedSteps', 4));
  t.equal(outer.elapsedSteps, 4);
});

t.test('Observation, action and reward wrappers', async (t) => {
  class Doubler extends ObservationWrapper<number[], number, Float32Array> {
    observation(obs: Float32Array): number[] {
      return Array.from(obs, (v) => 2 * v);
    }
  }
  class Flip extends ActionWrapper<Float32Array, number, number> {
    action(a: number): number {
      return 1 - a;
    }
  }
  class Neg extends RewardWrapper<Float32Array, number> {
    reward(r: number): number {
      return -r;
    }
  }
  const d = new Doubler(new CountingEnv());
  const [obs] = d.reset({ seed: 2 });
  t.equal(obs[0], 0);
  t.equal(d.step(0)[0][0], 2, 'observation mapped on step');
  const f = new Flip(new CountingEnv());
  f.reset({ seed: 0 });
  t.equal(f.step(0)[1], 11, 'action 0 became 1');
  const n = new Neg(new CountingEnv());
  n.reset();
  t.equal(n.step(1)[1], -11);
  const to = new TransformObservation(new CountingEnv(), (o: Float32Array) => o[0], new Discrete(10));
  to.reset();
  t.equal(to.step(0)[0], 1);
  t.ok(to.observationSpace instanceof Discrete);
  const tr = new TransformReward(new CountingEnv(), (r) => r / 10);
  tr.reset();
  t.equal(tr.step(0)[1], 1);
  const ta = new TransformAction(new CountingEnv(), (a: string) => (a === 'right' ? 1 : 0), new Discrete(5) as never);
  ta.reset();
  t.equal(ta.step('right')[1], 11);
});

t.test('TimeLimit truncates at the limit', async (t) => {
  const env = new TimeLimit(new CountingEnv({ length: 100 }), 3);
  env.reset();
  t.same(env.step(0).slice(2, 4), [false, false]);
  t.same(env.step(0).slice(2, 4), [false, false]);
  t.same(env.step(0).slice(2, 4), [false, true], 'truncated at elapsed >= maxEpisodeSteps');
  t.same(env.step(0).slice(2, 4), [false, true], 'and stays truncated');
  env.reset();
  t.equal(env.elapsedSteps, 0, 'reset restarts the counter');
  t.same(env.step(0).slice(2, 4), [false, false]);
  const both = new TimeLimit(new CountingEnv({ length: 2 }), 2);
  both.reset();
  both.step(0);
  t.same(both.step(0).slice(2, 4), [true, true], 'termination and truncation can coincide');
  t.throws(() => new TimeLimit(new CountingEnv(), 0), /positive integer/);
  t.throws(() => new TimeLimit(new CountingEnv(), 1.5), RangeError);
  t.equal(env.spec, null);
  const base = new CountingEnv();
  base.spec = new EnvSpec({ id: 'T-v0', entryPoint: 'x#y' });
  const limited = new TimeLimit(base, 7);
  t.equal(limited.spec?.maxEpisodeSteps, 7, 'the wrapper spec carries the limit');
  t.equal(base.spec.maxEpisodeSteps, null);
  limited.spec = null;
  t.equal(base.spec, null);
});

t.test('OrderEnforcing', async (t) => {
  const env = new OrderEnforcing(new CountingEnv());
  t.notOk(env.hasReset);
  t.throws(() => env.step(0), ResetNeeded);
  t.throws(() => env.step(0), /Cannot call env.step\(\) before calling env.reset\(\)/);
  t.throws(() => env.render(), /Cannot call `env.render\(\)` before calling `env.reset\(\)`/);
  t.equal(new OrderEnforcing(new CountingEnv(), { disableRenderOrderEnforcing: true }).render(), 'counting:t=0');
  env.reset();
  t.ok(env.hasReset);
  t.equal(env.step(0)[1], 10);
  t.equal(env.render(), 'counting:t=1');
  const base = new CountingEnv();
  base.spec = new EnvSpec({ id: 'O-v0', entryPoint: 'x#y', orderEnforce: false });
  const oe = new OrderEnforcing(base);
  t.equal(oe.spec?.orderEnforce, true);
  oe.spec = null;
  t.equal(oe.spec, null);
});

t.test('RecordEpisodeStatistics', async (t) => {
  const env = new RecordEpisodeStatistics(new CountingEnv({ length: 3 }), { bufferLength: 2 });
  env.reset();
  t.notOk('episode' in env.step(0)[4]);
  env.step(1);
  const info = env.step(0)[4];
  const ep = info.episode as { r: number; l: number; t: number };
  t.same([ep.r, ep.l], [10 + 21 + 30, 3], 'return and length');
  t.ok(ep.t >= 0 && Math.abs(Math.round(ep.t * 1e6) - ep.t * 1e6) < 1e-6, 'time in seconds, 6 decimals');
  t.equal(ep.t, Number(ep.t.toFixed(6)), 'printed with at most 6 decimals');
  t.equal(env.episodeCount, 1);
  for (let e = 0; e < 2; e++) {
    env.reset();
    env.step(0);
    env.step(0);
    env.step(0);
  }
  t.same(env.returnQueue, [60, 60], 'queues keep bufferLength entries');
  t.same(env.lengthQueue, [3, 3]);
  t.equal(env.timeQueue.length, 2);
  const keyed = new RecordEpisodeStatistics(new CountingEnv({ length: 1 }), { statsKey: 'stats' });
  keyed.reset();
  t.ok('stats' in keyed.step(0)[4]);
  class Clash extends CountingEnv {
    override step(a: number): StepResult<Float32Array> {
      const r = super.step(a);
      r[4].episode = 'mine';
      return r;
    }
  }
  const clash = new RecordEpisodeStatistics(new Clash({ length: 1 }));
  clash.reset();
  t.throws(() => clash.step(0), /already has the key "episode"/);
  t.throws(() => new RecordEpisodeStatistics(new CountingEnv(), { bufferLength: 0 }), RangeError);
});

class BadEnv extends Env<Float32Array, number> {
  observationSpace = new Box(0, 1, [2]);
  actionSpace = new Discrete(2);
  constructor(private readonly mode: string) {
    super();
  }
  override reset(args: ResetArgs = {}): ResetResult<Float32Array> {
    super.reset(args);
    if (this.mode === 'reset-not-tuple') return 5 as never;
    if (this.mode === 'reset-info') return [Float32Array.of(0, 0), 3 as never];
    if (this.mode === 'reset-out') return [Float32Array.of(5, 5), {}];
    if (this.mode === 'reset-dtype') return [Float64Array.of(0, 0) as never, {}];
    return [Float32Array.of(0, 0), {}];
  }
  step(): StepResult<Float32Array> {
    if (this.mode === 'step-4') return [Float32Array.of(0, 0), 0, false, {}] as never;
    if (this.mode === 'step-flags') return [Float32Array.of(0, 0), 0, 0, 'no', {}] as never;
    if (this.mode === 'step-nan') return [Float32Array.of(0, 0), NaN, false, false, {}];
    if (this.mode === 'step-inf') return [Float32Array.of(0, 0), Infinity, false, false, {}];
    if (this.mode === 'step-reward') return [Float32Array.of(0, 0), '1', false, false, {}] as never;
    if (this.mode === 'step-info') return [Float32Array.of(0, 0), 0, false, false, null] as never;
    return [Float32Array.of(0, 0), 0, false, false, {}];
  }
}

t.test('PassiveEnvChecker checks the first reset and step', async (t) => {
  const warn = (mode: string, fn: (e: PassiveEnvChecker<Float32Array, number>) => void): string[] =>
    captureWarnings(() => fn(new PassiveEnvChecker(new BadEnv(mode)))).warnings;
  t.match(warn('reset-not-tuple', (e) => e.reset()).join('\n'), /was not a tuple of the form `\[obs, info\]`/);
  t.throws(
    () => new PassiveEnvChecker(new BadEnv('reset-info')).reset(),
    /second element returned by `env.reset\(\)` was not a dictionary/,
  );
  t.match(warn('reset-out', (e) => e.reset()).join('\n'), /is not within the observation space/);
  t.match(
    warn('reset-dtype', (e) => e.reset()).join('\n'),
    /expecting typed array dtype to be float32, actual type: float64/,
  );
  t.throws(
    () => new PassiveEnvChecker(new BadEnv('step-4')).step(0),
    /five element tuple, actual number of elements returned: 4/,
  );
  const flags = warn('step-flags', (e) => e.step(0)).join('\n');
  t.match(flags, /`terminated` signal to be a boolean, actual type: number/);
  t.match(flags, /`truncated` signal to be a boolean, actual type: string/);
  t.match(warn('step-nan', (e) => e.step(0)).join('\n'), /reward is a NaN value/);
  t.match(warn('step-inf', (e) => e.step(0)).join('\n'), /reward is an inf value/);
  t.match(warn('step-reward', (e) => e.step(0)).join('\n'), /must be a number, actual type: string/);
  t.throws(() => new PassiveEnvChecker(new BadEnv('step-info')).step(0), EnvCheckError);
  // only the first call is checked
  const once = new PassiveEnvChecker(new BadEnv('step-nan'));
  t.equal(captureWarnings(() => once.step(0)).warnings.length, 1);
  t.equal(captureWarnings(() => once.step(0)).warnings.length, 0, 'later steps pass through unchecked');
  const good = new PassiveEnvChecker(new BadEnv('ok'));
  t.same(
    captureWarnings(() => {
      good.reset();
      good.reset();
      good.step(0);
    }).warnings,
    [],
    'a good env gives no warnings',
  );
  // spaces at construction
  class NoSpace extends BadEnv {
    override actionSpace = undefined as never;
  }
  t.throws(() => new PassiveEnvChecker(new NoSpace('ok')), /must specify an action space/);
  class NotSpace extends BadEnv {
    override observationSpace = 3 as never;
  }
  t.throws(() => new PassiveEnvChecker(new NotSpace('ok')), /observation space does not inherit from `Space`/);
  class EqualBox extends BadEnv {
    override observationSpace = new Box(1, 1, [2]);
  }
  t.match(
    captureWarnings(() => new PassiveEnvChecker(new EqualBox('ok'))).warnings.join(),
    /maximum and minimum values are equal/,
  );
  t.throws(() => new PassiveEnvChecker({} as never), /must inherit from the Env class/);
  // render checks
  const render = new PassiveEnvChecker(new CountingEnv());
  t.same(captureWarnings(() => render.render()).warnings, []);
  render.render();
  class Untitled extends CountingEnv {
    static override metadata = {};
  }
  t.match(
    captureWarnings(() => new PassiveEnvChecker(new Untitled()).render()).warnings.join(),
    /No render modes was declared/,
  );
  // close twice
  class BadClose extends CountingEnv {
    override close(): void {
      if (this.closeCount++ > 0) throw new Error('closed twice');
    }
  }
  const bc = new PassiveEnvChecker(new BadClose());
  bc.close();
  let closeWarnings: string[] = [];
  t.throws(() => {
    closeWarnings = captureWarnings(() => bc.close()).warnings;
  }, /closed twice/);
  t.same(closeWarnings, [], 'the warning is emitted before the rethrow');
  const base = new CountingEnv();
  base.spec = new EnvSpec({ id: 'P-v0', entryPoint: 'x#y', disableEnvChecker: true });
  t.equal(new PassiveEnvChecker(base).spec?.disableEnvChecker, false);
});

t.test('logger: default handler, replacement, nesting', async (t) => {
  const seen: string[] = [];
  const previous = setWarningHandler((m, k) => seen.push(`${k}:${m}`));
  logger.warn('a');
  logger.deprecation('b');
  const inner = captureWarnings(() => {
    logger.warn('inside');
    return captureWarnings(() => logger.warn('nested')).warnings;
  });
  t.same(inner.result, ['nested']);
  t.same(inner.warnings, ['inside']);
  setWarningHandler(previous);
  t.same(seen, ['warn:a', 'deprecation:b']);
  const emitted: string[] = [];
  const onWarning = (w: Error): void => {
    emitted.push(`${w.name}:${w.message}`);
  };
  process.on('warning', onWarning);
  logger.warn('printed once');
  logger.warn('printed once');
  logger.deprecation('old api');
  await new Promise((r) => setImmediate(r));
  process.off('warning', onWarning);
  t.same(
    emitted,
    ['GymnasiumWarning:printed once', 'GymnasiumDeprecationWarning:old api'],
    'default handler: process warnings, once per message',
  );
  const { warnings } = await captureWarningsAsync(async () => {
    logger.warn('async');
    return 1;
  });
  t.same(warnings, ['async']);
});

t.test('AsyncEnv, async wrappers and toAsyncEnv', async (t) => {
  const env = new AsyncCountingEnv({ length: 2 });
  const [o1] = await env.reset({ seed: 8 });
  const [o2] = await env.reset({ seed: 8 });
  t.same(o1, o2, 'seeded through super.reset');
  const [, r] = await env.step(1);
  t.equal(r, 11);
  class NoReset extends AsyncEnv<number, number> {
    observationSpace = new Discrete(2);
    actionSpace = new Discrete(2);
    async step(): Promise<StepResult<number>> {
      return [0, 0, false, false, {}];
    }
  }
  await t.rejects(new NoReset().reset(), NotImplementedError);
  await t.rejects(new NoReset().render(), NotImplementedError);
  await new NoReset().close();
  const limited = new AsyncTimeLimit(
    new AsyncOrderEnforcing(new AsyncPassiveEnvChecker(new AsyncCountingEnv({ length: 10 }))),
    2,
  );
  t.equal(
    limited.toString(),
    '<AsyncTimeLimit<AsyncOrderEnforcing<AsyncPassiveEnvChecker<AsyncCountingEnv instance>>>>',
  );
  await t.rejects(limited.step(0), ResetNeeded);
  await t.rejects(new AsyncOrderEnforcing(new AsyncCountingEnv()).render(), ResetNeeded);
  await limited.reset({ seed: 1 });
  t.same((await limited.step(0)).slice(2, 4), [false, false]);
  t.same((await limited.step(0)).slice(2, 4), [false, true], 'async TimeLimit');
  t.throws(() => new AsyncTimeLimit(new AsyncCountingEnv(), -1), RangeError);
  t.equal(limited.spec, null);
  const stats = new AsyncRecordEpisodeStatistics(new AsyncCountingEnv({ length: 2 }));
  await stats.reset();
  await stats.step(0);
  const info = (await stats.step(1))[4];
  t.same((info.episode as { r: number }).r, 10 + 21);
  t.equal(stats.episodeCount, 1);
  t.same(stats.returnQueue, [31]);
  t.same(stats.lengthQueue, [2]);
  t.equal(stats.timeQueue.length, 1);
  class AObs extends AsyncObservationWrapper<number, number, Float32Array> {
    async observation(o: Float32Array): Promise<number> {
      return o[0];
    }
  }
  class AAct extends AsyncActionWrapper<Float32Array, boolean, number> {
    action(a: boolean): number {
      return a ? 1 : 0;
    }
  }
  class ARew extends AsyncRewardWrapper<Float32Array, number> {
    reward(r: number): number {
      return r * 2;
    }
  }
  const ao = new AObs(new AsyncCountingEnv());
  t.equal((await ao.reset())[0], 0);
  t.equal((await ao.step(0))[0], 1);
  const aa = new AAct(new AsyncCountingEnv());
  await aa.reset();
  t.equal((await aa.step(true))[1], 11);
  const ar = new ARew(new AsyncCountingEnv());
  await ar.reset();
  t.equal((await ar.step(0))[1], 20);
  // async passive checker
  const checked = new AsyncPassiveEnvChecker(toAsyncEnv(new BadEnv('step-nan')));
  const { warnings } = await captureWarningsAsync(async () => {
    await checked.reset();
    await checked.step(0);
    await checked.step(0);
  });
  t.same(warnings, ['The reward is a NaN value.']);
  t.throws(() => new AsyncPassiveEnvChecker(new CountingEnv() as never), /must inherit from the AsyncEnv class/);
  const ac = new AsyncPassiveEnvChecker(toAsyncEnv(new CountingEnv()));
  t.equal(await ac.render(), 'counting:t=0');
  t.equal(await ac.render(), 'counting:t=0');
  await ac.close();
  await ac.close();
  // SyncToAsyncEnv forwards everything
  const sync = new CountingEnv({ length: 1 });
  const adapted = toAsyncEnv(sync);
  t.ok(adapted instanceof SyncToAsyncEnv);
  t.equal(toAsyncEnv(adapted), adapted, 'already async');
  t.equal(adapted.observationSpace, sync.observationSpace);
  t.equal(adapted.actionSpace, sync.actionSpace);
  t.equal(adapted.unwrapped, sync);
  t.same((await adapted.reset({ seed: 2 }))[0], sync.reset({ seed: 2 })[0]);
  t.equal((await adapted.step(0))[2], true);
  t.equal(await adapted.render(), 'counting:t=1');
  t.equal(adapted.getWrapperAttr('length'), 1);
  t.ok(adapted.hasWrapperAttr('label'));
  t.ok(adapted.setWrapperAttr('label', 'z'));
  t.equal(sync.label, 'z');
  t.ok(adapted.setWrapperAttr('newAttr', 2));
  adapted.metadata = { renderModes: ['y'] };
  t.same(adapted.metadata.renderModes, ['y']);
  adapted.renderMode = null;
  t.equal(sync.renderMode, null);
  adapted.spec = new EnvSpec({ id: 'S-v0', entryPoint: 'x#y' });
  t.equal(sync.spec?.id, 'S-v0');
  adapted.npRandom = new RandomGenerator(3);
  t.equal(adapted.npRandomSeed, -1);
  t.equal(adapted.npRandom, sync.npRandom);
  t.match(adapted.toString(), /^<SyncToAsyncEnv<CountingEnv<S-v0>>>$/);
  await adapted.close();
  t.equal(sync.closeCount, 1);
  t.throws(() => new SyncToAsyncEnv({} as never), TypeError);
  // AsyncWrapper forwarding
  const base = new AsyncCountingEnv();
  const aw = new AsyncWrapper(base);
  t.equal(aw.observationSpace, base.observationSpace);
  aw.observationSpace = new Discrete(3) as never;
  aw.actionSpace = new Discrete(3);
  t.ok(aw.observationSpace instanceof Discrete && (aw.actionSpace as Discrete).n === 3);
  aw.metadata = { renderModes: [] };
  t.same(aw.metadata, { renderModes: [] });
  aw.renderMode = 'ansi';
  t.equal(base.renderMode, 'ansi');
  aw.spec = new EnvSpec({ id: 'W-v0', entryPoint: 'x#y' });
  t.equal(base.spec?.id, 'W-v0');
  aw.npRandom = new RandomGenerator(1);
  t.equal(aw.npRandomSeed, -1);
  t.equal(aw.unwrapped, base);
  t.ok(aw.hasWrapperAttr('observationSpace'));
  t.equal(aw.getWrapperAttr<unknown>('inner') !== undefined, true, 'found on the wrapped env');
  t.notOk(aw.setWrapperAttr('missing', 1, { force: false }));
  t.ok(aw.setWrapperAttr('missing', 1));
  t.ok(aw.setWrapperAttr('actionSpace', new Discrete(4)));
  await t.rejects(aw.render(), NotImplementedError);
  await aw.close();
  t.throws(() => new AsyncWrapper(new CountingEnv() as never), TypeError);
});
