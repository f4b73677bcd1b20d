/**
 * `sinkflex serve --checkpoint <run-or-checkpoint>`: the built-in policy over an
 * OpenAI-compatible HTTP API (see lib/openai/server.ts); `--model-dir <dir>` serves a pretrained
 * Hugging Face model instead, with its own chat format (Jinja template or harmony) and runtime
 * LoRA adapters (PEFT folders, through a {@link PretrainedAdapterHost}; `--no-adapters` turns
 * them off). A training run (or one of its
 * checkpoints) is served with the run's prompt format: a run trained without the tools section
 * in its prompt (`prompt.renderTools = false`) gets no tools section from requests either
 * (their `tools` are ignored for the prompt; the tool calls it makes are parsed as always).
 *
 * Besides chat completions it serves token-in/token-out `/v1/completions`, the models list and
 * `POST /update_weights_from_disk` (the built-in policy reloads a checkpoint of the same run in
 * place), so that a trainer's rollouts run on it (`rollout.engine: 'openai'`); the runtime LoRA
 * routes answer for `--model-dir` and for a LoRA run of a pretrained model (adapters of the
 * run's settings, each replacing the run's own adapter for the requests that name it), or when
 * an adapter host is given.
 * @module
 */
import type { Command } from 'commander';

import type { ChatFormat } from '../../model/chat-format.js';
import type { HfDtypeOption } from '../../model/hf/load.js';
import { loadPretrained, type PretrainedModel } from '../../model/hf/pretrained.js';
import type { GenerativeModel } from '../../model/policy.js';
import type { DeviceRequest } from '../../native/device.js';
import { PretrainedAdapterHost } from '../../openai/lora-host.js';
import { transformerWeightsHost, type AdapterHost, type WeightsHost } from '../../openai/model-hosts.js';
import { generationConfigDefaults, type SamplingDefaults } from '../../openai/sampling-defaults.js';
import { startChatServer, type ChatServer } from '../../openai/server.js';
import type { AdminEvent } from '../../openai/serving-routes.js';
import { loadPolicy } from '../../trainer/load-policy.js';

/** Options of {@link serve}. */
export interface ServeOptions {
  /** Checkpoint file or run folder (or give `modelDir`). */
  checkpoint?: string;
  /** A Hugging Face model folder to serve instead of a checkpoint. */
  modelDir?: string;
  /** Where the model of `modelDir` runs (default cpu). */
  device?: DeviceRequest;
  /** How the model of `modelDir` holds its weights (default auto). */
  dtype?: HfDtypeOption;
  /** Host. Default 127.0.0.1. */
  host?: string;
  /** Port. Default 8000. */
  port?: number;
  /** Model name. Default `sinkflex`. */
  modelName?: string;
  /** Required API key, when set. */
  apiKey?: string;
  /** Default max tokens per reply. */
  maxTokens?: number;
  /** Log each request to stderr. */
  log?: boolean;
  /**
   * Whether request tools are rendered into the prompt: `auto` (default) as the run trained
   * (`prompt.renderTools`; on for a bare checkpoint file), `on` or `off`.
   */
  toolsSection?: 'auto' | 'on' | 'off';
  /**
   * Runtime LoRA adapters (`/v1/load_lora_adapter`): a host of the caller's, `false` for none
   * (those routes answer 404), or by default a {@link PretrainedAdapterHost} for a pretrained
   * model (`modelDir`, or a LoRA run of one) and none for the built-in model.
   */
  adapters?: AdapterHost | false;
  /** Most adapters loaded at once by the default host (default 8). */
  maxAdapters?: number;
  /**
   * vLLM's `--generation-config`: `auto` (default) gives the completion fields a request leaves
   * out the model's `generation_config.json` defaults, as vLLM does; `vllm` gives neutral defaults.
   */
  generationConfig?: 'auto' | 'vllm';
  /** vLLM's `--logprobs-mode` for completions (default `processed_logprobs`; vLLM's own default is `raw_logprobs`). */
  logprobsMode?: 'raw_logprobs' | 'processed_logprobs';
}

/** Whether tools are rendered for `mode` and a run's prompt format (null: not a run). */
export function resolveToolsSection(mode: ServeOptions['toolsSection'], runRenderTools: boolean | null): boolean {
  switch (mode ?? 'auto') {
    case 'auto':
      return runRenderTools ?? true;
    case 'on':
      return true;
    case 'off':
      return false;
    default:
      throw new Error(`--tools-section must be auto, on or off, got ${JSON.stringify(mode)}`);
  }
}

