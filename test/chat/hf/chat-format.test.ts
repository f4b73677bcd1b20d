// The ChatFormat interface: the built-in ChatTemplate implements it with its own tokens, and a
// message-level policy behind the token interface needs a format that reads its streams back.
import t from 'tap';

import type { ChatFormat } from '../../../lib/chat/chat-format.js';
import { ChatTemplate, trainChatTokenizer } from '../../../lib/chat/chat-template.js';
import type { ChatMessage } from '../../../lib/chat/messages.js';
import { ConversationDecoder } from '../../../lib/chat/conversation-decoder.js';
import { JinjaChatFormat } from '../../../lib/chat/hf/jinja-format.js';
import { ChatTokenPolicy } from '../../../lib/rollout/chat-token-policy.js';
import { qwen3Tokenizer } from './fixtures/tokenizers.js';

t.test('the built-in template is a ChatFormat with unchanged tokens', async (t) => {
  const tpl = new ChatTemplate(trainChatTokenizer(['Where is my order? {"order_id": "#W1"}'], { vocabSize: 300 }));
  const format: ChatFormat = tpl;
  const msgs: ChatMessage[] = [
    { role: 'system', content: 'Be helpful.' },
    { role: 'user', content: 'Where is my order?' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"order_id": "#W1"}' } }],
      reasoning_content: 'ignored by the built-in template',
    },
    { role: 'tool', tool_call_id: 'c', content: 'delivered' },
    { role: 'user', content: 'thanks' },
  ];
  const tools = [{ type: 'function', function: { name: 'f' } }];
  t.same(
    format.renderTokens(msgs, { tools, addGenerationPrompt: true }),
    tpl.render(msgs, { tools, addGenerationPrompt: true }),
  );
  t.same(
    format.renderAppend(msgs.slice(0, 3), msgs.slice(3), { tools }),
    [...tpl.renderMessage(msgs[3]), ...tpl.renderMessage(msgs[4]), ...tpl.generationPrompt()],
    'each message on its own, then the generation prompt',
  );
  t.same(
    format.renderAppend([], msgs.slice(3)),
    format.renderAppend(msgs.slice(0, 3), msgs.slice(3)),
    'whatever the history',
  );
  t.same(
    tpl.render(msgs.slice(2, 3)),
    tpl.render([{ ...msgs[2], reasoning_content: undefined } as ChatMessage]),
    'reasoning_content does not change its tokens',
  );
  t.ok(format.createReader?.() instanceof ConversationDecoder);
  t.equal(
    format.rawActionText([tpl.call, ...tpl.tokenizer.encode('{"name": "x"'), tpl.end]),
    '<tool_call>{"name": "x"</tool_call>',
  );
});

t.test('ChatTokenPolicy needs a format that reads its token streams back', async (t) => {
  const tok = await qwen3Tokenizer();
  const chat = { startConversation: () => ({ respond: async () => ({ role: 'assistant' as const, content: 'x' }) }) };
  t.throws(
    () => new ChatTokenPolicy(chat, new JinjaChatFormat(tok, tok.config.chat_template as string)),
    /reads its token streams back into messages/,
  );
});
