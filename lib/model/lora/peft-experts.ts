/**
 * LoRA on the experts of a mixture of experts in PEFT's format (`target_parameters`), as
 * huggingface/peft writes and reads it for gpt-oss. What PEFT does (read in its source):
 *
 * - `LoraConfig.target_parameters` (src/peft/tuners/lora/config.py; since PEFT 0.17.0,
 *   huggingface/peft#2638) lists parameter names,
 *   matched like `target_modules` (equal, or the full name ends with `.` + the entry); for
 *   gpt-oss the entries are `mlp.experts.gate_up_proj` and `mlp.experts.down_proj`, usually with
 *   `target_modules: []` (or the attention modules). Each targeted parameter is wrapped by a
 *   `ParamWrapper` (src/peft/tuners/lora/layer.py) that replaces the `experts` module.
 * - A 3-D parameter [E, d1, d2] gets one pair per expert, stored stacked in two `nn.Linear`s:
 *   `lora_A.weight` [r·E, in] (row e·r + k is expert e's rank row k) and `lora_B.weight`
 *   [out, r·E] (column k·E + e is expert e's rank column k: B is reshaped to [out, r, E]), and
 *   expert e's delta is scale · (B_e A_e)ᵀ laid out as the parameter ([E, in, out]), with
 *   scale = lora_alpha / r, or lora_alpha / √r with `use_rslora` (`get_delta_weight`, einsum
 *   "o r e, e r i -> e i o"). The forward adds the delta to the parameter (a parametrization),
 *   so for gpt-oss, which multiplies x @ W[e], the expert computes x W[e] + scale (x A_eᵀ) B_eᵀ.
 * - in / out: gpt-oss stores gate_up_proj [E, hidden, 2·intermediate] and down_proj
 *   [E, intermediate, hidden] (input dimension first; transformers'
 *   models/gpt_oss/modeling_gpt_oss.py multiplies `x @ gate_up_proj[e]`, gate = columns 0, 2, 4,
 *   ..., up = columns 1, 3, 5, ...). PEFT takes in = d1, out = d2 for such an "(E, in, out)"
 *   parameter: gate_up A [r·E, hidden], B [2·intermediate, r·E]; down A [r·E, intermediate],
 *   B [hidden, r·E]. (PEFT swaps in and out for experts stored (E, out, in), i.e. when the experts
 *   module does not set `is_transposed`; gpt-oss's layout is the (E, in, out) one. PEFT 0.19.0
 *   alone had that test the wrong way round, fixed in huggingface/peft#3165.)
 * - Keys (`get_peft_model_state_dict`, src/peft/utils/save_and_load.py: the adapter name is
 *   dropped): `base_model.model.model.layers.<i>.mlp.experts.lora_A.weight` / `lora_B.weight`.
 *   When both parameters of one experts module are targeted the wrappers nest (PEFT injects in
 *   the module's parameter order, gate_up_proj before down_proj, so gate_up_proj's wrapper is
 *   inside): down_proj's tensors are `….mlp.experts.lora_{A,B}.weight` and gate_up_proj's
 *   `….mlp.experts.base_layer.lora_{A,B}.weight` (src/peft/tuners/tuners_utils.py,
 *   `_inject_parameters`; src/peft/tuners/lora/model.py, `_create_and_replace`).
 * - A ParamWrapper refuses lora_dropout, fan_in_fan_out, lora_bias and DoRA.
 *
 * Ours: the expert targets `experts.gate_up_proj` / `experts.down_proj` keep A [E, r, in] and
 * B [E, out, r] per layer (`layers.<i>.mlp.experts.{gate_up,down}.lora_{a,b}`), gate_up's out
 * rows in our weight's order (ffn gate rows, then ffn up rows); this module converts to and from
 * PEFT's stacked, interleaved tensors.
 * @module
 */
import type { LoraTarget } from './settings.js';

/** PEFT's `target_parameters` entry of each expert target (gpt-oss's module paths). */
export const PEFT_EXPERT_PARAMETERS: Readonly<Record<'experts.gate_up_proj' | 'experts.down_proj', string>> = {
  'experts.gate_up_proj': 'mlp.experts.gate_up_proj',
  'experts.down_proj': 'mlp.experts.down_proj',
};

/**
 * The expert target a `target_parameters` entry names: `mlp.experts.gate_up_proj`,
 * `experts.gate_up_proj` or `gate_up_proj` (and down_proj likewise: entries that match every
 * layer's experts); null for anything else.
 */
export function expertTargetOfParameter(entry: string): LoraTarget | null {
  for (const [target, full] of Object.entries(PEFT_EXPERT_PARAMETERS)) {
    if (full === entry || full.endsWith(`.${entry}`)) return target as LoraTarget;
  }
  return null;
}

/**
 * PEFT's key of an expert target's matrix in layer `layer`, given all the adapter's targets
 * (gate_up_proj's wrapper sits under down_proj's when both are adapted).
 */
export function peftExpertKey(
  layer: number,
  target: LoraTarget,
  matrix: 'A' | 'B',
  targets: readonly LoraTarget[],
): string {
  const inner = target === 'experts.gate_up_proj' && targets.includes('experts.down_proj');
  return `base_model.model.model.layers.${layer}.mlp.experts.${inner ? 'base_layer.' : ''}lora_${matrix}.weight`;
}

/** PEFT's shapes of an expert target's A and B: [r·E, in] and [out, r·E]. */
export function peftExpertShapes(
  experts: number,
  rank: number,
  nIn: number,
  out: number,
): { A: [number, number]; B: [number, number] } {
  return { A: [rank * experts, nIn], B: [out, rank * experts] };
}

/** Our row of gate_up's output column c of gpt-oss (even columns are gate j = c/2, odd ones up j = (c-1)/2, stored after the ffn gate rows). */
function ourRow(target: LoraTarget, c: number, out: number): number {
  if (target !== 'experts.gate_up_proj') return c;
  const ffn = out / 2;
  return c % 2 === 0 ? c / 2 : ffn + (c - 1) / 2;
}

/**
 * Our A [E, r, in] and B [E, out, r] of an expert target as PEFT's A [r·E, in] (the same
 * memory order) and B [out, r·E] (column k·E + e; gate_up's rows interleaved gate, up).
 */
export function expertsToPeft(
  target: LoraTarget,
  a: Float32Array,
  b: Float32Array,
  experts: number,
  rank: number,
  out: number,
): { A: Float32Array; B: Float32Array } {
  const B = new Float32Array(out * rank * experts);
  for (let e = 0; e < experts; e++) {
    for (let c = 0; c < out; c++) {
      const src = (e * out + ourRow(target, c, out)) * rank;
      for (let k = 0; k < rank; k++) B[c * rank * experts + k * experts + e] = b[src + k];
    }
  }
  return { A: Float32Array.from(a), B };
}

/** The inverse of {@link expertsToPeft}: PEFT's A [r·E, in] and B [out, r·E] as our A [E, r, in] and B [E, out, r]. */
export function expertsFromPeft(
  target: LoraTarget,
  A: Float32Array,
  B: Float32Array,
  experts: number,
  rank: number,
  out: number,
): { a: Float32Array; b: Float32Array } {
  const b = new Float32Array(experts * out * rank);
  for (let e = 0; e < experts; e++) {
    for (let c = 0; c < out; c++) {
      const dst = (e * out + ourRow(target, c, out)) * rank;
      for (let k = 0; k < rank; k++) b[dst + k] = B[c * rank * experts + k * experts + e];
    }
  }
  return { a: Float32Array.from(A), b };
}
