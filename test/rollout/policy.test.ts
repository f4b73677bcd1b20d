import { existsSync } from 'node:fs';

import t from 'tap';

import type { ChatAssistantMessage, ChatMessage } from '../../lib/chat/index.js';
import {
  AgentLoop,
  ChatTokenPolicy,
  DynamicSamplingError,
  ExpertChatPolicy,
  ExpertTokenPolicy,
  GenerationScheduler,
  generateBatch,
  generateWithDynamicSampling,
  mixSeed,
  rawActionText,
  tauMessageOf,
  type ChatPolicy,
  type ChatPolicyRequest,
  type SessionContext,
  type TokenPolicy,
  type SampleOptions,
  type TokenSampleResult,
  type TokenSession,
} from '../../lib/rollout/index.js';
import { ConversationDecodeError, ConversationDecoder } from '../../lib/chat/index.js';
import { chatMessageOfAction } from '../../lib/rollout/expert-policy.js';
import { parseTurn } from '../../lib/rollout/turns.js';
import type { TauTask } from '../../lib/tau/index.js';
import { Rng } from '../../lib/tau/rng.js';
import { loadTau2Airline } from '../../lib/tau/index.js';
import { AIRLINE_DIR } from '../tau/fixtures/airline.js';
import { envFactory, NoisyExpertPolicy, retailWorld, template } from './fixtures/world.js';

const tpl = template();
const world = retailWorld();
const ctx: SessionContext = { taskId: world.taskIds[0], seed: 1, envInfo: { domain: 'retail', policy: 'p' } };

const conversation: ChatMessage[] = [
  { role: 'system', content: 'You are helpful.' },
  { role: 'assistant', content: 'Hi! How can I help you today?' },
  { role: 'user', content: 'Cancel order #W123, é ✓ please.' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: 'a', type: 'function', function: { name: 'get_order_details', arguments: '{"order_id":"#W123"}' } },
    ],
  },
  { role: 'tool', content: '{"status": "pending"}', tool_call_id: 'a' },
  { role: 'assistant', content: 'Shall I cancel it? (yes/no)' },
  { role: 'user', content: 'yes' },
];
const tools = [{ type: 'function', function: { name: 'get_order_details', parameters: { type: 'object' } } }];

t.test('ConversationDecoder reads a rendered conversation back, in any chunking', async (t) => {
  const tokens = tpl.render(conversation, { tools, addGenerationPrompt: true });
  const rng = new Rng(3);
  for (let trial = 0; trial < 5; trial++) {
    const d = new ConversationDecoder(tpl);
    let at = 0;
    while (at < tokens.length) {
      const n = trial === 0 ? tokens.length : rng.int(1, 40);
      d.push(tokens.slice(at, at + n));
      at += n;
    }
    t.equal(d.length, tokens.length);
    t.ok(d.awaitingAssistant);
    t.same(d.tools, tools);
    t.same(
      d.messages.map((m) => ({
        role: m.role,
        content: m.content ?? null,
        calls: ((m as ChatAssistantMessage).tool_calls ?? []).map((c) => c.function),
      })),
      conversation.map((m) => ({
        role: m.role,
        content: m.content ?? null,
        calls: ((m as ChatAssistantMessage).tool_calls ?? []).map((c) => c.function),
      })),
    );
    const toolMsg = d.messages[4] as { tool_call_id?: string };
    const call = (d.messages[3] as ChatAssistantMessage).tool_calls?.[0];
    t.equal(toolMsg.tool_call_id, call?.id, 'tool results answer the call before them');
  }
  const d = new ConversationDecoder(tpl);
  d.push(tpl.render(conversation.slice(0, 3)));
  t.notOk(d.awaitingAssistant);
  t.throws(
    () => d.push([tpl.start, tpl.message, ...tpl.tokenizer.encode('x'), tpl.end]),
    /unknown role ''/,
    'a message needs a role',
  );
  const bad: [number[], RegExp][] = [
    [[tpl.message], /expected <\|start\|>/],
    [[tpl.start, ...tpl.tokenizer.encode('user'), tpl.call], /cannot hold a tool call/],
    [[tpl.start, tpl.start], /<\|start\|> inside a message header/],
    [
      [tpl.start, ...tpl.tokenizer.encode('user'), tpl.message, tpl.call],
      /unexpected <\|call\|> inside a user message/,
    ],
    [[tpl.start, ...tpl.tokenizer.encode('robot'), tpl.message, tpl.end], /unknown role 'robot'/],
    [
      [tpl.start, ...tpl.tokenizer.encode('tools'), tpl.message, ...tpl.tokenizer.encode('{x'), tpl.end],
      /tools section is not JSON/,
    ],
    [
      [tpl.start, ...tpl.tokenizer.encode('tools'), tpl.message, ...tpl.tokenizer.encode('{}'), tpl.end],
      /must be a JSON array/,
    ],
  ];
  for (const [toks, err] of bad) t.throws(() => new ConversationDecoder(tpl).push(toks), err);
  t.ok(new ConversationDecodeError('x') instanceof Error);
  const broken = new ConversationDecoder(tpl);
  broken.push([tpl.start, ...tpl.tokenizer.encode('assistant'), tpl.call, ...tpl.tokenizer.encode('{bad'), tpl.end]);
  t.same(
    broken.messages,
    [{ role: 'assistant', content: '<|call|>{bad<|end|>' }],
    'an unparseable assistant turn is kept as its text',
  );
  const userEnd = new ConversationDecoder(tpl);
  userEnd.push([tpl.start, ...tpl.tokenizer.encode('user'), tpl.end]);
  t.same(userEnd.messages, [{ role: 'user', content: '' }]);
});

