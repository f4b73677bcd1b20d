/**
 * Gym environments over the tau world (`sinkflex/TauRetail-v0`, `sinkflex/TauTelecom-v0`,
 * `sinkflex/TauAirline-v0`): a
 * thin wrapper of the episode driver {@link TauEpisode}, tau2's orchestrator seen from the
 * agent. One environment runs one conversation at a time.
 *
 * - action: one assistant message: an OpenAI chat message (`{ role: 'assistant', content }` or
 *   `{ content: null, tool_calls: [one call] }`), tau's shape (`{ toolCalls: [{ name, arguments }] }`)
 *   or raw model text (`<tool_call>{…}</tool_call>` or a bare JSON call parses as a tool
 *   call; other text goes to the user). A malformed action (unknown tool, bad JSON, wrong
 *   argument types, text and a call together, several calls) becomes an `Error: …` tool
 *   message counted toward the error budget; a non-message or an empty one ends the episode
 *   (`agent_error`). `step` never throws for a bad action.
 * - observation: the messages added since the last action, in OpenAI chat format (the
 *   greeting and first user message after `reset`; then tool results or the user's reply).
 * - reward: 0 until the end, then tau2's reward (product over the task's reward basis).
 * - terminated on a user stop marker, an agent stop (`done` tool, optional), too many tool
 *   errors, an agent error or a user-simulator error; truncated when the step limit
 *   (`maxSteps`, counted as tau2 does: agent messages, user messages and tool results) ends it.
 * - info: at reset `taskId`, `seed`, `tools` (OpenAI function schemas), `policy`,
 *   `systemPrompt`, `domain`; at each step `taskId`, `steps`, `errors`,
 *   `terminationReason` (null while running), `stopMarker`, and at the end `rewardInfo` (the
 *   reward breakdown).
 *
 * A scripted user makes a synchronous {@link TauEnv}; an LLM user an {@link AsyncTauEnv}
 * (use `makeAsync`). {@link createTauEnv} (the registered entry point) picks the right one.
 * @module
 */
import {
  DEFAULT_GREETING,
  LlmUserSimulator,
  normalizeAction,
  ScriptedRetailUser,
  ScriptedTelecomUser,
  TauEpisode,
  toOpenAIMessages,
  transcript,
  type EpisodeStep,
  type EvaluateOptions,
  type LlmUserOptions,
  type Message,
  type NLJudge,
  type OpenAIToolSchema,
  type RewardInfo,
  type SimulationRun,
  type TauTask,
  type TerminationReason,
  type UserSimulator,
  type WorldState,
} from '../../tau/index.js';
import { AsyncEnv } from '../async-core.js';
import { Env } from '../core.js';
import { logger } from '../logger.js';
import type { RandomGenerator } from '../random.js';
import { Message as MessageSpace, type ChatMessage } from '../spaces/message.js';
import { Sequence } from '../spaces/sequence.js';
import type { EnvMetadata, Info, RenderFrame, ResetArgs, ResetResult, StepResult } from '../types.js';
import { defaultTaskSource, loadTauWorld, TauWorld, type TauDomainName, type TauTaskSource } from './tau-world.js';
import { optionKeys, refuseUnknownOptions } from '../../util/options.js';

/** The user simulator of a tau environment. */
export type TauUserOptions =
  | {
      /** The seeded scripted user of the domain (generated tasks; tau2 telecom tasks too). */
      kind: 'scripted';
      /** Turns without progress before the user gives up. Default 8. */
      patience?: number;
      /** Telecom: probability of each bad behaviour of the `Hard` persona. Default 0.3. */
      hardness?: number;
    }
  | ({
      /** An LLM user through an OpenAI-compatible chat endpoint (makes an {@link AsyncTauEnv}). */
      kind: 'llm';
    } & LlmUserOptions);

