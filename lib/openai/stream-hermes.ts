/**
 * Streaming of replies in the `<think>` + Hermes `<tool_call>` format (Qwen3 and the other
 * Jinja chat templates, read by `parseHermes`), as vLLM's reasoning and tool parsers stream
 * them: reasoning deltas while the `<think>` block is open, content deltas after it, and each
 * tool call as one delta once its `</tool_call>` closes a valid call. Only what the finished
 * reply's reading cannot change is sent, so the deltas add up to the reply read without
 * streaming:
 *
 * - text that may still become a tag (a tail that begins `<think>`, `</think>`, `<tool_call>`)
 *   waits for the next tokens;
 * - trailing whitespace of the reasoning and of the content waits (the reading trims it);
 * - content that begins with whitespace waits for the end (a reply with calls trims it, one
 *   without keeps it);
 * - with tool calls not allowed (no tools offered, `tool_choice: 'none'`) the text after the
 *   reasoning is all content, calls included as written.
 *
 * {@link HermesReplyStream.finish} then sends whatever the finished reply adds. A reply the
 * reading refuses (a second `</think>`, a broken call after others were sent) can end with
 * deltas that differ from it; the stream then sends no more of that part.
 * @module
 */
import type { ChatToolCall } from '../chat/messages.js';
import { readChatToolCall } from '../chat/tool-call.js';

const OPEN_THINK = '<think>';
const CLOSE_THINK = '</think>';
const OPEN_CALL = '<tool_call>';
const CLOSE_CALL = '</tool_call>';

/** What a push or the finish adds to the streamed reply. */
export interface ReplyDelta {
  /** Reasoning text. */
  reasoning: string;
  /** Content text. */
  content: string;
  /** Tool calls completed since the last delta (their index in the reply follows the ones sent). */
  toolCalls: ChatToolCall[];
}

/** The reply as read once complete (what the server answers without streaming). */
export interface FinalReply {
  reasoning: string | null;
  content: string | null;
  toolCalls: readonly ChatToolCall[];
}

/** The length of the longest tail of `text` that is a proper prefix of one of `tags`. */
function tagTail(text: string, tags: readonly string[]): number {
  let best = 0;
  for (const tag of tags) {
    for (let k = Math.min(tag.length - 1, text.length); k > best; k--) {
      if (tag.startsWith(text.slice(text.length - k))) {
        best = k;
        break;
      }
    }
  }
  return best;
}

/** The part of `text` that can be sent: without a possible tag at its end and without trailing whitespace. */
function settled(text: string, tags: readonly string[]): string {
  return text.slice(0, text.length - tagTail(text, tags)).trimEnd();
}

/** What the reply text so far shows for sure: reasoning, content and complete calls. */
function view(
  text: string,
  callsAllowed: boolean,
  idPrefix: string,
): { reasoning: string; content: string; calls: ChatToolCall[] } {
  const empty = { reasoning: '', content: '', calls: [] };
  const lead = text.trimStart();
  let rest: string;
  let reasoning = '';
  if (lead.startsWith(OPEN_THINK)) {
    const body = text.slice(text.indexOf(OPEN_THINK) + OPEN_THINK.length);
    const close = body.indexOf(CLOSE_THINK);
    if (close < 0) return { ...empty, reasoning: settled(body, [CLOSE_THINK]).replace(/^\n+/, '') };
    reasoning = body.slice(0, close).replace(/^\n+/, '').replace(/\n+$/, '');
    rest = body.slice(close + CLOSE_THINK.length).replace(/^\n+/, '');
  } else if (OPEN_THINK.startsWith(lead)) {
    return empty; // may still open a think block
  } else rest = text;
  if (!callsAllowed) return { reasoning, content: /^\s/.test(rest) ? '' : settled(rest, [CLOSE_THINK]), calls: [] };
  const calls: ChatToolCall[] = [];
  let outside = '';
  let at = 0;
  for (;;) {
    const open = rest.indexOf(OPEN_CALL, at);
    if (open < 0) {
      outside += rest.slice(at);
      outside = settled(outside, [OPEN_CALL, CLOSE_CALL, CLOSE_THINK]);
      break;
    }
    outside += rest.slice(at, open);
    const close = rest.indexOf(CLOSE_CALL, open + OPEN_CALL.length);
    if (close < 0) break; // a call being written
    const call = readChatToolCall(
      rest.slice(open + OPEN_CALL.length, close).trim(),
      calls.length,
      `${idPrefix}${calls.length}`,
    );
    if (typeof call === 'string') break; // a broken call: the reading refuses the reply; nothing more is sure
    calls.push(call);
    at = close + CLOSE_CALL.length;
  }
  return { reasoning, content: /^\s/.test(outside) ? '' : outside.trimEnd(), calls };
}

