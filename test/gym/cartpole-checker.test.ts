import t from 'tap';

import {
  AsyncEnv,
  Box,
  CartPoleEnv,
  Dict,
  Discrete,
  Env,
  EnvCheckError,
  EnvSpec,
  RandomGenerator,
  captureWarnings,
  captureWarningsAsync,
  checkAsyncEnv,
  checkEnv,
  make,
  makeAsync,
  register,
  registry,
  type RgbArray,
  type ResetArgs,
  type ResetResult,
  type StepResult,
} from '../../lib/gym/index.js';
import { dataEquivalence } from '../../lib/gym/utils/data-equivalence.js';
import { checkSpaceLimit } from '../../lib/gym/utils/env-checker.js';
import { AsyncCountingEnv, CountingEnv } from './fixtures/envs.js';

/** Gymnasium's CartPole-v1 step, written out plainly in float64 (explicit Euler). */
function referenceStep(s: number[], action: number): number[] {
  const g = 9.8;
  const mc = 1.0;
  const mp = 0.1;
  const total = mp + mc;
  const l = 0.5;
  const pml = mp * l;
  const f = action === 1 ? 10.0 : -10.0;
  const tau = 0.02;
  const [x, xd, th, thd] = s;
  const c = Math.cos(th);
  const sn = Math.sin(th);
  const temp = (f + pml * thd * thd * sn) / total;
  const thacc = (g * sn - c * temp) / (l * (4.0 / 3.0 - (mp * c * c) / total));
  const xacc = temp - (pml * thacc * c) / total;
  return [x + tau * xd, xd + tau * xacc, th + tau * thd, thd + tau * thacc];
}

t.test('CartPole spaces and constants match Gymnasium', async (t) => {
  const env = new CartPoleEnv();
  t.equal(env.actionSpace.n, 2);
  t.equal(env.thetaThresholdRadians, (12 * 2 * Math.PI) / 360);
  t.same(Array.from(env.observationSpace.high), [
    Math.fround(4.8),
    Infinity,
    Math.fround(0.41887902047863906),
    Infinity,
  ]);
  t.same(Array.from(env.observationSpace.low), [
    -Math.fround(4.8),
    -Infinity,
    -Math.fround(0.41887902047863906),
    -Infinity,
  ]);
  t.equal(env.observationSpace.dtype, 'float32');
  t.same(CartPoleEnv.metadata, { renderModes: ['rgb_array', 'ansi'], renderFps: 50 });
  t.throws(() => new CartPoleEnv({ renderMode: 'human' }), RangeError);
});

t.test('CartPole dynamics follow the reference over random trajectories', async (t) => {
  const env = new CartPoleEnv();
  const actions = new RandomGenerator(17);
  let maxErr = 0;
  let steps = 0;
  for (let episode = 0; episode < 20; episode++) {
    const [obs0] = env.reset({ seed: episode });
    let ref = [...env.state!];
    t.ok(
      ref.every((v) => v >= -0.05 && v < 0.05),
      'initial state in [-0.05, 0.05)',
    );
    t.same(Array.from(obs0), Array.from(Float32Array.from(ref)), 'observation = float32 state');
    for (;;) {
      const a = actions.integers(2);
      const [obs, reward, terminated, truncated, info] = env.step(a);
      ref = referenceStep(ref, a);
      steps++;
      for (let i = 0; i < 4; i++) maxErr = Math.max(maxErr, Math.abs(env.state![i] - ref[i]));
      const refTerminated =
        ref[0] < -2.4 || ref[0] > 2.4 || ref[2] < -0.20943951023931953 || ref[2] > 0.20943951023931953;
      if (
        terminated !== refTerminated ||
        reward !== 1 ||
        truncated ||
        Object.keys(info).length > 0 ||
        obs[0] !== Math.fround(ref[0])
      ) {
        t.fail(`step ${steps} differs`);
        break;
      }
      if (terminated) break;
    }
  }
  t.ok(steps > 200, `${steps} steps compared`);
  t.ok(maxErr < 1e-12, `state error ${maxErr}`);
});

