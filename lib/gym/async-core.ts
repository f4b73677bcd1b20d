/**
 * Asynchronous environments: {@link AsyncEnv} is {@link Env} with `reset`, `step`, `render` and
 * `close` returning Promises, for environments whose step awaits I/O (an LLM user simulator, a
 * remote tool). {@link AsyncWrapper} and the async observation/action/reward wrappers mirror the
 * synchronous ones; {@link toAsyncEnv} adapts a synchronous environment.
 * @module
 */
import { Env, EnvBase, type SetWrapperAttrOptions } from './core.js';
import { NotImplementedError } from './errors.js';
import type { RandomGenerator, Seed } from './random.js';
import type { EnvSpec } from './registration.js';
import type { Space } from './spaces/space.js';
import type { EnvMetadata, RenderFrame, ResetArgs, ResetResult, StepResult } from './types.js';

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
    if (this.reset === AsyncEnv.prototype.reset) throw new NotImplementedError(`${this.constructor.name} must implement reset()`);
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
    if (!(env instanceof AsyncEnv)) throw new TypeError(`Expected env to be an AsyncEnv, got ${env === null ? 'null' : typeof env}`);
    this.env = env;
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

  override get metadata(): EnvMetadata {
    return this.metadataOverride ?? this.env.metadata;
  }
  override set metadata(value: EnvMetadata) {
    this.metadataOverride = value;
  }

  override get renderMode(): string | null {
    return this.env.renderMode;
  }
  override set renderMode(value: string | null) {
    this.env.renderMode = value;
  }

  override get spec(): EnvSpec | null {
    return this.env.spec;
  }
  override set spec(value: EnvSpec | null) {
    this.env.spec = value;
  }

  override get npRandom(): RandomGenerator {
    return this.env.npRandom;
  }
  override set npRandom(value: RandomGenerator) {
    this.env.npRandom = value;
  }

  override get npRandomSeed(): Seed {
    return this.env.npRandomSeed;
  }

  override get unwrapped(): EnvBase<unknown, unknown> {
    return this.env.unwrapped;
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

  override hasWrapperAttr(name: string): boolean {
    return name in this || this.env.hasWrapperAttr(name);
  }

  override getWrapperAttr<T = unknown>(name: string): T {
    if (name in this) return (this as unknown as Record<string, T>)[name];
    return this.env.getWrapperAttr<T>(name);
  }

  override setWrapperAttr(name: string, value: unknown, options: SetWrapperAttrOptions = {}): boolean {
    if (name in this) {
      (this as unknown as Record<string, unknown>)[name] = value;
      return true;
    }
    if (this.env.setWrapperAttr(name, value, { force: false })) return true;
    if (options.force === false) return false;
    (this as unknown as Record<string, unknown>)[name] = value;
    return true;
  }

  override toString(): string {
    return `<${this.constructor.name}${this.env.toString()}>`;
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
  }

  get observationSpace(): Space<Obs> {
    return this.env.observationSpace;
  }
  get actionSpace(): Space<Act> {
    return this.env.actionSpace;
  }
  override get metadata(): EnvMetadata {
    return this.metadataOverride ?? this.env.metadata;
  }
  override set metadata(value: EnvMetadata) {
    this.metadataOverride = value;
  }
  override get renderMode(): string | null {
    return this.env.renderMode;
  }
  override set renderMode(value: string | null) {
    this.env.renderMode = value;
  }
  override get spec(): EnvSpec | null {
    return this.env.spec;
  }
  override set spec(value: EnvSpec | null) {
    this.env.spec = value;
  }
  override get npRandom(): RandomGenerator {
    return this.env.npRandom;
  }
  override set npRandom(value: RandomGenerator) {
    this.env.npRandom = value;
  }
  override get npRandomSeed(): Seed {
    return this.env.npRandomSeed;
  }
  override get unwrapped(): EnvBase<unknown, unknown> {
    return this.env.unwrapped;
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
  override hasWrapperAttr(name: string): boolean {
    return name in this || this.env.hasWrapperAttr(name);
  }
  override getWrapperAttr<T = unknown>(name: string): T {
    if (name in this) return (this as unknown as Record<string, T>)[name];
    return this.env.getWrapperAttr<T>(name);
  }
  override setWrapperAttr(name: string, value: unknown, options: SetWrapperAttrOptions = {}): boolean {
    if (this.env.setWrapperAttr(name, value, { force: false })) return true;
    return super.setWrapperAttr(name, value, options);
  }
  override toString(): string {
    return `<${this.constructor.name}${this.env.toString()}>`;
  }
}

/** `env` itself when it is already asynchronous, else a {@link SyncToAsyncEnv} around it. */
export function toAsyncEnv<Obs, Act>(env: AnyEnv<Obs, Act>): AsyncEnv<Obs, Act> {
  if (env instanceof AsyncEnv) return env;
  return new SyncToAsyncEnv(env);
}
