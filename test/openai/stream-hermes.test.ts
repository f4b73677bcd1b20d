// Streaming of <think> + Hermes replies (issue 24, item 5): random well-formed replies — a
// reasoning block or none, text with spaces, newlines, multi-byte characters and stray '<'
// pieces, tool calls between the text — are tokenized with Qwen3's real tokenizer, cut into
// random runs of tokens and streamed; the reasoning, content and tool-call deltas must add up
// to the reply as the chat format reads it without streaming (JinjaChatFormat.parseAssistant;
// with calls not allowed, the raw text), and the reasoning and the calls must arrive before the
// reply ends.
import t from 'tap';

import type { ChatToolCall } from '../../lib/chat/messages.js';
import { JinjaChatFormat } from '../../lib/chat/hf/jinja-format.js';
import { TokenScript } from './fixtures/token-script.js';
import { startChatServer } from '../../lib/openai/index.js';
import { HermesReplyStream, type FinalReply } from '../../lib/openai/stream-hermes.js';
import { mulberry32 } from '../../lib/util/random.js';
import { qwen3Tokenizer } from '../chat/hf/fixtures/tokenizers.js';

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
  '<to',
  '<th',
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

function reply(r: () => number): string {
  let s = '';
  if (r() < 0.6) s += `<think>\n${text(r, 1 + Math.floor(r() * 12))}\n</think>\n\n`;
  const parts = Math.floor(r() * 4);
  const lead = r() < 0.15 ? ' ' : ''; // content that begins with whitespace waits for the end
  s += lead + (r() < 0.8 ? 'Sure' + text(r, Math.floor(r() * 10)) : '');
  for (let i = 0; i < parts; i++) {
    const args = r() < 0.5 ? { id: `#W${Math.floor(r() * 1e4)}`, note: text(r, 3) } : { q: Math.floor(r() * 100) };
    s += `<tool_call>\n${JSON.stringify({ name: `tool_${i}`, arguments: args })}\n</tool_call>`;
    if (r() < 0.5) s += text(r, Math.floor(r() * 5));
  }
  return s;
}

t.test('random replies: the deltas add up to the reply read without streaming', async (t) => {
  const tok = await qwen3Tokenizer();
  const end = tok.encode('<|im_end|>');
  t.equal(end.length, 1);
  const format = new JinjaChatFormat(tok, '{% for m in messages %}{{ m.content }}{% endfor %}', { stopTokens: end });
  const r = rng(7);
  let earlyReasoning = 0;
  let earlyCalls = 0;
  let withCalls = 0;
  let withReasoning = 0;
  for (let trial = 0; trial < 300; trial++) {
    const src = reply(r);
    const tokens = [...tok.encode(src), end[0]];
    const allowed = r() < 0.8;
    const parsed = format.parseAssistant(tokens, 'call_');
    t.ok(parsed.ok, `trial ${trial}: a well-formed reply (${parsed.ok ? '' : parsed.error})`);
    if (!parsed.ok) continue;
    const calls = parsed.message.tool_calls ?? [];
    const final: FinalReply = {
      reasoning: parsed.message.reasoning_content ?? null,
      content: allowed || calls.length === 0 ? (parsed.message.content ?? null) : format.rawActionText(tokens),
      toolCalls: allowed ? calls : [],
    };
    const stream = new HermesReplyStream(tok, end, allowed, 'call_');
    let reasoning = '';
    let content = '';
    const got: ChatToolCall[] = [];
    for (let at = 0; at < tokens.length;) {
      const n = 1 + Math.floor(r() * 4);
      const d = stream.push(tokens.slice(at, at + n));
      at += n;
      reasoning += d.reasoning;
      content += d.content;
      got.push(...d.toolCalls);
      if (at < tokens.length - 1 && d.reasoning !== '') earlyReasoning++;
      if (at < tokens.length - 1 && d.toolCalls.length > 0) earlyCalls++;
    }
    const d = stream.finish(final);
    reasoning += d.reasoning;
    content += d.content;
    got.push(...d.toolCalls);
    const tag = `trial ${trial} ${JSON.stringify(src.slice(0, 60))}… (calls ${allowed ? 'allowed' : 'not allowed'})`;
    t.equal(reasoning, final.reasoning ?? '', `${tag}: reasoning`);
    t.equal(content, final.content ?? '', `${tag}: content`);
    t.same(got, final.toolCalls, `${tag}: tool calls`);
    if (final.toolCalls.length > 0) withCalls++;
    if (final.reasoning) withReasoning++;
  }
  t.ok(withCalls > 50 && withReasoning > 50, `the cases cover calls (${withCalls}) and reasoning (${withReasoning})`);
  t.ok(earlyReasoning > 50, `reasoning streamed before the reply ended (${earlyReasoning} deltas)`);
  t.ok(earlyCalls > 20, `calls sent as soon as they closed (${earlyCalls})`);
});

