import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { AsyncTauEnv, TauEnv, type ChatMessage as GymChatMessage } from '../../lib/gym/index.js';
import type { ChatMessage } from '../../lib/chat/index.js';
import {
  AgentLoop,
  ExpertTokenPolicy,
  type DataProto,
  type EpisodeRecord,
  type SessionContext,
  type TokenPolicy,
  type SampleOptions,
  type TokenSampleRequest,
  type TokenSampleResult,
  type TokenSession,
} from '../../lib/rollout/index.js';
import type { UserSimulator } from '../../lib/tau/index.js';
import { ScriptedRetailUser } from '../../lib/tau/index.js';
import {
  ByteSpelledExpertPolicy,
  envFactory,
  NoisyExpertPolicy,
  retailWorld,
  telecomWorld,
  template,
} from './fixtures/world.js';

const tpl = template();
const world = retailWorld();
const tworld = telecomWorld();
const taskIds = world.taskIds;

/** Runs of consecutive indices where mask[j] === 1, as [start, end). */
function runs(mask: ArrayLike<number>, n: number): [number, number][] {
  const out: [number, number][] = [];
  let s = -1;
  for (let j = 0; j <= n; j++) {
    const on = j < n && mask[j] === 1;
    if (on && s < 0) s = j;
    if (!on && s >= 0) {
      out.push([s, j]);
      s = -1;
    }
  }
  return out;
}

/** Checks the masks of every row against the trajectory: model tokens are exactly the assistant turns. */
function checkMasks(t: Test, batch: DataProto): void {
  const R = batch.shape('responses')[1];
  const P = batch.shape('prompts')[1];
  const L = P + R;
  const responses = batch.int32('responses');
  const mask = batch.float32('response_mask');
  const attn = batch.int32('attention_mask');
  const ids = batch.int32('input_ids');
  const pos = batch.int32('position_ids');
  const scores = batch.float32('token_level_scores');
  const rewards = batch.float32('rewards');
  for (let b = 0; b < batch.batchSize; b++) {
    const msgs = batch.nonTensor<ChatMessage[]>('messages')[b];
    const nReal = attn.subarray(b * L, (b + 1) * L).reduce((s, v) => s + v, 0);
    const respLen = Array.from(attn.subarray(b * L + P, (b + 1) * L)).reduce((s, v) => s + v, 0);
    const turns = runs(mask.subarray(b * R, (b + 1) * R), R);
    // the assistant messages after the greeting, in order
    const assistants = msgs.slice(1).filter((m, i) => m.role === 'assistant' && i > 0);
    t.equal(turns.length, batch.int32('num_turns')[b], `row ${b}: one masked run per assistant turn`);
    t.equal(turns.length, assistants.length, `row ${b}: as many runs as assistant messages`);
    turns.forEach(([s, e], k) => {
      const body = responses.subarray(b * R + s, b * R + e);
      const parsed = tpl.parseAssistant(body);
      t.ok(parsed.ok, `row ${b} turn ${k} parses`);
      if (parsed.ok)
        t.same(
          { content: parsed.message.content, calls: (parsed.message.tool_calls ?? []).map((c) => c.function) },
          {
            content: assistants[k].content ?? null,
            calls: ((assistants[k] as { tool_calls?: { function: unknown }[] }).tool_calls ?? []).map(
              (c) => c.function,
            ),
          },
          `row ${b} turn ${k} = the trajectory's assistant message`,
        );
      t.equal(body[body.length - 1], tpl.end, 'each turn ends with <|end|>');
      const gp = tpl.generationPrompt();
      const before =
        k === 0
          ? Array.from(batch.row('prompts', b).subarray(P - gp.length))
          : Array.from(responses.subarray(b * R + s - gp.length, b * R + s));
      t.ok((k > 0 || s === 0) && before.join() === gp.join(), 'preceded by the generation prompt (mask 0)');
    });
    // everything unmasked in the response is environment text: observations and generation prompts
    const env: number[] = [];
    for (let j = 0; j < respLen; j++) if (mask[b * R + j] === 0) env.push(responses[b * R + j]);
    const obsMsgs: number[] = [];
    let seenAssistant = 0;
    const firstObs = msgs.slice(1).findIndex((m, i) => i > 0 && m.role === 'assistant');
    for (const m of msgs.slice(1 + firstObs)) {
      if (m.role === 'assistant') {
        seenAssistant++;
        if (seenAssistant > 1 || obsMsgs.length > 0) obsMsgs.push(...tpl.generationPrompt());
        continue;
      }
      obsMsgs.push(...tpl.renderMessage(m));
    }
    const expectEnv = obsMsgs.slice(0, env.length);
    t.same(env, expectEnv, `row ${b}: unmasked response tokens are the rendered observations`);
    t.ok(
      mask.subarray(b * R + respLen, (b + 1) * R).every((v) => v === 0),
      'no mask on padding',
    );
    // positions count the real tokens; the reward sits on the last model token
    const first = L - nReal - (R - respLen);
    for (let j = 0; j < nReal; j++)
      if (pos[b * L + first + j] !== j || ids[b * L + first + j] === tpl.pad) t.fail(`row ${b}: position/id at ${j}`);
    const last = turns.length > 0 ? turns[turns.length - 1][1] - 1 : -1;
    let misplaced = 0;
    for (let j = 0; j < R; j++) if (scores[b * R + j] !== (j === last ? rewards[b] : 0)) misplaced++;
    t.equal(misplaced, 0, `row ${b}: the reward sits on the last model token only`);
  }
}

