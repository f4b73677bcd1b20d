/**
 * Evaluation of an agent as `sinkflex eval` runs it: tau episodes with a model in process (any
 * source {@link openModel} opens: a run or checkpoint, a `.safetensors` file, a Hugging Face
 * model folder) or an OpenAI-compatible server, n trials per task; mean reward and pass^k
 * overall and per task kind, optionally the trajectories as JSONL. A training run (or one of
 * its checkpoints) brings its own defaults: environment, the validation tasks, the prompt
 * format, episode limits and the validation temperature.
 * @module
 */
import { createTauEnv, loadTauWorld, type TauTaskSource, type TauWorld } from '../gym/index.js';
import { ChatTemplate, trainChatTokenizer, type ChatFormat } from '../chat/index.js';
import { type HfDtypeOption } from '../model/index.js';
import type { DeviceRequest } from '../native/index.js';
import { OpenAIChatClient, OpenAIChatPolicy, type RoutingPolicy } from '../openai/index.js';
import { ChatTokenPolicy, evaluatePolicy, writeTrajectories, type TokenPolicy } from '../rollout/index.js';
import { taskKind } from '../tau/index.js';
import { evalProblem, type EvalReport } from './eval-report.js';
import type { ModelHandle, RunInfo } from './model-handle.js';
import { openModel } from './open-model.js';
import { buildWorld, trainEnvFactory } from './world.js';

/** The environments `sinkflex eval --env` runs, with their tau domains. */
const EVAL_DOMAINS: Readonly<Record<string, 'retail' | 'telecom' | 'airline'>> = {
  'sinkflex/TauRetail-v0': 'retail',
  'sinkflex/TauTelecom-v0': 'telecom',
  'sinkflex/TauAirline-v0': 'airline',
};

/** Options of {@link runEval} (the flags of `sinkflex eval`). */
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

/** Runs an evaluation (see the module description); the model it opens is disposed before it returns. */
export async function runEval(o: EvalOptions): Promise<EvalReport> {
  if (o.modelDir !== undefined && o.checkpoint === undefined) {
    if (o.policy !== 'builtin')
      throw new Error('--model-dir runs the model in process: use it with --policy builtin (the default)');
    if (o.tasks === 'run') throw new Error('--tasks run needs --checkpoint <training run or checkpoint folder>');
  }
  // with --checkpoint, --model-dir is the base folder of a Hugging Face model's run, moved (its fingerprint must match)
  const source = o.checkpoint ?? o.modelDir;
  const modelDir = o.checkpoint !== undefined && o.modelDir !== undefined ? { modelDir: o.modelDir } : {};
  const model =
    source !== undefined
      ? await openModel(source, { device: o.device ?? 'cpu', dtype: o.dtype ?? 'auto', ...modelDir })
      : null;
  try {
    return await evalWith(o, model);
  } finally {
    model?.dispose();
  }
}

/** The tasks of an evaluation: the environment factory, the task ids and their world. */
interface EvalTasks {
  envId: string;
  domain: 'retail' | 'telecom' | 'airline';
  makeEnv: () => ReturnType<typeof createTauEnv>;
  taskIds: readonly string[];
  world: TauWorld;
}

