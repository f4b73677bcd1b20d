/**
 * {@link HarmonyChatFormat}: gpt-oss's harmony format (its `tokenizer_config.json` has no chat
 * template) for OpenAI chat messages, written from the harmony specification.
 *
 * Rendering: a system message (model identity, knowledge cutoff, optional current date,
 * reasoning effort, valid channels, and "Calls to these tools must go to the commentary
 * channel: 'functions'." when there are function tools); a developer message with the leading
 * OpenAI system message as `# Instructions` and the tools as `namespace functions { … }`; user
 * messages; an assistant message's `reasoning_content` on the analysis channel, its text on the
 * final channel (on commentary, as a preamble, when it also calls tools), each call as
 * `<|start|>assistant to=functions.NAME<|channel|>commentary <|constrain|>json<|message|>{args}
 * <|call|>`; tool results as `<|start|>functions.NAME to=assistant<|channel|>commentary
 * <|message|>{output}<|end|>`; the generation prompt `<|start|>assistant`. The analysis of
 * turns that ended in a final answer is dropped (the spec's "drop any previous CoT content on
 * subsequent sampling if the responses by the assistant ended in a message to the final
 * channel"); an ongoing tool-calling turn keeps it.
 *
 * Special cases, where OpenAI messages say less than harmony needs: a tool result's tool is
 * its `name`, else that of the call its `tool_call_id` answers, else (a result of a call that
 * could not be parsed) the `functions` namespace itself; a later system message becomes a
 * developer message; a tool without parameters, or whose parameters have no properties, is
 * `() => any` (the spec's form for functions without arguments).
 *
 * Completions: analysis → reasoning, final (and commentary preambles) → content, a message to
 * `functions.NAME` → a tool call whose arguments must be a JSON object (kept as the model wrote
 * them, so the call renders back to the same text).
 *
 * Token-in/token-out: messages render independently, so {@link HarmonyChatFormat.renderAppend}
 * is the new messages' rendering and the generation prompt. The whole conversation re-rendered
 * differs from the tokens assembled turn by turn where the sampled turns differ from their
 * canonical rendering: the model ends a final answer with `<|return|>` (history has `<|end|>`),
 * writes calls as `<|channel|>commentary to=functions.NAME …` (the renderer puts the recipient
 * first, as harmony's does), and a finished turn's analysis stays in the context although a
 * fresh rendering drops it.
 * @module
 */
import type { ChatFormat, ChatFormatAppendOptions, ChatFormatRenderOptions, ParsedCompletion } from '../chat-format.js';
import { ChatTemplateError } from '../chat-template.js';
import type { ParseResult } from '../chat-format.js';
import type { ChatAssistantMessage, ChatMessage, ChatToolCall, ToolSchema } from '../messages.js';
import type { HfTokenizer } from './tokenizer.js';
import { parseHarmony, parseHarmonyHeader, type HarmonyParsedMessage } from './harmony-parse.js';
import {
  harmonyGenerationPrompt,
  harmonyPiecesText,
  renderHarmonyConversation,
  type HarmonyMessage,
  type HarmonyPiece,
  type ReasoningEffort,
} from './harmony-render.js';
import type { HarmonyTool, HarmonyToolNamespace, HarmonyJsonSchema } from './harmony-schema.js';
import type { RenderedChat } from './jinja-format.js';

/** Options of {@link HarmonyChatFormat} (each also per render). */
export interface HarmonyChatFormatOptions {
  /** The model identity line (default harmony's; null leaves it out). */
  modelIdentity?: string | null;
  /** `Knowledge cutoff:` (default "2024-06"; null leaves it out). */
  knowledgeCutoff?: string | null;
  /** `Current date:` (default none: give one, e.g. "2025-06-28", for a dated prompt). */
  currentDate?: string | null;
  /** `Reasoning:` (default "medium"). */
  reasoningEffort?: ReasoningEffort;
  /** Drop finished turns' analysis (default true). */
  dropAnalysis?: boolean;
  /** Built-in tool namespaces of the system message (e.g. a browser), beside the function tools. */
  builtinTools?: readonly HarmonyToolNamespace[];
}

/** Options of {@link HarmonyChatFormat.render}. */
export interface HarmonyRenderChatOptions extends ChatFormatRenderOptions, HarmonyChatFormatOptions {}

const FUNCTIONS = 'functions';

function recipientOf(name: string): string {
  return name.includes('.') ? name : `${FUNCTIONS}.${name}`;
}

function functionName(recipient: string): string {
  return recipient.startsWith(`${FUNCTIONS}.`) ? recipient.slice(FUNCTIONS.length + 1) : recipient;
}

