// Issue 24, item 7: what new users of `sinkflex serve` ran into, checked against vLLM's behaviour:
// wrongly typed or unsupported fields are refused naming the field; tool calls are read only
// when tools are offered (not without tools, not with tool_choice 'none'); parallel_tool_calls:
// false keeps one call; a max_tokens past the context is refused; GET /v1/models/{id}; special
// tokens stay out of returned text unless skip_special_tokens is false; a refused admin request
// is logged once; a disconnect on /v1/completions is logged as 499; and, with a real Qwen3 chat
// template, a template that raises is the client's error (400) and chat_template_kwargs reach it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import type { ChatAssistantMessage } from '../../lib/chat/messages.js';
import { JinjaChatFormat } from '../../lib/chat/hf/jinja-format.js';
import { loadPretrained } from '../../lib/model/index.js';
import type { GenerativeModel, ModelSession, SampleResult } from '../../lib/model/policy.js';
import { startChatServer } from '../../lib/openai/index.js';
import { writeTinyCheckpoint } from '../model/hf/fixtures/tiny-checkpoint.js';
import { ScriptedModelPolicy, template } from './fixtures/setup.js';

const tpl = template();

// the tests read the answers' JSON by the engines' field names
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

async function post(url: string, body: unknown): Promise<{ status: number; json: Json; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: Json = {};
  try {
    json = JSON.parse(text) as Json;
  } catch {
    // plain text
  }
  return { status: res.status, json, text };
}

const twoCalls: ChatAssistantMessage = {
  role: 'assistant',
  content: null,
  tool_calls: [
    { type: 'function', function: { name: 'find_user', arguments: '{"email":"a@b.c"}' } },
    { type: 'function', function: { name: 'get_order', arguments: '{"id":"#1"}' } },
  ],
};
const tools = [
  {
    type: 'function',
    function: {
      name: 'find_user',
      description: 'Find a user',
      parameters: { type: 'object', properties: { email: { type: 'string' } } },
    },
  },
  {
    type: 'function',
    function: { name: 'get_order', parameters: { type: 'object', properties: { id: { type: 'string' } } } },
  },
];
const messages = [{ role: 'user', content: 'Find me.' }];

t.test('wrongly typed and unsupported fields: 400 naming the field (chat and completions)', async (t) => {
  const policy = new ScriptedModelPolicy(tpl, [{ role: 'assistant', content: 'Hi.' }]);
  const server = await startChatServer({ policy, chat: tpl, port: 0 });
  t.teardown(() => server.dispose());
  const chat = `${server.baseURL}/chat/completions`;
  const base = { model: 'sinkflex', messages };
  const cases: [Record<string, unknown>, string][] = [
    [{ response_format: { type: 'json_object' } }, 'response_format'],
    [{ response_format: 'json' }, 'response_format'],
    [{ response_format: { type: 'xml' } }, 'response_format.type'],
    [{ presence_penalty: 'x' }, 'presence_penalty'],
    [{ presence_penalty: 3 }, 'presence_penalty'],
    [{ presence_penalty: 0.5 }, 'presence_penalty'],
    [{ frequency_penalty: '1' }, 'frequency_penalty'],
    [{ logit_bias: { '12': 5 } }, 'logit_bias'],
    [{ logit_bias: { abc: 1 } }, 'logit_bias'],
    [{ logit_bias: [1] }, 'logit_bias'],
    [{ parallel_tool_calls: 'yes' }, 'parallel_tool_calls'],
    [{ stream_options: { include_usage: true } }, 'stream_options'],
    [{ stream: true, stream_options: { include_usage: 'yes' } }, 'stream_options.include_usage'],
    [{ stream: true, stream_options: 5 }, 'stream_options'],
    [{ user: 5 }, 'user'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }, 'tools[0].function.parameters'],
    [{ tools: [{ type: 'function', function: { name: 'f', description: 7 } }] }, 'tools[0].function.description'],
    [{ chat_template_kwargs: 'x' }, 'chat_template_kwargs'],
    [{ chat_template_kwargs: { enable_thinking: false } }, 'chat_template_kwargs'], // the built-in template has no variables
    [{ skip_special_tokens: 1 }, 'skip_special_tokens'],
  ];
  for (const [extra, param] of cases) {
    const r = await post(chat, { ...base, ...extra });
    t.equal(r.status, 400, `${JSON.stringify(extra)}: 400`);
    t.equal(r.json.error?.param, param, `${JSON.stringify(extra)}: names ${param}`);
  }
  // accepted: what changes nothing here
  const ok = await post(chat, {
    ...base,
    user: 'u-1',
    presence_penalty: 0,
    frequency_penalty: 0,
    logit_bias: {},
    response_format: { type: 'text' },
    parallel_tool_calls: true,
    stream: false,
  });
  t.equal(ok.status, 200, ok.text);
  const completions = `${server.baseURL}/completions`;
  // (completions refuse stream: true before its options; they apply a non-zero penalty)
  const applied = (e: Record<string, unknown>): boolean => e.presence_penalty === 0.5;
  for (const [extra, param] of cases.filter(
    ([e]) =>
      !('tools' in e) &&
      !('parallel_tool_calls' in e) &&
      !('chat_template_kwargs' in e) &&
      !('stream' in e) &&
      !applied(e),
  )) {
    const r = await post(completions, { model: 'sinkflex', prompt: [1, 2, 3], ...extra });
    t.equal(r.status, 400, `completions ${JSON.stringify(extra)}: 400`);
    t.equal(r.json.error?.param, param);
  }
  const penalised = await post(completions, {
    model: 'sinkflex',
    prompt: [1, 2, 3],
    presence_penalty: 0.5,
    frequency_penalty: -0.5,
  });
  t.equal(penalised.status, 200, `completions apply penalties: ${penalised.text}`);
});

