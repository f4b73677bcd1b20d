/**
 * `loadPolicy`: {@link openModel} for the places a trained policy is kept (a run folder, a
 * checkpoint folder or file), with the result in the shape evaluation code has used since
 * before {@link ModelHandle}: the policy, its chat format as `template`, the checkpoint, the run
 * and the Hugging Face model behind it.
 * @module
 */
import type { ChatFormat } from '../chat/index.js';
import type { PretrainedModel, TransformerPolicy } from '../model/index.js';
import type { RunInfo } from './model-handle.js';
import { openModel } from './open-model.js';

export type { RunInfo } from './model-handle.js';

/** A loaded policy. */
export interface LoadedPolicy {
  /** The policy (weights, tokenizer; a built-in checkpoint's optimizer state). */
  policy: TransformerPolicy;
  /** Its chat format: the built-in template over its tokenizer, or a pretrained model's own. */
  chat: ChatFormat;
  /** What was loaded: the checkpoint folder, the `.safetensors` file or the model folder. */
  checkpoint: string;
  /** The training run it comes from (a run or checkpoint folder), or null. */
  run: RunInfo | null;
  /** A Hugging Face model (a run's base folder with the checkpoint's adapter or weights, or a model folder); else null. */
  pretrained: PretrainedModel | null;
  /** Frees the policy (and the pretrained model). Idempotent. */
  dispose(): void;
}

/** Options of {@link loadPolicy}. */
export interface LoadPolicyOptions {
  /**
   * For a checkpoint of a pretrained model's run: its base model folder at a new place (the
   * folder moved since the run). Used when its fingerprint is the run's (base.json).
   */
  modelDir?: string;
}

/**
 * Loads the policy at `path` on the CPU ({@link openModel}); a built-in policy must hold a
 * tokenizer. With a run's checkpoint the run's prompt format comes along:
 *
 * ```ts
 * const { policy, chat, run, dispose } = await loadPolicy('runs/default');
 * new AgentLoop({ policy, chat, systemPrompt: run?.prompt.systemPrompt, renderTools: run?.prompt.renderTools, ... });
 * ```
 */
export async function loadPolicy(path: string, options: LoadPolicyOptions = {}): Promise<LoadedPolicy> {
  const m = await openModel(path, options.modelDir !== undefined ? { modelDir: options.modelDir } : {});
  return {
    policy: m.policy,
    chat: m.chat,
    checkpoint: m.source ?? path,
    run: m.run,
    pretrained: m.pretrained,
    dispose: () => m.dispose(),
  };
}
