/**
 * `OrderEnforcing`: throws {@link ResetNeeded} when `step()` (or `render()`, unless disabled) is
 * called before the first `reset()` (Gymnasium's `wrappers.OrderEnforcing`).
 * @module
 */
import { AsyncWrapper, type AsyncEnv } from '../async-core.js';
import { Wrapper, type Env } from '../core.js';
import { ResetNeeded } from '../errors.js';
import type { EnvSpec } from '../registration.js';
import type { RenderFrame, ResetArgs, ResetResult, StepResult } from '../types.js';

/** Options of {@link OrderEnforcing}. */
export interface OrderEnforcingOptions {
  /** Allow `render()` before `reset()` (default false). */
  disableRenderOrderEnforcing?: boolean;
}

const STEP_MESSAGE = 'Cannot call env.step() before calling env.reset()';
const RENDER_MESSAGE =
  'Cannot call `env.render()` before calling `env.reset()`, if this is an intended action, set `disableRenderOrderEnforcing: true` on the OrderEnforcing wrapper.';

/** Enforces `reset()` before `step()` and `render()`. */
export class OrderEnforcing<Obs, Act> extends Wrapper<Obs, Act> {
  private hasResetValue = false;
  private readonly disableRender: boolean;

  constructor(env: Env<Obs, Act>, options: OrderEnforcingOptions = {}) {
    super(env);
    this.disableRender = options.disableRenderOrderEnforcing ?? false;
  }

  /** Whether `reset()` has been called. */
  get hasReset(): boolean {
    return this.hasResetValue;
  }

  override step(action: Act): StepResult<Obs> {
    if (!this.hasResetValue) throw new ResetNeeded(STEP_MESSAGE);
    return this.env.step(action);
  }

  override reset(args: ResetArgs = {}): ResetResult<Obs> {
    this.hasResetValue = true;
    return this.env.reset(args);
  }

  override render(): RenderFrame | RenderFrame[] | null {
    if (!this.disableRender && !this.hasResetValue) throw new ResetNeeded(RENDER_MESSAGE);
    return this.env.render();
  }

  /** The wrapped spec with `orderEnforce` true. */
  override get spec(): EnvSpec | null {
    return this.env.spec?.copyWith({ orderEnforce: true }) ?? null;
  }
  override set spec(value: EnvSpec | null) {
    this.env.spec = value;
  }
}

/** {@link OrderEnforcing} for asynchronous environments. */
export class AsyncOrderEnforcing<Obs, Act> extends AsyncWrapper<Obs, Act> {
  private hasResetValue = false;
  private readonly disableRender: boolean;

  constructor(env: AsyncEnv<Obs, Act>, options: OrderEnforcingOptions = {}) {
    super(env);
    this.disableRender = options.disableRenderOrderEnforcing ?? false;
  }

  /** Whether `reset()` has been called. */
  get hasReset(): boolean {
    return this.hasResetValue;
  }

  override async step(action: Act): Promise<StepResult<Obs>> {
    if (!this.hasResetValue) throw new ResetNeeded(STEP_MESSAGE);
    return this.env.step(action);
  }

  override reset(args: ResetArgs = {}): Promise<ResetResult<Obs>> {
    this.hasResetValue = true;
    return this.env.reset(args);
  }

  override async render(): Promise<RenderFrame | RenderFrame[] | null> {
    if (!this.disableRender && !this.hasResetValue) throw new ResetNeeded(RENDER_MESSAGE);
    return this.env.render();
  }

  override get spec(): EnvSpec | null {
    return this.env.spec?.copyWith({ orderEnforce: true }) ?? null;
  }
  override set spec(value: EnvSpec | null) {
    this.env.spec = value;
  }
}
