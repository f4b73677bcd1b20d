/**
 * {@link JinjaChatFormat}: a pretrained model's Jinja chat template (`chat_template.jinja` or
 * `tokenizer_config.json`'s `chat_template`) run by `@huggingface/jinja` with what transformers'
 * `apply_chat_template` gives a template: `messages`, `tools`, `documents`,
 * `add_generation_prompt`, the special tokens (`bos_token`, `eos_token`, …), extra variables
 * (e.g. `enable_thinking`), the `raise_exception` and `strftime_now` globals
 * ({@link templateGlobals}), and — from the library — the `tojson` filter with Python's
 * `json.dumps` options, trim_blocks and lstrip_blocks. The rendered text is tokenized with the
 * added tokens in it recognised and nothing added around it, as transformers does.
 *
 * Messages are OpenAI chat messages, adapted as OpenAI-compatible servers (vLLM) adapt them
 * for templates: a `content: null` becomes `''` (Qwen3's template tests `'</think>' in
 * message.content`, which fails on null in Jinja as in Python), and tool-call `arguments` that
 * are JSON object text become objects (templates render them with `tojson`).
 *
 * Completions are read as `<think>` reasoning and Hermes `<tool_call>` blocks (see `hermes.ts`).
 *
 * Token-in/token-out ({@link JinjaChatFormat.renderAppend}): the text of the new messages is
 * the rendering of the longer conversation minus the rendering of the history, when the first
 * extends the second. A template that rewrites earlier turns breaks that (Qwen3 drops the
 * `<think>` block of assistant turns before the last user message, and renders an assistant
 * turn without reasoning with an empty `<think>` block only while it is the last message); then
 * the new messages are rendered on their own and the rendering of an empty conversation
 * (`[{}]`) is cut from the front: VERL's approach (`ToolAgentLoop`: `apply_chat_template(
 * new_messages)` minus `apply_chat_template([{}])`). Either way the text the template puts after
 * an assistant turn's stop token (Qwen3: a newline) comes first, since the sampled turn ends at
 * its stop token. So sampled tokens stay verbatim and every appended token is the template's
 * own rendering of the new messages; the whole conversation re-rendered differs from them
 * exactly where the template rewrites history (and where the model wrote a turn differently
 * from the template's rendering of its parsed message, e.g. the spacing of a call's JSON).
 * @module
 */
import { Environment, Interpreter, Template } from '@huggingface/jinja';

import type { ChatFormat, ChatFormatAppendOptions, ChatFormatRenderOptions, ParsedCompletion } from '../chat-format.js';
import { ChatTemplateError } from '../chat-template.js';
import type { ParseResult } from '../chat-format.js';
import type { ChatAssistantMessage, ChatMessage, ChatToolCall, ToolSchema } from '../messages.js';
import type { HfTokenizer } from './tokenizer.js';
import { parseHermes, withoutThinking } from './hermes.js';

/** Options of {@link JinjaChatFormat}. */
export interface JinjaChatFormatOptions {
  /** Extra template variables for every render (e.g. `{ enable_thinking: false }` for Qwen3). */
  kwargs?: Readonly<Record<string, unknown>>;
  /** The clock of `strftime_now` (default: the current time). Fix it for reproducible prompts. */
  now?: () => Date;
  /** Tokens that end an assistant turn (default: the tokenizer's eos ids). */
  stopTokens?: readonly number[];
  /** With named templates: the one to use (default: `tool_use` when tools are given and it exists, else `default`). */
  templateName?: string;
}

/** Options of {@link JinjaChatFormat.render}. */
export interface JinjaRenderOptions extends ChatFormatRenderOptions {
  /** Extra template variables for this render (over the format's). */
  kwargs?: Readonly<Record<string, unknown>>;
}

/** A rendered conversation. */
export interface RenderedChat {
  /** The text. */
  text: string;
  /** Its token ids. */
  ids: number[];
}

