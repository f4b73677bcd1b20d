/**
 * Adding LoRA adapters to a model and merging them into its base weights. Both change the
 * store's parameter list in place (no copy of the base) and return the model made over it: the
 * model passed in is disposed (its store goes on with the returned one).
 * @module
 */
import { ModelConfigError, parameterLayout, validateModelConfig } from '../config.js';
import type { ParamSpec } from '../native.js';
import type { Transformer } from '../transformer.js';
import { loraAdapterSlots } from './layout.js';
import { type LoraConfigInput, loraScale } from './settings.js';

/**
 * Adds fresh adapters with `lora`'s settings to a model without any: A uniform in ±1/√in, B
 * zeros (PEFT's default initialisation, so the model's outputs are unchanged until it trains),
 * drawn from the store's seed. Every base parameter is frozen (its gradient and AdamW moments
 * are freed), so training updates — and keeps optimizer state for — the adapters only. CPU
 * and GPU models (the adapters live where the store does). Errors name the setting (`config.lora.rank`, `config.lora.targets[i]`, ...).
 */
export function addLora(model: Transformer, lora: LoraConfigInput): Transformer {
  if (model.config.lora !== null) {
    throw new ModelConfigError(
      'lora',
      `is already set on this model (rank ${model.config.lora.rank}, targets ${model.config.lora.targets.join(', ')}): merge it (mergeLora) first`,
    );
  }
  const config = validateModelConfig({ ...model.config, lora });
  const store = model.store;
  const base = store.names().length;
  const layout = parameterLayout(config);
  const names = store.names();
  layout.slice(0, base).forEach((s, i) => {
    if (s.name !== names[i])
      throw new Error(`internal: store parameter ${i} is '${names[i]}', the layout has '${s.name}'`);
  });
  const specs: ParamSpec[] = layout.slice(base).map((s) => ({ ...s, dtype: 'float32', trainable: true }));
  const trainable = store
    .info()
    .filter((p) => p.trainable)
    .map((p) => p.name);
  if (trainable.length > 0) store.freeze(trainable);
  store.append(specs);
  return model.reconfigure(config);
}

/**
 * Merges the adapters into the base weights, W' = W + scale · B A (each product computed in
 * float32; a bfloat16 weight is widened, added to in float32 and rounded to nearest even), then
 * removes them: the returned model has `lora: null` and the base's parameters only (as frozen
 * as before), ready to save as a full Hugging Face folder. Expert adapters merge expert by
 * expert into a float32 or bfloat16 base; an MXFP4 base is refused (before anything changes):
 * the sum would have to be re-quantized.
 */
export function mergeLora(model: Transformer): Transformer {
  const lora = model.config.lora;
  if (lora === null) throw new ModelConfigError('lora', 'is null: this model has no LoRA adapters to merge');
  const slots = loraAdapterSlots(model.config);
  // checked before anything merges: an MXFP4 weight cannot take the update
  const dtypes = new Map(model.store.info().map((p) => [p.name, p.dtype]));
  const packed = slots.find((slot) => dtypes.get(slot.weight) === 'mxfp4');
  if (packed !== undefined) {
    throw new ModelConfigError(
      'lora.targets',
      `include ${packed.target}, whose base weight '${packed.weight}' is MXFP4: merging would need re-quantizing the sum to MXFP4 (lossy), which we do not do; load the base with mxfp4: 'bf16' to merge, or keep the adapter (savePeftAdapter)`,
    );
  }
  const scale = loraScale(lora);
  const base = validateModelConfig({ ...model.config, lora: null });
  const count = parameterLayout(base).length;
  for (const slot of slots) {
    model.store.mergeLora({
      weight: slot.weight,
      rowOffset: slot.rowOffset,
      loraA: slot.aName,
      loraB: slot.bName,
      scale,
    });
  }
  model.store.truncate(count);
  return model.reconfigure(base);
}

/**
 * Removes the adapters without merging them (their values are discarded): the returned model has
 * `lora: null` and the base's parameters only, exactly as before {@link addLora}. The model passed
 * in is disposed.
 */
export function removeLora(model: Transformer): Transformer {
  if (model.config.lora === null)
    throw new ModelConfigError('lora', 'is null: this model has no LoRA adapters to remove');
  const base = validateModelConfig({ ...model.config, lora: null });
  model.store.truncate(parameterLayout(base).length);
  return model.reconfigure(base);
}
