/**
 * The agent loop: runs many episodes concurrently against Gym environments over the tau
 * world, token-in/token-out, and turns them into a {@link DataProto} batch.
 *
 * Per episode: the environment is reset (seeded, with the task); the system prompt (policy),
 * the tools section and the first observation are rendered with the chat template and
 * tokenized as the prompt, ending with the generation prompt. Each turn, the policy samples
 * the assistant's tokens, which are kept verbatim (response mask 1, with their log-probs); the
 * tokens are parsed back into a message (`parseAssistant`) and sent as the action (a parse
 * failure goes as raw text, which the environment answers with an error message). Each new
 * observation is rendered after the conversation so far (`renderAppend`: for the built-in
 * template each message on its own, then the generation prompt) and appended with response
 * mask 0 — where the chat format has the prefix property this is the same as rendering the
 * whole conversation, which the optional sanity check verifies.
 * Limits on turns, tokens per turn and total context truncate an episode (flagged, counted);
 * a failing policy, user simulator or environment aborts only its own episode.
 * @module
 */
import type { AnyEnv } from '../gym/async-core.js';
import type { ChatFormat } from '../chat/chat-format.js';
import { appendTokens } from '../chat/chat-template.js';
import type { ChatMessage, ToolSchema } from '../chat/messages.js';
import { DataProto } from './data-proto.js';
import { episodesToDataProto } from './batch.js';
import {
  ABORT_REASONS,
  TRUNCATION_REASONS,
  type EpisodeEnd,
  type EpisodeRecord,
  type TokenizationCheck,
} from './episode-record.js';
import type { TokenPolicy, TokenSession } from './policy.js';
import { GenerationScheduler } from './scheduler.js';
import { mixSeed } from './seeds.js';
import { checkSampleResult, parseTurn } from './turns.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

/** Limits of one episode. */
export interface AgentLoopLimits {
  /** Most assistant turns. Default 64. */
  maxTurns?: number;
  /** Most tokens per assistant turn. Default 1024. */
  maxTokensPerTurn?: number;
  /** Most tokens of prompt + response. Default 32768. */
  maxContextTokens?: number;
}

/** Sampling settings (per-turn seeds are derived from the episode seed). */
export interface AgentLoopSampling {
  /** Temperature. Default 1. */
  temperature?: number;
  /** Nucleus mass. Default 1. */
  topP?: number;
}

/**
 * The tokenization sanity check (VERL's `tokenization_sanity_check_mode`): at the end of an
 * episode the whole conversation is rendered at once and compared with the tokens assembled
 * turn by turn: `strict` token for token, `text` as decoded text (tolerates a model's
 * non-canonical tokenization), `disable` skips it. Episodes with an unparseable or cut turn
 * are `unchecked`.
 */
export type TokenizationSanityCheck = 'strict' | 'text' | 'disable';

const AGENT_LOOP_KEYS = optionKeys<AgentLoopOptions>({
  policy: true,
  chat: true,
  env: true,
  concurrency: true,
  limits: true,
  sampling: true,
  sanityCheck: true,
  systemPrompt: true,
  renderTools: true,
  keepAborted: true,
  maxBatchSize: true,
  onEpisode: true,
});

/** Options of {@link AgentLoop}. */
export interface AgentLoopOptions {
  /** The policy. */
  policy: TokenPolicy;
  /** The chat format (its tokenizer defines the vocabulary): the built-in ChatTemplate or a pretrained model's. */
  chat: ChatFormat;
  /**
   * Makes one environment (called up to `concurrency` times; environments are reused across
   * episodes). It must follow the tau environments' contract: observations are arrays of
   * OpenAI chat messages, `reset({ seed, options: { taskId } })`, reset info with
   * `systemPrompt` and `tools`, step info with `terminationReason` (and `rewardInfo`).
   */
  env: () => AnyEnv | Promise<AnyEnv>;
  /** Episodes in flight at once. Default 16. */
  concurrency?: number;
  /** Episode limits. */
  limits?: AgentLoopLimits;
  /** Sampling settings. */
  sampling?: AgentLoopSampling;
  /** Tokenization sanity check. Default `strict`. */
  sanityCheck?: TokenizationSanityCheck;
  /** The system prompt from the reset info. Default `info.systemPrompt` (instructions + policy). */
  systemPrompt?: (info: Readonly<Record<string, unknown>>) => string;
  /** Render the tools section in the prompt. Default true. */
  renderTools?: boolean;
  /** Keep aborted episodes in the batch (flagged `aborted`). Default false: they are dropped and counted. */
  keepAborted?: boolean;
  /** Most requests per `generateBatch` (default the policy's `maxBatchSize`, else unlimited). */
  maxBatchSize?: number;
  /** Called with each episode's record as it finishes, aborted ones included (e.g. for progress); what it throws fails the rollout. */
  onEpisode?: (record: EpisodeRecord) => void;
}

