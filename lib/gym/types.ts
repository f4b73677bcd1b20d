/**
 * Shared types of the Gymnasium port.
 * @module
 */
import type { Seed } from './random.js';

/** The info dictionary returned by `reset` and `step`. */
export type Info = Record<string, unknown>;

/** Arguments of `reset`: an optional seed (reseeds `npRandom`) and options for the environment. */
export interface ResetArgs {
  /** Reseeds the environment's generator when given; null/undefined keeps the current one. */
  seed?: Seed | null;
  /** Environment-specific options. */
  options?: Record<string, unknown> | null;
}

/** `[observation, info]`. */
export type ResetResult<Obs> = [obs: Obs, info: Info];

/** `[observation, reward, terminated, truncated, info]`. */
export type StepResult<Obs> = [obs: Obs, reward: number, terminated: boolean, truncated: boolean, info: Info];

/** A rendered frame: text (`ansi`), an RGB image (`rgb_array`: height × width × 3 bytes, row-major), or anything an env defines. */
export type RenderFrame = string | RgbArray | unknown;

/** An RGB image as returned by `render()` in `rgb_array` mode. */
export interface RgbArray {
  /** Pixels, `height * width * 3` bytes, row-major, RGB. */
  data: Uint8Array;
  /** `[height, width, 3]`. */
  shape: [number, number, 3];
}

/** Vector autoreset modes (Gymnasium's `AutoresetMode`). */
export enum AutoresetMode {
  /** The step after an episode ends resets that sub-environment (reward 0, flags false). Default. */
  NEXT_STEP = 'NextStep',
  /** The step that ends an episode resets at once; the last observation and info go to `info.final_obs` / `info.final_info`. */
  SAME_STEP = 'SameStep',
  /** No automatic reset: the caller resets ended sub-environments with `options.reset_mask`. */
  DISABLED = 'Disabled',
}

/** Environment metadata (Gymnasium's `metadata`; keys in camelCase). */
export interface EnvMetadata {
  /** Render modes the environment supports. */
  renderModes?: readonly string[];
  /** Frames per second of `human`/`rgb_array` rendering. */
  renderFps?: number;
  /** For vector environments: their autoreset mode. */
  autoresetMode?: AutoresetMode;
  [key: string]: unknown;
}
