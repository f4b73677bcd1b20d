/**
 * Loads tau2's own telecom files: `db.toml` (backend), `user_db.toml` (phone), the tasks
 * (`tasks_small.json`, `tasks.json` with `split_tasks.json`, or any task file), and the policy
 * (`main_policy.md` + `tech_support_manual.md`, combined as tau2 does). JSON versions of the
 * databases (`db.json`, `user_db.json`) are read too.
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';

import { parse as parseToml } from 'smol-toml';

import type { TauTask } from '../../task.js';
import type { LoadTasksOptions } from '../retail/loader.js';
import { loadTau2Tasks } from '../retail/loader.js';
import { TelecomUserDb } from './device.js';
import type { TelecomDomain } from './domain.js';
import { createTelecomDomain } from './domain.js';
import { combineTelecomPolicy } from './policy.js';
import { TelecomDb } from './schema.js';

/** Parses a `.toml` or `.json` file. */
export function readTau2DataFile(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  return extname(path).toLowerCase() === '.toml' ? parseToml(text) : JSON.parse(text);
}

/** Reads and validates tau2's telecom backend (`db.toml` or `db.json`). */
export function loadTelecomDb(path: string): TelecomDb {
  return TelecomDb.fromJSON(readTau2DataFile(path));
}

/** Reads and validates tau2's phone DB (`user_db.toml` or `user_db.json`); missing fields take tau2's defaults. */
export function loadTelecomUserDb(path: string): TelecomUserDb {
  return TelecomUserDb.fromJSON(readTau2DataFile(path));
}

function firstExisting(dir: string, names: string[]): string | null {
  for (const n of names) if (existsSync(join(dir, n))) return join(dir, n);
  return null;
}

/** tau2's telecom data loaded from a folder. */
export interface Tau2TelecomData {
  /** The domain over `db.toml` and `user_db.toml` with tau2's policy. */
  domain: TelecomDomain;
  /** The tasks. */
  tasks: TauTask[];
}

/**
 * Loads a tau2 telecom folder. Tasks: `split: 'small'` reads `tasks_small.json`; other splits
 * read `tasks_<split>.json` or filter `tasks.json` with `split_tasks.json`; no split reads
 * `tasks.json`, else `tasks_small.json`.
 */
export function loadTau2Telecom(dir: string, options: LoadTasksOptions = {}): Tau2TelecomData {
  const dbPath = firstExisting(dir, ['db.toml', 'db.json']);
  if (!dbPath) throw new Error(`no db.toml or db.json in ${dir}`);
  const userPath = firstExisting(dir, ['user_db.toml', 'user_db.json']);
  const main = firstExisting(dir, ['main_policy.md']);
  const manual = firstExisting(dir, ['tech_support_manual.md']);
  const policy =
    main && manual ? combineTelecomPolicy(readFileSync(main, 'utf8'), readFileSync(manual, 'utf8')) : undefined;
  const domain = createTelecomDomain({
    db: loadTelecomDb(dbPath),
    ...(userPath ? { userDb: loadTelecomUserDb(userPath) } : {}),
    ...(policy !== undefined ? { policy } : {}),
  });
  let tasks: TauTask[];
  if (!options.split && !existsSync(join(dir, 'tasks.json')) && existsSync(join(dir, 'tasks_small.json')))
    tasks = loadTau2Tasks(join(dir, 'tasks_small.json'), options);
  else tasks = loadTau2Tasks(dir, options);
  return { domain, tasks };
}
