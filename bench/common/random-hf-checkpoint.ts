/**
 * Random Hugging Face checkpoints for the benchmarks: a config.json of a given architecture and
 * shape, generation_config.json and model.safetensors with every tensor the loader expects
 * (names and shapes from the loader's own tensor plan), written one tensor at a time so a
 * checkpoint of a few GB never sits in memory whole. Matrices are uniform with the standard
 * deviation of `initializer_range`, norm gains near 1; floats are written as BF16. gpt-oss
 * experts can be written as MXFP4 (random nibbles, scales near 2^0), as its releases are.
 * Not a test fixture: the values only need to be finite and of the right scale.
 * @module
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { parseHfConfig } from '../../lib/model/hf/config.js';
import { f32ToBf16 } from '../../lib/model/hf/numeric.js';
import { planTensors, recipeSources, type HfSource } from '../../lib/model/hf/tensor-plan.js';
import { type SafetensorsStreamEntry, writeSafetensorsStream } from '../../lib/model/safetensors-stream.js';
import { mulberry32 } from '../../lib/util/random.js';

/** What {@link writeRandomHfCheckpoint} wrote. */
export interface RandomCheckpoint {
  dir: string;
  /** Bytes of tensor data in model.safetensors. */
  tensorBytes: number;
  /** Bytes of the MXFP4 expert tensors (blocks + scales), 0 without them. */
  mxfp4Bytes: number;
  /** Elements of all parameters (MXFP4 counted as the values they decode to). */
  parameters: number;
}

/** A seeded stream of uniform numbers in [-1, 1) (the project's mulberry32). */
function uniform(seed: number): () => number {
  const next = mulberry32(seed);
  return () => 2 * next() - 1;
}

const CHUNK = 1 << 20;

/**
 * BF16 bytes of n values `offset + scale * U[-1, 1)`, made in chunks; `tile`: the first chunk
 * repeated (shifted by a seeded offset), for checkpoints of many GB where drawing every value
 * would take longer than the measurement.
 */
function bf16Values(n: number, offset: number, scale: number, seed: number, tile = false): Uint8Array {
  const out = new Uint16Array(n);
  const next = uniform(seed);
  const f = new Float32Array(Math.min(n, CHUNK));
  for (let at = 0; at < n; at += CHUNK) {
    const m = Math.min(CHUNK, n - at);
    if (tile && at > 0) {
      const shift = Math.floor((next() + 1) * 0.5 * (CHUNK - m));
      out.copyWithin(at, shift, shift + m);
      continue;
    }
    for (let i = 0; i < m; i++) f[i] = offset + scale * next();
    f32ToBf16(f.subarray(0, m), out.subarray(at, at + m));
  }
  return new Uint8Array(out.buffer);
}

/** Random bytes (MXFP4 blocks: any nibble) or scales `127 + U{-2..2}` (powers of two near 1); `tile` as for bf16Values. */
function u8Values(n: number, scales: boolean, seed: number, tile = false): Uint8Array {
  const out = new Uint8Array(n);
  const next = uniform(seed);
  const first = tile ? Math.min(n, CHUNK) : n;
  for (let i = 0; i < first; i++) out[i] = scales ? 127 + Math.round(2 * next()) : Math.floor((next() + 1) * 128) & 255;
  for (let at = first; at < n; at += CHUNK) {
    const m = Math.min(CHUNK, n - at);
    const shift = Math.floor((next() + 1) * 0.5 * (CHUNK - m));
    out.copyWithin(at, shift, shift + m);
  }
  return out;
}

const numel = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/**
 * Writes `config` (a config.json object; `architectures[0]` one the loader supports) with random
 * BF16 weights (MXFP4 experts when `mxfp4`) into `dir`. `tile`: each tensor repeats its first
 * random chunk of 2^20 elements (shifted), which keeps a checkpoint of many GB fast to write.
 */
