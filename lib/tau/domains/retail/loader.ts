/**
 * Loads tau2's own retail files from a folder or file paths: `db.json`, the tasks (`tasks.json`
 * with an optional `split_tasks.json`, or a per-split file such as `tasks_train.json`) and
 * `policy.md`.
 * @module
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

import type { TauTask } from '../../task.js';
import { checkTask } from '../../task.js';
import type { RetailDomain, RetailDomainOptions } from './domain.js';
import { createRetailDomain } from './domain.js';
import { RetailDb } from './schema.js';

/** Reads and validates a tau2 retail `db.json`. */
export function loadRetailDb(path: string): RetailDb {
  return RetailDb.fromJSON(JSON.parse(readFileSync(path, 'utf8')));
}

/** Options of {@link loadTau2Tasks}. */
export interface LoadTasksOptions {
  /** Keep only this split (`train`, `test`, `base`…). */
  split?: string;
  /** Keep only these task ids. */
  ids?: readonly string[];
}

/**
 * Reads tau2 tasks. `path` is a task file (a JSON array), or a folder holding `tasks.json`
 * (filtered by `split_tasks.json` when a split is asked for) or `tasks_<split>.json`.
 */
export function loadTau2Tasks(path: string, options: LoadTasksOptions = {}): TauTask[] {
  let file = path;
  let splitIds: Set<string> | null = null;
  if (statSync(path).isDirectory()) {
    const perSplit = options.split ? join(path, `tasks_${options.split}.json`) : null;
    if (perSplit && existsSync(perSplit)) file = perSplit;
    else {
      file = join(path, 'tasks.json');
      if (!existsSync(file))
        throw new Error(`no tasks.json${perSplit ? ` or tasks_${options.split}.json` : ''} in ${path}`);
      if (options.split) {
        const splitFile = join(path, 'split_tasks.json');
        if (!existsSync(splitFile)) throw new Error(`split '${options.split}' asked for but ${splitFile} is missing`);
        const splits = JSON.parse(readFileSync(splitFile, 'utf8')) as Record<string, string[]>;
        if (!Array.isArray(splits[options.split]))
          throw new Error(`split '${options.split}' not in ${splitFile} (has ${Object.keys(splits).join(', ')})`);
        splitIds = new Set(splits[options.split]);
      }
    }
  }
  const raw = JSON.parse(readFileSync(file, 'utf8')) as unknown;
  if (!Array.isArray(raw)) throw new TypeError(`${file}: expected a JSON array of tasks`);
  let tasks = raw.map((t, i) => checkTask(t, `${file}[${i}]`));
  if (splitIds) tasks = tasks.filter((t) => splitIds.has(t.id));
  if (options.ids) {
    const want = new Set(options.ids);
    tasks = tasks.filter((t) => want.has(t.id));
  }
  return tasks;
}

/** tau2's retail data loaded from a folder. */
export interface Tau2RetailData {
  /** The domain over `db.json` with `policy.md`. */
  domain: RetailDomain;
  /** The tasks. */
  tasks: TauTask[];
}

/**
 * Loads a tau2 retail folder (`db.json`, `policy.md`, tasks). Options pass on to the domain
 * (e.g. `modifyItemsPriceFix`) and the task loader (`split`, `ids`).
 */
export function loadTau2Retail(
  dir: string,
  options: LoadTasksOptions & Omit<RetailDomainOptions, 'db' | 'policy'> = {},
): Tau2RetailData {
  const db = loadRetailDb(join(dir, 'db.json'));
  const policyPath = join(dir, 'policy.md');
  const policy = existsSync(policyPath) ? readFileSync(policyPath, 'utf8') : undefined;
  const domain = createRetailDomain({ ...options, db, ...(policy !== undefined ? { policy } : {}) });
  return { domain, tasks: loadTau2Tasks(dir, options) };
}
