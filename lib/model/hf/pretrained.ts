/**
 * {@link loadPretrained}: a Hugging Face model folder as a running model — the native
 * transformer over a parameter store filled from the checkpoint, the model's tokenizer and chat
 * format, log-probs of token sequences, a {@link TransformerPolicy} for the agent loop,
 * evaluation and `sinkflex serve` (the same batched KV-cache sampler as the built-in model), and
 * saving back to a Hugging Face folder.
 *
 * Memory: the checkpoint is read one tensor at a time straight into the native store, so the
 * peak is about the model's resident size plus its largest tensor. Every parameter is frozen
 * (no gradient, no AdamW moments) unless `trainable: true` (float32 only). Matrices are held in
 * the dtype `dtype` asks for (see {@link HfDtypeOption}: `'auto'` keeps BF16 files as bfloat16,
 * so a bf16 model's resident size is about its file size). MXFP4 experts (gpt-oss) stay packed
 * by default (`mxfp4: 'packed'`: 4-bit blocks and E8M0 scales in the store, decoded exactly
 * inside the GEMMs — the same log-probs, bit for bit, as their bfloat16 dequantization, which
 * `mxfp4: 'bf16'` loads instead; `dtype: 'float32'` dequantizes to float32). gpt-oss-20b then
 * holds about its 13.8 GB checkpoint size instead of 41.8 GB.
 *
 * Devices: `'cpu'` (default), `'cuda'` or `'auto'` (the GPU when the CUDA build finds one, else
 * the CPU). The CUDA transformer runs every architecture the loader maps — q/k norm, with or
 * without sinks, tied embeddings, experts, bfloat16 frozen matrices — and LoRA, so
 * {@link cudaRefusal} refuses nothing today and {@link PretrainedModel.fallback} is null; a
 * `'cuda'` request without a usable GPU throws `DeviceUnavailableError`. On a GPU without LoRA
 * every parameter is float32 and trainable (bfloat16 files are widened as they load); with LoRA
 * the base stays frozen in its own dtype and only the adapters train.
 *
 * LoRA: `adapter: peftDir` applies a PEFT adapter (the model's log-probs and samples are base +
 * adapter), `lora: { rank, alpha, targets }` adds fresh adapters to train (B = 0: the outputs
 * start as the base's); either way the base is frozen in its own dtype and the adapters are
 * float32 and trainable (lib/model/lora). {@link PretrainedModel.saveAdapter} writes the adapters
 * as a PEFT folder; {@link PretrainedModel.mergeAdapter} folds them into the base, after which
 * {@link PretrainedModel.save} writes a full Hugging Face folder (it refuses while adapters are
 * unmerged; merging runs on CPU models). LoRA runs on the CPU and on a GPU.
 * @module
 */
import { access } from 'node:fs/promises';
import { join } from 'node:path';

import { ChatTemplateError } from '../../chat/chat-template.js';
import { type ModelConfig, ModelConfigError, parameterLayout, validateModelConfig } from '../config.js';
import { applyPeftAdapter, readPeftAdapter, savePeftAdapter, type PeftAdapter } from '../lora/peft.js';
import { addLora, mergeLora, removeLora } from '../lora/adapters.js';
import { resolveLoraTargets, type LoraConfig, type LoraConfigInput, type LoraOptionInput } from '../lora/settings.js';
import type { ParamSpec } from '../native.js';
import { modelOpsDevice } from '../ops.js';
import { ParamStore, type StoreDevice } from '../param-store.js';
import { Transformer, packSequences } from '../transformer.js';
import type { ActivationCheckpointing } from '../policy.js';
import { TransformerPolicy, type TransformerPolicyOptions } from '../transformer-policy.js';
import type { DeviceRequest } from '../../native/device.js';
import { DeviceUnavailableError } from '../../native/errors.js';
import { type ChatFormatOptions, type PretrainedChatFormat, loadChatFormat } from '../../chat/hf/factory.js';
import type { HfArchitecture } from './config-schema.js';
import type { HfFileDtype, HfTensor } from './convert.js';
import { HfConfigError } from './errors.js';
import { HfCheckpointReader, type HfDtypeOption, type HfMxfp4Option } from './load.js';
import { type SaveHfResult, saveHf } from './save.js';
import { HfTokenizer, HfTokenizerError } from '../../chat/hf/tokenizer.js';
import { optionKeys, refuseUnknownOptions } from '../../util/options.js';