/** Constructor options (`make` kwargs) of the tau environments. */
export interface TauEnvOptions {
  /** The domain. Default `retail` (set by the registered id). */
  domain?: TauDomainName;
  /** Where tasks come from: generated (default: 100 tasks, seed 0) or tau2's files (airline's default: `{ kind: 'tau2' }`, it has no generator). */
  tasks?: TauTaskSource;
  /** A prepared world (domain + tasks); overrides `domain` and `tasks`. */
  world?: TauWorld;
  /** A fixed task for every reset (else `reset({ options: { taskId } })` or sampling). */
  taskId?: string | null;
  /** How a reset without a task id picks one: `random` (from `npRandom`, default) or `sequential` (a seeded reset restarts at the first task). */
  taskSampling?: 'random' | 'sequential';
  /** The user simulator: options, or an instance of {@link UserSimulator}. Default: the domain's scripted user. */
  user?: TauUserOptions | UserSimulator;
  /** With a user simulator instance: whether its `respond` returns Promises (makes an {@link AsyncTauEnv}). */
  asyncUser?: boolean;
  /** Step limit (tau2's steps). Default 100 for retail and airline, 200 for telecom (its user actions cost steps). */
  maxSteps?: number;
  /** Tool-error budget. Default 10. */
  maxErrors?: number;
  /**
   * Offer a `done` tool (as tau2's gym does): calling it ends the episode with `agent_stop`
   * (graded like a user stop; recorded as the text `###STOP###`). Default false.
   */
  agentStopTool?: boolean;
  /** NL-assertion judge (async environments only). */
  judge?: NLJudge;
  /** Grading options. */
  evaluation?: EvaluateOptions;
  /** The agent's first message. Default tau2's greeting. */
  greeting?: string;
  /** `ansi` (the transcript as text) or null. */
  renderMode?: string | null;
  /** Longest message content the spaces accept (characters). Default 1,000,000. */
  maxContentLength?: number;
}

const TAU_ENV_KEYS = optionKeys<TauEnvOptions>({
  domain: true,
  tasks: true,
  world: true,
  taskId: true,
  taskSampling: true,
  user: true,
  asyncUser: true,
  maxSteps: true,
  maxErrors: true,
  agentStopTool: true,
  judge: true,
  evaluation: true,
  greeting: true,
  renderMode: true,
  maxContentLength: true,
});

/** Reset options of the tau environments. */
export interface TauResetOptions {
  /** The task to run (by id). */
  taskId?: string;
  /** The task to run (by index in the world's task list). */
  taskIndex?: number;
}

/** An action of the tau environments (see the module description). */
export type TauEnvAction = ChatMessage | string | Record<string, unknown>;

/** The observation: new messages in OpenAI chat format. */
export type TauObservation = ChatMessage[];

/** The schema of the optional `done` tool. */
export const TAU_DONE_TOOL: OpenAIToolSchema = {
  type: 'function',
  function: {
    name: 'done',
    description:
      'Call this when the conversation is complete and the user needs nothing more. It ends the conversation.',
    parameters: { type: 'object', properties: {}, required: [], additionalProperties: false },
  },
};

function isUserSimulator(u: unknown): u is UserSimulator {
  return (
    u !== null &&
    typeof u === 'object' &&
    typeof (u as UserSimulator).respond === 'function' &&
    typeof (u as UserSimulator).reset === 'function'
  );
}

/** Whether these options need an {@link AsyncTauEnv} (an LLM user, or an async simulator instance). */
export function tauEnvNeedsAsync(options: TauEnvOptions = {}): boolean {
  const u = options.user;
  if (isUserSimulator(u)) return options.asyncUser === true;
  return u !== undefined && u !== null && (u as TauUserOptions).kind === 'llm';
}

function positiveInt(v: unknown, name: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
    throw new RangeError(`${name} must be a positive integer, got ${String(v)}`);
  return v;
}

