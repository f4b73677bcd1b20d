/**
 * Training runs of pretrained models (`model.source: 'hf:<dir>'`): the base model folder kept by
 * path and fingerprint, the model loaded with fresh or saved LoRA adapters (or in full, float32,
 * for full fine-tuning), what a checkpoint holds, and the KL reference of a LoRA run.
 *
 * ```
 * <out>/base.json                        { dir, fingerprint } of the base folder (also in each checkpoint)
 * <out>/reference-adapter/               LoRA: the adapter after SFT (PEFT files), the KL reference
 * <out>/reference.safetensors            full fine-tuning: the policy after SFT, the KL reference
 * <out>/checkpoints/step-<k>/adapter/    LoRA: the adapter (adapter_config.json, adapter_model.safetensors)
 * <out>/checkpoints/step-<k>/optimizer.safetensors   LoRA: the adapters' AdamW moments and step,
 *                                        the store and sampler RNG states, the trainer state
 * <out>/checkpoints/step-<k>/policy.safetensors      full fine-tuning: weights, moments, RNG states
 * ```
 *
 * The frozen base is never copied: a run references it by absolute path, and resuming it (or
 * loading it for `sinkflex eval` / `serve`) refuses a base folder whose fingerprint changed
 * ({@link hfFolderFingerprint}: the defining files hashed, the weights by size and header).
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

import {
  fingerprintDifference,
  hfFolderFingerprint,
  loadCheckpoint,
  loadOptimizerState,
  loadPretrained,
  peftAdapterValues,
  readPeftAdapter,
  resolveLoraTargets,
  restoreOptimizerState,
  restoreParamStore,
  saveOptimizerState,
  type HfFolderFingerprint,
  type LogProbOptions,
  type LogProbResult,
  type LoraConfigInput,
  type ModelConfig,
  type PackedBatch,
  type PretrainedModel,
  type TransformerPolicy,
} from '../model/index.js';
import { parseHfConfig } from '../model/hf/config.js';
import { RunFolderError, writeFileSynced, type TrainerState } from './checkpoint.js';
import { ConfigError, hfSourceDir, type TrainConfig } from './config.js';
import type { LogProbSource } from './model-handle.js';

/** The base model record of a run folder and of each of its checkpoints. */
export const BASE_FILE = 'base.json';
/** A LoRA checkpoint's adapter folder (PEFT files). */
export const ADAPTER_DIR = 'adapter';
/** A LoRA checkpoint's optimizer state. */
export const OPTIMIZER_FILE = 'optimizer.safetensors';
/** A LoRA run's KL reference adapter (PEFT files, in the run folder). */
export const REFERENCE_ADAPTER_DIR = 'reference-adapter';

/** The base model of a run: its folder (absolute) and fingerprint. */
export interface RunBase {
  /** The model folder. */
  dir: string;
  /** Its fingerprint when the run started (in base.json) or now. */
  fingerprint: HfFolderFingerprint;
}

/** The base model folder of an hf run's configuration as it is now (path resolved, fingerprint computed). */
export async function currentRunBase(config: Pick<TrainConfig, 'model'>): Promise<RunBase> {
  const dir = hfSourceDir(config);
  if (dir === null) throw new ConfigError('model.source: the built-in model has no base folder');
  const abs = resolve(dir);
  try {
    return { dir: abs, fingerprint: await hfFolderFingerprint(abs) };
  } catch (e) {
    throw new ConfigError(`model.source ${config.model.source}: ${(e as Error).message}`);
  }
}

/** base.json's text. */
export function runBaseJson(base: RunBase): string {
  return JSON.stringify(base, null, 2);
}

/** Reads the base.json of a run or checkpoint folder. */
export function readRunBase(folder: string): RunBase {
  const path = join(folder, BASE_FILE);
  if (!existsSync(path))
    throw new RunFolderError(`${folder} has no ${BASE_FILE} (the base model record of a run of a pretrained model)`);
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new RunFolderError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
  const b = v as RunBase;
  if (typeof b?.dir !== 'string' || typeof b.fingerprint?.digest !== 'string' || !Array.isArray(b.fingerprint.files))
    throw new RunFolderError(`${path} must hold { dir, fingerprint: { files, digest } }`);
  return b;
}