/** One rollout request: tasks, samples per task, seed. */
export interface RolloutRequest {
  /** Task ids; each is one group. */
  taskIds: readonly string[];
  /** Samples per task (VERL's `rollout.n`), sharing the group's uid. Default 1. */
  n?: number;
  /** Seed of the request. Default 0. */
  seed?: number;
  /** Prefix of the uids (`<prefix><group index>`). Default `g`. */
  uidPrefix?: string;
}

/** One episode to run. */
export interface RolloutJob {
  /** Group id. */
  uid: string;
  /** Task id. */
  taskId: string;
  /** Index of the group in the request. */
  groupIndex: number;
  /** Index of the sample in its group. */
  sampleIndex: number;
  /** Episode seed: `mixSeed(request seed, group index, sample index)`. */
  seed: number;
}

function positiveInt(v: unknown, name: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
    throw new RangeError(`${name} must be a positive integer, got ${String(v)}`);
  return v;
}

function errorText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

function tokensEqual(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The agent loop (see the module description). */
export class AgentLoop {
  /** The policy. */
  readonly policy: TokenPolicy;
  /** The chat format. */
  readonly chat: ChatFormat;
  /** The request batcher (its `stats` count batches). */
  readonly scheduler: GenerationScheduler;
  private readonly makeEnv: () => AnyEnv | Promise<AnyEnv>;
  private readonly envs: (AnyEnv | null)[] = [];
  private readonly concurrency: number;
  private readonly maxTurns: number;
  private readonly maxTokensPerTurn: number;
  private readonly maxContext: number;
  private readonly temperature: number;
  private readonly topP: number;
  private readonly sanity: TokenizationSanityCheck;
  private readonly systemPromptOf: (info: Readonly<Record<string, unknown>>) => string;
  private readonly renderTools: boolean;
  private readonly keepAborted: boolean;
  private readonly onEpisode: ((record: EpisodeRecord) => void) | null;
  private readonly stop: number[];
  private readonly prefixCache = new WeakMap<object, Map<string, number[]>>();
  private closed = false;
  private running = false;

  /** @param options - policy, chat format, environment factory, limits, sampling, checks. */
  constructor(options: AgentLoopOptions) {
    if (options === null || typeof options !== 'object') throw new TypeError('AgentLoop expects an options object');
    refuseUnknownOptions(options, AGENT_LOOP_KEYS, 'AgentLoop');
    if (!options.policy || typeof options.policy.createSession !== 'function')
      throw new TypeError('options.policy must be a TokenPolicy (createSession)');
    if (!options.chat || typeof options.chat.renderAppend !== 'function')
      throw new TypeError('options.chat must be a ChatFormat (e.g. a ChatTemplate)');
    if (typeof options.env !== 'function')
      throw new TypeError('options.env must be a function that makes an environment');
    this.policy = options.policy;
    this.chat = options.chat;
    this.makeEnv = options.env;
    this.concurrency = positiveInt(options.concurrency ?? 16, 'concurrency');
    this.maxTurns = positiveInt(options.limits?.maxTurns ?? 64, 'limits.maxTurns');
    this.maxTokensPerTurn = positiveInt(options.limits?.maxTokensPerTurn ?? 1024, 'limits.maxTokensPerTurn');
    this.maxContext = positiveInt(options.limits?.maxContextTokens ?? 32768, 'limits.maxContextTokens');
    this.temperature = options.sampling?.temperature ?? 1;
    this.topP = options.sampling?.topP ?? 1;
    if (!(this.temperature >= 0 && Number.isFinite(this.temperature)))
      throw new RangeError(`sampling.temperature must be a finite number >= 0, got ${this.temperature}`);
    if (!(this.topP > 0 && this.topP <= 1)) throw new RangeError(`sampling.topP must be in (0, 1], got ${this.topP}`);
    this.sanity = options.sanityCheck ?? 'strict';
    if (!['strict', 'text', 'disable'].includes(this.sanity))
      throw new RangeError(`sanityCheck must be 'strict', 'text' or 'disable', got ${JSON.stringify(this.sanity)}`);
    this.systemPromptOf =
      options.systemPrompt ?? ((info) => (typeof info.systemPrompt === 'string' ? info.systemPrompt : ''));
    this.renderTools = options.renderTools ?? true;
    this.keepAborted = options.keepAborted ?? false;
    if (options.onEpisode !== undefined && typeof options.onEpisode !== 'function')
      throw new TypeError('options.onEpisode must be a function');
    this.onEpisode = options.onEpisode ?? null;
    this.scheduler = new GenerationScheduler(
      this.policy,
      options.maxBatchSize !== undefined ? { maxBatchSize: options.maxBatchSize } : {},
    );
    this.stop = this.chat.stopTokens;
  }

  /**
   * Runs `n` episodes of each task (each task one group sharing a uid), `concurrency` at a
   * time, and returns their records in request order (group, then sample), aborted ones
   * included. The same request (seed included) gives the same records whatever the
   * concurrency, as long as the policy is deterministic per request seed.
   */
  async rollout(request: RolloutRequest): Promise<EpisodeRecord[]> {
    if (this.closed) throw new Error('AgentLoop: rollout after dispose()');
    if (this.running) throw new Error('AgentLoop: one rollout at a time (its environments are in use)');
    const jobs = this.jobs(request);
    this.running = true;
    try {
      return await this.runJobs(jobs);
    } finally {
      this.running = false;
    }
  }

  private async runJobs(jobs: RolloutJob[]): Promise<EpisodeRecord[]> {
    const out: EpisodeRecord[] = new Array(jobs.length);
    let next = 0;
    const worker = async (slot: number): Promise<void> => {
      while (next < jobs.length) {
        const i = next++;
        const env = await this.env(slot);
        out[i] = await this.runEpisode(jobs[i], env);
        this.onEpisode?.(out[i]);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, jobs.length) }, (_, s) => worker(s)));
    return out;
  }

  /** {@link rollout}, then {@link episodesToDataProto} (see there for the columns). */
  async generate(request: RolloutRequest): Promise<DataProto> {
    const t0 = performance.now();
    const records = await this.rollout(request);
    return episodesToDataProto(records, {
      padTokenId: this.chat.pad,
      keepAborted: this.keepAborted,
      timingS: (performance.now() - t0) / 1000,
    });
  }

  /** Closes the environments. The loop cannot be used afterwards. Idempotent. */
  async dispose(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const env of this.envs) if (env) await env.close();
    this.envs.length = 0;
  }

  /** {@link dispose} (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose();
  }

  /** The episodes of a request, in order (group, then sample). */
  jobs(request: RolloutRequest): RolloutJob[] {
    if (request === null || typeof request !== 'object' || !Array.isArray(request.taskIds))
      throw new TypeError('rollout request must be { taskIds: string[], n?, seed? }');
    const n = positiveInt(request.n ?? 1, 'n');
    const seed = request.seed ?? 0;
    if (!Number.isSafeInteger(seed)) throw new RangeError(`seed must be an integer, got ${String(seed)}`);
    const prefix = request.uidPrefix ?? 'g';
    const jobs: RolloutJob[] = [];
    request.taskIds.forEach((taskId, g) => {
      if (typeof taskId !== 'string') throw new TypeError(`taskIds[${g}] must be a string`);
      for (let s = 0; s < n; s++)
        jobs.push({ uid: `${prefix}${g}`, taskId, groupIndex: g, sampleIndex: s, seed: mixSeed(seed, g, s) });
    });
    return jobs;
  }

  private async env(slot: number): Promise<AnyEnv> {
    while (this.envs.length <= slot) this.envs.push(null);
    let env = this.envs[slot];
    if (!env) {
      env = await this.makeEnv();
      if (!env || typeof (env as { step?: unknown }).step !== 'function')
        throw new TypeError('options.env() must return an environment');
      this.envs[slot] = env;
    }
    return env;
  }

  private prefixTokens(system: string, tools: readonly ToolSchema[]): number[] {
    let byTools = this.prefixCache.get(tools);
    if (!byTools) {
      byTools = new Map();
      this.prefixCache.set(tools, byTools);
    }
    let p = byTools.get(system);
    if (!p) {
      p = this.chat.renderTokens([{ role: 'system', content: system }], { tools });
      if (byTools.size > 16) byTools.clear();
      byTools.set(system, p);
    }
    return p;
  }

  private renderObservation(
    history: readonly ChatMessage[],
    obs: readonly ChatMessage[],
    tools: readonly ToolSchema[],
  ): number[] {
    return this.chat.renderAppend(history, obs, { tools });
  }

  private async runEpisode(job: RolloutJob, env: AnyEnv): Promise<EpisodeRecord> {
    const t0 = performance.now();
    const rec: EpisodeRecord = {
      uid: job.uid,
      taskId: job.taskId,
      groupIndex: job.groupIndex,
      sampleIndex: job.sampleIndex,
      seed: job.seed,
      promptIds: [],
      responseIds: [],
      responseMask: [],
      logProbs: [],
      hasLogProbs: true,
      reward: 0,
      numTurns: 0,
      termination: 'env_error',
      truncated: false,
      aborted: false,
      error: null,
      parseErrors: 0,
      tokenization: this.sanity === 'disable' ? 'disabled' : 'unchecked',
      messages: [],
      tools: [],
      rewardInfo: null,
      ms: 0,
    };
    const tokenMessages: ChatMessage[] = [];
    let session: TokenSession | null = null;
    let endsWithPrompt = true;
    let cutTurn = false;
    const end = (reason: EpisodeEnd, error?: unknown): void => {
      rec.termination = reason;
      rec.truncated = TRUNCATION_REASONS.includes(reason);
      rec.aborted = ABORT_REASONS.includes(reason);
      if (error !== undefined) rec.error = errorText(error);
    };
    try {
      let obs: unknown;
      let info: Record<string, unknown>;
      try {
        [obs, info] = await env.reset({ seed: job.seed, options: { taskId: job.taskId } });
        if (!Array.isArray(obs)) throw new TypeError('the environment observation is not an array of messages');
      } catch (e) {
        end('env_error', e);
        return rec;
      }
      const system = this.systemPromptOf(info);
      const tools = this.renderTools && Array.isArray(info.tools) ? (info.tools as ToolSchema[]) : [];
      rec.tools = Array.isArray(info.tools) ? (info.tools as ToolSchema[]) : [];
      const first = obs as ChatMessage[];
      rec.messages.push({ role: 'system', content: system }, ...first);
      tokenMessages.push({ role: 'system', content: system }, ...first);
      try {
        rec.promptIds = [
          ...this.prefixTokens(system, tools),
          ...this.renderObservation([{ role: 'system', content: system }], first, tools),
        ];
      } catch (e) {
        end('env_error', e);
        return rec;
      }
      if (typeof info.terminationReason === 'string') {
        end(info.terminationReason);
        return rec;
      }
      if (rec.promptIds.length + 1 > this.maxContext) {
        end('context_limit');
        return rec;
      }
      try {
        session = this.policy.createSession({ taskId: job.taskId, seed: job.seed, envInfo: info });
        session.append(rec.promptIds);
      } catch (e) {
        end('policy_error', e);
        return rec;
      }
      const vocab = this.chat.tokenizer.vocabSize;
      for (;;) {
        const used = rec.promptIds.length + rec.responseIds.length;
        const budget = Math.min(this.maxTokensPerTurn, this.maxContext - used);
        let result;
        try {
          result = await this.scheduler.sample(session, {
            maxTokens: budget,
            temperature: this.temperature,
            topP: this.topP,
            stop: this.stop,
            seed: mixSeed(job.seed, rec.numTurns),
          });
        } catch (e) {
          end('policy_error', e);
          return rec;
        }
        const problem = checkSampleResult(result, budget, vocab);
        if (problem) {
          end('policy_error', new Error(problem));
          return rec;
        }
        const tokens = Array.from(result.tokens);
        appendTokens(rec.responseIds, tokens);
        for (let i = 0; i < tokens.length; i++) {
          rec.responseMask.push(1);
          rec.logProbs.push(result.logProbs ? result.logProbs[i] : 0);
        }
        if (!result.logProbs) rec.hasLogProbs = false;
        rec.numTurns++;
        endsWithPrompt = false;
        const last = tokens[tokens.length - 1];
        if (result.finishReason !== 'stop') {
          cutTurn = true;
          end(budget < this.maxTokensPerTurn ? 'context_limit' : 'turn_token_limit');
          return rec;
        }
        if (tokens.length === 0 || !this.stop.includes(last)) {
          end(
            'policy_error',
            new Error("the policy reported finishReason 'stop' but the turn does not end with a stop token"),
          );
          cutTurn = true;
          return rec;
        }
        const turn = parseTurn(this.chat, tokens, `call_${rec.numTurns - 1}_`);
        rec.messages.push(turn.message);
        if (turn.parseError) rec.parseErrors++;
        else tokenMessages.push(turn.message);
        let step;
        try {
          step = await env.step(turn.action);
        } catch (e) {
          end('env_error', e);
          return rec;
        }
        const [next, reward, terminated, truncated, stepInfo] = step as [
          unknown,
          number,
          boolean,
          boolean,
          Record<string, unknown>,
        ];
        const nextObs = Array.isArray(next) ? (next as ChatMessage[]) : [];
        rec.messages.push(...nextObs);
        if (terminated || truncated) {
          rec.reward = Number.isFinite(reward) ? reward : 0;
          rec.rewardInfo = stepInfo?.rewardInfo ?? null;
          const reason =
            typeof stepInfo?.terminationReason === 'string'
              ? stepInfo.terminationReason
              : truncated
                ? 'max_steps'
                : 'terminated';
          end(reason);
          if (truncated) rec.truncated = true;
          if (rec.aborted) rec.error = `the environment ended the episode with ${reason}`;
          return rec;
        }
        if (rec.numTurns >= this.maxTurns) {
          end('max_turns');
          return rec;
        }
        let obsTokens: number[];
        try {
          obsTokens = this.renderObservation(
            rec.messages.slice(0, rec.messages.length - nextObs.length),
            nextObs,
            tools,
          );
        } catch (e) {
          end('env_error', e);
          return rec;
        }
        if (used + tokens.length + obsTokens.length + 1 > this.maxContext) {
          end('context_limit');
          return rec;
        }
        try {
          session.append(obsTokens);
        } catch (e) {
          end('policy_error', e);
          return rec;
        }
        appendTokens(rec.responseIds, obsTokens);
        for (let i = 0; i < obsTokens.length; i++) {
          rec.responseMask.push(0);
          rec.logProbs.push(0);
        }
        tokenMessages.push(...nextObs);
        endsWithPrompt = true;
      }
    } finally {
      try {
        session?.dispose();
      } catch {
        // a failing dispose does not change the episode
      }
      if (rec.aborted) rec.reward = 0;
      if (this.sanity !== 'disable' && !rec.aborted)
        rec.tokenization = this.check(rec, tokenMessages, endsWithPrompt, cutTurn);
      rec.ms = performance.now() - t0;
    }
  }

  private check(
    rec: EpisodeRecord,
    tokenMessages: ChatMessage[],
    endsWithPrompt: boolean,
    cutTurn: boolean,
  ): TokenizationCheck {
    if (rec.parseErrors > 0 || cutTurn || rec.promptIds.length === 0) return 'unchecked';
    const tools = this.renderTools ? rec.tools : [];
    let expected: number[];
    try {
      expected = this.chat.renderTokens(tokenMessages, { tools, addGenerationPrompt: endsWithPrompt });
    } catch {
      return 'mismatch';
    }
    const actual = [...rec.promptIds, ...rec.responseIds];
    if (this.sanity === 'strict') return tokensEqual(expected, actual) ? 'ok' : 'mismatch';
    const tok = this.chat.tokenizer;
    return tok.decode(expected) === tok.decode(actual) ? 'ok' : 'mismatch';
  }
}
