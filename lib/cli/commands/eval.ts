/**
 * `sinkflex eval`: runs tau episodes with the built-in policy (a checkpoint, in process), a
 * pretrained Hugging Face model (`--model-dir`, in process, with the model's chat format) or an
 * OpenAI-compatible server, n trials per task, and reports mean reward and pass^k (a table, or
 * `--json`) overall and per task kind, optionally exporting the trajectories as JSONL.
 * @module
 */
import { Option, type Command } from 'commander';

import { createTauEnv } from '../../gym/envs/tau.js';
import { loadTauWorld, type TauTaskSource, type TauWorld } from '../../gym/envs/tau-world.js';
import type { ChatFormat } from '../../model/chat-format.js';
import { ChatTemplate, trainChatTokenizer } from '../../model/chat-template.js';
import type { HfDtypeOption } from '../../model/hf/load.js';
import { type PretrainedModel, loadPretrained } from '../../model/hf/pretrained.js';
import type { DeviceRequest } from '../../native/device.js';
import { OpenAIChatClient, type RoutingPolicy } from '../../openai/client.js';
import { OpenAIChatPolicy } from '../../openai/policy.js';
import { ChatTokenPolicy } from '../../rollout/chat-token-policy.js';
import { evaluatePolicy, type EvaluationResult } from '../../rollout/evaluate.js';
import { ModelPolicyAdapter } from '../../rollout/model-token-policy.js';
import type { TokenPolicy } from '../../rollout/policy.js';
import { writeTrajectories } from '../../rollout/trajectory-export.js';
import { taskKind } from '../../tau/task-kind.js';
import { loadPolicy, type LoadedPolicy } from '../../trainer/load-policy.js';
import { buildWorld, trainEnvFactory } from '../../trainer/world.js';

/** The environments `sinkflex eval --env` runs, with their tau domains. */
const EVAL_DOMAINS: Readonly<Record<string, 'retail' | 'telecom' | 'airline'>> = {
  'sinkflex/TauRetail-v0': 'retail',
  'sinkflex/TauTelecom-v0': 'telecom',
  'sinkflex/TauAirline-v0': 'airline',
};

/** Options of {@link runEval} (the CLI flags). */
export interface EvalOptions {
  /** `builtin` (a checkpoint in process) or `openai` (a server). */
  policy: 'builtin' | 'openai';
  /** Checkpoint file or run folder (builtin; with openai it gives the chat template of a `sinkflex serve` server). */
  checkpoint?: string;
  /** A Hugging Face model folder run in process instead of a checkpoint (builtin policy only). */
  modelDir?: string;
  /** Where the model of `modelDir` runs (default cpu). */
  device?: DeviceRequest;
  /** How the model of `modelDir` holds its weights (default auto: as the file stores them). */
  dtype?: HfDtypeOption;
  /** Base URLs of the servers (openai). */
  baseURL?: string[];
  /** Model name (openai). */
  model?: string;
  /** API key (openai). */
  apiKey?: string;
  /** Per-call timeout in ms. Default 60000. */
  timeoutMs?: number;
  /** Retries per call. Default 3. */
  retries?: number;
  /** First backoff in ms. Default 500. */
  backoffMs?: number;
  /** Requests in flight at most. Default 32. */
  maxInFlight?: number;
  /** Routing over base URLs. Default least-busy. */
  routing?: RoutingPolicy;
  /** Stop calling the server after this many calls in a row failed to reach it (0: never). Default 5. */
  maxConnectionFailures?: number;
  /** Session continuation and token ids from the server: `auto` (on for a `sinkflex serve` server), `on`, `off`. Default auto. */
  serverSessions?: 'auto' | 'on' | 'off';
  /** User simulator. Default scripted. */
  user?: 'scripted' | 'llm';
  /** LLM user endpoint and model. */
  userBaseURL?: string;
  userModel?: string;
  userApiKey?: string;
  /** Environment id. Default `sinkflex/TauRetail-v0`. */
  env?: string;
  /**
   * `generated`, a tau2 domain folder, or `run` (the held-out validation tasks of the training
   * run of `checkpoint`). Default `run` when the checkpoint is a training run, else generated.
   */
  tasks?: string;
  /** tau2 split. */
  split?: string;
  /** Generated tasks: how many (default 20) and their seed (default 0). */
  taskCount?: number;
  taskSeed?: number;
  /** Evaluate only the first N tasks. */
  limitTasks?: number;
  /** Trials per task. Default 1 (a training run: its validation trials). */
  trials?: number;
  /** pass^k values. Default 1..trials. */
  k?: number[];
  /** Seed. Default 0 (a training run: its validation seed). */
  seed?: number;
  /** Episodes in flight. Default 4. */
  concurrency?: number;
  /** Episode limits (default 30 turns, 512 tokens per turn; a training run: its rollout limits). */
  maxTurns?: number;
  maxTokensPerTurn?: number;
  maxContextTokens?: number;
  /** Sampling. Default temperature 1 (a training run: its validation temperature), top-p 1. */
  temperature?: number;
  topP?: number;
  /** Reruns of aborted episodes. Default 1. */
  episodeRetries?: number;
  /** The system prompt (default the environment's instructions + policy). */
  systemPrompt?: string;
  /** Render the tools section in the prompt (default true; a training run: as it trained). */
  renderTools?: boolean;
  /** Write trajectories (JSONL) here. */
  export?: string;
  /** Progress callback. */
  onProgress?: (done: number, total: number) => void;
}