/** What the sync and async tau environments share: world, episode, spaces, info and result shapes. */
class TauEnvCore {
  readonly world: TauWorld;
  readonly episode: TauEpisode<WorldState>;
  readonly tools: OpenAIToolSchema[];
  readonly observationSpace: Sequence<MessageSpace>;
  readonly actionSpace: MessageSpace;
  readonly agentStopTool: boolean;
  readonly evaluation: EvaluateOptions | undefined;
  readonly judge: NLJudge | undefined;
  private readonly fixedTaskId: string | null;
  private readonly sampling: 'random' | 'sequential';
  private cursor = 0;
  task: TauTask | null = null;
  seed = 0;
  /** Set when the episode ended (by the episode or an agent stop). */
  ended: { reason: TerminationReason; info: Info } | null = null;
  /** The agent-stop message appended to the trajectory, when there was one. */
  stopMessage: Message | null = null;
  warnedAfterEnd = false;

  constructor(options: TauEnvOptions) {
    if (options === null || typeof options !== 'object') throw new TypeError('tau env options must be an object');
    refuseUnknownOptions(options, TAU_ENV_KEYS, 'the tau environment');
    const domain = options.world?.name ?? options.domain ?? 'retail';
    this.world = options.world ?? loadTauWorld(domain, options.tasks ?? defaultTaskSource(domain));
    if (!(this.world instanceof TauWorld)) throw new TypeError('world must be a TauWorld (see loadTauWorld)');
    const maxSteps = positiveInt(options.maxSteps ?? (this.world.name === 'telecom' ? 200 : 100), 'maxSteps');
    const maxErrors = positiveInt(options.maxErrors ?? 10, 'maxErrors');
    this.fixedTaskId = options.taskId ?? null;
    if (this.fixedTaskId !== null) this.world.task(this.fixedTaskId);
    this.sampling = options.taskSampling ?? 'random';
    if (this.sampling !== 'random' && this.sampling !== 'sequential')
      throw new RangeError(`taskSampling must be 'random' or 'sequential', got ${JSON.stringify(this.sampling)}`);
    this.agentStopTool = options.agentStopTool === true;
    this.evaluation = options.evaluation;
    this.judge = options.judge;
    const user = this.makeUser(options.user);
    this.episode = new TauEpisode(this.world.domain, {
      user,
      maxSteps,
      maxErrors,
      greeting: options.greeting ?? DEFAULT_GREETING,
      ...(options.judge ? { judge: options.judge } : {}),
      ...(options.evaluation ? { evaluation: options.evaluation } : {}),
    });
    this.tools = [...this.episode.tools, ...(this.agentStopTool ? [TAU_DONE_TOOL] : [])];
    const maxContentLength = positiveInt(options.maxContentLength ?? 1_000_000, 'maxContentLength');
    this.observationSpace = new Sequence(
      new MessageSpace({ roles: ['assistant', 'user', 'tool'], maxContentLength, minContentLength: 0 }),
    );
    this.actionSpace = new MessageSpace({ roles: ['assistant'], tools: this.tools, maxToolCalls: 1, maxContentLength });
  }

  private makeUser(u: TauEnvOptions['user']): UserSimulator {
    if (isUserSimulator(u)) return u;
    const opts: TauUserOptions = (u ?? { kind: 'scripted' }) as TauUserOptions;
    if (opts === null || typeof opts !== 'object')
      throw new TypeError('user must be { kind: "scripted" | "llm", ... } or a UserSimulator');
    if (opts.kind === 'llm') {
      const { kind: _kind, ...llm } = opts;
      return new LlmUserSimulator(llm);
    }
    if (opts.kind !== 'scripted')
      throw new TypeError(
        `user.kind must be 'scripted' or 'llm', got ${JSON.stringify((opts as { kind?: unknown }).kind)}`,
      );
    if (this.world.name === 'airline') {
      throw new TypeError(
        "the airline domain has no scripted user: tau2's airline tasks need an LLM user (user: { kind: 'llm', baseURL, model }) or a UserSimulator instance",
      );
    }
    if (this.world.name === 'retail') {
      if (!this.world.generated) {
        throw new TypeError(
          "the scripted retail user follows generated tasks only: tau2's retail tasks need an LLM user (user: { kind: 'llm', baseURL, model })",
        );
      }
      return new ScriptedRetailUser({ ...(opts.patience !== undefined ? { patience: opts.patience } : {}) });
    }
    return new ScriptedTelecomUser({
      ...(opts.patience !== undefined ? { patience: opts.patience } : {}),
      ...(opts.hardness !== undefined ? { hardness: opts.hardness } : {}),
    });
  }