t.test('CartPole rewards, termination, reset options, integrators', async (t) => {
  const env = new CartPoleEnv();
  env.reset({ options: { low: 0.01, high: 0.01 } });
  t.same(env.state, [0.01, 0.01, 0.01, 0.01], 'options.low/high bound the initial state');
  const [obs] = env.step(1);
  t.same(Array.from(obs), Array.from(Float32Array.from(referenceStep([0.01, 0.01, 0.01, 0.01], 1))));
  t.throws(
    () => env.reset({ options: { low: 1, high: 0 } }),
    /Lower bound \(1\) must be lower than higher bound \(0\)/,
  );
  t.throws(() => env.reset({ options: { low: 'a' } }), TypeError);
  env.reset({ seed: 0 });
  let result: StepResult<Float32Array>;
  let n = 0;
  do {
    result = env.step(1);
    n++;
  } while (!result[2]);
  t.equal(result[1], 1, 'the terminating step still gives 1');
  t.ok(n < 200, `pushing right fails after ${n} steps`);
  const after = captureWarnings(() => env.step(1));
  t.equal(after.result[1], 0, 'steps after termination give 0');
  t.match(after.warnings.join(), /already returned terminated = true/);
  t.equal(captureWarnings(() => env.step(1)).warnings.length, 0, 'warned once');
  const sb = new CartPoleEnv({ suttonBartoReward: true });
  sb.reset({ seed: 0 });
  t.equal(sb.step(1)[1], 0, 'Sutton-Barto: 0 per step');
  let r: StepResult<Float32Array>;
  do r = sb.step(1);
  while (!r[2]);
  t.equal(r[1], -1, 'and -1 at termination');
  t.equal(captureWarnings(() => sb.step(1)).result[1], -1);
  const semi = new CartPoleEnv({ kinematicsIntegrator: 'semi-implicit-euler' });
  semi.reset({ options: { low: 0.01, high: 0.01 } });
  semi.step(0);
  t.not(semi.state![0], referenceStep([0.01, 0.01, 0.01, 0.01], 0)[0], 'semi-implicit Euler updates velocity first');
  t.throws(() => new CartPoleEnv().step(0), /Call reset before using step method/);
  t.throws(() => env.step(2), /2 \(number\) invalid/);
});

t.test('CartPole rendering', async (t) => {
  const rgb = new CartPoleEnv({ renderMode: 'rgb_array' });
  t.equal(rgb.render(), null, 'nothing before reset');
  rgb.reset({ seed: 1 });
  const frame = rgb.render() as RgbArray;
  t.same(frame.shape, [400, 600, 3]);
  t.equal(frame.data.length, 400 * 600 * 3);
  const px = (x: number, y: number): number[] =>
    Array.from(frame.data.subarray((y * 600 + x) * 3, (y * 600 + x) * 3 + 3));
  const cartX = Math.round(rgb.state![0] * (600 / 4.8) + 300);
  t.same(px(cartX - 20, 300), [0, 0, 0], 'the cart is black (y-up: cart centre at row 300)');
  t.same(px(5, 300), [0, 0, 0], 'the track line');
  t.same(px(5, 50), [255, 255, 255], 'white background');
  t.same(px(cartX, 200), [202, 152, 101], 'the pole above the cart');
  t.same(px(cartX, 400 - 100 - 8), [129, 132, 203], 'the axle');
  const ansi = new CartPoleEnv({ renderMode: 'ansi' });
  ansi.reset({ seed: 1 });
  t.match(ansi.render() as string, /^\[-+[|/\\]-+\] x=-?\d\.\d{3} theta=-?\d\.\d{3}$/);
  const none = new CartPoleEnv();
  none.reset();
  const w = captureWarnings(() => none.render());
  t.equal(w.result, null);
  t.match(w.warnings.join(), /without specifying any render mode/);
});

t.test('checkEnv passes on CartPole (raw and made)', async (t) => {
  const raw = captureWarnings(() => checkEnv(new CartPoleEnv()));
  t.match(
    raw.warnings.join('\n'),
    /minimum value is -infinity/,
    'infinite velocity bounds are reported as in Gymnasium',
  );
  t.match(raw.warnings.join('\n'), /Not able to test alternative render modes/);
  const made = make('sinkflex/CartPole-v1');
  const res = captureWarnings(() => checkEnv(made));
  t.match(res.warnings.join('\n'), /is different from the unwrapped version/);
  t.doesNotThrow(
    () => captureWarnings(() => checkEnv(made.unwrapped as Env)),
    'unwrapped made env: renders every mode through the spec',
  );
  t.doesNotThrow(() =>
    captureWarnings(() => checkEnv(make('sinkflex/CartPole-v1', { renderMode: 'ansi' }).unwrapped as Env)),
  );
  t.doesNotThrow(() =>
    captureWarnings(() => checkEnv(new CountingEnv(), { skipRenderCheck: true, skipCloseCheck: true })),
  );
});

