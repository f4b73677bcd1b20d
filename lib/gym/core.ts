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
 * the seeded generator `npRandom`, and attribute access through wrappers.
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

  /** Metadata: render modes, render fps, ... (the class's unless set on the instance). */
  get metadata(): EnvMetadata {
    return this.metadataOverride ?? (this.constructor as typeof EnvBase).metadata;
  }
  set metadata(value: EnvMetadata) {
    this.metadataOverride = value;
  }

  /** The render mode chosen at construction (one of `metadata.renderModes`), or null. */
  get renderMode(): string | null {
    return this.renderModeValue ?? null;
  }
  set renderMode(value: string | null) {
    this.renderModeValue = value;
  }

  /** The spec the environment was made from by `make`, else null. */
  get spec(): EnvSpec | null {
    return this.specValue ?? null;
  }
  set spec(value: EnvSpec | null) {
    this.specValue = value;
  }

  /** The environment's generator; created from a random seed on first use when never seeded. */
  get npRandom(): RandomGenerator {
    if (this.npRandomValue === null) {
      this.npRandomValue = new RandomGenerator();
      this.npRandomSeedValue = this.npRandomValue.seed;
    }
    return this.npRandomValue;
  }
  set npRandom(value: RandomGenerator) {
    this.npRandomValue = value;
    this.npRandomSeedValue = -1;
  }

  /** The seed of `npRandom` (-1 when the generator was assigned directly). */
  get npRandomSeed(): Seed {
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
    return this as EnvBase<unknown, unknown>;
  }

  /** True when this environment (or a wrapped one) has the attribute `name`. */
  hasWrapperAttr(name: string): boolean {
    return name in this;
  }

  /** The attribute `name` of the first layer (outermost first) that has it. */
  getWrapperAttr<T = unknown>(name: string): T {
    if (!(name in this)) throw new TypeError(`${this.toString()} has no attribute \`${name}\``);
    return (this as unknown as Record<string, T>)[name];
  }

  /**
   * Sets the attribute `name` on the first layer (outermost first) that has it; when none has
   * it, on this (outermost) layer if `force` (default). Returns whether it was set.
   */
  setWrapperAttr(name: string, value: unknown, options: SetWrapperAttrOptions = {}): boolean {
    if (name in this || options.force !== false) {
      (this as unknown as Record<string, unknown>)[name] = value;
      return true;
    }
    return false;
  }

  /** `<ClassName<spec id>>`, or `<ClassName instance>` without a spec (as Gymnasium prints). */
  toString(): string {
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
    if (this.reset === Env.prototype.reset) throw new NotImplementedError(`${this.constructor.name} must implement reset()`);
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
    if (!(env instanceof Env)) throw new TypeError(`Expected env to be an Env, got ${env === null ? 'null' : typeof env}`);
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

  /** `<WrapperName<inner>>`, as Gymnasium prints wrappers. */
  override toString(): string {
    return `<${this.constructor.name}${this.env.toString()}>`;
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
  constructor(env: Env<Obs, Act>, private readonly fn: (obs: Obs) => WObs, observationSpace?: Space<WObs>) {
    super(env);
    if (observationSpace) this.observationSpace = observationSpace;
  }
  observation(obs: Obs): WObs {
    return this.fn(obs);
  }
}

/** A RewardWrapper from a function (Gymnasium's `TransformReward`). */
export class TransformReward<Obs, Act> extends RewardWrapper<Obs, Act> {
  constructor(env: Env<Obs, Act>, private readonly fn: (reward: number) => number) {
    super(env);
  }
  reward(reward: number): number {
    return this.fn(reward);
  }
}

/** An ActionWrapper from a function (Gymnasium's `TransformAction`). */
export class TransformAction<Obs, WAct, Act> extends ActionWrapper<Obs, WAct, Act> {
  constructor(env: Env<Obs, Act>, private readonly fn: (action: WAct) => Act, actionSpace?: Space<WAct>) {
    super(env);
    if (actionSpace) this.actionSpace = actionSpace;
  }
  action(action: WAct): Act {
    return this.fn(action);
  }
}

/** Re-exported for wrappers that type their info. */
export type { Info, AnySpace };
