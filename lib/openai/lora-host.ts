/**
 * {@link PretrainedAdapterHost}: runtime LoRA adapters (PEFT folders) on a served pretrained
 * model, the {@link AdapterHost} of `sinkflex serve --model-dir`.
 *
 * The model batches every session that samples at the same time into one native run, so two
 * adapters cannot be active in one batch. The host therefore keeps one set of LoRA parameters
 * (slots) in the model and each loaded adapter's values (float32, a few MB) by name:
 *
 * - {@link PretrainedAdapterHost.base} (the base model) and `model(name)` (base + adapter `name`)
 *   are views of the one model. Before a view's session samples or prefills (the only calls that
 *   compute), the host makes its adapter the active one: it writes the adapter's values into
 *   the slots in place, between native runs, and only when no request of another adapter is
 *   sampling. Otherwise the call waits. Requests of the active adapter batch together as before;
 *   those of different adapters take turns, the oldest waiting adapter next, so none waits
 *   forever. A sample never runs with another adapter's values.
 * - The base model is served with the slots' B matrices zero (B = 0 adds exactly nothing:
 *   the base's outputs bit for bit). A model that came with adapters of its own (a LoRA run's
 *   policy) is served as it came: its own values are kept and written back for it.
 * - A session keeps its adapter: its KV cache was computed with that adapter's values, and
 *   every later token is too.
 * - The slots get their settings (rank, alpha, rslora, targets) from the first adapter loaded:
 *   a model without LoRA gets fresh slots then (the policy is rebuilt, so every kept session
 *   of every model is stale: `load` says so and the server drops them). Later adapters must have
 *   the same settings while any adapter is loaded; with none loaded, an adapter of other
 *   settings rebuilds the slots again. Slots stay after the last unload (B = 0: the base).
 * - An adapter made for another base model is refused naming the tensor and the mismatch
 *   (`checkPeftAdapter`), as is one the PEFT reader refuses (`readPeftAdapter`); a path without
 *   `adapter_config.json` throws {@link AdapterNotFoundError} (the server answers 404).
 *
 * `load` and `unload` expect no request in flight (the server waits for that) and refuse
 * a rebuild, or a reload of the adapter that is sampling, when there is one.
 * @module
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';

import {
  checkPeftAdapter,
  describeLora,
  loraAdapterSlots,
  PEFT_CONFIG_FILE,
  peftAdapterValues,
  readPeftAdapter,
  sameLoraSettings,
  type LoraConfig,
  type PretrainedModel,
  type TransformerPolicy,
} from '../model/index.js';
import type {
  GenerateRequest,
  GenerativeModel,
  ModelSession,
  SampleOptions,
  SampleResult,
  SessionOptions,
} from '../model/policy.js';
import { AdapterNotFoundError, type AdapterHost, type AdapterLoadResult } from './model-hosts.js';

/** Options of {@link PretrainedAdapterHost}. */
export interface PretrainedAdapterHostOptions {
  /** Most adapters loaded at once (a load beyond is refused). Default 8. */
  maxAdapters?: number;
}

/** Which values the slots hold: an adapter's name, or null for the base model's. */
type Key = string | null;

interface Held {
  path: string;
  lora: LoraConfig;
  values: Map<string, Float32Array>;
}

interface Waiter {
  key: Key;
  grant: (release: () => void) => void;
  fail: (e: Error) => void;
}

/** Counters of {@link PretrainedAdapterHost}. */
export interface AdapterHostStats {
  /** Times the slots were written with another adapter's (or the base's) values. */
  swaps: number;
  /** Samples that waited for another adapter's samples to finish. */
  waited: number;
  /** Most samples running at once under one adapter. */
  maxRunning: number;
}

/** The host (see the module description). */
export class PretrainedAdapterHost implements AdapterHost {
  /** The base model's view (serve it as the server's policy, so that it takes its turns too). */
  readonly base: GenerativeModel;
  /** Counters. */
  readonly stats: AdapterHostStats = { swaps: 0, waited: 0, maxRunning: 0 };
  private readonly held = new Map<string, Held>();
  private readonly views = new Map<string, GenerativeModel>();
  /** The base model's own slot values (a model that came with adapters), else null: B = 0. */
  private readonly ownValues: Map<string, Float32Array> | null;
  private readonly ownLora: LoraConfig | null;
  private readonly maxAdapters: number;
  /** What the slots hold now (undefined: unknown, written before the next sample). */
  private active: Key | undefined = null;
  private running = 0;
  private switching = false;
  private readonly waiters: Waiter[] = [];

