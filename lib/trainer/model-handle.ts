/**
 * One interface over the two kinds of model a run, `sinkflex eval` and `sinkflex serve` use:
 * the built-in transformer (lib/trainer/builtin-model.ts) and a Hugging Face model, with or
 * without LoRA adapters (lib/trainer/hf-model.ts). Whatever differs between the two — how the
 * model is opened and saved, what a checkpoint holds, the KL reference, how demonstrations are
 * rendered for SFT, what a server can load at run time — is a member of {@link ModelHandle} or
 * of the {@link RunModelPlan} that opens it, so that the trainer's phases and the commands never
 * ask which kind they hold. {@link planRunModel} is the one place that picks the kind of a run.
 * @module
 */
import type { ChatFormat, ChatFormatTokenizer, ChatTemplate } from '../chat/index.js';
import type {
  GenerativeModel,
  LogProbOptions,
  LogProbResult,
  LoraConfig,
  PackedBatch,
  PretrainedModel,
  TransformerPolicy,
} from '../model/index.js';
import type { DeviceRequest } from '../native/index.js';
import type { AdapterHost, WeightsHost } from '../openai/index.js';
import type { EpisodeRecord } from '../rollout/index.js';
import type { TrainerState } from './checkpoint.js';
import type { TrainConfig, TrainEnvId } from './config.js';
import type { MaskedSequence } from './sft.js';
import type { PromptSettings, TrainWorld } from './world.js';

/** The two kinds of model. */
export type ModelKind = 'builtin' | 'hf';

/** The training run a model comes from. */
export interface RunInfo {
  /** The prompt format of the run (system prompt, tools section). */
  prompt: PromptSettings;
  /** The environment id. */
  env: TrainEnvId;
  /** The run's resolved configuration. */
  config: TrainConfig;
  /** The GRPO step of the checkpoint. */
  step: number;
}

/** Anything that gives log-probs of packed batches (the KL reference of a GRPO step). */
export interface LogProbSource {
  /** Log-probs and entropies of a packed batch. */
  logProbs(batch: PackedBatch, options?: LogProbOptions): Promise<LogProbResult>;
}

/** The KL reference policy of a run: log-probs, then freed. */
export type ReferencePolicy = LogProbSource & { dispose(): void };

/** A model's LoRA adapters. */
export interface ModelAdapters {
  /** Their settings (rank, alpha, targets). */
  readonly lora: LoraConfig;
  /** Writes them as a PEFT folder (each file atomically) and returns the folder. */
  save(dir: string): Promise<string>;
}

/** The episode limits of a run. */
export interface RunLimits {
  /** Turns per episode. */
  maxTurns: number;
  /** Tokens per assistant turn. */
  maxTokensPerTurn: number;
  /** Tokens in an episode's context. */
  maxContextTokens: number;
}

/** How a model's SFT demonstrations are made (see {@link ModelHandle.demonstrations}). */
export interface DemonstrationFormat {
  /** The chat template the expert's episodes are collected with. */
  chat: ChatTemplate;
  /** The episode limits of the collection, from the run's rollout limits. */
  limits(rollout: RunLimits): RunLimits;
  /** The training sequences of the kept episodes, and how many were too long to keep. */
  sequences(
    records: readonly EpisodeRecord[],
    options: { renderTools: boolean; maxTokens: number },
  ): { sequences: MaskedSequence[]; tooLong: number };
  /** Whether the copy-task warm-up runs before SFT (it teaches a small fresh model to copy). */
  induction: boolean;
}

/** Runtime LoRA adapters over a model, with the base model's own view (served as the server's policy). */
export type ModelAdapterHost = AdapterHost & { readonly base: GenerativeModel };

/** Options of {@link ModelHandle.adapterHost}. */
export interface AdapterHostOptions {
  /** Most adapters loaded at once (default 8). */
  maxAdapters?: number;
}

/**
 * An open model: the policy and its chat format, how it is saved, its adapters and reference
 * policy, and what a server can reload at run time. Dispose it when done.
 */