t.test('rawActionText and parseTurn', async (t) => {
  const enc = (s: string): number[] => tpl.tokenizer.encode(s);
  t.equal(rawActionText(tpl, [tpl.message, ...enc('hello'), tpl.end, ...enc('after')]), 'hello', 'stops at <|end|>');
  t.equal(rawActionText(tpl, [tpl.call, ...enc('{"name": "x"'), tpl.end]), '<tool_call>{"name": "x"</tool_call>');
  t.equal(
    rawActionText(tpl, [...enc('lead '), tpl.message, ...enc('a'), tpl.call, ...enc('{}'), tpl.call, ...enc('{}')]),
    'lead a<tool_call>{}</tool_call><tool_call>{}</tool_call>',
  );
  t.equal(
    rawActionText(tpl, [tpl.message, ...enc('x'), tpl.start, ...enc('y'), tpl.end]),
    'x<|start|>y',
    'other specials by name',
  );
  t.equal(rawActionText(tpl, [tpl.end]), '');
  const ok = parseTurn(
    tpl,
    tpl.renderAssistantBody({
      role: 'assistant',
      content: null,
      tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
    }),
    'call_7_',
  );
  t.same(ok.action, {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_7_0', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
  });
  t.equal(ok.parseError, null);
  const bad = parseTurn(tpl, [tpl.call, ...enc('{'), tpl.end]);
  t.same(
    [bad.action, bad.message, typeof bad.parseError],
    ['<tool_call>{</tool_call>', { role: 'assistant', content: '<tool_call>{</tool_call>' }, 'string'],
  );
});

