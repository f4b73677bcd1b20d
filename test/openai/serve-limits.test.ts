/**
 * `sinkflex serve` under large requests: long messages (no call-stack overflow anywhere on the
 * way), prompts that cannot fit refused before tokenizing, bodies over the size limit answered
 * with their 413 (also when the client uploads everything before reading).
 */
import { connect } from 'node:net';

import t from 'tap';

import { ChatTemplate, Tokenizer, type ChatMessage } from '../../lib/chat/index.js';
import type { AnyEnv } from '../../lib/gym/index.js';
import { startChatServer } from '../../lib/openai/index.js';
import { evaluatePolicy } from '../../lib/rollout/index.js';
import { mulberry32 } from '../../lib/util/random.js';
import { ScriptedModelPolicy, template, tinyPolicy } from './fixtures/setup.js';

const tpl = template();
const tok = tpl.tokenizer;
const tools = [
  {
    type: 'function',
    function: {
      name: 'find_user_id_by_email',
      description: 'find a user',
      parameters: { type: 'object', properties: { email: { type: 'string' } } },
    },
  },
];

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) as Record<string, unknown> };
}

/** A section as the template lays it out, built with concat (never spreads). */
function section(role: string, content: string): number[] {
  return [tpl.start].concat(tok.encode(role), [tpl.message], tok.encode(content), [tpl.end]);
}

t.test('messages of several hundred KB render and are served (no call-stack overflow)', async (t) => {
  const big = 'I would like to return the lamp, please. '.repeat(8000); // 328 KB
  t.ok(big.length > 300000);
  const messages: ChatMessage[] = [
    { role: 'system', content: 'sys' },
    { role: 'user', content: big },
  ];
  const rendered = tpl.render(messages, { tools, addGenerationPrompt: true });
  const expected = section('system', 'sys').concat(
    section('tools', JSON.stringify(tools)),
    section('user', big),
    [tpl.start],
    tok.encode('assistant'),
  );
  t.ok(rendered.length > 150000, `${rendered.length} tokens`);
  t.same(rendered, expected, 'render: the sections concatenated');
  const long: ChatMessage = {
    role: 'assistant',
    content: big,
    tool_calls: [{ type: 'function', function: { name: 'f', arguments: JSON.stringify({ note: big }) } }],
  };
  const a = tpl.renderMessage(long);
  t.ok(a.length > 300000, 'a long assistant message renders');
  t.same(tpl.parseAssistant(a.slice(tpl.generationPrompt().length)).ok, true, 'and parses back');

  const policy = new ScriptedModelPolicy(tpl, [{ role: 'assistant', content: 'Sure.' }]);
  const server = await startChatServer({ policy, chat: tpl, port: 0 });
  t.teardown(() => server.dispose());
  const url = `${server.baseURL}/chat/completions`;
  const r1 = await post(url, { model: 'sinkflex', messages, tools, seed: 1, session_id: 's' });
  t.equal(r1.status, 200, `a ${big.length}-character message is served`);
  t.same(policy.contexts[0], expected, 'the prompt is the rendering');
  // a kept conversation continued with a long tool result
  const next = [...messages, { role: 'assistant', content: 'Sure.' }, { role: 'user', content: big }];
  const r2 = await post(url, { model: 'sinkflex', messages: next, tools, seed: 1, session_id: 's' });
  t.equal(r2.status, 200, 'a continued conversation with a long message is served');
  t.equal(server.engine.stats.continued, 1, 'continued');
  t.equal(
    policy.contexts[1].length,
    expected.length +
      tpl.renderAssistantBody({ role: 'assistant', content: 'Sure.' }).length +
      section('user', big).length +
      tpl.generationPrompt().length,
  );
});

