/**
 * The chat template of the built-in policy: renders OpenAI-style messages (system, user,
 * assistant with text and/or tool calls, tool results) into tokens, and parses an assistant's
 * generated tokens back into a message. Harmony-like layout (gpt-oss), one section per message:
 *
 * ```
 * <|start|>system<|message|>{content}<|end|>
 * <|start|>tools<|message|>{JSON of the tool schemas}<|end|>       (when tools are given)
 * <|start|>user<|message|>{content}<|end|>
 * <|start|>assistant<|message|>{text}<|call|>{"name":…,"arguments":…}<|end|>
 * <|start|>tool<|message|>{result}<|end|>
 * <|start|>assistant                                                (generation prompt)
 * ```
 *
 * Each piece is tokenized on its own and special tokens come only from the template, so a
 * conversation's tokens are the concatenation of its messages' tokens: rendering a longer
 * conversation extends a shorter one exactly (the prefix property), and the generation prompt
 * followed by an assistant body ({@link ChatTemplate.renderAssistantBody}) is that assistant
 * message's rendering.
 * @module
 */
import type { ChatFormat, ChatFormatAppendOptions, ConversationReader, ParseResult } from './chat-format.js';
import { ConversationDecoder } from './conversation-decoder.js';
import type { ChatAssistantMessage, ChatMessage, ChatToolCall, ToolSchema } from './messages.js';
import { readChatToolCall } from './tool-call.js';
import { TOKENIZER_TRAIN_KEYS, Tokenizer, type TokenizerTrainOptions } from './tokenizer.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

/** The special tokens the template needs, in the order they get ids 0..5. */
export const CHAT_SPECIAL_TOKENS: readonly string[] = Object.freeze([
  '<|pad|>',
  '<|endoftext|>',
  '<|start|>',
  '<|end|>',
  '<|message|>',
  '<|call|>',
]);

const RENDER_KEYS = optionKeys<RenderOptions>({ tools: true, addGenerationPrompt: true });

/** Options of {@link ChatTemplate.render}. */
export interface RenderOptions {
  /** Tool schemas, rendered once after the leading system message (or first). */
  tools?: readonly ToolSchema[];
  /** Append `<|start|>assistant`, where the model starts generating. */
  addGenerationPrompt?: boolean;
}

/** Thrown when a message cannot be rendered (unknown role, wrong field types). */
export class ChatTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChatTemplateError';
  }
}

/**
 * Appends `items` to `out` one by one and returns `out`. `out.push(...items)` passes every item
 * as an argument and overflows the call stack from about 10⁵ items (a long message's tokens).
 */
export function appendTokens(out: number[], items: ArrayLike<number>): number[] {
  for (let i = 0; i < items.length; i++) out.push(items[i]);
  return out;
}

/** `JSON.stringify(v)`, or '' when it throws (a cycle); rendering reports the problem. */
function safeJSON(v: unknown): string {
  try {
    return JSON.stringify(v) ?? '';
  } catch {
    return '';
  }
}

/** Trains a tokenizer over `corpus` with the template's special tokens (see {@link Tokenizer.train}). */
export function trainChatTokenizer(
  corpus: string | readonly string[],
  options: Omit<TokenizerTrainOptions, 'specialTokens'>,
): Tokenizer {
  refuseUnknownOptions(
    options,
    TOKENIZER_TRAIN_KEYS.filter((k) => k !== 'specialTokens'),
    'trainChatTokenizer',
  );
  return Tokenizer.train(corpus, { ...options, specialTokens: [...CHAT_SPECIAL_TOKENS] });
}

/** Renders and parses chats for one tokenizer (which must define {@link CHAT_SPECIAL_TOKENS}). */
export class ChatTemplate implements ChatFormat {
  /** `<|start|>`, `<|end|>`, `<|message|>`, `<|call|>` ids. */
  readonly start: number;
  readonly end: number;
  readonly message: number;
  readonly call: number;
  /** `<|pad|>` id (padding, never rendered). */
  readonly pad: number;
  /** `<|endoftext|>` id. */
  readonly endOfText: number;

  constructor(readonly tokenizer: Tokenizer) {
    this.pad = tokenizer.specialId('<|pad|>');
    this.endOfText = tokenizer.specialId('<|endoftext|>');
    this.start = tokenizer.specialId('<|start|>');
    this.end = tokenizer.specialId('<|end|>');
    this.message = tokenizer.specialId('<|message|>');
    this.call = tokenizer.specialId('<|call|>');
  }

  /** Tokens that end an assistant turn when sampling (`<|end|>`). */
  get stopTokens(): number[] {
    return [this.end];
  }

