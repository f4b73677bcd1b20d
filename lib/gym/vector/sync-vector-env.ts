/**
 * `SyncVectorEnv`: runs `numEnvs` synchronous environments one after the other in this thread
 * (Gymnasium's `SyncVectorEnv`), batching observations and infos, with Gymnasium's three
 * autoreset modes:
 *
 * - NEXT_STEP: a step after an episode ended resets that sub-environment instead of stepping
 *   it (the action is ignored); it returns the first observation, reward 0, both flags false
 *   and the reset info.
 * - SAME_STEP: the step that ends an episode resets the sub-environment at once; it returns
 *   the new episode's first observation with the ending step's reward and flags, and puts the
 *   last observation and info in `info.final_obs` / `info.final_info` (masks `_final_obs`,
 *   `_final_info`), followed by the reset info. As in Gymnasium, `final_obs` is not batched:
 *   one entry per sub-environment, its last observation or null where no episode ended;
 *   `final_info` is a vector info like any other.
 * - DISABLED: nothing is reset; stepping an ended sub-environment throws until it is reset with
 *   `reset({ options: { reset_mask } })`.
 * @module
 */
import { AsyncEnv } from '../async-core.js';
import { Env } from '../core.js';
import { GymError } from '../errors.js';
import { concatenate, createEmptyArray, deepCopy, iterate } from '../spaces/batch.js';
import type { AnySpace } from '../spaces/composite.js';
import { AutoresetMode, type Info, type RenderFrame } from '../types.js';
import { addInfo } from './info.js';
import {
  VectorEnvBase,
  expandSeeds,
  resolveAttrOwner,
  splitResetMask,
  type VectorEnvOptions,
  type VectorResetArgs,
  type VectorResetResult,
  type VectorStepResult,
} from './vector-env.js';

/** Options of {@link SyncVectorEnv}. */
export type SyncVectorEnvOptions = VectorEnvOptions;

/** Vectorises synchronous environments in one thread. */
export class SyncVectorEnv<Obs = unknown, Act = unknown> extends VectorEnvBase<Obs, Act> {
  /** The sub-environments. */
  readonly envs: Env[];
  private readonly envObs: unknown[];
  private observations: unknown;
  private readonly rewards: Float64Array;
  private terminations: boolean[];
  private truncations: boolean[];
  private autoresetEnvs: boolean[];

  /** Creates one environment per function (each must return a synchronous {@link Env}). */
  constructor(envFns: ReadonlyArray<() => Env>, options: SyncVectorEnvOptions = {}) {
    if (!Array.isArray(envFns) || envFns.length === 0)
      throw new RangeError('SyncVectorEnv needs at least one environment function');
    const envs = envFns.map((fn, i) => {
      const env = fn() as unknown;
      if (env instanceof AsyncEnv)
        throw new TypeError(
          `Environment ${i} is an AsyncEnv: SyncVectorEnv needs synchronous environments (use AsyncVectorEnv)`,
        );
      if (!(env instanceof Env)) throw new TypeError(`Environment function ${i} did not return an Env`);
      return env;
    });
    const first = envs[0];
    super(
      envs.length,
      {
        observationSpace: first.observationSpace as AnySpace,
        actionSpace: first.actionSpace as AnySpace,
        metadata: first.metadata,
        renderMode: first.renderMode,
      },
      options,
    );
    envs.forEach((env, i) => {
      if (!(env.observationSpace as AnySpace).equals(this.singleObservationSpace)) {
        throw new GymError(
          `SyncVectorEnv: the observation space of sub-environment ${i} (${String(env.observationSpace)}) differs from ${this.singleObservationSpace.toString()}; all sub-environments must have equal observation spaces.`,
        );
      }
      if (!(env.actionSpace as AnySpace).equals(this.singleActionSpace)) {
        throw new GymError(
          `SyncVectorEnv: the action space of sub-environment ${i} (${String(env.actionSpace)}) differs from ${this.singleActionSpace.toString()}; all sub-environments must have equal action spaces.`,
        );
      }
    });
    this.envs = envs;
    this.envObs = new Array<unknown>(this.numEnvs).fill(null);
    this.observations = createEmptyArray(this.singleObservationSpace, this.numEnvs);
    this.rewards = new Float64Array(this.numEnvs);
    this.terminations = new Array<boolean>(this.numEnvs).fill(false);
    this.truncations = new Array<boolean>(this.numEnvs).fill(false);
    this.autoresetEnvs = new Array<boolean>(this.numEnvs).fill(false);
  }

