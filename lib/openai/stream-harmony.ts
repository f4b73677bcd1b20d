/**
 * Streaming of replies in gpt-oss's harmony format, as vLLM's harmony reasoning and tool
 * parsers stream them: the `analysis` channel as reasoning deltas, the `final` channel (and
 * commentary without a recipient) as content deltas, and a message to `functions.NAME` as one
 * tool-call delta once it ends (`<|call|>`, or `<|end|>` before more messages). The reply is
 * read at the token level, as {@link readHarmonyCompletion} reads the finished turn: harmony's
 * structure is all special tokens, so a message header is read once its `<|message|>` arrives
 * and a message is complete at its terminator; only a message's text is decoded (an incomplete
 * UTF-8 character at its end waits for its next byte). Only what the finished reply's reading
 * cannot change is sent, so the deltas add up to the reply read without streaming:
 *
 * - messages are joined by a newline, sent when the next message of the same kind begins;
 * - a call's arguments wait for its end (then the call is sent whole, with the id the reading
 *   gives it);
 * - with tool calls not allowed (no tools offered, `tool_choice: 'none'`) a reply with a call
 *   is answered as its raw text (the messages' texts back to back, the call as written), so
 *   only the first content message streams (when no call comes before it) and the rest waits
 *   for {@link HarmonyReplyStream.finish};
 * - from a message the reading refuses on (a header that does not parse, a role other than the
 *   assistant, an unknown channel, call arguments that are not a JSON object) nothing more is
 *   sent before the finish.
 *
 * {@link HarmonyReplyStream.finish} then sends whatever the finished reply adds. A reply the
 * reading refuses, or a truncated one, is answered as raw text: its deltas can then differ from
 * it (the reasoning sent stays sent), as with the Hermes stream.
 * @module
 */
import type { ChatToolCall } from '../chat/messages.js';
import { readHarmonyCompletion } from '../chat/hf/harmony-format.js';
import { parseHarmonyHeader, type HarmonyParsedMessage } from '../chat/hf/harmony-parse.js';
import type { HfTokenizer } from '../chat/hf/tokenizer.js';
import type { FinalReply, ReplyDelta } from './stream-hermes.js';

type Header = Omit<HarmonyParsedMessage, 'content' | 'terminator'>;

const CHANNELS: ReadonlySet<string | undefined> = new Set([undefined, 'analysis', 'final', 'commentary']);

/** Whether a message with this header is a tool call (as {@link readHarmonyCompletion} reads it). */
function isCall(h: Header): boolean {
  return h.recipient !== undefined && h.recipient !== 'all';
}

/** Reasoning, content and tool-call deltas of a harmony reply from its sampled tokens (see the module description). */
export class HarmonyReplyStream {
  private readonly START: number;
  private readonly MESSAGE: number;
  private readonly terminators: Map<number, HarmonyParsedMessage['terminator']>;
  private readonly stops: ReadonlySet<number>;
  /** Where the reading is: inside a header, inside a message's text, between messages, past the turn's end, or refused. */
  private state: 'header' | 'content' | 'start' | 'ended' | 'refused' = 'header';
  private role: 'assistant' | null = 'assistant';
  private header: number[] = [];
  private fields: Header | null = null;
  private text: number[] = [];
  private readonly messages: HarmonyParsedMessage[] = [];
  /** The reading of the complete messages. */
  private reading: { content: string[]; reasoning: string[]; calls: ChatToolCall[] } = {
    content: [],
    reasoning: [],
    calls: [],
  };
  private sentReasoning = '';
  private sentContent = '';
  private sentCalls: ChatToolCall[] = [];
  private done = false;

  /**
   * @param tokenizer - gpt-oss's tokenizer.
   * @param stopTokens - the tokens that end a turn (`<|return|>`, `<|call|>`, the eos ids).
   * @param callsAllowed - whether tool calls are read (else the reply with a call is raw text).
   * @param idPrefix - the prefix of the calls' ids (`<idPrefix>0`, …), as the reply's reading gives them.
   */
  constructor(
    private readonly tokenizer: HfTokenizer,
    stopTokens: readonly number[],
    private readonly callsAllowed: boolean,
    private readonly idPrefix = 'call_',
  ) {
    this.START = tokenizer.requireId('<|start|>');
    this.MESSAGE = tokenizer.requireId('<|message|>');
    this.terminators = new Map<number, HarmonyParsedMessage['terminator']>([
      [tokenizer.requireId('<|end|>'), '<|end|>'],
      [tokenizer.requireId('<|call|>'), '<|call|>'],
      [tokenizer.requireId('<|return|>'), '<|return|>'],
    ]);
    for (const id of tokenizer.eosIds) if (!this.terminators.has(id)) this.terminators.set(id, 'eos');
    this.stops = new Set(stopTokens);
  }

