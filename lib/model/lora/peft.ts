/**
 * LoRA adapters in PEFT's format (huggingface/peft `save_pretrained` of a LoRA `PeftModel` over a
 * `*ForCausalLM`), which PEFT and vLLM load:
 *
 * - `adapter_config.json`: `peft_type: "LORA"`, `r`, `lora_alpha`, `target_modules`, `use_rslora`,
 *   `bias: "none"`, `task_type: "CAUSAL_LM"`, `base_model_name_or_path`, ... (keys sorted, as
 *   PEFT writes them);
 * - `adapter_model.safetensors`: per layer i and adapted module, float32 tensors
 *   `base_model.model.model.layers.<i>.self_attn.{q,k,v,o}_proj.lora_A.weight` [r, in] and
 *   `….lora_B.weight` [out, r], `….mlp.{gate,up,down}_proj.lora_{A,B}.weight` likewise (the keys
 *   `get_peft_model_state_dict` returns: the adapter name dropped), metadata `format: pt`;
 * - with the expert targets, `target_parameters` (`mlp.experts.gate_up_proj`,
 *   `mlp.experts.down_proj`) and the stacked per-expert tensors `….mlp.experts.lora_{A,B}.weight`
 *   (and `….mlp.experts.base_layer.lora_{A,B}.weight`), as ./peft-experts.ts describes.
 *
 * Reading accepts F32, BF16 and F16 tensors (widened to float32) and refuses, naming the field or
 * tensor, what our models cannot run: other PEFT types, DoRA, LoRA biases, `bias` other than
 * "none", `modules_to_save`, per-module ranks or alphas, layer subsets, base-modifying
 * initialisations (PiSSA, OLoRA, CorDA), and adapters on modules we do not adapt (embeddings,
 * the LM head, the MoE router, expert parameters other than gpt-oss's gate_up_proj and down_proj). Applying checks the adapter against the model: layer
 * count, each tensor's shape, MLP targets on a mixture of experts.
 * @module
 */
import { mkdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

import { type ModelConfig, ModelConfigError } from '../config.js';
import { type SafeTensor, readSafetensorsFile, writeFileAtomic, writeSafetensorsFile } from '../safetensors.js';
import type { Transformer } from '../transformer.js';
import { f16ToF32, bf16ToF32 } from '../hf/numeric.js';
import { addLora } from './adapters.js';
import { loraAdapterSlots, loraTargetShape } from './layout.js';
import {
  expertTargetOfParameter,
  expertsFromPeft,
  expertsToPeft,
  PEFT_EXPERT_PARAMETERS,
  peftExpertKey,
  peftExpertShapes,
} from './peft-experts.js';
import { LORA_EXPERT_TARGETS, LORA_MLP_TARGETS, LORA_TARGETS, type LoraConfig, type LoraTarget } from './settings.js';

/** File names of a PEFT adapter folder. */
export const PEFT_CONFIG_FILE = 'adapter_config.json';
/** The weights file of a PEFT adapter folder. */
export const PEFT_WEIGHTS_FILE = 'adapter_model.safetensors';

/** A PEFT adapter that cannot be read or does not fit the model; names the file and the field or tensor. */
export class PeftAdapterError extends Error {
  constructor(
    /** `adapter_config.json`, `adapter_model.safetensors`, or the folder. */
    readonly file: string,
    /** The config field or tensor key at fault (`''` for the file as a whole). */
    readonly field: string,
    message: string,
  ) {
    super(`${file}${field ? ` ${field}` : ''}: ${message}`);
    this.name = 'PeftAdapterError';
  }
}

/** A PEFT LoRA adapter as read from its folder. */
export interface PeftAdapter {
  /** The folder it was read from. */
  dir: string;
  /** The settings (rank = r, alpha = lora_alpha, rslora = use_rslora, targets = the modules with tensors). */
  lora: LoraConfig;
  /** Layers the adapter covers (0 .. layers - 1, every target in each). */
  layers: number;
  /** `base_model_name_or_path` (null when absent). */
  baseModelNameOrPath: string | null;
  /** adapter_config.json as read. */
  config: Record<string, unknown>;
  /** Float32 tensors by PEFT key. */
  tensors: Map<string, { shape: number[]; data: Float32Array }>;
}

/**
 * PEFT's key of an adapter matrix, e.g. `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`;
 * an expert target's key depends on whether the adapter has both expert targets (`targets`, default
 * the target alone): `….mlp.experts.lora_A.weight` or `….mlp.experts.base_layer.lora_A.weight`.
 */
export function peftAdapterKey(
  layer: number,
  target: LoraTarget,
  matrix: 'A' | 'B',
  targets: readonly LoraTarget[] = [target],
): string {
  if (LORA_EXPERT_TARGETS.includes(target)) return peftExpertKey(layer, target, matrix, targets);
  const group = LORA_MLP_TARGETS.includes(target) ? 'mlp' : 'self_attn';
  return `base_model.model.model.layers.${layer}.${group}.${target}.lora_${matrix}.weight`;
}

const EXPERT_KEY = /^base_model\.model\.model\.layers\.(\d+)\.mlp\.experts\.(base_layer\.)?lora_([AB])\.weight$/;
const KEY = /^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.([a-z_]+)\.lora_([AB])\.weight$/;

/** Why a tensor key is not one of the adapters we run (a message naming what it adapts). */
function unsupportedKey(key: string): string {
  if (/lora_magnitude_vector/.test(key)) return 'is a DoRA magnitude vector (use_dora adapters are not supported)';
  if (/lora_embedding_[AB]|embed_tokens/.test(key))
    return 'adapts embed_tokens: LoRA on the embedding is not supported';
  if (/lm_head/.test(key)) return 'adapts lm_head: LoRA on the LM head is not supported';
  if (/\.experts?\./.test(key))
    return "adapts MoE experts in a way we do not read (gpt-oss's mlp.experts.gate_up_proj / down_proj through target_parameters are read: base_model.model.model.layers.<i>.mlp.experts[.base_layer].lora_<A|B>.weight)";
  if (/\.router\./.test(key)) return 'adapts the MoE router: not supported';
  if (/\.lora_[AB]\.bias$/.test(key)) return 'is a LoRA bias (lora_bias adapters are not supported)';
  if (/\.lora_[AB]\.[^.]+\.weight$/.test(key)) return "still carries an adapter name (PEFT's saved keys have none)";
  return `is not a LoRA tensor of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj or down_proj in PEFT's format (base_model.model.model.layers.<i>.<self_attn|mlp>.<module>.lora_<A|B>.weight)`;
}

function toFloat32(t: SafeTensor, key: string): Float32Array {
  switch (t.dtype) {
    case 'F32':
      return t.data as Float32Array;
    case 'BF16':
      return bf16ToF32(t.data as Uint16Array);
    case 'F16':
      return f16ToF32(t.data as Uint16Array);
    default:
      throw new PeftAdapterError(PEFT_WEIGHTS_FILE, key, `has dtype ${t.dtype} (expected F32, BF16 or F16)`);
  }
}

/** Checks adapter_config.json; returns r, alpha, rslora and the listed targets (null for a regex string). */
function parseConfig(json: Record<string, unknown>): {
  rank: number;
  alpha: number;
  rslora: boolean;
  listed: LoraTarget[] | null;
  parameters: LoraTarget[];
} {
  const fail = (field: string, message: string): never => {
    throw new PeftAdapterError(PEFT_CONFIG_FILE, field, message);
  };
  if (json.peft_type !== 'LORA') fail('peft_type', `must be "LORA", got ${JSON.stringify(json.peft_type)}`);
  const rank = json.r;
  if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 1 || rank > 65536)
    fail('r', `(the rank) must be an integer in [1, 65536], got ${JSON.stringify(rank)}`);
  const alpha = json.lora_alpha ?? 8; // PEFT's default
  if (typeof alpha !== 'number' || !Number.isFinite(alpha))
    fail('lora_alpha', `must be a finite number, got ${JSON.stringify(alpha)}`);
  const rslora = json.use_rslora ?? false;
  if (typeof rslora !== 'boolean') fail('use_rslora', `must be a boolean, got ${JSON.stringify(rslora)}`);
  if (json.use_dora) fail('use_dora', 'is true: DoRA adapters are not supported');
  if (json.lora_bias) fail('lora_bias', 'is true: adapters with LoRA biases are not supported');
  if ((json.bias ?? 'none') !== 'none')
    fail(
      'bias',
      `is ${JSON.stringify(json.bias)}: adapters that train the base biases are not supported (bias must be "none")`,
    );
  const empty = (v: unknown): boolean =>
    v === null ||
    v === undefined ||
    (Array.isArray(v) && v.length === 0) ||
    (typeof v === 'object' && !Array.isArray(v) && Object.keys(v as object).length === 0);
  if (!empty(json.modules_to_save))
    fail(
      'modules_to_save',
      `is ${JSON.stringify(json.modules_to_save)}: adapters that save whole modules are not supported`,
    );
  if (!empty(json.rank_pattern)) fail('rank_pattern', 'is not empty: per-module ranks are not supported');
  if (!empty(json.alpha_pattern)) fail('alpha_pattern', 'is not empty: per-module alphas are not supported');
  if (!empty(json.layers_to_transform))
    fail('layers_to_transform', 'is set: adapters on a subset of the layers are not supported');
  if (!empty(json.layer_replication)) fail('layer_replication', 'is set: not supported');
  if (typeof json.init_lora_weights === 'string' && /^(pissa|olora|corda)/i.test(json.init_lora_weights)) {
    fail(
      'init_lora_weights',
      `is ${JSON.stringify(json.init_lora_weights)}: such adapters belong to a base that PEFT modified (convert them to plain LoRA with PEFT first)`,
    );
  }
  const task = json.task_type;
  if (task !== undefined && task !== null && task !== 'CAUSAL_LM')
    fail('task_type', `must be "CAUSAL_LM" (or absent), got ${JSON.stringify(task)}`);
  const tm = json.target_modules;
  let listed: LoraTarget[] | null = null;
  if (Array.isArray(tm)) {
    listed = tm.map((m: unknown, i) => {
      const last = typeof m === 'string' ? m.split('.').pop()! : '';
      if (!(LORA_TARGETS as readonly string[]).includes(last)) {
        const why = /embed/.test(last)
          ? ' (LoRA on the embedding is not supported)'
          : last === 'lm_head'
            ? ' (LoRA on the LM head is not supported)'
            : /expert|router/.test(String(m))
              ? ' (LoRA on MoE experts or the router is not supported)'
              : '';
        return fail(
          `target_modules[${i}]`,
          `${JSON.stringify(m)} is not a module we adapt${why}; supported: ${LORA_TARGETS.join(', ')}`,
        );
      }
      return last as LoraTarget;
    });
  } else if (typeof tm !== 'string') {
    fail('target_modules', `must be a list of module names or a string, got ${JSON.stringify(tm)}`);
  }
  const tp = json.target_parameters;
  const parameters: LoraTarget[] = [];
  if (tp !== null && tp !== undefined) {
    if (!Array.isArray(tp)) fail('target_parameters', `must be a list of parameter names, got ${JSON.stringify(tp)}`);
    (tp as unknown[]).forEach((entry, i) => {
      const target = typeof entry === 'string' ? expertTargetOfParameter(entry) : null;
      if (target === null) {
        return fail(
          `target_parameters[${i}]`,
          `${JSON.stringify(entry)} is not a parameter we adapt; supported: ${Object.values(PEFT_EXPERT_PARAMETERS).join(', ')} (every layer's experts)`,
        );
      }
      if (parameters.includes(target))
        fail(`target_parameters[${i}]`, `${JSON.stringify(entry)} names ${target} twice`);
      parameters.push(target);
    });
  }
  return { rank: rank as number, alpha: alpha as number, rslora: rslora as boolean, listed, parameters };
}

