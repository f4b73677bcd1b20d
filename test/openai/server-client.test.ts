import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import t from 'tap';

import { OpenAIChatClient, OpenAIError, startChatServer, type ChatServer } from '../../lib/openai/index.js';
import { ScriptedModelPolicy, template, tinyPolicy } from './fixtures/setup.js';

const tpl = template();
const tools = [
  {
    type: 'function',
    function: {
      name: 'find_user_id_by_email',
      description: 'find a user',
      parameters: { type: 'object', properties: { email: { type: 'string' } }, required: ['email'] },
    },
  },
];

async function post(
  url: string,
  body: unknown,
): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // SSE
  }
  return { status: res.status, json, text };
}

t.test(
  'the built-in policy behind the server: models, completions, seeds, log-probs, token ids, validation',
  async (t) => {
    const policy = tinyPolicy(2);
    const server = await startChatServer({ policy, chat: tpl, port: 0, modelName: 'tiny' });
    t.teardown(async () => {
      await server.dispose();
      policy.dispose();
    });
    const client = new OpenAIChatClient({ baseURL: server.baseURL, model: 'tiny', retries: 0 });
    const models = await client.listModels();
    t.same(
      models.map((m) => [m.id, m.owned_by]),
      [['tiny', 'sinkflex']],
      '/v1/models lists the served model',
    );

    const messages = [
      { role: 'system', content: 'You help retail customers.' },
      { role: 'user', content: 'Hello, I want to return an item.' },
    ];
    const req = { messages, tools, max_tokens: 20, seed: 5, temperature: 1, logprobs: true, return_token_ids: true };
    const a = await client.createChatCompletion(req);
    const b = await client.createChatCompletion(req);
    const ca = a.response.choices[0];
    t.same(ca.token_ids, b.response.choices[0].token_ids, 'same seed, same tokens');
    t.ok(ca.token_ids && ca.token_ids.length > 0 && ca.token_ids.length <= 20, 'at most max_tokens tokens');
    const lp = ca.logprobs?.content ?? [];
    t.equal(lp.length, ca.token_ids?.length, 'one log-prob per token');
    t.ok(
      lp.every((x) => typeof x.logprob === 'number' && (x.logprob as number) <= 0),
      'log-probs <= 0',
    );
    t.same(
      a.response.prompt_token_ids,
      tpl.render(messages as never, { tools, addGenerationPrompt: true }),
      'the prompt is the template rendering',
    );
    t.equal(a.response.usage?.completion_tokens, ca.token_ids?.length);
    t.ok(['stop', 'length', 'tool_calls'].includes(ca.finish_reason ?? ''), 'a finish reason');
    // The same request through the model directly gives the same tokens (seeded session).
    const s = policy.createSession({ seed: 5 });
    s.append(tpl.render(messages as never, { tools, addGenerationPrompt: true }));
    const direct = await s.sample({ maxTokens: 20, temperature: 1, topP: 1, stop: tpl.stopTokens });
    s.dispose();
    t.same(Array.from(direct.tokens), ca.token_ids, 'the server samples what the model samples in process');
    const other = await client.createChatCompletion({ ...req, seed: 6 });
    t.notSame(other.response.choices[0].token_ids, ca.token_ids, 'another seed, other tokens');

    // validation: 400 with an OpenAI-style error naming the parameter
    const url = `${server.baseURL}/chat/completions`;
    const cases: [unknown, number, string | null][] = [
      ['{not json', 400, null],
      [{ model: 'tiny' }, 400, 'messages'],
      [{ model: 'tiny', messages: [{ role: 'wizard', content: 'x' }] }, 400, 'messages[0].role'],
      [{ model: 'tiny', messages: [{ role: 'user', content: 3 }] }, 400, 'messages[0].content'],
      [{ model: 'tiny', messages, temperature: 7 }, 400, 'temperature'],
      [{ model: 'tiny', messages, max_tokens: 0 }, 400, 'max_tokens'],
      [{ model: 'tiny', messages, n: 2 }, 400, 'n'],
      [{ model: 'tiny', messages, stop: ['x'] }, 400, 'stop'],
      [{ model: 'tiny', messages, tools: [{ type: 'function' }] }, 400, 'tools[0]'],
      [{ model: 'tiny', messages, tool_choice: 'required' }, 400, 'tool_choice'],
      [{ model: 'tiny', messages, seed: -1 }, 400, 'seed'],
      [{ model: 'tiny', messages: [{ role: 'assistant', content: null }] }, 400, 'messages[0].content'],
      [{ model: 'other', messages }, 404, 'model'],
    ];
    for (const [body, status, param] of cases) {
      const r = await post(url, body);
      t.equal(r.status, status, `${JSON.stringify(body).slice(0, 60)} → ${status}`);
      const err = r.json.error as { message?: string; type?: string; param?: string | null };
      t.ok(err && typeof err.message === 'string' && typeof err.type === 'string', 'OpenAI-style error body');
      t.equal(err.param, param, 'names the parameter');
    }
    t.equal((await fetch(`${server.baseURL}/nothing`)).status, 404, 'unknown route');
    t.equal((await fetch(url)).status, 405, 'GET on completions');
    const tooLong = await post(url, { model: 'tiny', messages: [{ role: 'user', content: 'x'.repeat(20000) }] });
    t.equal(tooLong.status, 400, 'a prompt longer than the context');
    t.match(tooLong.json.error, { code: 400, type: 'BadRequestError', message: /context/ });
    const bad = await client.createChatCompletion({ messages: [] }).catch((e: unknown) => e);
    t.ok(bad instanceof OpenAIError && bad.status === 400 && bad.attempts === 1, 'a 400 is not retried');
  },
);

