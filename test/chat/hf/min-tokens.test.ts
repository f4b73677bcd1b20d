// ChatFormat.minTokens of the pretrained formats (Qwen3's Jinja template with its real
// tokenizer, gpt-oss's harmony): a lower bound from text lengths alone, never above the real
// token count — of a whole conversation's rendering, and of new messages appended after a
// conversation (what the server checks before it continues a kept session) — on random
// conversations: tool calls and results, system prompts, tools, reasoning, texts in several
// scripts, combining marks (which Qwen's NFC normalizer composes), emoji, long runs of one
// character (the tokenizers' longest tokens), special-token names inside contents.
import t, { type Test } from 'tap';

import type { ChatFormat } from '../../../lib/chat/chat-format.js';
import type { ChatMessage, ToolSchema } from '../../../lib/chat/messages.js';
import { HarmonyChatFormat } from '../../../lib/chat/hf/harmony-format.js';
import { JinjaChatFormat } from '../../../lib/chat/hf/jinja-format.js';
import { uniformStream } from '../../model/hf/fixtures/seeded.js';
import { gptOssTokenizer, qwen3Tokenizer } from './fixtures/tokenizers.js';

const PIECES = [
  'The order #W2378156 ships Monday. ',
  'Ünïcödé façade — naïve café. ',
  'e\u0301 a\u0308 o\u0302\u0323 ', // decomposed: NFC composes them
  '\u1100\u1161\u11a8 ', // Hangul jamo: NFC makes one syllable of three
  '日本語のテキストと中文文本。',
  'Привет, мир! ',
  'مرحبا بالعالم ',
  '😀👍🏽 ',
  '    '.repeat(40), // long whitespace runs
  '-'.repeat(150),
  '=================================================================',
  '<|im_start|> <|im_end|> <|start|> <|call|> <think> </tool_call>',
  '{"email": "a@b.c", "n": [1, 2, 3]}',
  '\n\n\t',
];

function randomText(next: () => number, maxPieces: number): string {
  let s = '';
  const n = Math.floor(next() * maxPieces);
  for (let i = 0; i < n; i++) s += PIECES[Math.floor(next() * PIECES.length)];
  return s;
}

const TOOLS: ToolSchema[] = [
  {
    type: 'function',
    function: {
      name: 'find_user_id_by_email',
      description: 'Find a user by email.',
      parameters: { type: 'object', properties: { email: { type: 'string' } }, required: ['email'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_order_details',
      description: 'Order details.',
      parameters: { type: 'object', properties: { order_id: { type: 'string', description: 'e.g. #W1' } } },
    },
  },
];

/** A random conversation: system?, then user / assistant (text, reasoning, calls) / tool turns. */
function randomConversation(seed: number): { messages: ChatMessage[]; tools?: ToolSchema[] } {
  const next = uniformStream(seed, 'conversation');
  const messages: ChatMessage[] = [];
  if (next() < 0.7) messages.push({ role: 'system', content: randomText(next, 6) });
  messages.push({ role: 'user', content: randomText(next, 6) || 'hi' });
  const turns = 1 + Math.floor(next() * 4);
  let call = 0;
  for (let k = 0; k < turns; k++) {
    const calls = next() < 0.5 ? 1 + Math.floor(next() * 2) : 0;
    const msg: ChatMessage = { role: 'assistant', content: calls > 0 && next() < 0.5 ? null : randomText(next, 4) };
    if (next() < 0.4) msg.reasoning_content = randomText(next, 3) || 'thinking';
    if (calls > 0) {
      msg.tool_calls = Array.from({ length: calls }, () => ({
        id: `c${call++}`,
        type: 'function' as const,
        function: {
          name: ['find_user_id_by_email', 'get_order_details'][Math.floor(next() * 2)],
          arguments: JSON.stringify({ email: randomText(next, 2) }),
        },
      }));
    }
    messages.push(msg);
    for (const c of msg.tool_calls ?? [])
      messages.push({ role: 'tool', tool_call_id: c.id, content: randomText(next, 5) });
    messages.push({ role: 'user', content: randomText(next, 5) || 'ok' });
  }
  return next() < 0.6 ? { messages, tools: TOOLS } : { messages };
}

async function check(
  t: Test,
  name: string,
  format: ChatFormat & { minTokens(m: readonly ChatMessage[], o?: object): number },
): Promise<void> {
  let tightest = Infinity;
  let checked = 0;
  for (let seed = 1; seed <= 40; seed++) {
    const { messages, tools } = randomConversation(seed);
    for (const addGenerationPrompt of [false, true]) {
      const real = format.renderTokens(messages, { tools, addGenerationPrompt }).length;
      const bound = format.minTokens(messages, { tools, addGenerationPrompt });
      if (!(bound <= real)) t.fail(`${name}, seed ${seed}: bound ${bound} > ${real} tokens`);
      if (bound < 1) t.fail(`${name}, seed ${seed}: no bound for a non-empty conversation`);
      tightest = Math.min(tightest, real / Math.max(bound, 1));
      checked++;
    }
    // new messages after the conversation up to its last assistant turn (the server's continuation)
    const last = messages.map((m) => m.role).lastIndexOf('assistant');
    const history = messages.slice(0, last + 1);
    const delta = messages.slice(last + 1);
    const appended = format.renderAppend(history, delta, { tools }).length;
    const deltaBound = format.minTokens(delta, { addGenerationPrompt: true });
    if (!(deltaBound <= appended))
      t.fail(`${name}, seed ${seed}: bound ${deltaBound} of the new messages > ${appended} appended tokens`);
    checked++;
  }
  t.pass(`${name}: ${checked} bounds never above the real count (real / bound ≥ ${tightest.toFixed(1)})`);
  // a long text gives a proportionally large bound
  const huge = 'word '.repeat(50000);
  const bound = format.minTokens([{ role: 'user', content: huge }]);
  t.ok(bound >= huge.length / 128, `${name}: ${bound} tokens at least for ${huge.length} characters`);
  t.ok(bound <= format.renderTokens([{ role: 'user', content: huge }]).length);
}

t.test("Qwen3's Jinja template", async (t) => {
  const tok = await qwen3Tokenizer();
  t.equal(tok.longestToken(), 128, "Qwen3's longest token (UTF-16 units)");
  await check(t, 'qwen3', new JinjaChatFormat(tok, tok.config.chat_template as string));
  // a template that writes a preamble (a default system prompt) before any message
  const preamble = new JinjaChatFormat(
    tok,
    "{{ '<|im_start|>system\\nYou are a helpful assistant with a long default prompt.<|im_end|>\\n' }}{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
  );
  const delta: ChatMessage[] = [{ role: 'user', content: 'x' }];
  t.ok(
    preamble.minTokens(delta, { addGenerationPrompt: true }) <=
      preamble.renderAppend(
        [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
        ],
        delta,
      ).length,
    'the preamble is not counted for new messages',
  );
  t.equal(
    preamble.minTokens([
      { role: 'user', content: 'x' },
      { role: 'nobody' as 'user', content: 'y' },
    ]) >= 0,
    true,
  );
});

t.test("gpt-oss's harmony", async (t) => {
  const tok = await gptOssTokenizer();
  await check(t, 'harmony', new HarmonyChatFormat(tok));
  t.equal(
    new HarmonyChatFormat(tok).minTokens([{ role: 'narrator' as 'user', content: 'x' }]),
    0,
    'a conversation that cannot be rendered counts 0',
  );
});