  /** Chooses the task and the episode seed of a reset (`seed`: the reset's, when it has one). */
  prepareReset(
    rng: RandomGenerator,
    seed: ResetArgs['seed'],
    options: Record<string, unknown> | null | undefined,
  ): TauTask {
    const seeded = seed !== null && seed !== undefined;
    const o = (options ?? {}) as TauResetOptions;
    let task: TauTask;
    if (o.taskId !== undefined) {
      if (typeof o.taskId !== 'string') throw new TypeError(`options.taskId must be a string, got ${typeof o.taskId}`);
      task = this.world.task(o.taskId);
    } else if (o.taskIndex !== undefined) {
      if (!Number.isInteger(o.taskIndex) || o.taskIndex < 0 || o.taskIndex >= this.world.tasks.length) {
        throw new RangeError(
          `options.taskIndex must be an integer in [0, ${this.world.tasks.length}), got ${String(o.taskIndex)}`,
        );
      }
      task = this.world.tasks[o.taskIndex];
    } else if (this.fixedTaskId !== null) {
      task = this.world.task(this.fixedTaskId);
    } else if (this.sampling === 'sequential') {
      if (seeded) this.cursor = 0;
      task = this.world.tasks[this.cursor % this.world.tasks.length];
      this.cursor++;
    } else {
      task = this.world.tasks[rng.integers(0, this.world.tasks.length)];
    }
    this.task = task;
    this.seed = rng.integers(0, 2 ** 31 - 1);
    this.ended = null;
    this.stopMessage = null;
    this.warnedAfterEnd = false;
    return task;
  }

  /** The result of a reset whose first episode step is `step`. */
  fromReset(step: EpisodeStep): ResetResult<TauObservation> {
    const info = this.resetInfo();
    if (step.done) {
      const r = this.fromStep(step);
      return [r[0], { ...info, ...r[4] }];
    }
    return [this.observation(step.observation), info];
  }

  resetInfo(): Info {
    return {
      taskId: (this.task as TauTask).id,
      seed: this.seed,
      domain: this.world.name,
      tools: this.tools,
      policy: this.episode.policy,
      systemPrompt: this.episode.systemPrompt,
    };
  }

  stepInfo(reason: TerminationReason | null, step: EpisodeStep | null, rewardInfo: RewardInfo | null): Info {
    const c = this.episode.counters;
    const info: Info = {
      taskId: (this.task as TauTask).id,
      steps: c.steps,
      errors: c.errors,
      terminationReason: reason,
      stopMarker: step?.stopMarker ?? null,
    };
    if (rewardInfo) info.rewardInfo = rewardInfo;
    return info;
  }

  observation(messages: readonly Message[]): TauObservation {
    return toOpenAIMessages(messages) as unknown as TauObservation;
  }

  /** Result of an episode step (the episode may have ended). */
  fromStep(step: EpisodeStep): StepResult<TauObservation> {
    const obs = this.observation(step.observation);
    if (!step.done) return [obs, 0, false, false, this.stepInfo(null, step, null)];
    const reason = step.terminationReason as TerminationReason;
    const info = this.stepInfo(reason, step, step.rewardInfo);
    this.ended = { reason, info };
    return [obs, step.reward, reason !== 'max_steps', reason === 'max_steps', info];
  }

  /** Whether the action is a call of the `done` tool (when offered). */
  isAgentStop(action: unknown): boolean {
    if (!this.agentStopTool) return false;
    const norm = normalizeAction(action, () => 'done');
    return norm.kind === 'tool' && norm.call.name === 'done';
  }

  /** The task and the run to grade after an agent stop. */
  agentStopRun(): { task: TauTask; run: SimulationRun } {
    const task = this.task as TauTask;
    this.stopMessage = { role: 'assistant', content: '###STOP###' };
    return {
      task,
      run: {
        taskId: task.id,
        messages: [...this.episode.trajectory(), this.stopMessage],
        terminationReason: 'agent_stop',
      },
    };
  }

