/**
 * Reads a token stream rendered with the chat template back into messages, incrementally:
 * what a message-level policy behind a token interface ({@link ChatTokenPolicy}) sees. The
 * stream is the template's: `<|start|>{role}<|message|>{content}<|end|>` per message, the
 * tools section, assistant turns (`<|start|>assistant` + `<|message|>`/`<|call|>` sections +
 * `<|end|>`) and possibly a trailing generation prompt (`<|start|>assistant`).
 * @module
 */
import type { ConversationReader } from './chat-format.js';
import type { ChatTemplate } from './chat-template.js';
import type { ChatMessage, ToolSchema } from './messages.js';

/** Thrown when the token stream is not a rendering of the template. */
export class ConversationDecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConversationDecodeError';
  }
}

interface OpenSection {
  header: number[];
  role: string | null;
  body: number[];
}

/** Incremental decoder of a rendered conversation. */
export class ConversationDecoder implements ConversationReader {
  /** The complete messages so far (the tools section is in {@link tools}). */
  readonly messages: ChatMessage[] = [];
  /** The tool schemas, once the tools section was read. */
  tools: ToolSchema[] = [];
  private open: OpenSection | null = null;
  private pendingCallIds: string[] = [];
  private calls = 0;
  private consumed = 0;

  /** @param chat - the template the stream was rendered with. */
  constructor(readonly chat: ChatTemplate) {}

  /** Tokens read so far. */
  get length(): number {
    return this.consumed;
  }

  /** Whether the stream ends with a generation prompt (`<|start|>assistant` and nothing after). */
  get awaitingAssistant(): boolean {
    const o = this.open;
    return o !== null && o.role === null && this.chat.tokenizer.decode(o.header) === 'assistant';
  }

  /** Reads more tokens; throws {@link ConversationDecodeError} on a stream the template cannot have produced. */
  push(tokens: ArrayLike<number>): void {
    const t = this.chat;
    for (let i = 0; i < tokens.length; i++) {
      const id = tokens[i];
      this.consumed++;
      const o = this.open;
      if (o === null) {
        if (id !== t.start)
          throw new ConversationDecodeError(
            `expected <|start|> at token ${this.consumed - 1}, got ${this.describe(id)}`,
          );
        this.open = { header: [], role: null, body: [] };
        continue;
      }
      if (o.role === null) {
        if (id === t.message || id === t.call || id === t.end) {
          o.role = t.tokenizer.decode(o.header);
          if (o.role === 'assistant') o.body.push(id);
          else if (id === t.call) throw new ConversationDecodeError(`a ${o.role} message cannot hold a tool call`);
          if (id === t.end) this.finish(o);
        } else if (id === t.start) {
          throw new ConversationDecodeError(`<|start|> inside a message header at token ${this.consumed - 1}`);
        } else if (t.tokenizer.decode(o.header) === 'assistant') {
          // A generated turn that does not open a section (the template cannot parse it): its tokens are the body.
          o.role = 'assistant';
          o.body.push(id);
        } else o.header.push(id);
        continue;
      }
      if (id === t.end) {
        if (o.role === 'assistant') o.body.push(id);
        this.finish(o);
      } else if (o.role !== 'assistant' && t.tokenizer.isSpecial(id)) {
        throw new ConversationDecodeError(`unexpected ${this.describe(id)} inside a ${o.role} message`);
      } else o.body.push(id);
    }
  }

  private describe(id: number): string {
    const tok = this.chat.tokenizer;
    return Number.isInteger(id) && id >= 0 && id < tok.vocabSize && tok.isSpecial(id)
      ? tok.specialTokens[id]
      : `token ${String(id)}`;
  }

  private finish(o: OpenSection): void {
    this.open = null;
    const tok = this.chat.tokenizer;
    const role = o.role as string;
    if (role === 'assistant') {
      const parsed = this.chat.parseAssistant(o.body, `call_${this.calls}_`);
      if (!parsed.ok) {
        this.messages.push({ role: 'assistant', content: parsed.text });
        return;
      }
      const calls = parsed.message.tool_calls ?? [];
      this.calls++;
      this.pendingCallIds = calls.map((c) => c.id ?? '');
      this.messages.push(parsed.message);
      return;
    }
    const content = tok.decode(o.body);
    switch (role) {
      case 'system':
      case 'user':
        this.messages.push({ role, content });
        return;
      case 'tool': {
        const id = this.pendingCallIds.shift();
        this.messages.push(id ? { role: 'tool', content, tool_call_id: id } : { role: 'tool', content });
        return;
      }
      case 'tools': {
        let parsed: unknown;
        try {
          parsed = JSON.parse(content);
        } catch (e) {
          throw new ConversationDecodeError(`the tools section is not JSON: ${(e as Error).message}`);
        }
        if (!Array.isArray(parsed)) throw new ConversationDecodeError('the tools section must be a JSON array');
        this.tools = parsed as ToolSchema[];
        return;
      }
      default:
        throw new ConversationDecodeError(`unknown role '${role}'`);
    }
  }
}
