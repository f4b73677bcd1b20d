// Streaming of harmony (gpt-oss) replies (issue 24, item 5): random well-formed replies —
// analysis messages or none, commentary preambles, a final answer or a tool call (to=functions.NAME
// after the channel or in the role part, `<|constrain|>json` or `json`, now and then a call ended
// by <|end|> with more messages after it), texts with spaces, newlines, multi-byte characters and
// stray '<|' pieces — are tokenized with gpt-oss's real tokenizer (o200k_harmony), cut into random
// runs of tokens and streamed; the reasoning, content and tool-call deltas must add up to the reply
// as the server answers it without streaming (HarmonyChatFormat.parseAssistant; with calls not
// allowed and a call in the reply, rawActionText), and reasoning, content and calls must arrive
// before the reply ends.
import t from 'tap';

import type { ChatToolCall } from '../../lib/chat/messages.js';
import { HarmonyChatFormat } from '../../lib/chat/hf/harmony-format.js';
import type { HfTokenizer } from '../../lib/chat/hf/tokenizer.js';
import { TokenScript } from './fixtures/token-script.js';
import { startChatServer } from '../../lib/openai/index.js';
import { HarmonyReplyStream } from '../../lib/openai/stream-harmony.js';
import type { FinalReply, ReplyDelta } from '../../lib/openai/stream-hermes.js';
import { mulberry32 } from '../../lib/util/random.js';
import { gptOssTokenizer } from '../chat/hf/fixtures/tokenizers.js';

const rng = mulberry32;

const PIECES = [
  'the',
  ' order',
  ' ',
  '  ',
  '\n',
  '\n\n',
  'é',
  '中文',
  '👍',
  '<',
  '<|',
  '|>',
  '<|en',
  'x<y',
  ' 42',
  '.',
  ',',
  'ok',
  '"quoted"',
  '{',
  '}',
];

function text(r: () => number, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += PIECES[Math.floor(r() * PIECES.length)];
  return s;
}

const SPECIAL = /(<\|(?:start|end|message|channel|constrain|return|call)\|>)/;

/** Token ids of a harmony text: special tokens by name, the rest as ordinary text. */
function ids(tok: HfTokenizer, s: string): number[] {
  const out: number[] = [];
  for (const part of s.split(SPECIAL)) {
    if (part === '') continue;
    if (SPECIAL.test(part) && part.match(SPECIAL)?.[0] === part) out.push(tok.requireId(part));
    else out.push(...tok.encodeOrdinary(part));
  }
  return out;
}

/** A random well-formed assistant turn (the text after `<|start|>assistant`). */
function reply(r: () => number): string {
  const msgs: string[] = [];
  const header = (channel: string, recipient?: string): string => {
    if (recipient === undefined) return `<|channel|>${channel}`;
    return r() < 0.7
      ? `<|channel|>${channel} to=${recipient} ${r() < 0.7 ? '<|constrain|>json' : 'json'}`
      : ` to=${recipient}<|channel|>${channel} <|constrain|>json`;
  };
  const call = (i: number, end: string): string => {
    const args = r() < 0.5 ? { id: `#W${Math.floor(r() * 1e4)}`, note: text(r, 3) } : { q: Math.floor(r() * 100) };
    return `${header('commentary', `functions.tool_${i}`)}<|message|>${JSON.stringify(args)}${end}`;
  };
  const analyses = r() < 0.7 ? 1 + Math.floor(r() * 2) : 0;
  for (let i = 0; i < analyses; i++)
    msgs.push(`${header('analysis')}<|message|>${text(r, Math.floor(r() * 12))}<|end|>`);
  if (r() < 0.3) msgs.push(`${header('commentary')}<|message|>${text(r, 1 + Math.floor(r() * 6))}<|end|>`);
  if (r() < 0.15) msgs.push(call(9, '<|end|>')); // a call that another message follows
  if (r() < 0.5) msgs.push(`${header('final')}<|message|>${text(r, Math.floor(r() * 14))}<|return|>`);
  else msgs.push(call(0, '<|call|>'));
  return msgs.join('<|start|>assistant');
}