  /** @param model - the served model (the caller keeps and disposes it). @param options - limits. */
  constructor(
    /** The served model. */
    readonly pretrained: PretrainedModel,
    options: PretrainedAdapterHostOptions = {},
  ) {
    const model = pretrained;
    this.maxAdapters = options.maxAdapters ?? 8;
    if (!Number.isSafeInteger(this.maxAdapters) || this.maxAdapters < 1)
      throw new RangeError(`options.maxAdapters must be a positive integer, got ${String(options.maxAdapters)}`);
    this.ownLora = model.lora;
    if (this.ownLora !== null) {
      this.ownValues = new Map();
      for (const s of loraAdapterSlots(model.modelConfig)) {
        this.ownValues.set(s.aName, model.params.read(s.aName));
        this.ownValues.set(s.bName, model.params.read(s.bName));
      }
    } else this.ownValues = null;
    this.base = new HostedModel(this, null);
  }

  /** @internal The model's current policy (rebuilt when the slots change). */
  get policy(): TransformerPolicy {
    return this.pretrained.policy;
  }

  /** The LoRA settings of the slots, or null while the model has none. */
  get slots(): LoraConfig | null {
    return this.pretrained.lora;
  }

  async load(name: string, path: string): Promise<AdapterLoadResult> {
    if (typeof name !== 'string' || name === '') throw new TypeError('the adapter name must be a non-empty string');
    if (typeof path !== 'string' || path === '') throw new TypeError('the adapter path must be a non-empty string');
    const config = join(path, PEFT_CONFIG_FILE);
    const found = await stat(config).then(
      (st) => st.isFile(),
      () => false,
    );
    if (!found) throw new AdapterNotFoundError(`no adapter found at ${path} (no ${PEFT_CONFIG_FILE} there)`);
    const a = await readPeftAdapter(path);
    checkPeftAdapter(this.pretrained.modelConfig, a);
    if (!this.held.has(name) && this.held.size >= this.maxAdapters) {
      throw new Error(
        `${this.held.size} adapters are loaded, the most this server holds (${this.maxAdapters}): unload one first`,
      );
    }
    let rebuilt = false;
    const slots = this.pretrained.lora;
    if (slots === null || !sameLoraSettings(slots, a.lora)) {
      if (this.ownLora !== null) {
        throw new Error(
          `the adapter's LoRA settings (${describeLora(a.lora)}) differ from those of the served model's own adapter (${describeLora(this.ownLora)}): this server runs adapters of those settings only`,
        );
      }
      const others = [...this.held.keys()].filter((k) => k !== name);
      if (slots !== null && others.length > 0) {
        throw new Error(
          `the adapter's LoRA settings (${describeLora(a.lora)}) differ from those of the adapters loaded now (${describeLora(slots)}: ${others.join(', ')}); one model runs adapters of one setting: unload those first, or use another server`,
        );
      }
      if (this.busy) throw new Error('requests are sampling: the LoRA slots are rebuilt with none in flight');
      this.pretrained.resetAdapters(a.lora);
      this.active = null; // fresh slots: B = 0, the base
      rebuilt = true;
    } else if (this.active === name && this.busy) {
      throw new Error(`requests of the adapter '${name}' are sampling: it is reloaded with none in flight`);
    }
    const values = peftAdapterValues(this.pretrained.modelConfig, a);
    this.held.set(name, { path, lora: a.lora, values });
    if (this.active === name) this.active = undefined; // new values: written at its next sample
    return { rebuilt };
  }