function evalTasks(o: EvalOptions, run: RunInfo | null): EvalTasks {
  const envId = o.env ?? run?.env ?? 'sinkflex/TauRetail-v0';
  const domain = EVAL_DOMAINS[envId];
  if (!domain) throw new Error(`unknown env ${envId} (${Object.keys(EVAL_DOMAINS).join(', ')})`);
  if (domain === 'airline' && o.user !== 'llm')
    throw new Error(`${envId} needs --user llm: tau2's airline tasks have no scripted user`);
  const user =
    o.user === 'llm'
      ? {
          kind: 'llm' as const,
          baseURL: o.userBaseURL,
          model: o.userModel,
          apiKey: o.userApiKey,
          timeoutMs: o.timeoutMs,
        }
      : { kind: 'scripted' as const };
  if (o.user === 'llm' && !o.userModel) throw new Error('--user llm needs --user-model');
  const tasksArg = o.tasks ?? (run ? 'run' : 'generated');
  const limit = (ids: readonly string[]) => (o.limitTasks !== undefined ? ids.slice(0, o.limitTasks) : ids);
  if (tasksArg === 'run') {
    if (!run) throw new Error('--tasks run needs --checkpoint <training run or checkpoint folder>');
    if (run.env !== envId) throw new Error(`--tasks run: the run trained on ${run.env}, not ${envId}`);
    const tw = buildWorld(run.config);
    const makeEnv =
      o.user === 'llm' ? () => createTauEnv({ world: tw.world, user }) : trainEnvFactory(run.config, tw.world);
    return { envId, domain, makeEnv, taskIds: limit(tw.valIds), world: tw.world };
  }
  const split = o.split ? { split: o.split } : {};
  let source: TauTaskSource;
  if (tasksArg !== 'generated') source = { kind: 'tau2', path: tasksArg, ...split };
  else if (domain !== 'airline') source = { kind: 'generated', seed: o.taskSeed ?? 0, count: o.taskCount ?? 20 };
  else if (o.tasks === undefined)
    source = { kind: 'tau2', ...split }; // airline has no generator: $SINKFLEX_TAU2_DIR/airline
  else throw new Error(`${envId} has no generated tasks: give --tasks <tau2 airline folder> (and --split)`);
  const world = loadTauWorld(domain, source);
  return { envId, domain, makeEnv: () => createTauEnv({ world, user }), taskIds: limit(world.taskIds), world };
}

/** The policy of an evaluation: the model in process, or a server's replies through a chat format. */
interface EvalPolicy {
  policy: TokenPolicy;
  format: ChatFormat;
  name: string;
  maxContext: number | undefined;
  chat: OpenAIChatPolicy | null;
  client: OpenAIChatClient | null;
}

async function evalPolicy(o: EvalOptions, model: ModelHandle | null): Promise<EvalPolicy> {
  const run = model?.run ?? null;
  const runContext = run?.config.rollout.maxContextTokens;
  if (o.policy === 'builtin') {
    if (!model) throw new Error('--policy builtin needs --checkpoint (or --model-dir)');
    const maxContext = o.maxContextTokens ?? runContext ?? model.policy.contextLength;
    return {
      policy: model.policy,
      format: model.chat,
      name: model.description,
      maxContext,
      chat: null,
      client: null,
    };
  }
  if (o.policy !== 'openai') throw new Error(`unknown policy ${String(o.policy)} (builtin or openai)`);
  if (!o.model) throw new Error('--policy openai needs --model');
  if (
    o.maxConnectionFailures !== undefined &&
    (!Number.isSafeInteger(o.maxConnectionFailures) || o.maxConnectionFailures < 0)
  )
    throw new Error(`--max-connection-failures must be an integer >= 0, got ${o.maxConnectionFailures}`);
  const client = new OpenAIChatClient({
    baseURL: o.baseURL && o.baseURL.length > 0 ? o.baseURL : undefined,
    model: o.model,
    apiKey: o.apiKey,
    timeoutMs: o.timeoutMs,
    retries: o.retries,
    backoffMs: o.backoffMs,
    concurrency: o.maxInFlight,
    routing: o.routing,
    seed: o.seed ?? 0,
    maxConsecutiveFailures: o.maxConnectionFailures ?? 5,
  });
  let sessions = o.serverSessions === 'on';
  if ((o.serverSessions ?? 'auto') === 'auto') {
    try {
      sessions = (await client.listModels()).some((m) => m.id === o.model && m.owned_by === 'sinkflex');
    } catch {
      sessions = false;
    }
  }
  let format: ChatFormat;
  let maxContext = o.maxContextTokens;
  if (model) {
    const problem = openaiCheckpointProblem({ chat: model.chat, checkpoint: model.source ?? '' });
    if (problem) throw new Error(problem);
    format = model.chat;
    maxContext ??= runContext ?? model.policy.contextLength;
  } else {
    format = new ChatTemplate(trainChatTokenizer(' ', { vocabSize: 262 }));
    maxContext ??= 1 << 20;
  }
  const chat = new OpenAIChatPolicy({
    client,
    sessions,
    tokenIds: sessions && o.checkpoint ? 'template' : 'none',
    logprobs: sessions,
  });
  return {
    policy: new ChatTokenPolicy(chat, format),
    format,
    name: `openai ${o.model} @ ${client.baseURLs.join(', ')}${sessions ? ' (sessions)' : ''}`,
    maxContext,
    chat,
    client,
  };
}

