/**
 * Serving a model over an OpenAI-compatible HTTP API as `sinkflex serve` does (lib/openai/server.ts):
 * any source {@link openModel} opens — a training run (or one of its checkpoints), a
 * `.safetensors` file, a Hugging Face model folder — with its chat format. A training run is
 * served with the run's prompt format: a run trained without the tools section in its prompt
 * (`prompt.renderTools = false`) gets no tools section from requests either (their `tools` are
 * ignored for the prompt; the tool calls it makes are parsed as always).
 *
 * Besides chat completions it serves token-in/token-out `/v1/completions`, the models list and
 * `POST /update_weights_from_disk` (the built-in policy reloads a checkpoint of the same run in
 * place), so that a trainer's rollouts run on it (`rollout.engine: 'openai'`); the runtime LoRA
 * routes answer where the model takes adapters ({@link ModelHandle.adapterHost}: a Hugging Face
 * model folder, or a LoRA run of one, each adapter replacing the run's own for the requests that
 * name it), or when an adapter host is given.
 * @module
 */
import type { ChatFormat } from '../chat/index.js';
import type { GenerativeModel, HfDtypeOption } from '../model/index.js';
import type { DeviceRequest } from '../native/index.js';
import {
  generationConfigDefaults,
  startChatServer,
  type AdapterHost,
  type AdminEvent,
  type ChatServer,
  type SamplingDefaults,
  type WeightsHost,
} from '../openai/index.js';
import type { ModelHandle } from './model-handle.js';
import { openModel } from './open-model.js';

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
   * (those routes answer 404), or by default the model's own ({@link ModelHandle.adapterHost}:
   * a Hugging Face model folder or a LoRA run of one; none for the built-in model).
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
  chat: ChatFormat;
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

async function loadServed(options: ServeOptions): Promise<Served> {
  const source = options.checkpoint ?? options.modelDir;
  if (source === undefined) throw new Error('serve needs --checkpoint or --model-dir');
  // with --checkpoint, --model-dir is the base folder of a Hugging Face model's run, moved (its fingerprint must match)
  const modelDir =
    options.checkpoint !== undefined && options.modelDir !== undefined ? { modelDir: options.modelDir } : {};
  const model: ModelHandle = await openModel(source, {
    device: options.device ?? 'cpu',
    dtype: options.dtype ?? 'auto',
    ...modelDir,
  });
  try {
    // the model's own host unless the caller gave one or none; requests for the base model go through it too: it decides what the LoRA slots hold
    const host =
      options.adapters === undefined
        ? model.adapterHost(options.maxAdapters !== undefined ? { maxAdapters: options.maxAdapters } : {})
        : null;
    return {
      policy: host ? host.base : model.policy,
      chat: model.chat,
      checkpoint: model.source ?? source,
      runRenderTools: model.run ? model.run.prompt.renderTools : null,
      weights: model.weightsHost(),
      adapters: options.adapters || host,
      generationConfig: model.generationConfig,
      dispose: () => model.dispose(),
    };
  } catch (e) {
    model.dispose();
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
function generationDefaults(
  mode: 'auto' | 'vllm',
  generationConfig: Readonly<Record<string, unknown>> | null,
): SamplingDefaults {
  if (mode !== 'auto' && mode !== 'vllm')
    throw new Error(`--generation-config must be auto or vllm, got ${JSON.stringify(mode)}`);
  return mode === 'auto' ? generationConfigDefaults(generationConfig) : {};
}

/** Loads the checkpoint (or model folder) and starts the server (the caller disposes it, which also frees the policy). */
export async function serve(
  options: ServeOptions,
): Promise<ChatServer & { checkpoint: string; renderTools: boolean; adapters: AdapterHost | null }> {
  const b = await loadServed(options);
  try {
    const renderTools = resolveToolsSection(options.toolsSection, b.runRenderTools);
    const server = await startChatServer({
      policy: b.policy,
      chat: b.chat,
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
            onRequest: (i) =>
              process.stderr.write(
                `${new Date().toISOString()} ${i.status} ${i.ms.toFixed(0)} ms prompt ${i.promptTokens} completion ${i.completionTokens}${i.continued ? ' (session)' : ''}\n`,
              ),
            onAdmin: (i) => process.stderr.write(`${adminLogLine(i)}\n`),
          }
        : {}),
    });
    const dispose = async (): Promise<void> => {
      await server.dispose();
      b.dispose();
    };
    return {
      ...server,
      checkpoint: b.checkpoint,
      renderTools,
      adapters: b.adapters,
      dispose,
      [Symbol.asyncDispose]: dispose,
    };
  } catch (e) {
    b.dispose();
    throw e;
  }
}