export async function writeRandomHfCheckpoint(
  dir: string,
  config: Record<string, unknown>,
  options: { mxfp4?: boolean; seed?: number; tile?: boolean } = {},
): Promise<RandomCheckpoint> {
  mkdirSync(dir, { recursive: true });
  const mxfp4 = options.mxfp4 ?? false;
  const cfg = mxfp4
    ? {
        ...config,
        quantization_config: {
          quant_method: 'mxfp4',
          modules_to_not_convert: [
            'model.layers.*.self_attn',
            'model.layers.*.mlp.router',
            'model.embed_tokens',
            'lm_head',
          ],
        },
      }
    : config;
  const { architecture, modelConfig } = parseHfConfig(cfg);
  const plan = planTensors(architecture, modelConfig, (name) => mxfp4 && /_blocks$/.test(name));
  const std = modelConfig.initStd;
  const sources: HfSource[] = plan.flatMap((p) => recipeSources(p.recipe));
  let seed = options.seed ?? 1;
  let tensorBytes = 0;
  let mxfp4Bytes = 0;
  const entries: SafetensorsStreamEntry[] = sources.map((s) => {
    const n = numel(s.shape);
    const mySeed = seed++ * 2654435761;
    const vector = s.shape.length === 1;
    const bytes = s.kind === 'u8' ? n : 2 * n;
    tensorBytes += bytes;
    if (s.kind === 'u8') mxfp4Bytes += bytes;
    const isNorm = /norm\.weight$/.test(s.hf);
    return {
      name: s.hf,
      dtype: s.kind === 'u8' ? 'U8' : 'BF16',
      shape: s.shape,
      bytes: () =>
        s.kind === 'u8'
          ? u8Values(n, /_scales$/.test(s.hf), mySeed, options.tile)
          : bf16Values(n, isNorm ? 1 : 0, isNorm ? 0.1 : vector ? std : std * Math.sqrt(3), mySeed, options.tile),
    };
  });
  writeFileSync(join(dir, 'config.json'), `${JSON.stringify(cfg, null, 2)}\n`);
  writeFileSync(
    join(dir, 'generation_config.json'),
    `${JSON.stringify({ eos_token_id: [Number(config.eos_token_id ?? 0)] }, null, 2)}\n`,
  );
  await writeSafetensorsStream(join(dir, 'model.safetensors'), entries, { format: 'pt' });
  return { dir, tensorBytes, mxfp4Bytes, parameters: plan.reduce((n, p) => n + numel(p.shape), 0) };
}

/** config.json of a Qwen3 model of the given shape (Qwen3-0.6B's other fields). */
export function qwen3Config(shape: {
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  vocab: number;
  context?: number;
}): Record<string, unknown> {
  return {
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    hidden_size: shape.hidden,
    num_hidden_layers: shape.layers,
    num_attention_heads: shape.heads,
    num_key_value_heads: shape.kvHeads,
    head_dim: shape.headDim,
    intermediate_size: shape.intermediate,
    vocab_size: shape.vocab,
    max_position_embeddings: shape.context ?? 40960,
    rope_theta: 1000000,
    rms_norm_eps: 1e-6,
    tie_word_embeddings: true,
    hidden_act: 'silu',
    attention_bias: false,
    attention_dropout: 0,
    use_sliding_window: false,
    sliding_window: null,
    max_window_layers: shape.layers,
    initializer_range: 0.02,
    torch_dtype: 'bfloat16',
    bos_token_id: Math.max(0, shape.vocab - 2),
    eos_token_id: Math.max(0, shape.vocab - 1),
  };
}

/** A gpt-oss shape (its config.json's sizes). */
export interface GptOssShape {
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  vocab: number;
  experts: number;
  topK: number;
}

/** config.json of a gpt-oss model of the given shape (gpt-oss-20b's other fields). */
export function gptOssConfig(shape: GptOssShape): Record<string, unknown> {
  return {
    architectures: ['GptOssForCausalLM'],
    model_type: 'gpt_oss',
    hidden_size: shape.hidden,
    num_hidden_layers: shape.layers,
    num_attention_heads: shape.heads,
    num_key_value_heads: shape.kvHeads,
    head_dim: shape.headDim,
    intermediate_size: shape.intermediate,
    vocab_size: shape.vocab,
    num_local_experts: shape.experts,
    num_experts_per_tok: shape.topK,
    experts_per_token: shape.topK,
    max_position_embeddings: 131072,
    rope_theta: 150000,
    rope_scaling: {
      beta_fast: 32.0,
      beta_slow: 1.0,
      factor: 32.0,
      original_max_position_embeddings: 4096,
      rope_type: 'yarn',
      truncate: false,
    },
    sliding_window: 128,
    layer_types: Array.from({ length: shape.layers }, (_, i) => (i % 2 === 0 ? 'sliding_attention' : 'full_attention')),
    rms_norm_eps: 1e-5,
    attention_bias: true,
    swiglu_limit: 7.0,
    tie_word_embeddings: false,
    hidden_act: 'silu',
    initializer_range: 0.02,
    torch_dtype: 'bfloat16',
    eos_token_id: Math.max(0, shape.vocab - 1),
  };
}