async function evalWith(o: EvalOptions, model: ModelHandle | null): Promise<EvalReport> {
  const run = model?.run ?? null;
  const { envId, domain, makeEnv, taskIds, world } = evalTasks(o, run);
  const trials = o.trials ?? run?.config.val.trials ?? 1;
  const { policy, format, name, maxContext, chat, client } = await evalPolicy(o, model);
  const result = await evaluatePolicy({
    policy,
    chat: format,
    env: makeEnv,
    taskIds,
    trials,
    ...(o.k ? { k: o.k } : {}),
    seed: o.seed ?? run?.config.val.seed ?? 0,
    concurrency: o.concurrency ?? 4,
    limits: {
      maxTurns: o.maxTurns ?? run?.config.rollout.maxTurns ?? 30,
      maxTokensPerTurn: o.maxTokensPerTurn ?? run?.config.rollout.maxTokensPerTurn ?? 512,
      maxContextTokens: maxContext,
    },
    temperature: o.temperature ?? run?.config.val.temperature ?? 1,
    topP: o.topP ?? 1,
    source: `tau-${domain}`,
    taskKind: (id) => taskKind(world.task(id)),
    episodeRetries: o.episodeRetries ?? 1,
    renderTools: o.renderTools ?? run?.prompt.renderTools ?? true,
    ...(o.systemPrompt !== undefined
      ? { systemPrompt: () => o.systemPrompt as string }
      : run
        ? { systemPrompt: run.prompt.systemPrompt }
        : {}),
    ...(o.onProgress ? { onProgress: o.onProgress } : {}),
  });
  const report: EvalReport = { ...result, policy: name, env: envId, tasks: taskIds.length, trials, problem: null };
  if (client) report.connection = { failures: client.connectionFailures, stopped: client.stopped };
  report.problem = evalProblem(report);
  if (o.export)
    report.exported = writeTrajectories(
      o.export,
      result.episodes,
      chat ? { turnLog: (r) => chat.takeTurnLog(r.taskId, r.seed) } : {},
    );
  return report;
}

/**
 * Why `--policy openai --checkpoint <path>` cannot use that checkpoint's chat format, or null.
 * With a checkpoint, the client renders the conversation with the checkpoint's own chat format
 * and reads the server's replies back through it (token ids in and out), which only the
 * built-in chat template can do; a pretrained model's run (a Jinja template or harmony) cannot.
 */
export function openaiCheckpointProblem(loaded: { chat: ChatFormat; checkpoint: string }): string | null {
  const t = loaded.chat as Partial<Pick<ChatTemplate, 'createReader' | 'renderAssistantBody'>>;
  if (typeof t.createReader === 'function' && typeof t.renderAssistantBody === 'function') return null;
  return `--policy openai --checkpoint ${loaded.checkpoint}: the checkpoint is a run of a pretrained model, whose chat format (its Jinja template or harmony) the client cannot use to read the server's replies token for token; evaluate it in process (--policy builtin --checkpoint ${loaded.checkpoint}), or against its server without --checkpoint (--policy openai --model <name> --base-url <url>)`;
}