/** What {@link runEval} returns: the evaluation plus what was run. */
export interface EvalReport extends EvaluationResult {
  /** The policy kind and model. */
  policy: string;
  /** The environment id. */
  env: string;
  /** Tasks evaluated. */
  tasks: number;
  /** Trials per task. */
  trials: number;
  /** Lines written by `--export`. */
  exported?: number;
  /** The server's reachability (openai policy): calls that failed to connect, and why the client stopped early (or null). */
  connection?: { failures: number; stopped: string | null };
  /**
   * Why the evaluation could not really run (every episode aborted, or episodes aborted while
   * the server could not be reached), or null. The CLI exits non-zero when it is set.
   */
  problem: string | null;
}

/** Why `r` is not a real evaluation (see {@link EvalReport.problem}), or null. */
export function evalProblem(r: { episodes: readonly unknown[]; aborted: number; connection?: EvalReport['connection'] }): string | null {
  const n = r.episodes.length;
  const c = r.connection;
  if (c?.stopped) return `${r.aborted} of ${n} episodes aborted; ${c.stopped}`;
  if (n > 0 && r.aborted === n) return `all ${n} episodes aborted`;
  if (c && c.failures > 0 && r.aborted > 0) return `${r.aborted} of ${n} episodes aborted; ${c.failures} calls failed to reach the server`;
  return null;
}

/** Lines saying why episodes aborted: `<count> episodes aborted: <error>`, most frequent first. */
export function abortReasons(episodes: readonly { aborted: boolean; error: string | null }[], max = 5): string[] {
  const counts = new Map<string, number>();
  for (const e of episodes) {
    if (!e.aborted) continue;
    const why = (e.error ?? 'no error recorded').split('\n')[0].slice(0, 400);
    counts.set(why, (counts.get(why) ?? 0) + 1);
  }
  const rows = [...counts].sort((a, b) => b[1] - a[1]);
  const lines = rows.slice(0, max).map(([why, k]) => `${k} episode${k === 1 ? '' : 's'} aborted: ${why}`);
  if (rows.length > max) lines.push(`(${rows.length - max} more reasons, see --json)`);
  return lines;
}

/** Runs an evaluation as the CLI does. */
export async function runEval(o: EvalOptions): Promise<EvalReport> {
  if (o.modelDir !== undefined && o.checkpoint === undefined) {
    if (o.policy !== 'builtin') throw new Error('--model-dir runs the model in process: use it with --policy builtin (the default)');
    if (o.tasks === 'run') throw new Error('--tasks run needs --checkpoint <training run or checkpoint folder>');
    const m = await loadPretrained(o.modelDir, { device: o.device ?? 'cpu', dtype: o.dtype ?? 'auto' });
    try {
      return await evalWith(o, null, m);
    } finally {
      m.dispose();
    }
  }
  // a training run (or one of its checkpoints) brings its own defaults: environment, the
  // validation tasks, the prompt format, episode limits and the validation temperature
  // with --model-dir: the base folder of a pretrained model's run, moved (its fingerprint must match)
  const loaded: LoadedPolicy | null = o.checkpoint ? await loadPolicy(o.checkpoint, o.modelDir !== undefined ? { modelDir: o.modelDir } : {}) : null;
  try {
    return await evalWith(o, loaded);
  } finally {
    loaded?.dispose();
  }
}