t.test('tool calls are read only when tools are offered; parallel_tool_calls: false keeps the first', async (t) => {
  const policy = new ScriptedModelPolicy(tpl, [twoCalls]);
  const server = await startChatServer({ policy, chat: tpl, port: 0 });
  t.teardown(() => server.dispose());
  const chat = `${server.baseURL}/chat/completions`;
  const offered = await post(chat, { model: 'sinkflex', messages, tools });
  t.equal(offered.json.choices[0].finish_reason, 'tool_calls');
  t.equal(offered.json.choices[0].message.tool_calls.length, 2);
  const one = await post(chat, { model: 'sinkflex', messages, tools, parallel_tool_calls: false });
  t.equal(one.json.choices[0].message.tool_calls.length, 1, 'parallel_tool_calls: false');
  t.equal(one.json.choices[0].message.tool_calls[0].function.name, 'find_user');
  for (const extra of [{}, { tools, tool_choice: 'none' }]) {
    const r = await post(chat, { model: 'sinkflex', messages, ...extra });
    t.equal(r.status, 200);
    const c = r.json.choices[0];
    t.equal(c.finish_reason, 'stop', `${JSON.stringify(Object.keys(extra))}: no tool_calls finish`);
    t.notOk(c.message.tool_calls, 'no tool_calls');
    t.match(c.message.content, /find_user[\s\S]*get_order/, 'the calls stay in the text');
  }
});

t.test('max_tokens past the context is refused (chat and completions); GET /v1/models/{id}', async (t) => {
  const policy = new ScriptedModelPolicy(tpl, [{ role: 'assistant', content: 'Hi.' }]);
  const server = await startChatServer({ policy, chat: tpl, port: 0, modelName: 'm1' });
  t.teardown(() => server.dispose());
  for (const [route, body] of [
    ['chat/completions', { model: 'm1', messages, max_tokens: 1e12 }],
    ['completions', { model: 'm1', prompt: [1, 2, 3], max_tokens: 1e12 }],
    ['completions', { model: 'm1', prompt: [1, 2, 3], max_tokens: policy.contextLength - 2 }],
  ] as const) {
    const r = await post(`${server.baseURL}/${route}`, body);
    t.equal(r.status, 400, `${route} max_tokens ${body.max_tokens}: 400`);
    t.equal(r.json.error?.param, 'max_tokens');
    t.match(r.json.error?.message, /max_tokens is too large/);
  }
  const fits = await post(`${server.baseURL}/completions`, {
    model: 'm1',
    prompt: [1, 2, 3],
    max_tokens: policy.contextLength - 3,
  });
  t.equal(fits.status, 200, 'prompt + max_tokens = context fits');
  const m = await fetch(`${server.baseURL}/models/m1`);
  t.equal(m.status, 200);
  t.match(await m.json(), { id: 'm1', object: 'model', owned_by: 'sinkflex' });
  const missing = await fetch(`${server.baseURL}/models/nope`);
  t.equal(missing.status, 404);
  t.match(await missing.json(), { error: { param: 'model', type: 'NotFoundError', code: 404 } });
});

t.test(
  'special tokens stay out of returned text and log-prob tokens unless skip_special_tokens is false',
  async (t) => {
    const policy = new ScriptedModelPolicy(tpl, [{ role: 'assistant', content: 'Hi.' }]);
    const server = await startChatServer({ policy, chat: tpl, port: 0 });
    t.teardown(() => server.dispose());
    const names = /<\|[a-z_]+\|>/;
    const a = await post(`${server.baseURL}/completions`, {
      prompt: [1, 2, 3],
      max_tokens: 50,
      logprobs: 0,
      stop_token_ids: tpl.stopTokens,
    });
    t.equal(a.status, 200, a.text);
    t.equal(a.json.choices[0].finish_reason, 'stop');
    t.notMatch(a.json.choices[0].text, names, 'completion text without special tokens');
    t.notOk(
      a.json.choices[0].logprobs.tokens.some((s: string) => names.test(s)),
      'log-prob tokens without special tokens',
    );
    const b = await post(`${server.baseURL}/completions`, {
      prompt: [1, 2, 3],
      max_tokens: 50,
      logprobs: 0,
      stop_token_ids: tpl.stopTokens,
      skip_special_tokens: false,
    });
    t.match(b.json.choices[0].text, names, 'skip_special_tokens: false keeps them');
    const c = await post(`${server.baseURL}/chat/completions`, { model: 'sinkflex', messages, logprobs: true });
    t.notOk(
      c.json.choices[0].logprobs.content.some((e: { token: string }) => names.test(e.token)),
      'chat log-prob tokens without special tokens',
    );
  },
);

