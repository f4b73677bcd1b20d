/**
 * The worlds behind the tau Gym environments: a domain (database, tools, policy) and its task
 * list, built from the embedded seeded generators or from tau2's own files, and cached per
 * configuration so that many environments (a vector env, an agent loop's pool) share one
 * immutable database (world states are copy-on-write forks of it) and one task list.
 * @module
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

import {
  createRetailDomain,
  createTelecomDomain,
  generateRetailDb,
  generateRetailTasks,
  generateTelecomDb,
  generateTelecomTasks,
  loadTau2Retail,
  loadTau2Telecom,
  type TauDomain,
  type TauTask,
  type WorldState,
} from '../../tau/index.js';

/** The domains with Gym environments. */
export type TauDomainName = 'retail' | 'telecom';

/** Tasks from the embedded, seeded generators (no external data). */
export interface GeneratedTaskSource {
  /** Discriminator. */
  kind: 'generated';
  /** Seed of the task generator. Default 0. */
  seed?: number;
  /** Number of tasks. Default 100. */
  count?: number;
  /** Seed of the database generator. Default: `seed`. */
  dbSeed?: number;
  /** Retail only: users in the generated database (default 500). */
  users?: number;
  /** Retail only: orders in the generated database (default 1000). */
  orders?: number;
  /** Telecom only: customers in the generated database (default 60). */
  customers?: number;
}

/** tau2's own files (`db.json`/`db.toml`, policy, tasks) from a folder. */
export interface Tau2TaskSource {
  /** Discriminator. */
  kind: 'tau2';
  /**
   * The domain folder (holding `db.json` + `policy.md` + tasks for retail, `db.toml` +
   * `user_db.toml` + policies + tasks for telecom). Default: `$SINKFLEX_TAU2_DIR/<domain>`.
   */
  path?: string;
  /** Task split (`train`, `test`, `small`…); default all tasks of the folder (telecom: `tasks.json`, else `tasks_small.json`). */
  split?: string;
  /** Keep only these task ids. */
  ids?: string[];
}

/** Where the tasks of an environment come from. */
export type TauTaskSource = GeneratedTaskSource | Tau2TaskSource;

/** A domain with its tasks (shared, read-only: world states are forks of the domain's database). */
export class TauWorld {
  private readonly index = new Map<string, number>();

  /**
   * @param name - the domain's name.
   * @param domain - the domain (database, tools, policy).
   * @param tasks - the tasks (at least one; ids unique).
   * @param generated - whether the tasks carry a `sinkflex_scenario` (scripted users need one).
   */
  constructor(
    readonly name: TauDomainName,
    readonly domain: TauDomain<WorldState>,
    readonly tasks: readonly TauTask[],
    readonly generated: boolean,
  ) {
    if (tasks.length === 0) throw new RangeError(`TauWorld(${name}): the task list is empty`);
    tasks.forEach((t, i) => {
      if (this.index.has(t.id)) throw new RangeError(`TauWorld(${name}): task id '${t.id}' appears twice`);
      this.index.set(t.id, i);
    });
  }

  /** The index of a task id, or -1. */
  indexOf(taskId: string): number {
    return this.index.get(taskId) ?? -1;
  }

  /** The task with this id; throws a RangeError naming close ids when there is none. */
  task(taskId: string): TauTask {
    const i = this.indexOf(taskId);
    if (i < 0) {
      const sample = this.tasks.slice(0, 5).map((t) => `'${t.id}'`).join(', ');
      throw new RangeError(`unknown task id '${taskId}' in the ${this.name} world (${this.tasks.length} tasks, e.g. ${sample})`);
    }
    return this.tasks[i];
  }

  /** All task ids, in order. */
  get taskIds(): string[] {
    return this.tasks.map((t) => t.id);
  }
}

const cache = new Map<string, TauWorld>();

function intOption(v: unknown, name: string, min: number): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${String(v)}`);
  return v;
}

function tau2Dir(domain: TauDomainName, source: Tau2TaskSource): string {
  if (source.path !== undefined) {
    if (typeof source.path !== 'string' || source.path.length === 0) throw new TypeError('tasks.path must be a non-empty string');
    return resolve(source.path);
  }
  const root = process.env.SINKFLEX_TAU2_DIR;
  if (!root) throw new TypeError(`tasks: { kind: 'tau2' } needs a path (the tau2 ${domain} folder) or the environment variable SINKFLEX_TAU2_DIR`);
  return resolve(join(root, domain));
}

function build(domain: TauDomainName, source: TauTaskSource): TauWorld {
  if (source.kind === 'generated') {
    const seed = intOption(source.seed, 'tasks.seed', 0) ?? 0;
    const count = intOption(source.count, 'tasks.count', 1) ?? 100;
    const dbSeed = intOption(source.dbSeed, 'tasks.dbSeed', 0) ?? seed;
    if (domain === 'retail') {
      const db = generateRetailDb({ seed: dbSeed, users: intOption(source.users, 'tasks.users', 1), orders: intOption(source.orders, 'tasks.orders', 1) });
      return new TauWorld('retail', createRetailDomain({ db }) as unknown as TauDomain<WorldState>, generateRetailTasks(db, { seed, count }), true);
    }
    const db = generateTelecomDb({ seed: dbSeed, customers: intOption(source.customers, 'tasks.customers', 1) });
    return new TauWorld('telecom', createTelecomDomain({ db }) as unknown as TauDomain<WorldState>, generateTelecomTasks(db, { seed, count }), true);
  }
  if (source.kind === 'tau2') {
    const dir = tau2Dir(domain, source);
    if (!existsSync(dir)) throw new RangeError(`tau2 ${domain} folder not found: ${dir}`);
    const opts = { ...(source.split !== undefined ? { split: source.split } : {}), ...(source.ids !== undefined ? { ids: source.ids } : {}) };
    const data = domain === 'retail' ? loadTau2Retail(dir, opts) : loadTau2Telecom(dir, opts);
    return new TauWorld(domain, data.domain as unknown as TauDomain<WorldState>, data.tasks, false);
  }
  throw new TypeError(`tasks.kind must be 'generated' or 'tau2', got ${JSON.stringify((source as { kind?: unknown }).kind)}`);
}

/**
 * The world of `domain` with tasks from `source` (default: 100 generated tasks, seed 0).
 * Worlds are cached by configuration: the second call with the same arguments returns the
 * same object (generation of a retail world takes ~1 s; a tau2 DB load ~0.3 s).
 */
export function loadTauWorld(domain: TauDomainName, source: TauTaskSource = { kind: 'generated' }): TauWorld {
  if (domain !== 'retail' && domain !== 'telecom') throw new TypeError(`domain must be 'retail' or 'telecom', got ${JSON.stringify(domain)}`);
  if (source === null || typeof source !== 'object') throw new TypeError('tasks must be a task source object ({ kind: "generated" | "tau2", ... })');
  const key =
    source.kind === 'tau2'
      ? JSON.stringify([domain, 'tau2', tau2Dir(domain, source), source.split ?? null, source.ids ?? null])
      : JSON.stringify([domain, source.kind, source.seed ?? 0, source.count ?? 100, source.dbSeed ?? null, source.users ?? null, source.orders ?? null, source.customers ?? null]);
  let world = cache.get(key);
  if (!world) {
    world = build(domain, source);
    cache.set(key, world);
  }
  return world;
}

/** Forgets the cached worlds (they are rebuilt on next use). */
export function clearTauWorldCache(): void {
  cache.clear();
}
