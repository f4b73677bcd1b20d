import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { modelConfig, TransformerPolicy } from '../../lib/model/index.js';
import { OpenAIChatClient, startChatServer, transformerWeightsHost } from '../../lib/openai/index.js';
import { template, tinyPolicy } from './fixtures/setup.js';

const tpl = template();

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
    // plain text
  }
  return { status: res.status, json, text };
}

interface Choice {
  text: string;
  finish_reason: string;
  stop_reason: number | null;
  token_ids?: number[];
  prompt_token_ids?: number[];
  logprobs: {
    tokens: string[];
    token_logprobs: number[];
    text_offset: number[];
    top_logprobs: Record<string, number>[];
  } | null;
}

const choice = (json: Record<string, unknown>): Choice => (json.choices as Choice[])[0];

/** What the policy samples in process for a fresh session of `seed`. */
async function inProcess(
  policy: TransformerPolicy,
  seed: number,
  prompt: number[],
  maxTokens: number,
  temperature = 1,
): Promise<{ tokens: number[]; logProbs: number[]; finishReason: string }> {
  const s = policy.createSession({ seed });
  try {
    s.append(prompt);
    const r = await s.sample({ maxTokens, temperature, topP: 1, stop: tpl.stopTokens });
    return { tokens: Array.from(r.tokens), logProbs: Array.from(r.logProbs), finishReason: r.finishReason };
  } finally {
    s.dispose();
  }
}

const prompt = tpl.render(
  [
    { role: 'system', content: 'You help retail customers.' },
    { role: 'user', content: 'Hello, I want to return an item.' },
  ],
  { addGenerationPrompt: true },
);

t.test(
  'POST /v1/completions: token ids in and out, vLLM’s response shape, the in-process policy’s tokens and log-probs',
  async (t) => {
    const policy = tinyPolicy(2);
    const server = await startChatServer({ policy, chat: tpl, port: 0, modelName: 'tiny' });
    t.teardown(async () => {
      await server.dispose();
      policy.dispose();
    });
    const url = `${server.baseURL}/completions`;
    const req = {
      model: 'tiny',
      prompt,
      max_tokens: 24,
      seed: 11,
      temperature: 1,
      stop_token_ids: tpl.stopTokens,
      logprobs: 0,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
    };
    const a = await post(url, req);
    t.equal(a.status, 200, a.text);
    t.equal(a.json.object, 'text_completion');
    t.equal(a.json.model, 'tiny');
    const c = choice(a.json);
    const direct = await inProcess(policy, 11, prompt, 24);
    t.same(c.token_ids, direct.tokens, 'the sampled ids are what the model samples in process with that seed');
    t.same(c.logprobs?.token_logprobs, direct.logProbs, 'the log-probs are the in-process ones, exactly');
    t.same(
      c.logprobs?.tokens,
      direct.tokens.map((x) => `token_id:${x}`),
      'return_tokens_as_token_ids: token_id:<id>',
    );
    t.same(
      c.logprobs?.top_logprobs,
      direct.tokens.map((x, i) => ({ [`token_id:${x}`]: direct.logProbs[i] })),
      'top_logprobs hold the sampled token (logprobs: 0)',
    );
    const offsets: number[] = [];
    let at = 0;
    for (const s of c.logprobs?.tokens ?? []) {
      offsets.push(at);
      at += s.length;
    }
    t.same(c.logprobs?.text_offset, offsets, 'text_offset counts the token strings');
    t.same(c.prompt_token_ids, prompt, 'prompt_token_ids');
    t.equal(c.text, tpl.tokenizer.decode(direct.tokens));
    t.equal(c.finish_reason, direct.finishReason);
    t.equal(
      c.stop_reason,
      direct.finishReason === 'stop' ? direct.tokens[direct.tokens.length - 1] : null,
      'stop_reason is the stop token id',
    );
    t.same(a.json.usage, {
      prompt_tokens: prompt.length,
      completion_tokens: direct.tokens.length,
      total_tokens: prompt.length + direct.tokens.length,
    });
    t.same(choice((await post(url, req)).json).token_ids, c.token_ids, 'same seed, same tokens');
    t.notSame(
      choice((await post(url, { ...req, seed: 12 })).json).token_ids,
      c.token_ids,
      'another seed, other tokens',
    );
    const greedy = choice((await post(url, { ...req, temperature: 0 })).json);
    t.same(greedy.token_ids, (await inProcess(policy, 0, prompt, 24, 0)).tokens, 'temperature 0 is greedy');

    // plain tokens, no ids; a model left out is the base model; a text prompt is tokenized
    const plain = choice((await post(url, { prompt, max_tokens: 5, seed: 11, logprobs: 0 })).json);
    t.same(
      plain.logprobs?.tokens,
      direct.tokens.slice(0, 5).map((x) => tpl.tokenizer.decode([x])),
      'without return_tokens_as_token_ids the tokens are text',
    );
    t.equal(plain.token_ids, undefined, 'token ids only on request');
    t.equal(choice((await post(url, { prompt, max_tokens: 5 })).json).logprobs, null, 'log-probs only on request');
    const text = 'Hello there';
    const fromText = choice((await post(url, { prompt: text, max_tokens: 3, seed: 1, return_token_ids: true })).json);
    t.same(fromText.prompt_token_ids, tpl.tokenizer.encode(text), 'a text prompt is tokenized');
    t.equal(
      choice((await post(url, { prompt, max_tokens: 3, seed: 11, stop_token_ids: [] })).json).token_ids,
      undefined,
    );
    const short = (await post(url, { prompt, max_tokens: 3, seed: 11, return_token_ids: true })).json;
    t.equal(choice(short).token_ids?.length, 3, 'max_tokens');
    t.equal(choice(short).finish_reason, 'length');

    // through the client
    const client = new OpenAIChatClient({ baseURL: server.baseURL, model: 'tiny', retries: 0 });
    const viaClient = await client.createCompletion(req);
    t.same(viaClient.response.choices[0].token_ids, c.token_ids, 'the client’s createCompletion');
    t.equal(viaClient.baseURL, server.baseURL);
    t.equal(viaClient.attempts, 1);
    const models = (await (await fetch(`${server.baseURL}/models`)).json()) as { data: Record<string, unknown>[] };
    t.same(
      models.data.map((m) => [m.id, m.parent, m.max_model_len]),
      [['tiny', null, policy.contextLength]],
      'the models list: the base model',
    );
  },
);