async function evalWith(o: EvalOptions, loaded: LoadedPolicy | null, pretrained: PretrainedModel | null = null): Promise<EvalReport> {
  const run = loaded?.run ?? null;
  const envId = o.env ?? run?.env ?? 'sinkflex/TauRetail-v0';
  const domain = EVAL_DOMAINS[envId];
  if (!domain) throw new Error(`unknown env ${envId} (${Object.keys(EVAL_DOMAINS).join(', ')})`);
  if (domain === 'airline' && o.user !== 'llm') throw new Error(`${envId} needs --user llm: tau2's airline tasks have no scripted user`);
  const user = o.user === 'llm' ? { kind: 'llm' as const, baseURL: o.userBaseURL, model: o.userModel, apiKey: o.userApiKey, timeoutMs: o.timeoutMs } : { kind: 'scripted' as const };
  if (o.user === 'llm' && !o.userModel) throw new Error('--user llm needs --user-model');
  const tasksArg = o.tasks ?? (run ? 'run' : 'generated');
  let makeEnv: () => ReturnType<typeof createTauEnv>;
  let allIds: readonly string[];
  let world: TauWorld;
  if (tasksArg === 'run') {
    if (!run) throw new Error('--tasks run needs --checkpoint <training run or checkpoint folder>');
    if (run.env !== envId) throw new Error(`--tasks run: the run trained on ${run.env}, not ${envId}`);
    const tw = buildWorld(run.config);
    allIds = tw.valIds;
    world = tw.world;
    makeEnv = o.user === 'llm' ? () => createTauEnv({ world: tw.world, user }) : trainEnvFactory(run.config, tw.world);
  } else {
    const split = o.split ? { split: o.split } : {};
    let source: TauTaskSource;
    if (tasksArg !== 'generated') source = { kind: 'tau2', path: tasksArg, ...split };
    else if (domain !== 'airline') source = { kind: 'generated', seed: o.taskSeed ?? 0, count: o.taskCount ?? 20 };
    else if (o.tasks === undefined) source = { kind: 'tau2', ...split }; // airline has no generator: $SINKFLEX_TAU2_DIR/airline
    else throw new Error(`${envId} has no generated tasks: give --tasks <tau2 airline folder> (and --split)`);
    const loadedWorld = loadTauWorld(domain, source);
    world = loadedWorld;
    allIds = loadedWorld.taskIds;
    makeEnv = () => createTauEnv({ world: loadedWorld, user });
  }
  const taskIds = o.limitTasks !== undefined ? allIds.slice(0, o.limitTasks) : allIds;
  const trials = o.trials ?? run?.config.val.trials ?? 1;
  let policy: TokenPolicy;
  let template: ChatFormat;
  let chat: OpenAIChatPolicy | null = null;
  let client: OpenAIChatClient | null = null;
  let name: string;
  let maxContext = o.maxContextTokens;
  if (o.policy === 'builtin' && pretrained) {
    policy = new ModelPolicyAdapter(pretrained.policy);
    template = pretrained.chat;
    name = `pretrained ${pretrained.architecture} ${pretrained.dir} (${pretrained.device}${pretrained.fallback ? `: ${pretrained.fallback}` : ''})`;
    maxContext ??= pretrained.policy.contextLength;
  } else if (o.policy === 'builtin') {
    if (!loaded) throw new Error('--policy builtin needs --checkpoint (or --model-dir)');
    policy = new ModelPolicyAdapter(loaded.policy);
    template = loaded.template;
    const m = loaded.pretrained;
    name = m ? `pretrained ${m.architecture} ${m.dir}${m.lora ? ' + adapter' : ''} ${loaded.checkpoint}${run ? ` (step ${run.step})` : ''}` : `builtin ${loaded.checkpoint}${run ? ` (step ${run.step})` : ''}`;
    maxContext ??= run?.config.rollout.maxContextTokens ?? loaded.policy.contextLength;
  } else if (o.policy === 'openai') {
    if (!o.model) throw new Error('--policy openai needs --model');
    if (o.maxConnectionFailures !== undefined && (!Number.isSafeInteger(o.maxConnectionFailures) || o.maxConnectionFailures < 0)) throw new Error(`--max-connection-failures must be an integer >= 0, got ${o.maxConnectionFailures}`);
    client = new OpenAIChatClient({ baseURL: o.baseURL && o.baseURL.length > 0 ? o.baseURL : undefined, model: o.model, apiKey: o.apiKey, timeoutMs: o.timeoutMs, retries: o.retries, backoffMs: o.backoffMs, concurrency: o.maxInFlight, routing: o.routing, seed: o.seed ?? 0, maxConsecutiveFailures: o.maxConnectionFailures ?? 5 });
    let sessions = o.serverSessions === 'on';
    if ((o.serverSessions ?? 'auto') === 'auto') {
      try {
        sessions = (await client.listModels()).some((m) => m.id === o.model && m.owned_by === 'sinkflex');
      } catch {
        sessions = false;
      }
    }
    if (loaded) {
      const problem = openaiCheckpointProblem(loaded);
      if (problem) throw new Error(problem);
      template = loaded.template;
      maxContext ??= run?.config.rollout.maxContextTokens ?? loaded.policy.contextLength;
    } else {
      template = new ChatTemplate(trainChatTokenizer(' ', { vocabSize: 262 }));
      maxContext ??= 1 << 20;
    }
    chat = new OpenAIChatPolicy({ client, sessions, tokenIds: sessions && o.checkpoint ? 'template' : 'none', logprobs: sessions });
    policy = new ChatTokenPolicy(chat, template);
    name = `openai ${o.model} @ ${client.baseURLs.join(', ')}${sessions ? ' (sessions)' : ''}`;
  } else throw new Error(`unknown policy ${String(o.policy)} (builtin or openai)`);
  const result = await evaluatePolicy({
    policy,
    template,
    env: makeEnv,
    taskIds,
    trials,
    ...(o.k ? { k: o.k } : {}),
    seed: o.seed ?? run?.config.val.seed ?? 0,
    concurrency: o.concurrency ?? 4,
    limits: { maxTurns: o.maxTurns ?? run?.config.rollout.maxTurns ?? 30, maxTokensPerTurn: o.maxTokensPerTurn ?? run?.config.rollout.maxTokensPerTurn ?? 512, maxContextTokens: maxContext },
    temperature: o.temperature ?? run?.config.val.temperature ?? 1,
    topP: o.topP ?? 1,
    source: `tau-${domain}`,
    taskKind: (id) => taskKind(world.task(id)),
    episodeRetries: o.episodeRetries ?? 1,
    renderTools: o.renderTools ?? run?.prompt.renderTools ?? true,
    ...(o.systemPrompt !== undefined ? { systemPrompt: () => o.systemPrompt as string } : run ? { systemPrompt: run.prompt.systemPrompt } : {}),
    ...(o.onProgress ? { onProgress: o.onProgress } : {}),
  });
  const report: EvalReport = { ...result, policy: name, env: envId, tasks: taskIds.length, trials, problem: null };
  if (client) report.connection = { failures: client.connectionFailures, stopped: client.stopped };
  report.problem = evalProblem(report);
  if (o.export) report.exported = writeTrajectories(o.export, result.episodes, chat ? { turnLog: (r) => chat?.takeTurnLog(r.taskId, r.seed) } : {});
  return report;
}

