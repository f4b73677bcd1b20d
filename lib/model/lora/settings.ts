/**
 * LoRA settings as part of a model config: which projections get low-rank adapters, their rank
 * and scale. The names of the targets are PEFT's module names.
 * @module
 */

/**
 * The projections LoRA can adapt: the modules named as PEFT (and Hugging Face) name them, then
 * the experts of a mixture of experts, named by the tail of PEFT's `target_parameters` entries
 * (`mlp.experts.gate_up_proj`, `mlp.experts.down_proj`).
 */
export const LORA_TARGETS = [
  'q_proj',
  'k_proj',
  'v_proj',
  'o_proj',
  'gate_proj',
  'up_proj',
  'down_proj',
  'experts.gate_up_proj',
  'experts.down_proj',
] as const;

/** One adaptable projection: the attention's q/k/v/o, the dense MLP's gate/up/down, or the experts' gate_up/down. */
export type LoraTarget = (typeof LORA_TARGETS)[number];

/** The MLP targets (not available with a mixture of experts). */
export const LORA_MLP_TARGETS: readonly LoraTarget[] = ['gate_proj', 'up_proj', 'down_proj'];

/**
 * The expert targets (a mixture of experts only): every expert gets its own A and B
 * (PEFT's `target_parameters`; see docs/models.md, "LoRA on the experts").
 */
export const LORA_EXPERT_TARGETS: readonly LoraTarget[] = ['experts.gate_up_proj', 'experts.down_proj'];

/**
 * Low-rank adapters on every layer's `targets`: y = x Wᵀ (+ b) + scale · (x Aᵀ) Bᵀ with
 * A [rank, in] and B [out, rank] trainable float32, W frozen; scale = alpha / rank, or
 * alpha / √rank with `rslora` (PEFT's `use_rslora`).
 */
export interface LoraConfig {
  /** r, an integer in [1, 65536]. */
  rank: number;
  /** lora_alpha, a finite number. */
  alpha: number;
  /** The projections adapted in every layer (at least one, no repeats), in {@link LORA_TARGETS} order. */
  targets: LoraTarget[];
  /** Rank-stabilised scale alpha / √rank (default false: alpha / rank). */
  rslora: boolean;
}

/** A {@link LoraConfig} as input: `rslora` may be left out (false). */
export type LoraConfigInput = Omit<LoraConfig, 'rslora'> & { rslora?: boolean };

/** The factor on the adapters' product: alpha / rank, or alpha / √rank with rslora. */
export function loraScale(lora: Pick<LoraConfig, 'rank' | 'alpha' | 'rslora'>): number {
  return lora.rslora ? lora.alpha / Math.sqrt(lora.rank) : lora.alpha / lora.rank;
}

/**
 * LoRA settings as {@link loadPretrained}'s `lora` option takes them: `targets` may also be
 * `'all-linear'` (PEFT's spelling, as the trainer's `model.lora.targets` takes it).
 */
export type LoraOptionInput = Omit<LoraConfigInput, 'targets'> & { targets: LoraTarget[] | 'all-linear' };

/**
 * The targets `'all-linear'` stands for on a model: every linear module it has (the attention's
 * four on a mixture of experts; as in PEFT, `'all-linear'` never includes the experts, which are
 * parameters, not linear modules: list `experts.gate_up_proj` / `experts.down_proj` for them); a
 * list is returned as is (checked later with the rest of the settings).
 */
export function resolveLoraTargets(targets: LoraTarget[] | 'all-linear', model: { experts: number }): LoraTarget[] {
  if (targets !== 'all-linear') return targets;
  return LORA_TARGETS.filter(
    (t) => !LORA_EXPERT_TARGETS.includes(t) && (model.experts === 0 || !LORA_MLP_TARGETS.includes(t)),
  );
}