/** Streams `tokens` in random runs; the deltas summed, and how many came before the last run. */
function stream(
  s: HarmonyReplyStream,
  tokens: number[],
  r: () => number,
  final: FinalReply,
): {
  reasoning: string;
  content: string;
  calls: ChatToolCall[];
  early: { reasoning: number; content: number; calls: number };
} {
  const sum = {
    reasoning: '',
    content: '',
    calls: [] as ChatToolCall[],
    early: { reasoning: 0, content: 0, calls: 0 },
  };
  const add = (d: ReplyDelta, early: boolean): void => {
    sum.reasoning += d.reasoning;
    sum.content += d.content;
    sum.calls.push(...d.toolCalls);
    if (early && d.reasoning !== '') sum.early.reasoning++;
    if (early && d.content !== '') sum.early.content++;
    if (early && d.toolCalls.length > 0) sum.early.calls++;
  };
  for (let at = 0; at < tokens.length;) {
    const n = 1 + Math.floor(r() * 4);
    add(s.push(tokens.slice(at, at + n)), at + n < tokens.length - 1);
    at += n;
  }
  add(s.finish(final), false);
  return sum;
}

t.test('random replies: the deltas add up to the reply read without streaming', async (t) => {
  const tok = await gptOssTokenizer();
  const format = new HarmonyChatFormat(tok);
  const r = rng(11);
  const early = { reasoning: 0, content: 0, calls: 0 };
  let withCalls = 0;
  let withReasoning = 0;
  let rawWithCall = 0;
  for (let trial = 0; trial < 400; trial++) {
    const src = reply(r);
    const tokens = ids(tok, src);
    const allowed = r() < 0.7;
    const parsed = format.parseAssistant(tokens, 'call_');
    t.ok(parsed.ok, `trial ${trial}: a well-formed reply (${parsed.ok ? '' : parsed.error})`);
    if (!parsed.ok) continue;
    t.equal(parsed.consumed, tokens.length, `trial ${trial}: the turn ends at its last token`);
    const calls = parsed.message.tool_calls ?? [];
    // as the server answers without streaming (completionBody)
    const final: FinalReply = {
      reasoning: parsed.message.reasoning_content ?? null,
      content: allowed || calls.length === 0 ? (parsed.message.content ?? null) : format.rawActionText(tokens),
      toolCalls: allowed ? calls : [],
    };
    if (!allowed && calls.length > 0) rawWithCall++;
    const got = stream(new HarmonyReplyStream(tok, format.stopTokens, allowed, 'call_'), tokens, r, final);
    const tag = `trial ${trial} ${JSON.stringify(src.slice(0, 80))}… (calls ${allowed ? 'allowed' : 'not allowed'})`;
    t.equal(got.reasoning, final.reasoning ?? '', `${tag}: reasoning`);
    t.equal(got.content, final.content ?? '', `${tag}: content`);
    t.same(got.calls, final.toolCalls, `${tag}: tool calls`);
    early.reasoning += got.early.reasoning;
    early.content += got.early.content;
    early.calls += got.early.calls;
    if (final.toolCalls.length > 0) withCalls++;
    if (final.reasoning) withReasoning++;
  }
  t.ok(
    withCalls > 80 && withReasoning > 80 && rawWithCall > 20,
    `the cases cover calls (${withCalls}), reasoning (${withReasoning}) and calls not allowed (${rawWithCall})`,
  );
  t.ok(early.reasoning > 100, `reasoning streamed before the reply ended (${early.reasoning} deltas)`);
  t.ok(early.content > 100, `content streamed before the reply ended (${early.content} deltas)`);
  t.ok(early.calls > 5, `a call followed by more messages sent once it ended (${early.calls})`);
});

