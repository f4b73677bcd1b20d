/**
 * The model config a pretrained checkpoint maps to: the built-in {@link ModelConfig} with the
 * fields the shared contract of issue 17 adds (biases per projection group, sinks, q/k norm,
 * tied embeddings, explicit layer types, MoE, RoPE scaling). The legacy `bias` flag is left out:
 * the three bias fields say it.
 * @module
 */
import type { ModelConfig } from '../config.js';

/** YaRN RoPE scaling (transformers' `_compute_yarn_parameters`). */
export interface YarnRopeScaling {
  type: 'yarn';
  /** Scaling factor of the context. */
  factor: number;
  /** The pre-extension context (`original_max_position_embeddings`). */
  originalContext: number;
  /** Rotations bounding the ramp (`beta_fast`, default 32). */
  betaFast: number;
  /** (`beta_slow`, default 1). */
  betaSlow: number;
  /** Round the ramp bounds to integers (`truncate`, absent = true; gpt-oss: false). */
  truncate: boolean;
  /** Explicit attention factor; null: derived from factor (and mscale / mscaleAllDim when both are set). */
  attentionFactor: number | null;
  /** DeepSeek-style mscale (optional). */
  mscale?: number;
  /** DeepSeek-style mscale_all_dim (optional). */
  mscaleAllDim?: number;
}

/** Llama 3.1 RoPE scaling (transformers' `_compute_llama3_parameters`). */
export interface Llama3RopeScaling {
  type: 'llama3';
  factor: number;
  lowFreqFactor: number;
  highFreqFactor: number;
  /** The pre-extension context (`original_max_position_embeddings`). */
  originalContext: number;
}

/** Linear RoPE scaling: inverse frequencies divided by `factor`. */
export interface LinearRopeScaling {
  type: 'linear';
  factor: number;
}

/** RoPE scaling of a model; null is plain RoPE. */
export type RopeScaling = YarnRopeScaling | Llama3RopeScaling | LinearRopeScaling;

/** Attention kind of one layer: `'sliding'` uses the config's `window`. */
export type LayerType = 'sliding' | 'full';

/**
 * A {@link ModelConfig} extended per the issue-17 contract (MODEL_SPEC §1). It describes the
 * checkpoint's base model: LoRA adapters (`ModelConfig.lora`) are not part of it (a PEFT
 * adapter folder carries its own settings; see lib/model/lora).
 */
export interface PretrainedModelConfig extends Omit<ModelConfig, 'bias' | 'lora'> {
  /** Biases on q/k/v. */
  qkvBias: boolean;
  /** Bias on o. */
  oBias: boolean;
  /** Biases of the MLP (dense: gate_up/down; MoE: router and experts). */
  mlpBias: boolean;
  /** A learned sink logit per head (gpt-oss). */
  sinks: boolean;
  /** Per-head RMSNorm of q and k before RoPE (Qwen3). */
  qkNorm: boolean;
  /** The LM head is the embedding matrix. */
  tieEmbeddings: boolean;
  /** One entry per layer; sliding layers use `window`. */
  layerTypes: LayerType[] | null;
  /** Experts of the MoE MLP (0: dense). */
  experts: number;
  /** Experts chosen per token (0 when dense). */
  expertsPerToken: number;
  /** RoPE scaling; null is plain RoPE with `ropeTheta`. */
  ropeScaling: RopeScaling | null;
}
