/**
 * Loading a Hugging Face model folder (config.json, generation_config.json, model.safetensors
 * or shards + model.safetensors.index.json) into our config and our parameter names/layouts.
 *
 * Everything is validated before any tensor data is read: the config, the shard index, every
 * expected tensor's presence, shape and dtype, and that no unexpected tensor is left over
 * (`*.rotary_emb.inv_freq` buffers are skipped; a tied checkpoint may repeat `lm_head.weight`
 * only as an exact copy of the embedding). Errors name the field or tensor; a failed load closes
 * every file and keeps nothing.
 *
 * dtypes (`dtype` option): `'float32'` widens every tensor to float32. `'bfloat16'` keeps the
 * matrices (embedding, attention projections, MLP / expert matrices, LM head) as bfloat16 bits
 * (BF16 as stored, F16/F32 rounded to nearest even). `'auto'` keeps each matrix in its file's
 * dtype where we can: BF16 (and MXFP4, dequantized to bf16 as transformers does) stays
 * bfloat16, F32 stays float32, and F16 is widened to float32 (exact; bfloat16 would drop three
 * mantissa bits — ask for `'bfloat16'` to halve its memory). Norms, biases, sinks and the gpt-oss
 * router are always float32 (widening is exact).
 *
 * MXFP4 experts (`mxfp4` option): `'bf16'` (the reader's default) dequantizes them as above;
 * `'packed'` delivers them as they are stored — 4-bit blocks and E8M0 scales, rows moved into our
 * layout — wherever they would otherwise be delivered as bfloat16 (dtype `'auto'` or
 * `'bfloat16'`; `'float32'` still dequantizes to float32). The native kernels decode them exactly
 * inside their GEMMs, so a packed model computes what the dequantized one does, bit for bit, in
 * 4.25 bits a weight instead of 16.
 * @module
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import {
  type HfArchitecture,
  type HfConfigInfo,
  type HfConfigOptions,
  type ParsedHfConfig,
  parseHfConfig,
} from './config.js';
import { type HfFileDtype, type HfLoadedTensor, type HfTensor, type TensorDtype, readPlanned } from './convert.js';
import { HfConfigError, HfTensorError } from './errors.js';
import type { ModelConfig } from '../config.js';
import { CheckpointFiles } from './shards.js';
import { type PlannedTensor, isIgnorableHfTensor, planTensors, recipeSources } from './tensor-plan.js';

export type { HfFileDtype, HfLoadedTensor, HfMxfp4Tensor, HfTensor, TensorDtype } from './convert.js';

/** How to hold the matrices (see the module notes). */
export type HfDtypeOption = 'auto' | 'float32' | 'bfloat16';

/** How to deliver MXFP4 experts: kept packed, or dequantized to bfloat16 (see the module notes). */
export type HfMxfp4Option = 'packed' | 'bf16';

/** Options of {@link loadHfCheckpoint} and {@link HfCheckpointReader.open}. */
export interface HfLoadOptions extends HfConfigOptions {
  /** Default `'auto'`. */
  dtype?: HfDtypeOption;
  /** MXFP4 experts: `'bf16'` (default here; {@link loadPretrained} defaults to `'packed'`) or `'packed'`. */
  mxfp4?: HfMxfp4Option;
}

/** One of our parameters as it will be read. */
export interface HfTensorInfo {
  /** Our name. */
  name: string;
  shape: number[];
  /** The dtype it is delivered in (`'mxfp4'`: packed blocks and scales, asked with `mxfp4: 'packed'`). */
  dtype: TensorDtype | 'mxfp4';
  /** The dtype its sources are stored in (MXFP4 counts as BF16, its dequantized form); save writes it back so. */
  fileDtype: HfFileDtype;
  /** The HF tensors it is made of. */
  sources: string[];
}

/** A loaded checkpoint: config and every parameter, by our names. */
export interface HfCheckpoint {
  dir: string;
  architecture: HfArchitecture;
  /** config.json as loaded (raw JSON: `m.config`, and what save writes back). */
  hfConfig: Record<string, unknown>;
  /** The config fields read, with the architecture's defaults. */
  resolved: ParsedHfConfig;
  /** generation_config.json as loaded (null when absent). */
  generationConfig: Record<string, unknown> | null;
  modelConfig: ModelConfig;
  /** Our parameters in layout order. */
  tensors: Map<string, HfTensor>;
  /** Per parameter: the dtype of its sources in the files (see {@link HfTensorInfo.fileDtype}). */
  fileDtypes: Map<string, HfFileDtype>;
}

