/**
 * The built-in policy: native model ops (GEMM, linear, RMSNorm, RoPE, SwiGLU, embedding,
 * log-softmax/entropy, cross-entropy, AdamW), the native parameter store, the model config and
 * presets, the tokenizer and chat template, safetensors checkpoints, the transformer (training
 * on packed batches, KV-cache sessions, batched sampling) and the policy interfaces with their
 * built-in implementation (TransformerPolicy); pretrained Hugging Face models
 * ({@link loadPretrained}: gpt-oss, Qwen3, Qwen2, Llama) with their tokenizers and chat formats.
 * @module
 */
export * from './ops.js';
export * from './config.js';
export * from './param-store.js';
export * from './tokenizer.js';
export * from './chat-format.js';
export * from './chat-template.js';
export * from './safetensors.js';
export * from './checkpoint.js';
export * from './optimizer-state.js';
export { encodeWtf8, decodeWtf8 } from './utf8.js';
export { modelAddon, type GemmArgs, type GemmInfo, type ModelAddon, type NativeParamStore, type ParamInit } from './native.js';
export * from './policy.js';
export * from './transformer.js';
export { transformerAddon, type TransformerAddon } from './transformer-native.js';
export * from './transformer-policy.js';
export * from './lora/index.js';
export {
  PretrainedModel,
  cudaRefusal,
  loadPretrained,
  type LoadPretrainedOptions,
  type PretrainedLogProbOptions,
  type PretrainedSaveOptions,
} from './hf/pretrained.js';
export { fingerprintDifference, hfFolderFingerprint, type HfFingerprintFile, type HfFolderFingerprint } from './hf/fingerprint.js';
export { HfTokenizer, HfTokenizerError, type HfDecodeOptions, type HfEncodeOptions, type HfTokenizerOptions } from './hf/tokenizer.js';
export { HarmonyChatFormat, JinjaChatFormat, loadChatFormat, type ChatFormatOptions, type PretrainedChatFormat, type RenderedChat } from './hf/chat/index.js';
export { HfConfigError, HfTensorError, SUPPORTED_ARCHITECTURES, saveHf, type HfArchitecture, type HfDtypeOption, type SaveHfOptions, type SaveHfResult } from './hf/index.js';
