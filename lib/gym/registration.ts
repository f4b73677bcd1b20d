/**
 * The environment registry (Gymnasium's `envs.registration`): `register` an id with an entry
 * point, `make` it with the standard wrappers — PassiveEnvChecker, then OrderEnforcing, then
 * TimeLimit (then the spec's additional wrappers, then, on request, RecordEpisodeStatistics).
 *
 * Ids have the form `[namespace/]Name[-vN]`. Version rules follow Gymnasium: an unversioned and
 * a versioned id of the same name cannot coexist; `make('Name')` picks the latest version (with
 * a warning); an older version than the latest is deprecated (warning when registered, error
 * when not); a newer one than the latest is not found.
 *
 * An entry point is a class (constructed with `new`) or a factory function, called with one
 * argument, the kwargs object; or a module specifier string `"path#export"` (default export
 * without `#`). Relative paths resolve against the current working directory. Because ESM
 * `import()` is asynchronous, a string entry point must be loaded before the synchronous
 * `make()` — `await loadEntryPoint(id)` — while `makeAsync()` loads it itself.
 * @module
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

import { AsyncEnv, toAsyncEnv, type AnyEnv } from './async-core.js';
import { Env, EnvBase } from './core.js';
import {
  DeprecatedEnv,
  GymError,
  NameNotFound,
  NamespaceNotFound,
  RegistrationError,
  UnregisteredEnv,
  VersionNotFound,
} from './errors.js';
import { logger } from './logger.js';
import { deepCopy } from './spaces/batch.js';
import { AsyncOrderEnforcing, OrderEnforcing } from './wrappers/order-enforcing.js';
import { AsyncPassiveEnvChecker, PassiveEnvChecker } from './wrappers/passive-env-checker.js';
import {
  AsyncRecordEpisodeStatistics,
  RecordEpisodeStatistics,
  type RecordEpisodeStatisticsOptions,
} from './wrappers/record-episode-statistics.js';
import { AsyncTimeLimit, TimeLimit } from './wrappers/time-limit.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

/** Keyword arguments of an environment (one object). */
export type EnvKwargs = Record<string, unknown>;

/** A class or factory that creates an environment from its kwargs. */
export type EnvCreator = (new (kwargs: EnvKwargs) => AnyEnv) | ((kwargs: EnvKwargs) => AnyEnv);

/** A class or factory that wraps an environment: `(env, kwargs)`. */
export type WrapperCreator =
  (new (env: AnyEnv, kwargs: EnvKwargs) => AnyEnv) | ((env: AnyEnv, kwargs: EnvKwargs) => AnyEnv);

/** An additional wrapper of a spec, applied by `make` after the standard ones. */
export interface WrapperSpec {
  /** Wrapper name (informational). */
  name: string;
  /** The wrapper class/factory or a `"path#export"` module specifier. */
  entryPoint: WrapperCreator | string;
  /** Its kwargs. */
  kwargs?: EnvKwargs;
}

/** The fields of an {@link EnvSpec} (what `register` takes). */
export interface EnvSpecInit {
  /** `[namespace/]Name[-vN]`. */
  id: string;
  /** A class/factory or a `"path#export"` module specifier. */
  entryPoint?: EnvCreator | string | null;
  /** The reward at which the task counts as solved. */
  rewardThreshold?: number | null;
  /** True when the same seed and actions do not reproduce an episode. */
  nondeterministic?: boolean;
  /** Episode step limit applied by TimeLimit (null: none). */
  maxEpisodeSteps?: number | null;
  /** Whether `make` applies OrderEnforcing (default true). */
  orderEnforce?: boolean;
  /** Whether `make` skips PassiveEnvChecker (default false). */
  disableEnvChecker?: boolean;
  /** Default kwargs of the entry point. */
  kwargs?: EnvKwargs;
  /** Wrappers applied after the standard ones. */
  additionalWrappers?: readonly WrapperSpec[];
  /** Entry point of a native vector implementation (informational; `makeVec` does not use it). */
  vectorEntryPoint?: string | null;
}