  /** The reasoning, content and calls sent so far. */
  get sent(): { reasoning: string; content: string; toolCalls: readonly ChatToolCall[] } {
    return { reasoning: this.sentReasoning, content: this.sentContent, toolCalls: this.sentCalls };
  }

  /** Reads one token of the turn. */
  private step(t: number): void {
    if (this.state === 'start') {
      if (t !== this.START) this.state = 'refused';
      else {
        this.state = 'header';
        this.role = null;
        this.header = [];
      }
    } else if (this.state === 'header') {
      if (t === this.MESSAGE) {
        let h: Header;
        try {
          h = parseHarmonyHeader(this.tokenizer.decode(this.header), this.role);
        } catch {
          this.state = 'refused';
          return;
        }
        if (h.role !== 'assistant' || (!isCall(h) && !CHANNELS.has(h.channel))) this.state = 'refused';
        else {
          this.fields = h;
          this.text = [];
          this.state = 'content';
        }
      } else if (t === this.START || this.terminators.has(t)) this.state = 'refused';
      else this.header.push(t);
    } else if (this.state === 'content') {
      const end = this.terminators.get(t);
      if (end === undefined) {
        this.text.push(t);
        return;
      }
      this.messages.push({ ...(this.fields as Header), content: this.tokenizer.decode(this.text), terminator: end });
      this.fields = null;
      this.text = [];
      const read = readHarmonyCompletion(this.messages, this.idPrefix);
      if ('error' in read) {
        this.state = 'refused';
        return;
      }
      this.reading = {
        content: this.messages.filter((m) => !isCall(m) && m.channel !== 'analysis').map((m) => m.content),
        reasoning: this.messages.filter((m) => !isCall(m) && m.channel === 'analysis').map((m) => m.content),
        calls: read.calls,
      };
      this.state = 'start';
    }
    if (this.stops.has(t) && this.state !== 'refused') this.state = 'ended';
  }

  private extend(sent: string, now: string): string {
    return now.startsWith(sent) ? now.slice(sent.length) : '';
  }

  /** Whether the reading refuses the reply (read through a method: step() changes the state). */
  private refused(): boolean {
    return this.state === 'refused';
  }

  /** Whether a call message (complete or begun) comes before the first content message. */
  private callBeforeContent(): boolean {
    const all: Header[] =
      this.fields !== null && this.state === 'content' ? [...this.messages, this.fields] : this.messages;
    const first = all.find((m) => m.channel !== 'analysis' || isCall(m));
    return first !== undefined && isCall(first);
  }

  /** Takes the next sampled tokens; returns what they add for sure. */
  push(tokens: ArrayLike<number>): ReplyDelta {
    const none: ReplyDelta = { reasoning: '', content: '', toolCalls: [] };
    if (this.done || this.refused()) return none;
    for (let i = 0; i < tokens.length && this.state !== 'ended' && !this.refused(); i++) this.step(tokens[i]);
    if (this.refused()) return none;
    const reasoning = [...this.reading.reasoning];
    const content = [...this.reading.content];
    if (this.state === 'content' && this.fields !== null && !isCall(this.fields)) {
      const partial = this.tokenizer.decode(this.text).replace(/\uFFFD+$/, '');
      (this.fields.channel === 'analysis' ? reasoning : content).push(partial);
    }
    // calls not allowed: a reply with a call is its raw text (texts back to back, the call as written)
    const sureContent = this.callsAllowed
      ? content.join('\n')
      : content.length > 0 && !this.callBeforeContent()
        ? content[0]
        : '';
    const now = {
      reasoning: reasoning.join('\n'),
      content: sureContent,
      calls: this.callsAllowed ? this.reading.calls : [],
    };
    const d: ReplyDelta = {
      reasoning: this.extend(this.sentReasoning, now.reasoning),
      content: this.extend(this.sentContent, now.content),
      toolCalls: now.calls.slice(this.sentCalls.length),
    };
    this.sentReasoning += d.reasoning;
    this.sentContent += d.content;
    this.sentCalls = this.sentCalls.concat(d.toolCalls);
    return d;
  }

  /** The rest, given the finished reply as read without streaming; no more pushes after it. */
  finish(final: FinalReply): ReplyDelta {
    this.done = true;
    const reasoning = this.extend(this.sentReasoning, final.reasoning ?? '');
    const content = this.extend(this.sentContent, final.content ?? '');
    const sameCalls = this.sentCalls.every(
      (c, i) =>
        final.toolCalls[i]?.function.name === c.function.name &&
        final.toolCalls[i]?.function.arguments === c.function.arguments,
    );
    const toolCalls = sameCalls ? final.toolCalls.slice(this.sentCalls.length) : [];
    this.sentReasoning += reasoning;
    this.sentContent += content;
    this.sentCalls = this.sentCalls.concat(toolCalls);
    return { reasoning, content, toolCalls };
  }
}
