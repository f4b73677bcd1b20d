/**
 * The episode driver: tau2's half-duplex orchestrator seen from the agent's side. `reset`
 * starts a conversation and returns what the agent sees first; each `act` takes one assistant
 * message and returns the messages the agent sees next, and at the end the reward. A Gym env
 * wraps this thinly. Bad actions never throw: they become error tool messages (counted toward
 * the error budget) or an `agent_error` termination.
 * @module
 */
import type { AssistantAction } from './action.js';
import { normalizeAction } from './action.js';
import type { TauDomain, WorldState } from './domain.js';
import { callDomainTool } from './domain.js';
import type { EvaluateOptions, NLJudge, RewardInfo, SimulationRun, TerminationReason } from './evaluate.js';
import { TauEvaluator } from './evaluate.js';
import type { Message, ToolCall, ToolMessage, UserMessage } from './messages.js';
import { agentSystemPrompt, DEFAULT_GREETING } from './prompts.js';
import type { TauTask } from './task.js';
import type { OpenAIToolSchema } from './tools.js';
import type { StopMarker, UserReply, UserSimulator, UserTurnInput } from './users/types.js';
import { findStopMarker } from './users/types.js';

/** Options of {@link TauEpisode}. */
export interface TauEpisodeOptions {
  /** The user simulator. */
  user: UserSimulator;
  /** Step limit (each agent message, user message and tool batch is a step). Default 100. */
  maxSteps?: number;
  /** Tool-error budget. Default 10. */
  maxErrors?: number;
  /** The agent's first message. Default tau2's greeting. */
  greeting?: string;
  /** NL-assertion judge (only used by the async `act`). */
  judge?: NLJudge;
  /** Grading options. */
  evaluation?: EvaluateOptions;
}

/** What `reset` and `act` return. */
export interface EpisodeStep {
  /** Messages the agent sees that were added since its last action (user tool traffic is hidden). */
  observation: Message[];
  /** Whether the conversation is over. */
  done: boolean;
  /** Why it ended (null while running). */
  terminationReason: TerminationReason | null;
  /** The stop marker the user used, when it ended with one. */
  stopMarker: StopMarker | null;
  /** The reward: 0 until the end. */
  reward: number;
  /** The reward breakdown, at the end only. */
  rewardInfo: RewardInfo | null;
}

type UserRequest = { input: UserTurnInput };

function isPromise<T>(v: unknown): v is Promise<T> {
  return v !== null && typeof v === 'object' && typeof (v as { then?: unknown }).then === 'function';
}

/** One conversation at a time in a domain, driven by the agent's actions. */
export class TauEpisode<S extends WorldState> {
  /** The grader (gold states cached per task). */
  readonly evaluator: TauEvaluator<S>;
  private readonly opts: Required<Pick<TauEpisodeOptions, 'maxSteps' | 'maxErrors' | 'greeting'>> & TauEpisodeOptions;
  private task: TauTask | null = null;
  private stateRef: S | null = null;
  private messages: Message[] = [];
  private historyLength = 0;
  private steps = 0;
  private errors = 0;
  private ids = 0;
  private termination: TerminationReason | null = null;
  private marker: StopMarker | null = null;
  private finalInfo: RewardInfo | null = null;
  private pendingUserResults: ToolMessage[] = [];
  private seedValue = 0;

  /**
   * @param domain - the world's domain.
   * @param options - user simulator, limits, greeting, judge.
   */
  constructor(
    readonly domain: TauDomain<S>,
    options: TauEpisodeOptions,
  ) {
    this.opts = { maxSteps: 100, maxErrors: 10, greeting: DEFAULT_GREETING, ...options };
    if (!Number.isInteger(this.opts.maxSteps) || this.opts.maxSteps < 1)
      throw new RangeError('maxSteps must be a positive integer');
    if (!Number.isInteger(this.opts.maxErrors) || this.opts.maxErrors < 1)
      throw new RangeError('maxErrors must be a positive integer');
    this.evaluator = new TauEvaluator(domain);
  }

  /** The agent's tools in OpenAI function format. */
  get tools(): OpenAIToolSchema[] {
    return this.domain.tools.schemas();
  }

  /** The domain policy. */
  get policy(): string {
    return this.domain.policy;
  }

  /** The agent's system prompt (instructions + policy). */
  get systemPrompt(): string {
    return agentSystemPrompt(this.domain.policy);
  }

  /** The current task (null before the first reset). */
  get currentTask(): TauTask | null {
    return this.task;
  }

  /** The live world state (null before the first reset). Do not mutate. */
  get state(): S | null {
    return this.stateRef;
  }