function isObjectText(s: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(s);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The messages as templates see them (see the module description). */
export function templateMessages(messages: readonly ChatMessage[]): Record<string, unknown>[] {
  if (!Array.isArray(messages)) throw new ChatTemplateError('messages must be an array');
  return messages.map((m, i) => {
    if (m === null || typeof m !== 'object') throw new ChatTemplateError(`messages[${i}] must be an object`);
    const out: Record<string, unknown> = { ...m };
    if (out.content === null || out.content === undefined) out.content = '';
    else if (typeof out.content !== 'string')
      throw new ChatTemplateError(`messages[${i}].content must be a string or null`);
    if (m.role === 'assistant' && m.tool_calls !== undefined) {
      if (!Array.isArray(m.tool_calls)) throw new ChatTemplateError(`messages[${i}].tool_calls must be an array`);
      out.tool_calls = m.tool_calls.map((c: ChatToolCall, j: number) => {
        if (typeof c?.function?.name !== 'string' || typeof c.function.arguments !== 'string') {
          throw new ChatTemplateError(
            `messages[${i}].tool_calls[${j}] needs function.name and function.arguments strings`,
          );
        }
        const args = isObjectText(c.function.arguments);
        return { ...c, function: { ...c.function, arguments: args ?? c.function.arguments } };
      });
    }
    return out;
  });
}

/** A pretrained model's Jinja chat template as a {@link ChatFormat} (see the module description). */
export class JinjaChatFormat implements ChatFormat {
  /** Renders take template variables (`options.kwargs`, vLLM's `chat_template_kwargs`). */
  readonly templateVariables = true;
  /** Tokens that end an assistant turn. */
  readonly stopTokens: number[];
  /** Padding id. */
  readonly pad: number;
  private readonly templates = new Map<string, Template>();
  private readonly kwargs: Readonly<Record<string, unknown>>;
  private readonly now: (() => Date) | undefined;
  private readonly templateName: string | undefined;
  private readonly stopStrings: string[];
  private emptyText: string | null = null;

  /**
   * @param tokenizer - the model's tokenizer.
   * @param template - the template source, or named templates (`{ default, tool_use, … }`).
   * @param options - extra variables, clock, stop tokens, template choice.
   */
  constructor(
    readonly tokenizer: HfTokenizer,
    template: string | Readonly<Record<string, string>>,
    options: JinjaChatFormatOptions = {},
  ) {
    const sources: [string, string][] =
      typeof template === 'string' ? [['default', template]] : Object.entries(template ?? {});
    if (sources.length === 0) throw new ChatTemplateError('no chat template given');
    for (const [name, src] of sources) {
      if (typeof src !== 'string') throw new ChatTemplateError(`chat template '${name}' must be a string`);
      try {
        this.templates.set(name, new Template(src));
      } catch (e) {
        throw new ChatTemplateError(`chat template '${name}' does not parse: ${(e as Error).message}`);
      }
    }
    this.kwargs = { ...(options.kwargs ?? {}) };
    this.now = options.now;
    this.templateName = options.templateName;
    if (this.templateName !== undefined && !this.templates.has(this.templateName))
      throw new ChatTemplateError(`no chat template named '${this.templateName}'`);
    this.stopTokens = [...(options.stopTokens ?? tokenizer.eosIds)];
    if (this.stopTokens.length === 0)
      throw new ChatTemplateError(
        'the model has no stop token (no eos_token_id in generation_config.json, no eos_token in tokenizer_config.json)',
      );
    for (const id of this.stopTokens) {
      if (!Number.isInteger(id) || id < 0 || id >= tokenizer.vocabSize)
        throw new ChatTemplateError(`stop token ${String(id)} is not in the vocabulary`);
    }
    this.stopStrings = this.stopTokens.map((id) => tokenizer.idToToken(id) ?? '').filter((s) => s.length > 0);
    this.pad = tokenizer.padId;
  }

  private pick(tools: readonly ToolSchema[] | undefined): Template {
    if (this.templateName !== undefined) return this.templates.get(this.templateName) as Template;
    if (this.templates.size === 1) return this.templates.values().next().value as Template;
    if (tools !== undefined && this.templates.has('tool_use')) return this.templates.get('tool_use') as Template;
    const t = this.templates.get('default');
    if (!t)
      throw new ChatTemplateError(
        `the model has named chat templates (${[...this.templates.keys()].join(', ')}) and none is 'default': give options.templateName`,
      );
    return t;
  }

  private run(messages: readonly Record<string, unknown>[], options: JinjaRenderOptions): string {
    const tools = options.tools;
    const now = this.now ?? (() => new Date());
    const vars: Record<string, unknown> = {
      ...templateGlobals(now),
      ...this.tokenizer.specialTokensMap,
      ...this.kwargs,
      ...(options.kwargs ?? {}),
      messages,
      tools: tools === undefined ? null : tools,
      documents: null,
      add_generation_prompt: options.addGenerationPrompt === true,
    };
    const env = new Environment();
    for (const [k, v] of Object.entries(vars)) env.set(k, v);
    try {
      return (new Interpreter(env).run(this.pick(tools).parsed) as unknown as { value: string }).value;
    } catch (e) {
      if (e instanceof ChatTemplateError) throw e;
      throw new ChatTemplateError(`the chat template failed: ${(e as Error).message}`);
    }
  }

  /** The text of a conversation. */
  renderText(messages: readonly ChatMessage[], options: JinjaRenderOptions = {}): string {
    return this.run(templateMessages(messages), options);
  }

  /** The text and token ids of a conversation. */
  render(messages: readonly ChatMessage[], options: JinjaRenderOptions = {}): RenderedChat {
    const text = this.renderText(messages, options);
    return { text, ids: this.tokenizer.encode(text) };
  }

  /** The token ids of a conversation. */
  renderTokens(messages: readonly ChatMessage[], options: JinjaRenderOptions = {}): number[] {
    return this.render(messages, options).ids;
  }

  /**
   * {@link ChatFormat.minTokens}: a lower bound on the tokens of `renderTokens(messages,
   * options)` from text lengths alone (rendering is cheap next to tokenizing): the rendered
   * text's normalized length, less that of an empty conversation's rendering (a preamble the
   * template writes before any message, such as a default system prompt, so that the bound also
   * holds for new messages rendered on their own), over the tokenizer's longest token
   * ({@link HfTokenizer.longestToken}), rounded up. A conversation the template cannot render
   * counts 0 (rendering it reports why).
   */
  minTokens(messages: readonly ChatMessage[], options: JinjaRenderOptions = {}): number {
    let text: string;
    try {
      text = this.renderText(messages, options);
    } catch {
      return 0;
    }
    const tok = this.tokenizer;
    const n = tok.normalizedLength(text) - tok.normalizedLength(this.emptyConversation());
    return n <= 0 ? 0 : Math.ceil(n / tok.longestToken());
  }

  /** The text after the last stop token of a rendering (what follows an assistant turn's stop token). */
  private tailAfterStop(text: string): string {
    let best = -1;
    let len = 0;
    for (const s of this.stopStrings) {
      const at = text.lastIndexOf(s);
      if (at > best) [best, len] = [at, s.length];
    }
    return best < 0 ? '' : text.slice(best + len);
  }

  /** The rendering of an empty conversation (`[{}]`), cut from the front of messages rendered on their own. */
  private emptyConversation(): string {
    if (this.emptyText === null) {
      try {
        this.emptyText = this.run([{}], {});
      } catch {
        this.emptyText = '';
      }
    }
    return this.emptyText;
  }

  /** The text {@link renderAppend} tokenizes (see the module description). */
  appendText(
    history: readonly ChatMessage[],
    next: readonly ChatMessage[],
    options: ChatFormatAppendOptions = {},
  ): string {
    const { tools, kwargs } = options;
    const before = this.renderText(history, { tools, kwargs });
    const after = this.renderText([...history, ...next], { tools, kwargs, addGenerationPrompt: true });
    let delta: string;
    if (after.startsWith(before)) delta = after.slice(before.length);
    else {
      const alone = this.renderText(next, { kwargs, addGenerationPrompt: true });
      const empty = this.emptyConversation();
      if (!alone.startsWith(empty))
        throw new ChatTemplateError(
          'the template renders the new messages neither after the conversation nor on their own after an empty conversation',
        );
      delta = alone.slice(empty.length);
    }
    const last = history[history.length - 1];
    if (last?.role !== 'assistant') return delta;
    // The text after the stop token, looked for in the last turn's own rendering where it has one.
    const earlier = this.renderText(history.slice(0, -1), { tools, kwargs });
    return this.tailAfterStop(before.startsWith(earlier) ? before.slice(earlier.length) : before) + delta;
  }

  /** {@link ChatFormat.renderAppend} (see the module description for how). */
  renderAppend(
    history: readonly ChatMessage[],
    next: readonly ChatMessage[],
    options: ChatFormatAppendOptions = {},
  ): number[] {
    return this.tokenizer.encode(this.appendText(history, next, options));
  }

  /** The tokens up to the first stop token (exclusive) and its index (-1: none). */
  private untilStop(tokens: ArrayLike<number>): { body: number[]; stopAt: number } {
    const stops = new Set(this.stopTokens);
    const body: number[] = [];
    for (let i = 0; i < tokens.length; i++) {
      if (stops.has(tokens[i])) return { body, stopAt: i };
      body.push(tokens[i]);
    }
    return { body, stopAt: -1 };
  }

  /** The completion text without a trailing stop token's name. */
  private cutStop(text: string): string {
    let end = text.length;
    for (const s of this.stopStrings) {
      const at = text.indexOf(s);
      if (at >= 0 && at < end) end = at;
    }
    return text.slice(0, end);
  }

  /**
   * Reads a completion's text (up to a stop token's name, if written): `{ content, toolCalls,
   * reasoning, error }`. On a malformed call, `content` is the raw text for the environment.
   */
  parse(completionText: string, idPrefix = 'call_'): ParsedCompletion {
    if (typeof completionText !== 'string') throw new TypeError('parse: completionText must be a string');
    const text = this.cutStop(completionText);
    const r = parseHermes(text, idPrefix);
    if (r.ok) return { content: r.content, toolCalls: r.toolCalls, reasoning: r.reasoning, error: null };
    return { content: withoutThinking(text), toolCalls: [], reasoning: null, error: r.error };
  }

  /** {@link ChatFormat.parseAssistant}: the turn must end with a stop token and hold no other special token. */
  parseAssistant(tokens: ArrayLike<number>, idPrefix = 'call_'): ParseResult {
    const tok = this.tokenizer;
    const fail = (error: string): ParseResult => ({ ok: false, error, text: tok.decode(tokens) });
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (!Number.isInteger(t) || t < 0 || t >= tok.vocabSize)
        return fail(`token ${String(t)} at ${i} is not in the vocabulary`);
    }
    const { body, stopAt } = this.untilStop(tokens);
    if (stopAt < 0) return fail('the assistant turn has no stop token (truncated generation?)');
    const special = body.findIndex((t) => tok.isSpecial(t));
    if (special >= 0)
      return fail(`unexpected special token ${tok.idToToken(body[special]) ?? body[special]} at ${special}`);
    const r = parseHermes(tok.decode(body), idPrefix);
    if (!r.ok) return fail(r.error);
    const message: ChatAssistantMessage = { role: 'assistant', content: r.content };
    if (r.toolCalls.length > 0) message.tool_calls = r.toolCalls;
    if (r.reasoning !== null) message.reasoning_content = r.reasoning;
    return { ok: true, message, consumed: stopAt + 1 };
  }

  /** {@link ChatFormat.rawActionText}: the decoded turn up to its stop token, reasoning left out. */
  rawActionText(tokens: ArrayLike<number>): string {
    return withoutThinking(this.tokenizer.decode(this.untilStop(tokens).body));
  }
}