t.test(
  'mutated replies (a token dropped, a special token or a recipient added): when the reading accepts one, the deltas add up to it',
  async (t) => {
    const tok = await gptOssTokenizer();
    const format = new HarmonyChatFormat(tok);
    const specials = [
      '<|start|>',
      '<|end|>',
      '<|message|>',
      '<|channel|>',
      '<|constrain|>',
      '<|return|>',
      '<|call|>',
    ].map((s) => tok.requireId(s));
    const extras = [' to=all', ' to=functions.extra', ' json', 'assistant', 'analysis'].map((s) =>
      tok.encodeOrdinary(s),
    );
    const r = rng(23);
    let accepted = 0;
    let refused = 0;
    for (let trial = 0; trial < 300; trial++) {
      const tokens = ids(tok, reply(r));
      for (let k = 1 + Math.floor(r() * 2); k > 0; k--) {
        const at = Math.floor(r() * tokens.length);
        const u = r();
        if (u < 0.35) tokens.splice(at, 1);
        else if (u < 0.7) tokens.splice(at, 0, specials[Math.floor(r() * specials.length)]);
        else tokens.splice(at, 0, ...extras[Math.floor(r() * extras.length)]);
      }
      const allowed = r() < 0.7;
      const parsed = format.parseAssistant(tokens, 'call_');
      const calls = parsed.ok ? (parsed.message.tool_calls ?? []) : [];
      const final: FinalReply = parsed.ok
        ? {
            reasoning: parsed.message.reasoning_content ?? null,
            content: allowed || calls.length === 0 ? (parsed.message.content ?? null) : format.rawActionText(tokens),
            toolCalls: allowed ? calls : [],
          }
        : { reasoning: null, content: format.rawActionText(tokens), toolCalls: [] };
      const got = stream(new HarmonyReplyStream(tok, format.stopTokens, allowed, 'call_'), tokens, r, final);
      if (!parsed.ok) {
        refused++;
        continue;
      }
      accepted++;
      const tag = `mutated trial ${trial} ${JSON.stringify(tok.decode(tokens).slice(0, 100))} (calls ${allowed ? 'allowed' : 'not allowed'})`;
      t.equal(got.reasoning, final.reasoning ?? '', `${tag}: reasoning`);
      t.equal(got.content, final.content ?? '', `${tag}: content`);
      t.same(got.calls, final.toolCalls, `${tag}: tool calls`);
    }
    t.ok(accepted > 40 && refused > 40, `both kinds occur (${accepted} accepted, ${refused} refused)`);
  },
);

t.test('token by token: reasoning, then content, then the call once its message ends', async (t) => {
  const tok = await gptOssTokenizer();
  const format = new HarmonyChatFormat(tok);
  const s = new HarmonyReplyStream(tok, format.stopTokens, true, 'chatcmpl-x-');
  const none = { reasoning: '', content: '', toolCalls: [] };
  t.same(s.push(ids(tok, '<|channel|>analysis')), none, 'a header sends nothing');
  t.same(s.push(ids(tok, '<|message|>Look it up')).reasoning, 'Look it up');
  t.same(
    s.push(ids(tok, '.<|end|><|start|>assistant<|channel|>analysis<|message|>')).reasoning,
    '.\n',
    'a second analysis message: the newline once it begins',
  );
  t.same(s.push(ids(tok, 'Sure.<|end|><|start|>assistant<|channel|>commentary<|message|>On it')), {
    reasoning: 'Sure.',
    content: 'On it',
    toolCalls: [],
  });
  t.same(
    s.push(
      ids(
        tok,
        '<|end|><|start|>assistant<|channel|>commentary to=functions.get_order <|constrain|>json<|message|>{"id": ',
      ),
    ),
    none,
    'the arguments wait',
  );
  const d = s.push(ids(tok, '"#W1"}'));
  t.same(d, none, 'still waiting for <|call|>');
  const c = s.push([tok.requireId('<|call|>')]);
  t.same(
    c.toolCalls.map((x) => [x.id, x.function.name, x.function.arguments]),
    [['chatcmpl-x-0', 'get_order', '{"id": "#W1"}']],
    'the call once its message ends, with the id the reading gives it',
  );
  t.same(s.push(ids(tok, 'after the end')), none, 'nothing after the stop token');
  t.same(s.sent, { reasoning: 'Look it up.\nSure.', content: 'On it', toolCalls: c.toolCalls });
});

t.test('a multi-byte character split across tokens waits for its last byte', async (t) => {
  const tok = await gptOssTokenizer();
  const format = new HarmonyChatFormat(tok);
  // a rare character whose UTF-8 bytes o200k splits over several tokens
  let ch = '';
  for (const cand of ['𝔘', '𓀀', '𐍈', '🜁', '㆝']) if (tok.encodeOrdinary(cand).length > 1) ch = cand;
  t.not(ch, '', 'a character split over tokens');
  const s = new HarmonyReplyStream(tok, format.stopTokens, true);
  s.push(ids(tok, '<|channel|>final<|message|>a'));
  const parts = tok.encodeOrdinary(ch);
  const out: string[] = [];
  for (const p of parts) out.push(s.push([p]).content);
  t.same(out.slice(0, -1).join(''), '', 'nothing before the last byte');
  t.equal(out.join(''), ch);
});

