// The one tool-call reader (lib/chat/tool-call.ts) and its three readers: the built-in template's
// <|call|> sections, Hermes <tool_call> blocks, and the tau environment's actions. The rules:
// a JSON object, flat or OpenAI-nested; a non-empty string name; arguments (or parameters) an
// object or JSON text, absent/null meaning {}. Malformed calls are reasons, never throws, and an
// agent's malformed call still reaches it as an `Error: …` reason.
import t from 'tap';

import { ChatTemplate, trainChatTokenizer } from '../../lib/chat/index.js';
import { parseHermes } from '../../lib/chat/hf/hermes.js';
import { parseToolCallArguments, readChatToolCall, readToolCall, readToolCallJson } from '../../lib/chat/tool-call.js';
import { normalizeAction, parseActionText } from '../../lib/tau/action.js';

t.test('readToolCall: the accepted shapes', async (t) => {
  t.same(readToolCall({ name: 'f', arguments: { a: 1 } }), { ok: true, name: 'f', arguments: { a: 1 } });
  t.same(readToolCall({ name: 'f', arguments: '{"a":1}' }), { ok: true, name: 'f', arguments: '{"a":1}' }, 'text kept');
  t.same(readToolCall({ name: 'f', arguments: 'not json' }), { ok: true, name: 'f', arguments: 'not json' });
  t.same(readToolCall({ name: 'f' }), { ok: true, name: 'f', arguments: {} }, 'absent arguments');
  t.same(readToolCall({ name: 'f', arguments: null }), { ok: true, name: 'f', arguments: {} }, 'null arguments');
  t.same(readToolCall({ name: 'f', parameters: { b: 2 } }), { ok: true, name: 'f', arguments: { b: 2 } }, 'parameters');
  t.same(
    readToolCall({ name: 'f', arguments: { a: 1 }, parameters: { b: 2 } }),
    { ok: true, name: 'f', arguments: { a: 1 } },
    'arguments win over parameters',
  );
  t.same(
    readToolCall({ id: 'x', type: 'function', function: { name: 'g', arguments: '{}' } }),
    { ok: true, name: 'g', arguments: '{}' },
    "OpenAI's nested form",
  );
});

t.test('readToolCall: what is wrong, never a throw', async (t) => {
  for (const v of [null, undefined, 5, 'f', [1, 2], true])
    t.same(readToolCall(v), { ok: false, problem: 'name', name: undefined }, `not an object: ${JSON.stringify(v)}`);
  t.same(readToolCall({ arguments: {} }), { ok: false, problem: 'name', name: undefined });
  t.same(readToolCall({ name: '' }), { ok: false, problem: 'name', name: '' });
  t.same(readToolCall({ name: 7 }), { ok: false, problem: 'name', name: 7 });
  t.same(readToolCall({ function: { arguments: {} } }), { ok: false, problem: 'name', name: undefined });
  t.same(readToolCall({ function: [] }), { ok: false, problem: 'name', name: undefined }, 'a function array');
  for (const args of [[1], 3, false])
    t.same(readToolCall({ name: 'f', arguments: args }), { ok: false, problem: 'arguments', name: 'f', args });
  const r = readToolCallJson('{"name": ');
  t.equal(r.ok, false);
  if (!r.ok) t.equal(r.problem, 'json');
  t.same(readToolCallJson('[]'), { ok: false, problem: 'name', name: undefined });
});

t.test('parseToolCallArguments: the object a tool runs with', async (t) => {
  t.same(parseToolCallArguments({ a: 1 }), { ok: true, value: { a: 1 } });
  t.same(parseToolCallArguments('{"a":1}'), { ok: true, value: { a: 1 } });
  t.same(parseToolCallArguments('  '), { ok: true, value: {} }, 'blank text');
  t.same(parseToolCallArguments('[1]'), { ok: false, problem: 'object' });
  t.same(parseToolCallArguments('null'), { ok: false, problem: 'object' });
  const bad = parseToolCallArguments('{"a":');
  t.equal(bad.ok ? 'ok' : bad.problem, 'json');
});