const FLOAT_DTYPES: readonly string[] = ['F32', 'BF16', 'F16'];

async function readJson(path: string, file: string, required: boolean): Promise<Record<string, unknown> | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' && !required) return null;
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new HfConfigError('(file)', `not found (${path})`, file);
    throw e;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new HfConfigError('(root)', `is not valid JSON: ${(e as Error).message}`, file);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new HfConfigError('(root)', 'must be a JSON object', file);
  return json as Record<string, unknown>;
}

/**
 * An open checkpoint: config parsed, files validated, tensors read one at a time on demand
 * (so a caller can copy each into native memory and drop it). Call {@link HfCheckpointReader.dispose}.
 */
export class HfCheckpointReader {
  private constructor(
    /** The folder. */
    readonly dir: string,
    /** The parsed config. */
    readonly config: HfConfigInfo,
    /** generation_config.json (null when absent). */
    readonly generationConfig: Record<string, unknown> | null,
    /** Our parameters in layout order, with the dtypes they will be delivered in. */
    readonly tensors: readonly HfTensorInfo[],
    private readonly plan: Map<string, PlannedTensor>,
    private readonly files: CheckpointFiles,
  ) {}

  /** Opens and validates `dir` (see the module notes); reads no tensor data except to compare a tied checkpoint's lm_head. */
  static async open(dir: string, options: HfLoadOptions = {}): Promise<HfCheckpointReader> {
    const dtype = options.dtype ?? 'auto';
    if (dtype !== 'auto' && dtype !== 'float32' && dtype !== 'bfloat16')
      throw new RangeError(`dtype must be 'auto', 'float32' or 'bfloat16', got ${JSON.stringify(dtype)}`);
    const mxfp4 = options.mxfp4 ?? 'bf16';
    if (mxfp4 !== 'packed' && mxfp4 !== 'bf16')
      throw new RangeError(`mxfp4 must be 'packed' or 'bf16', got ${JSON.stringify(mxfp4)}`);
    const json = await readJson(join(dir, 'config.json'), 'config.json', true);
    const config = parseHfConfig(json, options);
    const generationConfig = await readJson(join(dir, 'generation_config.json'), 'generation_config.json', false);
    const files = await CheckpointFiles.open(dir);
    try {
      const plan = planTensors(config.architecture, config.modelConfig, (n) => files.has(n));
      const infos = validate(files, plan, dtype, mxfp4);
      await checkTiedHead(files, config.modelConfig);
      return new HfCheckpointReader(dir, config, generationConfig, infos, new Map(plan.map((p) => [p.name, p])), files);
    } catch (e) {
      await files.dispose();
      throw e;
    }
  }

  /** Reads one parameter (our name) in its delivered dtype and our layout. */
  async read(name: string): Promise<HfLoadedTensor> {
    const p = this.plan.get(name);
    if (p === undefined) throw new RangeError(`'${name}' is not a parameter of this checkpoint`);
    const info = this.tensors.find((t) => t.name === name)!;
    return readPlanned(this.files, p, info.dtype);
  }

  /** Every parameter in layout order, read one at a time. */
  async *entries(): AsyncGenerator<[HfTensorInfo, HfLoadedTensor]> {
    for (const info of this.tensors) yield [info, await readPlanned(this.files, this.plan.get(info.name)!, info.dtype)];
  }

  /** Closes the files (idempotent). */
  async dispose(): Promise<void> {
    await this.files.dispose();
  }

