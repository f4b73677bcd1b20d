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
  loadTau2Airline,
  loadTau2Retail,
  loadTau2Telecom,
  type RetailTaskKind,
  type TauDomain,
  type TauTask,
  type WorldState,
} from '../../tau/index.js';

/** The domains with Gym environments. */
export type TauDomainName = 'retail' | 'telecom' | 'airline';

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
  /** Retail only: relative weight of each task kind (missing kinds keep the generator's default; 0 disables one). */
  weights?: Partial<Record<RetailTaskKind, number>>;
  /** Retail only: probability of a change of mind (default 0.15). */
  changeOfMind?: number;
  /** Retail only: probability of a second request (default 0.15). */
  secondRequest?: number;
  /** Telecom only: most root causes per task, 1–3 (default 3). */
  maxFaults?: number;
  /** Telecom only: probability of an unfixable root cause (default 0.12). */
  unfixableRate?: number;
  /**
   * Keep only the first task of each distinct scenario, so that no task repeats another's
   * content (a small database repeats scenarios): 4 × `count` tasks are generated and the first
   * `count` distinct ones kept (a RangeError when there are fewer). Default false.
   */
  distinct?: boolean;
}

/** tau2's own files (`db.json`/`db.toml`, policy, tasks) from a folder. */
export interface Tau2TaskSource {
  /** Discriminator. */
  kind: 'tau2';
  /**
   * The domain folder (holding `db.json` + `policy.md` + tasks for retail and airline, `db.toml` +
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
      const sample = this.tasks
        .slice(0, 5)
        .map((t) => `'${t.id}'`)
        .join(', ');
      throw new RangeError(
        `unknown task id '${taskId}' in the ${this.name} world (${this.tasks.length} tasks, e.g. ${sample})`,
      );
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
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min)
    throw new RangeError(`${name} must be an integer >= ${min}, got ${String(v)}`);
  return v;
}

function tau2Dir(domain: TauDomainName, source: Tau2TaskSource): string {
  if (source.path !== undefined) {
    if (typeof source.path !== 'string' || source.path.length === 0)
      throw new TypeError('tasks.path must be a non-empty string');
    return resolve(source.path);
  }
  const root = process.env.SINKFLEX_TAU2_DIR;
  if (!root)
    throw new TypeError(
      `tasks: { kind: 'tau2' } needs a path (the tau2 ${domain} folder) or the environment variable SINKFLEX_TAU2_DIR`,
    );
  return resolve(join(root, domain));
}

function probOption(v: unknown, name: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !(v >= 0 && v <= 1))
    throw new RangeError(`${name} must be a probability in [0, 1], got ${String(v)}`);
  return v;
}

function weightsOption(v: unknown): Partial<Record<RetailTaskKind, number>> | undefined {
  if (v === undefined) return undefined;
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new TypeError('tasks.weights must be an object of task kind → weight');
  for (const [k, w] of Object.entries(v))
    if (typeof w !== 'number' || !(w >= 0) || !Number.isFinite(w))
      throw new RangeError(`tasks.weights.${k} must be a finite number >= 0, got ${String(w)}`);
  return v as Partial<Record<RetailTaskKind, number>>;
}

/**
 * The first `count` tasks of distinct scenarios (the scenario of a generated task, else its
 * description); a RangeError when there are fewer.
 */
function distinctTasks<T extends TauTask>(tasks: readonly T[], count: number): T[] {
  const seen = new Set<string>();
  const out = tasks.filter((t) => {
    const sig = JSON.stringify(t.sinkflex_scenario ?? t.description ?? null);
    if (seen.has(sig)) return false;
    seen.add(sig);
    return true;
  });
  if (out.length < count)
    throw new RangeError(
      `tasks: only ${out.length} distinct tasks for count ${count}; use a larger database (users / orders / customers) or fewer tasks`,
    );
  return out.slice(0, count);
}

function buildGenerated(domain: TauDomainName, source: GeneratedTaskSource): TauWorld {
  const seed = intOption(source.seed, 'tasks.seed', 0) ?? 0;
  const count = intOption(source.count, 'tasks.count', 1) ?? 100;
  const dbSeed = intOption(source.dbSeed, 'tasks.dbSeed', 0) ?? seed;
  if (source.distinct !== undefined && typeof source.distinct !== 'boolean')
    throw new TypeError(`tasks.distinct must be a boolean, got ${typeof source.distinct}`);
  const generate = source.distinct === true ? 4 * count : count;
  const pick = <T extends TauTask>(tasks: T[]): T[] => (source.distinct === true ? distinctTasks(tasks, count) : tasks);
  if (domain === 'airline')
    throw new RangeError(
      "the airline domain has no task generator: use tau2's airline files (tasks: { kind: 'tau2', path, split })",
    );
  if (domain === 'retail') {
    const db = generateRetailDb({
      seed: dbSeed,
      users: intOption(source.users, 'tasks.users', 1),
      orders: intOption(source.orders, 'tasks.orders', 1),
    });
    const options = {
      seed,
      count: generate,
      weights: weightsOption(source.weights),
      changeOfMind: probOption(source.changeOfMind, 'tasks.changeOfMind'),
      secondRequest: probOption(source.secondRequest, 'tasks.secondRequest'),
    };
    return new TauWorld('retail', createRetailDomain({ db }), pick(generateRetailTasks(db, options)), true);
  }
  const db = generateTelecomDb({ seed: dbSeed, customers: intOption(source.customers, 'tasks.customers', 1) });
  const maxFaults = intOption(source.maxFaults, 'tasks.maxFaults', 1);
  if (maxFaults !== undefined && maxFaults > 3)
    throw new RangeError(`tasks.maxFaults must be 1, 2 or 3, got ${maxFaults}`);
  const options = {
    seed,
    count: generate,
    maxFaults,
    unfixableRate: probOption(source.unfixableRate, 'tasks.unfixableRate'),
  };
  return new TauWorld('telecom', createTelecomDomain({ db }), pick(generateTelecomTasks(db, options)), true);
}

function build(domain: TauDomainName, source: TauTaskSource): TauWorld {
  if (source.kind === 'generated') return buildGenerated(domain, source);
  if (source.kind === 'tau2') {
    const dir = tau2Dir(domain, source);
    if (!existsSync(dir)) throw new RangeError(`tau2 ${domain} folder not found: ${dir}`);
    const opts = {
      ...(source.split !== undefined ? { split: source.split } : {}),
      ...(source.ids !== undefined ? { ids: source.ids } : {}),
    };
    const data =
      domain === 'retail'
        ? loadTau2Retail(dir, opts)
        : domain === 'airline'
          ? loadTau2Airline(dir, opts)
          : loadTau2Telecom(dir, opts);
    return new TauWorld(domain, data.domain, data.tasks, false);
  }
  throw new TypeError(
    `tasks.kind must be 'generated' or 'tau2', got ${JSON.stringify((source as { kind?: unknown }).kind)}`,
  );
}

/** The task source of a domain when none is given: tau2's files for airline (no generator), else 100 generated tasks. */
export function defaultTaskSource(domain: TauDomainName): TauTaskSource {
  return domain === 'airline' ? { kind: 'tau2' } : { kind: 'generated' };
}

/**
 * The world of `domain` with tasks from `source` (default {@link defaultTaskSource}: 100
 * generated tasks, seed 0; tau2's files under `$SINKFLEX_TAU2_DIR/airline` for airline).
 * Worlds are cached by configuration: the second call with the same arguments returns the
 * same object (generation of a retail world takes ~1 s; a tau2 DB load ~0.3 s).
 */
export function loadTauWorld(domain: TauDomainName, source: TauTaskSource = defaultTaskSource(domain)): TauWorld {
  checkWorldArgs(domain, source);
  const key =
    source.kind === 'tau2'
      ? JSON.stringify([domain, 'tau2', tau2Dir(domain, source), source.split ?? null, source.ids ?? null])
      : JSON.stringify([
          domain,
          source.kind,
          source.seed ?? 0,
          source.count ?? 100,
          source.dbSeed ?? null,
          source.users ?? null,
          source.orders ?? null,
          source.customers ?? null,
          source.weights ?? null,
          source.changeOfMind ?? null,
          source.secondRequest ?? null,
          source.maxFaults ?? null,
          source.unfixableRate ?? null,
          source.distinct ?? false,
        ]);
  let world = cache.get(key);
  if (!world) {
    world = build(domain, source);
    cache.set(key, world);
  }
  return world;
}

/**
 * A new world of `domain` with tasks from `source`, like {@link loadTauWorld} but not cached:
 * for the many short-lived worlds of a run that draws fresh worlds (each GRPO step its own), which
 * a cache would keep for the whole process.
 */
export function buildTauWorld(domain: TauDomainName, source: TauTaskSource): TauWorld {
  checkWorldArgs(domain, source);
  return build(domain, source);
}

function checkWorldArgs(domain: TauDomainName, source: TauTaskSource): void {
  if (domain !== 'retail' && domain !== 'telecom' && domain !== 'airline')
    throw new TypeError(`domain must be 'retail', 'telecom' or 'airline', got ${JSON.stringify(domain)}`);
  if (source === null || typeof source !== 'object')
    throw new TypeError('tasks must be a task source object ({ kind: "generated" | "tau2", ... })');
}

/** Forgets the cached worlds (they are rebuilt on next use). */
export function clearTauWorldCache(): void {
  cache.clear();
}
