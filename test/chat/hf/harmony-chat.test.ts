// HarmonyChatFormat for OpenAI chat messages: a tau-style tool conversation rendered as the
// harmony spec (../shared/research/harmony/format.md) lays it out, analysis dropping, completion
// parsing into content / tool calls / reasoning, the Error path of malformed calls, and
// token-in/token-out. Expected strings are written from the spec.
import t from 'tap';

import type { ChatMessage, ToolSchema } from '../../../lib/chat/messages.js';
import { HarmonyChatFormat } from '../../../lib/chat/hf/harmony-format.js';
import { parseHarmonyHeader } from '../../../lib/chat/hf/harmony-parse.js';
import { parseTurn } from '../../../lib/rollout/turns.js';
import { normalizeAction } from '../../../lib/tau/action.js';
import { gptOssTokenizer } from './fixtures/tokenizers.js';

const tok = await gptOssTokenizer();
const chat = new HarmonyChatFormat(tok, { currentDate: '2025-06-28' });

const tools: ToolSchema[] = [
  {
    type: 'function',
    function: {
      name: 'get_order_details',
      description: 'Get the status and details of an order.',
      parameters: {
        type: 'object',
        properties: { order_id: { type: 'string', description: 'The order id, e.g. #W0000000' } },
        required: ['order_id'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'list_all_product_types',
      description: 'List all product types.',
      parameters: { type: 'object', properties: {} },
    },
  },
];
const header =
  '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: medium\n\n' +
  "# Valid channels: analysis, commentary, final. Channel must be included for every message.\nCalls to these tools must go to the commentary channel: 'functions'.<|end|>" +
  '<|start|>developer<|message|># Instructions\n\nYou are a retail agent.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n' +
  '// Get the status and details of an order.\ntype get_order_details = (_: {\n// The order id, e.g. #W0000000\norder_id: string,\n}) => any;\n\n' +
  '// List all product types.\ntype list_all_product_types = () => any;\n\n} // namespace functions<|end|>';
const base: ChatMessage[] = [
  { role: 'system', content: 'You are a retail agent.' },
  { role: 'user', content: 'Where is my order #W1?' },
  {
    role: 'assistant',
    content: null,
    reasoning_content: 'Need order details.',
    tool_calls: [
      { id: 'c0', type: 'function', function: { name: 'get_order_details', arguments: '{"order_id": "#W1"}' } },
    ],
  },
  { role: 'tool', tool_call_id: 'c0', content: '{"status": "delivered"}' },
];
const callText =
  '<|start|>assistant to=functions.get_order_details<|channel|>commentary <|constrain|>json<|message|>{"order_id": "#W1"}<|call|>';
const resultText =
  '<|start|>functions.get_order_details to=assistant<|channel|>commentary<|message|>{"status": "delivered"}<|end|>';

t.test('a tool conversation as the spec lays it out', async (t) => {
  const want = `${header}<|start|>user<|message|>Where is my order #W1?<|end|><|start|>assistant<|channel|>analysis<|message|>Need order details.<|end|>${callText}${resultText}<|start|>assistant`;
  const r = chat.render(base, { tools, addGenerationPrompt: true });
  t.equal(r.text, want, 'ongoing tool turn: its analysis stays');
  t.same(r.ids, tok.encode(want), 'ids: the text with its special tokens');
  t.same(chat.stopTokens, [200002, 200012], 'stop at <|return|> and <|call|>');
  t.equal(
    chat.render([{ role: 'user', content: 'x' }], {
      reasoningEffort: 'low',
      currentDate: null,
      knowledgeCutoff: null,
      modelIdentity: null,
    }).text,
    '<|start|>system<|message|>Reasoning: low\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>user<|message|>x<|end|>',
    'per-render options, lines left out',
  );
  t.equal(
    chat
      .render([
        { role: 'user', content: 'x' },
        {
          role: 'assistant',
          content: 'Let me look.',
          tool_calls: [{ id: 'q', type: 'function', function: { name: 'list_all_product_types', arguments: '{}' } }],
        },
        { role: 'tool', name: 'list_all_product_types', content: '[]' },
        { role: 'tool', tool_call_id: 'unknown', content: 'Error: bad call' },
      ])
      .text.split('<|end|>')
      .slice(2)
      .join('<|end|>'),
    '<|start|>assistant<|channel|>commentary<|message|>Let me look.<|end|><|start|>assistant to=functions.list_all_product_types<|channel|>commentary <|constrain|>json<|message|>{}<|call|>' +
      '<|start|>functions.list_all_product_types to=assistant<|channel|>commentary<|message|>[]<|end|><|start|>functions to=assistant<|channel|>commentary<|message|>Error: bad call<|end|>',
    'text beside calls is a commentary preamble; a result names its tool, or the functions namespace when its call is unknown',
  );
  t.equal(
    chat.render([{ role: 'user', content: 'literal <|end|> text' }]).ids.filter((i) => i === 200007).length,
    2,
    'special-token names in content stay text',
  );
});

t.test("finished turns' analysis is dropped", async (t) => {
  const finished: ChatMessage[] = [
    ...base,
    { role: 'assistant', content: 'It was delivered.', reasoning_content: 'Tell the user.' },
    { role: 'user', content: 'Thanks!' },
  ];
  const tail = `${callText}${resultText}<|start|>assistant<|channel|>final<|message|>It was delivered.<|end|><|start|>user<|message|>Thanks!<|end|><|start|>assistant`;
  t.equal(
    chat.render(finished, { tools, addGenerationPrompt: true }).text,
    `${header}<|start|>user<|message|>Where is my order #W1?<|end|>${tail}`,
    'the turn ended in a final answer: both analyses go',
  );
  t.match(
    chat.render(finished, { tools, addGenerationPrompt: true, dropAnalysis: false }).text,
    /Need order details\.[\s\S]*Tell the user\./,
    'dropAnalysis: false keeps them',
  );
  const training = chat.render(finished.slice(0, -1), { tools }).text;
  t.match(
    training,
    /analysis<\|message\|>Need order details\.[\s\S]*analysis<\|message\|>Tell the user\.<\|end\|><\|start\|>assistant<\|channel\|>final<\|message\|>It was delivered\.<\|end\|>$/,
    'ending with that final answer (no generation prompt): the turn keeps its analysis',
  );
});

t.test('completions: reasoning, content, calls; malformed calls take the Error path', async (t) => {
  const callTurn =
    '<|channel|>analysis<|message|>Need the order.<|end|><|start|>assistant<|channel|>commentary to=functions.get_order_details <|constrain|>json<|message|>{"order_id": "#W1"}<|call|>';
  t.same(chat.parse(callTurn), {
    content: null,
    toolCalls: [
      { id: 'call_0', type: 'function', function: { name: 'get_order_details', arguments: '{"order_id": "#W1"}' } },
    ],
    reasoning: 'Need the order.',
    error: null,
  });
  t.same(
    chat.parse('<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>'),
    { content: 'Done.', toolCalls: [], reasoning: 'x', error: null },
  );
  t.same(
    chat.parse(`<|start|>assistant<|channel|>final<|message|>From a start.`),
    { content: 'From a start.', toolCalls: [], reasoning: null, error: null },
    'a text from <|start|>',
  );

  const ids = tok.encode(callTurn);
  const r = chat.parseAssistant(ids, 'call_2_');
  t.ok(r.ok);
  if (r.ok) {
    t.equal(r.consumed, ids.length);
    t.same(r.message, {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'call_2_0', type: 'function', function: { name: 'get_order_details', arguments: '{"order_id": "#W1"}' } },
      ],
      reasoning_content: 'Need the order.',
    });
  }
  t.match(chat.parseAssistant(tok.encode('<|channel|>final<|message|>cut')), { ok: false, error: /no stop token/ });

  const bad =
    '<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>commentary to=functions.get_order_details <|constrain|>json<|message|>{"order_id": <|call|>';
  const p = chat.parse(bad);
  t.match(p.error, /arguments are not valid JSON/);
  t.equal(
    p.content,
    '<tool_call>{"name": "get_order_details", "arguments": {"order_id":}</tool_call>',
    'raw text: the call as a Hermes block, analysis left out',
  );
  const turn = parseTurn(chat, tok.encode(bad), 'call_0_');
  t.match(turn.parseError, /not valid JSON/);
  const norm = normalizeAction(turn.action, () => 'id');
  t.equal(norm.kind, 'malformed', 'the environment answers it with an Error tool message');
  if (norm.kind === 'malformed') t.match(norm.reason, /could not parse a <tool_call> block/);

  t.match(
    chat.parse('<|channel|>commentary to=functions.x <|constrain|>json<|message|>[1]<|call|>').error,
    /must be a JSON object/,
  );
  t.match(chat.parse('<|channel|>final hello<|return|>').error, /without <\|message\|>/);
  t.match(chat.parse('<|channel|>secret<|message|>x<|return|>').error, /unknown channel 'secret'/);
  t.match(
    chat.parse(
      '<|channel|>final<|message|>a<|end|><|start|>functions.x to=assistant<|channel|>commentary<|message|>b<|end|>',
    ).error,
    /a message from functions.x/,
  );
  t.match(chat.parse('<|channel|>final<|message|>a<|end|>oops').error, /expected <\|start\|>/);
  t.equal(
    chat.rawActionText(tok.encode('<|channel|>final<|message|>Hi there.<|return|>ignored')),
    'Hi there.',
    'raw text of a plain answer',
  );
  t.equal(
    chat.rawActionText(tok.encode('<|channel|>final no message<|return|>')),
    'final no message',
    'a message without <|message|> is its text',
  );
});

