/**
 * `PassiveEnvChecker`: checks the spaces when it wraps an environment and the results of the
 * first `reset()`, `step()` and `render()` (Gymnasium's `wrappers.PassiveEnvChecker`; the
 * first wrapper `make` applies). Problems are reported as gym warnings, broken contracts as
 * {@link EnvCheckError}. Later calls pass through unchecked.
 * @module
 */
import { AsyncEnv, AsyncWrapper } from '../async-core.js';
import { Env, Wrapper } from '../core.js';
import { logger } from '../logger.js';
import type { EnvSpec } from '../registration.js';
import type { AnySpace } from '../spaces/composite.js';
import type { EnvMetadata, RenderFrame, ResetArgs, ResetResult, StepResult } from '../types.js';
import {
  checkRenderMetadata,
  checkRenderResult,
  checkResetResult,
  checkSpace,
  checkStepResult,
  typeName,
} from '../utils/passive-checks.js';

function checkSpaces(env: { actionSpace?: unknown; observationSpace?: unknown }): void {
  if (env.actionSpace === undefined || env.actionSpace === null) {
    throw new TypeError(
      'The environment must specify an action space (actionSpace). See docs/environments.md, "Gymnasium API".',
    );
  }
  checkSpace(env.actionSpace, 'action');
  if (env.observationSpace === undefined || env.observationSpace === null) {
    throw new TypeError(
      'The environment must specify an observation space (observationSpace). See docs/environments.md, "Gymnasium API".',
    );
  }
  checkSpace(env.observationSpace, 'observation');
}

/**
 * What the sync and async checkers share: the checks of the first reset, step and render (the
 * caller passes the call's result and skips this once its flag is set; an async checker's
 * results are Promises, checked once they resolve) and Gymnasium's close (a close after the
 * first that fails is reported before the error propagates).
 */
class FirstCallChecks {
  private closeCalled = false;

  /** @param async - whether results are Promises (of an {@link AsyncEnv}). */
  constructor(private readonly async: boolean) {}

  private checked<T>(value: T, check: (v: Awaited<T>) => void): T {
    if (this.async) return Promise.resolve(value).then((v) => (check(v), v)) as T;
    check(value as Awaited<T>);
    return value;
  }

  reset<R>(env: { observationSpace: unknown }, result: R): R {
    return this.checked(result, (r) => checkResetResult(r, env.observationSpace as AnySpace));
  }

  step<R>(env: { observationSpace: unknown }, result: R): R {
    return this.checked(result, (r) => checkStepResult(r, env.observationSpace as AnySpace));
  }

  render<R>(env: { metadata: EnvMetadata; renderMode: string | null }, render: () => R): R {
    checkRenderMetadata(env.metadata, env.renderMode);
    return this.checked(render(), (frame) => checkRenderResult(env.renderMode, frame));
  }

  close<R>(close: () => R): R {
    if (!this.closeCalled) {
      this.closeCalled = true;
      return close();
    }
    const warn = (e: unknown): never => {
      logger.warn(
        'Calling `env.close()` on the closed environment should be allowed, but it raised the following exception.',
      );
      throw e;
    };
    try {
      const r = close();
      return (this.async ? Promise.resolve(r).catch(warn) : r) as R;
    } catch (e) {
      return warn(e);
    }
  }
}

/** The wrapped spec with `disableEnvChecker` false. */
function checkedSpec(spec: EnvSpec | null): EnvSpec | null {
  return spec?.copyWith({ disableEnvChecker: false }) ?? null;
}

/** Checks the first reset, step and render of an environment. */
export class PassiveEnvChecker<Obs, Act> extends Wrapper<Obs, Act> {
  /** Whether the first reset was checked. */
  checkedReset = false;
  /** Whether the first step was checked. */
  checkedStep = false;
  /** Whether the first render was checked. */
  checkedRender = false;
  private readonly checks = new FirstCallChecks(false);

  constructor(env: Env<Obs, Act>) {
    if (!(env instanceof Env))
      throw new TypeError(`The environment must inherit from the Env class, actual class: ${typeName(env)}`);
    super(env);
    checkSpaces(env);
  }

  override reset(args: ResetArgs = {}): ResetResult<Obs> {
    if (this.checkedReset) return this.env.reset(args);
    this.checkedReset = true;
    return this.checks.reset(this.env, this.env.reset(args));
  }

  override step(action: Act): StepResult<Obs> {
    if (this.checkedStep) return this.env.step(action);
    this.checkedStep = true;
    return this.checks.step(this.env, this.env.step(action));
  }

  override render(): RenderFrame | RenderFrame[] | null {
    if (this.checkedRender) return this.env.render();
    this.checkedRender = true;
    return this.checks.render(this.env, () => this.env.render());
  }

  override close(): void {
    this.checks.close(() => this.env.close());
  }

  /** The wrapped spec with `disableEnvChecker` false. */
  protected override layerSpec(spec: EnvSpec | null): EnvSpec | null {
    return checkedSpec(spec);
  }
}

/** {@link PassiveEnvChecker} for asynchronous environments. */
export class AsyncPassiveEnvChecker<Obs, Act> extends AsyncWrapper<Obs, Act> {
  /** Whether the first reset was checked. */
  checkedReset = false;
  /** Whether the first step was checked. */
  checkedStep = false;
  /** Whether the first render was checked. */
  checkedRender = false;
  private readonly checks = new FirstCallChecks(true);

  constructor(env: AsyncEnv<Obs, Act>) {
    if (!(env instanceof AsyncEnv))
      throw new TypeError(`The environment must inherit from the AsyncEnv class, actual class: ${typeName(env)}`);
    super(env);
    checkSpaces(env);
  }

  override async reset(args: ResetArgs = {}): Promise<ResetResult<Obs>> {
    if (this.checkedReset) return this.env.reset(args);
    this.checkedReset = true;
    return this.checks.reset(this.env, this.env.reset(args));
  }

  override async step(action: Act): Promise<StepResult<Obs>> {
    if (this.checkedStep) return this.env.step(action);
    this.checkedStep = true;
    return this.checks.step(this.env, this.env.step(action));
  }

  override async render(): Promise<RenderFrame | RenderFrame[] | null> {
    if (this.checkedRender) return this.env.render();
    this.checkedRender = true;
    return this.checks.render(this.env, () => this.env.render());
  }

  override async close(): Promise<void> {
    return this.checks.close(() => this.env.close());
  }

  /** The wrapped spec with `disableEnvChecker` false. */
  protected override layerSpec(spec: EnvSpec | null): EnvSpec | null {
    return checkedSpec(spec);
  }
}
