import t from 'tap';

import {
  type ChatMessage,
  ChatTemplate,
  ChatTemplateError,
  Tokenizer,
  trainChatTokenizer,
} from '../../lib/chat/index.js';
import { rng } from '../model/fixtures/reference.js';

const corpus = [
  'You are a retail customer service agent. Help users return or exchange delivered orders.',
  'I want to return order #W1234567, the lamp is broken.',
  '{"name": "get_order_details", "arguments": {"order_id": "#W1234567"}}',
  '{"order_id": "#W1234567", "status": "delivered", "items": [{"item_id": "123", "price": 12.5}]}',
].join('\n');
const tok = trainChatTokenizer(Array(10).fill(corpus), { vocabSize: 420 });
const chat = new ChatTemplate(tok);
const tools = [
  {
    type: 'function',
    function: {
      name: 'get_order_details',
      parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
    },
  },
];

/** A random conversation of `n` messages (system first), with text, tool calls and tool results. */
function randomConversation(seed: number, n: number): ChatMessage[] {
  const r = rng(seed);
  const word = (): string =>
    ['order', 'return', ' lamp', 'é', '😀', '\n', '{"x": 1}', '<|end|>', ''][Math.floor(r() * 9)];
  const text = (): string => Array.from({ length: 1 + Math.floor(r() * 6) }, word).join(' ');
  const msgs: ChatMessage[] = [{ role: 'system', content: text() }];
  while (msgs.length < n) {
    const k = Math.floor(r() * 4);
    if (k === 0) msgs.push({ role: 'user', content: text() });
    else if (k === 1) msgs.push({ role: 'assistant', content: text() });
    else if (k === 2)
      msgs.push({
        role: 'assistant',
        content: r() < 0.5 ? null : text(),
        tool_calls: [
          {
            id: 'x',
            type: 'function',
            function: { name: 'get_order_details', arguments: JSON.stringify({ order_id: text() }) },
          },
        ],
      });
    else msgs.push({ role: 'tool', tool_call_id: 'x', content: text() });
  }
  return msgs;
}

const isPrefix = (a: number[], b: number[]): boolean => a.length <= b.length && a.every((v, i) => v === b[i]);