/** An OpenAI tool schema as a harmony function. */
export function harmonyTool(tool: ToolSchema, index: number): HarmonyTool {
  const f = (tool.function ?? tool) as Record<string, unknown>;
  if (typeof f.name !== 'string' || f.name === '') throw new ChatTemplateError(`tools[${index}] needs a function name`);
  const params = f.parameters as HarmonyJsonSchema | undefined | null;
  const props =
    params && typeof params.properties === 'object' && params.properties !== null ? Object.keys(params.properties) : [];
  const description = typeof f.description === 'string' ? f.description : '';
  return {
    name: f.name,
    description,
    parameters: params && (props.length > 0 || params.type !== 'object') ? params : null,
  };
}

/** The names of the calls in `messages`, by call id. */
function callNames(messages: readonly ChatMessage[], into = new Map<string, string>()): Map<string, string> {
  for (const m of messages)
    if (m.role === 'assistant') for (const c of m.tool_calls ?? []) if (c.id) into.set(c.id, c.function.name);
  return into;
}

function text(v: unknown, where: string): string {
  if (v === null || v === undefined) return '';
  if (typeof v !== 'string') throw new ChatTemplateError(`${where} must be a string`);
  return v;
}

/**
 * A completion's messages as content, reasoning and calls (or the first problem): analysis
 * messages are the reasoning, final and commentary messages (and those without a channel) the
 * content, each joined by a newline; a message to a recipient (other than `all`) is a tool call
 * with id `<idPrefix><index>` whose arguments must be a JSON object. The streamed replies
 * (lib/openai/stream-harmony.ts) read the messages completed so far with it.
 */
export function readHarmonyCompletion(
  messages: readonly HarmonyParsedMessage[],
  idPrefix: string,
): { content: string | null; reasoning: string | null; calls: ChatToolCall[] } | { error: string } {
  const content: string[] = [];
  const reasoning: string[] = [];
  const calls: ChatToolCall[] = [];
  for (const m of messages) {
    if (m.role !== 'assistant') return { error: `the completion holds a message from ${m.name ?? m.role}` };
    if (m.recipient !== undefined && m.recipient !== 'all') {
      const i = calls.length;
      let args: unknown;
      try {
        args = JSON.parse(m.content);
      } catch (e) {
        return { error: `tool call ${i} (${m.recipient}) arguments are not valid JSON: ${(e as Error).message}` };
      }
      if (args === null || typeof args !== 'object' || Array.isArray(args))
        return { error: `tool call ${i} (${m.recipient}) arguments must be a JSON object` };
      const name = functionName(m.recipient);
      if (name === '') return { error: `tool call ${i} has no function name` };
      calls.push({ id: `${idPrefix}${i}`, type: 'function', function: { name, arguments: m.content } });
    } else if (m.channel === 'analysis') reasoning.push(m.content);
    else if (m.channel === undefined || m.channel === 'final' || m.channel === 'commentary') content.push(m.content);
    else return { error: `unknown channel '${m.channel}'` };
  }
  return {
    content: content.length > 0 ? content.join('\n') : null,
    reasoning: reasoning.length > 0 ? reasoning.join('\n') : null,
    calls,
  };
}

/** gpt-oss's harmony format as a {@link ChatFormat} (see the module description). */
export class HarmonyChatFormat implements ChatFormat {
  /** Tokens that end an assistant turn: `<|return|>`, `<|call|>` and the model's eos ids. */
  readonly stopTokens: number[];
  /** Padding id. */
  readonly pad: number;
  private readonly options: HarmonyChatFormatOptions;
  private readonly specialIds = new Map<string, number>();

  /** @param tokenizer - gpt-oss's tokenizer (o200k_harmony). @param options - system message settings. */
  constructor(
    readonly tokenizer: HfTokenizer,
    options: HarmonyChatFormatOptions = {},
  ) {
    for (const s of ['<|start|>', '<|end|>', '<|message|>', '<|channel|>', '<|constrain|>', '<|return|>', '<|call|>']) {
      const id = tokenizer.tokenToId(s);
      if (id === undefined) throw new ChatTemplateError(`the tokenizer has no harmony token ${s}`);
      this.specialIds.set(s, id);
    }
    this.stopTokens = [...new Set([this.special('<|return|>'), this.special('<|call|>'), ...tokenizer.eosIds])];
    this.pad = tokenizer.padId;
    this.options = { ...options };
  }

  private special(s: string): number {
    const id = this.specialIds.get(s);
    if (id === undefined) throw new ChatTemplateError(`harmony token ${s} is not known`);
    return id;
  }

