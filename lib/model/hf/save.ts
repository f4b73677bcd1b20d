/**
 * Writing a Hugging Face model folder from our parameters: config.json (as loaded, with any
 * changes the caller made), generation_config.json, the weights converted back to HF names and
 * layouts, and the tokenizer files copied from the source folder.
 *
 * - Weights go to `model.safetensors`, or, past `maxShardBytes`, to
 *   `model-0000i-of-0000n.safetensors` shards with `model.safetensors.index.json`; each tensor
 *   is converted only when written (one at a time in memory).
 * - dtypes: `'auto'` writes every tensor in the dtype its checkpoint stored it in
 *   (`fileDtypes` from the load; else bfloat16 tensors of a map as BF16, everything else F32);
 *   `'float32'` / `'bfloat16'` / `'float16'` write all in one dtype (rounding to nearest even)
 *   and set config.json's `torch_dtype` (and `dtype` where present) accordingly.
 * - gpt-oss experts loaded from MXFP4 are written in the bf16 form (`gate_up_proj`,
 *   `down_proj`; we do not re-quantize) and `quantization_config` is removed from config.json.
 * - Atomic: everything is written into a temporary folder beside `dir`, which then replaces `dir`
 *   (an existing `dir` must be empty or a model folder with a config.json; it is replaced whole).
 * @module
 */
