// Small Hugging Face model folders for the loader tests, built tensor by tensor with the HF names
// and shapes of each architecture written out here (independently of lib/model/hf/tensor-plan.ts),
// in a chosen file dtype, single file or sharded.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { type SafeTensor, encodeSafetensors, writeFileAtomic } from '../../../../lib/model/safetensors.js';
import { rng } from '../../fixtures/reference.js';

export type FileDtype = 'F32' | 'BF16' | 'F16';

/** Sizes of the tiny models. */
export const DIMS = { layers: 2, D: 64, H: 4, KV: 2, hd: 16, F: 32, V: 50, E: 4, K: 2 };

/** float32 value of bf16 bits (the top half of a float32). */
export function bf16Value(bits: number): number {
  return new Float32Array(new Uint32Array([(bits << 16) >>> 0]).buffer)[0];
}

/** Value of F16 bits from the definition. */
export function f16Value(bits: number): number {
  const s = bits & 0x8000 ? -1 : 1;
  const e = (bits >> 10) & 31;
  const m = bits & 1023;
  return e === 0 ? s * m * 2 ** -24 : s * (1 + m / 1024) * 2 ** (e - 15);
}

/** A tensor of random values stored as `dtype`, with the float values it holds. */
export function randomTensor(shape: number[], dtype: FileDtype, seed: number): { t: SafeTensor; values: Float64Array } {
  const n = shape.reduce((a, b) => a * b, 1);
  const r = rng(seed);
  const values = new Float64Array(n);
  if (dtype === 'F32') {
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      data[i] = (r() - 0.5) * 2;
      values[i] = data[i];
    }
    return { t: { dtype, shape, data }, values };
  }
  const data = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    if (dtype === 'BF16') {
      // truncate a random float32 to its top 16 bits: a valid bf16 value
      const f = new Float32Array([(r() - 0.5) * 2]);
      data[i] = new Uint32Array(f.buffer)[0] >>> 16;
      values[i] = bf16Value(data[i]);
    } else {
      // F16 patterns with exponents 5..16 (values about 1e-3..4), all mantissa bits used
      const sign = r() < 0.5 ? 0x8000 : 0;
      data[i] = sign | ((5 + Math.floor(r() * 12)) << 10) | Math.floor(r() * 1024);
      values[i] = f16Value(data[i]);
    }
  }
  return { t: { dtype, shape, data }, values };
}

type Arch = 'GptOssForCausalLM' | 'Qwen3ForCausalLM' | 'Qwen2ForCausalLM' | 'LlamaForCausalLM';

/** A config.json of the tiny dims. */
export function tinyConfig(arch: Arch, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const { layers, D, H, KV, hd, F, V, E, K } = DIMS;
  const common = { architectures: [arch], hidden_size: D, num_attention_heads: H, num_key_value_heads: KV, head_dim: hd, intermediate_size: F, vocab_size: V, num_hidden_layers: layers, max_position_embeddings: 256, rms_norm_eps: 1e-5 };
  switch (arch) {
    case 'GptOssForCausalLM':
      return { ...common, num_local_experts: E, num_experts_per_tok: K, sliding_window: 8, layer_types: ['sliding_attention', 'full_attention'], rope_theta: 150000, rope_scaling: { rope_type: 'yarn', factor: 4, beta_fast: 32, beta_slow: 1, truncate: false, original_max_position_embeddings: 64 }, ...extra };
    case 'Qwen3ForCausalLM':
      return { ...common, tie_word_embeddings: true, rope_theta: 1e6, ...extra };
    case 'Qwen2ForCausalLM':
      return { ...common, rope_theta: 1e6, ...extra };
    default:
      return { ...common, attention_bias: true, mlp_bias: true, rope_theta: 5e5, rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 }, ...extra };
  }
}