/**
 * The globals transformers gives templates (`raise_exception`, `strftime_now`) and Jinja's
 * constants. `strftime_now` reads `now` (so a fixed clock gives reproducible prompts) and writes
 * English names whatever the machine's locale, as Python does in its default C locale.
 */
export function templateGlobals(now: () => Date): Record<string, unknown> {
  return {
    true: true,
    false: false,
    none: null,
    True: true,
    False: false,
    None: null,
    raise_exception: (message: unknown): never => {
      throw new ChatTemplateError(`the chat template raised: ${String(message)}`);
    },
    strftime_now: (format: unknown): string => pythonStrftime(now(), String(format)),
    range: (start: number, stop?: number, step = 1): number[] => {
      if (stop === undefined) [start, stop] = [0, start];
      if (step === 0) throw new ChatTemplateError('range() step must not be zero');
      const out: number[] = [];
      for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
      return out;
    },
  };
}

/** Python's `strftime` for the directives chat templates use (local time, English names; `%%` for others' `%`). */
export function pythonStrftime(date: Date, format: string): string {
  const months = [
    'January',
    'February',
    'March',
    'April',
    'May',
    'June',
    'July',
    'August',
    'September',
    'October',
    'November',
    'December',
  ];
  const days = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
  const p2 = (n: number): string => String(n).padStart(2, '0');
  return format.replace(/%([YmdbBaAHMSjy%])/g, (_, d: string) => {
    switch (d) {
      case 'Y':
        return String(date.getFullYear());
      case 'y':
        return p2(date.getFullYear() % 100);
      case 'm':
        return p2(date.getMonth() + 1);
      case 'd':
        return p2(date.getDate());
      case 'b':
        return months[date.getMonth()].slice(0, 3);
      case 'B':
        return months[date.getMonth()];
      case 'a':
        return days[date.getDay()].slice(0, 3);
      case 'A':
        return days[date.getDay()];
      case 'H':
        return p2(date.getHours());
      case 'M':
        return p2(date.getMinutes());
      case 'S':
        return p2(date.getSeconds());
      case 'j': {
        const day = Date.UTC(date.getFullYear(), date.getMonth(), date.getDate()) - Date.UTC(date.getFullYear(), 0, 1);
        return String(day / 86400000 + 1).padStart(3, '0');
      }
      default:
        return '%';
    }
  });
}
