/**
 * A Hugging Face model behind a {@link ModelHandle}: a model folder (gpt-oss, Qwen3, Qwen2,
 * Llama), optionally with a PEFT adapter, or a run's base folder with the run's LoRA adapters
 * (or, for full fine-tuning, its float32 weights). Its chat format and tokenizer are the
 * model's own. A run keeps the base by path and fingerprint (base.json; lib/trainer/hf-run.ts),
 * its checkpoints hold the adapter and optimizer state (never the base), and its KL reference is
 * the adapter after SFT (or the float32 policy after SFT for full fine-tuning). Demonstrations are
 * collected with a byte-level template and rendered in the model's format; no copy-task warm-up.
 * @module
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { type ChatFormat, type ChatFormatTokenizer } from '../chat/index.js';
import {
  hfFolderFingerprint,
  loadPretrained,
  TransformerPolicy,
  type HfDtypeOption,
  type PretrainedModel,
} from '../model/index.js';
import type { DeviceRequest } from '../native/index.js';
import { PretrainedAdapterHost } from '../openai/index.js';
import { writeTextAtomic, type TrainerState } from './checkpoint.js';
import { REFERENCE_FILE } from './builtin-model.js';
import {
  AdapterReference,
  BASE_FILE,
  checkRunBase,
  currentRunBase,
  loadRunModel,
  readRunBase,
  REFERENCE_ADAPTER_DIR,
  runBaseJson,
  writeRunPolicy,
  type RunBase,
} from './hf-run.js';
import type {
  AdapterHostOptions,
  DemonstrationFormat,
  ModelAdapters,
  ModelHandle,
  ReferencePolicy,
  RunInfo,
  RunModelPlanner,
} from './model-handle.js';
import { renderDemonstrations } from './sft.js';
import { byteTemplate } from './world.js';

/** Where an {@link HfModel} comes from. */
interface HfModelOrigin {
  /** The checkpoint folder or the model folder. */
  source: string;
  /** The run it belongs to. */
  run: RunInfo | null;
  /** The run's base record (null: a model folder opened outside a run). */
  base: RunBase | null;
  /** Where the full fine-tuning KL reference is loaded. */
  device: DeviceRequest;
}

/** A Hugging Face model (a {@link PretrainedModel}) as a {@link ModelHandle}. */
export class HfModel implements ModelHandle {
  readonly kind = 'hf' as const;
  readonly chat: ChatFormat;
  readonly adapters: ModelAdapters | null;
  readonly runFiles = [BASE_FILE, REFERENCE_ADAPTER_DIR, REFERENCE_FILE];
  readonly demonstrations: DemonstrationFormat;

  /** @param pretrained - the model (disposed here when it has no chat format: it cannot run episodes). */
  constructor(
    readonly pretrained: PretrainedModel,
    private readonly origin: HfModelOrigin,
  ) {
    try {
      this.chat = pretrained.chat;
    } catch (e) {
      pretrained.dispose();
      throw e;
    }
    const lora = pretrained.lora;
    this.adapters = lora === null ? null : { lora, save: async (dir) => (await pretrained.saveAdapter(dir), dir) };
    this.demonstrations = {
      chat: byteTemplate(),
      // the expert's episodes are collected at byte level, then rendered in the model's format and kept when they fit
      limits: (l) => ({ maxTurns: Math.max(64, l.maxTurns), maxTokensPerTurn: 1 << 20, maxContextTokens: 1 << 24 }),
      sequences: (records, o) => renderDemonstrations(this.chat, records, o),
      induction: false,
    };
  }

  /** Opens a model folder (with a PEFT adapter folder applied, when given). */
  static async openFolder(
    dir: string,
    options: { device: DeviceRequest; dtype: HfDtypeOption; adapter?: string },
  ): Promise<HfModel> {
    const m = await loadPretrained(dir, {
      device: options.device,
      dtype: options.dtype,
      ...(options.adapter !== undefined ? { adapter: options.adapter } : {}),
    });
    return new HfModel(m, { source: dir, run: null, base: null, device: options.device });
  }

  get policy(): TransformerPolicy {
    return this.pretrained.policy;
  }

  get tokenizer(): ChatFormatTokenizer {
    return this.chat.tokenizer;
  }