/** HF tensor names and shapes of a tiny `arch` checkpoint (experts in the bf16 form). */
export function hfShapes(arch: Arch, options: { tied?: boolean } = {}): [string, number[]][] {
  const { layers, D, H, KV, hd, F, V, E } = DIMS;
  const out: [string, number[]][] = [['model.embed_tokens.weight', [V, D]]];
  const attnBias = arch !== 'Qwen3ForCausalLM'; // tiny Qwen3 has attention_bias false; Llama fixture sets it true
  for (let i = 0; i < layers; i++) {
    const p = `model.layers.${i}.`;
    out.push([`${p}input_layernorm.weight`, [D]]);
    out.push([`${p}self_attn.q_proj.weight`, [H * hd, D]], [`${p}self_attn.k_proj.weight`, [KV * hd, D]], [`${p}self_attn.v_proj.weight`, [KV * hd, D]], [`${p}self_attn.o_proj.weight`, [D, H * hd]]);
    if (attnBias) out.push([`${p}self_attn.q_proj.bias`, [H * hd]], [`${p}self_attn.k_proj.bias`, [KV * hd]], [`${p}self_attn.v_proj.bias`, [KV * hd]]);
    if (attnBias && arch !== 'Qwen2ForCausalLM') out.push([`${p}self_attn.o_proj.bias`, [D]]);
    if (arch === 'Qwen3ForCausalLM') out.push([`${p}self_attn.q_norm.weight`, [hd]], [`${p}self_attn.k_norm.weight`, [hd]]);
    out.push([`${p}post_attention_layernorm.weight`, [D]]);
    if (arch === 'GptOssForCausalLM') {
      out.push([`${p}self_attn.sinks`, [H]], [`${p}mlp.router.weight`, [E, D]], [`${p}mlp.router.bias`, [E]]);
      out.push([`${p}mlp.experts.gate_up_proj`, [E, D, 2 * F]], [`${p}mlp.experts.gate_up_proj_bias`, [E, 2 * F]], [`${p}mlp.experts.down_proj`, [E, F, D]], [`${p}mlp.experts.down_proj_bias`, [E, D]]);
    } else {
      out.push([`${p}mlp.gate_proj.weight`, [F, D]], [`${p}mlp.up_proj.weight`, [F, D]], [`${p}mlp.down_proj.weight`, [D, F]]);
      if (arch === 'LlamaForCausalLM') out.push([`${p}mlp.gate_proj.bias`, [F]], [`${p}mlp.up_proj.bias`, [F]], [`${p}mlp.down_proj.bias`, [D]]);
    }
  }
  out.push(['model.norm.weight', [D]]);
  if (!(options.tied ?? arch === 'Qwen3ForCausalLM')) out.push(['lm_head.weight', [V, D]]);
  return out;
}

/** Random tensors for `shapes` stored as `dtype`; values keep the exact stored values. */
export function randomTensors(shapes: [string, number[]][], dtype: FileDtype, seed: number): { tensors: Map<string, SafeTensor>; values: Map<string, Float64Array> } {
  const tensors = new Map<string, SafeTensor>();
  const values = new Map<string, Float64Array>();
  shapes.forEach(([name, shape], i) => {
    const r = randomTensor(shape, dtype, seed * 1000 + i);
    tensors.set(name, r.t);
    values.set(name, r.values);
  });
  return { tensors, values };
}

/** A fresh temporary folder. */
export function tempDir(prefix = 'hf-loader-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Writes a model folder: config.json (+ generation_config.json), weights in one file or in shards with an index. */
export function writeHfFolder(
  dir: string,
  config: Record<string, unknown>,
  tensors: Map<string, SafeTensor>,
  options: { shards?: string[][]; generationConfig?: Record<string, unknown>; files?: Record<string, string>; index?: Record<string, unknown> } = {},
): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  if (options.generationConfig) writeFileSync(join(dir, 'generation_config.json'), JSON.stringify(options.generationConfig));
  for (const [name, text] of Object.entries(options.files ?? {})) writeFileSync(join(dir, name), text);
  if (options.shards === undefined) {
    writeFileAtomic(join(dir, 'model.safetensors'), encodeSafetensors(tensors, { format: 'pt' }));
    return dir;
  }
  const weightMap: Record<string, string> = {};
  options.shards.forEach((names, i) => {
    const file = `model-${String(i + 1).padStart(5, '0')}-of-${String(options.shards!.length).padStart(5, '0')}.safetensors`;
    writeFileAtomic(join(dir, file), encodeSafetensors(names.map((n) => [n, tensors.get(n)!] as [string, SafeTensor]), { format: 'pt' }));
    for (const n of names) weightMap[n] = file;
  });
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify(options.index ?? { metadata: { total_size: 0 }, weight_map: weightMap }));
  return dir;
}