/**
 * Reads and checks a PEFT LoRA adapter folder (see the module notes); every tensor comes back
 * as float32. Throws {@link PeftAdapterError} naming the file and field or tensor.
 */
export async function readPeftAdapter(dir: string): Promise<PeftAdapter> {
  let text: string;
  try {
    text = await readFile(join(dir, PEFT_CONFIG_FILE), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      throw new PeftAdapterError(PEFT_CONFIG_FILE, '', `not found in ${dir} (not a PEFT adapter folder)`);
    throw e;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new PeftAdapterError(PEFT_CONFIG_FILE, '', `is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new PeftAdapterError(PEFT_CONFIG_FILE, '', 'must be a JSON object');
  const config = json as Record<string, unknown>;
  const { rank, alpha, rslora, listed, parameters } = parseConfig(config);

  const weightsPath = join(dir, PEFT_WEIGHTS_FILE);
  try {
    await stat(weightsPath);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new PeftAdapterError(
        PEFT_WEIGHTS_FILE,
        '',
        `not found in ${dir}${(await exists(join(dir, 'adapter_model.bin'))) ? ' (adapter_model.bin, a pickle, is not read: save with safe_serialization)' : ''}`,
      );
    }
    throw e;
  }
  const contents = readSafetensorsFile(weightsPath);
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  const found = new Map<LoraTarget, Set<number>>();
  for (const [key, t] of contents.tensors) {
    const x = EXPERT_KEY.exec(key);
    if (x !== null) {
      // which expert target: the inner wrapper is gate_up_proj's when both are targeted
      const nested = x[2] !== undefined;
      const target: LoraTarget | undefined = nested
        ? parameters.length === 2
          ? 'experts.gate_up_proj'
          : undefined
        : parameters.length === 2
          ? 'experts.down_proj'
          : parameters[0];
      if (target === undefined) {
        throw new PeftAdapterError(
          PEFT_WEIGHTS_FILE,
          key,
          `adapts the experts, but ${PEFT_CONFIG_FILE} target_parameters (${JSON.stringify(config.target_parameters ?? null)}) ${parameters.length === 0 ? 'lists none' : 'lists one parameter, so no key has base_layer'}`,
        );
      }
      if (t.shape.length !== 2)
        throw new PeftAdapterError(
          PEFT_WEIGHTS_FILE,
          key,
          `has shape [${t.shape.join(', ')}] (a LoRA matrix has 2 dimensions)`,
        );
      const stacked = x[3] === 'A' ? t.shape[0] : t.shape[1];
      if (stacked % rank !== 0) {
        throw new PeftAdapterError(
          PEFT_WEIGHTS_FILE,
          key,
          `has shape [${t.shape.join(', ')}]: its stacked rank dimension ${stacked} is not r · experts for ${PEFT_CONFIG_FILE} r = ${rank}`,
        );
      }
      tensors.set(key, { shape: [...t.shape], data: toFloat32(t, key) });
      if (!found.has(target)) found.set(target, new Set());
      found.get(target)!.add(Number(x[1]));
      continue;
    }
    const m = KEY.exec(key);
    const target = m?.[3] as LoraTarget | undefined;
    const group = m?.[2];
    const ok =
      m !== null &&
      target !== undefined &&
      (LORA_TARGETS as readonly string[]).includes(target) &&
      (group === 'mlp') === LORA_MLP_TARGETS.includes(target);
    if (!ok) throw new PeftAdapterError(PEFT_WEIGHTS_FILE, key, unsupportedKey(key));
    const layer = Number(m[1]);
    if (t.shape.length !== 2)
      throw new PeftAdapterError(
        PEFT_WEIGHTS_FILE,
        key,
        `has shape [${t.shape.join(', ')}] (a LoRA matrix has 2 dimensions)`,
      );
    const rankDim = m[4] === 'A' ? t.shape[0] : t.shape[1];
    if (rankDim !== rank) {
      throw new PeftAdapterError(
        PEFT_WEIGHTS_FILE,
        key,
        `has shape [${t.shape.join(', ')}]: its rank dimension is ${rankDim}, ${PEFT_CONFIG_FILE} r = ${rank}`,
      );
    }
    if (listed !== null && !listed.includes(target)) {
      throw new PeftAdapterError(
        PEFT_WEIGHTS_FILE,
        key,
        `adapts ${target}, which ${PEFT_CONFIG_FILE} target_modules (${listed.join(', ')}) does not list`,
      );
    }
    tensors.set(key, { shape: [...t.shape], data: toFloat32(t, key) });
    if (!found.has(target)) found.set(target, new Set());
    found.get(target)!.add(layer);
  }
  if (found.size === 0) throw new PeftAdapterError(PEFT_WEIGHTS_FILE, '', 'holds no LoRA tensors');
  const layers = Math.max(...[...found.values()].flatMap((s) => [...s])) + 1;
  const targets = LORA_TARGETS.filter((t) => found.has(t));
  for (const target of parameters) {
    if (!found.has(target))
      throw new PeftAdapterError(
        PEFT_WEIGHTS_FILE,
        '',
        `holds no tensors of ${PEFT_EXPERT_PARAMETERS[target as keyof typeof PEFT_EXPERT_PARAMETERS]}, which ${PEFT_CONFIG_FILE} target_parameters lists`,
      );
  }
  for (const target of targets) {
    for (let layer = 0; layer < layers; layer++) {
      for (const mat of ['A', 'B'] as const) {
        const key = peftAdapterKey(layer, target, mat, targets);
        if (!tensors.has(key)) {
          throw new PeftAdapterError(
            PEFT_WEIGHTS_FILE,
            key,
            `is missing (the adapter has ${target} on other layers; adapters on a subset of the layers are not supported)`,
          );
        }
      }
    }
  }
  const base = config.base_model_name_or_path;
  return {
    dir,
    lora: { rank, alpha, targets, rslora },
    layers,
    baseModelNameOrPath: typeof base === 'string' ? base : null,
    config,
    tensors,
  };
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Checks that a PEFT adapter was made for a base model of `config`: the layer count, every
 * tensor's shape, no MLP targets on a mixture of experts. Throws {@link PeftAdapterError} naming
 * the tensor and the mismatch ("the adapter was made for another base model").
 */
export function checkPeftAdapter(config: ModelConfig, a: PeftAdapter): void {
  const c = config;
  if (a.layers !== c.layers) {
    throw new PeftAdapterError(
      PEFT_WEIGHTS_FILE,
      '',
      `has adapters for ${a.layers} layers, the model has ${c.layers}: the adapter was made for another base model`,
    );
  }
  if (c.experts > 0) {
    const mlp = a.lora.targets.filter((t) => LORA_MLP_TARGETS.includes(t));
    if (mlp.length > 0) {
      throw new PeftAdapterError(
        PEFT_WEIGHTS_FILE,
        peftAdapterKey(0, mlp[0], 'A'),
        `adapts ${mlp[0]}, but the model's MLP is a mixture of experts (experts = ${c.experts}): the adapter was made for another base model`,
      );
    }
  } else {
    const ex = a.lora.targets.filter((t) => LORA_EXPERT_TARGETS.includes(t));
    if (ex.length > 0) {
      throw new PeftAdapterError(
        PEFT_WEIGHTS_FILE,
        peftAdapterKey(0, ex[0], 'A', a.lora.targets),
        `adapts ${ex[0]}, but the model's MLP is dense (experts = 0): the adapter was made for another base model`,
      );
    }
  }
  for (const target of a.lora.targets) {
    const { in: nIn, out } = loraTargetShape(c, target);
    const expert = LORA_EXPERT_TARGETS.includes(target);
    const shapes = expert
      ? peftExpertShapes(c.experts, a.lora.rank, nIn, out)
      : { A: [a.lora.rank, nIn], B: [out, a.lora.rank] };
    for (let layer = 0; layer < c.layers; layer++) {
      for (const [mat, want] of [
        ['A', shapes.A],
        ['B', shapes.B],
      ] as const) {
        const key = peftAdapterKey(layer, target, mat, a.lora.targets);
        const t = a.tensors.get(key)!;
        if (t.shape[0] !== want[0] || t.shape[1] !== want[1]) {
          const per = expert ? ` per expert, ${c.experts} experts stacked as PEFT stacks them` : '';
          throw new PeftAdapterError(
            PEFT_WEIGHTS_FILE,
            key,
            `has shape [${t.shape.join(', ')}], the model's ${target} needs [${want.join(', ')}] (in ${nIn}, out ${out}${per}): the adapter was made for another base model`,
          );
        }
      }
    }
  }
}

