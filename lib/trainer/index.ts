/**
 * `sinkflex-rl/trainer`: the trainer: configuration, SFT warm start, GRPO steps (VERL order),
 * validation, run folders with checkpoints, metrics, samples and an HTML report, and opening a
 * model (a run, a checkpoint, a `.safetensors` file or a Hugging Face folder) as one handle.
 * @packageDocumentation
 */
export { resumeRunFolder, RunFolderError } from './checkpoint.js';
export {
  ConfigError,
  parseOverride,
  readConfigFile,
  resolveConfig,
  ROLLOUT_ENGINE_FIELDS,
  TRAIN_ENV_IDS,
  TrainConfigSchema,
  valSourceName,
  type PresetName,
  type ResolveConfigOptions,
  type RolloutEnginePatch,
  type TrainConfig,
  type TrainEnvId,
} from './config.js';
export { loadPolicy, type LoadedPolicy, type LoadPolicyOptions } from './load-policy.js';
export type {
  AdapterHostOptions,
  DemonstrationFormat,
  LogProbSource,
  ModelAdapterHost,
  ModelAdapters,
  ModelHandle,
  ModelKind,
  ReferencePolicy,
  RunInfo,
  RunLimits,
} from './model-handle.js';
export { locateModel, openModel, type ModelLocation, type OpenModelOptions } from './open-model.js';
export type { KindGain, MetricsRow } from './report.js';
export type { PublishAdapter, PublishWeights } from './rollout-engine.js';
export { OffPolicyError } from './on-policy-check.js';
export { train, type PolicyUpdate, type TrainEvent, type TrainOptions, type TrainResult } from './trainer.js';
export { REPORT_TRANSCRIPT_CAPS, type TranscriptCaps } from './transcript-html.js';
export { buildWorld, trainEnvFactory, type PromptSettings, type TrainWorld } from './world.js';
