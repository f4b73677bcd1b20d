/**
 * LoRA: low-rank adapters on a model's projections (q_proj … down_proj, PEFT's names), trained in
 * float32 over a frozen base, saved and loaded in PEFT's format, and merged into the base.
 * @module
 */
export { LORA_MLP_TARGETS, LORA_TARGETS, loraScale, type LoraConfig, type LoraConfigInput, type LoraTarget } from './settings.js';
export { isLoraParameter, loraAdapterSlots, loraTargetShape, type LoraAdapterSlot } from './layout.js';
export { addLora, mergeLora } from './adapters.js';
export {
  PEFT_CONFIG_FILE,
  PEFT_WEIGHTS_FILE,
  PeftAdapterError,
  applyPeftAdapter,
  peftAdapterConfig,
  peftAdapterKey,
  readPeftAdapter,
  savePeftAdapter,
  type PeftAdapter,
  type SavePeftOptions,
} from './peft.js';