t.test("readChatToolCall: the formats' calls and wording", async (t) => {
  t.same(readChatToolCall('{"name":"f","arguments":{"a":1}}', 0, 'call_0'), {
    id: 'call_0',
    type: 'function',
    function: { name: 'f', arguments: '{"a":1}' },
  });
  t.same(readChatToolCall('{"function":{"name":"f","parameters":{"a":1}}}', 2, 'id'), {
    id: 'id',
    type: 'function',
    function: { name: 'f', arguments: '{"a":1}' },
  });
  t.match(readChatToolCall('{"name": ', 3, 'x'), /^tool call 3 is not valid JSON: /);
  t.equal(readChatToolCall('"f"', 1, 'x'), 'tool call 1 must be an object with a non-empty "name"');
  t.equal(readChatToolCall('{"name":""}', 1, 'x'), 'tool call 1 must be an object with a non-empty "name"');
  t.equal(readChatToolCall('{"name":"f","arguments":[1]}', 0, 'x'), 'tool call 0 "arguments" must be an object');
});

t.test('the built-in template and Hermes read calls alike', async (t) => {
  const tok = trainChatTokenizer(['{"name": "f", "function", "parameters", "arguments": {"a": 1}} hello'], {
    vocabSize: 300,
  });
  const chat = new ChatTemplate(tok);
  const bodies = [
    '{"name": "f", "arguments": {"a": 1}}',
    '{"name": "f", "parameters": {"a": 1}}',
    '{"function": {"name": "f", "arguments": "{\\"a\\": 1}"}}',
    '{"name": "f", "arguments": null}',
    '{"name": ',
    '{"arguments": {}}',
    '{"name": "f", "arguments": [1]}',
  ];
  for (const body of bodies) {
    const viaTemplate = chat.parseAssistant([chat.call, ...tok.encode(body), chat.end]);
    const viaHermes = parseHermes(`<tool_call>${body}</tool_call>`);
    t.equal(viaTemplate.ok, viaHermes.ok, `${body}: same verdict`);
    if (viaTemplate.ok && viaHermes.ok)
      t.same(viaTemplate.message.tool_calls, viaHermes.toolCalls, `${body}: same call`);
    if (!viaTemplate.ok && !viaHermes.ok) t.equal(viaTemplate.error, viaHermes.error, `${body}: same reason`);
  }
});

t.test("the environment's actions: malformed calls become reasons for the agent", async (t) => {
  let n = 0;
  const id = (): string => `c${n++}`;
  const tool = normalizeAction('<tool_call>{"name": "f", "parameters": {"a": 1}}</tool_call>', id);
  t.equal(tool.kind, 'tool');
  if (tool.kind === 'tool') t.same(tool.call.arguments, { a: 1 });
  const cases: [unknown, RegExp][] = [
    ['<tool_call>{"name": </tool_call>', /^could not parse a <tool_call> block as JSON \(/],
    ['<tool_call>{"arguments": {}}</tool_call>', /^a <tool_call> block has no tool name$/],
    ['<tool_call>{"name": ""}</tool_call>', /^a <tool_call> block has no tool name$/],
    ['<tool_call>{"name": "f", "arguments": [1]}</tool_call>', /^the arguments of 'f' must be a JSON object$/],
    ['<tool_call>{"name": "f", "arguments": "{\\"a\\":"}</tool_call>', /^could not parse the arguments of 'f' as JSON/],
    ['<tool_call>{"name": "f", "arguments": "[1]"}</tool_call>', /^the arguments of 'f' must be a JSON object$/],
    [{ tool_calls: [{ function: { arguments: '{}' } }] }, /^a tool call has no tool name$/],
    [{ tool_calls: [{ function: { name: 'f', arguments: '{' } }] }, /^could not parse the arguments of 'f' as JSON/],
    [{ tool_calls: [{ name: 'f', arguments: 5 }] }, /^the arguments of 'f' must be a JSON object$/],
  ];
  for (const [action, reason] of cases) {
    const norm = normalizeAction(action, id);
    t.equal(norm.kind, 'malformed', JSON.stringify(action));
    if (norm.kind === 'malformed') t.match(norm.reason, reason, JSON.stringify(action));
  }
  t.same(parseActionText('{"name": "f", "arguments": {"a": 1}}').toolCalls, [{ name: 'f', arguments: { a: 1 } }]);
  t.same(parseActionText('{"name": ""}'), { content: '{"name": ""}', toolCalls: [] }, 'no name: plain text');
  t.same(parseActionText('{"name": '), { content: '{"name": ', toolCalls: [] }, 'not JSON: plain text');
});
