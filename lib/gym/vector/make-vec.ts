/**
 * `makeVec(id, numEnvs, options)`: a vector environment of a registered id (Gymnasium's
 * `make_vec`): `sync` (default) builds `numEnvs` copies with `make` in a {@link SyncVectorEnv};
 * `async` starts an {@link AsyncVectorEnv} whose workers make the id themselves — so its entry
 * point must be a `"path#export"` string, or `imports` must name a module that registers it.
 * @module
 */
import { findSpec, loadEntryPoint, make, type EnvKwargs, type MakeOptions } from '../registration.js';
import { AsyncVectorEnv, type AsyncVectorEnvOptions } from './async-vector-env.js';
import { SyncVectorEnv, type SyncVectorEnvOptions } from './sync-vector-env.js';

/** Options of {@link makeVec}. */
export interface MakeVecOptions<M extends 'sync' | 'async' = 'sync' | 'async'> {
  /** `sync` (default) or `async` (worker threads). */
  vectorizationMode?: M;
  /** Kwargs of every sub-environment. */
  kwargs?: EnvKwargs;
  /** `make` options of every sub-environment (step limit, env checker, RecordEpisodeStatistics). */
  makeOptions?: MakeOptions;
  /** Options of the vector environment; for `async`, `imports` lists modules the workers import first. */
  vectorKwargs?: M extends 'async' ? AsyncVectorEnvOptions & { imports?: readonly string[] } : SyncVectorEnvOptions;
}

/** Creates `numEnvs` sub-environments of `id` in a synchronous or asynchronous vector environment. */
export async function makeVec<Obs = unknown, Act = unknown>(
  id: string,
  numEnvs: number,
  options: MakeVecOptions<'async'> & { vectorizationMode: 'async' },
): Promise<AsyncVectorEnv<Obs, Act>>;
export async function makeVec<Obs = unknown, Act = unknown>(
  id: string,
  numEnvs: number,
  options?: MakeVecOptions<'sync'>,
): Promise<SyncVectorEnv<Obs, Act>>;
export async function makeVec<Obs = unknown, Act = unknown>(
  id: string,
  numEnvs: number,
  options: MakeVecOptions = {},
): Promise<SyncVectorEnv<Obs, Act> | AsyncVectorEnv<Obs, Act>> {
  if (!Number.isSafeInteger(numEnvs) || numEnvs < 1)
    throw new RangeError(`makeVec: numEnvs must be a positive integer, got ${numEnvs}`);
  const spec = findSpec(id);
  const mode = options.vectorizationMode ?? 'sync';
  const kwargs = options.kwargs ?? {};
  const makeOptions = options.makeOptions ?? {};
  if (mode === 'sync') {
    await loadEntryPoint(spec);
    const envs = new SyncVectorEnv<Obs, Act>(
      Array.from({ length: numEnvs }, () => () => make(spec, kwargs, makeOptions)),
      options.vectorKwargs as SyncVectorEnvOptions,
    );
    envs.spec = spec;
    return envs;
  }
  if (mode !== 'async')
    throw new RangeError(`makeVec: vectorizationMode must be 'sync' or 'async', got ${String(mode)}`);
  const { imports, ...vectorOptions } = (options.vectorKwargs ?? {}) as AsyncVectorEnvOptions & {
    imports?: readonly string[];
  };
  if (typeof spec.entryPoint === 'function' && (imports === undefined || imports.length === 0)) {
    throw new TypeError(
      `makeVec: ${spec.id} has a function entry point, which worker threads cannot load; register it with a "path#export" string entry point, or pass vectorKwargs.imports with the module that registers it`,
    );
  }
  const envs = await AsyncVectorEnv.create<Obs, Act>(
    Array.from({ length: numEnvs }, () => ({ id: spec.id, kwargs, makeOptions, imports: imports ?? [] })),
    vectorOptions,
  );
  envs.spec = spec;
  return envs;
}