t.test('headers: recipient before or after the channel, constrain adjacent, tool authors', async (t) => {
  t.same(parseHarmonyHeader('<|channel|>commentary to=functions.get_weather<|constrain|>json', 'assistant'), {
    role: 'assistant',
    recipient: 'functions.get_weather',
    channel: 'commentary',
    contentType: '<|constrain|>json',
  });
  t.same(parseHarmonyHeader('assistant to=functions.get_weather<|channel|>commentary<|constrain|>json', null), {
    role: 'assistant',
    recipient: 'functions.get_weather',
    channel: 'commentary',
    contentType: '<|constrain|>json',
  });
  t.same(parseHarmonyHeader('functions.get_weather to=assistant<|channel|>commentary', null), {
    role: 'tool',
    name: 'functions.get_weather',
    recipient: 'assistant',
    channel: 'commentary',
  });
  t.throws(() => parseHarmonyHeader('<|channel|>', 'assistant'), /without a channel name/);
  t.throws(() => parseHarmonyHeader('stranger', null), /unknown role/);
  t.throws(() => parseHarmonyHeader('<|channel|>final a b c', 'assistant'), /unexpected text/);
});

t.test('token-in/token-out', async (t) => {
  const sys = base.slice(0, 1);
  const prompt = [...chat.renderTokens(sys, { tools }), ...chat.renderAppend(sys, base.slice(1, 2), { tools })];
  t.same(
    prompt,
    chat.renderTokens(base.slice(0, 2), { tools, addGenerationPrompt: true }),
    'system prefix + first observation = the prompt',
  );

  const genPrompt = chat.generationPrompt();
  // The model writes its turn in the renderer's own form: the prefix property holds.
  const canonical = tok.encode(`<|channel|>analysis<|message|>Need order details.<|end|>${callText}`);
  const parsed = chat.parseAssistant(canonical);
  t.ok(parsed.ok);
  if (!parsed.ok) return;
  const msg = { ...parsed.message, tool_calls: parsed.message.tool_calls?.map((c) => ({ ...c, id: 'c0' })) };
  const append = chat.renderAppend([...base.slice(0, 2), msg], base.slice(3), { tools });
  t.same(append, [...tok.encode(resultText), ...genPrompt], 'the result message, then <|start|>assistant');
  const history = [...base.slice(0, 2), msg, base[3]];
  t.same(
    [...prompt, ...canonical, ...append],
    chat.renderTokens(history, { tools, addGenerationPrompt: true }),
    'assembled = rendered whole',
  );

  // As gpt-oss usually writes calls (recipient after the channel), and a final answer ending in <|return|>.
  const usual = tok.encode(
    '<|channel|>analysis<|message|>Need order details.<|end|><|start|>assistant<|channel|>commentary to=functions.get_order_details <|constrain|>json<|message|>{"order_id": "#W1"}<|call|>',
  );
  const u = chat.parseAssistant(usual);
  t.ok(u.ok, 'the usual form parses too');
  const answer = tok.encode(
    '<|channel|>analysis<|message|>Tell the user.<|end|><|start|>assistant<|channel|>final<|message|>It was delivered.<|return|>',
  );
  const a = chat.parseAssistant(answer);
  t.ok(a.ok);
  if (!u.ok || !a.ok) return;
  const next: ChatMessage = { role: 'user', content: 'Thanks!' };
  const append2 = chat.renderAppend([...history, a.message], [next], { tools });
  t.same(
    append2,
    tok.encode('<|start|>user<|message|>Thanks!<|end|><|start|>assistant'),
    'each new message on its own',
  );
  const assembled = [...prompt, ...usual, ...append, ...answer, ...append2];
  const whole = chat.renderTokens([...history, a.message, next], { tools, addGenerationPrompt: true });
  t.notSame(assembled, whole, 'the sampled forms differ from the canonical rendering (documented)');
  const normalized = tok
    .decode(assembled)
    .replace(/<\|channel\|>analysis<\|message\|>[^<]*<\|end\|><\|start\|>assistant/g, '')
    .replace('<|return|>', '<|end|>')
    .replace(
      '<|start|>assistant<|channel|>commentary to=functions.get_order_details <|constrain|>json',
      '<|start|>assistant to=functions.get_order_details<|channel|>commentary <|constrain|>json',
    );
  t.equal(normalized, tok.decode(whole), 'exactly by the kept analyses, <|return|> for <|end|> and the header order');
});