/** The id form: `[namespace/]name[-vN]` (Gymnasium's regular expression). */
export const ENV_ID_RE = /^(?:(?<namespace>[\w:-]+)\/)?(?:(?<name>[\w:.-]+?))(?:-v(?<version>\d+))?$/;

/** Splits an id into namespace, name and version; throws {@link GymError} when malformed. */
export function parseEnvId(id: string): { namespace: string | null; name: string; version: number | null } {
  const match = typeof id === 'string' ? ENV_ID_RE.exec(id) : null;
  if (!match || !match.groups) {
    throw new GymError(
      `Malformed environment ID: ${String(id)}. (Currently all IDs must be of the form [namespace/](env-name)-v(version). (namespace is optional))`,
    );
  }
  const { namespace, name, version } = match.groups;
  return { namespace: namespace ?? null, name: name!, version: version === undefined ? null : Number(version) };
}

/** The id of a namespace, name and version (inverse of {@link parseEnvId}). */
export function getEnvId(namespace: string | null, name: string, version: number | null): string {
  let id = name;
  if (namespace !== null) id = `${namespace}/${id}`;
  if (version !== null) id = `${id}-v${version}`;
  return id;
}

/** A registered environment: its id, entry point, wrappers to apply and default kwargs. */
export class EnvSpec {
  /** `[namespace/]Name[-vN]`. */
  readonly id: string;
  /** The class/factory or `"path#export"` that creates the environment. */
  readonly entryPoint: EnvCreator | string | null;
  /** The reward at which the task counts as solved. */
  readonly rewardThreshold: number | null;
  /** True when the same seed and actions do not reproduce an episode (checkEnv then skips determinism checks). */
  readonly nondeterministic: boolean;
  /** The TimeLimit that `make` applies (null: none). */
  readonly maxEpisodeSteps: number | null;
  /** Whether `make` applies OrderEnforcing. */
  readonly orderEnforce: boolean;
  /** Whether `make` skips PassiveEnvChecker. */
  readonly disableEnvChecker: boolean;
  /** Default kwargs of the entry point. */
  readonly kwargs: EnvKwargs;
  /** Wrappers `make` applies after the standard ones. */
  readonly additionalWrappers: readonly WrapperSpec[];
  /** Entry point of a native vector implementation (informational). */
  readonly vectorEntryPoint: string | null;
  /** Parsed from the id. */
  readonly namespace: string | null;
  /** Parsed from the id. */
  readonly name: string;
  /** Parsed from the id. */
  readonly version: number | null;

  constructor(init: EnvSpecInit) {
    const parsed = parseEnvId(init.id);
    this.id = init.id;
    this.entryPoint = init.entryPoint ?? null;
    this.rewardThreshold = init.rewardThreshold ?? null;
    this.nondeterministic = init.nondeterministic ?? false;
    this.maxEpisodeSteps = init.maxEpisodeSteps ?? null;
    this.orderEnforce = init.orderEnforce ?? true;
    this.disableEnvChecker = init.disableEnvChecker ?? false;
    this.kwargs = { ...(init.kwargs ?? {}) };
    this.additionalWrappers = [...(init.additionalWrappers ?? [])];
    this.vectorEntryPoint = init.vectorEntryPoint ?? null;
    this.namespace = parsed.namespace;
    this.name = parsed.name;
    this.version = parsed.version;
  }

  /** The fields as an {@link EnvSpecInit}. */
  toInit(): EnvSpecInit {
    return {
      id: this.id,
      entryPoint: this.entryPoint,
      rewardThreshold: this.rewardThreshold,
      nondeterministic: this.nondeterministic,
      maxEpisodeSteps: this.maxEpisodeSteps,
      orderEnforce: this.orderEnforce,
      disableEnvChecker: this.disableEnvChecker,
      kwargs: { ...this.kwargs },
      additionalWrappers: [...this.additionalWrappers],
      vectorEntryPoint: this.vectorEntryPoint,
    };
  }

  /** A copy with some fields changed. */
  copyWith(changes: Partial<EnvSpecInit>): EnvSpec {
    return new EnvSpec({ ...this.toInit(), ...changes });
  }