class Broken extends Env<Float32Array, number> {
  observationSpace = new Box(0, 1, [2]);
  actionSpace = new Discrete(2);
  calls = 0;
  constructor(readonly mode: string) {
    super();
  }
  override reset(args: ResetArgs = {}): ResetResult<Float32Array> {
    this.calls++;
    if (this.mode === 'reseed-unseeded') super.reset({ seed: args.seed ?? Math.floor(Math.random() * 2 ** 31) });
    else if (this.mode !== 'no-super') super.reset(this.mode === 'ignore-seed' ? {} : args);
    if (this.mode === 'not-array') return { obs: 1 } as never;
    if (this.mode === 'three') return [Float32Array.of(0, 0), {}, 1] as never;
    if (this.mode === 'outside') return [Float32Array.of(2, 2), {}];
    if (this.mode === 'info') return [Float32Array.of(0, 0), 'x' as never];
    if (this.mode === 'options' && args.options) throw new TypeError('unexpected options');
    if (this.mode === 'random-reset-obs') return [Float32Array.of(Math.random(), 0), {}];
    if (this.mode === 'jitter-reset-obs')
      return [Float32Array.of(0.5 + (Math.floor(this.calls / 2) % 2) * 1e-6, 0), {}];
    const v = this.mode === 'no-super' ? 0.5 : this.npRandom.random();
    if (this.mode === 'seed-outside' && args.seed === 123) return [Float32Array.of(3, 3), {}];
    return [Float32Array.of(v, v), {}];
  }
  step(): StepResult<Float32Array> {
    if (this.mode === 'step-four') return [Float32Array.of(0, 0), 0, false, {}] as never;
    if (this.mode === 'step-random') return [Float32Array.of(Math.random(), 0), 0, false, false, {}];
    if (this.mode === 'step-rng') this.npRandom.random();
    if (this.mode === 'step-reward') return [Float32Array.of(0, 0), Math.random(), false, false, {}];
    if (this.mode === 'step-info') return [Float32Array.of(0, 0), 0, false, false, { at: Math.random() }];
    if (this.mode === 'step-truncate') return [Float32Array.of(0, 0), 0, false, true, {}];
    if (this.mode === 'step-term')
      return [Float32Array.of(0, 0), 0, Math.random() < 2 && this.calls % 2 === 0, false, {}];
    return [Float32Array.of(0, 0), 0, false, false, {}];
  }
}

