/**
 * `sinkflex eval`: parses the flags and runs {@link runEval} (lib/trainer/eval-run.ts): tau
 * episodes with a model in process (`--checkpoint`, or a Hugging Face model folder
 * `--model-dir`) or an OpenAI-compatible server, n trials per task; prints mean reward and
 * pass^k (a table, or `--json`) overall and per task kind, optionally exporting the
 * trajectories as JSONL.
 * @module
 */
import { Option, type Command } from 'commander';

import type { HfDtypeOption } from '../../model/index.js';
import type { DeviceRequest } from '../../native/index.js';
import type { RoutingPolicy } from '../../openai/index.js';
import { abortReasons, formatEvalReport } from '../../trainer/eval-report.js';
import { runEval } from '../../trainer/eval-run.js';

export {
  abortReasons,
  evalProblem,
  formatEvalReport,
  formatKindTable,
  type EvalReport,
} from '../../trainer/eval-report.js';
export { openaiCheckpointProblem, runEval, type EvalOptions } from '../../trainer/eval-run.js';

/** A one-line progress bar on stderr (redrawn on a TTY, every 10% otherwise). */
export function progressBar(
  stream: Pick<NodeJS.WriteStream, 'write' | 'isTTY'> = process.stderr,
): (done: number, total: number) => void {
  let lastPct = -1;
  let last = -1;
  return (done, total) => {
    if (done === last) return; // the evaluation reports its end again once all episodes are in
    last = done;
    const pct = Math.floor((100 * done) / total);
    const bar = '#'.repeat(Math.round((30 * done) / total)).padEnd(30, '.');
    if (stream.isTTY) stream.write(`\r[${bar}] ${done}/${total} episodes${done === total ? '\n' : ''}`);
    else if (pct >= lastPct + 10 || done === total) {
      lastPct = pct;
      stream.write(`[${bar}] ${done}/${total} episodes\n`);
    }
  };
}

function num(v: string): number {
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`expected a number, got ${v}`);
  return n;
}

