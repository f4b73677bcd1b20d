/**
 * `TimeLimit`: truncates episodes after `maxEpisodeSteps` steps (Gymnasium's
 * `wrappers.TimeLimit`): the counter restarts at every reset, and every step from the limit on
 * returns `truncated = true`.
 * @module
 */
import { AsyncWrapper, type AsyncEnv } from '../async-core.js';
import { Wrapper, type Env } from '../core.js';
import type { EnvSpec } from '../registration.js';
import type { ResetArgs, ResetResult, StepResult } from '../types.js';

function checkLimit(maxEpisodeSteps: number): number {
  if (!Number.isSafeInteger(maxEpisodeSteps) || maxEpisodeSteps <= 0) {
    throw new RangeError(`Expect the \`maxEpisodeSteps\` to be a positive integer, actually: ${maxEpisodeSteps}`);
  }
  return maxEpisodeSteps;
}

function specWithLimit(spec: EnvSpec | null, maxEpisodeSteps: number): EnvSpec | null {
  return spec === null ? null : spec.copyWith({ maxEpisodeSteps });
}

/** The step counting of {@link TimeLimit} and {@link AsyncTimeLimit}: one more step of `result`, truncated at the limit. */
function countStep<Obs>(
  wrapper: { elapsedSteps: number; readonly maxEpisodeSteps: number },
  result: StepResult<Obs>,
): StepResult<Obs> {
  const [obs, reward, terminated, truncated, info] = result;
  wrapper.elapsedSteps += 1;
  return [obs, reward, terminated, truncated || wrapper.elapsedSteps >= wrapper.maxEpisodeSteps, info];
}

/** Truncates episodes after `maxEpisodeSteps` steps. */
export class TimeLimit<Obs, Act> extends Wrapper<Obs, Act> {
  /** The step limit. */
  readonly maxEpisodeSteps: number;
  /** Steps taken since the last reset. */
  elapsedSteps = 0;

  constructor(env: Env<Obs, Act>, maxEpisodeSteps: number) {
    super(env);
    this.maxEpisodeSteps = checkLimit(maxEpisodeSteps);
  }

  override step(action: Act): StepResult<Obs> {
    return countStep(this, this.env.step(action));
  }

  override reset(args: ResetArgs = {}): ResetResult<Obs> {
    this.elapsedSteps = 0;
    return this.env.reset(args);
  }

  /** The wrapped spec with `maxEpisodeSteps` set to this limit. */
  protected override layerSpec(spec: EnvSpec | null): EnvSpec | null {
    return specWithLimit(spec, this.maxEpisodeSteps);
  }
}

/** {@link TimeLimit} for asynchronous environments. */
export class AsyncTimeLimit<Obs, Act> extends AsyncWrapper<Obs, Act> {
  /** The step limit. */
  readonly maxEpisodeSteps: number;
  /** Steps taken since the last reset. */
  elapsedSteps = 0;

  constructor(env: AsyncEnv<Obs, Act>, maxEpisodeSteps: number) {
    super(env);
    this.maxEpisodeSteps = checkLimit(maxEpisodeSteps);
  }

  override async step(action: Act): Promise<StepResult<Obs>> {
    return countStep(this, await this.env.step(action));
  }

  override reset(args: ResetArgs = {}): Promise<ResetResult<Obs>> {
    this.elapsedSteps = 0;
    return this.env.reset(args);
  }

  /** The wrapped spec with `maxEpisodeSteps` set to this limit. */
  protected override layerSpec(spec: EnvSpec | null): EnvSpec | null {
    return specWithLimit(spec, this.maxEpisodeSteps);
  }
}