  /** {@link dispose} (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose();
  }
}

/** Checks names, shapes and dtypes of every source; returns what each parameter will be. */
function validate(
  files: CheckpointFiles,
  plan: PlannedTensor[],
  option: HfDtypeOption,
  mxfp4Option: HfMxfp4Option,
): HfTensorInfo[] {
  const used = new Set<string>();
  const infos: HfTensorInfo[] = [];
  for (const p of plan) {
    const dtypes: string[] = [];
    for (const s of recipeSources(p.recipe)) {
      if (!s.shape.every((d) => Number.isInteger(d))) {
        throw new HfTensorError(
          s.hf,
          `MXFP4 needs the packed axis to be a multiple of 32 (the config gives [${s.shape.join(', ')}])`,
        );
      }
      if (!files.has(s.hf))
        throw new HfTensorError(s.hf, `is missing from the checkpoint (needed for ${p.name} [${p.shape.join(', ')}])`);
      const e = files.file(s.hf).entry(s.hf);
      const allowed = s.kind === 'u8' ? ['U8'] : FLOAT_DTYPES;
      if (!allowed.includes(e.dtype))
        throw new HfTensorError(s.hf, `dtype ${e.dtype} is not supported here (expected ${allowed.join(', ')})`);
      if (e.shape.length !== s.shape.length || e.shape.some((d, i) => d !== s.shape[i])) {
        throw new HfTensorError(s.hf, `has shape [${e.shape.join(', ')}], the config implies [${s.shape.join(', ')}]`);
      }
      used.add(s.hf);
      dtypes.push(e.dtype);
    }
    const mxfp4 = dtypes.includes('U8');
    const fileDtype: HfFileDtype = mxfp4
      ? 'BF16'
      : dtypes.every((d) => d === dtypes[0])
        ? (dtypes[0] as HfFileDtype)
        : 'F32';
    let dtype: TensorDtype | 'mxfp4' = 'float32';
    if (p.role === 'matrix') dtype = option === 'auto' ? (fileDtype === 'BF16' ? 'bfloat16' : 'float32') : option;
    if (mxfp4 && mxfp4Option === 'packed' && dtype === 'bfloat16') dtype = 'mxfp4';
    infos.push({
      name: p.name,
      shape: [...p.shape],
      dtype,
      fileDtype,
      sources: recipeSources(p.recipe).map((s) => s.hf),
    });
  }
  // A tied checkpoint's lm_head.weight is left to checkTiedHead.
  const extra = [...files.names()].filter((n) => !used.has(n) && !isIgnorableHfTensor(n) && n !== 'lm_head.weight');
  if (extra.length > 0)
    throw new HfTensorError(
      extra[0],
      `is not a tensor of this architecture/config (unexpected${extra.length > 1 ? `; ${extra.length - 1} more` : ''})`,
    );
  return infos;
}

/** A tied checkpoint may hold lm_head.weight only as a bit-exact copy of the embedding. */
async function checkTiedHead(files: CheckpointFiles, config: ModelConfig): Promise<void> {
  if (!config.tieEmbeddings || !files.has('lm_head.weight')) return;
  const head = files.file('lm_head.weight');
  const embed = files.file('model.embed_tokens.weight');
  const he = head.entry('lm_head.weight');
  const ee = embed.entry('model.embed_tokens.weight');
  const same =
    he.dtype === ee.dtype && he.shape.length === ee.shape.length && he.shape.every((d, i) => d === ee.shape[i]);
  if (same) {
    const a = await head.readBytes('lm_head.weight');
    const b = await embed.readBytes('model.embed_tokens.weight');
    if (Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length))) return;
  }
  throw new HfTensorError(
    'lm_head.weight',
    'is present in a checkpoint with tie_word_embeddings = true and differs from model.embed_tokens.weight (unexpected)',
  );
}

/**
 * Loads a model folder: config, generation config and every parameter in our names and
 * layouts, in memory (MXFP4 experts dequantized). For checkpoints too large to hold twice, use
 * {@link HfCheckpointReader}.
 */
export async function loadHfCheckpoint(dir: string, options: Omit<HfLoadOptions, 'mxfp4'> = {}): Promise<HfCheckpoint> {
  const reader = await HfCheckpointReader.open(dir, { ...options, mxfp4: 'bf16' });
  try {
    const tensors = new Map<string, HfTensor>();
    const fileDtypes = new Map<string, HfFileDtype>();
    for await (const [info, t] of reader.entries()) {
      if (t.dtype === 'mxfp4') throw new HfTensorError(info.name, 'internal: delivered packed to loadHfCheckpoint');
      tensors.set(info.name, t);
      fileDtypes.set(info.name, info.fileDtype);
    }
    const { architecture, hfConfig, resolved, modelConfig } = reader.config;
    return {
      dir,
      architecture,
      hfConfig,
      resolved,
      generationConfig: reader.generationConfig,
      modelConfig,
      tensors,
      fileDtypes,
    };
  } finally {
    await reader.dispose();
  }
}
