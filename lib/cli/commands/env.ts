/**
 * `sinkflex env list`: the registered Gym environments, marking the ones `sinkflex train` trains on.
 * @module
 */
import type { Command } from 'commander';

import { registry } from '../../gym/index.js';
import { TRAIN_ENV_IDS } from '../../trainer/index.js';

/** One row of `sinkflex env list`. */
export interface EnvListRow {
  /** The environment id. */
  id: string;
  /** `sinkflex train --env <id>` works. */
  trainable: boolean;
  /** The step limit of the spec (null: the env's own). */
  maxEpisodeSteps: number | null;
}

/** The registered environments, sorted by id. */
export function listEnvs(): EnvListRow[] {
  return [...registry.values()]
    .map((s) => ({
      id: s.id,
      trainable: (TRAIN_ENV_IDS as readonly string[]).includes(s.id),
      maxEpisodeSteps: s.maxEpisodeSteps,
    }))
    .sort((a, b) => a.id.localeCompare(b.id));
}

/** Registers `sinkflex env` (`env list`). */
export function registerEnv(program: Command): void {
  const env = program.command('env').description('environments');
  env
    .command('list')
    .description('list the registered Gym environments (* = trainable with sinkflex train --env)')
    .option('--json', 'print JSON')
    .action((opts: { json?: boolean }) => {
      const rows = listEnvs();
      if (opts.json) {
        console.log(JSON.stringify(rows, null, 2));
        return;
      }
      for (const r of rows)
        console.log(
          `${r.trainable ? '*' : ' '} ${r.id}${r.maxEpisodeSteps !== null ? `  (max ${r.maxEpisodeSteps} steps)` : ''}`,
        );
    });
}
