/**
 * Streaming replies of {@link startChatServer} (`stream: true`): {@link ReplyStream} turns an
 * assistant's tokens, as they are sampled, into text deltas, and {@link SseReply} writes them
 * as OpenAI `chat.completion.chunk` server-sent events.
 *
 * With the built-in chat template, text streams live while the reply is plain `<|message|>`
 * sections. From a `<|call|>` (or anything the chat template would not parse) on, tokens are
 * held until the reply ends; then the rest of the final content and the parsed tool calls are
 * sent. A pretrained model's Jinja template (`<think>` reasoning, Hermes tool calls) streams
 * through stream-hermes.ts: reasoning and content deltas as tokens arrive, each tool call once
 * it is complete. Harmony (gpt-oss) streams likewise through stream-harmony.ts: the analysis
 * channel as reasoning deltas, the final channel as content deltas, a call once its message
 * ends. The deltas add up to the same reply without streaming.
 * @module
 */
import type { ServerResponse } from 'node:http';

import type { ChatFormat } from '../chat/chat-format.js';
import { ChatTemplate } from '../chat/chat-template.js';
import { decodeWtf8 } from '../chat/utf8.js';

/** Bytes a UTF-8 sequence starting with lead byte `b` needs (1 for anything that is no lead). */
function sequenceBytes(b: number): number {
  if (b >= 0xf0 && b <= 0xf7) return 4;
  if (b >= 0xe0) return b <= 0xef ? 3 : 1;
  if (b >= 0xc0) return 2;
  return 1;
}

/** Text deltas of an assistant reply from its tokens (see the module description). */
export class ReplyStream {
  /** `start`: no section yet; `text`: inside a `<|message|>` section; `held`: waiting for the end. */
  private state: 'start' | 'text' | 'held' = 'start';
  private pending: number[] = [];
  private sentText = '';

  /** @param chat - the chat format the reply follows. */
  constructor(readonly chat: ChatFormat) {}

  /** The text sent so far. */
  get sent(): string {
    return this.sentText;
  }

  private emit(text: string): string {
    this.sentText += text;
    return text;
  }

  /** Decodes the pending bytes up to the last complete character (`all`: every byte). */
  private flush(all: boolean): string {
    const b = this.pending;
    let cut = b.length;
    if (!all) {
      // a cut before a byte that is no continuation byte never splits a sequence, so the
      // pieces decode to the same text as the whole section
      for (let k = b.length - 1; k >= 0 && k >= b.length - 4; k--) {
        if ((b[k] & 0xc0) === 0x80) continue;
        if (sequenceBytes(b[k]) > b.length - k) cut = k;
        break;
      }
    }
    if (cut === 0) return '';
    const text = decodeWtf8(Uint8Array.from(b.slice(0, cut)));
    this.pending = b.slice(cut);
    return this.emit(text);
  }

  /** Takes the next sampled tokens; returns the text they add ('' when none can be sent yet). */
  push(tokens: ArrayLike<number>): string {
    const chat = this.chat;
    if (!(chat instanceof ChatTemplate)) {
      // a pretrained model's format: its reply is read once complete (see the module notes)
      this.state = 'held';
      return '';
    }
    const tok = chat.tokenizer;
    let out = '';
    for (let i = 0; i < tokens.length && this.state !== 'held'; i++) {
      const t = tokens[i];
      if (t === chat.message) {
        if (this.state === 'text') out += this.flush(true);
        this.state = 'text';
      } else if (
        this.state === 'start' ||
        t === chat.end ||
        t === chat.call ||
        !Number.isInteger(t) ||
        t < 0 ||
        t >= tok.vocabSize ||
        tok.isSpecial(t)
      ) {
        // the end of the reply, a tool call, or something the template would not parse: the
        // rest is sent when the reply is complete
        this.state = 'held';
      } else {
        for (const byte of tok.tokenBytes(t)) this.pending.push(byte);
      }
    }
    if (this.state === 'text') out += this.flush(false);
    return out;
  }

