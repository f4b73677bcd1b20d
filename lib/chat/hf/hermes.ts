/**
 * Reading completions of models that think in `<think>…</think>` and call tools with Hermes
 * blocks, `<tool_call>{"name": …, "arguments": …}</tool_call>` (Qwen3, Qwen2.5, Hermes): the
 * reasoning, the text for the user, the calls. The rules follow Qwen3's own template (which
 * splits an assistant message at its last `</think>`); each call's JSON is read by the one
 * tool-call reader (`../tool-call.ts`), as the built-in template's calls are.
 * @module
 */
import type { ChatToolCall } from '../messages.js';
import { readChatToolCall } from '../tool-call.js';

/** A completion read into its parts, or the reason it cannot be. */
export type HermesParse =
  | { ok: true; content: string | null; toolCalls: ChatToolCall[]; reasoning: string | null }
  | { ok: false; error: string };

const OPEN_CALL = '<tool_call>';
const CLOSE_CALL = '</tool_call>';
const OPEN_THINK = '<think>';
const CLOSE_THINK = '</think>';

/** Strips `chars` from both ends (Python's `str.strip(chars)`). */
function strip(s: string, chars: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && chars.includes(s[a])) a++;
  while (b > a && chars.includes(s[b - 1])) b--;
  return s.slice(a, b);
}

/**
 * Splits the reasoning off a completion: the text before the last `</think>` (without an
 * opening `<think>` and surrounding newlines) is the reasoning, the text after it (leading
 * newlines removed) the reply. A `<think>` that is never closed is an error.
 */
export function splitThinking(text: string): { reasoning: string | null; rest: string } | { error: string } {
  const close = text.lastIndexOf(CLOSE_THINK);
  if (close < 0) {
    if (text.trimStart().startsWith(OPEN_THINK))
      return { error: 'the <think> block is never closed (truncated reasoning?)' };
    return { reasoning: null, rest: text };
  }
  let before = text.slice(0, close);
  const open = before.lastIndexOf(OPEN_THINK);
  if (open >= 0) before = before.slice(open + OPEN_THINK.length);
  const reasoning = strip(before, '\n');
  return {
    reasoning: reasoning.length > 0 ? reasoning : null,
    rest: text.slice(close + CLOSE_THINK.length).replace(/^\n+/, ''),
  };
}

/** The raw-text protocol form of a completion: the reply without its reasoning (Hermes blocks kept as written). */
export function withoutThinking(text: string): string {
  const close = text.lastIndexOf(CLOSE_THINK);
  if (close >= 0) return text.slice(close + CLOSE_THINK.length).replace(/^\n+/, '');
  return text.trimStart().startsWith(OPEN_THINK) ? '' : text;
}

/**
 * Reads a completion's text (stop token already removed): reasoning, reply, Hermes tool calls
 * (ids `<idPrefix>0`, …). With calls, the reply is the text outside the blocks, trimmed (null
 * when empty); without, the text after the reasoning as is. Unclosed or unopened blocks and
 * calls that are not `{"name", "arguments"}` objects are errors.
 */
export function parseHermes(text: string, idPrefix = 'call_'): HermesParse {
  const split = splitThinking(text);
  if ('error' in split) return { ok: false, error: split.error };
  const { reasoning, rest } = split;
  const calls: ChatToolCall[] = [];
  const outside: string[] = [];
  let at = 0;
  for (;;) {
    const open = rest.indexOf(OPEN_CALL, at);
    const strayClose = rest.indexOf(CLOSE_CALL, at);
    if (strayClose >= 0 && (open < 0 || strayClose < open))
      return { ok: false, error: `a ${CLOSE_CALL} without a ${OPEN_CALL}` };
    if (open < 0) {
      outside.push(rest.slice(at));
      break;
    }
    outside.push(rest.slice(at, open));
    const close = rest.indexOf(CLOSE_CALL, open + OPEN_CALL.length);
    if (close < 0)
      return { ok: false, error: `tool call ${calls.length} has no ${CLOSE_CALL} (truncated generation?)` };
    const call = readChatToolCall(
      rest.slice(open + OPEN_CALL.length, close).trim(),
      calls.length,
      `${idPrefix}${calls.length}`,
    );
    if (typeof call === 'string') return { ok: false, error: call };
    calls.push(call);
    at = close + CLOSE_CALL.length;
  }
  if (calls.length === 0) return { ok: true, content: rest, toolCalls: [], reasoning };
  const content = outside.join('').trim();
  return { ok: true, content: content.length > 0 ? content : null, toolCalls: calls, reasoning };
}
