/**
 * Loads tau2's own airline files from a folder: `db.json`, `policy.md` and the tasks
 * (`tasks.json` with an optional `split_tasks.json`, or a per-split file such as
 * `tasks_train.json`).
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { TauTask } from '../../task.js';
import type { LoadTasksOptions } from '../retail/loader.js';
import { loadTau2Tasks } from '../retail/loader.js';
import type { AirlineDomain } from './domain.js';
import { createAirlineDomain } from './domain.js';
import { AirlineDb } from './schema.js';

/** Reads and validates a tau2 airline `db.json`. */
export function loadAirlineDb(path: string): AirlineDb {
  return AirlineDb.fromJSON(JSON.parse(readFileSync(path, 'utf8')));
}

/** tau2's airline data loaded from a folder. */
export interface Tau2AirlineData {
  /** The domain over `db.json` with `policy.md`. */
  domain: AirlineDomain;
  /** The tasks. */
  tasks: TauTask[];
}

/** Loads a tau2 airline folder (`db.json`, `policy.md`, tasks); options choose a split or task ids. */
export function loadTau2Airline(dir: string, options: LoadTasksOptions = {}): Tau2AirlineData {
  const policyPath = join(dir, 'policy.md');
  if (!existsSync(policyPath)) throw new Error(`no policy.md in ${dir} (tau2's airline policy)`);
  const db = loadAirlineDb(join(dir, 'db.json'));
  const domain = createAirlineDomain({ db, policy: readFileSync(policyPath, 'utf8') });
  return { domain, tasks: loadTau2Tasks(dir, options) };
}