  fromAgentStop(rewardInfo: RewardInfo): StepResult<TauObservation> {
    const info = this.stepInfo('agent_stop', null, rewardInfo);
    this.ended = { reason: 'agent_stop', info };
    return [[], rewardInfo.reward, true, false, info];
  }

  /** The result of a step after the end (no reward; the final flags again). */
  afterEnd(): StepResult<TauObservation> {
    if (!this.warnedAfterEnd) {
      logger.warn(
        'You are calling step() even though this tau environment has already returned terminated = True or truncated = True. Call reset() to start a new episode.',
      );
      this.warnedAfterEnd = true;
    }
    const e = this.ended as { reason: TerminationReason; info: Info };
    return [[], 0, e.reason !== 'max_steps', e.reason === 'max_steps', e.info];
  }

  trajectory(): Message[] {
    const t = this.episode.trajectory();
    return this.stopMessage ? [...t, this.stopMessage] : t;
  }

  /** The frame of `render()`: the transcript in `ansi` mode, else null. */
  render(renderMode: string | null): RenderFrame {
    return renderMode === 'ansi' ? transcript(this.trajectory()) : null;
  }
}

/** The shared read-only view of a tau environment. */
export interface TauEnvView {
  /** The world (domain + tasks). */
  readonly world: TauWorld;
  /** The episode driver. */
  readonly episode: TauEpisode<WorldState>;
  /** The current task (null before the first reset). */
  readonly currentTask: TauTask | null;
  /** The agent's tools in OpenAI function format (with `done` when offered). */
  readonly tools: readonly OpenAIToolSchema[];
  /** The whole conversation after the task's history (tau messages; user tool traffic included). */
  trajectory(): Message[];
}

/** The tau environment with a synchronous (scripted) user simulator. */
export class TauEnv extends Env<TauObservation, TauEnvAction> implements TauEnvView {
  static override metadata: EnvMetadata = { renderModes: ['ansi'], renderFps: 1 };
  private readonly core: TauEnvCore;
  /** Sequences of OpenAI chat messages (assistant, user, tool). */
  readonly observationSpace: Sequence<MessageSpace>;
  /** One assistant message with at most one call of the agent's tools (raw text is accepted too). */
  readonly actionSpace: MessageSpace;
  /** The world (domain + tasks). */
  readonly world: TauWorld;
  /** The episode driver. */
  readonly episode: TauEpisode<WorldState>;
  /** The agent's tools in OpenAI function format (with `done` when offered). */
  readonly tools: readonly OpenAIToolSchema[];

  /** @param options - see {@link TauEnvOptions}; an LLM user needs {@link AsyncTauEnv}. */
  constructor(options: TauEnvOptions = {}) {
    super();
    if (tauEnvNeedsAsync(options))
      throw new TypeError('TauEnv: this user simulator is asynchronous (LLM): use AsyncTauEnv or makeAsync()');
    this.core = new TauEnvCore(options);
    ({
      observationSpace: this.observationSpace,
      actionSpace: this.actionSpace,
      world: this.world,
      episode: this.episode,
      tools: this.tools,
    } = this.core);
    this.renderMode = checkRenderMode(options.renderMode);
  }

  /** The current task (null before the first reset). */
  get currentTask(): TauTask | null {
    return this.core.task;
  }
  /** The conversation after the task's history (tau messages; the user's tool traffic included). */
  trajectory(): Message[] {
    return this.core.trajectory();
  }

  /** Starts a conversation: `options.taskId` / `options.taskIndex` choose the task. */
  override reset(args: ResetArgs = {}): ResetResult<TauObservation> {
    super.reset({ seed: args.seed ?? null });
    const task = this.core.prepareReset(this.npRandom, args.seed, args.options);
    return this.core.fromReset(this.episode.resetSync(task, this.core.seed));
  }