  /** The tokens of a conversation. */
  render(messages: readonly ChatMessage[], options: RenderOptions = {}): number[] {
    refuseUnknownOptions(options, RENDER_KEYS, 'ChatTemplate.render');
    const out: number[] = [];
    const toolsAt = options.tools && options.tools.length > 0 ? (messages[0]?.role === 'system' ? 1 : 0) : -1;
    messages.forEach((m, i) => {
      if (i === toolsAt) appendTokens(out, this.renderTools(options.tools ?? []));
      appendTokens(out, this.renderMessage(m));
    });
    if (toolsAt >= messages.length) appendTokens(out, this.renderTools(options.tools ?? []));
    if (options.addGenerationPrompt) appendTokens(out, this.generationPrompt());
    return out;
  }

  /** {@link ChatFormat} name of {@link render}. */
  renderTokens(messages: readonly ChatMessage[], options: RenderOptions = {}): number[] {
    return this.render(messages, options);
  }

  /**
   * {@link ChatFormat.renderAppend}: each new message on its own ({@link renderMessage}), then
   * the generation prompt. The history does not matter: the layout is context-free, so this
   * extends any rendering exactly (the prefix property).
   */
  renderAppend(
    _history: readonly ChatMessage[],
    next: readonly ChatMessage[],
    _options: ChatFormatAppendOptions = {},
  ): number[] {
    const out: number[] = [];
    for (const m of next) appendTokens(out, this.renderMessage(m));
    appendTokens(out, this.generationPrompt());
    return out;
  }

  /** A {@link ConversationDecoder} of this template's token streams. */
  createReader(): ConversationReader {
    return new ConversationDecoder(this);
  }

  /**
   * A lower bound on `render(messages, options).length` (and, with one message, on
   * `renderMessage(m).length`) from the lengths of the strings alone, without tokenizing: each
   * piece of text of `n` UTF-16 code units gives at least `ceil(n / maxTokenBytes)` tokens (see
   * {@link Tokenizer.maxTokenBytes}), each section its special tokens. Cheap enough to refuse a
   * prompt that cannot fit a context before spending time (and memory) encoding it. Messages
   * of a wrong shape count as their special tokens only (rendering reports them).
   */
  minTokens(messages: readonly ChatMessage[], options: RenderOptions = {}): number {
    const L = this.tokenizer.maxTokenBytes;
    const text = (v: unknown): number => (typeof v === 'string' ? Math.ceil(v.length / L) : 0);
    // a section: <|start|> role(>= 1 token) <|message|> content <|end|>
    let n = 0;
    if (options.tools && options.tools.length > 0) n += 4 + text(safeJSON(options.tools));
    for (const m of messages) {
      if (typeof m !== 'object' || m === null) continue;
      if (m.role !== 'assistant') {
        n += 4 + text(m.content);
        continue;
      }
      // <|start|> assistant, then <|message|> text and/or <|call|> {"name":…} per call, <|end|>
      n += 3 + text(m.content);
      for (const c of Array.isArray(m.tool_calls) ? m.tool_calls : []) n += 1 + text(c?.function?.name);
    }
    if (options.addGenerationPrompt) n += 2;
    return n;
  }

  /** The tokens of one message (what an agent loop appends for an environment/user/tool turn). */
  renderMessage(m: ChatMessage): number[] {
    if (typeof m !== 'object' || m === null) throw new ChatTemplateError('a message must be an object');
    switch (m.role) {
      case 'system':
      case 'user':
      case 'tool':
        if (typeof m.content !== 'string') throw new ChatTemplateError(`${m.role} message content must be a string`);
        return this.section(m.role, m.content);
      case 'assistant':
        return appendTokens(this.generationPrompt(), this.renderAssistantBody(m));
      default:
        throw new ChatTemplateError(`unknown message role '${String((m as { role?: unknown }).role)}'`);
    }
  }

  /** The section holding the tool schemas. */
  renderTools(tools: readonly ToolSchema[]): number[] {
    return this.section('tools', JSON.stringify(tools));
  }

  /** `<|start|>{role}<|message|>{content}<|end|>` (built without spreading the content's tokens). */
  private section(role: string, content: string): number[] {
    const out = [this.start];
    appendTokens(out, this.tokenizer.encode(role));
    out.push(this.message);
    appendTokens(out, this.tokenizer.encode(content));
    out.push(this.end);
    return out;
  }

  /** `<|start|>assistant`: where generation begins. */
  generationPrompt(): number[] {
    const out = [this.start];
    appendTokens(out, this.tokenizer.encode('assistant'));
    return out;
  }

