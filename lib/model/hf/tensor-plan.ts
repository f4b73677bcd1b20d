/**
 * Which Hugging Face tensors make each of our parameters (MODEL_SPEC §2, §6), with their expected
 * shapes and the layout change between them. Our names: `embed.weight`; per layer
 * `layers.<i>.attn_norm.weight`, `attn.{q,k,v,o}.weight` (+ `.bias`), `attn.sinks`,
 * `attn.{q,k}_norm.weight`, `mlp_norm.weight`, dense `mlp.gate_up.weight` (gate rows, then up
 * rows; + bias) and `mlp.down.weight` (+ bias), or MoE `mlp.router.{weight,bias}`,
 * `mlp.experts.gate_up.{weight,bias}` ([E, 2F, D], [E, 2F]: per expert F gate rows then F up
 * rows), `mlp.experts.down.{weight,bias}` ([E, D, F], [E, D]); `norm.weight`; `lm_head.weight`.
 * HF names (all four): `model.embed_tokens.weight`, `model.layers.<i>.input_layernorm.weight`,
 * `self_attn.{q,k,v,o}_proj.{weight,bias}`, `post_attention_layernorm.weight`, `model.norm.weight`,
 * `lm_head.weight` (absent when tied); Qwen3 `self_attn.{q,k}_norm.weight`; dense
 * `mlp.{gate,up,down}_proj.{weight,bias}`; gpt-oss `self_attn.sinks`, `mlp.router.{weight,bias}`,
 * `mlp.experts.{gate_up_proj [E, D, 2F] (gate = even columns, up = odd), gate_up_proj_bias [E, 2F]
 * (interleaved alike), down_proj [E, F, D], down_proj_bias [E, D]}` or, for MXFP4,
 * `mlp.experts.{gate_up_proj,down_proj}_{blocks,scales}` (see mxfp4.ts).
 * @module
 */
import type { HfArchitecture } from './config-schema.js';
import { type ModelConfig, ModelConfigError } from '../config.js';

/** One source tensor in the checkpoint: its HF name, the shape the config implies and its element kind. */
export interface HfSource {
  hf: string;
  shape: number[];
  /** `'float'`: BF16, F16 or F32; `'u8'`: MXFP4 blocks and scales. */
  kind: 'float' | 'u8';
}

/** How a parameter is built from its sources (and, for saving, split back into them). */
export type TensorRecipe =
  | { op: 'copy'; src: HfSource }
  /** Rows of the sources stacked (Qwen/Llama gate_proj then up_proj, weights or biases). */
  | { op: 'concat'; srcs: HfSource[] }
  /** gpt-oss [E, D, 2F] with interleaved gate/up columns → ours [E, 2F, D] (transposed, gate rows then up rows). */
  | { op: 'expertsGateUp'; src: HfSource }
  /** gpt-oss [E, 2F] interleaved → ours [E, 2F] (gate half, then up half). */
  | { op: 'expertsGateUpBias'; src: HfSource }
  /** gpt-oss [E, F, D] → ours [E, D, F]. */
  | { op: 'expertsDown'; src: HfSource }
  /** MXFP4 [E, 2F, D/32, 16] + [E, 2F, D/32] → ours [E, 2F, D] (rows de-interleaved). */
  | { op: 'mxfp4GateUp'; blocks: HfSource; scales: HfSource }
  /** MXFP4 [E, D, F/32, 16] + [E, D, F/32] → ours [E, D, F]. */
  | { op: 'mxfp4Down'; blocks: HfSource; scales: HfSource };

/** `'matrix'`: kept in bfloat16 when asked; `'vector'` (norms, biases, sinks, router): always float32. */
export type TensorRole = 'matrix' | 'vector';

/** One of our parameters and where it comes from. */
export interface PlannedTensor {
  name: string;
  shape: number[];
  role: TensorRole;
  recipe: TensorRecipe;
}

/** The HF sources of a recipe. */
export function recipeSources(r: TensorRecipe): HfSource[] {
  switch (r.op) {
    case 'concat':
      return r.srcs;
    case 'mxfp4GateUp':
    case 'mxfp4Down':
      return [r.blocks, r.scales];
    default:
      return [r.src];
  }
}

/** HF names the loader skips when present: derived buffers, not parameters. */
export function isIgnorableHfTensor(name: string): boolean {
  return /^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$/.test(name);
}

/**
 * Our parameters of `config` with their HF sources. `hasTensor` tells which names the checkpoint
 * has: gpt-oss experts come from `*_blocks`/`*_scales` where the checkpoint has blocks, else from
 * the bf16 form (saving passes `() => false`: always the bf16 form).
 */