t.test('checkEnv fails with a clear message on broken envs', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['no-super', /does not call `super.reset\(\{ seed \}\)`/],
    ['ignore-seed', /random generators are not the same when the same seeds are passed/],
    ['not-array', /was not a tuple of the form `\[obs, info\]`/],
    ['three', /did not return a 2-tuple, actual length: 3/],
    ['outside', /first element returned by `env.reset\(\)` is not within the observation space/],
    ['info', /second element returned by `env.reset\(\)` was not a dictionary, actual type: string/],
    ['seed-outside', /env.reset\(\{ seed: 123 \}\)` is not within the observation space/],
    ['options', /cannot be reset with options: env.reset\(\{ options: \{\} \}\) threw TypeError: unexpected options/],
    ['step-four', /five element tuple, actual number of elements returned: 4/],
    ['step-random', /Deterministic step observations are not equivalent/],
    ['step-reward', /Deterministic step rewards are not equivalent/],
    ['step-info', /Deterministic step info are not equivalent/],
    ['step-term', /Deterministic step termination are not equivalent/],
    ['step-truncate', /Environment truncates after 1 step, something has gone very wrong/],
  ];
  for (const [mode, message] of cases) {
    captureWarnings(() => t.throws(() => checkEnv(new Broken(mode), { skipRenderCheck: true }), message, mode));
  }
  for (const mode of ['ok', 'step-rng', 'random-reset-obs', 'reseed-unseeded']) {
    captureWarnings(() =>
      t.doesNotThrow(() => checkEnv(new Broken(mode), { skipRenderCheck: true }), `${mode}: a correct env passes`),
    );
  }
  t.ok(new EnvCheckError('x') instanceof Error);
  t.throws(() => checkEnv({} as never), /must inherit from the Env class, actual class: Object/);
  t.throws(() => checkEnv(new AsyncCountingEnv() as never), /use checkAsyncEnv/);
  class EmptyDict extends Broken {
    override observationSpace = new Dict({}) as never;
  }
  t.throws(() => checkEnv(new EmptyDict('ok')), /An empty Dict observation space is not allowed/);
  class NoAction extends Broken {
    override actionSpace = null as never;
  }
  t.throws(() => checkEnv(new NoAction('ok')), /must specify an action space/);
  class BadMode extends CountingEnv {
    constructor() {
      super();
      this.renderMode = 'human';
    }
  }
  captureWarnings(() => t.throws(() => checkEnv(new BadMode()), /unsupported render mode. Render mode: human/));
  // a registered env whose close cannot be called twice gets a warning, not an error
  class DoubleClose extends CountingEnv {
    override close(): void {
      if (this.closeCount++ > 0) throw new Error('already closed');
    }
  }
  register({ id: 'chk/DoubleClose-v0', entryPoint: DoubleClose as never, disableEnvChecker: true });
  const dc = captureWarnings(() => checkEnv(make('chk/DoubleClose-v0').unwrapped as Env, { skipRenderCheck: true }));
  t.match(
    dc.warnings.join('\n'),
    /Calling `env.close\(\)` on the closed environment should be allowed, but it raised an exception: already closed/,
  );
  registry.delete('chk/DoubleClose-v0');
});

/** A Broken env carrying a spec (as `make` would give it). */
function withSpec(mode: string, nondeterministic = false): Broken {
  const env = new Broken(mode);
  env.spec = new EnvSpec({ id: 'chk/Specced-v0', nondeterministic });
  return env;
}

t.test('checkEnv compares reset observations only with a deterministic spec (as Gymnasium)', async (t) => {
  const opts = { skipRenderCheck: true, skipCloseCheck: true };
  // the same seed must give the same observation, and a following reset() must continue the generator
  captureWarnings(() =>
    t.throws(
      () => checkEnv(withSpec('ignore-seed'), opts),
      /`env.reset\(\{ seed: 123 \}\)` is non-deterministic as the observations are not equivalent/,
    ),
  );
  captureWarnings(() =>
    t.throws(
      () => checkEnv(withSpec('reseed-unseeded'), opts),
      /`env.reset\(\{ seed: 123 \}\)` then `env.reset\(\)` is non-deterministic/,
    ),
  );
  captureWarnings(() =>
    t.throws(() => checkEnv(withSpec('random-reset-obs'), opts), /`env.reset\(\{ seed: 123 \}\)` is non-deterministic/),
  );
  // a spec marked nondeterministic skips the observation comparisons and the step determinism check
  captureWarnings(() => t.doesNotThrow(() => checkEnv(withSpec('random-reset-obs', true), opts)));
  captureWarnings(() => t.doesNotThrow(() => checkEnv(withSpec('step-random', true), opts)));
  captureWarnings(() => t.doesNotThrow(() => checkEnv(withSpec('step-truncate', true), opts)));
  // without a spec the generator state is still checked, and steps still are
  captureWarnings(() =>
    t.throws(() => checkEnv(new Broken('ignore-seed'), opts), /random generators are not the same/),
  );
  captureWarnings(() => t.throws(() => checkEnv(new Broken('step-truncate'), opts), /truncates after 1 step/));
  // nearly equal observations pass with a warning
  const jitter = captureWarnings(() => checkEnv(withSpec('jitter-reset-obs'), opts));
  t.match(jitter.warnings.join('\n'), /`env.reset\(\{ seed: 123 \}\)` observations are not equal although similar/);
  t.same(
    captureWarnings(() => checkEnv(withSpec('ok'), opts)).warnings.filter((w) => /although similar/.test(w)),
    [],
    'no warning for equal observations',
  );
  // the registered CartPole has a spec and passes every check
  t.doesNotThrow(() => captureWarnings(() => checkEnv(make('sinkflex/CartPole-v1').unwrapped as Env)));
});

t.test('checkSpaceLimit and dataEquivalence', async (t) => {
  const w = captureWarnings(() => checkSpaceLimit(new Box(-2, 3, [2]), 'action')).warnings;
  t.match(w.join(), /recommend using a symmetric and normalized space/);
  t.same(captureWarnings(() => checkSpaceLimit(new Box(-1, 1, [2]), 'action')).warnings, []);
  t.same(captureWarnings(() => checkSpaceLimit(new Box(0, 1, [2]), 'action')).warnings, []);
  t.equal(
    captureWarnings(() => checkSpaceLimit(new Dict({ a: new Box(-Infinity, 0, [1]) }), 'observation')).warnings.length,
    1,
  );
  t.ok(dataEquivalence({ a: [1, Float32Array.of(NaN)] }, { a: [1, Float32Array.of(NaN)] }), 'NaN equals NaN in arrays');
  t.notOk(dataEquivalence(Float32Array.of(1), Float64Array.of(1)), 'dtype matters');
  t.notOk(dataEquivalence(Float32Array.of(1), Float32Array.of(1, 2)));
  t.notOk(dataEquivalence(Float32Array.of(1), Float32Array.of(2)));
  t.notOk(dataEquivalence([1], [1, 2]));
  t.notOk(dataEquivalence({ a: 1 }, { a: 1, b: 2 }));
  t.notOk(dataEquivalence({ a: 1 }, { b: 1 }));
  t.notOk(dataEquivalence({ a: 1 }, [1]));
  t.notOk(dataEquivalence({}, new Map()));
  t.ok(dataEquivalence('x', 'x'));
  t.notOk(dataEquivalence(NaN, NaN), 'plain NaN numbers compare with ===');
  t.ok(
    dataEquivalence(Float32Array.of(1, 100), Float32Array.of(1 + 9e-6, 100.001)),
    'arrays: within allclose tolerance (1e-5 + 1e-5 |b|)',
  );
  t.notOk(dataEquivalence(Float32Array.of(1, 100), Float32Array.of(1 + 9e-6, 100.001), true), 'exact: not equal');
  t.notOk(dataEquivalence(Float64Array.of(1), Float64Array.of(1.00003)), 'outside the tolerance');
  t.ok(dataEquivalence(Float64Array.of(Infinity, -Infinity), Float64Array.of(Infinity, -Infinity)));
  t.notOk(dataEquivalence(Float64Array.of(Infinity), Float64Array.of(-Infinity)));
  t.notOk(dataEquivalence(1, 1 + 1e-9), 'plain numbers are exact (Python ==)');
});

t.test('checkAsyncEnv', async (t) => {
  await t.resolves(captureWarningsAsync(() => checkAsyncEnv(new AsyncCountingEnv(), { skipRenderCheck: true })));
  const made = await makeAsync('sinkflex/CartPole-v1');
  const { warnings } = await captureWarningsAsync(() => checkAsyncEnv(made));
  t.match(warnings.join('\n'), /different from the unwrapped version/);
  class AsyncBroken extends AsyncEnv<Float32Array, number> {
    observationSpace = new Box(0, 1, [2]);
    actionSpace = new Discrete(2);
    override async reset(args: ResetArgs = {}): Promise<ResetResult<Float32Array>> {
      await super.reset(args);
      if (args.options) throw new RangeError('no options please');
      return [Float32Array.of(0, 0), {}];
    }
    async step(): Promise<StepResult<Float32Array>> {
      return [Float32Array.of(0, 0), 0, false, false, {}];
    }
  }
  await captureWarningsAsync(() =>
    t.rejects(
      checkAsyncEnv(new AsyncBroken(), { skipRenderCheck: true }),
      /cannot be reset with options: .* threw RangeError: no options please/,
    ),
  );
  await t.rejects(checkAsyncEnv(new CountingEnv() as never), /must inherit from the AsyncEnv class/);
  class AsyncTruncating extends AsyncEnv<Float32Array, number> {
    observationSpace = new Box(0, 1, [2]);
    actionSpace = new Discrete(2);
    override async reset(args: ResetArgs = {}): Promise<ResetResult<Float32Array>> {
      await super.reset(args);
      return [Float32Array.of(this.npRandom.random(), 0), {}];
    }
    async step(): Promise<StepResult<Float32Array>> {
      return [Float32Array.of(0, 0), 0, false, true, {}];
    }
  }
  await captureWarningsAsync(() =>
    t.rejects(checkAsyncEnv(new AsyncTruncating(), { skipRenderCheck: true }), /truncates after 1 step/),
  );
  class AsyncReseeding extends AsyncTruncating {
    override async reset(args: ResetArgs = {}): Promise<ResetResult<Float32Array>> {
      await super.reset({ seed: args.seed ?? Math.floor(Math.random() * 2 ** 31) });
      return [Float32Array.of(this.npRandom.random(), 0), {}];
    }
    override async step(): Promise<StepResult<Float32Array>> {
      return [Float32Array.of(0, 0), 0, false, false, {}];
    }
  }
  const reseeding = new AsyncReseeding();
  reseeding.spec = new EnvSpec({ id: 'chk/AsyncReseeding-v0' });
  await captureWarningsAsync(() =>
    t.rejects(
      checkAsyncEnv(reseeding, { skipRenderCheck: true, skipCloseCheck: true }),
      /then `env.reset\(\)` is non-deterministic/,
    ),
  );
});
