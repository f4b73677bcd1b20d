/**
 * An LLM user simulator over any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM,
 * SGLang…), with tau2's guidelines in our words, roles flipped (the agent's text is the
 * "user" side of the simulator's chat), per-call timeout and retries. Plain `fetch`.
 * @module
 */
import type { Message } from '../messages.js';
import { hasText } from '../messages.js';
import { userSystemPrompt } from '../prompts.js';
import type { TauTask } from '../task.js';
import { renderScenario } from '../task.js';
import type { OpenAIToolSchema } from '../tools.js';
import type { UserReply, UserSimulator, UserTurnInput } from './types.js';

/** Options of {@link LlmUserSimulator}; unset values come from the environment. */
export interface LlmUserOptions {
  /** Base URL, e.g. `http://localhost:8000/v1` (env `SINKFLEX_USER_BASE_URL`, then `OPENAI_BASE_URL`, else OpenAI's). */
  baseURL?: string;
  /** Model name (env `SINKFLEX_USER_MODEL`; required). */
  model?: string;
  /** API key (env `SINKFLEX_USER_API_KEY`, then `OPENAI_API_KEY`; optional for local servers). */
  apiKey?: string;
  /** Sampling temperature. Default 0. */
  temperature?: number;
  /** Per-call timeout in ms. Default 60000. */
  timeoutMs?: number;
  /** Retries after a failed call (network error, timeout, 429/5xx, empty answer). Default 3. */
  retries?: number;
  /** First backoff in ms (doubles each retry). Default 500. */
  backoffMs?: number;
  /** Extra body fields (e.g. `max_tokens`). */
  extraBody?: Record<string, unknown>;
  /** The fetch to use (default global fetch). */
  fetch?: typeof fetch;
}

/** An error talking to the chat endpoint. */
export class LlmUserError extends Error {
  /** @param message - what went wrong. @param status - HTTP status, when there was one. */
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'LlmUserError';
  }
}

/** One message of the simulator's own chat (roles flipped; its own tool calls and results included). */
export type FlippedMessage =
  | { role: 'system' | 'user'; content: string }
  | {
      role: 'assistant';
      content: string | null;
      tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
    }
  | { role: 'tool'; tool_call_id: string; content: string };

/**
 * The chat messages the simulator sends: system prompt, then the dialogue with roles flipped
 * (the agent's text is the simulator's "user" side). The user's own tool calls (dual control)
 * and their results are included as the simulator's assistant tool calls and tool messages;
 * the agent's tool traffic is never shown to the user.
 */
export function flipRoles(system: string, history: readonly Message[]): FlippedMessage[] {
  const out: FlippedMessage[] = [{ role: 'system', content: system }];
  for (const m of history) {
    if (m.role === 'assistant' && hasText(m) && !(m.toolCalls && m.toolCalls.length > 0))
      out.push({ role: 'user', content: m.content as string });
    else if (m.role === 'user' && m.toolCalls && m.toolCalls.length > 0) {
      out.push({
        role: 'assistant',
        content: hasText(m) ? (m.content as string) : null,
        tool_calls: m.toolCalls.map((c) => ({
          id: c.id,
          type: 'function' as const,
          function: { name: c.name, arguments: JSON.stringify(c.arguments) },
        })),
      });
    } else if (m.role === 'user' && hasText(m)) out.push({ role: 'assistant', content: m.content as string });
    else if (m.role === 'tool' && m.requestor === 'user')
      out.push({ role: 'tool', tool_call_id: m.id, content: m.content });
  }
  return out;
}