/** Options of {@link loadPretrained}. */
export interface LoadPretrainedOptions {
  /** `'cpu'` (default), `'cuda'` (fails when the GPU cannot run the model) or `'auto'` (the GPU when it can, else the CPU). */
  device?: DeviceRequest;
  /** How to hold the weight matrices (default `'auto'`: as the file stores them; see {@link HfDtypeOption}). */
  dtype?: HfDtypeOption;
  /**
   * MXFP4 experts: `'packed'` (default; kept as 4-bit blocks + scales, decoded exactly in the
   * GEMMs) or `'bf16'` (dequantized to bfloat16 at load). See {@link HfMxfp4Option}.
   */
  mxfp4?: HfMxfp4Option;
  /** Cap on the context (positions), e.g. to keep RoPE tables and KV caches of a 128k-context model small. */
  maxPositions?: number;
  /** Give every parameter a gradient and AdamW moments (full fine-tuning; needs dtype float32; not with LoRA). Default false (forced true on a GPU). */
  trainable?: boolean;
  /**
   * A PEFT LoRA adapter folder (`adapter_config.json` + `adapter_model.safetensors`) to apply:
   * the model runs base + adapter, the adapters trainable in float32, the base frozen. One made
   * for another base model is refused (a {@link PeftAdapterError} naming the tensor). CPU or GPU.
   */
  adapter?: string;
  /**
   * Fresh LoRA adapters to train: `{ rank, alpha, targets, rslora? }` (targets among q_proj,
   * k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, on a mixture of experts also
   * experts.gate_up_proj and experts.down_proj (PEFT's `target_parameters`: every expert its own
   * A and B), or `'all-linear'`: every linear module, the attention's four on a
   * mixture of experts; errors name `options.lora.<field>`). A is drawn from `seed`, B is zero.
   * Not with `adapter`. CPU or GPU (the base stays as the files hold it, frozen; the adapters float32).
   */
  lora?: LoraOptionInput;
  /** Seed of the store: the initial values of fresh LoRA adapters (default 0). */
  seed?: number;
  /** The chat format (default: harmony for gpt-oss, else the folder's Jinja template). */
  chat?: ChatFormatOptions;
  /** Options of the sampling policy (its sampler seed and batching). */
  policy?: Pick<
    TransformerPolicyOptions,
    'samplerSeed' | 'maxForwardsPerRun' | 'prefillChunk' | 'streamForwardsPerRun'
  >;
  /**
   * What the policy's training forwards keep for the backward: `'none'` (default) every layer's
   * activations, `'layers'` only each layer's input, the backward recomputing the layer
   * (activation checkpointing: gradients bit-identical, less memory, one more forward).
   */
  activationCheckpointing?: ActivationCheckpointing;
}

/** The keys {@link loadPretrained} reads (any other is refused, naming it). */
const LOAD_PRETRAINED_KEYS = optionKeys<LoadPretrainedOptions>({
  device: true,
  dtype: true,
  maxPositions: true,
  trainable: true,
  adapter: true,
  lora: true,
  seed: true,
  chat: true,
  policy: true,
  activationCheckpointing: true,
  mxfp4: true,
});

/** Options of {@link PretrainedModel.logProbs}. */
export interface PretrainedLogProbOptions {
  /** Log-probs under softmax(logits / temperature) (default 1). */
  temperature?: number;
  /** Tokens per forward at most: sequences are packed as documents of batches under this budget (a longer sequence runs alone). Default 8192. */
  maxBatchTokens?: number;
}

/** Options of {@link PretrainedModel.save}. */
export interface PretrainedSaveOptions {
  /** `'auto'` (default: each tensor in the dtype its checkpoint stored it in; MXFP4 experts as BF16), or one dtype for all. */
  dtype?: 'auto' | 'float32' | 'bfloat16' | 'float16';
  /** Largest shard in bytes (default 5e9). */
  maxShardBytes?: number;
}

