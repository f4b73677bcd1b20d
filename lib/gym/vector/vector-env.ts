/**
 * What vector environments share (Gymnasium's `VectorEnv`): `numEnvs`, the single and batched
 * spaces, metadata with the autoreset mode, the seed rule of `reset` (one integer `s` seeds
 * sub-environment `i` with `s + i`; an array gives one seed per sub-environment) and the
 * `reset_mask` option of partial resets.
 * @module
 */
import { ClosedEnvironmentError } from '../errors.js';
import { RandomGenerator, type Seed } from '../random.js';
import type { EnvSpec } from '../registration.js';
import { batchSpace } from '../spaces/batch.js';
import type { AnySpace } from '../spaces/composite.js';
import { AutoresetMode, type EnvMetadata, type Info } from '../types.js';

/** The seed argument of a vector reset: one integer (`seed + i` per sub-environment), one per sub-environment, or null. */
export type VectorSeed = Seed | ReadonlyArray<Seed | null> | null;

/** Arguments of a vector `reset`. `options.reset_mask` (or `resetMask`) resets only the marked sub-environments. */
export interface VectorResetArgs {
  /** Seeds (see {@link VectorSeed}). */
  seed?: VectorSeed;
  /** Options for every sub-environment; `reset_mask` selects sub-environments to reset. */
  options?: Record<string, unknown> | null;
}

/** `[observations, infos]` of a vector reset. */
export type VectorResetResult<Obs> = [obs: Obs, infos: Info];

/** `[observations, rewards, terminations, truncations, infos]` of a vector step. */
export type VectorStepResult<Obs> = [
  obs: Obs,
  rewards: Float64Array,
  terminations: boolean[],
  truncations: boolean[],
  infos: Info,
];

/** Options shared by vector environments. */
export interface VectorEnvOptions {
  /** Return copies of the observation batch (default true); false returns the internal buffer, overwritten by the next call. */
  copy?: boolean;
  /** When ended sub-environments are reset (default NEXT_STEP). */
  autoresetMode?: AutoresetMode | 'NextStep' | 'SameStep' | 'Disabled';
}

/** Validates an autoreset mode (the enum or its string value). */
export function parseAutoresetMode(mode: VectorEnvOptions['autoresetMode']): AutoresetMode {
  if (mode === undefined) return AutoresetMode.NEXT_STEP;
  const values = Object.values(AutoresetMode) as string[];
  if (!values.includes(mode))
    throw new RangeError(`Unexpected autoreset mode ${String(mode)}, expected one of ${values.join(', ')}`);
  return mode as AutoresetMode;
}

/** One seed per sub-environment from a {@link VectorSeed}. */
export function expandSeeds(seed: VectorSeed | undefined, numEnvs: number): Array<Seed | null> {
  if (seed === undefined || seed === null) return new Array<Seed | null>(numEnvs).fill(null);
  if (typeof seed === 'number' || typeof seed === 'bigint') {
    return Array.from({ length: numEnvs }, (_, i) => (typeof seed === 'bigint' ? seed + BigInt(i) : seed + i));
  }
  if (!Array.isArray(seed))
    throw new TypeError(`seed must be an integer, an array of seeds or null, got ${String(seed)}`);
  if (seed.length !== numEnvs)
    throw new RangeError(
      `If seeds are passed as a list the length must match numEnvs=${numEnvs} but got length=${seed.length}.`,
    );
  return [...seed];
}

/**
 * Takes `reset_mask` (or `resetMask`) out of the options: a boolean array (or 0/1 typed
 * array) of length numEnvs with at least one true. Returns the mask (null when absent) and the
 * options without it.
 */
export function splitResetMask(
  options: Record<string, unknown> | null | undefined,
  numEnvs: number,
): { mask: boolean[] | null; options: Record<string, unknown> | null } {
  if (!options) return { mask: null, options: options ?? null };
  const key = 'reset_mask' in options ? 'reset_mask' : 'resetMask' in options ? 'resetMask' : null;
  if (key === null) return { mask: null, options };
  const { [key]: raw, ...rest } = options;
  if (!Array.isArray(raw) && !(ArrayBuffer.isView(raw) && !(raw instanceof DataView))) {
    throw new TypeError(`\`options.reset_mask\` must be a boolean array, got ${typeof raw}`);
  }
  const values = Array.from(raw as ArrayLike<unknown>);
  if (values.length !== numEnvs)
    throw new RangeError(`\`options.reset_mask\` must have length ${numEnvs}, got ${values.length}`);
  if (!values.every((v) => typeof v === 'boolean' || v === 0 || v === 1))
    throw new TypeError('`options.reset_mask` must hold booleans (or 0/1)');
  const mask = values.map((v) => v === true || v === 1);
  if (!mask.some(Boolean))
    throw new RangeError(`\`options.reset_mask\` must contain at least one true, got [${mask.join(', ')}]`);
  return { mask, options: rest };
}

