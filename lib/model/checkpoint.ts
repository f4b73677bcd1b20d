/**
 * Checkpoints of the built-in policy in safetensors: parameter values (their own names),
 * AdamW moments (`optimizer.m.<name>`, `optimizer.v.<name>`), and in the metadata the model
 * config, the tokenizer, the optimiser step, RNG states, free-form trainer state, the seed and a
 * SHA-256 of the data section. Written atomically; loading checks the format, the checksum and
 * every tensor against the config, and fails with a {@link CheckpointError} that says what is
 * wrong (corrupt, truncated or mismatched file).
 * @module
 */
import { createHash } from 'node:crypto';

import { type ModelConfig, type ModelConfigInput, parameterLayout, validateModelConfig } from './config.js';
import { ParamStore, type ParamStoreOptions } from './param-store.js';
import {
  SafetensorsError,
  type SafeTensor,
  encodeSafetensors,
  readSafetensorsFile,
  writeFileAtomic,
} from './safetensors.js';
import { Tokenizer, type TokenizerJSON } from '../chat/tokenizer.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

/** The `format` metadata value of our checkpoints. */
export const CHECKPOINT_FORMAT = 'sinkflex-rl/checkpoint';
const FORMAT_VERSION = '1';

/** A checkpoint that cannot be loaded: corrupt, truncated, of another format, or not matching a config/store. */
export class CheckpointError extends Error {
  constructor(
    message: string,
    /** The file concerned. */
    readonly path: string,
    options?: { cause?: unknown },
  ) {
    super(`${path}: ${message}`, options);
    this.name = 'CheckpointError';
  }
}

const SAVE_CHECKPOINT_KEYS = optionKeys<SaveCheckpointOptions>({
  config: true,
  store: true,
  tokenizer: true,
  optimizer: true,
  rng: true,
  trainer: true,
});

/** What {@link saveCheckpoint} writes. */
export interface SaveCheckpointOptions {
  config: ModelConfig;
  store: ParamStore;
  /** Saved as JSON in the metadata. */
  tokenizer?: Tokenizer | TokenizerJSON;
  /** Include the AdamW moments (default true). */
  optimizer?: boolean;
  /** Extra RNG states (e.g. a sampler's), by name; the store's own state is always saved. */
  rng?: Record<string, string>;
  /** Any JSON-serialisable trainer state (data cursor, schedule, metrics). */
  trainer?: Record<string, unknown>;
}

/** A loaded checkpoint. */
export interface Checkpoint {
  path: string;
  config: ModelConfig;
  tokenizer: TokenizerJSON | null;
  /** The seed the store was created with. */
  seed: number;
  /** Optimiser steps taken. */
  step: number;
  /** AdamW moments are present. */
  hasOptimizerState: boolean;
  /** The store's RNG state. */
  storeRng: string;
  /** Extra RNG states saved with the checkpoint. */
  rng: Record<string, string>;
  trainer: Record<string, unknown>;
  /** Every tensor of the file by name. */
  tensors: Map<string, SafeTensor>;
}

const momentName = (which: 'm' | 'v', name: string): string => `optimizer.${which}.${name}`;