/** Whether two LoRA settings are the same (rank, alpha, rslora, targets): one's values fit the other's parameters. */
export function sameLoraSettings(a: LoraConfig, b: LoraConfig): boolean {
  return a.rank === b.rank && a.alpha === b.alpha && a.rslora === b.rslora && a.targets.join() === b.targets.join();
}

/**
 * The values of a checked adapter ({@link checkPeftAdapter}) by our parameter names
 * (`layers.<i>.attn.q.lora_a`, ...) for a model of `config` whose LoRA settings are the adapter's:
 * what writing the adapter into such a model writes.
 */
export function peftAdapterValues(config: ModelConfig, a: PeftAdapter): Map<string, Float32Array> {
  if (config.lora === null || !sameLoraSettings(config.lora, a.lora)) {
    throw new ModelConfigError(
      'lora',
      `(${config.lora === null ? 'none' : describeLora(config.lora)}) differs from the adapter's (${describeLora(a.lora)})`,
    );
  }
  const values = new Map<string, Float32Array>();
  const targets = config.lora.targets;
  for (const slot of loraAdapterSlots(config)) {
    const A = a.tensors.get(peftAdapterKey(slot.layer, slot.target, 'A', targets))!.data;
    const B = a.tensors.get(peftAdapterKey(slot.layer, slot.target, 'B', targets))!.data;
    if (slot.experts > 0) {
      const ours = expertsFromPeft(slot.target, A, B, slot.experts, config.lora.rank, slot.out);
      values.set(slot.aName, ours.a);
      values.set(slot.bName, ours.b);
    } else {
      values.set(slot.aName, A);
      values.set(slot.bName, B);
    }
  }
  return values;
}