  /** Applies one assistant message (never throws for a bad action). */
  step(action: TauEnvAction): StepResult<TauObservation> {
    if (this.core.ended) return this.core.afterEnd();
    if (this.core.isAgentStop(action)) {
      const run = this.core.agentStopRun();
      return this.core.fromAgentStop(this.episode.evaluator.evaluate(run.task, run.run, this.core.evaluation));
    }
    return this.core.fromStep(this.episode.actSync(action));
  }

  /** `ansi`: the transcript so far; without a render mode, null. */
  override render(): RenderFrame {
    return this.core.render(this.renderMode);
  }

  /** Nothing to release; may be called again. */
  override close(): void {}
}

/** The tau environment with any user simulator (LLM users need this one). */
export class AsyncTauEnv extends AsyncEnv<TauObservation, TauEnvAction> implements TauEnvView {
  static override metadata: EnvMetadata = { renderModes: ['ansi'], renderFps: 1 };
  private readonly core: TauEnvCore;
  /** Sequences of OpenAI chat messages (assistant, user, tool). */
  readonly observationSpace: Sequence<MessageSpace>;
  /** One assistant message with at most one call of the agent's tools (raw text is accepted too). */
  readonly actionSpace: MessageSpace;
  /** The world (domain + tasks). */
  readonly world: TauWorld;
  /** The episode driver. */
  readonly episode: TauEpisode<WorldState>;
  /** The agent's tools in OpenAI function format (with `done` when offered). */
  readonly tools: readonly OpenAIToolSchema[];

  /** @param options - see {@link TauEnvOptions}. */
  constructor(options: TauEnvOptions = {}) {
    super();
    this.core = new TauEnvCore(options);
    ({
      observationSpace: this.observationSpace,
      actionSpace: this.actionSpace,
      world: this.world,
      episode: this.episode,
      tools: this.tools,
    } = this.core);
    this.renderMode = checkRenderMode(options.renderMode);
  }

  /** The current task (null before the first reset). */
  get currentTask(): TauTask | null {
    return this.core.task;
  }
  /** The conversation after the task's history (tau messages; the user's tool traffic included). */
  trajectory(): Message[] {
    return this.core.trajectory();
  }

  /** Starts a conversation: `options.taskId` / `options.taskIndex` choose the task. */
  override async reset(args: ResetArgs = {}): Promise<ResetResult<TauObservation>> {
    await super.reset({ seed: args.seed ?? null });
    const task = this.core.prepareReset(this.npRandom, args.seed, args.options);
    return this.core.fromReset(await this.episode.reset(task, this.core.seed));
  }

  /** Applies one assistant message (never throws for a bad action; a failing user simulator ends the episode with `user_error`). */
  async step(action: TauEnvAction): Promise<StepResult<TauObservation>> {
    if (this.core.ended) return this.core.afterEnd();
    if (this.core.isAgentStop(action)) {
      const run = this.core.agentStopRun();
      const options = { ...this.core.evaluation, ...(this.core.judge ? { judge: this.core.judge } : {}) };
      return this.core.fromAgentStop(await this.episode.evaluator.evaluateAsync(run.task, run.run, options));
    }
    return this.core.fromStep(await this.episode.act(action));
  }

  /** `ansi`: the transcript so far; without a render mode, null. */
  override async render(): Promise<RenderFrame> {
    return this.core.render(this.renderMode);
  }

  /** Nothing to release; may be called again. */
  override async close(): Promise<void> {}
}

function checkRenderMode(mode: string | null | undefined): string | null {
  if (mode === undefined || mode === null) return null;
  if (mode !== 'ansi') throw new RangeError(`renderMode must be 'ansi' or null, got ${JSON.stringify(mode)}`);
  return mode;
}

/**
 * The registered entry point: a {@link TauEnv} when the user simulator is synchronous
 * (scripted), an {@link AsyncTauEnv} for an LLM user (which `make` refuses: use `makeAsync`).
 */
export function createTauEnv(options: TauEnvOptions = {}): TauEnv | AsyncTauEnv {
  return tauEnvNeedsAsync(options) ? new AsyncTauEnv(options) : new TauEnv(options);
}