t.test('ChatTokenPolicy: a message-level policy behind the token interface', async (t) => {
  const seen: ChatPolicyRequest[] = [];
  let closed = 0;
  const chat: ChatPolicy = {
    startConversation: (c) => {
      t.same(c, ctx);
      return {
        respond: async (req) => {
          seen.push(req);
          return { role: 'assistant', content: `reply ${seen.length}` };
        },
        dispose: () => {
          closed++;
        },
      };
    },
  };
  const policy = new ChatTokenPolicy(chat, tpl);
  const s = policy.createSession(ctx);
  s.append(tpl.render(conversation, { tools, addGenerationPrompt: true }));
  const r = await s.sample({ maxTokens: 100, stop: tpl.stopTokens });
  t.same(Array.from(r.tokens), tpl.renderAssistantBody({ role: 'assistant', content: 'reply 1' }));
  t.equal(r.finishReason, 'stop');
  t.equal(r.logProbs, undefined);
  t.equal(seen[0].messages.length, conversation.length);
  t.same(seen[0].tools, tools);
  t.equal(s.length, tpl.render(conversation, { tools, addGenerationPrompt: true }).length + r.tokens.length);
  await t.rejects(s.sample({ maxTokens: 10 }), /does not end with a generation prompt/);
  s.append([...tpl.renderMessage({ role: 'user', content: 'more' }), ...tpl.generationPrompt()]);
  const cut = await s.sample({ maxTokens: 2 });
  t.same([cut.tokens.length, cut.finishReason], [2, 'length']);
  t.equal(seen[1].messages.at(-2)?.content, 'reply 1', 'its own replies are part of the conversation');
  const s2 = policy.createSession(ctx);
  s2.append(tpl.render(conversation, { addGenerationPrompt: true }));
  const noStop = await s2.sample({ maxTokens: 100 });
  t.equal(noStop.finishReason, 'stop');
  const early = policy.createSession(ctx);
  early.append(tpl.render(conversation, { addGenerationPrompt: true }));
  const stopAtMessage = await early.sample({ maxTokens: 100, stop: [tpl.message] });
  t.same(Array.from(stopAtMessage.tokens), [tpl.message], 'cut after the first stop token');
  for (const p of [
    { maxTokens: 0 },
    { maxTokens: 5, temperature: -1 },
    { maxTokens: 5, topP: 0 },
    { maxTokens: 5, stop: 3 as never },
    null as never,
  ]) {
    const s3 = policy.createSession(ctx);
    s3.append(tpl.render(conversation, { addGenerationPrompt: true }));
    await t.rejects(s3.sample(p), p === null || (p as { stop?: unknown }).stop === 3 ? TypeError : RangeError);
  }
  const busy = policy.createSession(ctx);
  busy.append(tpl.render(conversation, { addGenerationPrompt: true }));
  const pending = busy.sample({ maxTokens: 100 });
  t.throws(() => busy.append([tpl.start]), /while a sample is in progress/);
  await t.rejects(busy.sample({ maxTokens: 100 }), /one sample at a time/);
  await pending;
  s.dispose();
  s.dispose();
  t.equal(closed, 1, 'dispose reaches the conversation once (idempotent)');
  t.throws(() => s.append([1]), /after dispose/);
  await t.rejects(s.sample({ maxTokens: 1 }), /after dispose/);
});

t.test('expert policies: tau messages from chat messages, actions as chat messages', async (t) => {
  t.same(tauMessageOf({ role: 'tool', content: 'Error: nope', tool_call_id: 'c' }), {
    role: 'tool',
    id: 'c',
    content: 'Error: nope',
    requestor: 'assistant',
    error: true,
  });
  t.same(tauMessageOf({ role: 'tool', content: 'ok' }), {
    role: 'tool',
    id: '',
    content: 'ok',
    requestor: 'assistant',
    error: false,
  });
  t.same(
    tauMessageOf({
      role: 'assistant',
      content: null,
      tool_calls: [{ type: 'function', function: { name: 'f', arguments: 'not json' } }],
    }),
    {
      role: 'assistant',
      content: null,
      toolCalls: [{ id: 'call_0', name: 'f', arguments: {}, requestor: 'assistant' }],
    },
  );
  t.same(tauMessageOf({ role: 'assistant', content: 'hi' }), { role: 'assistant', content: 'hi' });
  t.equal(tauMessageOf({ role: 'system', content: 's' }), null);
  t.same(chatMessageOfAction({ toolCalls: [{ name: 'f', arguments: { a: 1 } }] }), {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
  });
  t.same(chatMessageOfAction('hello'), { role: 'assistant', content: 'hello' });
  t.throws(() => chatMessageOfAction(42), /not a message/);
  const byList = new ExpertChatPolicy({ tasks: world.tasks as TauTask[] });
  t.throws(() => byList.startConversation({ ...ctx, taskId: 'nope' }), /unknown task id 'nope'/);
  t.throws(() => new ExpertChatPolicy({ tasks: 5 as never }), TypeError);
  const odd = new ExpertChatPolicy({ tasks: world });
  await t.rejects(
    odd.startConversation({ ...ctx, envInfo: { domain: 'flights' } }).respond({ messages: [], tools: [], params: {} }),
    /no expert agent for domain "flights"/,
  );
  if (existsSync(AIRLINE_DIR)) {
    // The airline domain gets tau2 airline's expert: its first move on a task with gold calls is a tool call or a request to confirm, never an error.
    const airline = loadTau2Airline(AIRLINE_DIR, { split: 'train' });
    const task = airline.tasks.find((x) => (x.evaluation_criteria?.actions ?? []).length > 0) as TauTask;
    const conv = new ExpertChatPolicy({ tasks: airline.tasks }).startConversation({
      taskId: task.id,
      seed: 1,
      envInfo: { domain: 'airline', policy: 'p' },
    });
    const reply = await conv.respond({
      messages: [{ role: 'user', content: 'Hello, I need help.' }],
      tools: [],
      params: {},
    });
    const message = 'message' in reply ? reply.message : reply;
    t.ok((message.tool_calls?.length ?? 0) > 0 || (message.content ?? '').length > 0, 'the airline expert answers');
  }
  let made = 0;
  const custom = new ExpertTokenPolicy(tpl, {
    tasks: world,
    createAgent: () => {
      made++;
      return { reset: () => undefined, act: async () => ({ content: 'custom agent' }) };
    },
  });
  const loop = new AgentLoop({ policy: custom, chat: tpl, env: envFactory(world), limits: { maxTurns: 2 } });
  const recs = await loop.rollout({ taskIds: [world.taskIds[0]] });
  t.equal(made, 1);
  t.equal(recs[0].messages.filter((m) => m.role === 'assistant').at(-1)?.content, 'custom agent');
});

