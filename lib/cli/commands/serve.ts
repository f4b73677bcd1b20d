/**
 * `sinkflex serve --checkpoint <run-or-checkpoint>` or `--model-dir <Hugging Face folder>`:
 * parses the flags and starts {@link serve} (lib/trainer/serve-model.ts), a model over an
 * OpenAI-compatible HTTP API, until SIGINT or SIGTERM.
 * @module
 */
import type { Command } from 'commander';

import type { HfDtypeOption } from '../../model/index.js';
import type { DeviceRequest } from '../../native/index.js';
import { serve, type ServeOptions } from '../../trainer/serve-model.js';

export { adminLogLine, resolveToolsSection, serve, type ServeOptions } from '../../trainer/serve-model.js';

function int(v: string): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`expected a non-negative integer, got ${v}`);
  return n;
}

/** Registers `serve`. */
export function registerServe(program: Command): void {
  program
    .command('serve')
    .description(
      'serve the built-in policy or a pretrained model over an OpenAI-compatible HTTP API (/v1/models, /v1/chat/completions, /v1/completions, /v1/load_lora_adapter, /update_weights_from_disk)',
    )
    .option('--checkpoint <path>', 'checkpoint file (.safetensors) or run folder (its newest checkpoint)')
    .option(
      '--model-dir <dir>',
      "a Hugging Face model folder (gpt-oss, Qwen3, Qwen2, Llama) instead, with its chat format; with --checkpoint of a pretrained model's run: its base folder at a new place",
    )
    .option('--device <device>', 'cpu | cuda | auto (--model-dir)', 'cpu')
    .option('--dtype <dtype>', 'auto | float32 | bfloat16: how --model-dir weights are held', 'auto')
    .option('--host <host>', 'host to listen on', '127.0.0.1')
    .option('--port <port>', 'port (0: any free one)', int, 8000)
    .option('--model-name <name>', 'the model name clients ask for', 'sinkflex')
    .option('--api-key <key>', 'require this bearer token')
    .option('--max-tokens <n>', 'default max tokens per reply', int)
    .option(
      '--tools-section <mode>',
      'render request tools into the prompt: auto (as the run trained), on, off',
      'auto',
    )
    .option('--no-adapters', 'pretrained models: no runtime LoRA adapters (/v1/load_lora_adapter answers 404)')
    .option('--max-adapters <n>', 'pretrained models: most LoRA adapters loaded at once', int, 8)
    .option(
      '--generation-config <mode>',
      "completions: auto (a field a request leaves out takes the model's generation_config.json default, as vLLM's --generation-config auto) or vllm (neutral defaults)",
      'auto',
    )
    .option(
      '--logprobs-mode <mode>',
      "completions' log-probs, as vLLM's --logprobs-mode: processed_logprobs (after the penalties, temperature and truncation) or raw_logprobs (the model's own, before the temperature; vLLM's default)",
      'processed_logprobs',
    )
    .option('--quiet', 'do not log requests (completions, adapter loads and unloads, weight reloads)')
    .action(
      async (o: {
        checkpoint?: string;
        modelDir?: string;
        device: string;
        dtype: string;
        host: string;
        port: number;
        modelName: string;
        apiKey?: string;
        maxTokens?: number;
        toolsSection: string;
        adapters: boolean;
        maxAdapters: number;
        generationConfig: string;
        logprobsMode: string;
        quiet?: boolean;
      }) => {
        if (o.logprobsMode !== 'raw_logprobs' && o.logprobsMode !== 'processed_logprobs')
          throw new Error(
            `--logprobs-mode must be raw_logprobs or processed_logprobs, got ${JSON.stringify(o.logprobsMode)}`,
          );
        const s = await serve({
          checkpoint: o.checkpoint,
          modelDir: o.modelDir,
          device: o.device as DeviceRequest,
          dtype: o.dtype as HfDtypeOption,
          host: o.host,
          port: o.port,
          modelName: o.modelName,
          apiKey: o.apiKey,
          maxTokens: o.maxTokens,
          toolsSection: o.toolsSection as ServeOptions['toolsSection'],
          log: !o.quiet,
          generationConfig: o.generationConfig as 'auto' | 'vllm',
          logprobsMode: o.logprobsMode,
          ...(o.adapters ? { maxAdapters: o.maxAdapters } : { adapters: false }),
        });
        console.log(
          `serving ${s.checkpoint} as '${o.modelName}' at ${s.baseURL}${s.renderTools ? '' : ' (request tools are not rendered into the prompt; tool calls are parsed)'}${s.adapters ? '; runtime LoRA adapters on (POST /v1/load_lora_adapter)' : ''}`,
        );
        const stop = (): void => {
          void s.dispose().then(() => process.exit(0));
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      },
    );
}
