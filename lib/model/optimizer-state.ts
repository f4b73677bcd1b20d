/**
 * The optimizer state of a store's trainable parameters in one safetensors file: AdamW moments
 * (`optimizer.m.<name>`, `optimizer.v.<name>`, float32) of every trainable parameter, and in the
 * metadata the optimizer step, the store's RNG state, extra RNG states, the trainable
 * parameters' names and shapes, free-form trainer state and a SHA-256 of the data section.
 *
 * It is what a LoRA checkpoint keeps besides the adapter itself (the PEFT folder holds the
 * adapter's values, the base model's folder the frozen rest): no parameter values, and nothing
 * for frozen parameters, so it works for stores with frozen or bfloat16 parameters, which
 * {@link saveCheckpoint} refuses. Written atomically; loading checks the format and checksum,
 * restoring checks that the store's trainable parameters are exactly the saved ones.
 * @module
 */
import { createHash } from 'node:crypto';

import { CheckpointError } from './checkpoint.js';
import type { ParamStore } from './param-store.js';
import {
  SafetensorsError,
  type SafeTensor,
  encodeSafetensors,
  readSafetensorsFile,
  writeFileAtomic,
} from './safetensors.js';

/** The `format` metadata value of optimizer-state files. */
export const OPTIMIZER_STATE_FORMAT = 'sinkflex-rl/optimizer-state';
const FORMAT_VERSION = '1';

/** Options of {@link saveOptimizerState}. */
export interface SaveOptimizerStateOptions {
  /** Extra RNG states (e.g. a sampler's), by name; the store's own state is always saved. */
  rng?: Record<string, string>;
  /** Any JSON-serialisable trainer state. */
  trainer?: Record<string, unknown>;
}

/** A loaded optimizer-state file. */
export interface OptimizerState {
  /** The file. */
  path: string;
  /** Optimizer steps taken. */
  step: number;
  /** The store's RNG state. */
  storeRng: string;
  /** Extra RNG states. */
  rng: Record<string, string>;
  /** Trainer state. */
  trainer: Record<string, unknown>;
  /** The trainable parameters saved, in store order, with their shapes. */
  params: { name: string; shape: number[] }[];
  /** Every tensor of the file by name. */
  tensors: Map<string, SafeTensor>;
}

const momentName = (which: 'm' | 'v', name: string): string => `optimizer.${which}.${name}`;

/** Writes the optimizer state of `store`'s trainable parameters to `path` (atomically). */
export function saveOptimizerState(path: string, store: ParamStore, options: SaveOptimizerStateOptions = {}): void {
  const params = store.info().filter((p) => p.trainable);
  const tensors: [string, SafeTensor][] = [];
  for (const which of ['m', 'v'] as const) {
    for (const p of params)
      tensors.push([momentName(which, p.name), { dtype: 'F32', shape: [...p.shape], data: store.read(p.name, which) }]);
  }
  const metadata: Record<string, string> = {
    format: OPTIMIZER_STATE_FORMAT,
    format_version: FORMAT_VERSION,
    step: String(store.step),
    params: JSON.stringify(params.map((p) => ({ name: p.name, shape: p.shape }))),
    rng: JSON.stringify({ store: store.rngState(), extra: options.rng ?? {} }),
    trainer: JSON.stringify(options.trainer ?? {}),
  };
  const hash = createHash('sha256');
  for (const piece of encodeSafetensors(tensors).slice(1)) hash.update(piece);
  metadata.data_sha256 = hash.digest('hex');
  writeFileAtomic(path, encodeSafetensors(tensors, metadata));
}

function json<T>(path: string, metadata: Record<string, string>, key: string): T {
  const raw = metadata[key];
  if (raw === undefined) throw new CheckpointError(`metadata has no '${key}'`, path);
  try {
    return JSON.parse(raw) as T;
  } catch (e) {
    throw new CheckpointError(`metadata '${key}' is not valid JSON (${(e as Error).message})`, path, { cause: e });
  }
}