  /** `make(this, kwargs, options)`. */
  make(kwargs: EnvKwargs = {}, options: MakeOptions = {}): Env {
    return make(this, kwargs, options);
  }

  /** The spec as JSON; throws when an entry point is a function (functions cannot be serialised). */
  toJSON(): EnvSpecInit {
    const init = this.toInit();
    if (
      typeof init.entryPoint === 'function' ||
      init.additionalWrappers?.some((w) => typeof w.entryPoint === 'function')
    ) {
      throw new TypeError(
        `Cannot serialise the spec of ${this.id}: its entry point is a function; register it with a "path#export" string`,
      );
    }
    return JSON.parse(JSON.stringify(init)) as EnvSpecInit;
  }

  /** A spec from {@link EnvSpec.toJSON} output (object or string). */
  static fromJSON(json: EnvSpecInit | string): EnvSpec {
    return new EnvSpec(typeof json === 'string' ? (JSON.parse(json) as EnvSpecInit) : json);
  }

  /** A readable listing of the spec (the fields that differ from the defaults, or all). */
  pprint(options: { includeEntryPoints?: boolean; printAll?: boolean } = {}): string {
    const all = options.printAll ?? false;
    const lines = [`id=${this.id}`];
    if (all || options.includeEntryPoints)
      lines.push(
        `entryPoint=${typeof this.entryPoint === 'function' ? this.entryPoint.name : String(this.entryPoint)}`,
      );
    if (all || this.rewardThreshold !== null) lines.push(`rewardThreshold=${this.rewardThreshold}`);
    if (all || this.nondeterministic) lines.push(`nondeterministic=${this.nondeterministic}`);
    if (all || this.maxEpisodeSteps !== null) lines.push(`maxEpisodeSteps=${this.maxEpisodeSteps}`);
    if (all || !this.orderEnforce) lines.push(`orderEnforce=${this.orderEnforce}`);
    if (all || this.disableEnvChecker) lines.push(`disableEnvChecker=${this.disableEnvChecker}`);
    if (all || this.additionalWrappers.length > 0)
      lines.push(`additionalWrappers=[${this.additionalWrappers.map((w) => w.name).join(', ')}]`);
    return lines.join('\n');
  }
}

/** The global registry, by id. Deleting an entry unregisters it. */
export const registry = new Map<string, EnvSpec>();
let currentNamespace: string | null = null;

/** Runs `fn` with `ns` as the namespace of every `register` call inside it (Gymnasium's `namespace` context). */
export function namespace<T>(ns: string, fn: () => T): T {
  const previous = currentNamespace;
  currentNamespace = ns;
  try {
    return fn();
  } finally {
    currentNamespace = previous;
  }
}

/** The highest registered version of `namespace/name`, or null. */
export function findHighestVersion(ns: string | null, name: string): number | null {
  let best: number | null = null;
  for (const s of registry.values()) {
    if (s.namespace === ns && s.name === name && s.version !== null && (best === null || s.version > best))
      best = s.version;
  }
  return best;
}

function similarity(a: string, b: string): number {
  const m = a.length;
  const n = b.length;
  if (m + n === 0) return 1;
  const dp = Array.from({ length: m + 1 }, () => new Array<number>(n + 1).fill(0));
  for (let i = 1; i <= m; i++)
    for (let j = 1; j <= n; j++)
      dp[i][j] = a[i - 1] === b[j - 1] ? dp[i - 1][j - 1] + 1 : Math.max(dp[i - 1][j], dp[i][j - 1]);
  return (2 * dp[m][n]) / (m + n);
}

function closeMatch(word: string, candidates: Iterable<string>): string | null {
  let best: string | null = null;
  let score = 0.6;
  for (const c of candidates) {
    const s = similarity(word, c);
    if (s >= score) {
      best = c;
      score = s;
    }
  }
  return best;
}