export interface ModelHandle {
  /** Which implementation (for messages; code does not branch on it). */
  readonly kind: ModelKind;
  /** The policy: weights, sampling, log-probs and training. */
  readonly policy: TransformerPolicy;
  /** Its chat format (the built-in template over its tokenizer, or the model's own). */
  readonly chat: ChatFormat;
  /** Its tokenizer (the chat format's). */
  readonly tokenizer: ChatFormatTokenizer;
  /** What was opened: the checkpoint folder or file, or the model folder (null: a new run's fresh model). */
  readonly source: string | null;
  /** The run it comes from, or null. */
  readonly run: RunInfo | null;
  /** One line saying what the model is (for reports: kind, architecture, where, the run's step). */
  readonly description: string;
  /** Why a requested device was not used, or null. */
  readonly fallback: string | null;
  /** The Hugging Face model behind the handle (null: the built-in model). */
  readonly pretrained: PretrainedModel | null;
  /** The model's generation_config.json (null: none). */
  readonly generationConfig: Readonly<Record<string, unknown>> | null;
  /** Its LoRA adapters, or null (the built-in model, full fine-tuning, or none loaded). */
  readonly adapters: ModelAdapters | null;
  /** How SFT demonstrations are collected and rendered for it. */
  readonly demonstrations: DemonstrationFormat;
  /** The files a run of this model keeps in its run folder beside config.json (removed again when its start fails). */
  readonly runFiles: readonly string[];
  /**
   * Saves the whole model: the built-in policy as one `.safetensors` file at `path` (weights,
   * tokenizer, no optimizer state), a Hugging Face model as a model folder in float32.
   */
  save(path: string): Promise<string>;
  /** Writes the run-folder files of this model that a run keeps from its start (e.g. base.json); `resume`: only the missing ones. */
  writeRunFiles(out: string, resume: boolean): void;
  /** Writes the policy's part of a checkpoint (weights or adapter, optimizer and RNG states, `state`) into the folder `dir`. */
  writeCheckpoint(dir: string, state: TrainerState): Promise<void>;
  /** Saves the policy as it is now as the run's KL reference (in the run folder `out`). */
  saveReference(out: string): Promise<void>;
  /** Opens the run's KL reference saved by {@link saveReference}. */
  openReference(out: string): Promise<ReferencePolicy>;
  /** Runtime LoRA adapters for a server (null: the model takes none). */
  adapterHost(options?: AdapterHostOptions): ModelAdapterHost | null;
  /** In-place reloads of full weights for a server (null: not supported). */
  weightsHost(): WeightsHost | null;
  /** Frees the model. Idempotent. */
  dispose(): void;
}

/** Options of {@link RunModelPlan.open}. */
export interface OpenRunModelOptions {
  /** A checkpoint folder of the run (null: a new run's fresh model). */
  checkpoint: string | null;
  /** Trainable, with the checkpoint's optimizer and sampler state restored (else the weights only). */
  training: boolean;
  /** The world whose training tasks train a fresh built-in model's tokenizer (the run's, or with `world.fresh` a demonstration world). */
  world?: TrainWorld;
  /** The run the checkpoint belongs to (for {@link ModelHandle.run}). */
  run?: RunInfo | null;
  /** Where the model runs, in place of `model.device` (e.g. 'cpu' for evaluation). */
  device?: DeviceRequest;
  /** Told what is being done (e.g. 'training the tokenizer …'). */
  onPhase?: (phase: 'model' | 'tokenizer', message: string) => void;
}

/** A run's model, checked and resolved before anything is written; {@link open} opens it. */
export interface RunModelPlan {
  /** The configuration with `model.source` resolved (an absolute base folder for a Hugging Face run). */
  readonly config: TrainConfig;
  /** Whether {@link config} differs from the one given (to be saved in the run's config.json). */
  readonly changed: boolean;
  /** Opens the model (see {@link OpenRunModelOptions}). */
  open(options: OpenRunModelOptions): Promise<ModelHandle>;
}

/** Options of {@link planRunModel}. */
export interface PlanRunModelOptions {
  /** The run folder. */
  out: string;
  /** A checkpoint folder whose model record the model must match (a resumed or loaded run), or null. */
  checkpoint: string | null;
  /** Whether the run exists already (resumed, or loaded for eval/serve). */
  resume: boolean;
  /** The run's base model folder at a new place (a Hugging Face run whose base moved). */
  modelDir?: string;
}

/** How a kind of model plans a run (each implementation exports one). */
export type RunModelPlanner = (config: TrainConfig, options: PlanRunModelOptions) => Promise<RunModelPlan>;
