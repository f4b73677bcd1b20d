/**
 * A CPU-heavy environment for the vector benchmark: CartPole's dynamics plus `workIterations`
 * iterations of floating-point work per step (standing in for a simulator or a tool call that
 * burns CPU). Loaded by AsyncVectorEnv workers as a module source.
 * @module
 */
import {
  Box,
  CartPoleEnv,
  Discrete,
  Env,
  type ResetArgs,
  type ResetResult,
  type StepResult,
} from '../lib/gym/index.js';

/** Options of {@link HeavyEnv}. */
export interface HeavyEnvOptions {
  /** Iterations of work per step (default 200000, about 1–2 ms). */
  workIterations?: number;
}

/** CartPole with extra CPU work per step; the work result is folded into `info.work`. */
export class HeavyEnv extends Env<Float32Array, number> {
  readonly observationSpace: Box<'float32'>;
  readonly actionSpace = new Discrete(2);
  private readonly inner = new CartPoleEnv();
  private readonly workIterations: number;

  constructor(options: HeavyEnvOptions = {}) {
    super();
    this.observationSpace = this.inner.observationSpace;
    this.workIterations = options.workIterations ?? 200_000;
  }

  override reset(args: ResetArgs = {}): ResetResult<Float32Array> {
    super.reset({ seed: args.seed });
    return this.inner.reset(args);
  }

  override step(action: number): StepResult<Float32Array> {
    let acc = action;
    for (let i = 0; i < this.workIterations; i++) acc = Math.sin(acc + i * 1e-3) * 0.999 + Math.cos(i * 7e-4);
    const result = this.inner.step(action);
    result[4] = { work: acc };
    return result;
  }
}
