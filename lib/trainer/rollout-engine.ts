/**
 * Where a run's episodes are sampled (`rollout.engine`):
 *
 * - `local`: the trainer's own policy in process (a model is a `TokenPolicy` as it is).
 * - `openai`, `vllm`, `sglang`: servers at `rollout.servers` (`sinkflex serve`, vLLM, SGLang),
 *   token-in/token-out through `/v1/completions` ({@link CompletionTokenPolicy} over the OpenAI
 *   client: retries, timeouts, least-busy routing, failure counts), every sampling field set in
 *   each request (see lib/openai/token-completions.ts). Before the servers sample for the
 *   trainer, {@link RolloutEngine.sync} makes them serve the trainer's current policy:
 *   - with adapters (a `publishAdapter` hook): the hook writes the adapter of the step (a PEFT
 *     folder), every server loads it with `POST /v1/load_lora_adapter` under the name
 *     `<run>-step-<k>` (SGLang's root route when the server has no `/v1` one), the next
 *     requests name it — as `model` (vLLM, `sinkflex serve`; `sglang`: `<base>:<name>`, the form
 *     SGLang reads) and as `lora_path` (SGLang's field) — and the previous adapter is unloaded;
 *   - full weights, `openai`: the policy is saved to `<run>/rollout-weights/step-<k>.safetensors`
 *     and every server reloads it with `POST /update_weights_from_disk` (`sinkflex serve` reads
 *     its own checkpoints there);
 *   - full weights, `sglang`: the `publishWeights` hook writes the step's Hugging Face model
 *     folder and every server loads it with SGLang's `POST /update_weights_from_disk`
 *     `{ model_path }` (its answer `{ success, message }`, 400 when it failed);
 *   - `vllm` has no route that loads full weights from disk: the configuration refuses full
 *     fine-tuning with it (lib/trainer/config.ts).
 *   The servers must see the run folder (same machine or a shared file system). A server that
 *   cannot take the new policy is taken out of routing (it would sample off-policy) and tried
 *   again at each later sync (after a quick look at its models list, so that a dead one does not
 *   hold the sync); a run goes on while one server takes it. The first sync also checks that
 *   every server answers completions with token ids and log-probs, and
 *   {@link RolloutEngine.checkOnPolicy} compares what each server sampled with the trainer's
 *   log-probs (lib/trainer/on-policy-check.ts).
 * @module
 */
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';

import type { ChatFormat } from '../chat/chat-format.js';
import type { TransformerPolicy } from '../model/index.js';
import {
  CompletionFormatError,
  OpenAIChatClient,
  OpenAITokenCompletions,
  readTokenCompletion,
  SAMPLING_FIELDS,
  type CompletionResponse,
} from '../openai/index.js';
import { CompletionTokenPolicy, type TokenPolicy } from '../rollout/index.js';
import type { TrainConfig } from './config.js';
import type { LogProbSource } from './model-handle.js';
import { OnPolicyCheck } from './on-policy-check.js';

/**
 * Writes the adapter of `policy` after GRPO step `step` (a PEFT folder, e.g. under
 * `<out>/adapters/`) and resolves with its path, which every server loads.
 */
export type PublishAdapter = (step: number, policy: TransformerPolicy, out: string) => Promise<string>;

/**
 * Writes the full weights of the policy after GRPO step `step` as a Hugging Face model folder
 * under `dir` (which SGLang's `/update_weights_from_disk` loads) and resolves with its path.
 */
export type PublishWeights = (step: number, dir: string) => Promise<string>;

/** Where a run's episodes are sampled (see the module description). */
export interface RolloutEngine {
  /** `rollout.engine`. */
  readonly kind: TrainConfig['rollout']['engine'];
  /** The policy the agent loop and validation sample from. */
  readonly policy: TokenPolicy;
  /** Makes the servers serve the trainer's policy after GRPO step `step` (at most once per step; nothing for `local`). */
  sync(step: number): Promise<void>;
  /**
   * Compares what each server sampled since the last sync with `policy`'s log-probs (which must
   * still hold the synced weights) and returns `rollout/logprob_abs_diff/server_<k>`; rejects with
   * an `OffPolicyError` when a server's first checked batch is above `rollout.maxLogprobDiff`.
   * Nothing for `local`.
   */
  checkOnPolicy(policy: LogProbSource): Promise<Record<string, number>>;
  /** Counters of the remote calls since the last call (`rollout/remote_*`, `rollout/servers_up`); empty for `local`. */
  takeMetrics(): Record<string, number>;
  /** Releases what the engine holds (the weights files it wrote). */
  dispose(): void;
}

