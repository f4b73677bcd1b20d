import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

import t from 'tap';

import { ChatTemplate, trainChatTokenizer } from '../../lib/chat/index.js';
import { OpenAIChatPolicy } from '../../lib/openai/index.js';
import { readAssistantReply, contentText } from '../../lib/openai/tool-calls.js';
import { ChatTokenPolicy, evaluatePolicy, trajectoriesToJsonl } from '../../lib/rollout/index.js';
import { TauEnv } from '../../lib/gym/index.js';
import { retailWorld } from './fixtures/setup.js';

t.test('reading replies: structured calls, Hermes text, malformed calls', async (t) => {
  const s = readAssistantReply({
    content: null,
    tool_calls: [{ id: 'c9', type: 'function', function: { name: 'get_user_details', arguments: '{"user_id":"u1"}' } }],
  });
  t.same(s.message, {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'c9', type: 'function', function: { name: 'get_user_details', arguments: '{"user_id":"u1"}' } }],
  });
  t.equal(s.rawText, undefined);
  const h = readAssistantReply(
    { content: '<tool_call>\n{"name": "get_user_details", "arguments": {"user_id": "u1"}}\n</tool_call>' },
    'k_',
  );
  t.same(
    h.message.tool_calls,
    [{ id: 'k_0', type: 'function', function: { name: 'get_user_details', arguments: '{"user_id":"u1"}' } }],
    'Hermes call parsed',
  );
  t.equal(h.message.content, null);
  const mixed = readAssistantReply({ content: 'Let me check. <tool_call>{"name":"a","arguments":{}}</tool_call>' });
  t.equal(mixed.message.content, 'Let me check.');
  t.equal(mixed.message.tool_calls?.length, 1);
  const bare = readAssistantReply({ content: '{"name": "list_all_product_types", "arguments": {}}' });
  t.equal(bare.message.tool_calls?.[0].function.name, 'list_all_product_types', 'a bare JSON call');
  const broken = readAssistantReply({ content: '<tool_call>{"name": "x", "arguments": {</tool_call>' });
  t.equal(broken.rawText, '<tool_call>{"name": "x", "arguments": {</tool_call>', 'a broken block stays raw text');
  t.match(broken.problem ?? '', /JSON/);
  const noName = readAssistantReply({ content: 'hm', tool_calls: [{ function: { arguments: '{}' } }] });
  t.match(noName.rawText ?? '', /^hm<tool_call>\{"name":null/, 'a structured call without a name goes raw');
  t.same(
    readAssistantReply({
      content: [
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ],
    }).message,
    { role: 'assistant', content: 'ab' },
    'text parts',
  );
  t.same(readAssistantReply({}).message, { role: 'assistant', content: '' });
  t.equal(contentText(undefined), null);
  const objArgs = readAssistantReply({ tool_calls: [{ function: { name: 'f', arguments: { a: 1 } } }] });
  t.same(objArgs.message.tool_calls?.[0], {
    id: 'call_0',
    type: 'function',
    function: { name: 'f', arguments: '{"a":1}' },
  });
});

t.test('a malformed call goes back to the model as an error message, end to end', async (t) => {
  const world = retailWorld();
  const bodies: { messages: { role: string; content: string | null; tool_calls?: unknown[] }[]; seed?: number }[] = [];
  const replies = [
    { content: '<tool_call>{"name": "find_user_id_by_email", "arguments": {"email": </tool_call>' },
    {
      content: null,
      tool_calls: [{ id: 'z1', type: 'function', function: { name: 'find_user_id_by_email', arguments: 'not json' } }],
    },
    {
      content: '<tool_call>{"name": "find_user_id_by_email", "arguments": {"email": "nobody@example.com"}}</tool_call>',
    },
    { content: 'Sorry, I cannot help. ###STOP###' },
  ];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      bodies.push(JSON.parse(text) as (typeof bodies)[number]);
      const r = replies[Math.min(bodies.length - 1, replies.length - 1)];
      res.end(
        JSON.stringify({
          choices: [{ index: 0, message: { role: 'assistant', ...r }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 10 },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  const template = new ChatTemplate(trainChatTokenizer(' ', { vocabSize: 262 }));
  const chat = new OpenAIChatPolicy({ client: { baseURL: url, model: 'm', retries: 0 }, seedMode: 'turn' });
  const result = await evaluatePolicy({
    policy: new ChatTokenPolicy(chat, template),
    chat: template,
    env: () => new TauEnv({ world }),
    taskIds: [world.taskIds[0]],
    seed: 3,
    limits: { maxTurns: 4, maxTokensPerTurn: 4096, maxContextTokens: 1 << 20 },
  });
  t.equal(result.aborted, 0, 'not aborted');
  t.ok(bodies.length >= 2, `${bodies.length} calls`);
  t.ok(
    Array.isArray((bodies[0] as unknown as { tools: unknown[] }).tools) &&
      (bodies[0] as unknown as { tools: unknown[] }).tools.length > 5,
    'tools sent in OpenAI function format',
  );
  t.equal(bodies[0].messages[0].role, 'system');
  const second = bodies[1].messages;
  const lastTool = second[second.length - 1];
  t.equal(lastTool.role, 'tool', 'the environment answered the broken call with a tool message');
  t.match(
    lastTool.content ?? '',
    /^Error: could not parse a <tool_call> block as JSON/,
    'an Error: message the model sees',
  );
  t.equal(second[second.length - 2].content, replies[0].content, 'the model sees its own words back');
  const third = bodies[2].messages;
  t.match(
    third[third.length - 1].content ?? '',
    /^Error: could not parse the arguments/,
    'bad structured arguments: an error too',
  );
  const fourth = bodies[3].messages;
  t.equal(fourth[fourth.length - 2].role, 'assistant');
  t.ok((fourth[fourth.length - 2].tool_calls ?? []).length === 1, 'a Hermes call becomes a structured call');
  t.notMatch(fourth[fourth.length - 1].content ?? '', /^Error: could not parse/, 'and runs');
  t.notSame(bodies[0].seed, bodies[1].seed, 'per-turn seeds');
  const ep = result.episodes[0];
  const line = JSON.parse(
    trajectoriesToJsonl(result.episodes, { turnLog: (r) => chat.takeTurnLog(r.taskId, r.seed) }).trim(),
  ) as { turns: { problem?: string }[]; messages: unknown[] };
  t.match(line.turns[0].problem ?? '', /JSON/, 'the turn log records the problem');
  t.equal(line.messages.length, ep.messages.length);
  t.equal(trajectoriesToJsonl(result.episodes, { minReward: 2 }), '', 'rejection sampling filter');
});

t.test('policy options are checked', async (t) => {
  t.throws(() => new OpenAIChatPolicy(null as never), TypeError);
  t.throws(() => new OpenAIChatPolicy({ client: { model: 'm' }, seedMode: 'x' as never }), RangeError);
  t.throws(() => new OpenAIChatPolicy({ client: { model: 'm' }, tokenIds: 'x' as never }), RangeError);
  t.throws(() => new OpenAIChatPolicy({ client: { model: 'm' }, maxTokens: 0 }), RangeError);
});
