/**
 * Where a run's episodes are sampled (`rollout.engine`):
 *
 * - `local`: the trainer's own policy in process (`ModelPolicyAdapter`).
 * - `openai`: vLLM-compatible servers (`rollout.servers`: vLLM, SGLang, `sinkflex serve`),
 *   token-in/token-out through `/v1/completions` ({@link CompletionTokenPolicy} over the OpenAI
 *   client: retries, timeouts, least-busy routing, failure counts). Before the servers sample
 *   for the trainer, {@link RolloutEngine.sync} makes them serve the trainer's current policy:
 *   - with adapters (a `publishAdapter` hook): the hook writes the adapter of the step (a PEFT
 *     folder), every server loads it with `POST /v1/load_lora_adapter` under the name
 *     `<run>-step-<k>` (SGLang's root route when the server has no `/v1` one), the next
 *     requests name it as their model, and the previous adapter is unloaded;
 *   - without (full weights, e.g. the built-in model): the policy is saved to
 *     `<run>/rollout-weights/step-<k>.safetensors` and every server reloads it with `POST
 *     /update_weights_from_disk` (SGLang's route; `sinkflex serve` has it), so the servers must
 *     see the run folder (same machine or a shared file system).
 *   A server that cannot take the new policy is taken out of routing (it would sample
 *   off-policy) and tried again at each later sync (after a quick look at its models list, so
 *   that a dead one does not hold the sync); a run goes on while one server takes it. The
 *   first sync also checks that every server answers completions with token ids and log-probs.
 * @module
 */
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';

import type { ChatFormat } from '../model/chat-format.js';
import type { TransformerPolicy } from '../model/index.js';
import { CompletionFormatError, OpenAIChatClient, OpenAITokenCompletions, readTokenCompletion, type CompletionResponse } from '../openai/index.js';
import { CompletionTokenPolicy, ModelPolicyAdapter, type TokenPolicy } from '../rollout/index.js';
import type { TrainConfig } from './config.js';

/**
 * Writes the adapter of `policy` after GRPO step `step` (a PEFT folder, e.g. under
 * `<out>/adapters/`) and resolves with its path, which every server loads.
 */
export type PublishAdapter = (step: number, policy: TransformerPolicy, out: string) => Promise<string>;

/** Where a run's episodes are sampled (see the module description). */
export interface RolloutEngine {
  /** `local` or `openai`. */
  readonly kind: TrainConfig['rollout']['engine'];
  /** The policy the agent loop and validation sample from. */
  readonly policy: TokenPolicy;
  /** Makes the servers serve the trainer's policy after GRPO step `step` (at most once per step; nothing for `local`). */
  sync(step: number): Promise<void>;
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
  template: ChatFormat;
  /** The run folder (weights files, adapter names). */
  out: string;
  /** Publishes the adapter of a step (the policy trains adapters); without it full weights are pushed. */
  publishAdapter?: PublishAdapter;
  /** Warnings (a server taken out of routing). */
  onWarning?: (message: string) => void;
}

