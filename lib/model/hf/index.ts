/**
 * Hugging Face checkpoints (gpt-oss, Qwen3, Qwen2, Llama): {@link loadPretrained} (a model folder
 * as a running model: native store, tokenizer, chat format, log-probs, policy, save), config
 * parsing, safetensors weights (single file or shards; F32, BF16, F16, MXFP4 experts),
 * conversion to our parameter names and layouts, and saving back.
 * @module
 */
export { CLAMPED_SWIGLU, SUPPORTED_ARCHITECTURES, parseHfConfig, type HfArchitecture, type HfConfigInfo, type HfConfigOptions, type ParsedHfConfig } from './config.js';
export { HfConfigError, HfTensorError } from './errors.js';
export { fingerprintDifference, hfFolderFingerprint, type HfFingerprintFile, type HfFolderFingerprint } from './fingerprint.js';
export {
  HfCheckpointReader,
  loadHfCheckpoint,
  type HfCheckpoint,
  type HfDtypeOption,
  type HfFileDtype,
  type HfLoadOptions,
  type HfTensor,
  type HfTensorInfo,
  type TensorDtype,
} from './load.js';
export { FP4_VALUES, decodeMxfp4Rows, mxfp4Value } from './mxfp4.js';
export { bf16ToF32, bf16ToNumber, bf16FromNumber, f16ToF32, f16ToNumber, f32ToBf16, f32ToF16 } from './numeric.js';
export { SUPPORTED_ROPE_TYPES } from './rope.js';
export { TOKENIZER_FILES, saveHf, type HfTensorSource, type SaveHfOptions, type SaveHfResult } from './save.js';
export { planTensors, type HfSource, type PlannedTensor, type TensorRecipe, type TensorRole } from './tensor-plan.js';
export {
  PretrainedModel,
  cudaRefusal,
  loadPretrained,
  type LoadPretrainedOptions,
  type PretrainedLogProbOptions,
  type PretrainedSaveOptions,
} from './pretrained.js';
