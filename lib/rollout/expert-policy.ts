/**
 * The scripted expert agents of the tau world as policies: {@link ExpertChatPolicy} (message
 * level) and {@link ExpertTokenPolicy} (token level, through the chat template). The expert
 * reads the conversation as the token stream carries it (user texts and tool results, a tool
 * result whose text starts with `Error:` being an error) and, as an oracle, the task's
 * scenario; its messages come back as the template's tokens. They make SFT demonstrations and
 * drive the agent loop without a model.
 * @module
 */
import type { ChatTemplate } from '../chat/chat-template.js';
import type { ChatAssistantMessage, ChatMessage } from '../chat/messages.js';
import {
  ExpertAirlineAgent,
  ExpertRetailAgent,
  ExpertTelecomAgent,
  normalizeAction,
  type Message,
  type OpenAIToolSchema,
  type TauAgent,
  type TauTask,
} from '../tau/index.js';
import { ChatTokenPolicy } from './chat-token-policy.js';
import type { ChatConversation, ChatPolicy, ChatPolicyRequest, SessionContext } from './policy.js';

/** Where the expert finds a task by id: a list of tasks or anything with `task(id)` (a `TauWorld`). */
export type TaskLookup = readonly TauTask[] | { task(taskId: string): TauTask };

/** Options of the expert policies. */
export interface ExpertPolicyOptions {
  /** The tasks the episodes run (the expert reads their scenario). */
  tasks: TaskLookup;
  /**
   * Makes the agent for a task; default by the environment's domain (`envInfo.domain`):
   * `ExpertRetailAgent` for retail, `ExpertTelecomAgent` for telecom, `ExpertAirlineAgent` for airline.
   */
  createAgent?: (task: TauTask, context: SessionContext) => TauAgent;
}

function lookup(tasks: TaskLookup): (id: string) => TauTask {
  if (Array.isArray(tasks)) {
    const byId = new Map((tasks as readonly TauTask[]).map((t) => [t.id, t]));
    return (id) => {
      const t = byId.get(id);
      if (!t) throw new RangeError(`expert policy: unknown task id '${id}'`);
      return t;
    };
  }
  const o = tasks as { task(taskId: string): TauTask };
  if (typeof o?.task !== 'function') throw new TypeError('tasks must be an array of tasks or an object with task(id)');
  return (id) => o.task(id);
}

function defaultAgent(_task: TauTask, context: SessionContext): TauAgent {
  const domain = context.envInfo.domain;
  if (domain === 'telecom') return new ExpertTelecomAgent();
  if (domain === 'airline') return new ExpertAirlineAgent();
  if (domain === 'retail' || domain === undefined) return new ExpertRetailAgent();
  throw new RangeError(`expert policy: no expert agent for domain ${JSON.stringify(domain)} (give createAgent)`);
}

/** A chat message (as decoded from tokens) as the tau message an agent observes. */
export function tauMessageOf(m: ChatMessage): Message | null {
  switch (m.role) {
    case 'user':
      return { role: 'user', content: m.content };
    case 'tool':
      return {
        role: 'tool',
        id: m.tool_call_id ?? '',
        content: m.content,
        requestor: 'assistant',
        error: m.content.startsWith('Error:'),
      };
    case 'assistant':
      return {
        role: 'assistant',
        content: m.content ?? null,
        ...(m.tool_calls && m.tool_calls.length > 0
          ? {
              toolCalls: m.tool_calls.map((c, i) => {
                let args: Record<string, unknown> = {};
                try {
                  const v = JSON.parse(c.function.arguments) as unknown;
                  if (v !== null && typeof v === 'object' && !Array.isArray(v)) args = v as Record<string, unknown>;
                } catch {
                  // unparseable arguments: seen as no arguments
                }
                return {
                  id: c.id ?? `call_${i}`,
                  name: c.function.name,
                  arguments: args,
                  requestor: 'assistant' as const,
                };
              }),
            }
          : {}),
      };
    default:
      return null;
  }
}

/** A tau agent's action as an OpenAI-format assistant message (throws when it is not a valid one). */
export function chatMessageOfAction(action: unknown): ChatAssistantMessage {
  let n = 0;
  const norm = normalizeAction(action, () => `call_${n++}`);
  if (norm.kind === 'invalid') throw new TypeError(`the agent's action is not a message: ${norm.reason}`);
  const m = norm.message;
  const calls = m.toolCalls ?? [];
  return calls.length > 0
    ? {
        role: 'assistant',
        content: m.content,
        tool_calls: calls.map((c) => ({
          id: c.id,
          type: 'function',
          function: { name: c.name, arguments: JSON.stringify(c.arguments) },
        })),
      }
    : { role: 'assistant', content: m.content };
}

class ExpertConversation implements ChatConversation {
  private agent: TauAgent | null = null;
  private seen = 0;

  constructor(
    private readonly task: TauTask,
    private readonly context: SessionContext,
    private readonly create: (task: TauTask, context: SessionContext) => TauAgent,
  ) {}

  async respond(request: ChatPolicyRequest): Promise<ChatAssistantMessage> {
    if (!this.agent) {
      this.agent = this.create(this.task, this.context);
      const policy = typeof this.context.envInfo.policy === 'string' ? this.context.envInfo.policy : '';
      this.agent.reset({
        task: this.task,
        tools: request.tools as unknown as readonly OpenAIToolSchema[],
        policy,
        seed: this.context.seed,
      });
    }
    const fresh = request.messages.slice(this.seen);
    this.seen = request.messages.length + 1; // + the reply, which comes back as the next message
    const observation = fresh.map(tauMessageOf).filter((m): m is Message => m !== null);
    return chatMessageOfAction(await this.agent.act(observation));
  }
}

/** The expert agents as a message-level policy. */
export class ExpertChatPolicy implements ChatPolicy {
  private readonly find: (id: string) => TauTask;
  private readonly create: (task: TauTask, context: SessionContext) => TauAgent;

  /** @param options - the tasks and (optionally) the agent factory. */
  constructor(options: ExpertPolicyOptions) {
    this.find = lookup(options.tasks);
    this.create = options.createAgent ?? defaultAgent;
  }

  /** A conversation with a fresh expert for the context's task. */
  startConversation(context: SessionContext): ChatConversation {
    return new ExpertConversation(this.find(context.taskId), context, this.create);
  }
}

/**
 * The expert agents as a token policy: their messages are emitted as the chat template's
 * tokens (what SFT demonstrations are made of). Deterministic; no log-probs.
 */
export class ExpertTokenPolicy extends ChatTokenPolicy {
  /**
   * @param chat - the chat template the agent loop renders with.
   * @param options - the tasks and (optionally) the agent factory.
   */
  constructor(chat: ChatTemplate, options: ExpertPolicyOptions) {
    super(new ExpertChatPolicy(options), chat);
  }
}
