/**
 * Built-in environments, registered on import: `sinkflex/CartPole-v1` (500 steps, reward
 * threshold 475) and `sinkflex/CartPole-v0` (200 steps, threshold 195), as Gymnasium registers
 * CartPole. Their entry point is a module specifier (`<this package>/…/cartpole.js#CartPoleEnv`),
 * so the specs serialise to JSON and worker threads can load them.
 * @module
 */
import { provideEntryPoint, register, registry } from '../registration.js';
import { CartPoleEnv } from './cartpole.js';

export { CartPoleEnv, parseResetBounds, type CartPoleOptions } from './cartpole.js';
export { Canvas, type Rgb } from './raster.js';

/** The entry point of the built-in CartPole. */
export const CARTPOLE_ENTRY_POINT = `${new URL('./cartpole.js', import.meta.url).href}#CartPoleEnv`;

/** Registers the built-in environments (idempotent; called on import). */
export function registerBuiltinEnvs(): void {
  provideEntryPoint(CARTPOLE_ENTRY_POINT, CartPoleEnv);
  if (!registry.has('sinkflex/CartPole-v0')) register({ id: 'sinkflex/CartPole-v0', entryPoint: CARTPOLE_ENTRY_POINT, maxEpisodeSteps: 200, rewardThreshold: 195.0 });
  if (!registry.has('sinkflex/CartPole-v1')) register({ id: 'sinkflex/CartPole-v1', entryPoint: CARTPOLE_ENTRY_POINT, maxEpisodeSteps: 500, rewardThreshold: 475.0 });
}

registerBuiltinEnvs();