export function planTensors(
  arch: HfArchitecture,
  config: ModelConfig,
  hasTensor: (hfName: string) => boolean,
): PlannedTensor[] {
  if (config.tokenShift)
    throw new ModelConfigError(
      'tokenShift',
      `is true, but ${arch} has no token shift (it belongs to the built-in model only)`,
    );
  const { width: D, vocab: V, heads: H, kvHeads: KV, headDim: hd, ffn: F, experts: E } = config;
  const plan: PlannedTensor[] = [];
  const src = (hf: string, shape: number[], kind: 'float' | 'u8' = 'float'): HfSource => ({ hf, shape, kind });
  const copy = (name: string, hf: string, shape: number[], role: TensorRole): void => {
    plan.push({ name, shape, role, recipe: { op: 'copy', src: src(hf, shape) } });
  };
  copy('embed.weight', 'model.embed_tokens.weight', [V, D], 'matrix');
  for (let i = 0; i < config.layers; i++) {
    const p = `layers.${i}.`;
    const h = `model.layers.${i}.`;
    copy(`${p}attn_norm.weight`, `${h}input_layernorm.weight`, [D], 'vector');
    const proj = (ours: string, hf: string, rows: number, cols: number, bias: boolean): void => {
      copy(`${p}attn.${ours}.weight`, `${h}self_attn.${hf}_proj.weight`, [rows, cols], 'matrix');
      if (bias) copy(`${p}attn.${ours}.bias`, `${h}self_attn.${hf}_proj.bias`, [rows], 'vector');
    };
    proj('q', 'q', H * hd, D, config.qkvBias);
    proj('k', 'k', KV * hd, D, config.qkvBias);
    proj('v', 'v', KV * hd, D, config.qkvBias);
    proj('o', 'o', D, H * hd, config.oBias);
    if (config.sinks) copy(`${p}attn.sinks`, `${h}self_attn.sinks`, [H], 'vector');
    if (config.qkNorm) {
      copy(`${p}attn.q_norm.weight`, `${h}self_attn.q_norm.weight`, [hd], 'vector');
      copy(`${p}attn.k_norm.weight`, `${h}self_attn.k_norm.weight`, [hd], 'vector');
    }
    copy(`${p}mlp_norm.weight`, `${h}post_attention_layernorm.weight`, [D], 'vector');
    if (E > 0) {
      const m = `${h}mlp.`;
      copy(`${p}mlp.router.weight`, `${m}router.weight`, [E, D], 'vector');
      if (config.mlpBias) copy(`${p}mlp.router.bias`, `${m}router.bias`, [E], 'vector');
      const x = `${m}experts.`;
      const gateUp: TensorRecipe = hasTensor(`${x}gate_up_proj_blocks`)
        ? {
            op: 'mxfp4GateUp',
            blocks: src(`${x}gate_up_proj_blocks`, [E, 2 * F, D / 32, 16], 'u8'),
            scales: src(`${x}gate_up_proj_scales`, [E, 2 * F, D / 32], 'u8'),
          }
        : { op: 'expertsGateUp', src: src(`${x}gate_up_proj`, [E, D, 2 * F]) };
      plan.push({ name: `${p}mlp.experts.gate_up.weight`, shape: [E, 2 * F, D], role: 'matrix', recipe: gateUp });
      if (config.mlpBias)
        plan.push({
          name: `${p}mlp.experts.gate_up.bias`,
          shape: [E, 2 * F],
          role: 'vector',
          recipe: { op: 'expertsGateUpBias', src: src(`${x}gate_up_proj_bias`, [E, 2 * F]) },
        });
      const down: TensorRecipe = hasTensor(`${x}down_proj_blocks`)
        ? {
            op: 'mxfp4Down',
            blocks: src(`${x}down_proj_blocks`, [E, D, F / 32, 16], 'u8'),
            scales: src(`${x}down_proj_scales`, [E, D, F / 32], 'u8'),
          }
        : { op: 'expertsDown', src: src(`${x}down_proj`, [E, F, D]) };
      plan.push({ name: `${p}mlp.experts.down.weight`, shape: [E, D, F], role: 'matrix', recipe: down });
      if (config.mlpBias) copy(`${p}mlp.experts.down.bias`, `${x}down_proj_bias`, [E, D], 'vector');
    } else {
      const m = `${h}mlp.`;
      plan.push({
        name: `${p}mlp.gate_up.weight`,
        shape: [2 * F, D],
        role: 'matrix',
        recipe: { op: 'concat', srcs: [src(`${m}gate_proj.weight`, [F, D]), src(`${m}up_proj.weight`, [F, D])] },
      });
      if (config.mlpBias) {
        plan.push({
          name: `${p}mlp.gate_up.bias`,
          shape: [2 * F],
          role: 'vector',
          recipe: { op: 'concat', srcs: [src(`${m}gate_proj.bias`, [F]), src(`${m}up_proj.bias`, [F])] },
        });
      }
      copy(`${p}mlp.down.weight`, `${m}down_proj.weight`, [D, F], 'matrix');
      if (config.mlpBias) copy(`${p}mlp.down.bias`, `${m}down_proj.bias`, [D], 'vector');
    }
  }
  copy('norm.weight', 'model.norm.weight', [D], 'vector');
  if (!config.tieEmbeddings) copy('lm_head.weight', 'lm_head.weight', [V, D], 'matrix');
  return plan;
}