/** Reads and checks an optimizer-state file (format, checksum, every moment present with its shape). */
export function loadOptimizerState(path: string): OptimizerState {
  let file;
  try {
    file = readSafetensorsFile(path);
  } catch (e) {
    if (e instanceof SafetensorsError)
      throw new CheckpointError(`not a readable safetensors file: ${e.message}`, path, { cause: e });
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      throw new CheckpointError('the optimizer state is missing', path, { cause: e });
    throw e;
  }
  const { tensors, metadata } = file;
  if (metadata.format !== OPTIMIZER_STATE_FORMAT)
    throw new CheckpointError(
      `not an optimizer-state file (metadata format is ${JSON.stringify(metadata.format)})`,
      path,
    );
  if (metadata.format_version !== FORMAT_VERSION)
    throw new CheckpointError(`unsupported optimizer-state version ${JSON.stringify(metadata.format_version)}`, path);
  if (createHash('sha256').update(file.data).digest('hex') !== metadata.data_sha256)
    throw new CheckpointError('checksum mismatch: the tensor data is corrupt', path);
  const step = Number(metadata.step);
  if (!Number.isSafeInteger(step) || step < 0)
    throw new CheckpointError("metadata 'step' is not a non-negative integer", path);
  const params = json<{ name: string; shape: number[] }[]>(path, metadata, 'params');
  if (!Array.isArray(params) || params.some((p) => typeof p?.name !== 'string' || !Array.isArray(p.shape)))
    throw new CheckpointError("metadata 'params' is malformed", path);
  const rng = json<{ store?: unknown; extra?: unknown }>(path, metadata, 'rng');
  if (typeof rng.store !== 'string' || typeof rng.extra !== 'object' || rng.extra === null)
    throw new CheckpointError("metadata 'rng' is malformed", path);
  const expected = new Set<string>();
  for (const p of params) {
    for (const which of ['m', 'v'] as const) {
      const name = momentName(which, p.name);
      expected.add(name);
      const t = tensors.get(name);
      if (!t) throw new CheckpointError(`missing tensor '${name}'`, path);
      if (t.dtype !== 'F32' || t.shape.length !== p.shape.length || t.shape.some((d, i) => d !== p.shape[i])) {
        throw new CheckpointError(
          `tensor '${name}' is ${t.dtype} [${t.shape.join(', ')}], expected F32 [${p.shape.join(', ')}]`,
          path,
        );
      }
    }
  }
  for (const name of tensors.keys())
    if (!expected.has(name)) throw new CheckpointError(`unexpected tensor '${name}'`, path);
  return {
    path,
    step,
    storeRng: rng.store,
    rng: rng.extra as Record<string, string>,
    trainer: json<Record<string, unknown>>(path, metadata, 'trainer'),
    params,
    tensors,
  };
}

/**
 * Puts a loaded optimizer state into `store`: the moments of its trainable parameters (which
 * must be exactly the saved ones, names and shapes, in order), the optimizer step and the RNG
 * state; gradients are zeroed. Parameter values are not touched.
 */
export function restoreOptimizerState(state: OptimizerState, store: ParamStore): void {
  const have = store.info().filter((p) => p.trainable);
  const list = (ps: readonly { name: string; shape: readonly number[] }[]): string =>
    ps.map((p) => `${p.name} [${p.shape.join(', ')}]`).join(', ');
  const same =
    have.length === state.params.length &&
    have.every(
      (p, i) =>
        p.name === state.params[i].name &&
        p.shape.length === state.params[i].shape.length &&
        p.shape.every((d, j) => d === state.params[i].shape[j]),
    );
  if (!same) {
    const missing = state.params.find((p) => !have.some((q) => q.name === p.name));
    const extra = have.find((p) => !state.params.some((q) => q.name === p.name));
    const why = missing
      ? `'${missing.name}' is saved but not trainable in the store`
      : extra
        ? `'${extra.name}' trains in the store but is not saved`
        : `saved: ${list(state.params.slice(0, 4))}…; store: ${list(have.slice(0, 4))}…`;
    throw new CheckpointError(
      `store mismatch: the store's trainable parameters are not the saved ones (${why})`,
      state.path,
    );
  }
  for (const p of have) {
    for (const which of ['m', 'v'] as const)
      store.write(p.name, state.tensors.get(momentName(which, p.name))?.data as Float32Array, which);
  }
  store.zeroGrad();
  store.step = state.step;
  store.setRngState(state.storeRng);
}