/** The layer of a wrapper stack that has `name` (outermost first), following `.env`. */
export function resolveAttrOwner(env: object, name: string): object {
  let layer: object = env;
  for (;;) {
    if (name in layer) return layer;
    const inner = (layer as { env?: unknown }).env;
    if (typeof inner !== 'object' || inner === null) throw new TypeError(`${String(env)} has no attribute \`${name}\``);
    layer = inner;
  }
}

/** The fields every vector environment has. */
// eslint-disable-next-line @typescript-eslint/no-unused-vars
export abstract class VectorEnvBase<Obs = unknown, Act = unknown> {
  /** Number of sub-environments. */
  readonly numEnvs: number;
  /** The observation space of one sub-environment. */
  readonly singleObservationSpace: AnySpace;
  /** The action space of one sub-environment. */
  readonly singleActionSpace: AnySpace;
  /** The space of observation batches. */
  readonly observationSpace: AnySpace;
  /** The space of action batches. */
  readonly actionSpace: AnySpace;
  /** The sub-environments' metadata plus `autoresetMode`. */
  readonly metadata: EnvMetadata;
  /** The render mode of the sub-environments. */
  readonly renderMode: string | null;
  /** The autoreset mode. */
  readonly autoresetMode: AutoresetMode;
  /** Whether the observations returned are copies. */
  readonly copy: boolean;
  /** The spec when made by `makeVec`, else null. */
  spec: EnvSpec | null = null;
  /** Whether `close()` was called. */
  closed = false;
  /** The vector environment's own generator (seeded by `reset({ seed })` with an integer seed). */
  protected rng: RandomGenerator | null = null;

  protected constructor(
    numEnvs: number,
    single: { observationSpace: AnySpace; actionSpace: AnySpace; metadata: EnvMetadata; renderMode: string | null },
    options: VectorEnvOptions,
  ) {
    if (!Number.isSafeInteger(numEnvs) || numEnvs < 1)
      throw new RangeError(`A vector environment needs at least one sub-environment, got ${numEnvs}`);
    this.numEnvs = numEnvs;
    this.copy = options.copy ?? true;
    this.autoresetMode = parseAutoresetMode(options.autoresetMode);
    this.singleObservationSpace = single.observationSpace;
    this.singleActionSpace = single.actionSpace;
    this.observationSpace = batchSpace(single.observationSpace, numEnvs);
    this.actionSpace = batchSpace(single.actionSpace, numEnvs);
    this.metadata = { ...single.metadata, autoresetMode: this.autoresetMode };
    this.renderMode = single.renderMode;
  }

  /** The vector environment's generator (seeded by an integer reset seed; random otherwise). */
  get npRandom(): RandomGenerator {
    this.rng ??= new RandomGenerator();
    return this.rng;
  }

  /** Seeds the vector environment's own generator from an integer reset seed. */
  protected seedVector(seed: VectorSeed | undefined): void {
    if (typeof seed === 'number' || typeof seed === 'bigint') this.rng = new RandomGenerator(seed);
  }

  /** The innermost vector environment (this one). */
  get unwrapped(): this {
    return this;
  }

  /** Throws when closed. */
  protected assertOpen(what: string): void {
    if (this.closed)
      throw new ClosedEnvironmentError(
        `Trying to operate on \`${this.constructor.name}\` (\`${what}\`), after a call to \`close()\`.`,
      );
  }

  /** `ClassName(num_envs=N)` or `ClassName(id, num_envs=N)`, as Gymnasium prints. */
  toString(): string {
    return this.spec === null
      ? `${this.constructor.name}(num_envs=${this.numEnvs})`
      : `${this.constructor.name}(${this.spec.id}, num_envs=${this.numEnvs})`;
  }
}
