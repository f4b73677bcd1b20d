/**
 * Parsing harmony token streams (a gpt-oss completion, or rendered messages) back into
 * messages, written from the harmony specification: each message is `<|start|>{header}
 * <|message|>{content}` ended by `<|end|>`, `<|call|>` (a tool call) or `<|return|>` (the final
 * answer); a completion starts inside the header of an assistant message (the prompt ended
 * with `<|start|>assistant`). In a header the channel follows `<|channel|>`, the recipient is
 * `to=NAME` (in the role part or after the channel: models write both), and a content type
 * (`json`, `<|constrain|>json`, `code`) comes last.
 * @module
 */
import type { HfTokenizer } from './tokenizer.js';
import type { HarmonyRole } from './harmony-render.js';

/** A parsed message. */
export interface HarmonyParsedMessage {
  /** The author's role. */
  role: HarmonyRole;
  /** For a tool message, the tool (e.g. `functions.get_weather`). */
  name?: string;
  /** The recipient (`functions.NAME` for a call). */
  recipient?: string;
  /** The channel. */
  channel?: string;
  /** The content type. */
  contentType?: string;
  /** The text. */
  content: string;
  /** The token that ended it (null: the stream ended inside its content). */
  terminator: '<|end|>' | '<|call|>' | '<|return|>' | 'eos' | null;
}

/** Messages, or where the stream stops making sense (the messages before it are kept). */
export interface HarmonyParseResult {
  /** The complete messages. */
  messages: HarmonyParsedMessage[];
  /** The problem, or null. */
  error: string | null;
}

const ROLES: readonly HarmonyRole[] = ['system', 'developer', 'user', 'assistant', 'tool'];
const CHANNEL = '<|channel|>';
const CONSTRAIN = '<|constrain|>';

/** The header fields of a header's text (throws with the reason on a malformed one). */
export function parseHarmonyHeader(
  header: string,
  role: HarmonyRole | null,
): Omit<HarmonyParsedMessage, 'content' | 'terminator'> {
  let s = header;
  let channel: string | undefined;
  const at = s.indexOf(CHANNEL);
  if (at >= 0) {
    const after = s.slice(at + CHANNEL.length);
    const m = /^[^\s<]*/.exec(after) as RegExpExecArray;
    if (m[0].length === 0) throw new Error('<|channel|> without a channel name');
    channel = m[0];
    s = s.slice(0, at) + after.slice(m[0].length);
  }
  s = s.trim();
  if (s.includes(CONSTRAIN)) s = s.split(CONSTRAIN).join(` ${CONSTRAIN}`).trim();
  const parts = s.split(/[\t\n\f\r ]+/).filter((p) => p.length > 0);
  let r: HarmonyRole;
  let name: string | undefined;
  if (role !== null) r = role;
  else {
    const first = parts[0];
    if (first === undefined) throw new Error('the header names no role');
    if ((ROLES as readonly string[]).includes(first)) r = first as HarmonyRole;
    else if (parts.length > 1 || first.startsWith('to=')) {
      r = 'tool';
      name = first;
      parts.shift();
    } else throw new Error(`unknown role '${first}'`);
  }
  if (parts[0] === r) parts.shift();
  let recipient: string | undefined;
  let contentType: string | undefined;
  if (parts.length > 0) {
    const count = parts.length;
    const last = parts.pop() as string;
    if (last.startsWith('to=')) recipient = last.slice(3);
    else if (count === 1 && !last.startsWith(CONSTRAIN)) recipient = last;
    else {
      contentType = last;
      const rec = parts.pop();
      if (rec !== undefined) recipient = rec.startsWith('to=') ? rec.slice(3) : rec;
    }
  }
  if (parts.length > 0) throw new Error(`unexpected text in the message header: ${JSON.stringify(parts.join(' '))}`);
  const out: Omit<HarmonyParsedMessage, 'content' | 'terminator'> = { role: r };
  if (name !== undefined) out.name = name;
  if (recipient !== undefined) out.recipient = recipient;
  if (channel !== undefined) out.channel = channel;
  if (contentType !== undefined) out.contentType = contentType;
  return out;
}

/** Options of {@link parseHarmony}. */
export interface HarmonyParseOptions {
  /** The stream starts inside this role's header (a completion after `<|start|>assistant`); null: at a `<|start|>`. */
  role?: HarmonyRole | null;
  /** Further ids that end a message's content (the model's eos ids). */
  eosIds?: readonly number[];
}

/** Parses a harmony token stream (see the module description). */
export function parseHarmony(
  tok: HfTokenizer,
  ids: ArrayLike<number>,
  options: HarmonyParseOptions = {},
): HarmonyParseResult {
  const START = tok.requireId('<|start|>');
  const MESSAGE = tok.requireId('<|message|>');
  const ends = new Map<number, HarmonyParsedMessage['terminator']>([
    [tok.requireId('<|end|>'), '<|end|>'],
    [tok.requireId('<|call|>'), '<|call|>'],
    [tok.requireId('<|return|>'), '<|return|>'],
  ]);
  for (const id of options.eosIds ?? []) if (!ends.has(id)) ends.set(id, 'eos');
  const messages: HarmonyParsedMessage[] = [];
  let role: HarmonyRole | null = options.role ?? null;
  let state: 'start' | 'header' | 'content' = role !== null ? 'header' : 'start';
  let header: number[] = [];
  let content: number[] = [];
  let fields: Omit<HarmonyParsedMessage, 'content' | 'terminator'> | null = null;
  const describe = (t: number): string => tok.idToToken(t) ?? `token ${t}`;
  for (let i = 0; i < ids.length; i++) {
    const t = ids[i];
    if (state === 'start') {
      if (t !== START) return { messages, error: `expected <|start|> at token ${i}, got ${describe(t)}` };
      state = 'header';
      header = [];
      role = null;
    } else if (state === 'header') {
      if (t === MESSAGE) {
        try {
          fields = parseHarmonyHeader(tok.decode(header), role);
        } catch (e) {
          return { messages, error: `bad message header at token ${i}: ${(e as Error).message}` };
        }
        state = 'content';
        content = [];
      } else if (t === START || ends.has(t)) {
        return { messages, error: `a message header ends without <|message|> at token ${i} (${describe(t)})` };
      } else header.push(t);
    } else {
      const end = ends.get(t);
      if (end !== undefined) {
        messages.push({
          ...(fields as Omit<HarmonyParsedMessage, 'content' | 'terminator'>),
          content: tok.decode(content),
          terminator: end,
        });
        state = 'start';
      } else content.push(t);
    }
  }
  if (state === 'content')
    messages.push({
      ...(fields as Omit<HarmonyParsedMessage, 'content' | 'terminator'>),
      content: tok.decode(content),
      terminator: null,
    });
  else if (state === 'header' && ids.length > 0) return { messages, error: 'the stream ends inside a message header' };
  return { messages, error: null };
}
