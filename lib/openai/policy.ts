/**
 * {@link OpenAIChatPolicy}: an OpenAI-compatible server as the agent loop's message-level
 * {@link ChatPolicy}. Run it in the agent loop (and in evaluation) through
 * `new ChatTokenPolicy(policy, template)`, like any chat policy.
 *
 * Each conversation sends the whole dialogue each turn (tools in OpenAI function format),
 * reads the reply's structured `tool_calls` or Hermes `<tool_call>` text
 * ({@link readAssistantReply}), and keeps the server's token ids and log-probs when it returns
 * them. With `tokenIds: 'template'` (a server sharing the agent loop's chat template, e.g.
 * `sinkflex serve`) those ids are the turn's tokens verbatim (token-in/token-out).
 * @module
 */
import type { ChatAssistantMessage, ChatMessage } from '../chat/messages.js';
import type { ChatConversation, ChatPolicy, ChatPolicyRequest, ChatTurn, SessionContext } from '../rollout/policy.js';
import {
  OpenAIChatClient,
  type ChatCompletionRequest,
  type ChatCompletionResponse,
  type OpenAIClientOptions,
} from './client.js';
import { readAssistantReply } from './tool-calls.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

/** How requests are seeded: the episode seed on every turn (default), a per-turn seed, or none. */
export type SeedMode = 'episode' | 'turn' | 'none';

const POLICY_KEYS = optionKeys<OpenAIPolicyOptions>({
  client: true,
  temperature: true,
  topP: true,
  maxTokens: true,
  seedMode: true,
  sessions: true,
  logprobs: true,
  tokenIds: true,
  extraBody: true,
});

/** Options of {@link OpenAIChatPolicy}. */
export interface OpenAIPolicyOptions {
  /** A client, or the options to make one. */
  client: OpenAIChatClient | OpenAIClientOptions;
  /** Temperature (default: the agent loop's). */
  temperature?: number;
  /** Nucleus mass (default: the agent loop's). */
  topP?: number;
  /** Cap on `max_tokens` (default: the agent loop's per-turn budget). */
  maxTokens?: number;
  /** Seeding. Default `episode`. */
  seedMode?: SeedMode;
  /**
   * Send a `session_id` per conversation (a `sinkflex serve` extension: the server continues
   * the conversation's own context, so sampling matches the in-process policy exactly) and
   * route a conversation's calls to one base URL. Default false (strict servers reject unknown fields).
   */
  sessions?: boolean;
  /** Ask for per-token log-probs (`logprobs: true`). Default false. */
  logprobs?: boolean;
  /**
   * Ask for token ids (vLLM's `return_token_ids`): `record` keeps them in the turn log,
   * `template` also uses them as the turn's tokens (the server's tokenizer must be the chat
   * template's). Default `none`.
   */
  tokenIds?: 'none' | 'record' | 'template';
  /** Extra body fields of every request (e.g. `{ chat_template_kwargs: {…} }`). */
  extraBody?: Record<string, unknown>;
}

/** What one turn of a conversation did. */
export interface OpenAITurnLog {
  /** The base URL that answered. */
  baseURL: string;
  /** Calls made (retries included). */
  attempts: number;
  /** Wall time in ms. */
  ms: number;
  /** The server's finish reason. */
  finishReason: string | null;
  /** The sampled token ids, when the server returned them. */
  tokenIds?: number[];
  /** The per-token log-probs, when the server returned them. */
  logProbs?: number[];
  /** The prompt's token count, when reported. */
  promptTokens?: number;
  /** Why the reply was not a well-formed message (it went to the environment as raw text). */
  problem?: string;
}

let conversationCounter = 0;

/** Converts the agent loop's messages to the wire format (the model's own replies restored by position). */
function wireMessages(
  messages: readonly ChatMessage[],
  own: ReadonlyMap<number, ChatAssistantMessage>,
): Record<string, unknown>[] {
  return messages.map((m, i) => {
    if (m.role !== 'assistant') return { ...m };
    const mine = own.get(i);
    const out: Record<string, unknown> = {
      role: 'assistant',
      content: mine ? (mine.content ?? null) : (m.content ?? null),
    };
    const calls = m.tool_calls && m.tool_calls.length > 0 ? m.tool_calls : mine?.tool_calls;
    if (calls && calls.length > 0)
      out.tool_calls = calls.map((c, k) => ({
        id: c.id ?? `call_${i}_${k}`,
        type: 'function',
        function: { name: c.function.name, arguments: c.function.arguments },
      }));
    return out;
  });
}

class OpenAIConversation implements ChatConversation {
  /** What each turn did. */
  readonly turns: OpenAITurnLog[] = [];
  private readonly own = new Map<number, ChatAssistantMessage>();
  private readonly id: string;
  private closed = false;

  constructor(
    private readonly policy: OpenAIChatPolicy,
    private readonly context: SessionContext,
  ) {
    this.id = `sfx-${process.pid}-${++conversationCounter}-${context.taskId}-${context.seed}`;
  }