/** Registers `eval`. */
export function registerEval(program: Command): void {
  program
    .command('eval')
    .description(
      'evaluate a policy (built-in checkpoint or OpenAI-compatible server) on tau tasks: mean reward and pass^k',
    )
    .option('--policy <kind>', 'builtin | openai', 'builtin')
    .option(
      '--checkpoint <path>',
      'checkpoint file or run folder (builtin; with openai: the chat template of a sinkflex serve server)',
    )
    .option(
      '--model-dir <dir>',
      "a Hugging Face model folder (gpt-oss, Qwen3, Qwen2, Llama) run in process with its chat format; with --checkpoint of a pretrained model's run: its base folder at a new place",
    )
    .option('--device <device>', 'cpu | cuda | auto (--model-dir)', 'cpu')
    .option('--dtype <dtype>', 'auto | float32 | bfloat16: how --model-dir weights are held', 'auto')
    .addOption(
      new Option('--base-url <url>', 'OpenAI-compatible base URL (repeatable)')
        .argParser((v: string, prev: string[]) => [...prev, v])
        .default([] as string[], 'env OPENAI_BASE_URL, else https://api.openai.com/v1'),
    )
    .option('--model <name>', 'model name (openai)')
    .option('--api-key <key>', 'API key (default env OPENAI_API_KEY)')
    .option('--timeout-ms <ms>', 'per-call timeout', num, 60000)
    .option('--retries <n>', 'retries per call', num, 3)
    .option('--max-in-flight <n>', 'requests in flight at most', num, 32)
    .option('--routing <policy>', 'round-robin | least-busy', 'least-busy')
    .option(
      '--max-connection-failures <n>',
      'stop calling the server after n calls in a row failed to reach it (0: never)',
      num,
      5,
    )
    .option('--server-sessions <mode>', 'auto | on | off (sinkflex serve session continuation)', 'auto')
    .option('--user <kind>', 'scripted | llm', 'scripted')
    .option('--user-base-url <url>', 'LLM user endpoint')
    .option('--user-model <name>', 'LLM user model')
    .option('--user-api-key <key>', 'LLM user API key')
    .option(
      '--env <id>',
      "sinkflex/TauRetail-v0 | sinkflex/TauTelecom-v0 | sinkflex/TauAirline-v0 (default: the run's, else sinkflex/TauRetail-v0)",
    )
    .option(
      '--tasks <source>',
      "'generated', a tau2 domain folder, or 'run' (the validation tasks of the --checkpoint's training run; the default for a run; airline: default $SINKFLEX_TAU2_DIR/airline)",
    )
    .option('--split <name>', 'tau2 task split')
    .option('--task-count <n>', 'generated tasks', num, 20)
    .option('--task-seed <n>', 'seed of the generated tasks', num, 0)
    .option('--limit-tasks <n>', 'evaluate only the first n tasks', num)
    .option('--trials <n>', "trials per task (default: the run's validation trials, else 1)", num)
    .option('--k <list>', 'pass^k values, comma-separated (default 1..trials)')
    .option('--seed <n>', "seed (default: the run's validation seed, else 0)", num)
    .option('--concurrency <n>', 'episodes in flight', num, 4)
    .option('--max-turns <n>', "assistant turns per episode (default: the run's, else 30)", num)
    .option('--max-tokens-per-turn <n>', "tokens per assistant turn (default: the run's, else 512)", num)
    .option('--max-context <n>', 'tokens per episode')
    .option('--temperature <t>', "sampling temperature (default: the run's validation temperature, else 1)", num)
    .option('--top-p <p>', 'nucleus mass', num, 1)
    .option('--episode-retries <n>', 'reruns of an aborted episode', num, 1)
    .option('--system-prompt <text>', 'system prompt (default: the environment instructions and policy)')
    .option('--no-tools-section', 'do not render the tools section in the prompt (the tools stay callable)')
    .option('--export <file>', 'write the trajectories as JSONL (OpenAI chat format)')
    .option('--json', 'print the report as JSON')
    .option('--no-progress', 'no progress bar')
    .action(async (f: Record<string, unknown>) => {
      const report = await runEval({
        policy: f.policy as 'builtin' | 'openai',
        checkpoint: f.checkpoint as string | undefined,
        modelDir: f.modelDir as string | undefined,
        device: f.device as DeviceRequest,
        dtype: f.dtype as HfDtypeOption,
        baseURL: f.baseUrl as string[],
        model: f.model as string | undefined,
        apiKey: f.apiKey as string | undefined,
        timeoutMs: f.timeoutMs as number,
        retries: f.retries as number,
        maxInFlight: f.maxInFlight as number,
        routing: f.routing as RoutingPolicy,
        maxConnectionFailures: f.maxConnectionFailures as number,
        serverSessions: f.serverSessions as 'auto' | 'on' | 'off',
        user: f.user as 'scripted' | 'llm',
        userBaseURL: f.userBaseUrl as string | undefined,
        userModel: f.userModel as string | undefined,
        userApiKey: f.userApiKey as string | undefined,
        env: f.env as string | undefined,
        tasks: f.tasks as string | undefined,
        split: f.split as string | undefined,
        taskCount: f.taskCount as number,
        taskSeed: f.taskSeed as number,
        limitTasks: f.limitTasks as number | undefined,
        trials: f.trials as number | undefined,
        k: typeof f.k === 'string' ? f.k.split(',').map(num) : undefined,
        seed: f.seed as number | undefined,
        concurrency: f.concurrency as number,
        maxTurns: f.maxTurns as number | undefined,
        maxTokensPerTurn: f.maxTokensPerTurn as number | undefined,
        maxContextTokens: f.maxContext !== undefined ? num(f.maxContext as string) : undefined,
        temperature: f.temperature as number | undefined,
        topP: f.topP as number,
        episodeRetries: f.episodeRetries as number,
        export: f.export as string | undefined,
        systemPrompt: f.systemPrompt as string | undefined,
        ...(f.toolsSection === false ? { renderTools: false } : {}),
        ...(f.progress !== false && !f.json ? { onProgress: progressBar() } : {}),
      });
      if (f.json) {
        const { episodes, ...rest } = report;
        console.log(
          JSON.stringify(
            {
              ...rest,
              episodes: episodes.map((e) => ({
                task_id: e.taskId,
                trial: e.sampleIndex,
                seed: e.seed,
                reward: e.reward,
                termination: e.termination,
                turns: e.numTurns,
                aborted: e.aborted,
                error: e.error,
              })),
            },
            null,
            2,
          ),
        );
      } else console.log(formatEvalReport(report));
      // why episodes aborted, and a failed evaluation's exit status, also with --json (stderr)
      for (const line of abortReasons(report.episodes)) console.error(line);
      if (report.problem) {
        console.error(`sinkflex eval: the evaluation did not really run: ${report.problem}`);
        process.exitCode = 1;
      }
    });
}