/** Writes a checkpoint atomically (temporary file, fsync, rename). */
export function saveCheckpoint(path: string, o: SaveCheckpointOptions): void {
  if (o === null || typeof o !== 'object') throw new TypeError('saveCheckpoint expects an options object');
  refuseUnknownOptions(o, SAVE_CHECKPOINT_KEYS, 'saveCheckpoint');
  const config = validateModelConfig(o.config);
  const layout = parameterLayout(config);
  const info = o.store.info();
  const same = (a: number[], b: number[]): boolean => a.length === b.length && a.every((d, i) => d === b[i]);
  if (
    info.length !== layout.length ||
    layout.some((p, i) => p.name !== info[i].name || !same(p.shape, info[i].shape))
  ) {
    throw new CheckpointError('the store does not hold the parameters of this config', path);
  }
  const frozen = info.find((p) => p.dtype !== 'float32' || !p.trainable);
  if (frozen) {
    throw new CheckpointError(
      `parameter '${frozen.name}' is ${frozen.dtype}${frozen.trainable ? '' : ', frozen'}: checkpoints hold stores of float32 trainable parameters`,
      path,
    );
  }
  const withMoments = o.optimizer ?? true;
  const tensors: [string, SafeTensor][] = [];
  // A CPU store's buffers are written in place (views); a GPU store's are copied to the host.
  const data = (name: string, which: 'value' | 'm' | 'v'): Float32Array =>
    o.store.device === 'cpu' ? o.store.view(name, which) : o.store.read(name, which);
  for (const p of layout) tensors.push([p.name, { dtype: 'F32', shape: p.shape, data: data(p.name, 'value') }]);
  if (withMoments) {
    for (const which of ['m', 'v'] as const) {
      for (const p of layout)
        tensors.push([momentName(which, p.name), { dtype: 'F32', shape: p.shape, data: data(p.name, which) }]);
    }
  }
  const tokenizer = o.tokenizer instanceof Tokenizer ? o.tokenizer.toJSON() : o.tokenizer;
  if (tokenizer && tokenizer.specialTokens.length + 256 + tokenizer.merges.length > config.vocab) {
    throw new CheckpointError(`the tokenizer has more tokens than config.vocab (${config.vocab})`, path);
  }
  const metadata: Record<string, string> = {
    format: CHECKPOINT_FORMAT,
    format_version: FORMAT_VERSION,
    config: JSON.stringify(config),
    seed: String(o.store.seed),
    optimizer: JSON.stringify({ step: o.store.step, moments: withMoments }),
    rng: JSON.stringify({ store: o.store.rngState(), extra: o.rng ?? {} }),
    trainer: JSON.stringify(o.trainer ?? {}),
  };
  if (tokenizer) metadata.tokenizer = JSON.stringify(tokenizer);
  // The checksum covers the data section as written (little-endian tensor bytes, in order);
  // the header does not change those bytes, so they are hashed from a first encoding.
  const hash = createHash('sha256');
  for (const piece of encodeSafetensors(tensors).slice(1)) hash.update(piece);
  metadata.data_sha256 = hash.digest('hex');
  writeFileAtomic(path, encodeSafetensors(tensors, metadata));
}

function parseJson<T>(path: string, metadata: Record<string, string>, key: string, required: boolean): T | undefined {
  const raw = metadata[key];
  if (raw === undefined) {
    if (required) throw new CheckpointError(`metadata has no '${key}'`, path);
    return undefined;
  }
  try {
    return JSON.parse(raw) as T;
  } catch (e) {
    throw new CheckpointError(`metadata '${key}' is not valid JSON (${(e as Error).message})`, path, { cause: e });
  }
}

/**
 * Reads and checks a checkpoint: safetensors structure, format, checksum, config, and that
 * every parameter (and moment, when saved) is present with the config's shape and no other
 * tensor is. With `expectConfig`, the saved config must equal it.
 */