/** What is served: a policy, its chat format, where it comes from. */
interface Served {
  policy: GenerativeModel;
  template: ChatFormat;
  checkpoint: string;
  runRenderTools: boolean | null;
  /** In-place full-weight reloads (`/update_weights_from_disk`): built-in checkpoints only. */
  weights: WeightsHost | null;
  /** Runtime LoRA adapters. */
  adapters: AdapterHost | null;
  /** The model's `generation_config.json` (null: none, e.g. the built-in model). */
  generationConfig: Readonly<Record<string, unknown>> | null;
  dispose(): void;
}

/** The default adapter host of a pretrained model (null when `options.adapters` is false). */
function defaultHost(m: PretrainedModel, options: ServeOptions): PretrainedAdapterHost | null {
  if (options.adapters === false) return null;
  return new PretrainedAdapterHost(m, options.maxAdapters !== undefined ? { maxAdapters: options.maxAdapters } : {});
}

async function loadServed(options: ServeOptions): Promise<Served> {
  if (options.modelDir !== undefined && options.checkpoint === undefined) {
    const m = await loadPretrained(options.modelDir, { device: options.device ?? 'cpu', dtype: options.dtype ?? 'auto' });
    try {
      const host = options.adapters ? null : defaultHost(m, options);
      const adapters = options.adapters || host;
      // requests for the base model go through the host too: it decides what the LoRA slots hold
      return { policy: host ? host.base : m.policy, template: m.chat, checkpoint: options.modelDir, runRenderTools: null, weights: null, adapters, generationConfig: m.generationConfig, dispose: () => m.dispose() };
    } catch (e) {
      m.dispose();
      throw e;
    }
  }
  if (options.checkpoint === undefined) throw new Error('serve needs --checkpoint or --model-dir');
  // with --model-dir: the base folder of a pretrained model's run, moved (its fingerprint must match)
  const b = await loadPolicy(options.checkpoint, options.modelDir !== undefined ? { modelDir: options.modelDir } : {});
  try {
    const host = !options.adapters && b.pretrained && b.pretrained.lora !== null ? defaultHost(b.pretrained, options) : null;
    const adapters = options.adapters || host;
    return {
      policy: host ? host.base : b.policy,
      template: b.template,
      checkpoint: b.checkpoint,
      runRenderTools: b.run ? b.run.prompt.renderTools : null,
      weights: b.pretrained ? null : transformerWeightsHost(b.policy),
      adapters,
      generationConfig: b.pretrained ? b.pretrained.generationConfig : null,
      dispose: () => b.dispose(),
    };
  } catch (e) {
    b.dispose();
    throw e;
  }
}

/**
 * The log line of an adapter load or unload or a weight reload: the time, the route, the name
 * and path (quoted as JSON), the status, the milliseconds, and why it was refused, e.g.
 * `2025-01-01T00:00:00.000Z load_lora_adapter "run-step-3" "/runs/r/adapters/step-3" 200 41 ms`.
 */
export function adminLogLine(i: AdminEvent): string {
  const what = [i.name, i.path].filter((x): x is string => x !== null).map((x) => JSON.stringify(x));
  return `${new Date().toISOString()} ${i.action} ${[...what, String(i.status)].join(' ')} ${i.ms.toFixed(0)} ms${i.error !== null ? `: ${i.error}` : ''}`;
}

/** The completion defaults of `--generation-config` (`auto`: the model's, as vLLM takes them; `vllm`: none). */
function generationDefaults(mode: 'auto' | 'vllm', generationConfig: Readonly<Record<string, unknown>> | null): SamplingDefaults {
  if (mode !== 'auto' && mode !== 'vllm') throw new Error(`--generation-config must be auto or vllm, got ${JSON.stringify(mode)}`);
  return mode === 'auto' ? generationConfigDefaults(generationConfig) : {};
}