  /** Whether the conversation is over. */
  get done(): boolean {
    return this.termination !== null;
  }

  /** Steps taken and tool errors so far. */
  get counters(): { steps: number; errors: number } {
    return { steps: this.steps, errors: this.errors };
  }

  /** The seed of the current conversation. */
  get seed(): number {
    return this.seedValue;
  }

  /** The full trajectory after the task's message history (a copy). */
  trajectory(): Message[] {
    return this.messages.slice(this.historyLength);
  }

  /** The finished simulation (null while running). */
  simulation(): SimulationRun | null {
    if (!this.task || !this.termination) return null;
    return { taskId: this.task.id, messages: this.trajectory(), terminationReason: this.termination };
  }

  /** Starts `task` with a seed (synchronous user simulators only). */
  resetSync(task: TauTask, seed = 0): EpisodeStep {
    return this.runSync(this.resetGen(task, seed));
  }

  /** Starts `task` with a seed. */
  reset(task: TauTask, seed = 0): Promise<EpisodeStep> {
    return this.runAsync(this.resetGen(task, seed));
  }

  /** Applies one agent action (synchronous user simulators, no judge). */
  actSync(action: AssistantAction | unknown): EpisodeStep {
    return this.runSync(this.actGen(action));
  }

  /** Applies one agent action. */
  act(action: AssistantAction | unknown): Promise<EpisodeStep> {
    return this.runAsync(this.actGen(action));
  }

  private runSync(gen: Generator<UserRequest, EpisodeStep | 'grade', UserReply | Error>): EpisodeStep {
    let r = gen.next();
    while (!r.done) {
      let reply: UserReply | Error;
      try {
        const out = this.opts.user.respond(r.value.input);
        if (isPromise(out)) {
          out.catch(() => undefined);
          throw new TypeError(
            'this user simulator is asynchronous: use reset()/act() instead of resetSync()/actSync()',
          );
        }
        reply = out;
      } catch (e) {
        if (e instanceof TypeError && e.message.startsWith('this user simulator is asynchronous')) throw e;
        reply = e instanceof Error ? e : new Error(String(e));
      }
      r = gen.next(reply);
    }
    if (r.value === 'grade') {
      const sim = this.simulation() as SimulationRun;
      this.finalInfo = this.evaluator.evaluate(this.task as TauTask, sim, this.opts.evaluation);
      return this.finalStep(this.lastObservation);
    }
    return r.value;
  }

  private async runAsync(gen: Generator<UserRequest, EpisodeStep | 'grade', UserReply | Error>): Promise<EpisodeStep> {
    let r = gen.next();
    while (!r.done) {
      let reply: UserReply | Error;
      try {
        reply = await this.opts.user.respond(r.value.input);
      } catch (e) {
        reply = e instanceof Error ? e : new Error(String(e));
      }
      r = gen.next(reply);
    }
    if (r.value === 'grade') {
      const sim = this.simulation() as SimulationRun;
      this.finalInfo = await this.evaluator.evaluateAsync(this.task as TauTask, sim, {
        ...this.opts.evaluation,
        judge: this.opts.judge,
      });
      return this.finalStep(this.lastObservation);
    }
    return r.value;
  }

  private lastObservation: Message[] = [];

  private finalStep(observation: Message[]): EpisodeStep {
    return {
      observation,
      done: true,
      terminationReason: this.termination,
      stopMarker: this.marker,
      reward: this.finalInfo?.reward ?? 0,
      rewardInfo: this.finalInfo,
    };
  }

  private running(observation: Message[]): EpisodeStep {
    return { observation, done: false, terminationReason: null, stopMarker: null, reward: 0, rewardInfo: null };
  }

  private nextId(): string {
    return `call_${this.seedValue}_${this.ids++}`;
  }

  private visible(from: number): Message[] {
    return this.messages
      .slice(from)
      .filter(
        (m) =>
          !(m.role === 'user' && m.toolCalls && m.toolCalls.length > 0) &&
          !(m.role === 'tool' && m.requestor === 'user'),
      );
  }

  private end(reason: TerminationReason, from: number): 'grade' {
    this.termination = reason;
    this.lastObservation = this.visible(from);
    return 'grade';
  }

  private limitReached(): TerminationReason | null {
    if (this.steps >= this.opts.maxSteps) return 'max_steps';
    if (this.errors >= this.opts.maxErrors) return 'too_many_errors';
    return null;
  }

