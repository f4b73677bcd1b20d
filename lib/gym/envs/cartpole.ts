/**
 * CartPole (Barto, Sutton & Anderson, 1983) with Gymnasium's `CartPole-v1` dynamics: a pole on
 * a cart moving along a frictionless track; the agent pushes the cart left (action 0) or right
 * (1) with a force of 10 N. Physics: gravity 9.8, cart mass 1.0, pole mass 0.1, half pole
 * length 0.5, time step 0.02 s, explicit Euler integration by default. Observation
 * `[x, xDot, theta, thetaDot]` (float32). The episode terminates when |theta| > 12° or
 * |x| > 2.4; reward 1 per step (also on the terminating step; 0 afterwards), or with
 * `suttonBartoReward` 0 per step and -1 at termination. Reset draws the state uniformly from
 * [-0.05, 0.05] (override with `options.low` / `options.high`).
 * @module
 */
import { Env } from '../core.js';
import { logger } from '../logger.js';
import { Box } from '../spaces/box.js';
import { Discrete } from '../spaces/discrete.js';
import type { EnvMetadata, RenderFrame, ResetArgs, ResetResult, StepResult } from '../types.js';
import { Canvas } from './raster.js';

/** Constructor arguments of {@link CartPoleEnv}. */
export interface CartPoleOptions {
  /** `rgb_array` (600 × 400 image) or `ansi` (one text line); null: no rendering. */
  renderMode?: string | null;
  /** Reward 0 per step and -1 at termination instead of 1 per step. */
  suttonBartoReward?: boolean;
  /** `euler` (default) or `semi-implicit-euler`. */
  kinematicsIntegrator?: 'euler' | 'semi-implicit-euler';
}

/** Reads `options.low` / `options.high` (numbers) with defaults; low must not exceed high. */
export function parseResetBounds(
  options: Record<string, unknown> | null | undefined,
  defaultLow: number,
  defaultHigh: number,
): [number, number] {
  const low = options && 'low' in options ? options.low : defaultLow;
  const high = options && 'high' in options ? options.high : defaultHigh;
  if (typeof low !== 'number' || typeof high !== 'number' || Number.isNaN(low) || Number.isNaN(high)) {
    throw new TypeError(`Reset bounds must be numbers, got low=${String(low)}, high=${String(high)}`);
  }
  if (low > high) throw new RangeError(`Lower bound (${low}) must be lower than higher bound (${high}).`);
  return [low, high];
}

/** The cart-pole balancing task. */
export class CartPoleEnv extends Env<Float32Array, number> {
  static override metadata: EnvMetadata = { renderModes: ['rgb_array', 'ansi'], renderFps: 50 };

  /** Gravity (m/s²). */
  readonly gravity = 9.8;
  /** Cart mass (kg). */
  readonly massCart = 1.0;
  /** Pole mass (kg). */
  readonly massPole = 0.1;
  /** Cart + pole mass. */
  readonly totalMass = this.massPole + this.massCart;
  /** Half the pole's length (m). */
  readonly length = 0.5;
  /** Pole mass × half length. */
  readonly poleMassLength = this.massPole * this.length;
  /** Magnitude of the push (N); writable, e.g. through `setAttr`. */
  forceMag = 10.0;
  /** Seconds between state updates. */
  readonly tau = 0.02;
  /** `euler` (Gymnasium's default) or `semi-implicit-euler`. */
  readonly kinematicsIntegrator: 'euler' | 'semi-implicit-euler';
  /** Angle at which the episode fails (12 degrees). */
  readonly thetaThresholdRadians = (12 * 2 * Math.PI) / 360;
  /** Cart position at which the episode fails. */
  readonly xThreshold = 2.4;
  /** Reward 0 per step and -1 at termination. */
  readonly suttonBartoReward: boolean;

  /** 0: push left, 1: push right. */
  readonly actionSpace = new Discrete(2);
  /** `[x, xDot, theta, thetaDot]`, bounds `±[4.8, inf, 0.419, inf]` (twice the failure thresholds). */
  readonly observationSpace: Box<'float32'>;

  /** `[x, xDot, theta, thetaDot]` in float64, or null before the first reset. */
  state: [number, number, number, number] | null = null;
  /** Steps taken after termination (null while the episode runs). */
  stepsBeyondTerminated: number | null = null;

  constructor(options: CartPoleOptions = {}) {
    super();
    const high = [this.xThreshold * 2, Infinity, this.thetaThresholdRadians * 2, Infinity];
    this.observationSpace = new Box(
      high.map((h) => -h),
      high,
      [4],
      'float32',
    );
    this.suttonBartoReward = options.suttonBartoReward ?? false;
    this.kinematicsIntegrator = options.kinematicsIntegrator ?? 'euler';
    const mode = options.renderMode ?? null;
    if (mode !== null && !(this.metadata.renderModes ?? []).includes(mode)) {
      throw new RangeError(
        `CartPole: renderMode must be one of ${(this.metadata.renderModes ?? []).join(', ')} or null, got ${String(mode)}`,
      );
    }
    this.renderMode = mode;
  }