t.test('a reply the reading refuses: nothing more is sent from there', async (t) => {
  const tok = await gptOssTokenizer();
  const format = new HarmonyChatFormat(tok);
  for (const bad of [
    '<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": <|end|><|start|>assistant<|channel|>final<|message|>late<|return|>',
    '<|channel|>analysis<|message|>ok<|end|><|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>late<|return|>',
    '<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|>weird<|message|>late<|return|>',
    '<|channel|>analysis<|message|>ok<|end|>late<|return|>',
    '<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|> <|message|>late<|return|>',
  ]) {
    const tokens = ids(tok, bad);
    t.notOk(format.parseAssistant(tokens).ok, 'the reading refuses it');
    const s = new HarmonyReplyStream(tok, format.stopTokens, true);
    let content = '';
    let reasoning = '';
    for (const x of tokens) {
      const d = s.push([x]);
      content += d.content;
      reasoning += d.reasoning;
      t.same(d.toolCalls, []);
    }
    t.equal(reasoning, 'ok', 'what came before the refusal');
    t.equal(content, '', 'nothing after it');
    const d = s.finish({ reasoning: null, content: format.rawActionText(tokens), toolCalls: [] });
    t.equal(content + d.content, format.rawActionText(tokens), 'the finish sends the raw text');
  }
});

type Chunk = { choices: { delta: Record<string, unknown>; finish_reason: string | null }[] };

async function chunks(res: Response): Promise<Chunk[]> {
  return (await res.text())
    .split('\n\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)) as Chunk);
}

t.test(
  'the server streams a harmony reply: reasoning_content, content and tool-call deltas add up to the plain reply',
  async (t) => {
    const tok = await gptOssTokenizer();
    const format = new HarmonyChatFormat(tok);
    const src =
      '<|channel|>analysis<|message|>The user wants order #W1. Look it up.<|end|><|start|>assistant<|channel|>commentary<|message|>Let me look.<|end|>' +
      '<|start|>assistant<|channel|>commentary to=functions.get_order <|constrain|>json<|message|>{"id": "#W1"}<|call|>';
    const server = await startChatServer({
      policy: new TokenScript(tok.vocabSize, ids(tok, src)),
      chat: format,
      port: 0,
    });
    t.teardown(() => server.dispose());
    const tools = [{ type: 'function', function: { name: 'get_order', parameters: { type: 'object' } } }];
    const body = { model: 'sinkflex', messages: [{ role: 'user', content: 'Where is #W1?' }], tools };
    const post = (b: unknown): Promise<Response> =>
      fetch(`${server.baseURL}/chat/completions`, { method: 'POST', body: JSON.stringify(b) });
    for (const [what, extra] of [
      ['tools offered', {}],
      ['tool_choice none', { tool_choice: 'none' }],
    ] as const) {
      const plain = (await (await post({ ...body, ...extra })).json()) as {
        choices: { message: Record<string, unknown>; finish_reason: string }[];
      };
      const m = plain.choices[0].message;
      t.equal(
        m.reasoning_content,
        'The user wants order #W1. Look it up.',
        `${what}: the plain reply has the reasoning`,
      );
      const cs = await chunks(await post({ ...body, ...extra, stream: true }));
      const deltas = cs.map((c) => c.choices[0].delta);
      t.equal(deltas.map((d) => d.reasoning_content ?? '').join(''), m.reasoning_content, `${what}: reasoning deltas`);
      t.ok(deltas.filter((d) => d.reasoning_content).length > 3, `${what}: the reasoning in several deltas`);
      t.equal(deltas.map((d) => d.content ?? '').join(''), m.content, `${what}: content deltas`);
      t.ok(deltas.filter((d) => d.content).length > 1, `${what}: the content in several deltas`);
      const calls = deltas.flatMap(
        (d) => (d.tool_calls ?? []) as { index: number; id: string; function: { name: string; arguments: string } }[],
      );
      const want = ((m.tool_calls ?? []) as ChatToolCall[]).map((c, i) => [i, c.function.name, c.function.arguments]);
      t.same(
        calls.map((c) => [c.index, c.function.name, c.function.arguments]),
        want,
        `${what}: tool-call deltas`,
      );
      t.same(
        cs.map((c) => c.choices[0].finish_reason).filter((x) => x !== null),
        [plain.choices[0].finish_reason],
        `${what}: finish reason`,
      );
      if (what === 'tools offered') {
        t.equal(m.content, 'Let me look.');
        t.same(want, [[0, 'get_order', '{"id": "#W1"}']]);
        t.equal(plain.choices[0].finish_reason, 'tool_calls');
      } else {
        t.match(m.content, /^Let me look\.<tool_call>/, 'without tools the call stays text');
        t.same(want, []);
      }
    }
  },
);