  async unload(name: string): Promise<void> {
    if (!this.held.has(name)) throw new Error(`the adapter '${name}' is not loaded`);
    if (this.active === name && this.busy)
      throw new Error(`requests of the adapter '${name}' are sampling: it is unloaded with none in flight`);
    this.held.delete(name);
    this.views.delete(name);
    const gone = new Error(`the adapter '${name}' was unloaded`);
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      if (this.waiters[i].key === name) this.waiters.splice(i, 1)[0].fail(gone);
    }
    this.pump();
  }

  list(): string[] {
    return [...this.held.keys()];
  }

  model(name: string): GenerativeModel | undefined {
    if (!this.held.has(name)) return undefined;
    let v = this.views.get(name);
    if (!v) {
      v = new HostedModel(this, name);
      this.views.set(name, v);
    }
    return v;
  }

  /** The folder an adapter was loaded from (undefined when not loaded). */
  pathOf(name: string): string | undefined {
    return this.held.get(name)?.path;
  }

  private get busy(): boolean {
    return this.running > 0 || this.switching || this.waiters.length > 0;
  }

  /**
   * @internal Waits until the slots hold `key`'s values and no other adapter's sample runs, then
   * counts a sample of `key` running; call the returned function when it is done.
   */
  acquire(key: Key): Promise<() => void> {
    if (key !== null && !this.held.has(key))
      return Promise.reject(new Error(`the adapter '${key}' is not loaded (it was unloaded)`));
    if (!this.switching && this.waiters.length === 0 && this.active === key) return Promise.resolve(this.grant());
    return new Promise<() => void>((grant, fail) => {
      if (this.running > 0 || this.switching || this.waiters.length > 0) this.stats.waited++;
      this.waiters.push({ key, grant, fail });
      this.pump();
    });
  }

  private grant(): () => void {
    this.running++;
    this.stats.maxRunning = Math.max(this.stats.maxRunning, this.running);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.running--;
      if (this.running === 0) this.pump();
    };
  }

  /** Admits the waiters of the oldest waiting adapter once nothing else runs, switching to it first. */
  private pump(): void {
    if (this.switching || this.running > 0 || this.waiters.length === 0) return;
    const target = this.waiters[0].key;
    if (target === this.active) {
      for (let i = 0; i < this.waiters.length;) {
        if (this.waiters[i].key === target) this.waiters.splice(i, 1)[0].grant(this.grant());
        else i++;
      }
      return;
    }
    this.switching = true;
    this.write(target).then(
      () => {
        this.active = target;
        this.stats.swaps++;
        this.switching = false;
        this.pump();
      },
      (e: unknown) => {
        this.active = undefined;
        this.switching = false;
        const err = e instanceof Error ? e : new Error(String(e));
        for (let i = this.waiters.length - 1; i >= 0; i--) {
          if (this.waiters[i].key === target) this.waiters.splice(i, 1)[0].fail(err);
        }
        this.pump();
      },
    );
  }

  /** Writes `key`'s values into the slots, after the native work queued so far. */
  private write(key: Key): Promise<void> {
    const policy = this.policy;
    return policy.betweenRuns(() => {
      if (policy.pending > 0)
        throw new Error(
          `internal: ${policy.pending} sample(s) not started through the adapter host are running; the LoRA slots cannot change`,
        );
      const config = policy.config;
      if (config.lora === null) return; // no slots: the base as it is
      const store = policy.model.store;
      if (key === null) {
        if (this.ownValues) for (const [n, v] of this.ownValues) store.write(n, v);
        else
          for (const s of loraAdapterSlots(config))
            store.write(s.bName, new Float32Array(Math.max(1, s.experts) * s.out * config.lora.rank));
        return;
      }
      const h = this.held.get(key);
      if (!h) throw new Error(`the adapter '${key}' is not loaded (it was unloaded)`);
      for (const [n, v] of h.values) store.write(n, v);
    });
  }
}

/** A view of the host's model with one adapter (or the base) active while it samples. */
class HostedModel implements GenerativeModel {
  constructor(
    private readonly host: PretrainedAdapterHost,
    private readonly key: Key,
  ) {}

  get vocabSize(): number {
    return this.host.policy.vocabSize;
  }

  get contextLength(): number {
    return this.host.policy.contextLength;
  }

  createSession(options?: SessionOptions): ModelSession {
    return new HostedSession(this.host, this.key, this.host.policy.createSession(options));
  }

  async generate(requests: readonly GenerateRequest[]): Promise<SampleResult[]> {
    const release = await this.host.acquire(this.key);
    try {
      return await this.host.policy.generate(requests);
    } finally {
      release();
    }
  }
}

/** A session of a {@link HostedModel}: sample and prefill take the adapter's turn. */
class HostedSession implements ModelSession {
  constructor(
    private readonly host: PretrainedAdapterHost,
    private readonly key: Key,
    private readonly inner: ModelSession,
  ) {}

  get length(): number {
    return this.inner.length;
  }

  append(tokens: ArrayLike<number>): void {
    this.inner.append(tokens);
  }

  async sample(options: SampleOptions): Promise<SampleResult> {
    const release = await this.host.acquire(this.key);
    try {
      return await this.inner.sample(options);
    } finally {
      release();
    }
  }

  async prefill(): Promise<void> {
    const release = await this.host.acquire(this.key);
    try {
      await this.inner.prefill?.();
    } finally {
      release();
    }
  }

  fork(options?: SessionOptions): ModelSession {
    if (!this.inner.fork) throw new Error('fork: the session cannot be forked');
    return new HostedSession(this.host, this.key, this.inner.fork(options));
  }

  dispose(): void {
    this.inner.dispose();
  }
}
