/**
 * Where each LoRA adapter of a config lives: our parameter names, the projection it adapts
 * (our weight and its rows), its shapes, and PEFT's module path for it.
 * @module
 */
import type { ModelConfig } from '../config.js';
import { LORA_EXPERT_TARGETS, LORA_TARGETS, type LoraTarget } from './settings.js';

/** One adapter (one target of one layer). */
export interface LoraAdapterSlot {
  /** The layer (0-based). */
  layer: number;
  /** The adapted projection, PEFT's module name. */
  target: LoraTarget;
  /** Our name of A [rank, in], e.g. `layers.0.attn.q.lora_a`. */
  aName: string;
  /** Our name of B [out, rank]. */
  bName: string;
  /** Input size of the projection. */
  in: number;
  /** Output size of the projection (rows of the adapted part of the weight). */
  out: number;
  /** Our weight the adapter adds to, e.g. `layers.0.mlp.gate_up.weight`. */
  weight: string;
  /** First row of the weight it adds to (the up half of gate_up starts at ffn). */
  rowOffset: number;
  /** The module's path in a Hugging Face model, e.g. `model.layers.0.self_attn.q_proj` (`model.layers.0.mlp.experts` for the expert targets). */
  module: string;
  /** Experts adapted, each with its own A [rank, in] and B [out, rank] (A [E, rank, in], B [E, out, rank]); 0 for a single projection. */
  experts: number;
}

const OURS: Record<LoraTarget, { module: string; weight: string; hf: string }> = {
  q_proj: { module: 'attn.q', weight: 'attn.q.weight', hf: 'self_attn.q_proj' },
  k_proj: { module: 'attn.k', weight: 'attn.k.weight', hf: 'self_attn.k_proj' },
  v_proj: { module: 'attn.v', weight: 'attn.v.weight', hf: 'self_attn.v_proj' },
  o_proj: { module: 'attn.o', weight: 'attn.o.weight', hf: 'self_attn.o_proj' },
  gate_proj: { module: 'mlp.gate', weight: 'mlp.gate_up.weight', hf: 'mlp.gate_proj' },
  up_proj: { module: 'mlp.up', weight: 'mlp.gate_up.weight', hf: 'mlp.up_proj' },
  down_proj: { module: 'mlp.down', weight: 'mlp.down.weight', hf: 'mlp.down_proj' },
  'experts.gate_up_proj': { module: 'mlp.experts.gate_up', weight: 'mlp.experts.gate_up.weight', hf: 'mlp.experts' },
  'experts.down_proj': { module: 'mlp.experts.down', weight: 'mlp.experts.down.weight', hf: 'mlp.experts' },
};

/** Input and output sizes of a target's projection under `config` (of one expert for the expert targets; gate_up's out is 2 ffn). */
export function loraTargetShape(
  config: Pick<ModelConfig, 'width' | 'heads' | 'kvHeads' | 'headDim' | 'ffn'>,
  target: LoraTarget,
): { in: number; out: number } {
  const q = config.heads * config.headDim;
  const kv = config.kvHeads * config.headDim;
  switch (target) {
    case 'q_proj':
      return { in: config.width, out: q };
    case 'k_proj':
    case 'v_proj':
      return { in: config.width, out: kv };
    case 'o_proj':
      return { in: q, out: config.width };
    case 'gate_proj':
    case 'up_proj':
      return { in: config.width, out: config.ffn };
    case 'down_proj':
    case 'experts.down_proj':
      return { in: config.ffn, out: config.width };
    case 'experts.gate_up_proj':
      return { in: config.width, out: 2 * config.ffn };
  }
}

/** The adapters of a config with LoRA, layer by layer and in {@link LORA_TARGETS} order (the layout's order); [] without. */
export function loraAdapterSlots(config: ModelConfig): LoraAdapterSlot[] {
  const lora = config.lora;
  if (lora === null) return [];
  const slots: LoraAdapterSlot[] = [];
  for (let layer = 0; layer < config.layers; layer++) {
    for (const target of LORA_TARGETS) {
      if (!lora.targets.includes(target)) continue;
      const o = OURS[target];
      const p = `layers.${layer}.`;
      slots.push({
        layer,
        target,
        aName: `${p}${o.module}.lora_a`,
        bName: `${p}${o.module}.lora_b`,
        ...loraTargetShape(config, target),
        weight: `${p}${o.weight}`,
        rowOffset: target === 'up_proj' ? config.ffn : 0,
        module: `model.layers.${layer}.${o.hf}`,
        experts: LORA_EXPERT_TARGETS.includes(target) ? config.experts : 0,
      });
    }
  }
  return slots;
}

/** True for the names of LoRA adapter parameters (`….lora_a`, `….lora_b`): a loader keeps them float32 and trainable. */
export function isLoraParameter(name: string): boolean {
  return /\.lora_[ab]$/.test(name);
}