  /**
   * Resets every sub-environment (or those of `options.reset_mask`) and returns the batched
   * observations (the others keep their last observation) and infos.
   */
  reset(args: VectorResetArgs = {}): VectorResetResult<Obs> {
    this.assertOpen('reset');
    const seeds = expandSeeds(args.seed, this.numEnvs);
    this.seedVector(args.seed);
    const { mask, options } = splitResetMask(args.options, this.numEnvs);
    const infos: Info = {};
    for (let i = 0; i < this.numEnvs; i++) {
      if (mask && !mask[i]) continue;
      this.terminations[i] = false;
      this.truncations[i] = false;
      this.autoresetEnvs[i] = false;
      const [obs, info] = this.envs[i].reset({ seed: seeds[i], options });
      this.envObs[i] = obs;
      addInfo(infos, info, i, this.numEnvs);
    }
    this.observations = concatenate(this.singleObservationSpace, this.envObs, this.observations);
    return [(this.copy ? deepCopy(this.observations) : this.observations) as Obs, infos];
  }

  /** Steps every sub-environment with its action of the batch `actions` (see the autoreset modes above). */
  step(actions: Act): VectorStepResult<Obs> {
    this.assertOpen('step');
    const items = iterate(this.singleActionSpace, actions, this.numEnvs);
    const infos: Info = {};
    for (let i = 0; i < this.numEnvs; i++) {
      const env = this.envs[i];
      let info: Info;
      if (this.autoresetMode === AutoresetMode.NEXT_STEP && this.autoresetEnvs[i]) {
        [this.envObs[i], info] = env.reset();
        this.rewards[i] = 0;
        this.terminations[i] = false;
        this.truncations[i] = false;
      } else {
        if (this.autoresetMode === AutoresetMode.DISABLED && this.autoresetEnvs[i]) {
          throw new GymError(
            `Sub-environment ${i} has ended its episode and the autoreset mode is DISABLED: reset it with reset({ options: { reset_mask } }) before stepping it`,
          );
        }
        let reward: number;
        [this.envObs[i], reward, this.terminations[i], this.truncations[i], info] = env.step(items[i]);
        this.rewards[i] = reward;
        if (this.autoresetMode === AutoresetMode.SAME_STEP && (this.terminations[i] || this.truncations[i])) {
          addInfo(infos, { final_obs: this.envObs[i], final_info: info }, i, this.numEnvs);
          [this.envObs[i], info] = env.reset();
        }
      }
      addInfo(infos, info, i, this.numEnvs);
    }
    this.observations = concatenate(this.singleObservationSpace, this.envObs, this.observations);
    this.autoresetEnvs = this.terminations.map((t, i) => t || this.truncations[i]);
    return [
      (this.copy ? deepCopy(this.observations) : this.observations) as Obs,
      this.rewards.slice(),
      [...this.terminations],
      [...this.truncations],
      infos,
    ];
  }

  /** Calls the method `name` of every sub-environment (the first wrapper layer that has it) with `args`; a non-function attribute is returned as is. */
  call(name: string, ...args: unknown[]): unknown[] {
    this.assertOpen('call');
    return this.envs.map((env) => {
      const owner = resolveAttrOwner(env, name) as Record<string, unknown>;
      const value = owner[name];
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).apply(owner, args) : value;
    });
  }

  /** The attribute `name` of every sub-environment (as Gymnasium, a method is called without arguments). */
  getAttr(name: string): unknown[] {
    return this.call(name);
  }

  /** Sets the attribute `name` on every sub-environment: one value each (an array of numEnvs) or the same value for all. */
  setAttr(name: string, values: unknown): void {
    this.assertOpen('setAttr');
    const list = Array.isArray(values) ? values : new Array<unknown>(this.numEnvs).fill(values);
    if (list.length !== this.numEnvs) {
      throw new RangeError(
        `Values must be a list or tuple with length equal to the number of environments. Got \`${list.length}\` values for ${this.numEnvs} environments.`,
      );
    }
    this.envs.forEach((env, i) => env.setWrapperAttr(name, list[i]));
  }

  /** The frames of every sub-environment. */
  render(): Array<RenderFrame | RenderFrame[] | null> {
    this.assertOpen('render');
    return this.envs.map((env) => env.render());
  }

  /** Closes every sub-environment (idempotent). */
  close(): void {
    if (this.closed) return;
    for (const env of this.envs) env.close();
    this.closed = true;
  }
}