  /** Token ids of pieces (text as plain text, piece by piece). */
  idsOf(pieces: readonly HarmonyPiece[]): number[] {
    const out: number[] = [];
    for (const p of pieces) {
      if ('special' in p) out.push(this.special(p.special));
      else out.push(...this.tokenizer.encodeOrdinary(p.text));
    }
    return out;
  }

  /** Renders harmony messages directly (text and ids). */
  renderHarmony(
    messages: readonly HarmonyMessage[],
    options: { dropAnalysis?: boolean; addGenerationPrompt?: boolean } = {},
  ): RenderedChat {
    let pieces: HarmonyPiece[];
    try {
      pieces = renderHarmonyConversation(messages, options);
    } catch (e) {
      throw new ChatTemplateError((e as Error).message);
    }
    return { text: harmonyPiecesText(pieces), ids: this.idsOf(pieces) };
  }

  /** The harmony messages of a conversation (see the module description). */
  toHarmony(messages: readonly ChatMessage[], options: HarmonyRenderChatOptions = {}): HarmonyMessage[] {
    if (!Array.isArray(messages)) throw new ChatTemplateError('messages must be an array');
    const o = { ...this.options, ...options };
    const out: HarmonyMessage[] = [
      {
        role: 'system',
        content: {
          system: {
            modelIdentity: o.modelIdentity,
            knowledgeCutoff: o.knowledgeCutoff,
            conversationStartDate: o.currentDate ?? null,
            reasoningEffort: o.reasoningEffort ?? 'medium',
            tools: o.builtinTools ?? [],
          },
        },
      },
    ];
    let rest = messages;
    let instructions: string | null = null;
    if (messages[0]?.role === 'system') {
      instructions = text(messages[0].content, 'messages[0].content');
      rest = messages.slice(1);
    }
    const tools = (options.tools ?? []).map(harmonyTool);
    if ((instructions !== null && instructions !== '') || tools.length > 0) {
      out.push({
        role: 'developer',
        content: {
          developer: {
            instructions: instructions || null,
            tools: tools.length > 0 ? [{ name: FUNCTIONS, tools }] : [],
          },
        },
      });
    }
    out.push(...this.bodyMessages(rest, new Map(), messages.length - rest.length));
    return out;
  }

  /** The harmony messages of conversation messages after the leading system message. */
  private bodyMessages(messages: readonly ChatMessage[], names: Map<string, string>, offset: number): HarmonyMessage[] {
    const out: HarmonyMessage[] = [];
    messages.forEach((m, k) => {
      const where = `messages[${k + offset}]`;
      if (m === null || typeof m !== 'object') throw new ChatTemplateError(`${where} must be an object`);
      switch (m.role) {
        case 'system':
          out.push({
            role: 'developer',
            content: { developer: { instructions: text(m.content, `${where}.content`) } },
          });
          return;
        case 'user':
          out.push({ role: 'user', content: text(m.content, `${where}.content`) });
          return;
        case 'assistant': {
          const reasoning = text(m.reasoning_content, `${where}.reasoning_content`);
          const content = text(m.content, `${where}.content`);
          const calls = m.tool_calls ?? [];
          if (!Array.isArray(calls)) throw new ChatTemplateError(`${where}.tool_calls must be an array`);
          if (reasoning !== '') out.push({ role: 'assistant', channel: 'analysis', content: reasoning });
          if (calls.length === 0) {
            out.push({ role: 'assistant', channel: 'final', content });
            return;
          }
          if (content !== '') out.push({ role: 'assistant', channel: 'commentary', content });
          calls.forEach((c, j) => {
            if (
              typeof c?.function?.name !== 'string' ||
              c.function.name === '' ||
              typeof c.function.arguments !== 'string'
            ) {
              throw new ChatTemplateError(
                `${where}.tool_calls[${j}] needs function.name and function.arguments strings`,
              );
            }
            if (c.id) names.set(c.id, c.function.name);
            out.push({
              role: 'assistant',
              recipient: recipientOf(c.function.name),
              channel: 'commentary',
              contentType: '<|constrain|>json',
              content: c.function.arguments,
            });
          });
          return;
        }
        case 'tool': {
          const name = m.name ?? (m.tool_call_id !== undefined ? names.get(m.tool_call_id) : undefined);
          out.push({
            role: 'tool',
            name: name ? recipientOf(name) : FUNCTIONS,
            recipient: 'assistant',
            channel: 'commentary',
            content: text(m.content, `${where}.content`),
          });
          return;
        }
        default:
          throw new ChatTemplateError(`unknown message role '${String((m as { role?: unknown }).role)}' in ${where}`);
      }
    });
    return out;
  }