  async respond(request: ChatPolicyRequest): Promise<ChatTurn> {
    if (this.closed) throw new Error('OpenAIConversation: respond after dispose()');
    const o = this.policy.options;
    const p = request.params;
    const maxTokens =
      o.maxTokens !== undefined && p.maxTokens !== undefined
        ? Math.min(o.maxTokens, p.maxTokens)
        : (o.maxTokens ?? p.maxTokens);
    const temperature = o.temperature ?? p.temperature;
    const topP = o.topP ?? p.topP;
    const seed = o.seedMode === 'none' ? undefined : o.seedMode === 'turn' ? p.seed : this.context.seed;
    const body: ChatCompletionRequest = {
      messages: wireMessages(request.messages, this.own),
      ...(request.tools.length > 0 ? { tools: request.tools, tool_choice: 'auto' } : {}),
      ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
      ...(temperature !== undefined ? { temperature } : {}),
      ...(topP !== undefined ? { top_p: topP } : {}),
      ...(seed !== undefined ? { seed } : {}),
      ...(o.logprobs ? { logprobs: true } : {}),
      ...(o.tokenIds !== 'none' ? { return_token_ids: true } : {}),
      ...(o.sessions ? { session_id: this.id } : {}),
      ...(o.extraBody ?? {}),
    };
    const r = await this.policy.client.createChatCompletion(body, o.sessions ? { affinity: this.id } : {});
    const choice = r.response.choices[0];
    const reply = readAssistantReply(choice.message, `call_${this.turns.length}_`);
    const log: OpenAITurnLog = {
      baseURL: r.baseURL,
      attempts: r.attempts,
      ms: r.ms,
      finishReason: choice.finish_reason ?? null,
      ...tokenInfo(r.response),
    };
    if (reply.problem) log.problem = reply.problem;
    this.turns.push(log);
    this.own.set(request.messages.length, reply.message);
    const turn: ChatTurn = {
      message: reply.message,
      finishReason: choice.finish_reason === 'length' ? 'length' : 'stop',
    };
    if (reply.rawText !== undefined) turn.rawText = reply.rawText;
    if (o.tokenIds === 'template') {
      if (!log.tokenIds)
        throw new Error(
          'the server returned no token_ids (tokenIds: template needs a server that supports return_token_ids)',
        );
      turn.tokens = log.tokenIds;
      if (log.logProbs && log.logProbs.length === log.tokenIds.length) turn.logProbs = log.logProbs;
    }
    return turn;
  }

  dispose(): void {
    if (this.closed) return;
    this.closed = true;
    this.policy.client.release(this.id);
    this.policy.finished(this.context, this.turns);
  }
}

function tokenInfo(res: ChatCompletionResponse): Pick<OpenAITurnLog, 'tokenIds' | 'logProbs' | 'promptTokens'> {
  const c = res.choices[0];
  const out: Pick<OpenAITurnLog, 'tokenIds' | 'logProbs' | 'promptTokens'> = {};
  if (Array.isArray(c.token_ids)) out.tokenIds = c.token_ids.slice();
  const lp = c.logprobs?.content;
  if (Array.isArray(lp) && lp.every((x) => typeof x?.logprob === 'number'))
    out.logProbs = lp.map((x) => x.logprob as number);
  const pt =
    res.usage?.prompt_tokens ?? (Array.isArray(res.prompt_token_ids) ? res.prompt_token_ids.length : undefined);
  if (typeof pt === 'number') out.promptTokens = pt;
  return out;
}

/** An OpenAI-compatible server as a {@link ChatPolicy} (see the module description). */
export class OpenAIChatPolicy implements ChatPolicy {
  /** The client. */
  readonly client: OpenAIChatClient;
  /** The options (client excluded), defaults filled in. */
  readonly options: Required<Pick<OpenAIPolicyOptions, 'seedMode' | 'sessions' | 'logprobs' | 'tokenIds'>> &
    Omit<OpenAIPolicyOptions, 'client'>;
  private readonly logs = new Map<string, OpenAITurnLog[]>();

  /** @param options - the client (or its options), sampling overrides, seeding, sessions, token ids. */
  constructor(options: OpenAIPolicyOptions) {
    if (options === null || typeof options !== 'object')
      throw new TypeError('OpenAIChatPolicy expects an options object');
    refuseUnknownOptions(options, POLICY_KEYS, 'OpenAIChatPolicy');
    this.client = options.client instanceof OpenAIChatClient ? options.client : new OpenAIChatClient(options.client);
    const { client: _client, ...rest } = options;
    this.options = {
      ...rest,
      seedMode: options.seedMode ?? 'episode',
      sessions: options.sessions ?? false,
      logprobs: options.logprobs ?? false,
      tokenIds: options.tokenIds ?? 'none',
    };
    if (!['episode', 'turn', 'none'].includes(this.options.seedMode))
      throw new RangeError(
        `seedMode must be 'episode', 'turn' or 'none', got ${JSON.stringify(this.options.seedMode)}`,
      );
    if (!['none', 'record', 'template'].includes(this.options.tokenIds))
      throw new RangeError(
        `tokenIds must be 'none', 'record' or 'template', got ${JSON.stringify(this.options.tokenIds)}`,
      );
    if (
      this.options.maxTokens !== undefined &&
      (!Number.isSafeInteger(this.options.maxTokens) || this.options.maxTokens < 1)
    )
      throw new RangeError(`maxTokens must be a positive integer, got ${String(this.options.maxTokens)}`);
  }

  /** A conversation for one episode. */
  startConversation(context: SessionContext): ChatConversation {
    return new OpenAIConversation(this, context);
  }

  /** @internal Keeps a finished conversation's turn log. */
  finished(context: SessionContext, turns: OpenAITurnLog[]): void {
    this.logs.set(`${context.taskId}\u0000${context.seed}`, turns);
  }

  /** The turn log of the finished episode (task, seed), removed from the policy; undefined when unknown. */
  takeTurnLog(taskId: string, seed: number): OpenAITurnLog[] | undefined {
    const key = `${taskId}\u0000${seed}`;
    const t = this.logs.get(key);
    this.logs.delete(key);
    return t;
  }
}
