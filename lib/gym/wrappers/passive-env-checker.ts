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
import type { RenderFrame, ResetArgs, ResetResult, StepResult } from '../types.js';
import { checkRenderMetadata, checkRenderResult, checkResetResult, checkSpace, checkStepResult, typeName } from '../utils/passive-checks.js';

function checkSpaces(env: { actionSpace?: unknown; observationSpace?: unknown }): void {
  if (env.actionSpace === undefined || env.actionSpace === null) {
    throw new TypeError('The environment must specify an action space (actionSpace). See docs/environments.md, "Gymnasium API".');
  }
  checkSpace(env.actionSpace, 'action');
  if (env.observationSpace === undefined || env.observationSpace === null) {
    throw new TypeError('The environment must specify an observation space (observationSpace). See docs/environments.md, "Gymnasium API".');
  }
  checkSpace(env.observationSpace, 'observation');
}

/** Checks the first reset, step and render of an environment. */
export class PassiveEnvChecker<Obs, Act> extends Wrapper<Obs, Act> {
  /** Whether the first reset was checked. */
  checkedReset = false;
  /** Whether the first step was checked. */
  checkedStep = false;
  /** Whether the first render was checked. */
  checkedRender = false;
  private closeCalled = false;

  constructor(env: Env<Obs, Act>) {
    if (!(env instanceof Env)) throw new TypeError(`The environment must inherit from the Env class, actual class: ${typeName(env)}`);
    super(env);
    checkSpaces(env);
  }

  override reset(args: ResetArgs = {}): ResetResult<Obs> {
    if (this.checkedReset) return this.env.reset(args);
    this.checkedReset = true;
    const result = this.env.reset(args);
    checkResetResult(result, this.env.observationSpace as AnySpace);
    return result;
  }

  override step(action: Act): StepResult<Obs> {
    if (this.checkedStep) return this.env.step(action);
    this.checkedStep = true;
    const result = this.env.step(action);
    checkStepResult(result, this.env.observationSpace as AnySpace);
    return result;
  }

  override render(): RenderFrame | RenderFrame[] | null {
    if (this.checkedRender) return this.env.render();
    this.checkedRender = true;
    checkRenderMetadata(this.env.metadata, this.env.renderMode);
    const frame = this.env.render();
    checkRenderResult(this.env.renderMode, frame);
    return frame;
  }

  override close(): void {
    if (!this.closeCalled) {
      this.closeCalled = true;
      this.env.close();
      return;
    }
    try {
      this.env.close();
    } catch (e) {
      logger.warn('Calling `env.close()` on the closed environment should be allowed, but it raised the following exception.');
      throw e;
    }
  }

  /** The wrapped spec with `disableEnvChecker` false. */
  override get spec(): EnvSpec | null {
    return this.env.spec?.copyWith({ disableEnvChecker: false }) ?? null;
  }
  override set spec(value: EnvSpec | null) {
    this.env.spec = value;
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
  private closeCalled = false;

  constructor(env: AsyncEnv<Obs, Act>) {
    if (!(env instanceof AsyncEnv)) throw new TypeError(`The environment must inherit from the AsyncEnv class, actual class: ${typeName(env)}`);
    super(env);
    checkSpaces(env);
  }

  override async reset(args: ResetArgs = {}): Promise<ResetResult<Obs>> {
    if (this.checkedReset) return this.env.reset(args);
    this.checkedReset = true;
    const result = await this.env.reset(args);
    checkResetResult(result, this.env.observationSpace as AnySpace);
    return result;
  }

  override async step(action: Act): Promise<StepResult<Obs>> {
    if (this.checkedStep) return this.env.step(action);
    this.checkedStep = true;
    const result = await this.env.step(action);
    checkStepResult(result, this.env.observationSpace as AnySpace);
    return result;
  }

  override async render(): Promise<RenderFrame | RenderFrame[] | null> {
    if (this.checkedRender) return this.env.render();
    this.checkedRender = true;
    checkRenderMetadata(this.env.metadata, this.env.renderMode);
    const frame = await this.env.render();
    checkRenderResult(this.env.renderMode, frame);
    return frame;
  }

  override async close(): Promise<void> {
    if (!this.closeCalled) {
      this.closeCalled = true;
      return this.env.close();
    }
    try {
      await this.env.close();
    } catch (e) {
      logger.warn('Calling `env.close()` on the closed environment should be allowed, but it raised the following exception.');
      throw e;
    }
  }

  override get spec(): EnvSpec | null {
    return this.env.spec?.copyWith({ disableEnvChecker: false }) ?? null;
  }
  override set spec(value: EnvSpec | null) {
    this.env.spec = value;
  }
}