  get source(): string {
    return this.origin.source;
  }

  get run(): RunInfo | null {
    return this.origin.run;
  }

  get fallback(): string | null {
    return this.pretrained.fallback;
  }

  get generationConfig(): Readonly<Record<string, unknown>> | null {
    return this.pretrained.generationConfig;
  }

  get description(): string {
    const m = this.pretrained;
    const run = this.origin.run;
    if (run)
      return `pretrained ${m.architecture} ${m.dir}${m.lora ? ' + adapter' : ''} ${this.origin.source} (step ${run.step})`;
    return `pretrained ${m.architecture} ${m.dir}${m.lora ? ' + adapter' : ''} (${m.device}${m.fallback ? `: ${m.fallback}` : ''})`;
  }

  async save(path: string): Promise<string> {
    await this.pretrained.save(path, { dtype: 'float32' });
    return path;
  }

  writeRunFiles(out: string, resume: boolean): void {
    const base = this.origin.base;
    if (base && (!resume || !existsSync(join(out, BASE_FILE))))
      writeTextAtomic(join(out, BASE_FILE), runBaseJson(base));
  }

  async writeCheckpoint(dir: string, state: TrainerState): Promise<void> {
    const base = this.origin.base ?? {
      dir: resolve(this.pretrained.dir),
      fingerprint: await hfFolderFingerprint(this.pretrained.dir),
    };
    await writeRunPolicy(dir, this.pretrained, base, state);
  }

  async saveReference(out: string): Promise<void> {
    if (this.adapters) await this.adapters.save(join(out, REFERENCE_ADAPTER_DIR));
    else this.policy.save(join(out, REFERENCE_FILE), { optimizer: false });
  }

  async openReference(out: string): Promise<ReferencePolicy> {
    if (this.adapters) return AdapterReference.load(this.policy, join(out, REFERENCE_ADAPTER_DIR));
    return TransformerPolicy.load(join(out, REFERENCE_FILE), { device: this.origin.device });
  }

  /** A host over this model (a run's model takes adapters of its own settings only when it trains LoRA). */
  adapterHost(options: AdapterHostOptions = {}): PretrainedAdapterHost | null {
    if (this.origin.run && this.adapters === null) return null;
    return new PretrainedAdapterHost(
      this.pretrained,
      options.maxAdapters !== undefined ? { maxAdapters: options.maxAdapters } : {},
    );
  }

  weightsHost(): null {
    return null;
  }

  dispose(): void {
    this.pretrained.dispose();
  }
}

/**
 * Plans a run of a Hugging Face model: the base folder resolved to an absolute path (a new run's
 * `model.source`) or moved (`modelDir`), and, for an existing run, checked against the record
 * of its checkpoint (or run folder); `open` loads the base with fresh or saved adapters.
 */
export const planHfRun: RunModelPlanner = async (configIn, options) => {
  let config = configIn;
  let changed = false;
  if (options.modelDir !== undefined) {
    const source = `hf:${resolve(options.modelDir)}`;
    changed = source !== config.model.source;
    config = { ...config, model: { ...config.model, source } };
  }
  const base = await currentRunBase(config);
  if (options.resume) {
    // the checkpoint's own record (a run killed before its first checkpoint may lack base.json)
    const record = options.checkpoint ?? (existsSync(join(options.out, BASE_FILE)) ? options.out : null);
    if (record !== null) checkRunBase(readRunBase(record), base);
  } else config = { ...config, model: { ...config.model, source: `hf:${base.dir}` } };
  const planned = config;
  return {
    config: planned,
    changed,
    open: async (o) => {
      const device = o.device ?? planned.model.device;
      const step = o.run ? ` and the checkpoint of step ${o.run.step}` : ' and its checkpoint';
      o.onPhase?.(
        'model',
        `loading ${base.dir}${planned.model.lora ? ' with LoRA adapters' : ' (full fine-tuning)'}${o.checkpoint !== null ? step : ''}`,
      );
      const m = await loadRunModel({ ...planned, model: { ...planned.model, device } }, base, {
        checkpoint: o.checkpoint,
        training: o.training,
      });
      return new HfModel(m, {
        source: o.checkpoint ?? base.dir,
        run: o.run ?? null,
        base,
        device: planned.model.device,
      });
    },
  };
};