export function loadCheckpoint(path: string, options: { expectConfig?: ModelConfigInput } = {}): Checkpoint {
  refuseUnknownOptions(options, ['expectConfig'], 'loadCheckpoint');
  let file;
  try {
    file = readSafetensorsFile(path);
  } catch (e) {
    if (e instanceof SafetensorsError)
      throw new CheckpointError(`not a readable safetensors file: ${e.message}`, path, { cause: e });
    throw e;
  }
  const { tensors, metadata } = file;
  if (metadata.format !== CHECKPOINT_FORMAT)
    throw new CheckpointError(
      `not a sinkflex checkpoint (metadata format is ${JSON.stringify(metadata.format)})`,
      path,
    );
  if (metadata.format_version !== FORMAT_VERSION)
    throw new CheckpointError(`unsupported checkpoint version ${JSON.stringify(metadata.format_version)}`, path);
  const digest = createHash('sha256').update(file.data).digest('hex');
  if (digest !== metadata.data_sha256) throw new CheckpointError('checksum mismatch: the tensor data is corrupt', path);
  let config: ModelConfig;
  try {
    config = validateModelConfig(parseJson<unknown>(path, metadata, 'config', true));
  } catch (e) {
    if (e instanceof CheckpointError) throw e;
    throw new CheckpointError(`invalid config: ${(e as Error).message}`, path, { cause: e });
  }
  if (options.expectConfig) {
    const want = validateModelConfig(options.expectConfig);
    for (const k of Object.keys(want) as (keyof ModelConfig)[]) {
      if (JSON.stringify(want[k]) !== JSON.stringify(config[k])) {
        throw new CheckpointError(
          `config mismatch: ${k} is ${JSON.stringify(config[k])} in the checkpoint, ${JSON.stringify(want[k])} expected`,
          path,
        );
      }
    }
  }
  const optimizer = parseJson<{ step?: unknown; moments?: unknown }>(path, metadata, 'optimizer', true) ?? {};
  if (
    !Number.isSafeInteger(optimizer.step) ||
    (optimizer.step as number) < 0 ||
    typeof optimizer.moments !== 'boolean'
  ) {
    throw new CheckpointError("metadata 'optimizer' must hold an integer step and a boolean moments", path);
  }
  const rng = parseJson<{ store?: unknown; extra?: unknown }>(path, metadata, 'rng', true) ?? {};
  if (typeof rng.store !== 'string' || typeof rng.extra !== 'object' || rng.extra === null)
    throw new CheckpointError("metadata 'rng' is malformed", path);
  const seed = Number(metadata.seed);
  if (!Number.isSafeInteger(seed) || seed < 0)
    throw new CheckpointError("metadata 'seed' is not a non-negative integer", path);
  const expected = new Map<string, number[]>();
  for (const p of parameterLayout(config)) {
    expected.set(p.name, p.shape);
    if (optimizer.moments) {
      expected.set(momentName('m', p.name), p.shape);
      expected.set(momentName('v', p.name), p.shape);
    }
  }
  for (const [name, shape] of expected) {
    const t = tensors.get(name);
    if (!t) throw new CheckpointError(`missing tensor '${name}'`, path);
    if (t.dtype !== 'F32') throw new CheckpointError(`tensor '${name}' is ${t.dtype}, expected F32`, path);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new CheckpointError(
        `tensor '${name}' has shape [${t.shape.join(', ')}], the config expects [${shape.join(', ')}]`,
        path,
      );
    }
  }
  for (const name of tensors.keys())
    if (!expected.has(name))
      throw new CheckpointError(`unexpected tensor '${name}' (not in the config's layout)`, path);
  let tokenizer: TokenizerJSON | null = null;
  const tk = parseJson<TokenizerJSON>(path, metadata, 'tokenizer', false);
  if (tk !== undefined) {
    try {
      tokenizer = Tokenizer.fromJSON(tk).toJSON();
    } catch (e) {
      throw new CheckpointError(`invalid tokenizer: ${(e as Error).message}`, path, { cause: e });
    }
  }
  return {
    path,
    config,
    tokenizer,
    seed,
    step: optimizer.step as number,
    hasOptimizerState: optimizer.moments,
    storeRng: rng.store,
    rng: rng.extra as Record<string, string>,
    trainer: parseJson<Record<string, unknown>>(path, metadata, 'trainer', false) ?? {},
    tensors,
  };
}

/**
 * Puts a checkpoint's parameters, moments (zeros when not saved), step and RNG state into
 * `store` (which must hold exactly the checkpoint config's parameters), or into a new store
 * created from the checkpoint's config and seed (on `options.device`, default the CPU).
 * Returns the store.
 */
export function restoreParamStore(
  checkpoint: Checkpoint,
  store?: ParamStore,
  options: ParamStoreOptions = {},
): ParamStore {
  const layout = parameterLayout(checkpoint.config);
  const target = store ?? ParamStore.fromConfig(checkpoint.config, checkpoint.seed, options);
  const info = target.info();
  if (info.length !== layout.length) {
    throw new CheckpointError(
      `store mismatch: the store has ${info.length} parameters, the checkpoint ${layout.length}`,
      checkpoint.path,
    );
  }
  layout.forEach((p, i) => {
    const q = info[i];
    if (q.name !== p.name || q.shape.length !== p.shape.length || q.shape.some((d, j) => d !== p.shape[j])) {
      throw new CheckpointError(
        `store mismatch: parameter ${i} is '${q.name}' [${q.shape.join(', ')}], the checkpoint has '${p.name}' [${p.shape.join(', ')}]`,
        checkpoint.path,
      );
    }
    if (q.dtype !== 'float32' || !q.trainable) {
      throw new CheckpointError(
        `store mismatch: parameter '${q.name}' is ${q.dtype}${q.trainable ? '' : ', frozen'}; checkpoints restore float32 trainable parameters`,
        checkpoint.path,
      );
    }
  });
  for (const p of layout) {
    target.write(p.name, checkpoint.tensors.get(p.name)?.data as Float32Array, 'value');
    for (const which of ['m', 'v'] as const) {
      const t = checkpoint.tensors.get(momentName(which, p.name));
      target.write(p.name, t ? (t.data as Float32Array) : new Float32Array(p.shape.reduce((a, b) => a * b, 1)), which);
    }
  }
  target.zeroGrad();
  target.step = checkpoint.step;
  target.setRngState(checkpoint.storeRng);
  return target;
}