/** The engine of `config.rollout.engine`. */
export function createRolloutEngine(options: RolloutEngineOptions): RolloutEngine {
  if (options.config.rollout.engine === 'local') {
    const policy = new ModelPolicyAdapter(options.policy);
    return { kind: 'local', policy, sync: async () => undefined, takeMetrics: () => ({}), dispose: () => undefined };
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
  readonly kind = 'openai' as const;
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

  constructor(private readonly o: RolloutEngineOptions) {
    this.r = o.config.rollout;
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
    this.completions = new OpenAITokenCompletions(this.client);
    this.policy = new CompletionTokenPolicy({ completions: this.completions, vocabSize: o.template.tokenizer.vocabSize, sessions: this.r.sessions });
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

  async sync(step: number): Promise<void> {
    if (this.syncedStep === step) return;
    if (this.baseModel === null) {
      this.baseModel = this.r.model || (await this.discoverBaseModel());
      this.completions.model = this.baseModel;
    }
    const took = this.o.publishAdapter ? await this.syncAdapter(step, await this.o.publishAdapter(step, this.o.policy, this.o.out)) : await this.syncWeights(step);
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
    throw new Error(`rollout.model: cannot learn the served model's name from the servers (set rollout.model): ${why.join('; ')}`);
  }

  /** Applies the per-server outcomes of a sync: who took the policy stays in routing (warnings when a server leaves or comes back). */
  private settle(step: number, what: string, outcomes: { base: string; error: string | null }[]): string[] {
    const took: string[] = [];
    const failed: string[] = [];
    for (const { base, error } of outcomes) {
      if (error === null) took.push(base);
      else failed.push(`${base}: ${error}`);
    }
    if (took.length === 0) throw new Error(`rollout.servers: no server took ${what} of step ${step}: ${failed.join('; ')}`);
    for (const { base, error } of outcomes) {
      if (error === null) {
        this.client.setEnabled(base, true);
        if (this.down.delete(base)) this.o.onWarning?.(`rollout server ${base} took ${what} of step ${step} and is back in routing`);
      } else {
        this.client.setEnabled(base, false);
        if (!this.down.has(base)) this.o.onWarning?.(`rollout server ${base} did not take ${what} of step ${step} and is out of routing (it is tried again at each sync): ${error}`);
        this.down.add(base);
      }
    }
    return took;
  }

  /**
   * Runs `load` on every server; a server out of routing is first asked for its models list
   * (with the request timeout), so that a dead one does not hold each sync for `syncTimeoutS`.
   */
  private async each(load: (base: string) => Promise<string | null>): Promise<{ base: string; error: string | null }[]> {
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
      const r = await this.client.postTo(base, '/update_weights_from_disk', { model_path: file }, { root: true, timeoutMs: this.syncTimeoutMs });
      return r.ok ? null : `POST /update_weights_from_disk answered ${r.status}: ${r.text.slice(0, 300)}`;
    });
    const took = this.settle(step, 'the weights', outcomes);
    for (const f of readdirSync(this.weightsDir)) if (f !== basename(file)) rmSync(join(this.weightsDir, f), { force: true });
    return took;
  }

  private async adminPost(base: string, path: string, body: unknown): Promise<{ ok: boolean; status: number; text: string }> {
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
      const r = await this.adminPost(base, '/load_lora_adapter', { lora_name: name, lora_path: path, load_inplace: true });
      if (r.ok) return null;
      const hint = r.status === 404 && !/adapter/i.test(r.text) ? ' (no runtime LoRA route: start vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora)' : '';
      return `POST /load_lora_adapter answered ${r.status}: ${r.text.slice(0, 300)}${hint}`;
    });
    const took = this.settle(step, `the adapter ${name}`, outcomes);
    this.completions.model = name;
    await Promise.all(
      took.map(async (base) => {
        const old = this.adapterOn.get(base);
        this.adapterOn.set(base, name);
        if (old === undefined || old === name) return;
        try {
          const r = await this.adminPost(base, '/unload_lora_adapter', { lora_name: old });
          if (!r.ok) this.o.onWarning?.(`rollout server ${base} did not unload the adapter ${old}: ${r.status} ${r.text.slice(0, 200)}`);
        } catch (e) {
          this.o.onWarning?.(`rollout server ${base} did not unload the adapter ${old}: ${errorText(e)}`);
        }
      }),
    );
    return took;
  }

  /** One tiny completion on `base`: it must answer with token ids and log-probs. */
  private async probe(base: string): Promise<void> {
    const prompt = this.o.template.renderTokens([{ role: 'user', content: 'hello' }], { addGenerationPrompt: true });
    const body = { model: this.completions.model, prompt, max_tokens: 2, temperature: 1, seed: 0, logprobs: 0, return_tokens_as_token_ids: true, return_token_ids: true };
    const r = await this.client.postTo(base, '/completions', body);
    if (!r.ok) throw new Error(`rollout server ${base}: POST /completions answered ${r.status}: ${r.text.slice(0, 300)}`);
    const json = r.json as CompletionResponse | undefined;
    if (!json || !Array.isArray(json.choices) || json.choices.length === 0) throw new CompletionFormatError(`rollout server ${base}: POST /completions answered without choices`);
    readTokenCompletion(json, `rollout server ${base}`);
  }

  dispose(): void {
    rmSync(this.weightsDir, { recursive: true, force: true });
  }
}