function checkNamespaceExists(ns: string | null): void {
  if (ns === null) return;
  const namespaces = new Set<string>();
  for (const s of registry.values()) if (s.namespace !== null) namespaces.add(s.namespace);
  if (namespaces.has(ns)) return;
  const suggestion = closeMatch(ns, namespaces);
  const hint = suggestion
    ? `Did you mean: \`${suggestion}\`?`
    : `Have you installed (imported) the package that registers ${ns}?`;
  throw new NamespaceNotFound(`Namespace ${ns} not found. ${hint}`);
}

function checkNameExists(ns: string | null, name: string): void {
  checkNamespaceExists(ns);
  const names = new Set<string>();
  for (const s of registry.values()) if (s.namespace === ns) names.add(s.name);
  if (names.has(name)) return;
  const suggestion = closeMatch(name, names);
  throw new NameNotFound(
    `Environment \`${name}\` doesn't exist${ns ? ` in namespace ${ns}` : ''}.${suggestion ? ` Did you mean: \`${suggestion}\`?` : ''}`,
  );
}

function checkVersionExists(ns: string | null, name: string, version: number | null): void {
  if (registry.has(getEnvId(ns, name, version))) return;
  checkNameExists(ns, name);
  if (version === null) return;
  let message = `Environment version \`v${version}\` for environment \`${getEnvId(ns, name, null)}\` doesn't exist.`;
  const specs = [...registry.values()]
    .filter((s) => s.namespace === ns && s.name === name)
    .sort((a, b) => (a.version ?? -1) - (b.version ?? -1));
  const unversioned = specs.find((s) => s.version === null);
  if (unversioned) {
    message += ` It provides the default version \`${unversioned.id}\`.`;
    if (specs.length === 1) throw new DeprecatedEnv(message);
  }
  const latest = specs.filter((s) => s.version !== null).at(-1);
  if (latest && version > latest.version!) {
    message += ` It provides versioned environments: [ ${specs.map((s) => `\`v${s.version}\``).join(', ')} ].`;
    throw new VersionNotFound(message);
  }
  if (latest && version < latest.version!) {
    throw new DeprecatedEnv(
      `Environment version v${version} for \`${getEnvId(ns, name, null)}\` is deprecated. Please use \`${latest.id}\` instead.`,
    );
  }
}

function checkSpecRegister(spec: EnvSpec): void {
  const same = [...registry.values()].filter((s) => s.namespace === spec.namespace && s.name === spec.name);
  const unversioned = same.find((s) => s.version === null);
  const latest = same.filter((s) => s.version !== null).sort((a, b) => b.version! - a.version!)[0];
  if (unversioned && spec.version !== null) {
    throw new RegistrationError(
      `Can't register the versioned environment \`${spec.id}\` when the unversioned environment \`${unversioned.id}\` of the same name already exists.`,
    );
  }
  if (latest && spec.version === null) {
    throw new RegistrationError(
      `Can't register the unversioned environment \`${spec.id}\` when the versioned environment \`${latest.id}\` of the same name already exists. Note: the default behavior is that \`make\` with the unversioned environment will return the latest versioned environment`,
    );
  }
}

/**
 * Registers an environment. Inside {@link namespace} the current namespace replaces the id's.
 * Registering an existing id again overrides it (with a warning).
 */
export function register(init: EnvSpecInit): EnvSpec {
  if ((init.entryPoint === undefined || init.entryPoint === null) && !init.vectorEntryPoint) {
    throw new RegistrationError('Either `entryPoint` or `vectorEntryPoint` (or both) must be provided');
  }
  const parsed = parseEnvId(init.id);
  const ns = currentNamespace ?? parsed.namespace;
  const spec = new EnvSpec({ ...init, id: getEnvId(ns, parsed.name, parsed.version) });
  checkSpecRegister(spec);
  if (registry.has(spec.id)) logger.warn(`Overriding environment ${spec.id} already in registry.`);
  registry.set(spec.id, spec);
  return spec;
}

/** The spec registered under exactly `id` (no version resolution); throws when there is none. */
export function spec(id: string): EnvSpec {
  const found = registry.get(id);
  if (found) return found;
  const { namespace: ns, name, version } = parseEnvId(id);
  checkVersionExists(ns, name, version);
  throw new UnregisteredEnv(`No registered env with id: ${id}`);
}