/** LoRA settings in words, as PEFT names them: `r 8, lora_alpha 16, use_rslora false, target_modules q_proj, v_proj`. */
export function describeLora(l: LoraConfig): string {
  return `r ${l.rank}, lora_alpha ${l.alpha}, use_rslora ${l.rslora}, target_modules ${l.targets.join(', ')}`;
}

/**
 * Applies a PEFT adapter (a folder, or one already read) to a model: checks that it was made for
 * this base ({@link checkPeftAdapter}), then adds the adapters ({@link addLora}: the base is
 * frozen) and writes their values; a model that already has adapters with the same settings gets
 * its values replaced. Returns the model with the adapter (the one passed is disposed, except
 * when a check fails: then nothing changed). Its log-probs and samples are those of base + adapter.
 */
export async function applyPeftAdapter(model: Transformer, adapter: string | PeftAdapter): Promise<Transformer> {
  const a = typeof adapter === 'string' ? await readPeftAdapter(adapter) : adapter;
  checkPeftAdapter(model.config, a);
  const have = model.config.lora;
  if (have !== null && !sameLoraSettings(have, a.lora)) {
    throw new ModelConfigError(
      'lora',
      `(rank ${have.rank}, alpha ${have.alpha}, rslora ${have.rslora}, targets ${have.targets.join(', ')}) differs from the adapter's (r ${a.lora.rank}, lora_alpha ${a.lora.alpha}, use_rslora ${a.lora.rslora}, modules ${a.lora.targets.join(', ')})`,
    );
  }
  const next = have === null ? addLora(model, a.lora) : model;
  for (const [name, data] of peftAdapterValues(next.config, a)) next.store.write(name, data);
  return next;
}