/** Reasoning, content and tool-call deltas of a `<think>` + Hermes reply from its text (see the module description). */
export class HermesTextStream {
  private sentReasoning = '';
  private sentContent = '';
  private sentCalls: ChatToolCall[] = [];
  private done = false;

  /**
   * @param callsAllowed - whether tool calls are read (else they stay content).
   * @param idPrefix - the prefix of the calls' ids (`<idPrefix>0`, …), as the reply's reading gives them.
   */
  constructor(
    private readonly callsAllowed: boolean,
    private readonly idPrefix = 'call_',
  ) {}

  /** The reasoning, content and calls sent so far. */
  get sent(): { reasoning: string; content: string; toolCalls: readonly ChatToolCall[] } {
    return { reasoning: this.sentReasoning, content: this.sentContent, toolCalls: this.sentCalls };
  }

  private extend(sent: string, now: string): string {
    return now.startsWith(sent) ? now.slice(sent.length) : '';
  }

  /** Takes the reply's whole text so far (without its stop token); returns what it adds for sure. */
  update(text: string): ReplyDelta {
    if (this.done) return { reasoning: '', content: '', toolCalls: [] };
    const v = view(text, this.callsAllowed, this.idPrefix);
    const reasoning = this.extend(this.sentReasoning, v.reasoning);
    const content = this.extend(this.sentContent, v.content);
    const toolCalls = v.calls.slice(this.sentCalls.length);
    this.sentReasoning += reasoning;
    this.sentContent += content;
    this.sentCalls = this.sentCalls.concat(toolCalls);
    return { reasoning, content, toolCalls };
  }

  /** The rest, given the finished reply as read without streaming; no more updates after it. */
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

/** The tokenizer side the token-level stream needs. */
export interface StreamTokenizer {
  decode(ids: ArrayLike<number>): string;
  isSpecial?(id: number): boolean;
}

/**
 * {@link HermesTextStream} over sampled tokens: the turn's tokens are decoded as they arrive (an
 * incomplete UTF-8 character at the end waits for its next byte); from a stop token or any other
 * special token on, the rest waits for {@link finish}.
 */
export class HermesReplyStream {
  private readonly text: HermesTextStream;
  private readonly body: number[] = [];
  private held = false;

  /**
   * @param tokenizer - the model's tokenizer.
   * @param stopTokens - the tokens that end a turn.
   * @param callsAllowed - whether tool calls are read.
   * @param idPrefix - the prefix of the calls' ids.
   */
  constructor(
    private readonly tokenizer: StreamTokenizer,
    private readonly stopTokens: readonly number[],
    callsAllowed: boolean,
    idPrefix = 'call_',
  ) {
    this.text = new HermesTextStream(callsAllowed, idPrefix);
  }

  /** Takes the next sampled tokens; returns what they add for sure. */
  push(tokens: ArrayLike<number>): ReplyDelta {
    for (let i = 0; i < tokens.length && !this.held; i++) {
      const t = tokens[i];
      if (this.stopTokens.includes(t) || this.tokenizer.isSpecial?.(t)) this.held = true;
      else this.body.push(t);
    }
    const text = this.tokenizer.decode(this.body).replace(/\uFFFD+$/, '');
    return this.text.update(text);
  }

  /** The rest, given the finished reply (see {@link HermesTextStream.finish}). */
  finish(final: FinalReply): ReplyDelta {
    this.held = true;
    return this.text.finish(final);
  }
}