/** Options of {@link createRolloutEngine}. */
export interface RolloutEngineOptions {
  /** The run's configuration (`rollout.*`). */
  config: TrainConfig;
  /** The policy being trained. */
  policy: TransformerPolicy;
  /** Its chat format (the probe's prompt). */
  chat: ChatFormat;
  /** The run folder (weights files, adapter names). */
  out: string;
  /** Publishes the adapter of a step (the policy trains adapters); without it full weights are pushed. */
  publishAdapter?: PublishAdapter;
  /** Publishes the full weights of a step as a Hugging Face folder (needed for `sglang` without adapters). */
  publishWeights?: PublishWeights;
  /** Warnings (a server taken out of routing). */
  onWarning?: (message: string) => void;
}

/** The engine of `config.rollout.engine`. */
export function createRolloutEngine(options: RolloutEngineOptions): RolloutEngine {
  if (options.config.rollout.engine === 'local') {
    const policy: TokenPolicy = options.policy;
    return {
      kind: 'local',
      policy,
      sync: async () => undefined,
      checkOnPolicy: async () => ({}),
      takeMetrics: () => ({}),
      dispose: () => undefined,
    };
  }
  return new ServerRolloutEngine(options);
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A name of the run usable in adapter names. */
function runTag(out: string): string {
  return basename(out).replace(/[^A-Za-z0-9._-]+/g, '-') || 'run';
}

class ServerRolloutEngine implements RolloutEngine {
  readonly kind: 'openai' | 'vllm' | 'sglang';
  readonly policy: CompletionTokenPolicy;
  private readonly client: OpenAIChatClient;
  private readonly completions: OpenAITokenCompletions;
  private readonly r: TrainConfig['rollout'];
  private readonly weightsDir: string;
  private readonly syncTimeoutMs: number;
  private syncedStep: number | null = null;
  private baseModel: string | null = null;
  private probed = false;
  /** The adapter each server serves now (by base URL). */
  private readonly adapterOn = new Map<string, string>();
  /** Root-route servers (SGLang: `/load_lora_adapter` outside `/v1`). */
  private readonly rootAdmin = new Set<string>();
  private last = { requests: 0, failures: 0, retries: 0 };
  /** Servers out of routing (they missed a sync). */
  private readonly down = new Set<string>();
  private readonly onPolicy: OnPolicyCheck;

  constructor(private readonly o: RolloutEngineOptions) {
    this.r = o.config.rollout;
    this.kind = this.r.engine === 'local' ? 'openai' : this.r.engine;
    if (this.kind === 'sglang' && !o.publishAdapter && !o.publishWeights)
      throw new Error(
        "rollout.engine 'sglang' without adapters needs the step's Hugging Face model folder (publishWeights): SGLang's /update_weights_from_disk loads model folders",
      );
    this.client = new OpenAIChatClient({
      baseURL: this.r.servers,
      // the base model's name is learned at the first sync when not configured
      model: this.r.model || 'default',
      timeoutMs: this.r.timeoutS * 1000,
      retries: this.r.retries,
      concurrency: Math.max(1, this.r.concurrency),
      routing: 'least-busy',
      seed: o.config.seed,
      endpointCooldownMs: 10000,
    });
    this.onPolicy = new OnPolicyCheck(this.client.baseURLs, this.r.maxLogprobDiff, o.config.grpo.microBatchTokens);
    this.completions = new OpenAITokenCompletions(this.client, { onCompletion: (done) => this.onPolicy.record(done) });
    this.policy = new CompletionTokenPolicy({
      completions: this.completions,
      vocabSize: o.chat.tokenizer.vocabSize,
      sessions: this.r.sessions,
    });
    this.weightsDir = join(o.out, 'rollout-weights');
    this.syncTimeoutMs = this.r.syncTimeoutS * 1000;
  }

  takeMetrics(): Record<string, number> {
    const s = this.completions.stats();
    const m = {
      'rollout/remote_requests': s.requests - this.last.requests,
      'rollout/remote_failures': s.failures - this.last.failures,
      'rollout/remote_retries': s.retries - this.last.retries,
      'rollout/servers_up': this.client.enabledBaseURLs().length,
    };
    this.last = s;
    return m;
  }

  checkOnPolicy(policy: LogProbSource): Promise<Record<string, number>> {
    return this.onPolicy.check(policy);
  }

  async sync(step: number): Promise<void> {
    if (this.syncedStep === step) return;
    this.onPolicy.reset();
    if (this.baseModel === null) {
      this.baseModel = this.r.model || (await this.discoverBaseModel());
      this.completions.model = this.baseModel;
    }
    const took = this.o.publishAdapter
      ? await this.syncAdapter(step, await this.o.publishAdapter(step, this.o.policy, this.o.out))
      : this.kind === 'sglang'
        ? await this.syncHfWeights(step)
        : await this.syncWeights(step);
    if (!this.probed) {
      await Promise.all(took.map((base) => this.probe(base)));
      this.probed = true;
    }
    this.syncedStep = step;
  }

  /** The first base model (no `parent`) the first reachable server lists. */
  private async discoverBaseModel(): Promise<string> {
    const why: string[] = [];
    for (const base of this.client.baseURLs) {
      try {
        const models = await this.client.listModels(base);
        const m = models.find((c) => c.parent === undefined || c.parent === null);
        if (m) return m.id;
        why.push(`${base}: lists no base model`);
      } catch (e) {
        why.push(`${base}: ${errorText(e)}`);
      }
    }
    throw new Error(
      `rollout.model: cannot learn the served model's name from the servers (set rollout.model): ${why.join('; ')}`,
    );
  }

  /** Applies the per-server outcomes of a sync: who took the policy stays in routing (warnings when a server leaves or comes back). */
  private settle(step: number, what: string, outcomes: { base: string; error: string | null }[]): string[] {
    const took: string[] = [];
    const failed: string[] = [];
    for (const { base, error } of outcomes) {
      if (error === null) took.push(base);
      else failed.push(`${base}: ${error}`);
    }
    if (took.length === 0)
      throw new Error(`rollout.servers: no server took ${what} of step ${step}: ${failed.join('; ')}`);
    for (const { base, error } of outcomes) {
      if (error === null) {
        this.client.setEnabled(base, true);
        if (this.down.delete(base))
          this.o.onWarning?.(`rollout server ${base} took ${what} of step ${step} and is back in routing`);
      } else {
        this.client.setEnabled(base, false);
        if (!this.down.has(base))
          this.o.onWarning?.(
            `rollout server ${base} did not take ${what} of step ${step} and is out of routing (it is tried again at each sync): ${error}`,
          );
        this.down.add(base);
      }
    }
    return took;
  }

  /**
   * Runs `load` on every server; a server out of routing is first asked for its models list
   * (with the request timeout), so that a dead one does not hold each sync for `syncTimeoutS`.
   */
  private async each(
    load: (base: string) => Promise<string | null>,
  ): Promise<{ base: string; error: string | null }[]> {
    return Promise.all(
      this.client.baseURLs.map(async (base) => {
        try {
          if (this.down.has(base)) await this.client.listModels(base);
          return { base, error: await load(base) };
        } catch (e) {
          return { base, error: errorText(e) };
        }
      }),
    );
  }

  private async syncWeights(step: number): Promise<string[]> {
    mkdirSync(this.weightsDir, { recursive: true });
    const file = join(this.weightsDir, `step-${step}.safetensors`);
    this.o.policy.save(file, { optimizer: false });
    const outcomes = await this.each(async (base) => {
      const r = await this.client.postTo(
        base,
        '/update_weights_from_disk',
        { model_path: file },
        { root: true, timeoutMs: this.syncTimeoutMs },
      );
      return r.ok ? null : `POST /update_weights_from_disk answered ${r.status}: ${r.text.slice(0, 300)}`;
    });
    const took = this.settle(step, 'the weights', outcomes);
    for (const f of readdirSync(this.weightsDir))
      if (f !== basename(file)) rmSync(join(this.weightsDir, f), { force: true });
    return took;
  }

  /** SGLang: the step's Hugging Face folder, loaded with `/update_weights_from_disk` (`success` must be true). */
  private async syncHfWeights(step: number): Promise<string[]> {
    mkdirSync(this.weightsDir, { recursive: true });
    const publish = this.o.publishWeights as PublishWeights;
    const dir = await publish(step, join(this.weightsDir, `step-${step}`));
    const outcomes = await this.each(async (base) => {
      const r = await this.client.postTo(
        base,
        '/update_weights_from_disk',
        { model_path: dir },
        { root: true, timeoutMs: this.syncTimeoutMs },
      );
      const answer = r.json as { success?: unknown; message?: unknown } | undefined;
      if (r.ok && answer !== undefined && answer !== null && answer.success === true) return null;
      return `POST /update_weights_from_disk answered ${r.status}: ${r.text.slice(0, 300)}`;
    });
    const took = this.settle(step, 'the weights', outcomes);
    for (const f of readdirSync(this.weightsDir))
      if (join(this.weightsDir, f) !== dir) rmSync(join(this.weightsDir, f), { recursive: true, force: true });
    return took;
  }

  private async adminPost(
    base: string,
    path: string,
    body: unknown,
  ): Promise<{ ok: boolean; status: number; text: string }> {
    if (!this.rootAdmin.has(base)) {
      const r = await this.client.postTo(base, path, body, { timeoutMs: this.syncTimeoutMs });
      // a 404 about an adapter (vLLM: "No adapter found", an unknown name) comes from the route itself
      if (r.status !== 404 || /adapter/i.test(r.text)) return r;
      // no such route under /v1: SGLang keeps it at the server's root
      this.rootAdmin.add(base);
    }
    return this.client.postTo(base, path, body, { root: true, timeoutMs: this.syncTimeoutMs });
  }

  private async syncAdapter(step: number, path: string): Promise<string[]> {
    const name = `${runTag(this.o.out)}-step-${step}`;
    const outcomes = await this.each(async (base) => {
      const r = await this.adminPost(base, '/load_lora_adapter', {
        lora_name: name,
        lora_path: path,
        load_inplace: true,
      });
      if (r.ok) return null;
      const hint =
        r.status === 404 && !/adapter/i.test(r.text)
          ? ' (no runtime LoRA route: start vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora)'
          : '';
      return `POST /load_lora_adapter answered ${r.status}: ${r.text.slice(0, 300)}${hint}`;
    });
    const took = this.settle(step, `the adapter ${name}`, outcomes);
    // SGLang reads a plain adapter name as `model` as its base model: `<base>:<name>` or lora_path
    this.completions.model = this.kind === 'sglang' ? `${this.baseModel as string}:${name}` : name;
    this.completions.loraPath = name;
    await Promise.all(
      took.map(async (base) => {
        const old = this.adapterOn.get(base);
        this.adapterOn.set(base, name);
        if (old === undefined || old === name) return;
        try {
          const r = await this.adminPost(base, '/unload_lora_adapter', { lora_name: old });
          if (!r.ok)
            this.o.onWarning?.(
              `rollout server ${base} did not unload the adapter ${old}: ${r.status} ${r.text.slice(0, 200)}`,
            );
        } catch (e) {
          this.o.onWarning?.(`rollout server ${base} did not unload the adapter ${old}: ${errorText(e)}`);
        }
      }),
    );
    return took;
  }

  /** One tiny completion on `base`: it must answer with token ids and log-probs. */
  private async probe(base: string): Promise<void> {
    const prompt = this.o.chat.renderTokens([{ role: 'user', content: 'hello' }], { addGenerationPrompt: true });
    const body = {
      model: this.completions.model,
      ...(this.completions.loraPath !== null ? { lora_path: this.completions.loraPath } : {}),
      prompt,
      max_tokens: 2,
      temperature: 1,
      top_p: 1,
      ...SAMPLING_FIELDS,
      seed: 0,
      logprobs: 0,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
    };
    const r = await this.client.postTo(base, '/completions', body);
    if (!r.ok)
      throw new Error(`rollout server ${base}: POST /completions answered ${r.status}: ${r.text.slice(0, 300)}`);
    const json = r.json as CompletionResponse | undefined;
    if (!json || !Array.isArray(json.choices) || json.choices.length === 0)
      throw new CompletionFormatError(`rollout server ${base}: POST /completions answered without choices`);
    readTokenCompletion(json, `rollout server ${base}`);
  }

  dispose(): void {
    rmSync(this.weightsDir, { recursive: true, force: true });
  }
}