/** The report as a text table. */
export function formatEvalReport(r: EvalReport): string {
  const rows: [string, string][] = [
    ['policy', r.policy],
    ['env', r.env],
    ['tasks x trials', `${r.tasks} x ${r.trials} = ${r.episodes.length} episodes`],
    ['mean reward', r.meanReward.toFixed(4)],
    ['success rate', r.successRate.toFixed(4)],
    ...Object.entries(r.passHatK).map(([k, v]): [string, string] => [`pass^${k}`, v.toFixed(4)]),
    ['aborted', `${r.aborted} (${r.retried} reruns)`],
    ...(r.connection && r.connection.failures > 0 ? [['connection', `${r.connection.failures} calls failed to reach the server${r.connection.stopped ? '; stopped early' : ''}`] as [string, string]] : []),
    ['terminations', Object.entries(r.terminations).map(([k, v]) => `${k} ${v}`).join(', ')],
    ['time', `${r.seconds.toFixed(1)} s`],
  ];
  if (r.exported !== undefined) rows.push(['exported', `${r.exported} trajectories`]);
  const w = Math.max(...rows.map(([k]) => k.length));
  const text = rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n');
  return r.perKind.length > 0 ? `${text}\n\n${formatKindTable(r.perKind)}` : text;
}

/** The per-kind results as a text table: kind, tasks, episodes, mean reward (mean@1), success rate. */
export function formatKindTable(perKind: EvaluationResult['perKind']): string {
  const head = ['kind', 'tasks', 'episodes', 'mean@1', 'success'];
  const body = perKind.map((k) => [k.kind, String(k.tasks), String(k.episodes), k.meanReward.toFixed(4), (k.episodes > 0 ? k.successes / k.episodes : 0).toFixed(4)]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(head), ...body.map(line)].join('\n');
}