t.test('renders the documented layout', async (t) => {
  const msgs: ChatMessage[] = [
    { role: 'system', content: 'Be helpful.' },
    { role: 'user', content: 'Where is my order?' },
    {
      role: 'assistant',
      content: 'Let me check.',
      tool_calls: [
        { id: 'c', type: 'function', function: { name: 'get_order_details', arguments: '{"order_id": "#W1"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'c', content: '{"status": "delivered"}' },
  ];
  const text = tok.decode(chat.render(msgs, { tools, addGenerationPrompt: true }));
  t.equal(
    text,
    '<|start|>system<|message|>Be helpful.<|end|>' +
      `<|start|>tools<|message|>${JSON.stringify(tools)}<|end|>` +
      '<|start|>user<|message|>Where is my order?<|end|>' +
      '<|start|>assistant<|message|>Let me check.<|call|>{"name":"get_order_details","arguments":{"order_id":"#W1"}}<|end|>' +
      '<|start|>tool<|message|>{"status": "delivered"}<|end|>' +
      '<|start|>assistant',
  );
  t.same(chat.stopTokens, [tok.specialId('<|end|>')]);
  t.equal(
    tok.decode(chat.render([{ role: 'user', content: 'hi' }], { tools })),
    `<|start|>tools<|message|>${JSON.stringify(tools)}<|end|><|start|>user<|message|>hi<|end|>`,
    'tools first without a system message',
  );
  t.equal(
    tok.decode(
      chat.render([
        { role: 'assistant', content: null, tool_calls: [{ function: { name: 'f', arguments: 'not json' } }] },
      ]),
    ),
    '<|start|>assistant<|call|>{"name":"f","arguments":"not json"}<|end|>',
    'non-JSON arguments are rendered as a string',
  );
  t.equal(tok.decode(chat.render([{ role: 'assistant', content: '' }])), '<|start|>assistant<|message|><|end|>');
});

t.test('prefix property: a longer conversation extends the shorter one token for token', async (t) => {
  for (let seed = 1; seed <= 40; seed++) {
    const msgs = randomConversation(seed, 12);
    const withTools = seed % 2 === 0 ? { tools } : {};
    let prev = chat.render(msgs.slice(0, 1), withTools);
    for (let k = 2; k <= msgs.length; k++) {
      const next = chat.render(msgs.slice(0, k), withTools);
      if (!isPrefix(prev, next)) {
        t.fail(`seed ${seed}: rendering ${k - 1} messages is not a prefix of rendering ${k}`);
        return;
      }
      // the new tokens are exactly the new message rendered alone (delta tokenization)
      if (
        !isPrefix(chat.renderMessage(msgs[k - 1]), next.slice(prev.length)) ||
        next.length - prev.length !== chat.renderMessage(msgs[k - 1]).length
      ) {
        t.fail(`seed ${seed}: message ${k - 1} rendered alone differs from its tokens in context`);
        return;
      }
      // an assistant turn = generation prompt + the body the model generates
      const m = msgs[k - 1];
      if (m.role === 'assistant') {
        const prompt = chat.render(msgs.slice(0, k - 1), { ...withTools, addGenerationPrompt: true });
        if (!isPrefix(prompt, next) || !isPrefix(chat.renderAssistantBody(m), next.slice(prompt.length)))
          t.fail(`seed ${seed}: generation prompt + body != rendered assistant turn`);
      }
      prev = next;
    }
  }
  t.pass('40 random conversations of 12 messages');
});

t.test('parses generated assistant tokens back into messages', async (t) => {
  const prompt = chat.generationPrompt();
  const cases: ChatMessage[] = [
    { role: 'assistant', content: 'Your order was delivered. 😀' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ function: { name: 'get_order_details', arguments: '{"order_id":"#W1"}' } }],
    },
    {
      role: 'assistant',
      content: 'Checking both.',
      tool_calls: [
        { function: { name: 'a', arguments: '{"x":[1,2,{"y":null}]}' } },
        { function: { name: 'b', arguments: '{}' } },
      ],
    },
    { role: 'assistant', content: '' },
  ];
  for (const m of cases) {
    const rendered = chat.renderMessage(m);
    t.same(rendered.slice(0, prompt.length), prompt);
    const body = rendered.slice(prompt.length);
    const parsed = chat.parseAssistant([...body, 7, 7]); // tokens after <|end|> are ignored
    t.ok(parsed.ok, JSON.stringify(m));
    if (!parsed.ok || m.role !== 'assistant') continue;
    t.equal(parsed.consumed, body.length);
    t.equal(parsed.message.content, m.content);
    t.same(
      parsed.message.tool_calls?.map((c) => [c.function.name, JSON.parse(c.function.arguments) as unknown]),
      m.tool_calls?.map((c) => [c.function.name, JSON.parse(c.function.arguments) as unknown]),
    );
    t.same(
      parsed.message.tool_calls?.map((c) => c.id),
      m.tool_calls?.map((_, i) => `call_${i}`),
    );
    // and re-rendering the parsed message gives the same tokens
    t.same(chat.renderAssistantBody(parsed.message), body);
  }
  const bare = chat.parseAssistant([chat.call, ...tok.encode('{"name":"f"}'), chat.end], 'id-');
  t.ok(
    bare.ok && bare.message.tool_calls?.[0].function.arguments === '{}' && bare.message.tool_calls?.[0].id === 'id-0',
    'missing arguments = {}',
  );
  const str = chat.parseAssistant([chat.call, ...tok.encode('{"name":"f","arguments":"raw"}'), chat.end]);
  t.ok(str.ok && str.message.tool_calls?.[0].function.arguments === 'raw', 'string arguments are kept');
});

t.test('malformed generations give a parse error, never a throw', async (t) => {
  const enc = (s: string): number[] => tok.encode(s);
  const bad: [number[], RegExp][] = [
    [[chat.message, ...enc('no end')], /no <\|end\|>/],
    [[...enc('text'), chat.end], /text before the first/],
    [[chat.end], /empty assistant turn/],
    [[chat.message, chat.start, chat.end], /unexpected special token <\|start\|>/],
    [[chat.call, ...enc('{"name": '), chat.end], /tool call 0 is not valid JSON/],
    [[chat.call, ...enc('[1,2]'), chat.end], /non-empty "name"/],
    [[chat.call, ...enc('{"arguments": {}}'), chat.end], /non-empty "name"/],
    [[chat.call, ...enc('{"name":"f","arguments":[1]}'), chat.end], /"arguments" must be an object/],
    [[chat.message, 99999, chat.end], /not in the vocabulary/],
    [[chat.message, 1.5, chat.end], /not in the vocabulary/],
  ];
  for (const [tokens, error] of bad) {
    const r = chat.parseAssistant(tokens);
    t.notOk(r.ok);
    if (!r.ok) {
      t.match(r.error, error);
      t.type(r.text, 'string');
    }
  }
  // fuzz: random token sequences never throw
  const r = rng(9);
  for (let i = 0; i < 2000; i++) {
    const tokens = Array.from({ length: Math.floor(r() * 30) }, () =>
      r() < 0.3 ? Math.floor(r() * 6) : Math.floor(r() * (tok.vocabSize + 5)) - 2,
    );
    try {
      chat.parseAssistant(tokens);
    } catch (e) {
      t.fail(`threw on [${tokens.join(',')}]: ${(e as Error).message}`);
      return;
    }
  }
  t.pass('2000 random sequences');
});

t.test('invalid messages and tokenizers are rejected', async (t) => {
  t.throws(() => chat.render([{ role: 'robot', content: 'x' } as unknown as ChatMessage]), ChatTemplateError);
  t.throws(() => chat.render([{ role: 'user', content: 5 } as unknown as ChatMessage]), {
    name: 'ChatTemplateError',
    message: /content must be a string/,
  });
  t.throws(() => chat.render([{ role: 'assistant', content: 5 } as unknown as ChatMessage]), {
    message: /string or null/,
  });
  t.throws(
    () => chat.render([{ role: 'assistant', tool_calls: [{ function: { name: 'f' } }] } as unknown as ChatMessage]),
    { message: /function.name and function.arguments/ },
  );
  t.throws(() => chat.renderMessage(null as unknown as ChatMessage), ChatTemplateError);
  t.throws(() => new ChatTemplate(Tokenizer.train('abc', { vocabSize: 256 })), {
    name: 'TokenizerError',
    message: /no special token '<\|pad\|>'/,
  });
  t.equal(chat.pad, 0);
  t.equal(chat.endOfText, 1);
});
