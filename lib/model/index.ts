/**
 * `sinkflex-rl/model`: the built-in policy: native model ops (GEMM, linear, RMSNorm, RoPE,
 * SwiGLU, MoE, embedding, log-softmax/entropy, cross-entropy, AdamW), the native parameter store,
 * the model config and presets, safetensors checkpoints, the transformer (training on packed
 * batches, KV-cache sessions, batched sampling), the policy interfaces with their built-in
 * implementation (TransformerPolicy), LoRA with PEFT adapters, and Hugging Face checkpoints.
 * Tokenizers and chat formats are `sinkflex-rl/chat`.
 * @packageDocumentation
 */
export {
  CheckpointError,
  loadCheckpoint,
  restoreParamStore,
  saveCheckpoint,
  type Checkpoint,
  type SaveCheckpointOptions,
} from './checkpoint.js';
export {
  isSlidingLayer,
  modelConfig,
  ModelConfigError,
  parameterLayout,
  validateModelConfig,
  type LayerType,
  type LinearRopeScaling,
  type Llama3RopeScaling,
  type ModelConfig,
  type ModelConfigInput,
  type ModelPreset,
  type OptionalModelConfigField,
  type RopeScaling,
  type YarnRopeScaling,
} from './config.js';
export type { HfArchitecture } from './hf/config-schema.js';
export { parseHfConfig, type HfConfigInfo, type HfConfigOptions } from './hf/config.js';
export type { HfFileDtype, HfLoadedTensor, HfMxfp4Tensor, HfTensor, TensorDtype } from './hf/convert.js';
export { HfConfigError, HfTensorError } from './hf/errors.js';
export {
  HfCheckpointReader,
  loadHfCheckpoint,
  type HfCheckpoint,
  type HfDtypeOption,
  type HfMxfp4Option,
  type HfLoadOptions,
  type HfTensorInfo,
} from './hf/load.js';
export {
  cudaRefusal,
  loadPretrained,
  PretrainedModel,
  type LoadPretrainedOptions,
  type PretrainedLogProbOptions,
  type PretrainedSaveOptions,
} from './hf/pretrained.js';
export {
  fingerprintDifference,
  hfFolderFingerprint,
  type HfFingerprintFile,
  type HfFolderFingerprint,
} from './hf/fingerprint.js';
export { saveHf, type HfTensorSource, type SaveHfOptions, type SaveHfResult } from './hf/save.js';
export { addLora, mergeLora, removeLora } from './lora/adapters.js';
export { loraAdapterSlots, type LoraAdapterSlot } from './lora/layout.js';
export {
  applyPeftAdapter,
  checkPeftAdapter,
  describeLora,
  PEFT_CONFIG_FILE,
  PEFT_WEIGHTS_FILE,
  PeftAdapterError,
  peftAdapterValues,
  peftAdapterKey,
  readPeftAdapter,
  savePeftAdapter,
  sameLoraSettings,
  type PeftAdapter,
  type SavePeftOptions,
} from './lora/peft.js';
export {
  LORA_EXPERT_TARGETS,
  LORA_MLP_TARGETS,
  LORA_TARGETS,
  resolveLoraTargets,
  type LoraConfig,
  type LoraConfigInput,
  type LoraOptionInput,
  type LoraTarget,
} from './lora/settings.js';
export {
  type AdamWStepOptions,
  type AdamWStepResult,
  type GemmArgs,
  type GemmInfo,
  type LayoutParamSpec,
  type ParamBufferName,
  type Mxfp4Data,
  type ParamDtype,
  type ParamInfo,
  type ParamInit,
  type ParamSpec,
} from './native.js';
export {
  adamwUpdate,
  crossEntropyBackward,
  crossEntropyForward,
  embeddingBackward,
  embeddingForward,
  gemm,
  gemmAsync,
  gemmInfo,
  linearBackward,
  linearForward,
  logSoftmaxBackward,
  logSoftmaxForward,
  matmul,
  matmulOperandDtype,
  matmulPrecision,
  modelOpsDevice,
  moeBackward,
  moeForward,
  opsIsa,
  rmsnormBackward,
  rmsnormForward,
  ropeBackward,
  ropeForward,
  ropeParameters,
  setMatmulPrecision,
  sumSquares,
  swigluBackward,
  swigluForward,
  type LinearShape,
  type LogitsInput,
  type MatmulOptions,
  type MatmulOperandDtype,
  type MatmulPrecision,
  type MatmulPrecisionOptions,
  type MoeExpertLora,
  type MoeForwardResult,
  type MoeGradients,
  type MoeShape,
  type MoeState,
  type MoeWeights,
  type OpDevice,
  type RopeParameters,
  type RopeShape,
  type SwiGluParams,
  type SwiGluVariant,
  type WeightArray,
} from './ops.js';
export { ParamStore, type ParamStoreOptions, type StoreDevice } from './param-store.js';
export {
  type ActivationCheckpointing,
  type FinishReason,
  type ForwardBackwardResult,
  type ForwardPass,
  type GenerateRequest,
  type GenerativeModel,
  type LogProbOptions,
  type LogProbResult,
  type LogprobsMode,
  type ModelSession,
  type OptimizerStepOptions,
  type PackedBatch,
  type SampleOptions,
  type SampleResult,
  type SessionOptions,
  type TokenGradients,
  type TokenLoss,
  type TokenSampleResult,
  type TokenSession,
  type TrainablePolicy,
  type TrainStepOptions,
  type TrainStepResult,
} from './policy.js';
export { SafetensorsError, type SafeTensor, type SafetensorsArray, type SafetensorsDType } from './safetensors.js';
export type { NativeJob, NativeRunResult } from './transformer-native.js';
export {
  TransformerPolicy,
  TransformerPolicySession,
  type PolicySaveOptions,
  type TransformerPolicyOptions,
} from './transformer-policy.js';
export {
  packSequences,
  TrainForward,
  Transformer,
  TransformerSession,
  type PackedSequences,
  type RunOptions,
  type SequenceToPack,
} from './transformer.js';
export {
  loadOptimizerState,
  restoreOptimizerState,
  saveOptimizerState,
  type OptimizerState,
  type SaveOptimizerStateOptions,
} from './optimizer-state.js';
