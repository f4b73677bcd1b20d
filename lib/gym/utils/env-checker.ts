/**
 * `checkEnv`: an active check of an environment against the API contract (Gymnasium's
 * `utils.env_checker.check_env`). It checks the spaces; `reset` (return type; seeding: the same
 * seed gives the same generator state, another seed another state, and — when the environment
 * has a spec not marked `nondeterministic` — the same seed gives the same observation and a
 * following `reset()` without a seed gives the same observation too; options); the first
 * `reset`/`step` results; step determinism under a seed (unless the spec is marked
 * `nondeterministic`; one step must not truncate); rendering in every declared render mode
 * (through the spec) and that `close` may be called twice. Failures throw
 * {@link EnvCheckError} with a message that says what is wrong; doubtful but legal choices are
 * gym warnings. `checkAsyncEnv` does the same for an {@link AsyncEnv}.
 * @module
 */
import { AsyncEnv } from '../async-core.js';
import { Env, type EnvBase } from '../core.js';
import { EnvCheckError } from '../errors.js';
import { logger } from '../logger.js';
import type { RandomGenerator } from '../random.js';
import { makeAsync, type EnvSpec } from '../registration.js';
import { Box } from '../spaces/box.js';
import { Dict, Tuple, type AnySpace } from '../spaces/composite.js';
import type { ResetResult, StepResult } from '../types.js';
import { dataEquivalence } from './data-equivalence.js';
import {
  checkRenderMetadata,
  checkRenderResult,
  checkResetResult,
  checkSpace,
  checkStepResult,
  typeName,
} from './passive-checks.js';

/** Options of {@link checkEnv}. */
export interface CheckEnvOptions {
  /** Skip the render checks (default false). */
  skipRenderCheck?: boolean;
  /** Skip the double-close check (default false). */
  skipCloseCheck?: boolean;
}

function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new EnvCheckError(message);
}

/** Warns about infinite Box bounds and non-normalised Box action spaces (Gymnasium's `check_space_limit`). */
export function checkSpaceLimit(space: AnySpace, spaceType: 'observation' | 'action'): void {
  if (space instanceof Box) {
    if (Array.from(space.low as ArrayLike<number>).some((v, i) => !space.boundedBelow[i] || v === -Infinity)) {
      logger.warn(`A Box ${spaceType} space minimum value is -infinity. This is probably too low.`);
    }
    if (Array.from(space.high as ArrayLike<number>).some((v, i) => !space.boundedAbove[i] || v === Infinity)) {
      logger.warn(`A Box ${spaceType} space maximum value is infinity. This is probably too high.`);
    }
    if (spaceType === 'action' && space.shape.length === 1) {
      let bad = false;
      for (let i = 0; i < space.size; i++) {
        const lo = space.low[i];
        const hi = space.high[i];
        if ((lo !== 0 && Math.abs(lo) !== Math.abs(hi)) || lo < -1 || hi > 1) bad = true;
      }
      if (bad)
        logger.warn(
          'For Box action spaces, we recommend using a symmetric and normalized space (range=[-1, 1] or [0, 1]).',
        );
    }
  } else if (space instanceof Tuple) {
    for (const s of space.spaces as AnySpace[]) checkSpaceLimit(s, spaceType);
  } else if (space instanceof Dict) {
    for (const k of space.keys) checkSpaceLimit(space.spaces[k], spaceType);
  }
}

function rngOf(env: EnvBase): RandomGenerator | null {
  return (env.unwrapped as unknown as { npRandomValue: RandomGenerator | null }).npRandomValue;
}

/** A snapshot of the unwrapped environment's generator state, comparable with `===` ('null' without a generator). */
function rngState(env: EnvBase): string {
  return JSON.stringify(rngOf(env)?.getState() ?? null);
}

type AnyEnvLike = Env | AsyncEnv;