function parseArgs(raw: unknown): Record<string, unknown> {
  if (raw !== null && typeof raw === 'object' && !Array.isArray(raw)) return raw as Record<string, unknown>;
  if (typeof raw !== 'string' || raw.trim() === '') return {};
  try {
    const v = JSON.parse(raw) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** The LLM user simulator (asynchronous: drive episodes with `reset`/`act`, not the sync variants). */
export class LlmUserSimulator implements UserSimulator {
  private readonly opts: Required<Omit<LlmUserOptions, 'apiKey' | 'extraBody' | 'fetch'>> &
    Pick<LlmUserOptions, 'apiKey' | 'extraBody' | 'fetch'>;
  private system = '';
  private seed = 0;
  private tools: readonly OpenAIToolSchema[] = [];

  /** @param options - endpoint, model, key, timeout, retries (env fallbacks). Throws when no model is given. */
  constructor(options: LlmUserOptions = {}) {
    const env = process.env;
    const model = options.model ?? env.SINKFLEX_USER_MODEL;
    if (!model) throw new TypeError('LlmUserSimulator: no model (options.model or SINKFLEX_USER_MODEL)');
    this.opts = {
      baseURL: (
        options.baseURL ??
        env.SINKFLEX_USER_BASE_URL ??
        env.OPENAI_BASE_URL ??
        'https://api.openai.com/v1'
      ).replace(/\/+$/, ''),
      model,
      apiKey: options.apiKey ?? env.SINKFLEX_USER_API_KEY ?? env.OPENAI_API_KEY,
      temperature: options.temperature ?? 0,
      timeoutMs: options.timeoutMs ?? 60000,
      retries: options.retries ?? 3,
      backoffMs: options.backoffMs ?? 500,
      extraBody: options.extraBody,
      fetch: options.fetch,
    };
  }

  /**
   * Starts a conversation: builds the system prompt from the task's scenario. `userTools` (the
   * domain's user tools, dual control) are offered to the model in each request.
   */
  reset(task: TauTask, seed: number, userTools: readonly OpenAIToolSchema[] = []): void {
    this.system = userSystemPrompt(renderScenario(task.user_scenario), userTools.length > 0);
    this.seed = seed;
    this.tools = userTools;
  }

  /** The system prompt of the current conversation. */
  get systemPrompt(): string {
    return this.system;
  }

  /** Asks the model for the next user message (retrying per the options); throws LlmUserError when all tries fail. */
  async respond(input: UserTurnInput): Promise<UserReply> {
    const body = JSON.stringify({
      model: this.opts.model,
      messages: flipRoles(this.system, input.history),
      ...(this.tools.length > 0 ? { tools: this.tools } : {}),
      temperature: this.opts.temperature,
      seed: this.seed,
      ...this.opts.extraBody,
    });
    const doFetch = this.opts.fetch ?? fetch;
    let last: LlmUserError = new LlmUserError('no attempt made');
    for (let attempt = 0; attempt <= this.opts.retries; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, this.opts.backoffMs * 2 ** (attempt - 1)));
      const ctrl = new AbortController();
      const timer = setTimeout(() => ctrl.abort(), this.opts.timeoutMs);
      try {
        const res = await doFetch(`${this.opts.baseURL}/chat/completions`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}),
          },
          body,
          signal: ctrl.signal,
        });
        if (!res.ok) {
          last = new LlmUserError(
            `chat endpoint answered ${res.status}: ${(await res.text()).slice(0, 200)}`,
            res.status,
          );
          if (res.status === 429 || res.status >= 500) continue;
          throw last;
        }
        const json = (await res.json()) as {
          choices?: {
            message?: {
              content?: string | null;
              tool_calls?: { function?: { name?: unknown; arguments?: unknown } }[];
            };
          }[];
        };
        const message = json.choices?.[0]?.message;
        const content = message?.content;
        const calls = (message?.tool_calls ?? []).filter((c) => typeof c?.function?.name === 'string');
        if (calls.length > 0 && this.tools.length > 0) {
          return {
            content: typeof content === 'string' && content.trim() !== '' ? content : null,
            toolCalls: calls.map((c) => ({
              name: c.function?.name as string,
              arguments: parseArgs(c.function?.arguments),
            })),
          };
        }
        if (typeof content !== 'string' || content.trim() === '') {
          last = new LlmUserError('chat endpoint returned no message content');
          continue;
        }
        return { content };
      } catch (e) {
        if (e instanceof LlmUserError && e.status !== undefined && e.status !== 429 && e.status < 500) throw e;
        last =
          e instanceof LlmUserError
            ? e
            : new LlmUserError(
                ctrl.signal.aborted
                  ? `timed out after ${this.opts.timeoutMs} ms`
                  : `request failed: ${(e as Error).message}`,
              );
      } finally {
        clearTimeout(timer);
      }
    }
    throw last;
  }
}
