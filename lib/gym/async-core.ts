/**
 * Asynchronous environments: {@link AsyncEnv} is {@link Env} with `reset`, `step`, `render` and
 * `close` returning Promises, for environments whose step awaits I/O (an LLM user simulator, a
 * remote tool). {@link AsyncWrapper} and the async observation/action/reward wrappers mirror the
 * synchronous ones; {@link toAsyncEnv} adapts a synchronous environment.
 * @module
 */
import { Env, EnvBase, type SetWrapperAttrOptions } from './core.js';
import { NotImplementedError } from './errors.js';
import type { Space } from './spaces/space.js';
import type { RenderFrame, ResetArgs, ResetResult, StepResult } from './types.js';

/**
 * An environment whose methods return Promises. Subclasses define the spaces, `step` and
 * `reset` (calling `await super.reset({ seed })` first), and optionally `render` and `close`.
 */
export abstract class AsyncEnv<Obs = unknown, Act = unknown> extends EnvBase<Obs, Act> {
  /** Advances the environment by one action. */
  abstract step(action: Act): Promise<StepResult<Obs>>;

  /** Resets the environment; the base implementation only reseeds `npRandom` (see {@link Env.reset}). */
  async reset(args: ResetArgs = {}): Promise<ResetResult<Obs>> {
    this.seedFromReset(args?.seed);
    if (this.reset === AsyncEnv.prototype.reset)
      throw new NotImplementedError(`${this.constructor.name} must implement reset()`);
    return [undefined as Obs, {}];
  }

  /** A frame in `renderMode` (not implemented by default). */
  async render(): Promise<RenderFrame | RenderFrame[] | null> {
    throw new NotImplementedError(`${this.constructor.name} does not implement render()`);
  }

  /** Releases resources; calling it again is allowed. */
  async close(): Promise<void> {}
}

/** Any environment with reset/step/render/close: sync or async. */
export type AnyEnv<Obs = unknown, Act = unknown> = Env<Obs, Act> | AsyncEnv<Obs, Act>;

/** Wraps an asynchronous environment; every call and attribute passes through by default. */
export class AsyncWrapper<WObs = unknown, WAct = unknown, Obs = WObs, Act = WAct> extends AsyncEnv<WObs, WAct> {
  /** The wrapped environment. */
  readonly env: AsyncEnv<Obs, Act>;
  private observationSpaceOverride: Space<WObs> | undefined;
  private actionSpaceOverride: Space<WAct> | undefined;

  constructor(env: AsyncEnv<Obs, Act>) {
    super();
    if (!(env instanceof AsyncEnv))
      throw new TypeError(`Expected env to be an AsyncEnv, got ${env === null ? 'null' : typeof env}`);
    this.env = env;
    this.layerOver(env);
  }

  get observationSpace(): Space<WObs> {
    return this.observationSpaceOverride ?? (this.env.observationSpace as unknown as Space<WObs>);
  }
  set observationSpace(space: Space<WObs>) {
    this.observationSpaceOverride = space;
  }

  get actionSpace(): Space<WAct> {
    return this.actionSpaceOverride ?? (this.env.actionSpace as unknown as Space<WAct>);
  }
  set actionSpace(space: Space<WAct>) {
    this.actionSpaceOverride = space;
  }

  override step(action: WAct): Promise<StepResult<WObs>> {
    return this.env.step(action as unknown as Act) as unknown as Promise<StepResult<WObs>>;
  }

  override reset(args: ResetArgs = {}): Promise<ResetResult<WObs>> {
    return this.env.reset(args) as unknown as Promise<ResetResult<WObs>>;
  }

  override render(): Promise<RenderFrame | RenderFrame[] | null> {
    return this.env.render();
  }

  override close(): Promise<void> {
    return this.env.close();
  }
}

/** Transforms every observation with {@link AsyncObservationWrapper.observation} (may be async). */
export abstract class AsyncObservationWrapper<WObs, Act, Obs> extends AsyncWrapper<WObs, Act, Obs, Act> {
  /** Maps an observation of the wrapped environment. */
  abstract observation(obs: Obs): WObs | Promise<WObs>;

  override async reset(args: ResetArgs = {}): Promise<ResetResult<WObs>> {
    const [obs, info] = await this.env.reset(args);
    return [await this.observation(obs), info];
  }

  override async step(action: Act): Promise<StepResult<WObs>> {
    const [obs, reward, terminated, truncated, info] = await this.env.step(action);
    return [await this.observation(obs), reward, terminated, truncated, info];
  }
}

/** Transforms every reward with {@link AsyncRewardWrapper.reward} (may be async). */
export abstract class AsyncRewardWrapper<Obs, Act> extends AsyncWrapper<Obs, Act, Obs, Act> {
  /** Maps a reward of the wrapped environment. */
  abstract reward(reward: number): number | Promise<number>;

  override async step(action: Act): Promise<StepResult<Obs>> {
    const [obs, reward, terminated, truncated, info] = await this.env.step(action);
    return [obs, await this.reward(reward), terminated, truncated, info];
  }
}

/** Transforms every action with {@link AsyncActionWrapper.action} (may be async). */
export abstract class AsyncActionWrapper<Obs, WAct, Act> extends AsyncWrapper<Obs, WAct, Obs, Act> {
  /** Maps an action to one of the wrapped environment. */
  abstract action(action: WAct): Act | Promise<Act>;

  override async step(action: WAct): Promise<StepResult<Obs>> {
    return this.env.step(await this.action(action));
  }
}

/**
 * Presents a synchronous environment as an {@link AsyncEnv} (every call resolves with the
 * synchronous result; errors become rejections). Attributes pass through to it.
 */
export class SyncToAsyncEnv<Obs = unknown, Act = unknown> extends AsyncEnv<Obs, Act> {
  /** The synchronous environment. */
  readonly env: Env<Obs, Act>;

  constructor(env: Env<Obs, Act>) {
    super();
    if (!(env instanceof Env)) throw new TypeError('SyncToAsyncEnv expects an Env');
    this.env = env;
    this.layerOver(env);
  }

  get observationSpace(): Space<Obs> {
    return this.env.observationSpace;
  }
  get actionSpace(): Space<Act> {
    return this.env.actionSpace;
  }
  override async step(action: Act): Promise<StepResult<Obs>> {
    return this.env.step(action);
  }
  override async reset(args: ResetArgs = {}): Promise<ResetResult<Obs>> {
    return this.env.reset(args);
  }
  override async render(): Promise<RenderFrame | RenderFrame[] | null> {
    return this.env.render();
  }
  override async close(): Promise<void> {
    this.env.close();
  }
  /** Sets the attribute on the synchronous environment's first layer that has it, else here (unless `force` is false and this adapter lacks it too). */
  override setWrapperAttr(name: string, value: unknown, options: SetWrapperAttrOptions = {}): boolean {
    if (this.env.setWrapperAttr(name, value, { force: false })) return true;
    if (!(name in this) && options.force === false) return false;
    (this as unknown as Record<string, unknown>)[name] = value;
    return true;
  }
}

/** `env` itself when it is already asynchronous, else a {@link SyncToAsyncEnv} around it. */
export function toAsyncEnv<Obs, Act>(env: AnyEnv<Obs, Act>): AsyncEnv<Obs, Act> {
  if (env instanceof AsyncEnv) return env;
  return new SyncToAsyncEnv(env);
}