import { copyFile, mkdir, mkdtemp, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

import { littleEndianBytes, safetensorsByteLength } from '../safetensors.js';
import { type SafetensorsStreamEntry, writeSafetensorsStream } from '../safetensors-stream.js';
import { parseHfConfig } from './config.js';
import type { HfFileDtype, HfTensor } from './convert.js';
import { HfTensorError } from './errors.js';
import { type ElementArray, interleaveMap, permuteRowsInto, transposeInto } from './layout.js';
import { bf16ToF16, bf16ToF32, f32ToBf16, f32ToF16 } from './numeric.js';
import { INDEX_FILE, SINGLE_FILE } from './shards.js';
import { type PlannedTensor, planTensors, recipeSources } from './tensor-plan.js';

/** Tokenizer and chat-template files copied from `copyFrom` when present. */
export const TOKENIZER_FILES: readonly string[] = [
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'added_tokens.json',
  'chat_template.jinja',
  'chat_template.json',
  'vocab.json',
  'merges.txt',
  'tokenizer.model',
];

/** Our parameters by name: a map, or a function reading one (e.g. from a native store). */
export type HfTensorSource = ReadonlyMap<string, HfTensor> | ((name: string) => HfTensor | Promise<HfTensor>);

/** What {@link saveHf} writes. */
export interface SaveHfOptions {
  /** config.json to write (the loaded one, possibly changed). */
  hfConfig: Record<string, unknown>;
  /** generation_config.json to write; absent: copied from `copyFrom` when there. */
  generationConfig?: Record<string, unknown> | null;
  /** Our parameters (names and layouts of {@link planTensors} for this config). */
  tensors: HfTensorSource;
  /**
   * Per parameter, the dtype to write it in under `dtype: 'auto'` (from the load). Parameters it
   * does not list: BF16 when a map holds them as bfloat16, else F32.
   */
  fileDtypes?: ReadonlyMap<string, HfFileDtype>;
  /** Default `'auto'`. */
  dtype?: 'auto' | 'float32' | 'bfloat16' | 'float16';
  /** Largest shard (bytes of tensor data) before starting another; default 5e9 (transformers' 5GB). */
  maxShardBytes?: number;
  /** A folder to copy the tokenizer files ({@link TOKENIZER_FILES}) from (usually the loaded one). */
  copyFrom?: string;
}

/** What {@link saveHf} wrote. */
export interface SaveHfResult {
  dir: string;
  /** File names written, relative to `dir`. */
  files: string[];
  /** Bytes of tensor data. */
  tensorBytes: number;
}

const DTYPE_NAMES = { float32: 'F32', bfloat16: 'BF16', float16: 'F16' } as const;

/** Converts elements (float32 values or bf16 bits) to a file dtype. */
function toFileDtype(data: ElementArray, from: HfTensor['dtype'], to: HfFileDtype): Float32Array | Uint16Array {
  if (from === 'float32') {
    if (to === 'F32') return data as Float32Array;
    return to === 'BF16' ? f32ToBf16(data as Float32Array) : f32ToF16(data as Float32Array);
  }
  if (to === 'BF16') return data as Uint16Array;
  return to === 'F32' ? bf16ToF32(data as Uint16Array) : bf16ToF16(data as Uint16Array);
}

/** Splits our tensor into its HF sources' layouts (index i of the recipe's sources). */
function toHfLayout(p: PlannedTensor, t: HfTensor, index: number): ElementArray {
  const r = p.recipe;
  const data = t.data as ElementArray;
  const like = (n: number): ElementArray => (data instanceof Float32Array ? new Float32Array(n) : new Uint16Array(n));
  switch (r.op) {
    case 'copy':
      return data;
    case 'concat': {
      let at = 0;
      for (let i = 0; i < index; i++) at += r.srcs[i].shape.reduce((a, b) => a * b, 1);
      return data.subarray(at, at + r.srcs[index].shape.reduce((a, b) => a * b, 1));
    }
    case 'expertsGateUpBias': {
      const [E, twoF] = r.src.shape;
      const out = like(data.length);
      permuteRowsInto(data, out, E, twoF, interleaveMap(twoF));
      return out;
    }
    case 'expertsGateUp': {
      const [E, D, twoF] = r.src.shape; // ours [E, 2F, D] → [E, D, 2F] interleaved
      const out = like(data.length);
      transposeInto(data, out, E, twoF, D, interleaveMap(twoF));
      return out;
    }
    case 'expertsDown': {
      const [E, F, D] = r.src.shape; // ours [E, D, F] → [E, F, D]
      const out = like(data.length);
      transposeInto(data, out, E, D, F);
      return out;
    }
    default:
      throw new HfTensorError(p.name, `internal: cannot save recipe ${r.op}`);
  }
}

/** Writes an HF model folder at `dir` (see the module notes). */
export async function saveHf(dir: string, options: SaveHfOptions): Promise<SaveHfResult> {
  const dtype = options.dtype ?? 'auto';
  if (!['auto', 'float32', 'bfloat16', 'float16'].includes(dtype))
    throw new RangeError(`dtype must be 'auto', 'float32', 'bfloat16' or 'float16', got ${JSON.stringify(dtype)}`);
  const maxShard = options.maxShardBytes ?? 5e9;
  if (!(Number.isFinite(maxShard) && maxShard > 0))
    throw new RangeError(`maxShardBytes must be a positive number, got ${maxShard}`);
  const { architecture, modelConfig } = parseHfConfig(options.hfConfig);
  const plan = planTensors(architecture, modelConfig, () => false);
  await checkTarget(dir);

  const get =
    options.tensors instanceof Map
      ? (name: string) => (options.tensors as ReadonlyMap<string, HfTensor>).get(name)
      : (options.tensors as (name: string) => HfTensor | Promise<HfTensor>);
  let cached: { name: string; t: HfTensor } | null = null;
  const ours = async (p: PlannedTensor): Promise<HfTensor> => {
    if (cached?.name === p.name) return cached.t;
    const t = await get(p.name);
    if (t === undefined) throw new HfTensorError(p.name, 'is missing from the tensors to save');
    const okType =
      t.dtype === 'float32' ? t.data instanceof Float32Array : t.dtype === 'bfloat16' && t.data instanceof Uint16Array;
    if (!okType)
      throw new HfTensorError(
        p.name,
        `dtype ${JSON.stringify(t.dtype)} does not match its data (float32: Float32Array, bfloat16: Uint16Array)`,
      );
    if (
      t.shape.length !== p.shape.length ||
      t.shape.some((d, i) => d !== p.shape[i]) ||
      t.data.length !== p.shape.reduce((a, b) => a * b, 1)
    ) {
      throw new HfTensorError(
        p.name,
        `has shape [${t.shape.join(', ')}] (${t.data.length} elements), the config needs [${p.shape.join(', ')}]`,
      );
    }
    cached = { name: p.name, t };
    return t;
  };
  if (options.tensors instanceof Map) {
    const known = new Set(plan.map((p) => p.name));
    const extra = [...options.tensors.keys()].filter((n) => !known.has(n));
    if (extra.length > 0) throw new HfTensorError(extra[0], 'is not a parameter of this config (unexpected)');
  }

  const entries: (SafetensorsStreamEntry & { bytesLength: number })[] = [];
  for (const p of plan) {
    const srcs = recipeSources(p.recipe);
    srcs.forEach((s, i) => {
      const fromMap = options.tensors instanceof Map ? options.tensors.get(p.name) : undefined;
      const fileDtype: HfFileDtype =
        dtype !== 'auto'
          ? DTYPE_NAMES[dtype]
          : (options.fileDtypes?.get(p.name) ?? (fromMap?.dtype === 'bfloat16' ? 'BF16' : 'F32'));
      entries.push({
        name: s.hf,
        dtype: fileDtype,
        shape: s.shape,
        bytesLength: safetensorsByteLength(fileDtype, s.shape),
        bytes: async () => {
          const t = await ours(p);
          return littleEndianBytes(toFileDtype(toHfLayout(p, t, i), t.dtype, fileDtype));
        },
      });
    });
  }

  const shards: (typeof entries)[] = [[]];
  let size = 0;
  for (const e of entries) {
    if (shards[shards.length - 1].length > 0 && size + e.bytesLength > maxShard) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1].push(e);
    size += e.bytesLength;
  }
  const n = shards.length;
  const shardName = (i: number): string =>
    n === 1 ? SINGLE_FILE : `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`;

  const config: Record<string, unknown> = structuredClone(options.hfConfig);
  delete config.quantization_config;
  if (dtype !== 'auto') {
    config.torch_dtype = dtype;
    if ('dtype' in config) config.dtype = dtype;
  }

  await mkdir(dirname(dir), { recursive: true }); // the folder's parents are created as needed
  const tmp = await mkdtemp(join(dirname(dir), `.${basename(dir)}.tmp-`));
  try {
    const files: string[] = [];
    const write = async (name: string, text: string): Promise<void> => {
      await writeFile(join(tmp, name), text);
      files.push(name);
    };
    await write('config.json', `${JSON.stringify(config, null, 2)}\n`);
    if (options.generationConfig)
      await write('generation_config.json', `${JSON.stringify(options.generationConfig, null, 2)}\n`);
    const copyNames = [
      ...TOKENIZER_FILES,
      ...(options.generationConfig === undefined ? ['generation_config.json'] : []),
    ];
    if (options.copyFrom !== undefined) {
      for (const f of copyNames) {
        try {
          await copyFile(join(options.copyFrom, f), join(tmp, f));
          files.push(f);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
        }
      }
    }
    const weightMap: Record<string, string> = {};
    let tensorBytes = 0;
    for (let i = 0; i < n; i++) {
      await writeSafetensorsStream(join(tmp, shardName(i)), shards[i], { format: 'pt' });
      files.push(shardName(i));
      for (const e of shards[i]) {
        weightMap[e.name] = shardName(i);
        tensorBytes += e.bytesLength;
      }
    }
    if (n > 1) {
      const sorted = Object.fromEntries(
        Object.keys(weightMap)
          .sort()
          .map((k) => [k, weightMap[k]]),
      );
      await write(
        INDEX_FILE,
        `${JSON.stringify({ metadata: { total_size: tensorBytes }, weight_map: sorted }, null, 2)}\n`,
      );
    }
    await replaceDir(tmp, dir);
    return { dir, files, tensorBytes };
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e;
  }
}

/** An existing target must be an empty folder or a model folder (it will be replaced whole). */
async function checkTarget(dir: string): Promise<void> {
  let s;
  try {
    s = await stat(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (!s.isDirectory()) throw new Error(`${dir} exists and is not a folder`);
  const names = await readdir(dir);
  if (names.length > 0 && !names.includes('config.json'))
    throw new Error(`${dir} is a non-empty folder without a config.json; refusing to replace it`);
}

/** Moves `tmp` to `dir`, replacing an existing `dir` (renamed aside first, removed after). */
async function replaceDir(tmp: string, dir: string): Promise<void> {
  const old = `${tmp}.old`;
  let moved = false;
  try {
    await rename(dir, old);
    moved = true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  try {
    await rename(tmp, dir);
  } catch (e) {
    if (moved) await rename(old, dir);
    throw e;
  }
  if (moved) await rm(old, { recursive: true, force: true });
}
