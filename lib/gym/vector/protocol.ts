/**
 * The messages between an {@link AsyncVectorEnv} and its workers, and how a worker finds its
 * environment. Functions cannot be sent to a worker thread, so a sub-environment is described
 * by an {@link EnvSource}:
 *
 * - a registered id (`'sinkflex/CartPole-v1'` or `{ id, kwargs, makeOptions, imports }`): the
 *   worker imports the modules of `imports` first (so that they can `register` their
 *   environments in the worker's own registry), then calls `makeAsync(id, kwargs, makeOptions)`;
 * - a module export (`{ module: './envs.js', exportName: 'MyEnv', kwargs, imports }`): the
 *   worker imports the module and constructs the export (a class, with `new`) or calls it (a
 *   factory) with `kwargs`; no wrapper is added.
 *
 * Relative module paths are resolved against the current working directory when the vector
 * environment is created; kwargs and options must be structured-cloneable.
 * @module
 */
import {
  ClosedEnvironmentError,
  DeprecatedEnv,
  EnvCheckError,
  GymError,
  NameNotFound,
  NamespaceNotFound,
  NotImplementedError,
  RegistrationError,
  ResetNeeded,
  UnregisteredEnv,
  VersionNotFound,
} from '../errors.js';
import { resolveModuleSpecifier, type EnvKwargs, type MakeOptions } from '../registration.js';
import type { Seed } from '../random.js';
import type { SpaceJSON } from '../spaces/space.js';
import type { AutoresetMode, EnvMetadata } from '../types.js';

/** A registered environment for a worker. */
export interface IdEnvSource {
  /** The registered id. */
  id: string;
  /** Kwargs for `makeAsync`. */
  kwargs?: EnvKwargs;
  /** Options for `makeAsync` (step limit, env checker, RecordEpisodeStatistics). */
  makeOptions?: MakeOptions;
  /** Modules the worker imports first (they may register environments). */
  imports?: readonly string[];
}

/** A module export for a worker. */
export interface ModuleEnvSource {
  /** Module path (relative to the cwd, absolute, a file URL or a package specifier). */
  module: string;
  /** The export: a class or factory taking the kwargs (default `default`). */
  exportName?: string;
  /** Its kwargs. */
  kwargs?: EnvKwargs;
  /** Modules the worker imports first. */
  imports?: readonly string[];
}

/** How a worker creates its environment (an id string is shorthand for `{ id }`). */
export type EnvSource = string | IdEnvSource | ModuleEnvSource;

/** An {@link EnvSource} with module paths resolved to URLs (what is sent to the worker). */
export type ResolvedEnvSource =
  | { kind: 'id'; id: string; kwargs: EnvKwargs; makeOptions: MakeOptions; imports: string[] }
  | { kind: 'module'; url: string; exportName: string; kwargs: EnvKwargs; imports: string[] };

function resolveImport(specifier: string): string {
  return resolveModuleSpecifier(specifier).url;
}

/** Resolves relative paths of a source against the current working directory. */
export function resolveEnvSource(source: EnvSource): ResolvedEnvSource {
  if (typeof source === 'string') return { kind: 'id', id: source, kwargs: {}, makeOptions: {}, imports: [] };
  if (typeof source !== 'object' || source === null)
    throw new TypeError(`An env source must be an id or an object, got ${String(source)}`);
  const imports = (source.imports ?? []).map(resolveImport);
  if ('id' in source && typeof source.id === 'string') {
    return {
      kind: 'id',
      id: source.id,
      kwargs: { ...(source.kwargs ?? {}) },
      makeOptions: { ...(source.makeOptions ?? {}) },
      imports,
    };
  }
  if ('module' in source && typeof source.module === 'string') {
    const parsed = resolveModuleSpecifier(
      source.module.includes('#') ? source.module : `${source.module}#${source.exportName ?? 'default'}`,
    );
    return {
      kind: 'module',
      url: parsed.url,
      exportName: source.exportName ?? parsed.exportName,
      kwargs: { ...(source.kwargs ?? {}) },
      imports,
    };
  }
  throw new TypeError('An env source object needs an `id` or a `module`');
}

/** What a worker needs to start. */
export interface WorkerInit {
  index: number;
  source: ResolvedEnvSource;
  autoresetMode: AutoresetMode;
}

/** A command to a worker. */
export type WorkerCommand =
  | { cmd: 'reset'; seed: Seed | null; options: Record<string, unknown> | null }
  | { cmd: 'step'; action: unknown }
  | { cmd: 'call'; name: string; args: unknown[] }
  | { cmd: 'setAttr'; name: string; value: unknown }
  | { cmd: 'render' }
  | { cmd: 'close' };

/** A command with its sequence number. */
export type WorkerRequest = WorkerCommand & { seq: number };

/** An error as sent between threads. */
export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
}

/** Messages from a worker. */
export type WorkerMessage =
  | {
      type: 'ready';
      observationSpace: SpaceJSON;
      actionSpace: SpaceJSON;
      metadata: EnvMetadata;
      renderMode: string | null;
    }
  | { type: 'init-error'; error: SerializedError }
  | { type: 'reply'; seq: number; ok: true; value: unknown }
  | { type: 'reply'; seq: number; ok: false; error: SerializedError };

/** An error as plain data. */
export function serializeError(e: unknown): SerializedError {
  if (e instanceof Error)
    return { name: e.name, message: e.message, ...(e.stack !== undefined ? { stack: e.stack } : {}) };
  return { name: 'Error', message: String(e) };
}

const ERROR_CLASSES: Record<string, new (message: string) => Error> = {
  Error,
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
  GymError,
  RegistrationError,
  UnregisteredEnv,
  NamespaceNotFound,
  NameNotFound,
  VersionNotFound,
  DeprecatedEnv,
  ResetNeeded,
  ClosedEnvironmentError,
  NotImplementedError,
  EnvCheckError,
};

/** Rebuilds an error on this thread (same class for built-in and gym errors; the worker's stack is kept in `stack`). */
export function deserializeError(data: SerializedError): Error {
  const Cls = ERROR_CLASSES[data.name];
  let err: Error;
  if (Cls) {
    err = new Cls(data.message);
  } else {
    err = new Error(data.message);
    err.name = data.name;
  }
  if (data.stack !== undefined) err.stack = data.stack;
  return err;
}