/**
 * Why the CUDA transformer cannot run a model held in `dtype` (null: it can). It runs every
 * architecture the loader maps (q/k norm, optional sinks, tied embeddings, MoE, bf16 frozen
 * matrices, LoRA adapters, on the experts too), so this is null today; `device: 'auto'` consults it.
 */
export function cudaRefusal(_config: ModelConfig, _dtype: 'float32' | 'bfloat16'): string | null {
  return null;
}

/** A loaded pretrained model (see the module description). Call {@link PretrainedModel.dispose}. */
export class PretrainedModel {
  private disposed = false;
  private currentPolicy: TransformerPolicy;

  /** @internal */
  constructor(
    /** The folder it was loaded from. */
    readonly dir: string,
    /** `config.architectures[0]`. */
    readonly architecture: HfArchitecture,
    /** config.json as loaded (the parsed Hugging Face config). */
    readonly config: Readonly<Record<string, unknown>>,
    /** generation_config.json (null when absent). */
    readonly generationConfig: Readonly<Record<string, unknown>> | null,
    private readonly tokenizerOrError: HfTokenizer | HfTokenizerError,
    private readonly chatFormat: PretrainedChatFormat | ChatTemplateError,
    policy: TransformerPolicy,
    private readonly store: ParamStore,
    private readonly fileDtypes: ReadonlyMap<string, HfFileDtype>,
    /** Why the model runs on the CPU although `device: 'auto'` was asked and a GPU is there (null otherwise). */
    readonly fallback: string | null,
    private readonly policyOptions: LoadPretrainedOptions['policy'] &
      Pick<TransformerPolicyOptions, 'activationCheckpointing'>,
  ) {
    this.currentPolicy = policy;
  }

  /**
   * The model as a batched-sampling, KV-cache token policy (also what {@link logProbs} runs
   * on). {@link mergeAdapter} replaces it (the one taken before is then disposed).
   */
  get policy(): TransformerPolicy {
    return this.currentPolicy;
  }

  /** The native model's config (`lora` set while the model has adapters). */
  get modelConfig(): ModelConfig {
    return this.currentPolicy.config;
  }

  /** The LoRA adapters' settings, or null when the model has none. */
  get lora(): LoraConfig | null {
    return this.currentPolicy.config.lora;
  }

  /**
   * The tokenizer (its `vocabSize` is the model's: ids the tokenizer does not name decode to
   * nothing). Throws an {@link HfTokenizerError} for a folder without tokenizer.json.
   */
  get tokenizer(): HfTokenizer {
    if (this.tokenizerOrError instanceof HfTokenizerError) throw this.tokenizerOrError;
    return this.tokenizerOrError;
  }

  /** Whether the folder has a tokenizer. */
  get hasTokenizer(): boolean {
    return !(this.tokenizerOrError instanceof HfTokenizerError);
  }

  /**
   * The chat format: `render(messages, { tools, addGenerationPrompt })` → `{ text, ids }`,
   * `parse(completionText)` → `{ content, toolCalls, reasoning, error }`, and the
   * {@link ChatFormat} the agent loop and the server use. Throws a {@link ChatTemplateError}
   * for a model without one (no tokenizer, or no chat template in the folder and not gpt-oss).
   */
  get chat(): PretrainedChatFormat {
    if (this.chatFormat instanceof ChatTemplateError) throw this.chatFormat;
    return this.chatFormat;
  }

  /** Whether the model has a chat format. */
  get hasChat(): boolean {
    return !(this.chatFormat instanceof ChatTemplateError);
  }

  /** Where it runs: `'cpu'` or `'cuda:<k>'`. */
  get device(): StoreDevice {
    return this.store.device;
  }

  /** Bytes of parameters (and gradients and moments, when trainable) held natively. */
  get bytes(): number {
    return this.store.bytes;
  }