t.test('session_id continues the kept session: a rollout client gets the in-process episode’s tokens', async (t) => {
  const policy = tinyPolicy(3);
  const server = await startChatServer({ policy, chat: tpl, port: 0, modelName: 'tiny' });
  t.teardown(async () => {
    await server.dispose();
    policy.dispose();
  });
  const url = `${server.baseURL}/completions`;
  const body = (p: number[]) => ({
    prompt: p,
    max_tokens: 12,
    seed: 5,
    temperature: 1,
    stop_token_ids: tpl.stopTokens,
    logprobs: 0,
    return_token_ids: true,
    session_id: 'ep-1',
  });
  const first = choice((await post(url, body(prompt))).json);
  const more = tpl.tokenizer.encode(' and a refund');
  const second = choice((await post(url, body([...prompt, ...(first.token_ids ?? []), ...more]))).json);
  // the same two turns in one in-process session
  const s = policy.createSession({ seed: 5 });
  s.append(prompt);
  const r1 = await s.sample({ maxTokens: 12, temperature: 1, stop: tpl.stopTokens });
  s.append(more);
  const r2 = await s.sample({ maxTokens: 12, temperature: 1, stop: tpl.stopTokens });
  s.dispose();
  t.same(first.token_ids, Array.from(r1.tokens));
  t.same(second.token_ids, Array.from(r2.tokens), 'the second turn continues the random stream and the KV cache');
  t.same(second.logprobs?.token_logprobs, Array.from(r2.logProbs));
  const stats = server.routes.completions.stats;
  t.equal(stats.continued, 1, 'one continuation');
  t.equal(server.routes.completions.sessions, 1, 'one kept session');
  // a prompt that does not extend the kept context starts afresh (same as a fresh seeded session)
  const fresh = choice((await post(url, body(prompt))).json);
  t.same(fresh.token_ids, first.token_ids, 'a prompt that is not a continuation starts a fresh session');
  t.equal(server.routes.completions.stats.continued, 1);
});

