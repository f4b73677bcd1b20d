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

/** The checks of {@link OrderEnforcing} and {@link AsyncOrderEnforcing}. */
class ResetOrder {
  hasReset = false;
  private readonly disableRender: boolean;

  constructor(options: OrderEnforcingOptions) {
    this.disableRender = options.disableRenderOrderEnforcing ?? false;
  }

  beforeStep(): void {
    if (!this.hasReset) throw new ResetNeeded('Cannot call env.step() before calling env.reset()');
  }

  beforeRender(): void {
    if (!this.disableRender && !this.hasReset) {
      throw new ResetNeeded(
        'Cannot call `env.render()` before calling `env.reset()`, if this is an intended action, set `disableRenderOrderEnforcing: true` on the OrderEnforcing wrapper.',
      );
    }
  }
}

/** The wrapped spec with `orderEnforce` true. */
function enforcedSpec(spec: EnvSpec | null): EnvSpec | null {
  return spec?.copyWith({ orderEnforce: true }) ?? null;
}

/** Enforces `reset()` before `step()` and `render()`. */
export class OrderEnforcing<Obs, Act> extends Wrapper<Obs, Act> {
  private readonly order: ResetOrder;

  constructor(env: Env<Obs, Act>, options: OrderEnforcingOptions = {}) {
    super(env);
    this.order = new ResetOrder(options);
  }

  /** Whether `reset()` has been called. */
  get hasReset(): boolean {
    return this.order.hasReset;
  }

  override step(action: Act): StepResult<Obs> {
    this.order.beforeStep();
    return this.env.step(action);
  }

  override reset(args: ResetArgs = {}): ResetResult<Obs> {
    this.order.hasReset = true;
    return this.env.reset(args);
  }

  override render(): RenderFrame | RenderFrame[] | null {
    this.order.beforeRender();
    return this.env.render();
  }

  /** The wrapped spec with `orderEnforce` true. */
  protected override layerSpec(spec: EnvSpec | null): EnvSpec | null {
    return enforcedSpec(spec);
  }
}

/** {@link OrderEnforcing} for asynchronous environments. */
export class AsyncOrderEnforcing<Obs, Act> extends AsyncWrapper<Obs, Act> {
  private readonly order: ResetOrder;

  constructor(env: AsyncEnv<Obs, Act>, options: OrderEnforcingOptions = {}) {
    super(env);
    this.order = new ResetOrder(options);
  }

  /** Whether `reset()` has been called. */
  get hasReset(): boolean {
    return this.order.hasReset;
  }

  override async step(action: Act): Promise<StepResult<Obs>> {
    this.order.beforeStep();
    return this.env.step(action);
  }

  override reset(args: ResetArgs = {}): Promise<ResetResult<Obs>> {
    this.order.hasReset = true;
    return this.env.reset(args);
  }

  override async render(): Promise<RenderFrame | RenderFrame[] | null> {
    this.order.beforeRender();
    return this.env.render();
  }

  /** The wrapped spec with `orderEnforce` true. */
  protected override layerSpec(spec: EnvSpec | null): EnvSpec | null {
    return enforcedSpec(spec);
  }
}