/** The checks, written once for sync and async environments: every environment call is yielded and comes back resolved. */
function* checks(env: AnyEnvLike, options: CheckEnvOptions, isAsync: boolean): Generator<unknown, void, unknown> {
  if (env.unwrapped !== env) {
    logger.warn(
      `The environment (${env.toString()}) is different from the unwrapped version (${env.unwrapped.toString()}). This could effect the environment checker as the environment most likely has a wrapper applied to it. We recommend using the raw environment for \`checkEnv\` using \`env.unwrapped\`.`,
    );
  }
  const spaces = env as unknown as { actionSpace?: AnySpace; observationSpace?: AnySpace };
  assert(
    spaces.actionSpace !== undefined && spaces.actionSpace !== null,
    'The environment must specify an action space (actionSpace).',
  );
  checkSpace(spaces.actionSpace, 'action');
  assert(
    spaces.observationSpace !== undefined && spaces.observationSpace !== null,
    'The environment must specify an observation space (observationSpace).',
  );
  checkSpace(spaces.observationSpace, 'observation');
  const obsSpace = spaces.observationSpace;
  const actSpace = spaces.actionSpace;
  checkSpaceLimit(obsSpace, 'observation');
  checkSpaceLimit(actSpace, 'action');
  if (typeof (env as unknown as { seed?: unknown }).seed === 'function') {
    logger.warn(
      'Official support for the `seed` function is dropped. Standard practice is to reset environments using `env.reset({ seed })`',
    );
  }

  // reset return type
  const result = yield env.reset();
  assert(
    Array.isArray(result),
    `The result returned by \`env.reset()\` was not a tuple of the form \`[obs, info]\`, where \`obs\` is a observation and \`info\` is a dictionary containing additional information. Actual type: \`${typeName(result)}\``,
  );
  assert(result.length === 2, `Calling the reset method did not return a 2-tuple, actual length: ${result.length}`);
  assert(
    obsSpace.contains(result[0]),
    'The first element returned by `env.reset()` is not within the observation space.',
  );
  assert(
    typeof result[1] === 'object' && result[1] !== null && !Array.isArray(result[1]),
    `The second element returned by \`env.reset()\` was not a dictionary, actual type: ${typeName(result[1])}`,
  );

  // seeding (Gymnasium's check_reset_seed_determinism): a seed fixes the generator and the
  // observations; a reset without a seed continues the generator, so it is reproducible too
  const spec: EnvSpec | null = env.spec;
  const compareObs = spec !== null && spec.nondeterministic === false;
  const [obs1] = (yield env.reset({ seed: 123 })) as ResetResult<unknown>;
  assert(
    obsSpace.contains(obs1),
    'The observation returned by `env.reset({ seed: 123 })` is not within the observation space.',
  );
  assert(
    rngOf(env) !== null,
    'Expects the random number generator to have been generated given a seed was passed to reset. Most likely the environment reset function does not call `super.reset({ seed })`.',
  );
  const state1 = rngState(env);
  const [obs2] = (yield env.reset()) as ResetResult<unknown>;
  assert(obsSpace.contains(obs2), 'The observation returned by `env.reset()` is not within the observation space.');
  const [obs3] = (yield env.reset({ seed: 123 })) as ResetResult<unknown>;
  assert(
    obsSpace.contains(obs3),
    'The observation returned by `env.reset({ seed: 123 })` is not within the observation space.',
  );
  const state3 = rngState(env);
  const [obs4] = (yield env.reset()) as ResetResult<unknown>;
  assert(obsSpace.contains(obs4), 'The observation returned by `env.reset()` is not within the observation space.');
  if (compareObs) {
    assert(
      dataEquivalence(obs1, obs3),
      'Using `env.reset({ seed: 123 })` is non-deterministic as the observations are not equivalent.',
    );
    assert(
      dataEquivalence(obs2, obs4),
      'Using `env.reset({ seed: 123 })` then `env.reset()` is non-deterministic as the observations are not equivalent.',
    );
    if (!dataEquivalence(obs1, obs3, true))
      logger.warn('Using `env.reset({ seed: 123 })` observations are not equal although similar.');
    if (!dataEquivalence(obs2, obs4, true))
      logger.warn('Using `env.reset({ seed: 123 })` then `env.reset()` observations are not equal although similar.');
  }
  assert(
    state1 === state3,
    'Most likely the environment reset function does not call `super.reset({ seed })` as the random generators are not the same when the same seeds are passed to `env.reset`.',
  );
  const [obs5] = (yield env.reset({ seed: 456 })) as ResetResult<unknown>;
  assert(
    obsSpace.contains(obs5),
    'The observation returned by `env.reset({ seed: 456 })` is not within the observation space.',
  );
  assert(
    rngState(env) !== state1,
    'Most likely the environment reset function does not call `super.reset({ seed })` as the random number generators are not different when different seeds are passed to `env.reset`.',
  );

  // options
  try {
    yield env.reset({ options: {} });
  } catch (e) {
    throw new EnvCheckError(
      `The environment cannot be reset with options: env.reset({ options: {} }) threw ${(e as Error).name}: ${(e as Error).message}`,
      { cause: e },
    );
  }

  // passive checks of reset and step
  checkResetResult(yield env.reset(), obsSpace);
  checkStepResult(yield env.step(actSpace.sample()), obsSpace);

  // step determinism (Gymnasium's check_step_determinism: skipped only for a spec marked
  // nondeterministic; one step after the same seeded reset must agree and must not truncate)
  if (!(spec !== null && spec.nondeterministic)) {
    actSpace.seed(123);
    const action = actSpace.sample();
    yield env.reset({ seed: 123 });
    const r0 = (yield env.step(action)) as StepResult<unknown>;
    const state0 = rngState(env);
    yield env.reset({ seed: 123 });
    const r1 = (yield env.step(action)) as StepResult<unknown>;
    assert(rngState(env) === state0, 'The `npRandom` is not properly been updated after step.');
    assert(
      dataEquivalence(r0[0], r1[0]),
      'Deterministic step observations are not equivalent for the same seed and action',
    );
    if (!dataEquivalence(r0[0], r1[0], true))
      logger.warn('Step observations are not equal although similar given the same seed and action');
    assert(dataEquivalence(r0[1], r1[1]), 'Deterministic step rewards are not equivalent for the same seed and action');
    if (!dataEquivalence(r0[1], r1[1], true))
      logger.warn('Step rewards are not equal although similar given the same seed and action');
    assert(
      dataEquivalence(r0[2], r1[2], true),
      'Deterministic step termination are not equivalent for the same seed and action',
    );
    assert(r0[3] === false && r1[3] === false, 'Environment truncates after 1 step, something has gone very wrong.');
    assert(dataEquivalence(r0[4], r1[4]), 'Deterministic step info are not equivalent for the same seed and action');
    if (!dataEquivalence(r0[4], r1[4], true))
      logger.warn('Step info are not equal although similar given the same seed and action');
  }

  // rendering
  if (!options.skipRenderCheck) {
    if (env.renderMode !== null) {
      checkRenderMetadata(env.metadata, env.renderMode);
      checkRenderResult(env.renderMode, yield env.render());
    }
    if (spec !== null) {
      for (const mode of env.metadata.renderModes ?? []) {
        const other = (yield isAsync
          ? makeAsync(spec, { renderMode: mode })
          : spec.make({ renderMode: mode })) as AnyEnvLike;
        yield other.reset();
        checkRenderMetadata(other.metadata, other.renderMode);
        checkRenderResult(other.renderMode, yield other.render());
        yield other.close();
      }
    } else {
      logger.warn(
        'Not able to test alternative render modes due to the environment not having a spec. Try instantiating the environment through `make`',
      );
    }
  }

  // close twice
  if (!options.skipCloseCheck && spec !== null) {
    const other = (yield isAsync ? makeAsync(spec) : spec.make()) as AnyEnvLike;
    yield other.close();
    try {
      yield other.close();
    } catch (e) {
      logger.warn(
        `Calling \`env.close()\` on the closed environment should be allowed, but it raised an exception: ${(e as Error).message}`,
      );
    }
  }
}

/** Checks a synchronous environment (see the module description); throws {@link EnvCheckError} on the first violation. */
export function checkEnv(env: Env, options: CheckEnvOptions = {}): void {
  if (!(env instanceof Env)) {
    throw new EnvCheckError(
      `The environment must inherit from the Env class${(env as unknown) instanceof AsyncEnv ? ' (use checkAsyncEnv for an AsyncEnv)' : ''}, actual class: ${typeName(env)}.`,
    );
  }
  const gen = checks(env, options, false);
  let step = gen.next();
  while (!step.done) step = gen.next(step.value);
}

/** {@link checkEnv} for an {@link AsyncEnv}. */
export async function checkAsyncEnv(env: AsyncEnv, options: CheckEnvOptions = {}): Promise<void> {
  if (!(env instanceof AsyncEnv))
    throw new EnvCheckError(`The environment must inherit from the AsyncEnv class, actual class: ${typeName(env)}.`);
  const gen = checks(env, options, true);
  let step = gen.next();
  while (!step.done) {
    let value: unknown;
    try {
      value = await step.value;
    } catch (e) {
      step = gen.throw(e);
      continue;
    }
    step = gen.next(value);
  }
}
