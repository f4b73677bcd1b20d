/**
 * `stream: true`: tokens are streamed as they are sampled (chat.completion.chunk events that
 * add up to the non-streamed reply), and a client that disconnects stops its generation.
 */
import t from 'tap';

import type { ChatAssistantMessage } from '../../lib/chat/index.js';
import type {
  GenerateRequest,
  GenerativeModel,
  ModelSession,
  SampleOptions,
  SampleResult,
} from '../../lib/model/policy.js';
import { startChatServer } from '../../lib/openai/index.js';
import { ReplyStream } from '../../lib/openai/server-stream.js';
import { rawActionText } from '../../lib/rollout/turns.js';
import { mulberry32 } from '../../lib/util/random.js';
import { template, tinyPolicy } from './fixtures/setup.js';

const tpl = template();
const tok = tpl.tokenizer;

interface Chunk {
  object: string;
  choices: {
    index: number;
    delta: {
      role?: string;
      content?: string;
      tool_calls?: { index: number; id: string; type: string; function: { name: string; arguments: string } }[];
    };
    finish_reason: string | null;
    logprobs?: { content: { logprob: number }[] };
    token_ids?: number[];
  }[];
  usage?: Record<string, number>;
}

/** Reads an SSE response event by event; `onEvent` sees each parsed chunk as it arrives. */
async function readEvents(
  res: Response,
  onEvent: (c: Chunk | '[DONE]') => void = () => undefined,
): Promise<(Chunk | '[DONE]')[]> {
  const out: (Chunk | '[DONE]')[] = [];
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let at: number;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, at);
      buf = buf.slice(at + 2);
      if (!ev.startsWith('data: ')) continue;
      const data = ev.slice(6);
      const c = data === '[DONE]' ? '[DONE]' : (JSON.parse(data) as Chunk);
      out.push(c);
      onEvent(c);
    }
  }
  return out;
}

function streamText(events: (Chunk | '[DONE]')[]): string {
  return events.map((e) => (e === '[DONE]' ? '' : e.choices.map((c) => c.delta.content ?? '').join(''))).join('');
}

/** What a reply's content is without streaming (the server's rule, from the template's own parser). */
function finalContent(tokens: number[], finish: 'stop' | 'length'): string | null {
  const p = finish === 'stop' ? tpl.parseAssistant(tokens) : null;
  return p && p.ok ? (p.message.content ?? null) : rawActionText(tpl, tokens);
}

t.test('ReplyStream: the deltas add up to the final content, and text streams before the end', async (t) => {
  const rand = mulberry32(11);
  // tokens of multi-byte characters, split across tokens byte by byte
  const bytes = (s: string): number[] => Array.from(Buffer.from(s, 'utf8'), (b) => tok.byteBase + b);
  const words = [
    tok.encode('Hello'),
    tok.encode(' world'),
    bytes('é'),
    bytes('日'),
    bytes('😀'),
    tok.encode(' {"a": 1}'),
    [tok.byteBase + 0xe2],
    [tok.byteBase + 0x80],
  ];
  const specials = [tpl.message, tpl.call, tpl.end, tpl.start, tpl.pad];
  let live = 0;
  for (let trial = 0; trial < 400; trial++) {
    const tokens: number[] = [];
    const kind = rand();
    if (kind < 0.6) tokens.push(tpl.message);
    else if (kind < 0.8) tokens.push(tpl.call);
    for (let n = Math.floor(rand() * 12); n > 0; n--) {
      if (rand() < 0.12) tokens.push(specials[Math.floor(rand() * specials.length)]);
      else tokens.push(...words[Math.floor(rand() * words.length)]);
    }
    if (rand() < 0.2) tokens.push(tpl.call, ...tok.encode('{"name":"f","arguments":{"x":1}}'));
    const finish = rand() < 0.7 ? 'stop' : 'length';
    if (finish === 'stop') tokens.push(tpl.end);
    const s = new ReplyStream(tpl);
    let got = '';
    let before = '';
    for (let i = 0; i < tokens.length;) {
      const k = 1 + Math.floor(rand() * 3);
      got += s.push(tokens.slice(i, i + k));
      i += k;
      if (i < tokens.length) before = got;
    }
    const content = finalContent(tokens, finish);
    got += s.finish(content);
    if (got !== (content ?? ''))
      t.fail(`tokens ${JSON.stringify(tokens)}: streamed ${JSON.stringify(got)}, content ${JSON.stringify(content)}`);
    if (before.length > 0) live++;
  }
  t.ok(live > 100, `text was sent before the reply ended in ${live} of 400 replies`);
  const s = new ReplyStream(tpl);
  t.equal(s.push([tpl.message, ...tok.encode('Hi')]), 'Hi', 'plain text streams at once');
  t.equal(s.push(bytes('日').slice(0, 2)), '', 'half a character waits');
  t.equal(s.push(bytes('日').slice(2)), '日', 'and comes when complete');
  t.equal(s.push([tpl.call, ...tok.encode('{"name":"f"}')]), '', 'a tool call is held');
});