t.test('generateBatch and the scheduler: batching, per-request errors, limits', async (t) => {
  const mk = (fail = -1): TokenPolicy & { batches: number[] } => {
    const batches: number[] = [];
    let made = 0;
    return {
      batches,
      createSession(): TokenSession {
        const id = made++;
        return {
          append: () => undefined,
          length: 0,
          dispose: () => undefined,
          sample: async (p: SampleOptions): Promise<TokenSampleResult> => {
            if (id === fail) throw new Error(`session ${id} failed`);
            return { tokens: [id, p.seed ?? 0], finishReason: 'stop' };
          },
        };
      },
    };
  };
  const plain = mk(1);
  const sessions = [0, 1, 2].map(() => plain.createSession(ctx));
  const results = await generateBatch(
    plain,
    sessions.map((session, i) => ({ session, params: { maxTokens: 2, seed: i } })),
  );
  t.same(results[0], { tokens: [0, 0], finishReason: 'stop' });
  t.match(results[1], /session 1 failed/);
  t.same(results[2], { tokens: [2, 2], finishReason: 'stop' });
  t.same(await generateBatch(plain, []), []);
  const notArray: TokenPolicy = { createSession: plain.createSession, generateBatch: async () => 'x' as never };
  t.match(
    (await generateBatch(notArray, [{ session: sessions[0], params: { maxTokens: 1 } }]))[0],
    /returned string results/,
  );
  const thrower: TokenPolicy = {
    createSession: plain.createSession,
    generateBatch: () => {
      throw 'plain string';
    },
  };
  t.match((await generateBatch(thrower, [{ session: sessions[0], params: { maxTokens: 1 } }]))[0], /plain string/);

  const batched = mk();
  const calls: number[] = [];
  batched.generateBatch = async (reqs) => {
    calls.push(reqs.length);
    return Promise.all(reqs.map((r) => r.session.sample(r.params)));
  };
  const sched = new GenerationScheduler(batched, { maxBatchSize: 3 });
  const ss = Array.from({ length: 7 }, () => batched.createSession(ctx));
  const outs = await Promise.all(ss.map((s, i) => sched.sample(s, { maxTokens: 2, seed: 10 + i })));
  t.same(
    outs.map((o) => Array.from(o.tokens)[1]),
    [10, 11, 12, 13, 14, 15, 16],
    'each request gets its own result',
  );
  t.same(calls, [3, 3, 1], 'batches of at most maxBatchSize');
  t.same(sched.stats, { batches: 3, requests: 7, maxBatch: 3 });
  const failing = mk(0);
  const fs = new GenerationScheduler(failing);
  await t.rejects(fs.sample(failing.createSession(ctx), { maxTokens: 1 }), /session 0 failed/);
  t.throws(() => new GenerationScheduler(plain, { maxBatchSize: 0 }), RangeError);
  t.throws(() => new GenerationScheduler(plain, { maxInFlight: 0 }), RangeError);
  const two = new GenerationScheduler(batched, { maxBatchSize: 2, maxInFlight: 2 });
  await Promise.all(ss.slice(0, 4).map((s) => two.sample(s, { maxTokens: 1 })));
  t.equal(two.stats.batches, 2);
});