  /**
   * The rest of the text once the reply is complete, given its final `content` (what the reply
   * gives without streaming). Throws when the text already sent does not begin it (a broken
   * invariant of this class, never the model's doing).
   */
  finish(content: string | null): string {
    const final = content ?? '';
    if (!final.startsWith(this.sentText))
      throw new Error(`streamed text ${JSON.stringify(this.sentText.slice(0, 80))} does not begin the reply's content`);
    this.state = 'held';
    return this.emit(final.slice(this.sentText.length));
  }
}

/** One OpenAI-style tool call of a finished reply. */
interface StreamToolCall {
  id?: string;
  function: { name: string; arguments: string };
}

/** Writes one streamed completion as `chat.completion.chunk` server-sent events. */
export class SseReply {
  private started = false;
  private readonly base: Record<string, unknown>;

  /**
   * @param res - the HTTP response (headers are written with the first event).
   * @param id - the completion id.
   * @param model - the model name.
   */
  constructor(
    private readonly res: ServerResponse,
    id: string,
    model: string,
  ) {
    this.base = {
      id,
      object: 'chat.completion.chunk',
      created: Math.floor(Date.now() / 1000),
      model,
      system_fingerprint: 'sinkflex',
    };
  }

  /** Whether the stream has begun (headers sent). */
  get begun(): boolean {
    return this.started;
  }

  private write(body: Record<string, unknown>): void {
    if (this.res.destroyed || this.res.writableEnded) return;
    this.res.write(`data: ${JSON.stringify(body)}\n\n`);
  }

  /** Sends the headers and the first chunk (the assistant role), once. */
  begin(): void {
    if (this.started) return;
    this.started = true;
    this.res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    this.res.flushHeaders();
    this.chunk({ delta: { role: 'assistant', content: '' }, finish_reason: null });
  }

  /** One chunk with one choice (index 0). */
  chunk(choice: Record<string, unknown>, extra: Record<string, unknown> = {}): void {
    this.begin();
    this.write({ ...this.base, choices: [{ index: 0, ...choice }], ...extra });
  }

  /** A content delta (with the log-probs of its tokens, when given). */
  content(text: string, logprobs?: unknown[]): void {
    if (text === '' && !logprobs) return;
    this.chunk({
      delta: text === '' ? {} : { content: text },
      ...(logprobs ? { logprobs: { content: logprobs } } : {}),
      finish_reason: null,
    });
  }

  /** A reasoning delta (`delta.reasoning_content`, as vLLM's reasoning parsers send it). */
  reasoning(text: string): void {
    if (text !== '') this.chunk({ delta: { reasoning_content: text }, finish_reason: null });
  }

  /** Tool calls, one chunk each, indexed from `first` (the calls of the reply sent before them). */
  toolCalls(calls: readonly StreamToolCall[], first = 0): void {
    calls.forEach((call, i) =>
      this.chunk({
        delta: {
          tool_calls: [
            {
              index: first + i,
              id: call.id,
              type: 'function',
              function: { name: call.function.name, arguments: call.function.arguments },
            },
          ],
        },
        finish_reason: null,
      }),
    );
  }

  /** The last chunk (finish reason, token ids when asked), the usage chunk when asked, and `[DONE]`. */
  end(finish: string, tokenIds: number[] | undefined, usage: Record<string, unknown> | undefined): void {
    this.chunk({ delta: {}, finish_reason: finish, ...(tokenIds ? { token_ids: tokenIds } : {}) });
    if (usage) this.write({ ...this.base, choices: [], usage });
    if (!this.res.destroyed && !this.res.writableEnded) this.res.end('data: [DONE]\n\n');
  }

  /** Ends a begun stream with an error event (the status is already sent). */
  fail(error: Record<string, unknown>): void {
    this.write({ error });
    if (!this.res.destroyed && !this.res.writableEnded) this.res.end('data: [DONE]\n\n');
  }
}