  /** The text and token ids of a conversation. */
  render(messages: readonly ChatMessage[], options: HarmonyRenderChatOptions = {}): RenderedChat {
    const o = { ...this.options, ...options };
    return this.renderHarmony(this.toHarmony(messages, options), {
      dropAnalysis: o.dropAnalysis,
      addGenerationPrompt: options.addGenerationPrompt,
    });
  }

  /** The token ids of a conversation. */
  renderTokens(messages: readonly ChatMessage[], options: HarmonyRenderChatOptions = {}): number[] {
    return this.render(messages, options).ids;
  }

  /**
   * {@link ChatFormat.minTokens}: a lower bound on the tokens of `renderTokens(messages,
   * options)` without tokenizing: the rendering's pieces are built (cheap), each special token
   * counts 1 and each text piece (tokenized on its own, as plain text) at least its normalized
   * length over the longest vocabulary entry ({@link HfTokenizer.longestToken}), rounded up. The
   * system message is left out, so the bound also holds for new messages rendered on their own
   * ({@link renderAppend} has none). A conversation that cannot be rendered counts 0.
   */
  minTokens(messages: readonly ChatMessage[], options: HarmonyRenderChatOptions = {}): number {
    const o = { ...this.options, ...options };
    let pieces: HarmonyPiece[];
    try {
      pieces = renderHarmonyConversation(this.toHarmony(messages, options).slice(1), {
        dropAnalysis: o.dropAnalysis,
        addGenerationPrompt: options.addGenerationPrompt,
      });
    } catch {
      return 0;
    }
    let n = 0;
    for (const p of pieces) n += 'special' in p ? 1 : this.tokenizer.minTokens(p.text, true);
    return n;
  }

  /** {@link ChatFormat.renderAppend}: the new messages' rendering and `<|start|>assistant`. */
  renderAppend(
    history: readonly ChatMessage[],
    next: readonly ChatMessage[],
    _options: ChatFormatAppendOptions = {},
  ): number[] {
    const offset = history.length;
    const body = this.bodyMessages(next, callNames(history), offset);
    return this.renderHarmony(body, { dropAnalysis: false, addGenerationPrompt: true }).ids;
  }

  /** The tokens of a text with harmony's special tokens written by name. */
  private idsOfText(completion: string): number[] {
    return this.tokenizer.encode(completion);
  }

  /**
   * Reads a completion (the text after `<|start|>assistant`, special tokens by name; a text
   * starting with `<|start|>` is read from there): `{ content, toolCalls, reasoning, error }`.
   * On a malformed one, `content` is the raw text for the environment.
   */
  parse(completionText: string, idPrefix = 'call_'): ParsedCompletion {
    if (typeof completionText !== 'string') throw new TypeError('parse: completionText must be a string');
    const ids = this.idsOfText(completionText);
    const r = parseHarmony(this.tokenizer, ids, {
      role: ids[0] === this.special('<|start|>') ? null : 'assistant',
      eosIds: this.tokenizer.eosIds,
    });
    const read = r.error === null ? readHarmonyCompletion(r.messages, idPrefix) : { error: r.error };
    if ('error' in read) return { content: this.rawActionText(ids), toolCalls: [], reasoning: null, error: read.error };
    return { content: read.content, toolCalls: read.calls, reasoning: read.reasoning, error: null };
  }