/** Resolves `id` as `make` does: an unversioned id picks the latest version; old versions warn. */
export function findSpec(id: string): EnvSpec {
  const { namespace: ns, name, version } = parseEnvId(id);
  let found = registry.get(id);
  const latest = findHighestVersion(ns, name);
  if (version !== null && latest !== null && latest > version) {
    logger.deprecation(
      `The environment ${id} is out of date. You should consider upgrading to version \`v${latest}\`.`,
    );
  }
  if (version === null && latest !== null) {
    const newId = getEnvId(ns, name, latest);
    found = registry.get(newId);
    logger.warn(
      `Using the latest versioned environment \`${newId}\` instead of the unversioned environment \`${id}\`.`,
    );
  }
  if (!found) {
    checkVersionExists(ns, name, version);
    throw new UnregisteredEnv(
      `No registered env with id: ${id}. Did you register it, or import the module that registers it? Use \`pprintRegistry()\` to see all of the registered environments.`,
    );
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// Entry points

const loadedModules = new Map<string, unknown>();

/** Splits `"path#export"` and resolves the path: relative and absolute paths become file URLs (relative to the cwd). */
export function resolveModuleSpecifier(specifier: string): { url: string; exportName: string } {
  const hash = specifier.lastIndexOf('#');
  const path = hash >= 0 ? specifier.slice(0, hash) : specifier;
  const exportName = hash >= 0 ? specifier.slice(hash + 1) : 'default';
  if (path.length === 0 || exportName.length === 0)
    throw new TypeError(`Invalid module entry point "${specifier}": expected "path#export"`);
  let url = path;
  if (path.startsWith('./') || path.startsWith('../') || isAbsolute(path))
    url = pathToFileURL(resolve(process.cwd(), path)).href;
  return { url, exportName };
}

/** Imports the module of a `"path#export"` entry point (cached) and returns the export. */
export async function importEntryPoint<T = unknown>(specifier: string): Promise<T> {
  const { url, exportName } = resolveModuleSpecifier(specifier);
  const key = `${url}#${exportName}`;
  if (!loadedModules.has(key)) {
    const mod = (await import(url)) as Record<string, unknown>;
    if (!(exportName in mod))
      throw new GymError(`Module ${url} has no export \`${exportName}\` (entry point "${specifier}")`);
    loadedModules.set(key, mod[exportName]);
  }
  return loadedModules.get(key) as T;
}

/**
 * Puts an already imported export into the entry-point cache, so that a `"path#export"` entry
 * point of a module that is loaded anyway (e.g. a built-in environment) works with the
 * synchronous `make()` at once.
 */
export function provideEntryPoint(specifier: string, value: unknown): void {
  const { url, exportName } = resolveModuleSpecifier(specifier);
  loadedModules.set(`${url}#${exportName}`, value);
}

function loadedEntryPoint<T>(specifier: string, id: string): T {
  const { url, exportName } = resolveModuleSpecifier(specifier);
  const key = `${url}#${exportName}`;
  if (!loadedModules.has(key)) {
    throw new GymError(
      `The entry point "${specifier}" of ${id} is not loaded yet: call \`await loadEntryPoint('${id}')\` before make(), or use makeAsync()`,
    );
  }
  return loadedModules.get(key) as T;
}

/** Imports the string entry points (environment and additional wrappers) of `id` so that `make(id)` can run synchronously. */
export async function loadEntryPoint(id: string | EnvSpec): Promise<void> {
  const s = typeof id === 'string' ? findSpec(id) : id;
  if (typeof s.entryPoint === 'string') await importEntryPoint(s.entryPoint);
  for (const w of s.additionalWrappers) if (typeof w.entryPoint === 'string') await importEntryPoint(w.entryPoint);
}

function isClass(fn: unknown): boolean {
  if (typeof fn !== 'function') return false;
  const proto = (fn as { prototype?: unknown }).prototype;
  if (proto instanceof EnvBase) return true;
  return /^class[\s{]/.test(Function.prototype.toString.call(fn));
}

/** Calls a class with `new` or a factory directly. */
function create<T>(creator: unknown, args: unknown[], what: string): T {
  if (typeof creator !== 'function') throw new TypeError(`${what} is not a class or a function: ${String(creator)}`);
  return isClass(creator)
    ? new (creator as new (...a: unknown[]) => T)(...args)
    : (creator as (...a: unknown[]) => T)(...args);
}

// ---------------------------------------------------------------------------------------------
// make

/** Options of {@link make} (Gymnasium's non-kwargs parameters, plus RecordEpisodeStatistics). */
export interface MakeOptions {
  /** Overrides the spec's step limit (TimeLimit); null keeps the spec's. */
  maxEpisodeSteps?: number | null;
  /** Overrides the spec's `disableEnvChecker`; null keeps the spec's. */
  disableEnvChecker?: boolean | null;
  /** Adds RecordEpisodeStatistics outermost (true, or its options). */
  recordEpisodeStatistics?: boolean | RecordEpisodeStatisticsOptions;
}

const MAKE_KEYS = optionKeys<MakeOptions>({
  maxEpisodeSteps: true,
  disableEnvChecker: true,
  recordEpisodeStatistics: true,
});

function prepare(
  id: string | EnvSpec,
  kwargs: EnvKwargs,
): { spec: EnvSpec; kwargs: EnvKwargs; env: AnyEnv; creator: unknown } {
  const s = typeof id === 'string' ? findSpec(id) : id;
  if (!(s instanceof EnvSpec)) throw new TypeError('make expects an id or an EnvSpec');
  if (s.entryPoint === null) throw new GymError(`${s.id} registered but entryPoint is not specified`);
  const merged = { ...deepCopy(s.kwargs), ...kwargs };
  const creator = typeof s.entryPoint === 'string' ? loadedEntryPoint<unknown>(s.entryPoint, s.id) : s.entryPoint;
  const renderModes = (creator as { metadata?: { renderModes?: readonly string[] } } | null)?.metadata?.renderModes;
  const renderMode = merged.renderMode;
  if (
    renderMode !== undefined &&
    renderMode !== null &&
    Array.isArray(renderModes) &&
    !renderModes.includes(renderMode as string)
  ) {
    logger.warn(
      `The environment is being initialised with renderMode=${JSON.stringify(renderMode)} that is not in the possible renderModes ([${renderModes.join(', ')}]).`,
    );
  }
  let env: AnyEnv;
  try {
    env = create<AnyEnv>(creator, [merged], `The entry point of ${s.id}`);
  } catch (e) {
    if (e instanceof TypeError)
      throw new TypeError(
        `${e.message} was raised from the environment creator for ${s.id} with kwargs (${Object.keys(merged).join(', ')})`,
        { cause: e },
      );
    throw e;
  }
  if (!(env instanceof EnvBase)) throw new TypeError(`The entry point of ${s.id} did not return an Env or AsyncEnv`);
  env.unwrapped.spec = s.copyWith({
    maxEpisodeSteps: null,
    orderEnforce: false,
    disableEnvChecker: true,
    kwargs: merged,
    additionalWrappers: [],
  });
  return { spec: s, kwargs: merged, env, creator };
}

function applyAdditional(env: AnyEnv, s: EnvSpec): AnyEnv {
  let out = env;
  for (const w of s.additionalWrappers) {
    const creator = typeof w.entryPoint === 'string' ? loadedEntryPoint<unknown>(w.entryPoint, s.id) : w.entryPoint;
    out = create<AnyEnv>(creator, [out, { ...(w.kwargs ?? {}) }], `The additional wrapper ${w.name} of ${s.id}`);
  }
  return out;
}

function statsOptions(option: MakeOptions['recordEpisodeStatistics']): RecordEpisodeStatisticsOptions | null {
  if (option === undefined || option === false) return null;
  return option === true ? {} : option;
}

/**
 * Creates the environment registered as `id` (or described by a spec) with kwargs merged over
 * the spec's, and wraps it: PassiveEnvChecker (unless disabled), OrderEnforcing (when the spec
 * asks, default), TimeLimit (when a step limit is set), the spec's additional wrappers, and
 * RecordEpisodeStatistics when `options.recordEpisodeStatistics`. For an entry point that
 * creates an {@link AsyncEnv}, use {@link makeAsync}.
 */
export function make<Obs = unknown, Act = unknown>(
  id: string | EnvSpec,
  kwargs: EnvKwargs = {},
  options: MakeOptions = {},
): Env<Obs, Act> {
  refuseUnknownOptions(options, MAKE_KEYS, 'make');
  const { spec: s, env } = prepare(id, kwargs);
  if (env instanceof AsyncEnv) throw new TypeError(`${s.id} creates an AsyncEnv: use makeAsync()`);
  return wrapSync(env as Env, s, options) as Env<Obs, Act>;
}

function wrapSync(env: Env, s: EnvSpec, options: MakeOptions): Env {
  let out = env;
  if (!(options.disableEnvChecker ?? s.disableEnvChecker)) out = new PassiveEnvChecker(out);
  if (s.orderEnforce) out = new OrderEnforcing(out);
  const limit = options.maxEpisodeSteps ?? s.maxEpisodeSteps;
  if (limit !== null && limit !== undefined) out = new TimeLimit(out, limit);
  out = applyAdditional(out, s) as Env;
  const stats = statsOptions(options.recordEpisodeStatistics);
  if (stats) out = new RecordEpisodeStatistics(out, stats);
  return out;
}

/**
 * Like {@link make}, for any environment, returning an {@link AsyncEnv}: string entry points
 * are imported first; an AsyncEnv gets the async versions of the standard wrappers; a
 * synchronous environment gets the synchronous wrappers and is then adapted with `toAsyncEnv`.
 */
export async function makeAsync<Obs = unknown, Act = unknown>(
  id: string | EnvSpec,
  kwargs: EnvKwargs = {},
  options: MakeOptions = {},
): Promise<AsyncEnv<Obs, Act>> {
  refuseUnknownOptions(options, MAKE_KEYS, 'makeAsync');
  const s = typeof id === 'string' ? findSpec(id) : id;
  await loadEntryPoint(s);
  const { env } = prepare(s, kwargs);
  if (env instanceof Env) return toAsyncEnv(wrapSync(env, s, options)) as AsyncEnv<Obs, Act>;
  let out = env as AsyncEnv;
  if (!(options.disableEnvChecker ?? s.disableEnvChecker)) out = new AsyncPassiveEnvChecker(out);
  if (s.orderEnforce) out = new AsyncOrderEnforcing(out);
  const limit = options.maxEpisodeSteps ?? s.maxEpisodeSteps;
  if (limit !== null && limit !== undefined) out = new AsyncTimeLimit(out, limit);
  out = applyAdditional(out, s) as AsyncEnv;
  const stats = statsOptions(options.recordEpisodeStatistics);
  if (stats) out = new AsyncRecordEpisodeStatistics(out, stats);
  return out as AsyncEnv<Obs, Act>;
}

/** A listing of the registered ids grouped by namespace (Gymnasium's `pprint_registry`). */
export function pprintRegistry(options: { numCols?: number; excludeNamespaces?: readonly string[] } = {}): string {
  const numCols = options.numCols ?? 3;
  const groups = new Map<string, string[]>();
  for (const s of registry.values()) {
    const ns = s.namespace ?? '(root)';
    if (options.excludeNamespaces?.includes(ns)) continue;
    const list = groups.get(ns) ?? [];
    list.push(s.id);
    groups.set(ns, list);
  }
  const out: string[] = [];
  for (const ns of [...groups.keys()].sort()) {
    out.push(`===== ${ns} =====`);
    const ids = groups.get(ns)!.sort();
    const width = Math.max(...ids.map((i) => i.length)) + 2;
    for (let i = 0; i < ids.length; i += numCols)
      out.push(
        ids
          .slice(i, i + numCols)
          .map((x) => x.padEnd(width))
          .join('')
          .trimEnd(),
      );
    out.push('');
  }
  return out.join('\n').trimEnd();
}