t.test('tool calls, streaming, sessions and the API key', async (t) => {
  const call = {
    role: 'assistant' as const,
    content: null,
    tool_calls: [
      {
        id: 'x',
        type: 'function' as const,
        function: { name: 'find_user_id_by_email', arguments: '{"email":"a@b.c"}' },
      },
    ],
  };
  const policy = new ScriptedModelPolicy(tpl, [call, { role: 'assistant', content: 'Done.' }]);
  const server: ChatServer = await startChatServer({ policy, chat: tpl, port: 0, apiKey: 'k1' });
  t.teardown(() => server.dispose());
  const url = `${server.baseURL}/chat/completions`;
  t.equal(
    (await post(url, { model: 'sinkflex', messages: [{ role: 'user', content: 'hi' }] })).status,
    401,
    'no key: 401',
  );
  const client = new OpenAIChatClient({ baseURL: server.baseURL, model: 'sinkflex', apiKey: 'k1', retries: 0 });
  const base = [
    { role: 'system', content: 'sys' },
    { role: 'user', content: 'my email is a@b.c' },
  ];
  const r1 = await client.createChatCompletion({ messages: base, tools, seed: 1, session_id: 's1' });
  const c1 = r1.response.choices[0];
  t.equal(c1.finish_reason, 'tool_calls');
  t.equal(c1.message.content, null);
  t.same(
    c1.message.tool_calls?.map((c) => [c.type, c.function?.name, c.function?.arguments]),
    [['function', 'find_user_id_by_email', '{"email":"a@b.c"}']],
    'structured tool call',
  );
  const id = c1.message.tool_calls?.[0].id;
  const next = [
    ...base,
    { role: 'assistant', content: null, tool_calls: c1.message.tool_calls },
    { role: 'tool', tool_call_id: id, content: 'user_1' },
  ];
  const r2 = await client.createChatCompletion({ messages: next, tools, seed: 1, session_id: 's1' });
  t.equal(r2.response.choices[0].message.content, 'Done.');
  t.equal(server.engine.stats.continued, 1, 'the second request continued the kept session');
  const expected = [
    ...tpl.render(base as never, { tools, addGenerationPrompt: true }),
    ...tpl.renderAssistantBody(call),
    ...tpl.renderMessage({ role: 'tool', content: 'user_1' }),
    ...tpl.generationPrompt(),
  ];
  t.same(policy.contexts[1], expected, 'the continued context: the sampled tokens verbatim, then the new messages');
  // a different seed starts afresh
  await client.createChatCompletion({ messages: next, tools, seed: 2, session_id: 's1' });
  t.equal(server.engine.stats.continued, 1, 'a changed seed does not continue');

  const sse = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer k1' },
    body: JSON.stringify({
      model: 'sinkflex',
      messages: base,
      tools,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  t.match(sse.headers.get('content-type') ?? '', /text\/event-stream/);
  const events = (await sse.text())
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  t.equal(events[events.length - 1], '[DONE]', 'ends with [DONE]');
  const chunks = events.slice(0, -1).map(
    (e) =>
      JSON.parse(e) as {
        choices: { delta: Record<string, unknown>; finish_reason: string | null }[];
        usage?: unknown;
      },
  );
  t.equal(chunks[0].choices[0].delta.role, 'assistant');
  const text = chunks.flatMap((c) => c.choices.map((x) => (x.delta.content as string) ?? '')).join('');
  const finish = chunks.flatMap((c) => c.choices.map((x) => x.finish_reason)).filter((x) => x !== null);
  t.equal(text, 'Done.', 'streamed content');
  t.same(finish, ['stop']);
  t.ok(chunks[chunks.length - 1].usage, 'usage chunk');
  const sse2 = await (
    await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer k1' },
      body: JSON.stringify({ model: 'sinkflex', messages: base, tools, stream: true }),
    })
  ).text();
  t.match(
    sse2,
    /"tool_calls":\[\{"index":0,"id":"[^"]+","type":"function","function":\{"name":"find_user_id_by_email"/,
    'streamed tool call',
  );
});

/** A local server that misbehaves on purpose. */
async function brokenServer(
  handler: (n: number, res: import('node:http').ServerResponse) => void,
): Promise<{ url: string; calls: () => number; close: () => Promise<void> }> {
  let n = 0;
  const s: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(n++, res));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/v1`,
    calls: () => n,
    close: () =>
      new Promise<void>((r) => {
        s.close(() => r());
        s.closeAllConnections();
      }),
  };
}

const ok = JSON.stringify({
  choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }],
});

t.test('a server that is down, slow, flaky or returns garbage', async (t) => {
  const opts = { model: 'm', backoffMs: 1, maxBackoffMs: 5 };
  const req = { messages: [{ role: 'user', content: 'hi' }] };
  const dead = await brokenServer(() => undefined);
  const deadURL = dead.url;
  await dead.close();
  const e1 = await new OpenAIChatClient({ ...opts, baseURL: deadURL, retries: 2 })
    .createChatCompletion(req)
    .catch((e: unknown) => e);
  t.ok(e1 instanceof OpenAIError && e1.kind === 'network' && e1.attempts === 3, 'down: network error after 3 calls');

  const slow = await brokenServer(() => undefined);
  t.teardown(slow.close);
  const t0 = Date.now();
  const e2 = await new OpenAIChatClient({ ...opts, baseURL: slow.url, retries: 1, timeoutMs: 80 })
    .createChatCompletion(req)
    .catch((e: unknown) => e);
  t.ok(e2 instanceof OpenAIError && e2.kind === 'timeout', 'slow: timeout');
  t.ok(Date.now() - t0 < 3000, 'gives up in time');
  t.equal(slow.calls(), 2, 'one retry');

  for (const [what, body] of [
    ['not JSON', 'garbage<html>'],
    ['no choices', '{"choices":[]}'],
    ['bad content', '{"choices":[{"message":{"content":5}}]}'],
    ['bad token ids', '{"choices":[{"message":{"content":"x"},"token_ids":["a"]}]}'],
  ]) {
    const g = await brokenServer((_, res) => res.end(body));
    const e = await new OpenAIChatClient({ ...opts, baseURL: g.url, retries: 1 })
      .createChatCompletion(req)
      .catch((x: unknown) => x);
    t.ok(
      e instanceof OpenAIError && e.kind === 'invalid_response' && e.attempts === 2,
      `garbage (${what}) is retried then reported`,
    );
    await g.close();
  }

  const flaky = await brokenServer((n, res) => {
    if (n < 2) {
      res.writeHead(n === 0 ? 503 : 429, n === 1 ? { 'retry-after': '0.01' } : {});
      res.end('busy');
    } else res.end(ok);
  });
  t.teardown(flaky.close);
  const r = await new OpenAIChatClient({ ...opts, baseURL: flaky.url, retries: 3 }).createChatCompletion(req);
  t.equal(r.attempts, 3, 'flaky: succeeds on the third call');

  const good = await brokenServer((_, res) => res.end(ok));
  t.teardown(good.close);
  const multi = new OpenAIChatClient({ ...opts, baseURL: [deadURL, good.url], retries: 2, routing: 'round-robin' });
  for (let i = 0; i < 4; i++)
    t.equal(
      (await multi.createChatCompletion(req, { affinity: `c${i}` })).baseURL,
      good.url,
      'a dead base URL is skipped',
    );
  const st = multi.stats();
  t.ok(st[0].failures >= 1 && st[1].calls === 4, 'counted per base URL');
});

t.test('concurrency limit and routing', async (t) => {
  let inFlight = 0;
  let peak = 0;
  const mk = () =>
    brokenServer((_, res) => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      setTimeout(() => {
        inFlight--;
        res.end(ok);
      }, 20);
    });
  const a = await mk();
  const b = await mk();
  t.teardown(a.close);
  t.teardown(b.close);
  const client = new OpenAIChatClient({ model: 'm', baseURL: [a.url, b.url], concurrency: 3, routing: 'least-busy' });
  const rs = await Promise.all(Array.from({ length: 12 }, () => client.createChatCompletion({ messages: [] })));
  t.ok(peak <= 3, `at most 3 in flight (peak ${peak})`);
  t.ok(a.calls() > 0 && b.calls() > 0, 'both base URLs used');
  t.equal(rs.length, 12);
  const rr = new OpenAIChatClient({ model: 'm', baseURL: [a.url, b.url], routing: 'round-robin' });
  const seen = [];
  for (let i = 0; i < 4; i++) seen.push((await rr.createChatCompletion({ messages: [] })).baseURL);
  t.same(seen, [a.url, b.url, a.url, b.url], 'round-robin alternates');
  const sticky = [];
  for (let i = 0; i < 3; i++)
    sticky.push((await rr.createChatCompletion({ messages: [] }, { affinity: 'conv' })).baseURL);
  t.equal(new Set(sticky).size, 1, 'a conversation sticks to one base URL');
  t.throws(() => new OpenAIChatClient({ model: '' }), TypeError);
  t.throws(() => new OpenAIChatClient({ model: 'm', baseURL: 'ftp://x' }), TypeError);
  t.throws(() => new OpenAIChatClient({ model: 'm', baseURL: [] }), RangeError);
  t.throws(() => new OpenAIChatClient({ model: 'm', concurrency: 0 }), RangeError);
  t.throws(() => new OpenAIChatClient({ model: 'm', routing: 'random' as never }), RangeError);
});