/** Options of {@link savePeftAdapter}. */
export interface SavePeftOptions {
  /** `base_model_name_or_path` (the base's hub id or folder; default null). */
  baseModelNameOrPath?: string | null;
}

/**
 * The adapter_config.json of a model's adapters, keys sorted as PEFT writes them: `target_modules`
 * the adapted modules, and with expert targets `target_parameters` (`mlp.experts.gate_up_proj`,
 * `mlp.experts.down_proj`).
 */
export function peftAdapterConfig(
  lora: LoraConfig,
  baseModelNameOrPath: string | null = null,
): Record<string, unknown> {
  const config: Record<string, unknown> = {
    alpha_pattern: {},
    auto_mapping: null,
    base_model_name_or_path: baseModelNameOrPath,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layers_pattern: null,
    layers_to_transform: null,
    lora_alpha: lora.alpha,
    lora_dropout: 0.0,
    modules_to_save: null,
    peft_type: 'LORA',
    r: lora.rank,
    rank_pattern: {},
    revision: null,
    target_modules: lora.targets.filter((t) => !LORA_EXPERT_TARGETS.includes(t)),
    task_type: 'CAUSAL_LM',
    use_dora: false,
    use_rslora: lora.rslora,
  };
  // target_parameters (PEFT >= 0.17) only when the experts are adapted: an older PEFT refuses unknown fields
  const parameters = lora.targets
    .filter((t) => LORA_EXPERT_TARGETS.includes(t))
    .map((t) => PEFT_EXPERT_PARAMETERS[t as keyof typeof PEFT_EXPERT_PARAMETERS]);
  if (parameters.length > 0) config.target_parameters = parameters;
  return Object.fromEntries(
    Object.keys(config)
      .sort()
      .map((k) => [k, config[k]]),
  );
}