t.test('TransformerPolicy delivers sampled tokens as they come (onTokens), the same tokens as without', async (t) => {
  const policy = tinyPolicy(5);
  t.teardown(() => policy.dispose());
  const prompt = tpl.render([{ role: 'user', content: 'hello there' }], { addGenerationPrompt: true });
  const plain = policy.createSession({ seed: 3 });
  plain.append(prompt);
  const a = await plain.sample({ maxTokens: 40, temperature: 1 });
  plain.dispose();
  const s = policy.createSession({ seed: 3 });
  s.append(prompt);
  const runs: number[][] = [];
  const lps: number[] = [];
  const b = await s.sample({
    maxTokens: 40,
    temperature: 1,
    onTokens: (tk, lp) => void (runs.push(Array.from(tk)), lps.push(...lp)),
  });
  s.dispose();
  t.same(Array.from(b.tokens), Array.from(a.tokens), 'same tokens with and without onTokens');
  t.same(runs.flat(), Array.from(b.tokens), 'the delivered runs are the result, in order');
  t.same(lps, Array.from(b.logProbs));
  t.equal(runs.length, b.tokens.length, `one token per delivery (${runs.length} deliveries)`);
  const bad = policy.createSession({ seed: 3 });
  bad.append(prompt);
  t.throws(() => bad.sample({ maxTokens: 1, onTokens: 3 as never }), TypeError, 'onTokens must be a function');
  bad.dispose();

  // disposing the session from the callback frees its job: nothing more is delivered
  const d = policy.createSession({ seed: 4 });
  d.append(prompt);
  let calls = 0;
  const p = d.sample({
    maxTokens: 3000,
    temperature: 1,
    stop: [],
    onTokens: () => {
      calls++;
      if (calls === 2) d.dispose();
    },
  });
  await t.rejects(p, /disposed/);
  await new Promise((r) => setTimeout(r, 50));
  t.equal(calls, 2, 'no delivery after dispose');
  t.equal(policy.pending, 0, 'no job left');
});

/** A policy that replies with `reply` one token at a time, waiting on `gate` after the first, or forever with `endless`. */
class SlowPolicy implements GenerativeModel {
  readonly vocabSize = tok.vocabSize;
  readonly contextLength = 1 << 20;
  disposed = 0;
  finished = 0;
  constructor(
    readonly reply: number[],
    readonly gate: Promise<void> | null,
    readonly endless = false,
  ) {}
  createSession(): ModelSession {
    let len = 0;
    let gone = false;
    // the session's methods read the model's fields; an object literal's methods have their own `this`
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    return {
      get length() {
        return len;
      },
      append(x: ArrayLike<number>) {
        len += x.length;
      },
      async sample(o: SampleOptions): Promise<SampleResult> {
        const out: number[] = [];
        for (let i = 0; self.endless || i < self.reply.length; i++) {
          if (gone) throw new Error('the session was disposed during sample()');
          const x = self.endless ? tok.byteBase + 97 + (i % 26) : self.reply[i];
          out.push(x);
          o.onTokens?.(Int32Array.of(x), Float32Array.of(-0.25));
          if (i === 0 && self.gate) await self.gate;
          else await new Promise((r) => setTimeout(r, 2));
          if (!self.endless && out.length >= o.maxTokens) break;
        }
        self.finished++;
        return { tokens: Int32Array.from(out), logProbs: Float32Array.from(out, () => -0.25), finishReason: 'stop' };
      },
      dispose() {
        if (!gone) self.disposed++; // idempotent, as the interface says
        gone = true;
      },
    };
  }
  async generate(_: readonly GenerateRequest[]): Promise<SampleResult[]> {
    throw new Error('not used');
  }
}