/** Throws a {@link RunFolderError} when the base folder is not the one the run trained on. */
export function checkRunBase(saved: RunBase, now: RunBase): void {
  const diff = fingerprintDifference(saved.fingerprint, now.fingerprint);
  if (diff === null) return;
  throw new RunFolderError(
    `the base model folder ${saved.dir} changed since the run started (${diff}): the run's adapters and optimizer state belong to the base it trained on; restore that folder, or start a new run`,
  );
}

/** The model config of the base folder (config.json parsed, context capped at `model.context`). */
async function baseModelConfig(config: TrainConfig, dir: string): Promise<ModelConfig> {
  try {
    return parseHfConfig(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')), {
      maxPositions: config.model.context,
    }).modelConfig;
  } catch (e) {
    const message = (e as Error).message;
    // an HfConfigError already names the file (`config.json: <field>: …`)
    throw new ConfigError(
      `model.source ${config.model.source}: ${message.startsWith('config.json: ') ? message : `config.json: ${message}`}`,
    );
  }
}

/**
 * The LoRA settings of a run over a model of `modelConfig` (`all-linear`: every projection the
 * model can adapt — the attention's four on a mixture of experts), or null for full fine-tuning.
 */
export function runLora(
  config: Pick<TrainConfig, 'model'>,
  modelConfig: Pick<ModelConfig, 'experts'>,
): LoraConfigInput | null {
  const l = config.model.lora;
  if (l === null) return null;
  const targets = resolveLoraTargets(l.targets === 'all-linear' ? 'all-linear' : [...l.targets], modelConfig);
  return { rank: l.rank, alpha: l.alpha, targets, rslora: l.rslora };
}

/** Options of {@link loadRunModel}. */
export interface LoadRunModelOptions {
  /** A checkpoint folder of the run to load (null: fresh adapters, or the base as it is). */
  checkpoint: string | null;
  /** For training: trainable parameters and the checkpoint's optimizer and sampler state restored (else the weights only). */
  training: boolean;
}

/**
 * The model of an hf run: the base folder with the run's dtype, context cap, device and seed,
 * and with LoRA the adapters — fresh (A from `config.seed`, B zero) or the checkpoint's —, or
 * for full fine-tuning float32 parameters (the checkpoint's weights). With `training` the
 * checkpoint's AdamW moments, optimizer step and RNG states are restored too. Errors of the
 * LoRA settings name `model.lora.<field>`.
 */
export async function loadRunModel(
  config: TrainConfig,
  base: RunBase,
  options: LoadRunModelOptions,
): Promise<PretrainedModel> {
  const mc = await baseModelConfig(config, base.dir);
  const lora = runLora(config, mc);
  const ck = options.checkpoint;
  const common = {
    device: config.model.device,
    maxPositions: config.model.context,
    seed: config.seed,
    policy: { samplerSeed: config.seed },
    activationCheckpointing: config.model.activationCheckpointing,
  };
  let m: PretrainedModel | null = null;
  try {
    if (lora !== null) {
      m = await loadPretrained(base.dir, {
        ...common,
        dtype: config.model.dtype,
        ...(ck ? { adapter: join(ck, ADAPTER_DIR) } : { lora }),
      });
      const have = m.lora;
      if (
        ck &&
        (have === null ||
          have.rank !== lora.rank ||
          have.alpha !== lora.alpha ||
          have.rslora !== (lora.rslora ?? false) ||
          have.targets.join() !== lora.targets.join())
      ) {
        throw new RunFolderError(
          `${join(ck, ADAPTER_DIR)}: the adapter (rank ${have?.rank}, alpha ${have?.alpha}, targets ${have?.targets.join(', ')}) is not the one model.lora describes (rank ${lora.rank}, alpha ${lora.alpha}, targets ${lora.targets.join(', ')})`,
        );
      }
      if (ck && options.training) {
        const st = loadOptimizerState(join(ck, OPTIMIZER_FILE));
        restoreOptimizerState(st, m.params);
        if (st.rng.sampler !== undefined) m.policy.setSamplerState(st.rng.sampler);
      }
    } else {
      m = await loadPretrained(base.dir, { ...common, dtype: 'float32', trainable: options.training });
      if (ck) {
        const c = loadCheckpoint(join(ck, 'policy.safetensors'), { expectConfig: m.modelConfig });
        if (options.training) {
          restoreParamStore(c, m.params);
          if (c.rng.sampler !== undefined) m.policy.setSamplerState(c.rng.sampler);
        } else {
          for (const p of m.params.info()) m.params.write(p.name, c.tensors.get(p.name)?.data as Float32Array);
        }
      }
    }
    return m;
  } catch (e) {
    m?.dispose();
    if (e instanceof RangeError && /^options\.lora/.test(e.message))
      throw new ConfigError(`model.${e.message.slice('options.'.length)}`);
    throw e;
  }
}