  /** The parameter store (our names; bfloat16 matrices where the dtype says so). */
  get params(): ParamStore {
    this.alive('params');
    return this.store;
  }

  private alive(what: string): void {
    if (this.disposed) throw new Error(`${what}: the model has been disposed`);
  }

  /**
   * Log-probabilities of each sequence's tokens after the first, `log p(ids[t] | ids[<t])` for
   * t ≥ 1 (a Float32Array of length `ids[i].length - 1` per sequence; a sequence of one token
   * gives an empty array). Sequences are packed as separate documents (attention never crosses
   * them, positions restart at 0) into batches of at most `maxBatchTokens` tokens; no
   * activations are kept. Queued behind the policy's running samples.
   */
  async logProbs(ids: readonly (readonly number[])[], options: PretrainedLogProbOptions = {}): Promise<Float32Array[]> {
    this.alive('logProbs');
    if (!Array.isArray(ids)) throw new TypeError('ids must be an array of token arrays');
    const temperature = options.temperature ?? 1;
    if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature <= 0)
      throw new RangeError(`options.temperature must be a finite number > 0, got ${String(temperature)}`);
    const budget = options.maxBatchTokens ?? 8192;
    if (!Number.isSafeInteger(budget) || budget < 2)
      throw new RangeError(`options.maxBatchTokens must be an integer >= 2, got ${String(budget)}`);
    const { vocab, context } = this.modelConfig;
    ids.forEach((seq, i) => {
      if (!Array.isArray(seq)) throw new TypeError(`ids[${i}] must be an array of token ids`);
      if (seq.length > context)
        throw new RangeError(`ids[${i}] has ${seq.length} tokens, more than the model's context (${context})`);
      for (let t = 0; t < seq.length; t++) {
        const id = seq[t];
        if (!Number.isInteger(id) || id < 0 || id >= vocab)
          throw new RangeError(`ids[${i}][${t}] = ${String(id)} is not a token id in [0, ${vocab})`);
      }
    });
    const out = ids.map((s) => new Float32Array(Math.max(0, s.length - 1)));
    let batch: number[] = [];
    let tokens = 0;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const packed = packSequences(batch.map((i) => ({ tokens: ids[i] })));
      const r = await this.policy.logProbs(packed, { temperature });
      batch.forEach((i, d) => {
        const at = packed.offsets[d];
        out[i].set(r.logProbs.subarray(at, at + ids[i].length - 1));
      });
      batch = [];
      tokens = 0;
    };
    for (let i = 0; i < ids.length; i++) {
      const n = ids[i].length;
      if (n < 2) continue;
      if (tokens > 0 && tokens + n > budget) await flush();
      batch.push(i);
      tokens += n;
    }
    await flush();
    return out;
  }

  /** One parameter in the form {@link saveHf} takes (bfloat16 bits as stored, else float32). */
  private tensor(name: string): HfTensor {
    const info = this.store.info().find((p) => p.name === name);
    if (info === undefined) throw new RangeError(`'${name}' is not a parameter of this model`);
    // an MXFP4 parameter reads back as its exact bfloat16 dequantization (what save writes)
    return info.dtype === 'bfloat16' || info.dtype === 'mxfp4'
      ? { dtype: 'bfloat16', shape: [...info.shape], data: this.store.readBf16(name) }
      : { dtype: 'float32', shape: [...info.shape], data: this.store.read(name) };
  }

  /**
   * Writes the model as a Hugging Face folder (config.json and generation_config.json as
   * loaded, the weights read back from the store in the checkpoint's dtypes, the tokenizer and
   * chat-template files copied); see {@link saveHf}. Loading it again gives equal tensors.
   */
  async save(dir: string, options: PretrainedSaveOptions = {}): Promise<SaveHfResult> {
    this.alive('save');
    if (this.lora !== null) {
      throw new Error(
        `save: the model has unmerged LoRA adapters (rank ${this.lora.rank}, targets ${this.lora.targets.join(', ')}): call mergeAdapter() first to save base + adapter as a full folder, or saveAdapter(dir) to save the adapter alone`,
      );
    }
    return saveHf(dir, {
      hfConfig: this.config as Record<string, unknown>,
      generationConfig: this.generationConfig as Record<string, unknown> | null,
      tensors: (name) => this.tensor(name),
      fileDtypes: this.fileDtypes,
      dtype: options.dtype ?? 'auto',
      ...(options.maxShardBytes !== undefined ? { maxShardBytes: options.maxShardBytes } : {}),
      copyFrom: this.dir,
    });
  }

  /**
   * Writes the LoRA adapters as a PEFT folder (`adapter_config.json` with
   * `base_model_name_or_path` = the folder the model was loaded from, `adapter_model.safetensors`
   * in float32; each file written atomically, `dir` created when missing), which PEFT, vLLM and
   * `loadPretrained(base, { adapter: dir })` load. Throws when the model has no adapters.
   */
  async saveAdapter(dir: string): Promise<{ dir: string; files: string[] }> {
    this.alive('saveAdapter');
    if (this.lora === null)
      throw new Error('saveAdapter: the model has no LoRA adapters (load it with options.adapter or options.lora)');
    if (typeof dir !== 'string' || dir === '') throw new TypeError('saveAdapter: dir must be a folder path');
    return savePeftAdapter(this.currentPolicy.model, dir, { baseModelNameOrPath: this.dir });
  }

  /**
   * Merges the LoRA adapters into the base weights (W' = W + scale · B A, see `mergeLora`) and
   * removes them: the model then has the base's parameters only (as frozen as before) and
   * {@link save} writes it as a full Hugging Face folder. The policy is rebuilt over the merged
   * model (its sampler state carried over); a policy taken before is disposed. Refused while
   * samples or other native work are pending, and when there are no adapters.
   */
  mergeAdapter(): void {
    this.alive('mergeAdapter');
    if (this.lora === null) throw new Error('mergeAdapter: the model has no LoRA adapters to merge');
    const old = this.currentPolicy;
    if (old.pending > 0) throw new Error(`mergeAdapter: ${old.pending} sample(s) of the policy are still running`);
    const sampler = old.samplerState();
    const merged = mergeLora(old.model);
    old.dispose();
    const policy = TransformerPolicy.fromModel(merged, this.policyOptions ?? {});
    policy.setSamplerState(sampler);
    this.currentPolicy = policy;
  }

  /**
   * Replaces the LoRA adapters by fresh ones with the settings `lora` (A drawn from the store's
   * seed, B = 0: the outputs are the base's) or removes them (`null`), without merging: the values
   * they had are discarded. A model without adapters gets them (the base is frozen, see
   * `addLora`). The policy is rebuilt as by {@link mergeAdapter} (its sampler state carried
   * over; a policy taken before is disposed, and so are its sessions' models). Refused while
   * samples or other native work are pending. Errors of the settings name `lora.<field>`.
   */
  resetAdapters(lora: LoraConfigInput | null): void {
    this.alive('resetAdapters');
    const old = this.currentPolicy;
    if (old.pending > 0) throw new Error(`resetAdapters: ${old.pending} sample(s) of the policy are still running`);
    if (lora !== null) validateModelConfig({ ...old.config, lora }); // errors before anything changes
    if (lora === null && old.config.lora === null) return;
    const sampler = old.samplerState();
    let model = old.model;
    try {
      if (model.config.lora !== null) model = removeLora(model);
      if (lora !== null) model = addLora(model, lora);
    } finally {
      // the policy follows the model as it is now, also when adding failed after the removal
      if (model !== old.model) {
        old.dispose();
        const policy = TransformerPolicy.fromModel(model, this.policyOptions ?? {});
        policy.setSamplerState(sampler);
        this.currentPolicy = policy;
      }
    }
  }

  /** Frees the model, its KV caches and its parameters (pending samples reject). Idempotent. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.currentPolicy.dispose();
    this.store.dispose();
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** The device to load on and, when `'auto'` chose the CPU over a usable GPU, why. */
function chooseDevice(
  request: DeviceRequest,
  config: ModelConfig,
  dtype: 'float32' | 'bfloat16',
): { device: 'cpu' | 'cuda'; fallback: string | null } {
  if (request === 'cpu') return { device: 'cpu', fallback: null };
  const refusal = cudaRefusal(config, dtype);
  if (request === 'cuda') {
    if (refusal !== null)
      throw new DeviceUnavailableError('cuda', `the CUDA transformer cannot run this model: ${refusal}`);
    return { device: modelOpsDevice('cuda'), fallback: null };
  }
  const usable = modelOpsDevice('auto') === 'cuda';
  if (!usable) return { device: 'cpu', fallback: null };
  return refusal === null ? { device: 'cuda', fallback: null } : { device: 'cpu', fallback: refusal };
}