t.test('text that may become a tag waits; nothing is sent twice', async (t) => {
  const tok = await qwen3Tokenizer();
  const end = tok.encode('<|im_end|>');
  const s = new HermesReplyStream(tok, end, true);
  t.same(s.push(tok.encode('<th')), { reasoning: '', content: '', toolCalls: [] }, 'may open a think block');
  t.same(s.push(tok.encode('ink>\nLet me see')).reasoning, 'Let me see');
  t.same(s.push(tok.encode('.</thi')).reasoning, '.', 'a closing tag in the making is held');
  t.same(
    s.push(tok.encode('nk>\n\nHello <tool')),
    { reasoning: '', content: 'Hello', toolCalls: [] },
    'trailing space and a tag in the making held',
  );
  const d = s.push(tok.encode('_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'));
  t.same(
    d.toolCalls.map((c) => [c.id, c.function.name, c.function.arguments]),
    [['call_0', 'f', '{"a":1}']],
    'the call once it is closed',
  );
  t.same(d.content, '');
});

t.test(
  'the server streams a Qwen3-format reply: reasoning_content, content and tool-call deltas add up to the plain reply',
  async (t) => {
    const tok = await qwen3Tokenizer();
    const end = tok.encode('<|im_end|>');
    const format = new JinjaChatFormat(
      tok,
      '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}',
      { stopTokens: end },
    );
    const src =
      '<think>\nThe user wants order #W1.\n</think>\n\nLet me look.<tool_call>\n{"name": "get_order", "arguments": {"id": "#W1"}}\n</tool_call>';
    const server = await startChatServer({
      policy: new TokenScript(tok.vocabSize, [...tok.encode(src), end[0]]),
      chat: format,
      port: 0,
    });
    t.teardown(() => server.dispose());
    const body = {
      model: 'sinkflex',
      messages: [{ role: 'user', content: 'Where is #W1?' }],
      tools: [{ type: 'function', function: { name: 'get_order', parameters: { type: 'object' } } }],
    };
    const plain = (await (
      await fetch(`${server.baseURL}/chat/completions`, { method: 'POST', body: JSON.stringify(body) })
    ).json()) as { choices: { message: Record<string, unknown>; finish_reason: string }[] };
    const m = plain.choices[0].message;
    t.equal(m.reasoning_content, 'The user wants order #W1.', 'the plain reply has the reasoning');
    t.equal(m.content, 'Let me look.');
    t.equal(plain.choices[0].finish_reason, 'tool_calls');
    const res = await fetch(`${server.baseURL}/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ ...body, stream: true }),
    });
    const chunks = (await res.text())
      .split('\n\n')
      .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
      .map(
        (l) =>
          JSON.parse(l.slice(6)) as { choices: { delta: Record<string, unknown>; finish_reason: string | null }[] },
      );
    const deltas = chunks.map((c) => c.choices[0].delta);
    t.equal(deltas.map((d) => d.reasoning_content ?? '').join(''), m.reasoning_content, 'reasoning deltas');
    t.ok(deltas.filter((d) => d.reasoning_content).length > 1, 'the reasoning in several deltas');
    t.equal(deltas.map((d) => d.content ?? '').join(''), m.content, 'content deltas');
    const calls = deltas.flatMap(
      (d) => (d.tool_calls ?? []) as { index: number; function: { name: string; arguments: string } }[],
    );
    t.same(
      calls.map((c) => [c.index, c.function.name, c.function.arguments]),
      [[0, 'get_order', '{"id":"#W1"}']],
    );
    t.same(
      chunks.map((c) => c.choices[0].finish_reason).filter((x) => x !== null),
      ['tool_calls'],
    );
  },
);