t.test('DAPO dynamic sampling: keeps groups with different rewards until the batch is full', async (t) => {
  const loop = new AgentLoop({
    policy: new NoisyExpertPolicy(tpl, world, 0.12),
    chat: tpl,
    env: envFactory(world),
    concurrency: 8,
  });
  let cursor = 0;
  const sampleTasks = (count: number): string[] =>
    Array.from({ length: count }, () => world.taskIds[cursor++ % world.taskIds.length]);
  const batch = await generateWithDynamicSampling(loop, {
    batchSize: 2,
    genBatchSize: 3,
    n: 3,
    sampleTasks,
    seed: 2,
    maxRounds: 8,
  });
  t.equal(batch.batchSize, 6, '2 groups of 3');
  const uids = batch.nonTensor<string>('uid');
  const rewards = batch.float32('rewards');
  const groups = new Map<string, number[]>();
  uids.forEach((u, i) => groups.set(u, [...(groups.get(u) ?? []), rewards[i]]));
  t.equal(groups.size, 2);
  for (const [u, r] of groups) {
    t.match(u, /^r\d+g\d+$/);
    t.ok(new Set(r).size > 1, `group ${u} has different rewards: ${r.join(',')}`);
  }
  const m = batch.meta.metrics as Record<string, number>;
  t.ok(m['rollout/dynamic/rounds'] >= 1);
  t.equal(m['rollout/dynamic/groups_generated'], m['rollout/dynamic/rounds'] * 3);
  t.equal(m['rollout/episodes'], m['rollout/dynamic/groups_generated'] * 3, 'every generated episode is counted');
  t.ok(m['rollout/dynamic/groups_dropped'] >= 0);
  t.equal(m['rollout/dynamic/groups_kept'], 2);
  const again = await generateWithDynamicSampling(loop, {
    batchSize: 2,
    genBatchSize: 3,
    n: 3,
    sampleTasks: (c) => world.taskIds.slice(0, c),
    seed: 2,
    maxRounds: 8,
  });
  const again2 = await generateWithDynamicSampling(loop, {
    batchSize: 2,
    genBatchSize: 3,
    n: 3,
    sampleTasks: (c) => world.taskIds.slice(0, c),
    seed: 2,
    maxRounds: 8,
  });
  t.same(Array.from(again.float32('rewards')), Array.from(again2.float32('rewards')), 'seeded');
  // the pure expert always succeeds: every group is dropped
  const expert = new AgentLoop({
    policy: new ExpertTokenPolicy(tpl, { tasks: world }),
    chat: tpl,
    env: envFactory(world),
    concurrency: 8,
  });
  const opts = {
    batchSize: 1,
    genBatchSize: 2,
    n: 2,
    sampleTasks: (c: number, r: number) => world.taskIds.slice(r * c, r * c + c),
    maxRounds: 2,
  };
  const err = await generateWithDynamicSampling(expert, opts).catch((e: unknown) => e);
  t.ok(err instanceof DynamicSamplingError);
  t.match(err, { kept: 0, rounds: 2, message: /kept 0 of 1 groups after 2 generation rounds/ });
  const partial = await generateWithDynamicSampling(expert, {
    ...opts,
    allowPartial: true,
    metric: (r) => r.numTurns % 2,
  });
  t.ok(partial.batchSize % 2 === 0, 'a partial batch (possibly empty) of whole groups');
  await t.rejects(generateWithDynamicSampling(expert, { ...opts, n: 1 }), /n >= 2/);
  await t.rejects(generateWithDynamicSampling(expert, { ...opts, batchSize: 0 }), RangeError);
  await t.rejects(generateWithDynamicSampling(expert, { ...opts, genBatchSize: 0 }), RangeError);
  await t.rejects(generateWithDynamicSampling(expert, { ...opts, maxRounds: -1 }), RangeError);
  await t.rejects(generateWithDynamicSampling(expert, { ...opts, sampleTasks: () => [] }), /no task ids/);
  t.ok(mixSeed(2, 0) !== mixSeed(2, 1));
});
