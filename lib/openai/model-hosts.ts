/**
 * What `sinkflex serve` needs to change what it serves while it runs, so that a trainer can keep
 * its rollout servers on-policy:
 *
 * - {@link AdapterHost}: runtime LoRA adapters (vLLM's `POST /v1/load_lora_adapter` and
 *   `/v1/unload_lora_adapter`); requests then name an adapter as their `model`.
 * - {@link WeightsHost}: a full weight reload from disk (SGLang's `POST
 *   /update_weights_from_disk`), for models trained without adapters (the built-in model).
 *
 * {@link transformerWeightsHost} is the weights host of the built-in transformer: it loads a
 * checkpoint of the same architecture and tokenizer into the served parameters in place.
 * @module
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';

import { loadCheckpoint, restoreParamStore } from '../model/checkpoint.js';
import type { GenerativeModel } from '../model/policy.js';
import type { TransformerPolicy } from '../model/transformer-policy.js';

/**
 * Runtime LoRA adapters of a served base model. The server checks names (duplicates, unknown
 * ones) and waits for the requests in flight before it calls `load` or `unload`; a host only
 * loads, unloads and serves.
 */
export interface AdapterHost {
  /**
   * Loads the adapter saved at `path` (a PEFT folder: `adapter_config.json` and
   * `adapter_model.safetensors`) under `name`, replacing one loaded under that name; rejects
   * with an error naming what is wrong (an adapter made for another base model, a file PEFT's
   * format does not allow; {@link AdapterNotFoundError} when there is no adapter at `path`).
   * Resolves with `{ rebuilt: true }` when the served model itself was rebuilt (e.g. given LoRA
   * slots): every kept session, the base model's included, is then stale.
   */
  load(name: string, path: string): Promise<AdapterLoadResult | void>;
  /** Unloads the adapter `name` (frees what it holds). */
  unload(name: string): Promise<void>;
  /** The names of the loaded adapters. */
  list(): string[];
  /** The model that serves requests naming adapter `name` (the base model plus the adapter), or undefined. */
  model(name: string): GenerativeModel | undefined;
}

/**
 * Thrown by {@link AdapterHost.load} when `path` holds no adapter (no such folder, or no
 * `adapter_config.json` in it): the server answers 404, as vLLM does for "No adapter found".
 */
export class AdapterNotFoundError extends Error {
  /** @param message - what is missing, naming the path. */
  constructor(message: string) {
    super(message);
    this.name = 'AdapterNotFoundError';
  }
}

/** What {@link AdapterHost.load} changed beyond the adapter itself. */
export interface AdapterLoadResult {
  /** The served model was rebuilt: the kept sessions of every model (their KV caches) belong to the old one. */
  rebuilt: boolean;
}

/** A full weight reload of the served model. */
export interface WeightsHost {
  /**
   * Loads the weights at `path` into the served model (same architecture and tokenizer);
   * rejects with an error naming what does not match. Called with no request in flight.
   */
  load(path: string): Promise<void>;
}

/** A checkpoint file: `path` itself, or `policy.safetensors` in a run's checkpoint folder. */
function checkpointFile(path: string): string {
  if (existsSync(path) && statSync(path).isDirectory()) {
    const f = join(path, 'policy.safetensors');
    if (!existsSync(f))
      throw new Error(
        `${path} is a folder without policy.safetensors (give a checkpoint file or a run's checkpoint folder)`,
      );
    return f;
  }
  return path;
}

/**
 * The weights host of a built-in {@link TransformerPolicy}: `load(path)` reads a sinkflex
 * checkpoint (`TransformerPolicy.save`, or a run's checkpoint folder) whose architecture and
 * tokenizer equal the served policy's, and writes its parameters into the policy's store in
 * place (the served object, its sessions' owner, stays the same).
 */
export function transformerWeightsHost(policy: TransformerPolicy): WeightsHost {
  return {
    load: async (path: string) => {
      if (typeof path !== 'string' || path === '') throw new TypeError('the weights path must be a non-empty string');
      const ck = loadCheckpoint(checkpointFile(path), { expectConfig: policy.config });
      const mine = policy.tokenizer ? JSON.stringify(policy.tokenizer.toJSON()) : null;
      const theirs = ck.tokenizer ? JSON.stringify(ck.tokenizer) : null;
      if (mine !== null && theirs !== null && mine !== theirs)
        throw new Error(
          `${path}: the checkpoint's tokenizer differs from the served model's (start the server from a checkpoint of the same run)`,
        );
      if (policy.pending > 0)
        throw new Error('the policy is still sampling; weights are reloaded with no request in flight');
      restoreParamStore(ck, policy.model.store);
    },
  };
}