t.test(
  'the server streams text while the reply is being sampled, then the tool calls, finish and [DONE]',
  async (t) => {
    const call: ChatAssistantMessage = {
      role: 'assistant',
      content: 'Let me look that up.',
      tool_calls: [{ type: 'function', function: { name: 'find_user_id_by_email', arguments: '{"email":"a@b.c"}' } }],
    };
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const policy = new SlowPolicy(tpl.renderAssistantBody(call), gate);
    const server = await startChatServer({ policy, chat: tpl, port: 0 });
    t.teardown(() => server.dispose());
    const timer = setTimeout(() => open(), 10000); // never needed when the server streams
    const res = await fetch(`${server.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'sinkflex',
        messages: [{ role: 'user', content: 'a@b.c' }],
        tools: [
          {
            type: 'function',
            function: {
              name: 'find_user_id_by_email',
              parameters: { type: 'object', properties: { email: { type: 'string' } } },
            },
          },
        ],
        stream: true,
        logprobs: true,
        stream_options: { include_usage: true },
        return_token_ids: true,
      }),
    });
    t.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    let beforeEnd = 0;
    const events = await readEvents(res, (e) => {
      if (e !== '[DONE]' && e.choices.length > 0 && policy.finished === 0) beforeEnd++;
      open(); // the first event lets the policy go on
    });
    clearTimeout(timer);
    t.ok(beforeEnd >= 1, `events arrived while the policy was still sampling (${beforeEnd})`);
    t.equal(events[events.length - 1], '[DONE]');
    const chunks = events.filter((e): e is Chunk => e !== '[DONE]');
    t.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
    t.equal(chunks[0].choices[0].delta.role, 'assistant');
    t.equal(streamText(events), 'Let me look that up.', 'the text, streamed');
    t.ok(chunks.filter((c) => c.choices[0]?.delta.content).length > 3, 'in several deltas');
    const calls = chunks.flatMap((c) => c.choices.flatMap((x) => x.delta.tool_calls ?? []));
    t.same(
      calls.map((c) => [c.index, c.type, c.function.name, c.function.arguments]),
      [[0, 'function', 'find_user_id_by_email', '{"email":"a@b.c"}']],
      'the tool call at the end',
    );
    const finishes = chunks.flatMap((c) => c.choices.map((x) => x.finish_reason)).filter((x) => x !== null);
    t.same(finishes, ['tool_calls']);
    const lp = chunks.flatMap((c) => c.choices.flatMap((x) => x.logprobs?.content ?? []));
    t.equal(lp.length, tpl.renderAssistantBody(call).length, 'one log-prob per token over the chunks');
    t.ok(chunks[chunks.length - 1].usage, 'usage chunk last');
  },
);

t.test('streamed and plain replies of the built-in model agree', async (t) => {
  const policy = tinyPolicy(6);
  const server = await startChatServer({ policy, chat: tpl, port: 0 });
  t.teardown(async () => {
    await server.dispose();
    policy.dispose();
  });
  const url = `${server.baseURL}/chat/completions`;
  for (const seed of [1, 2, 3]) {
    const body = {
      model: 'sinkflex',
      messages: [{ role: 'user', content: 'I want to exchange an item.' }],
      seed,
      max_tokens: 60,
      logprobs: true,
      return_token_ids: true,
    };
    const plain = (await (await fetch(url, { method: 'POST', body: JSON.stringify(body) })).json()) as {
      choices: {
        message: { content: string | null; tool_calls?: unknown[] };
        finish_reason: string;
        token_ids: number[];
        logprobs: { content: unknown[] };
      }[];
    };
    const events = await readEvents(
      await fetch(url, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) }),
    );
    const chunks = events.filter((e): e is Chunk => e !== '[DONE]');
    const c = plain.choices[0];
    t.equal(streamText(events), c.message.content ?? '', `seed ${seed}: same text`);
    t.same(
      chunks.flatMap((x) => x.choices.map((y) => y.finish_reason)).filter((x) => x !== null),
      [c.finish_reason],
      'same finish reason',
    );
    t.same(chunks[chunks.length - 1].choices[0].token_ids, c.token_ids, 'same tokens (in the last chunk)');
    t.equal(
      chunks.flatMap((x) => x.choices.flatMap((y) => y.logprobs?.content ?? [])).length,
      c.token_ids.length,
      'a log-prob per token',
    );
    t.equal(
      chunks.filter((x) => (x.choices[0]?.logprobs?.content.length ?? 0) === 1).length,
      c.token_ids.length,
      `one chunk per sampled token (${c.token_ids.length})`,
    );
  }
});

t.test('a client that disconnects stops its generation', async (t) => {
  const policy = new SlowPolicy([], null, true);
  const statuses: number[] = [];
  const server = await startChatServer({ policy, chat: tpl, port: 0, onRequest: (i) => statuses.push(i.status) });
  t.teardown(() => server.dispose());
  for (const stream of [true, false]) {
    const ctrl = new AbortController();
    const before = policy.disposed;
    const res = fetch(`${server.baseURL}/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({
        model: 'sinkflex',
        messages: [{ role: 'user', content: 'go' }],
        stream,
        max_tokens: 100000,
      }),
      signal: ctrl.signal,
    });
    if (stream) {
      const r = await res;
      const reader = (r.body as ReadableStream<Uint8Array>).getReader();
      await reader.read(); // the first chunk
    } else await new Promise((r) => setTimeout(r, 100));
    ctrl.abort();
    if (!stream) await t.rejects(res, /abort/i);
    const t0 = Date.now();
    while (policy.disposed === before && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 10));
    t.equal(policy.disposed, before + 1, `${stream ? 'stream' : 'plain'}: the session was freed when the client left`);
    while (statuses.length < (stream ? 1 : 2) && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 10));
    t.equal(statuses[statuses.length - 1], 499, 'logged as 499 (client closed)');
  }
  t.equal(policy.finished, 0, 'no generation ran to its end');
});