  /** {@link ChatFormat.parseAssistant}: the turn must end with a stop token (`<|call|>`, `<|return|>`, eos). */
  parseAssistant(tokens: ArrayLike<number>, idPrefix = 'call_'): ParseResult {
    const tok = this.tokenizer;
    const fail = (error: string): ParseResult => ({ ok: false, error, text: tok.decode(tokens) });
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (!Number.isInteger(t) || t < 0 || t >= tok.vocabSize)
        return fail(`token ${String(t)} at ${i} is not in the vocabulary`);
    }
    const stops = new Set(this.stopTokens);
    let stopAt = -1;
    for (let i = 0; i < tokens.length && stopAt < 0; i++) if (stops.has(tokens[i])) stopAt = i;
    if (stopAt < 0) return fail('the assistant turn has no stop token (<|call|>, <|return|>; truncated generation?)');
    const r = parseHarmony(tok, Array.prototype.slice.call(tokens, 0, stopAt + 1) as number[], {
      role: 'assistant',
      eosIds: tok.eosIds,
    });
    if (r.error !== null) return fail(r.error);
    const read = readHarmonyCompletion(r.messages, idPrefix);
    if ('error' in read) return fail(read.error);
    const message: ChatAssistantMessage = { role: 'assistant', content: read.content };
    if (read.calls.length > 0) message.tool_calls = read.calls;
    if (read.reasoning !== null) message.reasoning_content = read.reasoning;
    return { ok: true, message, consumed: stopAt + 1 };
  }

  /**
   * {@link ChatFormat.rawActionText}, read leniently: each message's text, analysis left out, a
   * message to a recipient as `<tool_call>{"name": NAME, "arguments": ARGS}</tool_call>` with
   * ARGS as the model wrote them (so broken JSON stays broken and the environment says so);
   * a message without `<|message|>` as its text.
   */
  rawActionText(tokens: ArrayLike<number>): string {
    const tok = this.tokenizer;
    const START = this.special('<|start|>');
    const MESSAGE = this.special('<|message|>');
    const enders = new Set([this.special('<|end|>'), ...this.stopTokens]);
    const stops = new Set(this.stopTokens);
    const segments: number[][] = [[]];
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (t === START) segments.push([]);
      else segments[segments.length - 1].push(t);
      if (stops.has(t)) break;
    }
    let out = '';
    segments.forEach((seg, k) => {
      const body = seg.filter((t) => !enders.has(t));
      const at = body.indexOf(MESSAGE);
      if (at < 0) {
        out += tok.decode(body, { skipSpecialTokens: true });
        return;
      }
      const content = tok.decode(body.slice(at + 1));
      let header: ReturnType<typeof parseHarmonyHeader> | null;
      try {
        header = parseHarmonyHeader(tok.decode(body.slice(0, at)), k === 0 ? 'assistant' : null);
      } catch {
        header = null;
      }
      if (header?.recipient !== undefined && header.recipient !== 'all') {
        const args = content.trim();
        out += `<tool_call>{"name": ${JSON.stringify(functionName(header.recipient))}, "arguments": ${args === '' ? '{}' : args}}</tool_call>`;
      } else if (header?.channel !== 'analysis') out += content;
    });
    return out;
  }

  /**
   * {@link ChatFormat.renderAssistantBody}: the tokens gpt-oss samples after `<|start|>assistant`
   * for `message`, stop token included — its reasoning on the analysis channel (`…<|end|>` and a
   * new `<|start|>assistant`), then a final answer `<|channel|>final<|message|>…<|return|>`, or
   * a tool call `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{args}
   * <|call|>` (after its text as a commentary preamble, when it has one). A sampled turn ends at
   * its first `<|call|>`, so a message with more than one tool call has no such rendering (a
   * ChatTemplateError). {@link parseAssistant} reads the result back to the message.
   */
  renderAssistantBody(message: ChatAssistantMessage): number[] {
    if (message === null || typeof message !== 'object' || message.role !== 'assistant')
      throw new ChatTemplateError('renderAssistantBody expects an assistant message');
    const reasoning = text(message.reasoning_content, 'message.reasoning_content');
    const content = text(message.content, 'message.content');
    const calls = message.tool_calls ?? [];
    if (!Array.isArray(calls)) throw new ChatTemplateError('message.tool_calls must be an array');
    if (calls.length > 1)
      throw new ChatTemplateError(
        `message.tool_calls holds ${calls.length} calls: a sampled harmony turn ends at its first <|call|>, so it makes one call`,
      );
    const pieces: HarmonyPiece[] = [];
    const segment = (channel: string, body: string, end: string, recipient?: string): void => {
      if (pieces.length > 0) pieces.push({ special: '<|start|>' }, { text: 'assistant' });
      pieces.push({ special: '<|channel|>' }, { text: channel });
      if (recipient !== undefined)
        pieces.push({ text: ` to=${recipient}` }, { text: ' ' }, { special: '<|constrain|>' }, { text: 'json' });
      pieces.push({ special: '<|message|>' }, { text: body }, { special: end });
    };
    if (reasoning !== '') segment('analysis', reasoning, '<|end|>');
    if (calls.length === 0) segment('final', content, '<|return|>');
    else {
      const c = calls[0];
      if (typeof c?.function?.name !== 'string' || c.function.name === '' || typeof c.function.arguments !== 'string')
        throw new ChatTemplateError('message.tool_calls[0] needs function.name and function.arguments strings');
      if (content !== '') segment('commentary', content, '<|end|>');
      segment('commentary', c.function.arguments, '<|call|>', recipientOf(c.function.name));
    }
    return this.idsOf(pieces);
  }

  /** `<|start|>assistant` as ids. */
  generationPrompt(): number[] {
    return this.idsOf(harmonyGenerationPrompt());
  }
}