/**
 * Writes an hf run's policy into a checkpoint folder `dir`: with LoRA the adapter (PEFT files in
 * `adapter/`) and `optimizer.safetensors` (the adapters' moments, step, store and sampler RNG
 * states, `state`); for full fine-tuning `policy.safetensors`; and base.json.
 */
export async function writeRunPolicy(
  dir: string,
  m: PretrainedModel,
  base: RunBase,
  state: TrainerState,
): Promise<void> {
  const trainer = state as unknown as Record<string, unknown>;
  if (m.lora !== null) {
    await m.saveAdapter(join(dir, ADAPTER_DIR));
    saveOptimizerState(join(dir, OPTIMIZER_FILE), m.params, { rng: { sampler: m.policy.samplerState() }, trainer });
  } else {
    m.policy.save(join(dir, 'policy.safetensors'), { trainer });
  }
  writeFileSynced(join(dir, BASE_FILE), runBaseJson(base));
}

/**
 * The KL reference of a LoRA run: the base with the adapter as it was after SFT, kept as a copy
 * of the adapter's values only (no second copy of the base). Its log-probs are computed on the
 * policy's own model with those values written in place of the current ones, which are written
 * back afterwards (exactly: float32 copies). It must run while the policy is otherwise idle, as
 * in the GRPO step (between the old log-probs and the update).
 */
export class AdapterReference implements LogProbSource {
  private constructor(
    private readonly policy: TransformerPolicy,
    private readonly values: ReadonlyMap<string, Float32Array>,
  ) {}

  /** The reference of the adapter in the PEFT folder `dir` (made by the same run: same settings and shapes). */
  static async load(policy: TransformerPolicy, dir: string): Promise<AdapterReference> {
    const a = await readPeftAdapter(dir);
    const lora = policy.config.lora;
    if (lora === null) throw new RangeError('the policy has no LoRA adapters');
    if (
      a.lora.rank !== lora.rank ||
      a.lora.targets.join() !== lora.targets.join() ||
      a.layers !== policy.config.layers
    ) {
      throw new RunFolderError(
        `${dir}: the reference adapter (rank ${a.lora.rank}, targets ${a.lora.targets.join(', ')}, ${a.layers} layers) does not fit the policy's adapters (rank ${lora.rank}, targets ${lora.targets.join(', ')}, ${policy.config.layers} layers)`,
      );
    }
    // our parameter names and layouts (expert adapters converted from PEFT's stacked tensors)
    return new AdapterReference(policy, peftAdapterValues(policy.config, a));
  }

  /** Log-probs of the base + reference adapter (see the class description). */
  async logProbs(batch: PackedBatch, options: LogProbOptions = {}): Promise<LogProbResult> {
    if (this.policy.pending > 0)
      throw new Error('the adapter reference swaps the adapter values: no samples may run meanwhile');
    const store = this.policy.model.store;
    const current = new Map<string, Float32Array>();
    for (const [name, ref] of this.values) {
      current.set(name, store.read(name));
      store.write(name, ref);
    }
    try {
      return await this.policy.logProbs(batch, options);
    } finally {
      for (const [name, v] of current) store.write(name, v);
    }
  }

  /** Nothing to free (the values are JavaScript arrays). */
  dispose(): void {}
}
