/**
 * The environment API (Gymnasium's `gymnasium.core`): {@link Env} with `reset`/`step`/`render`/
 * `close`, spaces, metadata, spec and a seeded generator; {@link Wrapper} and the
 * observation/action/reward wrappers.
 * @module
 */
import { NotImplementedError } from './errors.js';
import { RandomGenerator, type Seed } from './random.js';
import type { EnvSpec } from './registration.js';
import type { AnySpace } from './spaces/composite.js';
import type { Space } from './spaces/space.js';
import type { EnvMetadata, Info, RenderFrame, ResetArgs, ResetResult, StepResult } from './types.js';

/** Options of `setWrapperAttr`. */
export interface SetWrapperAttrOptions {
  /** When no layer defines the attribute, set it on the outermost layer anyway (default true). */
  force?: boolean;
}

/**
 * What synchronous and asynchronous environments share: spaces, metadata, render mode, spec,
 * the seeded generator `npRandom`, and attribute access through wrappers. An environment that
 * is a layer over another (a wrapper, the sync-to-async adapter; see {@link EnvBase.layerOver})
 * passes its render mode, spec, generator, `unwrapped` and unknown wrapper attributes through to
 * it, and its metadata unless assigned; the sync and async wrappers share this code.
 */
export abstract class EnvBase<Obs = unknown, Act = unknown> {
  /** Class-level metadata (Gymnasium's class attribute); instances may override it. */
  static metadata: EnvMetadata = { renderModes: [] };
  /** The space of observations. */
  abstract observationSpace: Space<Obs>;
  /** The space of actions. */
  abstract actionSpace: Space<Act>;
  /** Instance metadata set by assignment (overrides the class's). */
  protected metadataOverride: EnvMetadata | undefined;
  private renderModeValue: string | null | undefined;
  private specValue: EnvSpec | null | undefined;
  /** The generator behind `npRandom` (null until seeded or first used). */
  protected npRandomValue: RandomGenerator | null = null;
  /** The seed of `npRandomValue` (-1 when set directly). */
  protected npRandomSeedValue: Seed | null = null;
  /** The environment this one is a layer over (null for an environment that is not a wrapper). */
  #inner: EnvBase<unknown, unknown> | null = null;

  /**
   * Makes this environment a layer over `inner` (what the wrappers' constructors do): render
   * mode, spec, `npRandom`, `unwrapped` and wrapper attributes pass through to it from then on.
   */
  protected layerOver(inner: EnvBase<unknown, unknown>): void {
    this.#inner = inner;
  }

  /**
   * The spec this layer reports for the spec of the environment it wraps (unchanged here;
   * wrappers that show up in a spec, such as `TimeLimit`, override it).
   */
  protected layerSpec(innerSpec: EnvSpec | null): EnvSpec | null {
    return innerSpec;
  }