t.test('an agent-loop episode with observations of several hundred KB', async (t) => {
  const big = 'order #W0000001 shipped to 12 Main St; '.repeat(9000); // 351 KB
  const call = {
    role: 'assistant' as const,
    content: null,
    tool_calls: [
      { type: 'function' as const, function: { name: 'get_order_details', arguments: '{"order_id":"#W0000001"}' } },
    ],
  };
  let steps = 0;
  const env = {
    reset: () => [[{ role: 'user', content: big }], { tools, systemPrompt: 'sys' }],
    step: () =>
      ++steps === 1
        ? [[{ role: 'tool', content: big, tool_call_id: 'c' }], 0, false, false, {}]
        : [[], 1, true, false, { terminationReason: 'agent_stop' }],
    close: () => undefined,
  } as unknown as AnyEnv;
  const policy = new ScriptedModelPolicy(tpl, [call, { role: 'assistant', content: 'Done.' }]);
  const r = await evaluatePolicy({
    policy,
    chat: tpl,
    env: () => env,
    taskIds: ['t0'],
    limits: { maxTurns: 4, maxTokensPerTurn: 64, maxContextTokens: 1 << 20 },
    episodeRetries: 0,
  });
  const e = r.episodes[0];
  t.equal(e.aborted, false, `not aborted (${e.error})`);
  t.equal(e.reward, 1);
  t.same(
    e.promptIds,
    section('system', 'sys').concat(
      section('tools', JSON.stringify(tools)),
      section('user', big),
      tpl.generationPrompt(),
    ),
    'the first prompt',
  );
  t.ok(e.responseIds.length > 150000, `the long tool result is in the response (${e.responseIds.length} tokens)`);
});

t.test('minTokens is a lower bound of the rendering, from lengths alone', async (t) => {
  const rand = mulberry32(7);
  const pieces = [
    'a',
    'order',
    ' #W123',
    'é',
    '日本',
    '😀',
    '\ud800',
    '  ',
    '\n',
    '{"k": [1, 2]}',
    tok.specialTokens[2],
  ];
  const text = (): string =>
    Array.from({ length: Math.floor(rand() * 40) }, () => pieces[Math.floor(rand() * pieces.length)]).join('');
  let longest = 0;
  for (let id = tok.byteBase; id < tok.vocabSize; id++) longest = Math.max(longest, tok.tokenBytes(id).length);
  t.equal(tok.maxTokenBytes, longest, `maxTokenBytes: the longest non-special token (${longest} bytes)`);
  for (let trial = 0; trial < 200; trial++) {
    const messages: ChatMessage[] = Array.from({ length: 1 + Math.floor(rand() * 5) }, (): ChatMessage => {
      const k = Math.floor(rand() * 4);
      if (k === 0) return { role: 'system', content: text() };
      if (k === 1) return { role: 'user', content: text() };
      if (k === 2) return { role: 'tool', content: text() };
      // arguments with spaces re-serialise shorter than given
      return {
        role: 'assistant',
        content: rand() < 0.5 ? null : text(),
        tool_calls:
          rand() < 0.5
            ? []
            : [{ type: 'function', function: { name: text() || 'f', arguments: '{ "a" :   1 ,  "b" : "x" }' } }],
      };
    });
    const opts = { tools: rand() < 0.5 ? tools : [], addGenerationPrompt: rand() < 0.5 };
    const exact = tpl.render(messages, opts).length;
    const bound = tpl.minTokens(messages, opts);
    if (bound > exact) t.fail(`bound ${bound} > ${exact} for ${JSON.stringify(messages)}`);
  }
  const huge = 'word '.repeat(200000);
  t.ok(
    tpl.minTokens([{ role: 'user', content: huge }]) >= huge.length / tok.maxTokenBytes,
    'a long text gives a large bound',
  );
});