  private *resetGen(task: TauTask, seed: number): Generator<UserRequest, EpisodeStep | 'grade', UserReply | Error> {
    if (!Number.isInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
    this.task = task;
    this.seedValue = seed;
    this.stateRef = this.domain.initialState(task);
    const history = task.initial_state?.message_history ?? [];
    if (history.length > 0) this.evaluator.replay(this.stateRef, history, false);
    this.messages = history.map((m) => ({ ...m }));
    this.historyLength = this.messages.length;
    this.steps = 0;
    this.errors = 0;
    this.ids = 0;
    this.termination = null;
    this.marker = null;
    this.finalInfo = null;
    this.pendingUserResults = [];
    this.opts.user.reset(task, seed, this.domain.userTools?.schemas() ?? []);
    const last = this.messages[this.messages.length - 1];
    if (last && (last.role === 'user' || (last.role === 'tool' && last.requestor === 'assistant'))) {
      return this.running([]); // the agent speaks next
    }
    if (!last) this.messages.push({ role: 'assistant', content: this.opts.greeting });
    const agentText = (this.messages[this.messages.length - 1] as Message).content ?? '';
    return yield* this.userTurn(agentText, this.historyLength);
  }

  private *userTurn(agentText: string, from: number): Generator<UserRequest, EpisodeStep | 'grade', UserReply | Error> {
    for (;;) {
      const reply = yield {
        input: { history: this.messages.slice(), agentText, toolResults: this.pendingUserResults },
      };
      this.pendingUserResults = [];
      if (reply instanceof Error) return this.end('user_error', from);
      const calls = Array.isArray(reply?.toolCalls) ? reply.toolCalls : [];
      const text = typeof reply?.content === 'string' && reply.content.trim().length > 0 ? reply.content : null;
      if (calls.length > 0 && this.domain.userTools) {
        const toolCalls: ToolCall[] = calls.map((c) => ({
          id: this.nextId(),
          name: c.name,
          arguments: c.arguments ?? {},
          requestor: 'user',
        }));
        this.messages.push({ role: 'user', content: text, toolCalls } satisfies UserMessage);
        this.steps++;
        for (const c of toolCalls) {
          const res = callDomainTool(this.domain, this.stateRef as S, c);
          if (res.error) this.errors++;
          this.messages.push(res);
          this.pendingUserResults.push(res);
        }
        this.steps++;
        const limit = this.limitReached();
        if (limit) return this.end(limit, from);
        continue;
      }
      if (text === null) return this.end('user_error', from);
      this.messages.push({ role: 'user', content: text });
      this.steps++;
      if (reply.giveUp === true) return this.end('user_give_up', from);
      const marker = findStopMarker(text);
      if (marker) {
        this.marker = marker;
        return this.end('user_stop', from);
      }
      const limit = this.limitReached();
      if (limit) return this.end(limit, from);
      return this.running(this.visible(from));
    }
  }

  private *actGen(action: unknown): Generator<UserRequest, EpisodeStep | 'grade', UserReply | Error> {
    if (!this.task || !this.stateRef) throw new Error('TauEpisode: call reset() before act()');
    if (this.termination) return this.finalStep([]);
    const from = this.messages.length;
    const norm = normalizeAction(action, () => this.nextId());
    if (norm.kind === 'invalid') {
      this.messages.push({ role: 'assistant', content: `[invalid action: ${norm.reason}]` });
      return this.end('agent_error', from + 1);
    }
    this.messages.push(norm.message);
    this.steps++;
    const after = from + 1;
    if (norm.kind === 'malformed') {
      for (const c of norm.message.toolCalls ?? []) {
        this.messages.push({
          role: 'tool',
          id: c.id,
          content: `Error: ${norm.reason}`,
          requestor: 'assistant',
          error: true,
          rejected: true,
        });
      }
      if ((norm.message.toolCalls ?? []).length === 0) {
        // text only but flagged malformed (e.g. an unparseable <tool_call> block): answer with a synthetic call id
        const id = this.nextId();
        norm.message.toolCalls = [{ id, name: '', arguments: {}, requestor: 'assistant' }];
        this.messages.push({
          role: 'tool',
          id,
          content: `Error: ${norm.reason}`,
          requestor: 'assistant',
          error: true,
          rejected: true,
        });
      }
      this.steps++;
      this.errors++;
      const limit = this.limitReached();
      if (limit) return this.end(limit, after);
      return this.running(this.visible(after));
    }
    if (norm.kind === 'tool') {
      const res = callDomainTool(this.domain, this.stateRef, norm.call);
      this.messages.push(res);
      this.steps++;
      if (res.error) this.errors++;
      const limit = this.limitReached();
      if (limit) return this.end(limit, after);
      return this.running(this.visible(after));
    }
    const limit = this.limitReached();
    if (limit) return this.end(limit, after);
    return yield* this.userTurn(norm.message.content as string, after);
  }
}