  /** Metadata: render modes, render fps, ... (the class's, or the wrapped env's, unless set on the instance). */
  get metadata(): EnvMetadata {
    return (
      this.metadataOverride ??
      (this.#inner === null ? (this.constructor as typeof EnvBase).metadata : this.#inner.metadata)
    );
  }
  set metadata(value: EnvMetadata) {
    this.metadataOverride = value;
  }

  /** The render mode chosen at construction (one of `metadata.renderModes`), or null. */
  get renderMode(): string | null {
    return this.#inner === null ? (this.renderModeValue ?? null) : this.#inner.renderMode;
  }
  set renderMode(value: string | null) {
    if (this.#inner === null) this.renderModeValue = value;
    else this.#inner.renderMode = value;
  }

  /** The spec the environment was made from by `make`, else null. */
  get spec(): EnvSpec | null {
    return this.#inner === null ? (this.specValue ?? null) : this.layerSpec(this.#inner.spec);
  }
  set spec(value: EnvSpec | null) {
    if (this.#inner === null) this.specValue = value;
    else this.#inner.spec = value;
  }

  /** The environment's generator; created from a random seed on first use when never seeded. */
  get npRandom(): RandomGenerator {
    if (this.#inner !== null) return this.#inner.npRandom;
    if (this.npRandomValue === null) {
      this.npRandomValue = new RandomGenerator();
      this.npRandomSeedValue = this.npRandomValue.seed;
    }
    return this.npRandomValue;
  }
  set npRandom(value: RandomGenerator) {
    if (this.#inner !== null) {
      this.#inner.npRandom = value;
      return;
    }
    this.npRandomValue = value;
    this.npRandomSeedValue = -1;
  }

  /** The seed of `npRandom` (-1 when the generator was assigned directly). */
  get npRandomSeed(): Seed {
    if (this.#inner !== null) return this.#inner.npRandomSeed;
    if (this.npRandomSeedValue === null) void this.npRandom;
    return this.npRandomSeedValue as Seed;
  }

  /** Reseeds `npRandom` from `seed` when it is not null/undefined (what `super.reset({ seed })` does). */
  protected seedFromReset(seed: Seed | null | undefined): void {
    if (seed !== null && seed !== undefined) {
      this.npRandomValue = new RandomGenerator(seed);
      this.npRandomSeedValue = seed;
    }
  }

  /** The innermost environment (this one for an environment that is not a wrapper). */
  get unwrapped(): EnvBase<unknown, unknown> {
    return this.#inner === null ? (this as EnvBase<unknown, unknown>) : this.#inner.unwrapped;
  }

  /** True when this environment (or a wrapped one) has the attribute `name`. */
  hasWrapperAttr(name: string): boolean {
    return name in this || (this.#inner !== null && this.#inner.hasWrapperAttr(name));
  }

  /** The attribute `name` of the first layer (outermost first) that has it. */
  getWrapperAttr<T = unknown>(name: string): T {
    if (name in this) return (this as unknown as Record<string, T>)[name];
    if (this.#inner !== null) return this.#inner.getWrapperAttr<T>(name);
    throw new TypeError(`${this.toString()} has no attribute \`${name}\``);
  }

  /**
   * Sets the attribute `name` on the first layer (outermost first) that has it; when none has
   * it, on this (outermost) layer if `force` (default). Returns whether it was set.
   */
  setWrapperAttr(name: string, value: unknown, options: SetWrapperAttrOptions = {}): boolean {
    if (!(name in this) && this.#inner !== null && this.#inner.setWrapperAttr(name, value, { force: false }))
      return true;
    if (name in this || options.force !== false) {
      (this as unknown as Record<string, unknown>)[name] = value;
      return true;
    }
    return false;
  }

  /**
   * `<ClassName<spec id>>`, or `<ClassName instance>` without a spec (as Gymnasium prints); a
   * layer prints `<ClassName<inner>>`.
   */
  toString(): string {
    if (this.#inner !== null) return `<${this.constructor.name}${this.#inner.toString()}>`;
    return this.spec === null ? `<${this.constructor.name} instance>` : `<${this.constructor.name}<${this.spec.id}>>`;
  }
}

/**
 * A synchronous environment. Subclasses define `observationSpace`, `actionSpace`, `step` and
 * `reset` (calling `super.reset({ seed })` first so that a seed reseeds `npRandom`), and
 * optionally `render`, `close` and `static metadata`.
 */
export abstract class Env<Obs = unknown, Act = unknown> extends EnvBase<Obs, Act> {
  /** Advances the environment by one action. */
  abstract step(action: Act): StepResult<Obs>;

  /**
   * Resets the environment to an initial state. This base implementation only reseeds
   * `npRandom` when a seed is given; subclasses must override it (calling `super.reset({ seed })`)
   * and return `[observation, info]`.
   */
  reset(args: ResetArgs = {}): ResetResult<Obs> {
    this.seedFromReset(args?.seed);
    if (this.reset === Env.prototype.reset)
      throw new NotImplementedError(`${this.constructor.name} must implement reset()`);
    return [undefined as Obs, {}];
  }

  /** A frame of the environment in `renderMode` (not implemented by default). */
  render(): RenderFrame | RenderFrame[] | null {
    throw new NotImplementedError(`${this.constructor.name} does not implement render()`);
  }

  /** Releases resources; calling it again is allowed. */
  close(): void {}
}

/**
 * Wraps an environment to change its behaviour. By default every call and attribute is passed
 * to the wrapped environment; spaces and metadata can be overridden by assignment.
 */
export class Wrapper<WObs = unknown, WAct = unknown, Obs = WObs, Act = WAct> extends Env<WObs, WAct> {
  /** The wrapped environment. */
  readonly env: Env<Obs, Act>;
  private observationSpaceOverride: Space<WObs> | undefined;
  private actionSpaceOverride: Space<WAct> | undefined;

  constructor(env: Env<Obs, Act>) {
    super();
    if (!(env instanceof Env))
      throw new TypeError(`Expected env to be an Env, got ${env === null ? 'null' : typeof env}`);
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

  override step(action: WAct): StepResult<WObs> {
    return this.env.step(action as unknown as Act) as unknown as StepResult<WObs>;
  }

  override reset(args: ResetArgs = {}): ResetResult<WObs> {
    return this.env.reset(args) as unknown as ResetResult<WObs>;
  }

  override render(): RenderFrame | RenderFrame[] | null {
    return this.env.render();
  }

  override close(): void {
    this.env.close();
  }
}

/** Transforms every observation with {@link ObservationWrapper.observation}. */
export abstract class ObservationWrapper<WObs, Act, Obs> extends Wrapper<WObs, Act, Obs, Act> {
  /** Maps an observation of the wrapped environment. */
  abstract observation(obs: Obs): WObs;

  override reset(args: ResetArgs = {}): ResetResult<WObs> {
    const [obs, info] = this.env.reset(args);
    return [this.observation(obs), info];
  }

  override step(action: Act): StepResult<WObs> {
    const [obs, reward, terminated, truncated, info] = this.env.step(action);
    return [this.observation(obs), reward, terminated, truncated, info];
  }
}

/** Transforms every reward with {@link RewardWrapper.reward}. */
export abstract class RewardWrapper<Obs, Act> extends Wrapper<Obs, Act, Obs, Act> {
  /** Maps a reward of the wrapped environment. */
  abstract reward(reward: number): number;

  override step(action: Act): StepResult<Obs> {
    const [obs, reward, terminated, truncated, info] = this.env.step(action);
    return [obs, this.reward(reward), terminated, truncated, info];
  }
}

/** Transforms every action with {@link ActionWrapper.action} before the wrapped environment sees it. */
export abstract class ActionWrapper<Obs, WAct, Act> extends Wrapper<Obs, WAct, Obs, Act> {
  /** Maps an action to one of the wrapped environment. */
  abstract action(action: WAct): Act;

  override step(action: WAct): StepResult<Obs> {
    return this.env.step(this.action(action));
  }
}

/** An ObservationWrapper from a function (Gymnasium's `TransformObservation`). */
export class TransformObservation<WObs, Act, Obs> extends ObservationWrapper<WObs, Act, Obs> {
  constructor(
    env: Env<Obs, Act>,
    private readonly fn: (obs: Obs) => WObs,
    observationSpace?: Space<WObs>,
  ) {
    super(env);
    if (observationSpace) this.observationSpace = observationSpace;
  }
  observation(obs: Obs): WObs {
    return this.fn(obs);
  }
}

/** A RewardWrapper from a function (Gymnasium's `TransformReward`). */
export class TransformReward<Obs, Act> extends RewardWrapper<Obs, Act> {
  constructor(
    env: Env<Obs, Act>,
    private readonly fn: (reward: number) => number,
  ) {
    super(env);
  }
  reward(reward: number): number {
    return this.fn(reward);
  }
}

/** An ActionWrapper from a function (Gymnasium's `TransformAction`). */
export class TransformAction<Obs, WAct, Act> extends ActionWrapper<Obs, WAct, Act> {
  constructor(
    env: Env<Obs, Act>,
    private readonly fn: (action: WAct) => Act,
    actionSpace?: Space<WAct>,
  ) {
    super(env);
    if (actionSpace) this.actionSpace = actionSpace;
  }
  action(action: WAct): Act {
    return this.fn(action);
  }
}

/** Re-exported for wrappers that type their info. */
export type { Info, AnySpace };