/**
 * Loads a Hugging Face model folder (see the module description): config.json,
 * generation_config.json, the safetensors weights (single file or shards), tokenizer.json /
 * tokenizer_config.json and the chat template. Errors name the file, field or tensor and leave
 * nothing allocated.
 */
export async function loadPretrained(dir: string, options: LoadPretrainedOptions = {}): Promise<PretrainedModel> {
  if (typeof dir !== 'string' || dir === '') throw new TypeError('dir must be a model folder path');
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  refuseUnknownOptions(options, LOAD_PRETRAINED_KEYS, 'loadPretrained');
  const checkpointing = options.activationCheckpointing ?? 'none';
  if (checkpointing !== 'none' && checkpointing !== 'layers')
    throw new RangeError(
      `options.activationCheckpointing must be 'none' or 'layers', got ${JSON.stringify(checkpointing)}`,
    );
  const policyOptions = { ...options.policy, activationCheckpointing: checkpointing };
  const request = options.device ?? 'cpu';
  if (request !== 'cpu' && request !== 'cuda' && request !== 'auto')
    throw new RangeError(`device must be 'cpu', 'cuda' or 'auto', got ${JSON.stringify(request)}`);
  const dtype = options.dtype ?? 'auto';
  const trainable = options.trainable ?? false;
  if (typeof trainable !== 'boolean') throw new TypeError('options.trainable must be a boolean');
  const seed = options.seed ?? 0;
  if (!Number.isSafeInteger(seed) || seed < 0)
    throw new RangeError(`options.seed must be a non-negative safe integer, got ${String(seed)}`);
  if (options.adapter !== undefined && options.lora !== undefined)
    throw new RangeError(
      'options.adapter and options.lora: give one (a PEFT adapter to apply, or fresh adapters to train), not both',
    );
  if (options.adapter !== undefined && (typeof options.adapter !== 'string' || options.adapter === ''))
    throw new TypeError('options.adapter must be a PEFT adapter folder path');
  if (trainable && (options.adapter !== undefined || options.lora !== undefined)) {
    throw new RangeError(
      `options.trainable: full fine-tuning and LoRA (options.${options.adapter !== undefined ? 'adapter' : 'lora'}) exclude each other (with LoRA the adapters train and the base stays frozen)`,
    );
  }
  // a bad adapter folder fails before any weight is read
  const adapter: PeftAdapter | null = options.adapter !== undefined ? await readPeftAdapter(options.adapter) : null;
  const mxfp4 = options.mxfp4 ?? 'packed';
  if (mxfp4 !== 'packed' && mxfp4 !== 'bf16')
    throw new RangeError(`options.mxfp4 must be 'packed' or 'bf16', got ${JSON.stringify(mxfp4)}`);
  let reader = await HfCheckpointReader.open(dir, { dtype, mxfp4, maxPositions: options.maxPositions });
  let store: ParamStore | null = null;
  let policy = null as TransformerPolicy | null;
  try {
    let lora: LoraConfig | null = adapter?.lora ?? null;
    if (options.lora !== undefined) {
      try {
        const given = options.lora;
        const input =
          given !== null && typeof given === 'object' && given.targets === 'all-linear'
            ? { ...given, targets: resolveLoraTargets('all-linear', reader.config.modelConfig) }
            : given;
        lora = validateModelConfig({ ...reader.config.modelConfig, lora: input as LoraConfigInput }).lora;
      } catch (e) {
        if (e instanceof ModelConfigError)
          throw new RangeError(`options.${e.field} ${e.message.slice(`config.${e.field} `.length)}`, { cause: e });
        throw e;
      }
    }
    const held = reader.tensors.some((t) => t.dtype === 'bfloat16' || t.dtype === 'mxfp4') ? 'bfloat16' : 'float32';
    const { device, fallback } = chooseDevice(
      request,
      { ...reader.config.modelConfig, lora },
      dtype === 'auto' ? 'float32' : held,
    );
    const loraRun = adapter !== null || lora !== null;
    if (device === 'cuda' && held === 'bfloat16' && !loraRun) {
      // dtype 'auto' on a GPU without LoRA: float32 (every parameter trains there)
      await reader.dispose();
      reader = await HfCheckpointReader.open(dir, { dtype: 'float32', maxPositions: options.maxPositions });
    }
    const config = reader.config.modelConfig;
    const plan = new Map(reader.tensors.map((t) => [t.name, t]));
    const bf16 = reader.tensors.some((t) => t.dtype === 'bfloat16' || t.dtype === 'mxfp4');
    if (trainable && bf16)
      throw new RangeError("options.trainable needs dtype 'float32' (bfloat16 and MXFP4 parameters are frozen)");
    const specs: ParamSpec[] = parameterLayout(config).map((p) => {
      const t = plan.get(p.name);
      if (t === undefined)
        throw new HfConfigError('architectures', `internal: the checkpoint plan has no tensor for parameter ${p.name}`);
      // a GPU model trains every parameter, except under LoRA (a frozen base, adapters added below)
      return { ...p, init: 'zeros', dtype: t.dtype, trainable: (device === 'cuda' && !loraRun) || trainable };
    });
    if (specs.length !== reader.tensors.length)
      throw new HfConfigError(
        'architectures',
        `internal: the checkpoint plan has ${reader.tensors.length} tensors, the model ${specs.length} parameters`,
      );

    let tokenizer: HfTokenizer | HfTokenizerError;
    let chat: PretrainedChatFormat | ChatTemplateError;
    if (await exists(join(dir, 'tokenizer.json'))) {
      tokenizer = await HfTokenizer.fromDir(dir, { vocabSize: config.vocab });
      if (tokenizer.tokenCount > config.vocab)
        throw new HfTokenizerError(
          `tokenizer.json has ${tokenizer.tokenCount} tokens, more than config.json's vocab_size (${config.vocab})`,
        );
      try {
        chat = await loadChatFormat(dir, { ...options.chat, tokenizer });
      } catch (e) {
        if (!(e instanceof ChatTemplateError && /has no chat template/.test(e.message))) throw e;
        chat = e;
      }
    } else {
      tokenizer = new HfTokenizerError(`the model folder ${dir} has no tokenizer.json`);
      chat = new ChatTemplateError(`the model has no chat format: the folder ${dir} has no tokenizer.json`);
    }

    store = ParamStore.fromSpecs(specs, seed, { device });
    for await (const [info, t] of reader.entries()) {
      if (t.dtype === 'mxfp4') store.writeMxfp4(info.name, t.data);
      else store.write(info.name, t.data);
    }
    const fileDtypes = new Map(reader.tensors.map((t) => [t.name, t.fileDtype]));
    const { architecture, hfConfig } = reader.config;
    const generationConfig = reader.generationConfig;
    await reader.dispose();

    let model = Transformer.fromStore(config, store);
    try {
      if (adapter !== null) model = await applyPeftAdapter(model, adapter);
      else if (lora !== null) model = addLora(model, lora);
      policy = TransformerPolicy.fromModel(model, policyOptions);
    } catch (e) {
      model.dispose();
      throw e;
    }
    return new PretrainedModel(
      dir,
      architecture,
      hfConfig,
      generationConfig,
      tokenizer,
      chat,
      policy,
      store,
      fileDtypes,
      fallback,
      policyOptions,
    );
  } catch (e) {
    policy?.dispose();
    store?.dispose();
    await reader.dispose();
    throw e;
  }
}
