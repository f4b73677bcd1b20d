/**
 * The types of a training run's interface: its options, progress events, policy-update notices
 * and result (lib/trainer/trainer.ts runs it).
 * @module
 */
import type { AnyEnv } from '../gym/index.js';
import type { TrainConfig, RolloutEnginePatch } from './config.js';
import type { KindGain, MetricsRow } from './report.js';
import type { PublishAdapter } from './rollout-engine.js';

/** A progress event of a run. */
export type TrainEvent =
  | {
      kind: 'phase';
      phase: 'model' | 'tokenizer' | 'demonstrations' | 'sft' | 'validation' | 'grpo' | 'done';
      message: string;
    }
  | { kind: 'sft'; step: number; total: number; loss: number }
  | { kind: 'grpo'; step: number; total: number; metrics: Record<string, number> }
  | { kind: 'validation'; step: number; meanAt1: number; metrics: Record<string, number> }
  | { kind: 'warning'; message: string };

/** Options of {@link train}. */
export interface TrainOptions {
  /** The run folder. */
  out: string;
  /**
   * Continue the run in `out` from its newest checkpoint (its config.json is used, the
   * configuration passed to {@link train} is not). `out` may also be the run's newest checkpoint
   * folder (`<run>/checkpoints/step-<k>`): the run it belongs to is resumed.
   */
  resume?: boolean;
  /**
   * With `resume`: the run's new number of GRPO steps (`grpo.steps`, saved to its config.json).
   * More steps extend a run (also a finished one); fewer end it earlier, but never before its
   * newest checkpoint. The GRPO learning rate is constant and the task order, rollout seeds and
   * validation seeds do not depend on the total, so a run extended from N to M steps trains
   * exactly as an uninterrupted M-step run; the only difference is the validation (and the
   * checkpoint) the shorter run made at its end, step N, when `val.every` does not divide N.
   */
  steps?: number;
  /**
   * With `resume`, for a run of a pretrained model: its base model folder at a new place (the
   * folder moved). Used when its fingerprint is the run's (base.json); saved to the run's
   * config.json as `model.source`.
   */
  modelDir?: string;
  /** Stop after this GRPO step (a checkpoint is written there); the run can be resumed. */
  stopAfter?: number;
  /** Progress events. */
  onEvent?: (e: TrainEvent) => void;
  /** Wraps the training/validation environment factory (e.g. to inject failures in tests). */
  wrapEnv?: (make: () => AnyEnv) => () => AnyEnv | Promise<AnyEnv>;
  /**
   * With `resume`: a new rollout engine for the rest of the run (`rollout.engine`, `servers`,
   * `sessions`, `model`, `timeoutS`, `retries`, `syncTimeoutS`: where episodes are sampled,
   * not what is sampled), saved to its config.json.
   */
  rolloutEngine?: RolloutEnginePatch;
  /**
   * Engine `openai` with a policy that trains LoRA adapters: writes the adapter after a GRPO
   * step (a PEFT folder) and resolves with its path; the servers load it under a per-step name.
   * Without it the servers get full weights (`/update_weights_from_disk`).
   */
  publishAdapter?: PublishAdapter;
  /**
   * Called after each change of the policy's weights — after SFT (step 0) and after each GRPO
   * step's update (step k), before that step's validation and checkpoint; in a resumed run also
   * once with the checkpoint's step before its first rollout — and awaited (e.g. to publish the
   * new adapter to serving engines).
   */
  onPolicyUpdate?: (update: PolicyUpdate) => void | Promise<void>;
}

/** What {@link TrainOptions.onPolicyUpdate} is told. */
export interface PolicyUpdate {
  /** The GRPO step whose update just happened (0: the end of SFT). */
  step: number;
  /**
   * A LoRA run's adapter writer: writes the current adapter as a PEFT folder (default
   * `<out>/adapters/step-<k>`; each file atomically) and returns the folder, which vLLM's
   * `load_lora_adapter` and `loadPretrained(base, { adapter })` load. Null for the built-in
   * model and full fine-tuning.
   */
  saveAdapter: ((dir?: string) => Promise<string>) | null;
}

/** What {@link train} returns. */
export interface TrainResult {
  /** The run folder. */
  out: string;
  /** The configuration. */
  config: TrainConfig;
  /** Every metrics row of the run (also in metrics.jsonl). */
  rows: MetricsRow[];
  /** Validation mean@1 after SFT (step 0) and the last one. */
  firstValMeanAt1: number | null;
  /** The last validation mean@1. */
  lastValMeanAt1: number | null;
  /** Each task kind's validation mean@1 after SFT, best and last (empty without validations). */
  kinds: KindGain[];
  /** GRPO steps completed. */
  step: number;
  /** Wall seconds of this call. */
  wallS: number;
  /** Process CPU seconds (user + system) of this call. */
  cpuS: number;
}