/**
 * Why `--policy openai --checkpoint <path>` cannot use that checkpoint's chat format, or null.
 * With a checkpoint, the client renders the conversation with the checkpoint's own chat format
 * and reads the server's replies back through it (token ids in and out), which only the
 * built-in chat template can do; a pretrained model's run (a Jinja template or harmony) cannot.
 */
export function openaiCheckpointProblem(loaded: Pick<LoadedPolicy, 'template' | 'checkpoint'>): string | null {
  const t = loaded.template as Partial<Pick<ChatTemplate, 'createReader' | 'renderAssistantBody'>>;
  if (typeof t.createReader === 'function' && typeof t.renderAssistantBody === 'function') return null;
  return `--policy openai --checkpoint ${loaded.checkpoint}: the checkpoint is a run of a pretrained model, whose chat format (its Jinja template or harmony) the client cannot use to read the server's replies token for token; evaluate it in process (--policy builtin --checkpoint ${loaded.checkpoint}), or against its server without --checkpoint (--policy openai --model <name> --base-url <url>)`;
}

/** A one-line progress bar on stderr (redrawn on a TTY, every 10% otherwise). */
export function progressBar(stream: Pick<NodeJS.WriteStream, 'write' | 'isTTY'> = process.stderr): (done: number, total: number) => void {
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
    .description('evaluate a policy (built-in checkpoint or OpenAI-compatible server) on tau tasks: mean reward and pass^k')
    .option('--policy <kind>', 'builtin | openai', 'builtin')
    .option('--checkpoint <path>', 'checkpoint file or run folder (builtin; with openai: the chat template of a sinkflex serve server)')
    .option('--model-dir <dir>', 'a Hugging Face model folder (gpt-oss, Qwen3, Qwen2, Llama) run in process with its chat format; with --checkpoint of a pretrained model\'s run: its base folder at a new place')
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
    .option('--max-connection-failures <n>', 'stop calling the server after n calls in a row failed to reach it (0: never)', num, 5)
    .option('--server-sessions <mode>', 'auto | on | off (sinkflex serve session continuation)', 'auto')
    .option('--user <kind>', 'scripted | llm', 'scripted')
    .option('--user-base-url <url>', 'LLM user endpoint')
    .option('--user-model <name>', 'LLM user model')
    .option('--user-api-key <key>', 'LLM user API key')
    .option('--env <id>', 'sinkflex/TauRetail-v0 | sinkflex/TauTelecom-v0 | sinkflex/TauAirline-v0 (default: the run\'s, else sinkflex/TauRetail-v0)')
    .option('--tasks <source>', "'generated', a tau2 domain folder, or 'run' (the validation tasks of the --checkpoint's training run; the default for a run; airline: default $SINKFLEX_TAU2_DIR/airline)")
    .option('--split <name>', 'tau2 task split')
    .option('--task-count <n>', 'generated tasks', num, 20)
    .option('--task-seed <n>', 'seed of the generated tasks', num, 0)
    .option('--limit-tasks <n>', 'evaluate only the first n tasks', num)
    .option('--trials <n>', 'trials per task (default: the run\'s validation trials, else 1)', num)
    .option('--k <list>', 'pass^k values, comma-separated (default 1..trials)')
    .option('--seed <n>', 'seed (default: the run\'s validation seed, else 0)', num)
    .option('--concurrency <n>', 'episodes in flight', num, 4)
    .option('--max-turns <n>', 'assistant turns per episode (default: the run\'s, else 30)', num)
    .option('--max-tokens-per-turn <n>', 'tokens per assistant turn (default: the run\'s, else 512)', num)
    .option('--max-context <n>', 'tokens per episode')
    .option('--temperature <t>', 'sampling temperature (default: the run\'s validation temperature, else 1)', num)
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
        console.log(JSON.stringify({ ...rest, episodes: episodes.map((e) => ({ task_id: e.taskId, trial: e.sampleIndex, seed: e.seed, reward: e.reward, termination: e.termination, turns: e.numTurns, aborted: e.aborted, error: e.error })) }, null, 2));
      } else console.log(formatEvalReport(report));
      // why episodes aborted, and a failed evaluation's exit status, also with --json (stderr)
      for (const line of abortReasons(report.episodes)) console.error(line);
      if (report.problem) {
        console.error(`sinkflex eval: the evaluation did not really run: ${report.problem}`);
        process.exitCode = 1;
      }
    });
}