/**
 * Writes a model's adapters as a PEFT folder (`adapter_config.json` and `adapter_model.safetensors`
 * in float32, each file written atomically; `dir` is created when missing). Returns the files written.
 */
export async function savePeftAdapter(
  model: Transformer,
  dir: string,
  options: SavePeftOptions = {},
): Promise<{ dir: string; files: string[] }> {
  const lora = model.config.lora;
  if (lora === null) throw new ModelConfigError('lora', 'is null: this model has no LoRA adapters to save');
  const tensors: [string, SafeTensor][] = [];
  for (const slot of loraAdapterSlots(model.config)) {
    const keyA = peftAdapterKey(slot.layer, slot.target, 'A', lora.targets);
    const keyB = peftAdapterKey(slot.layer, slot.target, 'B', lora.targets);
    if (slot.experts > 0) {
      const { A, B } = expertsToPeft(
        slot.target,
        model.store.read(slot.aName),
        model.store.read(slot.bName),
        slot.experts,
        lora.rank,
        slot.out,
      );
      const shapes = peftExpertShapes(slot.experts, lora.rank, slot.in, slot.out);
      tensors.push([keyA, { dtype: 'F32', shape: shapes.A, data: A }]);
      tensors.push([keyB, { dtype: 'F32', shape: shapes.B, data: B }]);
      continue;
    }
    tensors.push([keyA, { dtype: 'F32', shape: [lora.rank, slot.in], data: model.store.read(slot.aName) }]);
    tensors.push([keyB, { dtype: 'F32', shape: [slot.out, lora.rank], data: model.store.read(slot.bName) }]);
  }
  await mkdir(dir, { recursive: true });
  writeSafetensorsFile(join(dir, PEFT_WEIGHTS_FILE), tensors, { format: 'pt' });
  const json = `${JSON.stringify(peftAdapterConfig(lora, options.baseModelNameOrPath ?? null), null, 2)}\n`;
  writeFileAtomic(join(dir, PEFT_CONFIG_FILE), [new TextEncoder().encode(json)]);
  return { dir, files: [PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE] };
}
