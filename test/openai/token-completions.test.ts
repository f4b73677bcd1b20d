import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import t from 'tap';

import {
  CompletionFormatError,
  OpenAIChatClient,
  OpenAIError,
  OpenAITokenCompletions,
  readTokenCompletion,
  type CompletionResponse,
} from '../../lib/openai/index.js';
import { CompletionTokenPolicy } from '../../lib/rollout/index.js';

type Handler = (body: Record<string, unknown>, req: IncomingMessage, res: ServerResponse) => void;

/** A fake completions server answering with `handler`; records the bodies. */
async function fakeServer(
  handler: Handler,
): Promise<{ url: string; bodies: Record<string, unknown>[]; server: Server }> {
  const bodies: Record<string, unknown>[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      bodies.push({ ...body, path: req.url });
      handler(body, req, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, bodies, server };
}

const json = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

/** vLLM's answer for `tokens` (ids) and `lps`. */
function vllm(
  tokens: number[],
  lps: number[],
  opts: { asIds?: boolean; ids?: boolean; finish?: string } = {},
): CompletionResponse {
  return {
    choices: [
      {
        index: 0,
        text: 'x',
        logprobs: {
          tokens: tokens.map((x) => (opts.asIds === false ? `t${x}` : `token_id:${x}`)),
          token_logprobs: lps,
          text_offset: tokens.map(() => 0),
          top_logprobs: [],
        },
        finish_reason: opts.finish ?? 'stop',
        ...(opts.ids ? { token_ids: tokens } : {}),
      },
    ],
  };
}

t.test('readTokenCompletion: token_id:<n> parsed back into ids; what is missing is named', async (t) => {
  t.same(readTokenCompletion(vllm([5, 7, 2], [-0.5, -1, -0.25]), 'srv'), {
    tokens: [5, 7, 2],
    logProbs: [-0.5, -1, -0.25],
    finishReason: 'stop',
  });
  t.same(
    readTokenCompletion(vllm([5, 7], [-0.5, -1], { asIds: false, ids: true, finish: 'length' }), 'srv').tokens,
    [5, 7],
    'token_ids (return_token_ids) when the tokens are text',
  );
  t.same(readTokenCompletion(vllm([5, 7], [-0.5, -1], { ids: true }), 'srv').tokens, [5, 7], 'both, agreeing');
  t.same(readTokenCompletion(vllm([], []), 'srv').tokens, [], 'an empty completion');
  const fails: [CompletionResponse, RegExp][] = [
    [
      { choices: [{ text: 'x', finish_reason: 'stop' }] },
      /srv answered a completion without log-probs \(choices\[0\]\.logprobs\.token_logprobs is missing\)/,
    ],
    [{ choices: [{ text: 'x', finish_reason: 'stop', logprobs: { tokens: ['a'] } }] }, /without log-probs/],
    [
      vllm([5, 7], [-0.5, -1], { asIds: false }),
      /srv answered a completion without token ids: .*not 'token_id:<id>' strings \(got "t5"\) \(return_tokens_as_token_ids\) and choices\[0\]\.token_ids is missing \(return_token_ids\)/,
    ],
    [{ choices: [{ ...vllm([5], [-1]).choices[0], token_ids: [6] }] }, /disagree/],
    [vllm([5, 7], [-0.5]), /2 token ids but 1 log-probs/],
    [
      { choices: [{ ...vllm([5], [-1]).choices[0], logprobs: { tokens: ['token_id:5'], token_logprobs: [null] } }] },
      /token_logprobs\[0\] is null/,
    ],
    [vllm([5], [-1], { finish: 'abort' }), /finish_reason "abort"/],
  ];
  for (const [r, re] of fails)
    t.throws(() => readTokenCompletion(r, 'srv'), { name: 'CompletionFormatError', message: re });
});

t.test(
  'OpenAITokenCompletions: the request it sends, answers read, a server without ids or log-probs fails once with a clear error',
  async (t) => {
    const good = await fakeServer((body, _req, res) => {
      const n = Math.min(3, body.max_tokens as number);
      json(res, 200, vllm([10, 11, 12].slice(0, n), [-0.1, -0.2, -0.3].slice(0, n), { ids: true }));
    });
    t.teardown(() => good.server.close());
    const client = new OpenAIChatClient({ baseURL: good.url, model: 'base', retries: 2, backoffMs: 1 });
    const tc = new OpenAITokenCompletions(client);
    const r = await tc.complete({
      prompt: [1, 2, 3],
      maxTokens: 8,
      temperature: 0.7,
      topP: 0.9,
      stop: [4],
      seed: 99,
      sessionId: 'ep-1',
      affinity: 'ep-1',
    });
    t.same(r, { tokens: [10, 11, 12], logProbs: [-0.1, -0.2, -0.3], finishReason: 'stop' });
    const { path, ...body } = good.bodies[0];
    t.equal(path, '/v1/completions');
    t.same(
      body,
      {
        model: 'base',
        prompt: [1, 2, 3],
        max_tokens: 8,
        temperature: 0.7,
        top_p: 0.9,
        top_k: -1,
        min_p: 0,
        repetition_penalty: 1,
        presence_penalty: 0,
        frequency_penalty: 0,
        stop_token_ids: [4],
        logprobs: 0,
        return_tokens_as_token_ids: true,
        return_token_ids: true,
        seed: 99,
        session_id: 'ep-1',
      },
      "vLLM's documented parameters, the prompt as token ids, every sampling field set (no server default can change the distribution)",
    );
    tc.model = 'run-step-3';
    tc.loraPath = 'run-step-3';
    await tc.complete({ prompt: [1], maxTokens: 1, temperature: 1, topP: 1, stop: [], affinity: 'x' });
    t.equal(good.bodies[1].model, 'run-step-3', 'requests name the current model (an adapter)');
    t.equal(good.bodies[1].lora_path, 'run-step-3', "and the adapter in SGLang's lora_path");
    t.notOk('seed' in good.bodies[1] || 'session_id' in good.bodies[1], 'no seed or session id unless given');

    const noLogprobs = await fakeServer((_b, _req, res) =>
      json(res, 200, { choices: [{ text: 'hi', finish_reason: 'stop', token_ids: [1, 2] }] }),
    );
    const noIds = await fakeServer((_b, _req, res) => json(res, 200, vllm([3, 4], [-1, -1], { asIds: false })));
    t.teardown(() => {
      noLogprobs.server.close();
      noIds.server.close();
    });
    for (const [srv, re] of [
      [noLogprobs, /without log-probs/],
      [noIds, /without token ids/],
    ] as const) {
      const c = new OpenAITokenCompletions(
        new OpenAIChatClient({ baseURL: srv.url, model: 'm', retries: 3, backoffMs: 1 }),
      );
      await t.rejects(c.complete({ prompt: [1], maxTokens: 2, temperature: 1, topP: 1, stop: [], affinity: 'a' }), {
        name: 'CompletionFormatError',
        message: re,
      });
      t.equal(srv.bodies.length, 1, 'not retried: the server does not support it');
      t.same(c.stats(), { requests: 1, failures: 1, retries: 0 });
    }
    t.ok(new CompletionFormatError('x') instanceof Error);
  },
);

t.test(
  'requests spread over servers least-loaded first; a dead server’s requests are retried on another and counted',
  async (t) => {
    let slow = 0;
    const a = await fakeServer((_b, _req, res) => {
      slow++;
      setTimeout(() => json(res, 200, vllm([1], [-1])), 30);
    });
    const b = await fakeServer((_b, _req, res) => json(res, 200, vllm([2], [-1])));
    t.teardown(() => {
      a.server.close();
      b.server.close();
    });
    const client = new OpenAIChatClient({
      baseURL: [a.url, b.url],
      model: 'm',
      retries: 2,
      backoffMs: 1,
      endpointCooldownMs: 60000,
    });
    const tc = new OpenAITokenCompletions(client);
    const req = (k: number) => ({ prompt: [1], maxTokens: 1, temperature: 1, topP: 1, stop: [], affinity: `ep-${k}` });
    await Promise.all([0, 1, 2, 3].map((k) => tc.complete(req(k))));
    t.same(
      client.stats().map((s) => s.calls),
      [2, 2],
      'four concurrent episodes: two on each server (least busy first)',
    );
    t.equal(slow, 2);

    // server b dies: its requests go to a, and b is avoided afterwards (cooldown)
    b.server.closeAllConnections();
    await new Promise<void>((r) => b.server.close(() => r()));
    const before = client.stats();
    const outs = await Promise.all([10, 11, 12].map((k) => tc.complete(req(k))));
    t.ok(
      outs.every((o) => o.tokens[0] === 1),
      'every request was answered by the live server',
    );
    const after = client.stats();
    t.ok(after[1].failures > before[1].failures, 'the dead server’s failures are counted');
    t.ok(tc.stats().retries >= 1, 'and the retries');
    t.equal(tc.stats().failures, 0, 'no request failed');
    const callsB = after[1].calls;
    await tc.complete(req(20));
    t.equal(client.stats()[1].calls, callsB, 'a server that failed to answer is avoided while it cools down');

    // taken out of routing: never called; back in: called
    client.setEnabled(a.url, false);
    client.setEnabled(b.url, true);
    await t.rejects(tc.complete(req(30)), OpenAIError, 'only the dead server is enabled: the request fails');
    client.setEnabled(a.url, true);
    client.setEnabled(b.url, false);
    t.same(client.enabledBaseURLs(), [a.url]);
    const n = client.stats()[0].calls;
    await tc.complete(req(31));
    t.equal(client.stats()[0].calls, n + 1);
    t.throws(() => client.setEnabled('http://elsewhere/v1', true), /not one of the client's base URLs/);
  },
);

t.test('postTo: one admin call to one server (plain-text answers, the server root for SGLang’s routes)', async (t) => {
  const srv = await fakeServer((body, req, res) => {
    if (req.url === '/v1/load_lora_adapter') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`Success: LoRA adapter '${String(body.lora_name)}' added successfully.`);
    } else json(res, 404, { detail: 'Not Found' });
  });
  t.teardown(() => srv.server.close());
  const client = new OpenAIChatClient({ baseURL: srv.url, model: 'm' });
  const r = await client.postTo(srv.url, '/load_lora_adapter', { lora_name: 'a', lora_path: '/p' });
  t.same([r.status, r.ok, r.text, r.json], [200, true, "Success: LoRA adapter 'a' added successfully.", undefined]);
  const root = await client.postTo(srv.url, '/update_weights_from_disk', { model_path: '/m' }, { root: true });
  t.equal(root.status, 404);
  t.same(root.json, { detail: 'Not Found' });
  t.equal(srv.bodies[1].path, '/update_weights_from_disk', 'root: the path outside /v1');
  await t.rejects(client.postTo('http://127.0.0.1:1/v1', '/x', {}), /not one of the client's base URLs/);
  const dead = new OpenAIChatClient({ baseURL: 'http://127.0.0.1:1/v1', model: 'm' });
  await t.rejects(dead.postTo('http://127.0.0.1:1/v1', '/x', {}), { name: 'OpenAIError', kind: 'network' });
});

t.test(
  'CompletionTokenPolicy: the episode’s context kept locally and sent whole; sampled ids appended verbatim; seeds',
  async (t) => {
    const requests: { prompt: number[]; seed?: number; sessionId?: string; affinity: string }[] = [];
    const released: string[] = [];
    let reply = { tokens: [7, 8, 3], logProbs: [-0.5, -0.25, -1], finishReason: 'stop' as 'stop' | 'length' };
    const service = {
      complete: async (r: { prompt: readonly number[]; seed?: number; sessionId?: string; affinity: string }) => {
        requests.push({
          prompt: [...r.prompt],
          ...(r.seed !== undefined ? { seed: r.seed } : {}),
          ...(r.sessionId !== undefined ? { sessionId: r.sessionId } : {}),
          affinity: r.affinity,
        });
        return { ...reply, tokens: [...reply.tokens], logProbs: [...reply.logProbs] };
      },
      release: (a: string) => void released.push(a),
    };
    const policy = new CompletionTokenPolicy({ completions: service, vocabSize: 16 });
    const s = policy.createSession({ taskId: 't', seed: 42, envInfo: {} });
    s.append([1, 2]);
    const r1 = await s.sample({ maxTokens: 5, stop: [3], seed: 1001 });
    t.same(Array.from(r1.tokens), [7, 8, 3]);
    t.same(Array.from(r1.logProbs ?? []), [-0.5, -0.25, -1]);
    s.append([4]);
    await s.sample({ maxTokens: 5, stop: [3], seed: 1002 });
    t.same(requests[0].prompt, [1, 2]);
    t.same(
      requests[1].prompt,
      [1, 2, 7, 8, 3, 4],
      'the whole context each turn: the sampled ids verbatim, then the new tokens',
    );
    t.same([requests[0].seed, requests[1].seed], [1001, 1002], 'default: each turn seeded with its own seed');
    t.notOk(requests[0].sessionId, 'no session id');
    t.equal(requests[0].affinity, requests[1].affinity, 'one routing key per episode');
    t.equal(s.length, 9);
    s.dispose();
    t.same(released, [requests[0].affinity], 'dispose releases the routing key');
    t.throws(() => s.append([1]), /disposed/);

    const withSessions = new CompletionTokenPolicy({ completions: service, vocabSize: 16, sessions: true });
    const s2 = withSessions.createSession({ taskId: 't', seed: 42, envInfo: {} });
    s2.append([1]);
    await s2.sample({ maxTokens: 5, seed: 5 });
    await s2.sample({ maxTokens: 5, seed: 6 });
    t.same([requests[2].seed, requests[3].seed], [42, 42], 'sessions: the episode seed on every turn');
    t.ok(requests[2].sessionId && requests[2].sessionId === requests[3].sessionId, 'and one session id');

    // bad answers are errors of the turn (the agent loop aborts the episode)
    const bad = async (r: typeof reply, re: RegExp) => {
      reply = r;
      const x = policy.createSession({ taskId: 't', seed: 1, envInfo: {} });
      x.append([1]);
      await t.rejects(x.sample({ maxTokens: 3 }), re);
      t.equal(x.length, 1, 'nothing appended');
    };
    await bad({ tokens: [99], logProbs: [-1], finishReason: 'stop' }, /token 0 is 99, not an id in \[0, 16\)/);
    await bad(
      { tokens: [1, 2, 3, 4], logProbs: [-1, -1, -1, -1], finishReason: 'length' },
      /4 tokens for max_tokens 3/,
    );
    await bad({ tokens: [1], logProbs: [], finishReason: 'stop' }, /0 log-probs for 1 tokens/);
    await bad({ tokens: [1], logProbs: [0.5], finishReason: 'stop' }, /not a finite number <= 0/);
    const e = policy.createSession({ taskId: 't', seed: 1, envInfo: {} });
    await t.rejects(e.sample({ maxTokens: 3 }), /append a prompt first/);
    t.throws(() => e.append([16]), /not an id in \[0, 16\)/);
    t.throws(() => new CompletionTokenPolicy({ completions: service, vocabSize: 0 }), /vocabSize/);
    t.throws(() => new CompletionTokenPolicy({ completions: {} as never, vocabSize: 4 }), /TokenCompletions/);
  },
);
