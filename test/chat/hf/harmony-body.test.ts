// HarmonyChatFormat.renderAssistantBody: the tokens gpt-oss samples after `<|start|>assistant` for
// a message — reasoning on the analysis channel, a final answer ending in <|return|>, a tool call
// `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>` after an
// optional commentary preamble — which parseAssistant reads back to the same message; a message
// with two calls has no such rendering (a sampled turn ends at its first <|call|>).
import t from 'tap';

import type { ChatAssistantMessage } from '../../../lib/chat/messages.js';
import { HarmonyChatFormat } from '../../../lib/chat/hf/harmony-format.js';
import { gptOssTokenizer } from './fixtures/tokenizers.js';

t.test('assistant bodies as gpt-oss samples them, read back by parseAssistant', async (t) => {
  const tok = await gptOssTokenizer();
  const f = new HarmonyChatFormat(tok);
  const call = {
    id: 'call_0',
    type: 'function' as const,
    function: { name: 'get_order_details', arguments: '{"order_id":"#W1"}' },
  };
  const cases: [ChatAssistantMessage, string][] = [
    [{ role: 'assistant', content: 'Hello there.' }, '<|channel|>final<|message|>Hello there.<|return|>'],
    [
      { role: 'assistant', content: 'Done.', reasoning_content: 'Think first.' },
      '<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>',
    ],
    [
      { role: 'assistant', content: null, tool_calls: [call] },
      '<|channel|>commentary to=functions.get_order_details <|constrain|>json<|message|>{"order_id":"#W1"}<|call|>',
    ],
    [
      { role: 'assistant', content: 'Let me look.', tool_calls: [call] },
      '<|channel|>commentary<|message|>Let me look.<|end|><|start|>assistant<|channel|>commentary to=functions.get_order_details <|constrain|>json<|message|>{"order_id":"#W1"}<|call|>',
    ],
  ];
  for (const [message, text] of cases) {
    const ids = f.renderAssistantBody(message);
    t.equal(tok.decode(ids), text, text.slice(0, 40));
    t.ok(f.stopTokens.includes(ids[ids.length - 1]), 'ends with a stop token');
    const back = f.parseAssistant(ids, 'call_');
    t.ok(back.ok, 'parses');
    if (!back.ok) continue;
    t.equal(back.consumed, ids.length);
    t.equal(back.message.content ?? null, message.content ?? null, 'the content');
    t.same(back.message.tool_calls ?? [], message.tool_calls ?? [], 'the calls');
    t.equal(back.message.reasoning_content ?? null, message.reasoning_content ?? null, 'the reasoning');
  }
  t.throws(
    () => f.renderAssistantBody({ role: 'assistant', content: null, tool_calls: [call, { ...call, id: 'call_1' }] }),
    /holds 2 calls: a sampled harmony turn ends at its first <\|call\|>/,
  );
  t.throws(
    () => f.renderAssistantBody({ role: 'user', content: 'x' } as unknown as ChatAssistantMessage),
    /expects an assistant message/,
  );
});