/** Loads the checkpoint (or model folder) and starts the server (the caller disposes it, which also frees the policy). */
export async function serve(options: ServeOptions): Promise<ChatServer & { checkpoint: string; renderTools: boolean; adapters: AdapterHost | null }> {
  const b = await loadServed(options);
  try {
    const renderTools = resolveToolsSection(options.toolsSection, b.runRenderTools);
    const server = await startChatServer({
      policy: b.policy,
      template: b.template,
      renderTools,
      ...(b.weights ? { weights: b.weights } : {}),
      ...(b.adapters ? { adapters: b.adapters } : {}),
      samplingDefaults: generationDefaults(options.generationConfig ?? 'auto', b.generationConfig),
      ...(options.logprobsMode ? { logprobsMode: options.logprobsMode } : {}),
      host: options.host,
      port: options.port,
      modelName: options.modelName,
      apiKey: options.apiKey,
      ...(options.maxTokens !== undefined ? { defaultMaxTokens: options.maxTokens } : {}),
      ...(options.log
        ? {
            onRequest: (i) => process.stderr.write(`${new Date().toISOString()} ${i.status} ${i.ms.toFixed(0)} ms prompt ${i.promptTokens} completion ${i.completionTokens}${i.continued ? ' (session)' : ''}\n`),
            onAdmin: (i) => process.stderr.write(`${adminLogLine(i)}\n`),
          }
        : {}),
    });
    const dispose = async (): Promise<void> => {
      await server.dispose();
      b.dispose();
    };
    return { ...server, checkpoint: b.checkpoint, renderTools, adapters: b.adapters, dispose, [Symbol.asyncDispose]: dispose };
  } catch (e) {
    b.dispose();
    throw e;
  }
}

function int(v: string): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`expected a non-negative integer, got ${v}`);
  return n;
}

/** Registers `serve`. */
export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('serve the built-in policy or a pretrained model over an OpenAI-compatible HTTP API (/v1/models, /v1/chat/completions, /v1/completions, /v1/load_lora_adapter, /update_weights_from_disk)')
    .option('--checkpoint <path>', 'checkpoint file (.safetensors) or run folder (its newest checkpoint)')
    .option('--model-dir <dir>', 'a Hugging Face model folder (gpt-oss, Qwen3, Qwen2, Llama) instead, with its chat format; with --checkpoint of a pretrained model\'s run: its base folder at a new place')
    .option('--device <device>', 'cpu | cuda | auto (--model-dir)', 'cpu')
    .option('--dtype <dtype>', 'auto | float32 | bfloat16: how --model-dir weights are held', 'auto')
    .option('--host <host>', 'host to listen on', '127.0.0.1')
    .option('--port <port>', 'port (0: any free one)', int, 8000)
    .option('--model-name <name>', 'the model name clients ask for', 'sinkflex')
    .option('--api-key <key>', 'require this bearer token')
    .option('--max-tokens <n>', 'default max tokens per reply', int)
    .option('--tools-section <mode>', "render request tools into the prompt: auto (as the run trained), on, off", 'auto')
    .option('--no-adapters', 'pretrained models: no runtime LoRA adapters (/v1/load_lora_adapter answers 404)')
    .option('--max-adapters <n>', 'pretrained models: most LoRA adapters loaded at once', int, 8)
    .option('--generation-config <mode>', "completions: auto (a field a request leaves out takes the model's generation_config.json default, as vLLM's --generation-config auto) or vllm (neutral defaults)", 'auto')
    .option('--logprobs-mode <mode>', "completions' log-probs, as vLLM's --logprobs-mode: processed_logprobs (after the penalties, temperature and truncation) or raw_logprobs (the model's own, before the temperature; vLLM's default)", 'processed_logprobs')
    .option('--quiet', 'do not log requests (completions, adapter loads and unloads, weight reloads)')
    .action(async (o: { checkpoint?: string; modelDir?: string; device: string; dtype: string; host: string; port: number; modelName: string; apiKey?: string; maxTokens?: number; toolsSection: string; adapters: boolean; maxAdapters: number; generationConfig: string; logprobsMode: string; quiet?: boolean }) => {
      if (o.logprobsMode !== 'raw_logprobs' && o.logprobsMode !== 'processed_logprobs') throw new Error(`--logprobs-mode must be raw_logprobs or processed_logprobs, got ${JSON.stringify(o.logprobsMode)}`);
      const s = await serve({ checkpoint: o.checkpoint, modelDir: o.modelDir, device: o.device as DeviceRequest, dtype: o.dtype as HfDtypeOption, host: o.host, port: o.port, modelName: o.modelName, apiKey: o.apiKey, maxTokens: o.maxTokens, toolsSection: o.toolsSection as ServeOptions['toolsSection'], log: !o.quiet, generationConfig: o.generationConfig as 'auto' | 'vllm', logprobsMode: o.logprobsMode, ...(o.adapters ? { maxAdapters: o.maxAdapters } : { adapters: false }) });
      console.log(`serving ${s.checkpoint} as '${o.modelName}' at ${s.baseURL}${s.renderTools ? '' : ' (request tools are not rendered into the prompt; tool calls are parsed)'}${s.adapters ? '; runtime LoRA adapters on (POST /v1/load_lora_adapter)' : ''}`);
      const stop = (): void => {
        void s.dispose().then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