t.test('bad completions requests: 400/404 naming the parameter', async (t) => {
  const policy = tinyPolicy(2);
  const server = await startChatServer({ policy, chat: tpl, port: 0, modelName: 'tiny' });
  t.teardown(async () => {
    await server.dispose();
    policy.dispose();
  });
  const url = `${server.baseURL}/completions`;
  const V = tpl.tokenizer.vocabSize;
  const cases: [Record<string, unknown>, number, string | null][] = [
    [{ max_tokens: 3 }, 400, 'prompt'],
    [{ prompt: [] }, 400, 'prompt'],
    [{ prompt: '' }, 400, 'prompt'],
    [{ prompt: [[1, 2]] }, 400, 'prompt'],
    [{ prompt: ['a', 'b'] }, 400, 'prompt'],
    [{ prompt: [1, -2] }, 400, 'prompt[1]'],
    [{ prompt: [1, 2.5] }, 400, 'prompt[1]'],
    [{ prompt: [1, V] }, 400, 'prompt[1]'],
    [{ prompt: [1], stop_token_ids: [V + 3] }, 400, 'stop_token_ids[0]'],
    [{ prompt: [1], stop_token_ids: 'x' }, 400, 'stop_token_ids'],
    [{ prompt: [1], logprobs: 1 }, 400, 'logprobs'],
    [{ prompt: [1], logprobs: true }, 400, 'logprobs'],
    [{ prompt: [1], max_tokens: 0 }, 400, 'max_tokens'],
    [{ prompt: [1], temperature: 3 }, 400, 'temperature'],
    [{ prompt: [1], top_p: 0 }, 400, 'top_p'],
    [{ prompt: [1], top_k: -2 }, 400, 'top_k'],
    [{ prompt: [1], seed: -1 }, 400, 'seed'],
    [{ prompt: [1], stop: ['x'] }, 400, 'stop'],
    [{ prompt: [1], stream: true }, 400, 'stream'],
    [{ prompt: [1], echo: true }, 400, 'echo'],
    [{ prompt: [1], n: 2 }, 400, 'n'],
    [{ prompt: [1], return_token_ids: 'yes' }, 400, 'return_token_ids'],
    [{ prompt: [1], session_id: '' }, 400, 'session_id'],
    [{ prompt: [1], model: 'other' }, 404, 'model'],
    [{ prompt: [1], model: 7 }, 400, 'model'],
    [{ prompt: new Array(policy.contextLength).fill(1) }, 400, 'prompt'],
  ];
  for (const [body, status, param] of cases) {
    const r = await post(url, body);
    t.equal(r.status, status, `${JSON.stringify(body).slice(0, 60)} → ${status}`);
    const err = r.json.error as { param: string | null; message: string; type: string };
    t.equal(err.param, param, `names ${param}`);
    t.ok(err.message.length > 0);
  }
  t.equal((await post(url, 'not json')).status, 400);
  t.equal((await fetch(url)).status, 405, 'GET is not allowed');
  const tooLong = await post(url, { prompt: new Array(policy.contextLength).fill(1) });
  t.match(
    tooLong.json.error,
    { code: 400, type: 'BadRequestError', param: 'prompt', message: /the model's context is/ },
    "vLLM's error body: type and code by status",
  );
  const ok = await post(url, { prompt: [1], top_k: -1, max_tokens: 2, seed: 1, return_token_ids: true });
  t.equal(ok.status, 200, 'top_k -1 is off (vLLM)');
});

t.test(
  'POST /update_weights_from_disk reloads the built-in policy in place; refusals name what does not match',
  async (t) => {
    const policy = tinyPolicy(2);
    const other = tinyPolicy(9);
    const dir = mkdtempSync(join(tmpdir(), 'sfx-weights-'));
    const file = join(dir, 'other.safetensors');
    other.save(file, { optimizer: false });
    const bare = await startChatServer({ policy, chat: tpl, port: 0, modelName: 'tiny' });
    const r0 = await post(`${bare.baseURL.replace(/\/v1$/, '')}/update_weights_from_disk`, { model_path: file });
    t.equal(r0.status, 404, 'no weights host: 404');
    t.match((r0.json.error as { message: string }).message, /not enabled/);
    await bare.dispose();

    const server = await startChatServer({
      policy,
      chat: tpl,
      port: 0,
      modelName: 'tiny',
      weights: transformerWeightsHost(policy),
    });
    t.teardown(async () => {
      await server.dispose();
      policy.dispose();
      other.dispose();
    });
    const root = server.baseURL.replace(/\/v1$/, '');
    const url = `${server.baseURL}/completions`;
    const body = { prompt, max_tokens: 10, seed: 4, logprobs: 0, return_token_ids: true, session_id: 's' };
    const before = choice((await post(url, body)).json);
    t.same(before.token_ids, (await inProcess(policy, 4, prompt, 10)).tokens);
    t.equal(server.routes.completions.sessions, 1);
    const up = await post(`${root}/update_weights_from_disk`, { model_path: file });
    t.equal(up.status, 200, up.text);
    t.same(
      up.json,
      { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 },
      "SGLang's answer",
    );
    t.equal(server.routes.completions.sessions, 0, 'kept sessions (computed with the old weights) are dropped');
    const after = choice((await post(url, body)).json);
    const want = await inProcess(other, 4, prompt, 10);
    t.same(after.token_ids, want.tokens, 'the server now samples what the loaded weights sample');
    t.same(after.logprobs?.token_logprobs, want.logProbs);

    // refusals: no path, a missing file, another architecture (the served weights stay)
    const noPath = await post(`${root}/update_weights_from_disk`, {});
    t.equal(noPath.status, 400);
    t.equal(noPath.json.success, false);
    t.equal((noPath.json.error as { param: string }).param, 'model_path');
    const missing = await post(`${root}/update_weights_from_disk`, { model_path: join(dir, 'nope.safetensors') });
    t.equal(missing.status, 400);
    t.match(missing.json.message as string, /could not load the weights/);
    const wider = TransformerPolicy.create(
      modelConfig('tiny', {
        layers: 1,
        width: 64,
        heads: 2,
        kvHeads: 1,
        headDim: 32,
        ffn: 48,
        vocab: tpl.tokenizer.vocabSize,
        context: 4096,
      }),
      { seed: 1, tokenizer: tpl.tokenizer },
    );
    const wideFile = join(dir, 'wide.safetensors');
    wider.save(wideFile, { optimizer: false });
    wider.dispose();
    const mismatch = await post(`${root}/update_weights_from_disk`, { model_path: wideFile });
    t.equal(mismatch.status, 400);
    t.match(
      mismatch.json.message as string,
      /config mismatch: width/,
      'another architecture is refused, naming the field',
    );
    t.same(choice((await post(url, body)).json).token_ids, want.tokens, 'a refused reload changes nothing');
  },
);
