/**
 * Built-in environments, registered on import: `sinkflex/CartPole-v1` (500 steps, reward
 * threshold 475) and `sinkflex/CartPole-v0` (200 steps, threshold 195), as Gymnasium registers
 * CartPole; `sinkflex/TauRetail-v0`, `sinkflex/TauTelecom-v0` and `sinkflex/TauAirline-v0`, the
 * tau world's domains (step limits are the episode's own `maxSteps`: 100, 200 and 100 tau2
 * steps; airline runs tau2's own airline files, `tasks: { kind: 'tau2', path, split }`). Their entry points
 * are module specifiers (`<this package>/…/cartpole.js#CartPoleEnv`), so the specs serialise
 * to JSON and worker threads can load them.
 * @module
 */
import { provideEntryPoint, register, registry } from '../registration.js';
import { CartPoleEnv } from './cartpole.js';
import { createTauEnv } from './tau.js';

/** The entry point of the built-in CartPole. */
const CARTPOLE_ENTRY_POINT = `${new URL('./cartpole.js', import.meta.url).href}#CartPoleEnv`;

/** The entry point of the tau environments (a factory: sync or async by user simulator). */
const TAU_ENTRY_POINT = `${new URL('./tau.js', import.meta.url).href}#createTauEnv`;

/** Registers the built-in environments (idempotent; called on import). */
function registerBuiltinEnvs(): void {
  provideEntryPoint(CARTPOLE_ENTRY_POINT, CartPoleEnv);
  if (!registry.has('sinkflex/CartPole-v0'))
    register({
      id: 'sinkflex/CartPole-v0',
      entryPoint: CARTPOLE_ENTRY_POINT,
      maxEpisodeSteps: 200,
      rewardThreshold: 195.0,
    });
  if (!registry.has('sinkflex/CartPole-v1'))
    register({
      id: 'sinkflex/CartPole-v1',
      entryPoint: CARTPOLE_ENTRY_POINT,
      maxEpisodeSteps: 500,
      rewardThreshold: 475.0,
    });
  provideEntryPoint(TAU_ENTRY_POINT, createTauEnv);
  if (!registry.has('sinkflex/TauRetail-v0'))
    register({
      id: 'sinkflex/TauRetail-v0',
      entryPoint: TAU_ENTRY_POINT,
      kwargs: { domain: 'retail' },
      rewardThreshold: 1.0,
    });
  if (!registry.has('sinkflex/TauTelecom-v0'))
    register({
      id: 'sinkflex/TauTelecom-v0',
      entryPoint: TAU_ENTRY_POINT,
      kwargs: { domain: 'telecom' },
      rewardThreshold: 1.0,
    });
  if (!registry.has('sinkflex/TauAirline-v0'))
    register({
      id: 'sinkflex/TauAirline-v0',
      entryPoint: TAU_ENTRY_POINT,
      kwargs: { domain: 'airline' },
      rewardThreshold: 1.0,
    });
}

registerBuiltinEnvs();
