/**
 * The built-in transformer behind a {@link ModelHandle}: a policy with its own byte-level BPE
 * tokenizer and the built-in chat template. A new run trains the tokenizer on the run's world
 * and creates the model from `model.*`; a checkpoint holds `policy.safetensors` (weights, AdamW
 * moments, tokenizer, sampler and trainer state) and `tokenizer.json`; the KL reference is the
 * policy after SFT (`reference.safetensors` in the run folder). Its demonstrations are the
 * expert's episodes as sampled with its own template, and a copy-task warm-up runs before SFT.
 * @module
 */
import { join } from 'node:path';

import { ChatTemplate, type ChatFormatTokenizer } from '../chat/index.js';
import { modelConfig, TransformerPolicy, type ModelConfig } from '../model/index.js';
import type { DeviceRequest } from '../native/index.js';
import { transformerWeightsHost, type WeightsHost } from '../openai/index.js';
import { RunFolderError, writeFileSynced, type TrainerState } from './checkpoint.js';
import type { TrainConfig } from './config.js';
import type { DemonstrationFormat, ModelHandle, ReferencePolicy, RunInfo, RunModelPlanner } from './model-handle.js';
import { episodeSequence } from './sft.js';
import { trainRunTokenizer } from './world.js';

/** The KL reference of a run of the built-in model (in the run folder). */
export const REFERENCE_FILE = 'reference.safetensors';

/** The model configuration of a run (the tokenizer fixes the vocabulary). */
export function runModelConfig(config: TrainConfig, vocab: number): ModelConfig {
  const m = config.model;
  const over: Partial<ModelConfig> = { vocab, context: m.context };
  if (m.width > 0) over.width = m.width;
  if (m.layers > 0) over.layers = m.layers;
  if (m.ffn > 0) over.ffn = m.ffn;
  if (m.window >= 0) over.window = m.window;
  if (m.tokenShift) over.tokenShift = true;
  return modelConfig(m.preset, over);
}

/** The built-in model as a {@link ModelHandle}. */
export class BuiltinModel implements ModelHandle {
  readonly kind = 'builtin' as const;
  readonly chat: ChatTemplate;
  readonly fallback = null;
  readonly pretrained = null;
  readonly generationConfig = null;
  readonly adapters = null;
  readonly runFiles = [REFERENCE_FILE];
  readonly demonstrations: DemonstrationFormat;

  /**
   * @param policy - the policy (disposed here when it has no tokenizer).
   * @param source - the checkpoint folder or file it was loaded from (null: a fresh model).
   * @param run - the run it comes from.
   * @param device - where the KL reference is loaded.
   */
  constructor(
    readonly policy: TransformerPolicy,
    readonly source: string | null,
    readonly run: RunInfo | null,
    private readonly device: DeviceRequest,
  ) {
    if (!policy.tokenizer) {
      policy.dispose();
      throw new RunFolderError(
        `the checkpoint ${source} has no tokenizer (the chat template needs one; a checkpoint of a pretrained model's run is loaded through its checkpoint folder)`,
      );
    }
    this.chat = new ChatTemplate(policy.tokenizer);
    this.demonstrations = {
      chat: this.chat,
      // demonstrations only need to fit the model's context (the expert's turns may be longer than the rollout's per-turn limit)
      limits: (l) => ({
        maxTurns: Math.max(64, l.maxTurns),
        maxTokensPerTurn: l.maxContextTokens,
        maxContextTokens: l.maxContextTokens,
      }),
      sequences: (records) => ({ sequences: records.map(episodeSequence), tooLong: 0 }),
      induction: true,
    };
  }

  /** Opens a `.safetensors` checkpoint file of the built-in model. */
  static openFile(file: string, device: DeviceRequest): BuiltinModel {
    return new BuiltinModel(TransformerPolicy.load(file, { device }), file, null, device);
  }

  get tokenizer(): ChatFormatTokenizer {
    return this.chat.tokenizer;
  }

  get description(): string {
    return `builtin ${this.source ?? 'new model'}${this.run ? ` (step ${this.run.step})` : ''}`;
  }

  async save(path: string): Promise<string> {
    this.policy.save(path, { optimizer: false });
    return path;
  }

  writeRunFiles(): void {}

  async writeCheckpoint(dir: string, state: TrainerState): Promise<void> {
    this.policy.save(join(dir, 'policy.safetensors'), { trainer: state as unknown as Record<string, unknown> });
    writeFileSynced(join(dir, 'tokenizer.json'), JSON.stringify(this.policy.tokenizer?.toJSON()));
  }

  async saveReference(out: string): Promise<void> {
    this.policy.save(join(out, REFERENCE_FILE), { optimizer: false });
  }

  async openReference(out: string): Promise<ReferencePolicy> {
    return TransformerPolicy.load(join(out, REFERENCE_FILE), { device: this.device });
  }

  adapterHost(): null {
    return null;
  }

  weightsHost(): WeightsHost {
    return transformerWeightsHost(this.policy);
  }

  dispose(): void {
    this.policy.dispose();
  }
}

/**
 * Plans a run of the built-in model: nothing to resolve; `open` loads the checkpoint's policy, or
 * for a new run trains the tokenizer on the run's world and creates the model (seed `config.seed`).
 */
export const planBuiltinRun: RunModelPlanner = async (config, options) => {
  if (options.modelDir !== undefined)
    throw new RunFolderError(`modelDir: ${options.out} is a run of the built-in model, which has no base model folder`);
  return {
    config,
    changed: false,
    open: async (o) => {
      const device = o.device ?? config.model.device;
      const common = { device, activationCheckpointing: config.model.activationCheckpointing };
      if (o.checkpoint !== null)
        return new BuiltinModel(
          TransformerPolicy.load(join(o.checkpoint, 'policy.safetensors'), common),
          o.checkpoint,
          o.run ?? null,
          device,
        );
      if (!o.world) throw new TypeError('a new run of the built-in model needs its world (to train the tokenizer)');
      o.onPhase?.('tokenizer', 'training the tokenizer on expert demonstrations');
      const tokenizer = await trainRunTokenizer(config, o.world);
      return new BuiltinModel(
        TransformerPolicy.create(runModelConfig(config, tokenizer.vocabSize), {
          seed: config.seed,
          tokenizer,
          ...common,
        }),
        null,
        null,
        device,
      );
    },
  };
};