  override step(action: number): StepResult<Float32Array> {
    if (!this.actionSpace.contains(action)) throw new RangeError(`${String(action)} (${typeof action}) invalid`);
    if (this.state === null) throw new Error('Call reset before using step method.');
    let [x, xDot, theta, thetaDot] = this.state;
    const force = action === 1 ? this.forceMag : -this.forceMag;
    const costheta = Math.cos(theta);
    const sintheta = Math.sin(theta);
    const temp = (force + this.poleMassLength * thetaDot ** 2 * sintheta) / this.totalMass;
    const thetaacc =
      (this.gravity * sintheta - costheta * temp) /
      (this.length * (4.0 / 3.0 - (this.massPole * costheta ** 2) / this.totalMass));
    const xacc = temp - (this.poleMassLength * thetaacc * costheta) / this.totalMass;
    if (this.kinematicsIntegrator === 'euler') {
      x = x + this.tau * xDot;
      xDot = xDot + this.tau * xacc;
      theta = theta + this.tau * thetaDot;
      thetaDot = thetaDot + this.tau * thetaacc;
    } else {
      xDot = xDot + this.tau * xacc;
      x = x + this.tau * xDot;
      thetaDot = thetaDot + this.tau * thetaacc;
      theta = theta + this.tau * thetaDot;
    }
    this.state = [x, xDot, theta, thetaDot];
    const terminated =
      x < -this.xThreshold ||
      x > this.xThreshold ||
      theta < -this.thetaThresholdRadians ||
      theta > this.thetaThresholdRadians;
    let reward: number;
    if (!terminated) {
      reward = this.suttonBartoReward ? 0.0 : 1.0;
    } else if (this.stepsBeyondTerminated === null) {
      this.stepsBeyondTerminated = 0;
      reward = this.suttonBartoReward ? -1.0 : 1.0;
    } else {
      if (this.stepsBeyondTerminated === 0) {
        logger.warn(
          "You are calling 'step()' even though this environment has already returned terminated = true. You should always call 'reset()' once you receive 'terminated = true' -- any further steps are undefined behavior.",
        );
      }
      this.stepsBeyondTerminated += 1;
      reward = this.suttonBartoReward ? -1.0 : 0.0;
    }
    return [Float32Array.from(this.state), reward, terminated, false, {}];
  }

  override reset(args: ResetArgs = {}): ResetResult<Float32Array> {
    super.reset({ seed: args.seed });
    const [low, high] = parseResetBounds(args.options, -0.05, 0.05);
    const rng = this.npRandom;
    this.state = [rng.uniform(low, high), rng.uniform(low, high), rng.uniform(low, high), rng.uniform(low, high)];
    this.stepsBeyondTerminated = null;
    return [Float32Array.from(this.state), {}];
  }

  override render(): RenderFrame | null {
    if (this.renderMode === null) {
      logger.warn(
        'You are calling render method without specifying any render mode. You can specify the renderMode at initialization, e.g. make("sinkflex/CartPole-v1", { renderMode: "rgb_array" })',
      );
      return null;
    }
    if (this.state === null) return null;
    return this.renderMode === 'ansi' ? this.renderAnsi() : this.renderRgb();
  }

  private renderAnsi(): string {
    const [x, , theta] = this.state!;
    const width = 49;
    const pos = Math.round(((x + this.xThreshold) / (2 * this.xThreshold)) * (width - 1));
    const track = Array.from({ length: width }, (_, i) =>
      i === Math.min(width - 1, Math.max(0, pos)) ? (theta > 0.05 ? '/' : theta < -0.05 ? '\\' : '|') : '-',
    );
    return `[${track.join('')}] x=${x.toFixed(3)} theta=${theta.toFixed(3)}`;
  }

  private renderRgb(): RenderFrame {
    const screenWidth = 600;
    const screenHeight = 400;
    const scale = screenWidth / (this.xThreshold * 2);
    const poleWidth = 10.0;
    const poleLen = scale * (2 * this.length);
    const cartWidth = 50.0;
    const cartHeight = 30.0;
    const [x, , theta] = this.state!;
    const canvas = new Canvas(screenWidth, screenHeight);
    const flip = (px: number, py: number): [number, number] => [px, screenHeight - py]; // pygame draws y-up, then flips
    const cartX = x * scale + screenWidth / 2.0;
    const cartY = 100;
    const axleOffset = cartHeight / 4.0;
    const [l, r, t, b] = [-cartWidth / 2, cartWidth / 2, cartHeight / 2, -cartHeight / 2];
    canvas.fillPolygon(
      [flip(l + cartX, b + cartY), flip(l + cartX, t + cartY), flip(r + cartX, t + cartY), flip(r + cartX, b + cartY)],
      [0, 0, 0],
    );
    const [pl, pr, pt, pb] = [-poleWidth / 2, poleWidth / 2, poleLen - poleWidth / 2, -poleWidth / 2];
    const pole = (
      [
        [pl, pb],
        [pl, pt],
        [pr, pt],
        [pr, pb],
      ] as const
    ).map(([px, py]) => {
      const c = Math.cos(-theta);
      const s = Math.sin(-theta);
      return flip(px * c - py * s + cartX, px * s + py * c + cartY + axleOffset);
    });
    canvas.fillPolygon(pole, [202, 152, 101]);
    const [ax, ay] = flip(cartX, cartY + axleOffset);
    canvas.fillCircle(ax, ay, poleWidth / 2, [129, 132, 203]);
    canvas.hline(0, screenWidth, screenHeight - cartY, [0, 0, 0]);
    return canvas.toRgbArray();
  }
}