/** A model whose samples never end until the session is disposed (a request the client abandons). */
class HangingModel implements GenerativeModel {
  readonly vocabSize = tpl.tokenizer.vocabSize;
  readonly contextLength = 4096;
  createSession(): ModelSession {
    let length = 0;
    let release: ((r: SampleResult) => void) | null = null;
    return {
      get length() {
        return length;
      },
      append(tokens: ArrayLike<number>) {
        length += tokens.length;
      },
      sample: () => new Promise<SampleResult>((r) => (release = r)),
      prefill: async () => undefined,
      dispose: () => release?.({ tokens: new Int32Array(0), logProbs: new Float32Array(0), finishReason: 'length' }),
    } as unknown as ModelSession;
  }
  async generate(): Promise<SampleResult[]> {
    return [];
  }
}

t.test('logs: a refused admin request once; a disconnect on /v1/completions as 499', async (t) => {
  const requests: number[] = [];
  const admin: number[] = [];
  const server = await startChatServer({
    policy: new HangingModel() as unknown as GenerativeModel,
    chat: tpl,
    port: 0,
    onRequest: (i) => requests.push(i.status),
    onAdmin: (i) => admin.push(i.status),
  });
  t.teardown(() => server.dispose());
  const r = await post(`${server.baseURL}/load_lora_adapter`, { lora_name: 'a', lora_path: '/nowhere' });
  t.equal(r.status, 404);
  t.same(admin, [404], 'reported to onAdmin');
  t.same(requests, [], 'and not again as a request');
  const ac = new AbortController();
  const pending = fetch(`${server.baseURL}/completions`, {
    method: 'POST',
    body: JSON.stringify({ prompt: [1, 2], max_tokens: 5 }),
    signal: ac.signal,
  }).catch(() => null);
  await new Promise((res) => setTimeout(res, 200));
  ac.abort();
  await pending;
  for (let i = 0; i < 50 && requests.length === 0; i++) await new Promise((res) => setTimeout(res, 20));
  t.same(requests, [499], 'the client closed the connection: 499');
});

t.test('a real Qwen3 chat template: raise_exception is a 400; chat_template_kwargs reach the template', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'serve-fields-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeTinyCheckpoint(dir, { family: 'qwen3', tokenizer: 'qwen3' });
  const m = await loadPretrained(dir);
  t.teardown(() => m.dispose());
  // Qwen3's template, behind a check of the kind many templates make (Qwen3.5's, Llama 2's):
  // raise_exception when no user message is given
  const source = `{%- if messages | selectattr('role', 'equalto', 'user') | list | length == 0 %}{{ raise_exception('No user query found in messages.') }}{%- endif %}${m.tokenizer.config.chat_template as string}`;
  const format = new JinjaChatFormat(m.tokenizer, source, { stopTokens: m.chat.stopTokens });
  const server = await startChatServer({ policy: m.policy, chat: format, port: 0 });
  t.teardown(() => server.dispose());
  const chat = `${server.baseURL}/chat/completions`;
  const raised = await post(chat, {
    model: 'sinkflex',
    messages: [{ role: 'system', content: 'Be brief.' }],
    max_tokens: 2,
  });
  t.equal(raised.status, 400, raised.text);
  t.equal(raised.json.error?.param, 'messages');
  t.match(raised.json.error?.message, /No user query found/);
  const off = await post(chat, {
    model: 'sinkflex',
    messages,
    max_tokens: 2,
    seed: 1,
    return_token_ids: true,
    chat_template_kwargs: { enable_thinking: false },
  });
  t.equal(off.status, 200, off.text);
  const expected = format.renderTokens([{ role: 'user', content: 'Find me.' }], {
    addGenerationPrompt: true,
    kwargs: { enable_thinking: false },
  });
  t.same(off.json.prompt_token_ids, expected, 'the prompt rendered with enable_thinking: false');
  t.match(
    m.tokenizer.decode(off.json.prompt_token_ids),
    /<think>\s*<\/think>\s*$/,
    'an empty think block ends the prompt',
  );
  const on = await post(chat, { model: 'sinkflex', messages, max_tokens: 2, seed: 1, return_token_ids: true });
  t.notSame(on.json.prompt_token_ids, expected, 'without kwargs the template default applies');
});