  /**
   * What the model generates after the prompt for this assistant message, `<|end|>` included:
   * `<|message|>text` when there is text (or nothing else), then `<|call|>{"name","arguments"}`
   * per tool call (arguments embedded as JSON when they parse, else as a string).
   */
  renderAssistantBody(m: ChatAssistantMessage): number[] {
    const out: number[] = [];
    const calls = m.tool_calls ?? [];
    if (m.content !== undefined && m.content !== null && typeof m.content !== 'string') {
      throw new ChatTemplateError('assistant message content must be a string or null');
    }
    if ((m.content !== undefined && m.content !== null && m.content !== '') || calls.length === 0) {
      out.push(this.message);
      appendTokens(out, this.tokenizer.encode(m.content ?? ''));
    }
    for (const c of calls) {
      if (typeof c?.function?.name !== 'string' || typeof c.function.arguments !== 'string') {
        throw new ChatTemplateError('a tool call needs function.name and function.arguments strings');
      }
      let args: unknown = c.function.arguments;
      try {
        args = JSON.parse(c.function.arguments);
      } catch {
        // not JSON: rendered as a string
      }
      out.push(this.call);
      appendTokens(out, this.tokenizer.encode(JSON.stringify({ name: c.function.name, arguments: args })));
    }
    out.push(this.end);
    return out;
  }

  /**
   * The text of an assistant turn that the template could not parse, re-expressed in the
   * environment's raw-text protocol: `<|message|>` sections as their text, each `<|call|>`
   * section as `<tool_call>…</tool_call>` (Hermes style, which the tau environments parse), text
   * outside a section as is, other special tokens by name; stops at `<|end|>`. The environment
   * then answers a broken call with an `Error: …` tool message (counted toward its error budget),
   * a mixed or multiple call likewise, plain text as a message to the user, and an empty turn
   * by ending the episode (`agent_error`).
   */
  rawActionText(tokens: ArrayLike<number>): string {
    const tok = this.tokenizer;
    let out = '';
    let run: number[] = [];
    let inCall = false;
    const flush = (): void => {
      if (run.length > 0) out += tok.decode(run);
      run = [];
      if (inCall) out += '</tool_call>';
      inCall = false;
    };
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (t === this.end) break;
      if (t === this.message) flush();
      else if (t === this.call) {
        flush();
        out += '<tool_call>';
        inCall = true;
      } else run.push(t);
    }
    flush();
    return out;
  }

  /**
   * Parses generated tokens (after the generation prompt) into an assistant message: sections
   * `<|message|>text` and `<|call|>json` up to `<|end|>`. Never throws: malformed output
   * (no `<|end|>`, text outside a section, another special token, bad tool-call JSON) gives
   * `{ ok: false, error }`. Tool calls get ids `call_0`, `call_1`, … unless `idPrefix` is given.
   */
  parseAssistant(tokens: ArrayLike<number>, idPrefix = 'call_'): ParseResult {
    const text = (): string => {
      try {
        return this.tokenizer.decode(
          Array.from(tokens).filter((t) => Number.isInteger(t) && t >= 0 && t < this.tokenizer.vocabSize),
        );
      } catch {
        return '';
      }
    };
    const fail = (error: string): ParseResult => ({ ok: false, error, text: text() });
    const endAt = Array.prototype.indexOf.call(tokens, this.end) as number;
    if (endAt < 0) return fail('the assistant turn has no <|end|> (truncated generation?)');
    const sections: { kind: number; ids: number[] }[] = [];
    for (let i = 0; i < endAt; i++) {
      const t = tokens[i];
      if (!Number.isInteger(t) || t < 0 || t >= this.tokenizer.vocabSize)
        return fail(`token ${String(t)} at ${i} is not in the vocabulary`);
      if (t === this.message || t === this.call) sections.push({ kind: t, ids: [] });
      else if (this.tokenizer.isSpecial(t))
        return fail(`unexpected special token ${this.tokenizer.specialTokens[t]} at ${i}`);
      else if (sections.length === 0) return fail('text before the first <|message|> or <|call|>');
      else sections[sections.length - 1].ids.push(t);
    }
    if (sections.length === 0) return fail('empty assistant turn');
    const parts: string[] = [];
    const calls: ChatToolCall[] = [];
    for (const s of sections) {
      const body = this.tokenizer.decode(s.ids);
      if (s.kind === this.message) {
        parts.push(body);
        continue;
      }
      const call = readChatToolCall(body, calls.length, `${idPrefix}${calls.length}`);
      if (typeof call === 'string') return fail(call);
      calls.push(call);
    }
    const message: ChatAssistantMessage = { role: 'assistant', content: parts.length > 0 ? parts.join('') : null };
    if (calls.length > 0) message.tool_calls = calls;
    return { ok: true, message, consumed: endAt + 1 };
  }
}