t.test(
  'expert token policy through the loop: reward 1, masks cover exactly the model tokens, prompt layout',
  async (t) => {
    const loop = new AgentLoop({
      policy: new ExpertTokenPolicy(tpl, { tasks: world }),
      chat: tpl,
      env: envFactory(world),
      concurrency: 6,
    });
    const batch = await loop.generate({ taskIds: taskIds.slice(0, 10), n: 2, seed: 3 });
    t.equal(batch.batchSize, 20);
    t.same(Array.from(batch.float32('rewards')), new Array(20).fill(1), 'the expert solves every episode');
    t.same([...new Set(batch.nonTensor('tokenization_check'))], ['ok'], 'strict sanity check passes');
    t.same(batch.nonTensor('uid').slice(0, 4), ['g0', 'g0', 'g1', 'g1']);
    t.same(batch.nonTensor('task_id').slice(0, 4), [taskIds[0], taskIds[0], taskIds[1], taskIds[1]]);
    t.same(batch.nonTensor('sample_index').slice(0, 4), [0, 1, 0, 1]);
    t.ok(new Set(batch.nonTensor('seed')).size === 20, 'every episode has its own seed');
    t.same([...new Set(batch.nonTensor('termination_reason'))], ['user_stop']);
    t.equal(batch.meta.has_rollout_log_probs, false, 'the expert gives no log-probs');
    t.equal(batch.meta.pad_token_id, tpl.pad);
    const metrics = batch.meta.metrics as Record<string, number>;
    t.match(metrics, {
      'rollout/episodes': 20,
      'rollout/aborted': 0,
      'rollout/truncated': 0,
      'rollout/reward/mean': 1,
      'rollout/termination/user_stop': 20,
    });
    t.ok(metrics['num_turns/mean'] > 3 && metrics['timing_s/gen'] > 0);
    t.ok(loop.scheduler.stats.maxBatch > 1, `generation requests are batched (max ${loop.scheduler.stats.maxBatch})`);
    checkMasks(t, batch);
    // the prompt: system + tools + greeting + first user message + generation prompt
    const P = batch.shape('prompts')[1];
    const msgs = batch.nonTensor<ChatMessage[]>('messages')[0];
    const expected = tpl.render(msgs.slice(0, 3), {
      tools: batch.nonTensor<Record<string, unknown>[]>('tools')[0],
      addGenerationPrompt: true,
    });
    const row = Array.from(batch.row('prompts', 0));
    t.same(row.slice(P - expected.length), expected);
    t.ok(
      row.slice(0, P - expected.length).every((x) => x === tpl.pad),
      'left padding',
    );
    t.equal(msgs[0].role, 'system');
    t.match(msgs[0].content, /<policy>/);
    t.equal(msgs.at(-1)?.role, 'user', 'the final observation is in the messages');
    t.match(msgs.at(-1)?.content, /###STOP###/);
    await loop.dispose();
    await loop.dispose();
    await t.rejects(loop.rollout({ taskIds: ['x'] }), /after dispose/);
  },
);

t.test('telecom (dual control) through the loop; a custom system prompt without tools', async (t) => {
  const loop = new AgentLoop({
    policy: new ExpertTokenPolicy(tpl, { tasks: tworld }),
    chat: tpl,
    env: envFactory(tworld),
    concurrency: 4,
    systemPrompt: () => 'You are a telecom agent.',
    renderTools: false,
  });
  const batch = await loop.generate({ taskIds: tworld.taskIds.slice(0, 6), seed: 1 });
  t.same(Array.from(batch.float32('rewards')), new Array(6).fill(1));
  t.same([...new Set(batch.nonTensor('tokenization_check'))], ['ok']);
  t.equal(batch.nonTensor<ChatMessage[]>('messages')[0][0].content, 'You are a telecom agent.');
  t.notMatch(tpl.tokenizer.decode(batch.row('prompts', 0)), /<\|start\|>tools/, 'no tools section');
  t.ok(batch.nonTensor<unknown[]>('tools')[0].length === 13, 'the tools are still recorded');
  checkMasks(t, batch);
  await loop.dispose();
});

t.test('same seeds, same batch, whatever the concurrency; log-probs kept verbatim', async (t) => {
  const run = async (concurrency: number, seed: number): Promise<DataProto> => {
    const loop = new AgentLoop({
      policy: new NoisyExpertPolicy(tpl, world, 0.12),
      chat: tpl,
      env: envFactory(world),
      concurrency,
      sampling: { temperature: 0.7 },
    });
    const b = await loop.generate({ taskIds: taskIds.slice(0, 6), n: 2, seed });
    await loop.dispose();
    return b;
  };
  const a = await run(1, 5);
  const b = await run(7, 5);
  for (const k of a.tensorKeys) t.same(Array.from(a.get(k)), Array.from(b.get(k)), `tensor ${k}`);
  for (const k of a.nonTensorKeys) t.same(a.nonTensor(k), b.nonTensor(k), `non-tensor ${k}`);
  const rewards = Array.from(a.float32('rewards'));
  t.ok(
    rewards.some((r) => r === 1) && rewards.some((r) => r === 0),
    `noise makes some episodes fail: ${rewards.join(',')}`,
  );
  t.equal(a.meta.has_rollout_log_probs, true);
  const lp = a.float32('rollout_log_probs');
  const mask = a.float32('response_mask');
  let bad = 0;
  for (let i = 0; i < lp.length; i++) if ((mask[i] === 1) !== lp[i] < 0) bad++;
  t.equal(bad, 0, 'log-probs exactly on the model tokens');
  const c = await run(3, 6);
  t.notSame(Array.from(c.float32('rewards')), rewards, 'another seed, another batch');
  checkMasks(t, a);
});

t.test('limits: max turns, tokens per turn, total context', async (t) => {
  const policy = new ExpertTokenPolicy(tpl, { tasks: world });
  const mk = (limits: ConstructorParameters<typeof AgentLoop>[0]['limits']): AgentLoop =>
    new AgentLoop({ policy, chat: tpl, env: envFactory(world), limits, concurrency: 3 });
  const turns = await mk({ maxTurns: 3 }).generate({ taskIds: taskIds.slice(0, 3) });
  t.same(turns.nonTensor('termination_reason'), ['max_turns', 'max_turns', 'max_turns']);
  t.same(Array.from(turns.int32('num_turns')), [3, 3, 3]);
  t.same(turns.nonTensor('truncated'), [true, true, true]);
  t.same(Array.from(turns.float32('rewards')), [0, 0, 0]);
  t.match(turns.meta.metrics, { 'rollout/truncated': 3, 'rollout/termination/max_turns': 3 });
  checkMasksShallow(t, turns);
  const short = await mk({ maxTokensPerTurn: 12 }).rollout({ taskIds: taskIds.slice(0, 2) });
  for (const r of short) {
    t.equal(r.termination, 'turn_token_limit');
    t.ok(r.truncated);
    t.equal(
      r.responseMask.reduce((s, v) => s + v, 0),
      12,
      'the cut turn keeps its 12 sampled tokens',
    );
    t.equal(r.tokenization, 'unchecked');
  }
  const promptLen = short[0].promptIds.length;
  const tight = await mk({ maxContextTokens: promptLen + 60 }).rollout({ taskIds: taskIds.slice(0, 1) });
  t.equal(tight[0].termination, 'context_limit');
  t.ok(tight[0].promptIds.length + tight[0].responseIds.length <= promptLen + 60);
  const none = await mk({ maxContextTokens: 100 }).rollout({ taskIds: taskIds.slice(0, 1) });
  t.same([none[0].termination, none[0].numTurns, none[0].responseIds.length], ['context_limit', 0, 0]);
  const batch = await mk({ maxContextTokens: 100 }).generate({ taskIds: taskIds.slice(0, 1) });
  t.equal(batch.shape('responses')[1], 0, 'an empty response row');
  t.same(Array.from(batch.float32('token_level_scores')), []);
  const stepLimit = await new AgentLoop({ policy, chat: tpl, env: envFactory(world, { maxSteps: 6 }) }).rollout({
    taskIds: taskIds.slice(0, 1),
  });
  t.same(
    [stepLimit[0].termination, stepLimit[0].truncated],
    ['max_steps', true],
    "the environment's step limit truncates too",
  );
  t.throws(() => mk({ maxTurns: 0 }), RangeError);
  t.throws(() => new AgentLoop({ policy, chat: tpl, env: envFactory(world), sampling: { topP: 0 } }), RangeError);
  t.throws(
    () => new AgentLoop({ policy, chat: tpl, env: envFactory(world), sampling: { temperature: -1 } }),
    RangeError,
  );
  t.throws(
    () => new AgentLoop({ policy, chat: tpl, env: envFactory(world), sanityCheck: 'loose' as never }),
    RangeError,
  );
  t.throws(() => new AgentLoop({ policy: {} as never, chat: tpl, env: envFactory(world) }), TypeError);
  t.throws(() => new AgentLoop({ policy, chat: {} as never, env: envFactory(world) }), TypeError);
  t.throws(() => new AgentLoop({ policy, chat: tpl, env: 5 as never }), TypeError);
  t.throws(() => new AgentLoop(null as never), TypeError);
  const loop = mk({});
  const first = loop.rollout({ taskIds: taskIds.slice(0, 1) });
  await t.rejects(loop.rollout({ taskIds: taskIds.slice(0, 1) }), /one rollout at a time/);
  await first;
  t.equal((await loop.rollout({ taskIds: taskIds.slice(0, 1) })).length, 1, 'the next rollout runs');
  await t.rejects(loop.rollout({ taskIds: [5 as never] }), TypeError);
  await t.rejects(loop.rollout({ taskIds: ['a'], n: 0 }), RangeError);
  await t.rejects(loop.rollout({ taskIds: ['a'], seed: 0.5 }), RangeError);
  await t.rejects(loop.rollout({} as never), TypeError);
});

/** Masks of truncated rows: each masked run parses as the trajectory's assistant message. */
function checkMasksShallow(t: Test, batch: DataProto): void {
  const R = batch.shape('responses')[1];
  for (let b = 0; b < batch.batchSize; b++) {
    const turns = runs(batch.float32('response_mask').subarray(b * R, (b + 1) * R), R);
    const messages = batch.nonTensor<ChatMessage[]>('messages')[b];
    const assistants = messages.filter((m) => m.role === 'assistant').slice(1);
    t.equal(turns.length, assistants.length);
    turns.forEach(([s, e], k) => {
      const parsed = tpl.parseAssistant(batch.int32('responses').subarray(b * R + s, b * R + e));
      t.ok(parsed.ok && (parsed.message.content ?? null) === (assistants[k].content ?? null));
    });
  }
}

t.test('tokenization sanity check: strict sees non-canonical tokens, text does not', async (t) => {
  const mk = (sanityCheck: 'strict' | 'text' | 'disable'): AgentLoop =>
    new AgentLoop({
      policy: new ByteSpelledExpertPolicy(tpl, world),
      chat: tpl,
      env: envFactory(world),
      sanityCheck,
      limits: { maxTokensPerTurn: 4096 },
    });
  const strict = await mk('strict').generate({ taskIds: taskIds.slice(0, 2) });
  t.same(strict.nonTensor('tokenization_check'), ['mismatch', 'mismatch']);
  t.equal((strict.meta.metrics as Record<string, number>)['rollout/tokenization_mismatches'], 2);
  t.same(Array.from(strict.float32('rewards')), [1, 1], 'byte-spelled turns still parse and act');
  const text = await mk('text').generate({ taskIds: taskIds.slice(0, 2) });
  t.same(text.nonTensor('tokenization_check'), ['ok', 'ok']);
  const off = await mk('disable').generate({ taskIds: taskIds.slice(0, 1) });
  t.same(off.nonTensor('tokenization_check'), ['disabled']);
  t.ok(strict.shape('responses')[1] > text.shape('responses')[1] - 1, 'byte spelling makes longer responses');
});

/** A policy that emits fixed bodies per turn, from a script keyed by task id. */
class ScriptedTokenPolicy implements TokenPolicy {
  readonly calls: number[] = [];
  constructor(
    private readonly script: (taskId: string, turn: number, params: SampleOptions) => TokenSampleResult | Error,
  ) {}
  createSession(context: SessionContext): TokenSession {
    let turn = 0;
    let length = 0;
    return {
      append: (tokens) => {
        length += tokens.length;
      },
      get length() {
        return length;
      },
      sample: async (params) => {
        const r = this.script(context.taskId, turn++, params);
        if (r instanceof Error) throw r;
        length += r?.tokens?.length ?? 0;
        return r;
      },
      dispose: () => undefined,
    };
  }
  async generateBatch(requests: readonly TokenSampleRequest[]): Promise<Array<TokenSampleResult | Error>> {
    this.calls.push(requests.length);
    return Promise.all(requests.map((r) => r.session.sample(r.params).catch((e: Error) => e)));
  }
}

const say = (text: string): TokenSampleResult => ({
  tokens: tpl.renderAssistantBody({ role: 'assistant', content: text }),
  finishReason: 'stop',
});

t.test('failures abort only their episode and are counted; parse failures go to the env as raw text', async (t) => {
  const [ok1, policyFail, badTokens, noStop, userFail, envFail, garbage] = taskIds;
  const policy = new ScriptedTokenPolicy((taskId, turn, params) => {
    if (taskId === policyFail && turn === 1) return new Error('model server down');
    if (taskId === badTokens) return { tokens: [1e6], finishReason: 'stop' };
    if (taskId === noStop) return { tokens: tpl.tokenizer.encode('hello'), finishReason: 'stop' };
    if (taskId === garbage && turn === 0)
      return {
        tokens: [
          tpl.message,
          ...tpl.tokenizer.encode('hi'),
          tpl.call,
          ...tpl.tokenizer.encode('{"name": "get_order'),
          tpl.end,
        ],
        finishReason: 'stop',
      };
    if (taskId === garbage && turn === 1)
      return { tokens: [...tpl.tokenizer.encode('plain words'), tpl.end], finishReason: 'stop' };
    if (turn > 3) return { tokens: [tpl.end], finishReason: 'stop' };
    void params;
    return say('Could you tell me more?');
  });
  const failingUser = (inner: UserSimulator): UserSimulator => {
    let task = '';
    return {
      reset: (tk, seed, tools) => {
        task = tk.id;
        inner.reset(tk, seed, tools);
      },
      respond: (input) => {
        if (task === userFail && input.history.length > 3) throw new Error('user simulator timed out');
        return inner.respond(input);
      },
    };
  };
  const env = (): TauEnv => {
    const e = new TauEnv({ world, user: failingUser(new ScriptedRetailUser()) });
    const step = e.step.bind(e);
    e.step = (a) => {
      if (e.currentTask?.id === envFail) throw new Error('environment bug');
      return step(a);
    };
    return e;
  };
  const loop = new AgentLoop({ policy, chat: tpl, env, concurrency: 4, limits: { maxTurns: 8 } });
  const ids = [ok1, policyFail, badTokens, noStop, userFail, envFail, garbage];
  const records = await loop.rollout({ taskIds: ids, n: 2, seed: 4 });
  const by = (id: string): EpisodeRecord[] => records.filter((r) => r.taskId === id);
  t.same(
    by(ok1).map((r) => [r.termination, r.aborted]),
    [
      ['agent_error', false],
      ['agent_error', false],
    ],
    'an empty turn ends the episode (agent_error): an outcome, not an abort',
  );
  for (const r of by(policyFail))
    t.match(r, { termination: 'policy_error', aborted: true, error: /model server down/, numTurns: 1, reward: 0 });
  for (const r of by(badTokens)) t.match(r, { termination: 'policy_error', error: /not an id in \[0, 1024\)/ });
  for (const r of by(noStop)) t.match(r, { termination: 'policy_error', error: /does not end with a stop token/ });
  for (const r of by(userFail)) t.match(r, { termination: 'user_error', aborted: true, error: /user_error/ });
  for (const r of by(envFail)) t.match(r, { termination: 'env_error', aborted: true, error: /environment bug/ });
  for (const r of by(garbage)) {
    t.equal(r.parseErrors, 3, 'three unparseable turns: bad call JSON, text outside a section, the empty turn');
    t.equal(r.tokenization, 'unchecked');
    const toolErr = r.messages.find((m) => m.role === 'tool') as GymChatMessage | undefined;
    t.match(
      toolErr?.content,
      /^Error: could not parse a <tool_call> block as JSON/,
      'the env answered the raw text with an error tool message',
    );
    t.equal(
      r.messages.filter((m) => m.role === 'assistant')[1].content,
      'hi<tool_call>{"name": "get_order</tool_call>',
    );
    const plain = r.messages.filter((m) => m.role === 'assistant')[2];
    t.equal(plain.content, 'plain words', 'text outside a section goes to the user as text');
  }
  t.ok(
    policy.calls.some((c) => c > 1),
    'generateBatch got several requests at once',
  );
  const batch = await loop.generate({ taskIds: ids, n: 2, seed: 4 });
  const m = batch.meta.metrics as Record<string, number>;
  t.match(m, {
    'rollout/episodes': 14,
    'rollout/aborted': 10,
    'rollout/policy_errors': 6,
    'rollout/user_errors': 2,
    'rollout/env_errors': 2,
    'rollout/parse_errors': 8,
  });
  t.equal(m['response/aborted_ratio'], 10 / 14);
  t.equal(batch.batchSize, 4, 'aborted episodes are dropped');
  t.same(batch.nonTensor('task_id'), [ok1, ok1, garbage, garbage]);
  t.notOk(batch.nonTensorKeys.includes('x'));
  const keep = new AgentLoop({ policy, chat: tpl, env, keepAborted: true, limits: { maxTurns: 8 } });
  const all = await keep.generate({ taskIds: ids, n: 2, seed: 4 });
  t.equal(all.batchSize, 14);
  t.equal(all.nonTensor('aborted').filter(Boolean).length, 10);
  t.ok(all.nonTensor<string | null>('error').some((e) => e !== null));
  // a policy whose sessions cannot be created; one whose generateBatch breaks its contract
  const noSession: TokenPolicy = {
    createSession: () => {
      throw new Error('out of KV cache');
    },
  };
  const r1 = await new AgentLoop({ policy: noSession, chat: tpl, env: envFactory(world) }).rollout({
    taskIds: [ok1],
  });
  t.match(r1[0], { termination: 'policy_error', error: /out of KV cache/ });
  const short: TokenPolicy = { createSession: policy.createSession.bind(policy), generateBatch: async () => [] };
  const r2 = await new AgentLoop({ policy: short, chat: tpl, env: envFactory(world) }).rollout({ taskIds: [ok1] });
  t.match(r2[0], { termination: 'policy_error', error: /returned 0 results for 1 requests/ });
  const throwing: TokenPolicy = {
    createSession: policy.createSession.bind(policy),
    generateBatch: async () => {
      throw new Error('batch failed');
    },
  };
  const r3 = await new AgentLoop({ policy: throwing, chat: tpl, env: envFactory(world) }).rollout({
    taskIds: [ok1],
  });
  t.match(r3[0], { termination: 'policy_error', error: /batch failed/ });
  const wrongLp = new ScriptedTokenPolicy(() => ({ ...say('hi'), logProbs: [0] }));
  t.match(
    (await new AgentLoop({ policy: wrongLp, chat: tpl, env: envFactory(world) }).rollout({ taskIds: [ok1] }))[0],
    { error: /log-probs for/ },
  );
  const nanLp = new ScriptedTokenPolicy(() => ({ tokens: [tpl.end], logProbs: [NaN], finishReason: 'stop' }));
  t.match((await new AgentLoop({ policy: nanLp, chat: tpl, env: envFactory(world) }).rollout({ taskIds: [ok1] }))[0], {
    error: /log-prob 0 is NaN/,
  });
  const tooMany = new ScriptedTokenPolicy((_id, _turn, params) => ({
    tokens: new Array(params.maxTokens + 1).fill(tpl.end),
    finishReason: 'stop',
  }));
  t.match(
    (await new AgentLoop({ policy: tooMany, chat: tpl, env: envFactory(world) }).rollout({ taskIds: [ok1] }))[0],
    { error: /tokens for maxTokens/ },
  );
  const badReason = new ScriptedTokenPolicy(() => ({ tokens: [tpl.end], finishReason: 'eos' as never }));
  t.match(
    (await new AgentLoop({ policy: badReason, chat: tpl, env: envFactory(world) }).rollout({ taskIds: [ok1] }))[0],
    { error: /finishReason must be/ },
  );
  const nothing = new ScriptedTokenPolicy(() => null as never);
  t.match(
    (await new AgentLoop({ policy: nothing, chat: tpl, env: envFactory(world) }).rollout({ taskIds: [ok1] }))[0],
    { error: /returned null/ },
  );
  const noTokens = new ScriptedTokenPolicy(() => ({ finishReason: 'stop' }) as never);
  t.match(
    (await new AgentLoop({ policy: noTokens, chat: tpl, env: envFactory(world) }).rollout({ taskIds: [ok1] }))[0],
    { error: /no tokens array/ },
  );
  // an environment that cannot reset, or returns no observation list
  const badReset = (): TauEnv => {
    const e = new TauEnv({ world });
    e.reset = () => [5 as never, {}];
    return e;
  };
  t.match((await new AgentLoop({ policy, chat: tpl, env: badReset }).rollout({ taskIds: [ok1] }))[0], {
    termination: 'env_error',
    error: /not an array of messages/,
  });
  await t.rejects(
    new AgentLoop({ policy, chat: tpl, env: () => ({}) as never }).rollout({ taskIds: [ok1] }),
    /must return an environment/,
  );
});

t.test('asynchronous environments (an LLM user behind a fake endpoint) interleave in the loop', async (t) => {
  let calls = 0;
  const fakeFetch = (async (_url: string, init: { body: string }) => {
    calls++;
    const body = JSON.parse(init.body) as { messages: { role: string }[] };
    const turns = body.messages.filter((m) => m.role === 'assistant').length;
    await new Promise((r) => setTimeout(r, 1 + (calls % 3)));
    const content = turns >= 3 ? 'Thanks, bye. ###STOP###' : `My email is someone${turns}@example.com.`;
    return new Response(JSON.stringify({ choices: [{ message: { content } }] }), {
      status: 200,
      headers: { 'content-type': 'application/json' },
    });
  }) as unknown as typeof fetch;
  const env = (): AsyncTauEnv =>
    new AsyncTauEnv({ world, user: { kind: 'llm', model: 'fake', fetch: fakeFetch, retries: 0 } });
  const run = async (concurrency: number): Promise<DataProto> => {
    const loop = new AgentLoop({
      policy: new ExpertTokenPolicy(tpl, { tasks: world }),
      chat: tpl,
      env,
      concurrency,
      limits: { maxTurns: 12 },
    });
    const b = await loop.generate({ taskIds: taskIds.slice(0, 4), n: 2, seed: 8 });
    await loop.dispose();
    return b;
  };
  const a = await run(8);
  t.equal(a.batchSize, 8);
  t.same([...new Set(a.nonTensor('termination_reason'))], ['user_stop']);
  t.same([...new Set(a.nonTensor('tokenization_check'))], ['ok']);
  checkMasksShallow(t, a);
  const b = await run(2);
  t.same(Array.from(b.int32('input_ids')), Array.from(a.int32('input_ids')), 'the same tokens at another concurrency');
  t.ok(calls > 16);
});

t.test('the rollout benchmark runs (quick) and writes JSON', async (t) => {
  const { main } = await import('../../bench/rollout.js');
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-rollout-bench-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'r.json');
  const r = await main(['--quick', '--json', file]);
  const saved = JSON.parse(readFileSync(file, 'utf8')) as typeof r;
  t.equal(saved.rows.length, 4);
  for (const row of r.rows) {
    t.ok(row.episodesPerSec > 0 && row.episodes === 16, row.name);
    t.equal(row.meanReward, 1);
  }
  t.ok(r.rows[1].tokensPerSec > 0 && r.rows[0].tokensPerSec === 0);
  t.ok(r.microBatches >= 1 && r.promptTokens > 0 && r.modelTokens > 0);
  t.ok(r.paddingFraction >= 0 && r.paddingFraction < 1);
});