t.test('a prompt that cannot fit is refused before it is tokenized', async (t) => {
  // a template whose tokenizer counts what it encodes
  const counting = Tokenizer.fromJSON(tok.toJSON());
  let encoded = 0;
  const encode = counting.encode.bind(counting);
  counting.encode = (s: string) => {
    encoded += s.length;
    return encode(s);
  };
  const policy = tinyPolicy(3); // context 4096
  const server = await startChatServer({ policy, chat: new ChatTemplate(counting), port: 0 });
  t.teardown(async () => {
    await server.dispose();
    policy.dispose();
  });
  const url = `${server.baseURL}/chat/completions`;
  const huge = 'please refund order W1 '.repeat(1300000); // 30 MB
  const t0 = performance.now();
  const pending = post(url, { model: 'sinkflex', messages: [{ role: 'user', content: huge }], max_tokens: 4 });
  const h0 = performance.now();
  const health = await fetch(`${server.baseURL.replace(/\/v1$/, '')}/health`);
  const healthMs = performance.now() - h0;
  const r = await pending;
  const ms = performance.now() - t0;
  t.equal(health.status, 200);
  t.equal(r.status, 400);
  const err = r.json.error as { code: number; type: string; param: string; message: string };
  t.equal(err.code, 400);
  t.equal(err.type, 'BadRequestError');
  t.equal(err.param, 'messages');
  t.match(err.message, /at least \d+ tokens .*context is 4096/);
  t.ok(encoded < 1000, `nothing of the prompt was tokenized (${encoded} characters encoded)`);
  t.comment(`30 MB prompt refused in ${ms.toFixed(0)} ms; /health answered in ${healthMs.toFixed(0)} ms meanwhile`);
  // a kept conversation continued with a huge message: refused the same way
  const base = [{ role: 'user', content: 'hi' }];
  const first = await post(url, {
    model: 'sinkflex',
    messages: base,
    max_tokens: 3,
    temperature: 0,
    seed: 2,
    session_id: 'k',
  });
  t.equal(first.status, 200);
  const reply = ((first.json.choices as { message: { content: string } }[])[0].message.content ?? '') || 'x';
  encoded = 0;
  const cont = await post(url, {
    model: 'sinkflex',
    messages: [...base, { role: 'assistant', content: reply }, { role: 'tool', content: huge }],
    seed: 2,
    session_id: 'k',
  });
  t.equal(cont.status, 400);
  t.match(cont.json.error, { code: 400, message: /context/ });
  t.ok(encoded < 1000, `continuation: nothing of the message was tokenized (${encoded})`);
  // a prompt just over the context is still measured exactly
  const over = await post(url, { model: 'sinkflex', messages: [{ role: 'user', content: 'a b '.repeat(3000) }] });
  t.equal(over.status, 400);
  t.match((over.json.error as { message: string }).message, /needs \d+ tokens; the model's context is 4096/);
});

/** Sends a raw HTTP request with `body`, writing all of it before reading; resolves with what came back. */
function rawUpload(
  port: number,
  body: Buffer,
  extraHeaders = '',
): Promise<{ text: string; error: string | null; wrote: boolean }> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let text = '';
    let error: string | null = null;
    let wrote = false;
    s.on('data', (d) => (text += d.toString('latin1')));
    s.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    s.on('close', () => resolve({ text, error, wrote }));
    s.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n${extraHeaders}\r\n`,
    );
    s.write(body, () => (wrote = true));
  });
}

t.test('a body over the size limit gets its 413, not a connection reset', async (t) => {
  const policy = new ScriptedModelPolicy(tpl, [{ role: 'assistant', content: 'ok' }]);
  const server = await startChatServer({ policy, chat: tpl, port: 0, maxBodyBytes: 100000 });
  t.teardown(() => server.dispose());
  const url = `${server.baseURL}/chat/completions`;
  const body = JSON.stringify({ model: 'sinkflex', messages: [{ role: 'user', content: 'x'.repeat(3000000) }] });
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  t.equal(r.status, 413, 'fetch reads the 413');
  t.match(((await r.json()) as { error: unknown }).error, { code: 413, message: /larger than 100000 bytes/ });
  for (const headers of ['', 'Connection: close\r\n']) {
    const raw = await rawUpload(server.port, Buffer.from(body), headers);
    t.match(
      raw.text,
      /^HTTP\/1\.1 413 /,
      `a client that uploads everything first gets the 413${headers ? ' (Connection: close)' : ''} (error: ${raw.error})`,
    );
    t.match(raw.text, /"code":413/);
    t.ok(raw.wrote, 'its whole upload was accepted');
  }
  const ok = await post(url, { model: 'sinkflex', messages: [{ role: 'user', content: 'hi' }] });
  t.equal(ok.status, 200, 'the server still serves');
});
