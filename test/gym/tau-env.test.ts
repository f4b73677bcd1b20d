import { existsSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import {
  AsyncTauEnv,
  captureWarnings,
  captureWarningsAsync,
  checkAsyncEnv,
  checkEnv,
  createTauEnv,
  loadTauWorld,
  make,
  makeAsync,
  TauEnv,
  TauWorld,
  SyncVectorEnv,
  type ChatMessage,
  type Info,
  type StepResult,
} from '../../lib/gym/index.js';
import {
  ExpertRetailAgent,
  ExpertTelecomAgent,
  RandomAgent,
  type Message,
  type TauAgent,
  type UserSimulator,
} from '../../lib/tau/index.js';

const TAU2 = process.env.SINKFLEX_TAU2_DIR ?? join(process.cwd(), '..', 'shared', 'tau2');
const retailSource = { kind: 'generated' as const, seed: 5, count: 30, users: 120, orders: 240 };
const telecomSource = { kind: 'generated' as const, seed: 5, count: 16 };

/** OpenAI-format observation → the tau messages an agent reads. */
function tauObs(obs: readonly ChatMessage[]): Message[] {
  return obs.map((m): Message => {
    if (m.role === 'tool')
      return {
        role: 'tool',
        id: m.tool_call_id ?? '',
        content: m.content ?? '',
        requestor: 'assistant',
        error: (m.content ?? '').startsWith('Error:'),
      };
    if (m.role === 'assistant') return { role: 'assistant', content: m.content };
    return { role: 'user', content: m.content ?? '' };
  });
}

/** Runs an agent through a sync env on one task; returns the final step. */
function runAgent(
  env: TauEnv | ReturnType<typeof make>,
  agent: TauAgent,
  taskId: string,
  seed: number,
): { reward: number; info: Info; actions: number; terminated: boolean; truncated: boolean } {
  const raw = env.unwrapped as TauEnv;
  const [obs0, info] = env.reset({ seed, options: { taskId } }) as [ChatMessage[], Info];
  let obs = obs0;
  agent.reset({ task: raw.currentTask!, tools: raw.tools, policy: info.policy as string, seed });
  let step: StepResult<unknown> | null = null;
  let actions = 0;
  while (!step || !(step[2] || step[3])) {
    step = env.step(agent.act(tauObs(obs)) as never);
    obs = step[0] as ChatMessage[];
    actions++;
    if (actions > 400) throw new Error('episode did not end');
  }
  return { reward: step[1], info: step[4], actions, terminated: step[2], truncated: step[3] };
}

t.test('registered ids: make() gives a checked, sync TauEnv; checkEnv passes on both domains', async (t) => {
  const retail = make('sinkflex/TauRetail-v0', { tasks: retailSource });
  t.ok(retail.unwrapped instanceof TauEnv);
  checkEnv(retail.unwrapped as TauEnv);
  const telecom = make('sinkflex/TauTelecom-v0', { tasks: telecomSource });
  checkEnv(telecom.unwrapped as TauEnv);
  const [obs, info] = telecom.reset({ seed: 3 });
  t.ok(Array.isArray(obs) && (obs as ChatMessage[]).length >= 1);
  t.equal(info.domain, 'telecom');
  t.ok((info.tools as unknown[]).length === 13, 'telecom agent tools');
  t.equal((telecom.unwrapped as TauEnv).episode.counters.steps >= 1, true);
  t.equal(retail.spec?.id, 'sinkflex/TauRetail-v0');
  t.ok(
    loadTauWorld('retail', retailSource) === (retail.unwrapped as TauEnv).world,
    'worlds are cached per configuration',
  );
});

t.test('reset: observation, info and task choice', async (t) => {
  const env = new TauEnv({ tasks: retailSource, renderMode: 'ansi' });
  const [obs, info] = env.reset({ seed: 1 });
  t.same(obs[0], { role: 'assistant', content: 'Hi! How can I help you today?' }, 'greeting first');
  t.equal(obs[1].role, 'user');
  t.ok(env.observationSpace.contains(obs));
  t.match(info, { domain: 'retail', taskId: String, seed: Number, policy: String, systemPrompt: String });
  t.equal((info.tools as { function: { name: string } }[]).length, 16);
  t.match(info.systemPrompt as string, /<policy>/);
  const [, again] = env.reset({ seed: 1 });
  t.equal(again.taskId, info.taskId, 'same seed, same task');
  const ids = new Set<string>();
  for (let s = 0; s < 12; s++) ids.add(env.reset({ seed: 100 + s })[1].taskId as string);
  t.ok(ids.size > 5, 'random sampling over the tasks');
  t.equal(env.reset({ options: { taskId: 'gen_7' } })[1].taskId, 'gen_7');
  t.equal(env.reset({ options: { taskIndex: 3 } })[1].taskId, env.world.tasks[3].id);
  t.throws(() => env.reset({ options: { taskId: 'nope' } }), RangeError);
  t.throws(() => env.reset({ options: { taskIndex: 99 } }), RangeError);
  t.throws(() => env.reset({ options: { taskId: 5 } }), TypeError);
  const seq = new TauEnv({ tasks: retailSource, taskSampling: 'sequential' });
  t.same(
    [seq.reset({ seed: 0 })[1].taskId, seq.reset()[1].taskId, seq.reset()[1].taskId],
    seq.world.taskIds.slice(0, 3),
  );
  t.equal(seq.reset({ seed: 9 })[1].taskId, seq.world.taskIds[0], 'a seeded reset restarts the sequence');
  const fixed = new TauEnv({ tasks: retailSource, taskId: 'gen_2' });
  t.equal(fixed.reset({ seed: 4 })[1].taskId, 'gen_2');
  t.match(env.render() as string, /assistant: Hi! How can I help you today\?\nuser: /);
  t.equal(new TauEnv({ tasks: retailSource }).render(), null);
  t.throws(() => new TauEnv({ tasks: retailSource, renderMode: 'human' }), RangeError);
  t.throws(() => new TauEnv({ tasks: retailSource, taskId: 'nope' }), RangeError);
  t.throws(() => new TauEnv({ tasks: retailSource, maxSteps: 0 }), RangeError);
  t.throws(() => new TauEnv({ tasks: retailSource, taskSampling: 'shuffle' as never }), RangeError);
  t.throws(() => new TauEnv({ tasks: { kind: 'other' } as never }), TypeError);
  t.throws(() => new TauEnv({ domain: 'airline' as never }), TypeError);
  t.throws(() => new TauEnv({ tasks: { kind: 'generated', count: 0 } }), RangeError);
  t.throws(() => new TauEnv({ user: { kind: 'robot' } as never, tasks: retailSource }), TypeError);
  t.throws(() => new TauWorld('retail', env.world.domain, [], true), RangeError);
  t.throws(() => new TauWorld('retail', env.world.domain, [env.world.tasks[0], env.world.tasks[0]], true), /twice/);
});

t.test(
  'the expert agent reaches reward 1 through the env on generated tasks; a random agent stays near 0',
  async (t) => {
    const env = make('sinkflex/TauRetail-v0', { tasks: retailSource });
    const failures: string[] = [];
    for (const id of (env.unwrapped as TauEnv).world.taskIds) {
      const r = runAgent(env, new ExpertRetailAgent(), id, 11);
      if (r.reward !== 1) failures.push(`${id}: ${String(r.info.terminationReason)}`);
      t.ok(r.terminated && !r.truncated);
      t.ok(r.info.rewardInfo, 'reward breakdown at the end');
    }
    t.same(failures, [], 'retail expert: every generated task');
    const tel = make('sinkflex/TauTelecom-v0', { tasks: telecomSource });
    const telFailures: string[] = [];
    for (const id of (tel.unwrapped as TauEnv).world.taskIds) {
      const r = runAgent(tel, new ExpertTelecomAgent(), id, 11);
      if (r.reward !== 1) telFailures.push(`${id}: ${String(r.info.terminationReason)}`);
    }
    t.same(telFailures, [], 'telecom expert: every generated task');
    let random = 0;
    const ids = (env.unwrapped as TauEnv).world.taskIds;
    for (const id of ids) random += runAgent(env, new RandomAgent(), id, 3).reward;
    t.ok(random / ids.length <= 0.05, `random agent mean reward ${random / ids.length}`);
    // action-space samples as a random policy
    const raw = env.unwrapped as TauEnv;
    raw.actionSpace.seed(5);
    let sampled = 0;
    for (const id of ids.slice(0, 15)) {
      env.reset({ seed: 2, options: { taskId: id } });
      let done = false;
      let reward = 0;
      for (let i = 0; i < 200 && !done; i++) {
        const r = env.step(raw.actionSpace.sample());
        done = r[2] || r[3];
        reward = r[1];
      }
      t.ok(done, 'a sampled-action episode ends');
      sampled += reward;
    }
    t.ok(sampled / 15 <= 0.1, `action-space sampling mean reward ${sampled / 15}`);
  },
);

t.test(
  'bad actions never throw: error tool messages count toward the budget; non-messages end with agent_error',
  async (t) => {
    const env = new TauEnv({ tasks: retailSource, maxErrors: 10 });
    const bad: unknown[] = [
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'x', type: 'function', function: { name: 'no_such_tool', arguments: '{}' } }],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'y', type: 'function', function: { name: 'get_order_details', arguments: '{"order_id": ' } },
        ],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'z', type: 'function', function: { name: 'get_order_details', arguments: '{"order_id": 5}' } },
        ],
      },
      {
        role: 'assistant',
        content: 'let me look',
        tool_calls: [
          { id: 'w', type: 'function', function: { name: 'get_order_details', arguments: '{"order_id": "#W1"}' } },
        ],
      },
      {
        toolCalls: [
          { name: 'get_order_details', arguments: { order_id: '#W1' } },
          { name: 'get_user_details', arguments: { user_id: 'a' } },
        ],
      },
      '<tool_call>{"name": "get_order_details", "arguments": </tool_call>',
      { toolCalls: [{ name: 'get_order_details', arguments: [1, 2] }] },
    ];
    env.reset({ seed: 1 });
    let errors = 0;
    for (const a of bad) {
      const [obs, reward, terminated, truncated, info] = env.step(a as never);
      errors++;
      t.equal(reward, 0);
      t.notOk(terminated || truncated);
      t.equal(info.errors, errors, `error counted: ${JSON.stringify(a).slice(0, 60)}`);
      t.ok(
        obs.length >= 1 && obs.every((m) => m.role === 'tool' && (m.content ?? '').startsWith('Error:')),
        'answered by error tool messages',
      );
      t.ok(env.observationSpace.contains(obs));
    }
    for (let i = errors; i < 10; i++) env.step({ toolCalls: [{ name: 'nope', arguments: {} }] });
    t.equal(env.episode.counters.errors, 10);
    t.equal(
      env.trajectory().filter((m) => m.role === 'tool' && m.error).length,
      11,
      'the two-call action got two error messages (one error)',
    );
    const ended = new TauEnv({ tasks: retailSource, maxErrors: 2 });
    ended.reset({ seed: 1 });
    ended.step({ toolCalls: [{ name: 'nope', arguments: {} }] });
    const last = ended.step({ toolCalls: [{ name: 'nope', arguments: {} }] });
    t.same([last[1], last[2], last[3], last[4].terminationReason], [0, true, false, 'too_many_errors']);
    for (const a of [null, 42, {}, '', [], { role: 'user', content: 'hi' }, { content: 7 }, { toolCalls: 'x' }]) {
      const e = new TauEnv({ tasks: retailSource });
      e.reset({ seed: 1 });
      const r = e.step(a as never);
      t.same([r[2], r[3], r[4].terminationReason], [true, false, 'agent_error'], `ends: ${JSON.stringify(a)}`);
      const { warnings, result } = captureWarnings(() => e.step('hello'));
      t.same([result[1], result[2], result[0]], [0, true, []], 'stepping after the end: no reward');
      t.match(warnings.join(), /already returned terminated/);
    }
    const raw = new TauEnv({ tasks: retailSource });
    raw.reset({ seed: 1 });
    const text = raw.step('Could you give me your email?');
    t.equal(text[0][0].role, 'user', 'plain text goes to the user');
    const tagged = raw.step(
      '<tool_call>{"name": "find_user_id_by_email", "arguments": {"email": "x@example.com"}}</tool_call>',
    );
    t.equal(tagged[0][0].role, 'tool', 'raw <tool_call> text runs the tool');
  },
);

t.test('truncated by the step limit, terminated by stops; agent stop with the done tool', async (t) => {
  const env = new TauEnv({ tasks: retailSource, maxSteps: 5 });
  env.reset({ seed: 1, options: { taskId: 'gen_0' } });
  let r = env.step('Hello, how can I help?');
  while (!(r[2] || r[3])) r = env.step('Could you tell me more?');
  t.same([r[1], r[2], r[3], r[4].terminationReason], [0, false, true, 'max_steps']);
  const stop = new TauEnv({ tasks: retailSource, agentStopTool: true });
  const [, info] = stop.reset({ seed: 1, options: { taskId: 'gen_0' } });
  t.ok((info.tools as { function: { name: string } }[]).some((x) => x.function.name === 'done'));
  t.ok(
    stop.actionSpace.contains({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'd', type: 'function', function: { name: 'done', arguments: '{}' } }],
    }),
  );
  const end = stop.step({
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'd', type: 'function', function: { name: 'done', arguments: '{}' } }],
  });
  t.same([end[2], end[3], end[4].terminationReason], [true, false, 'agent_stop']);
  t.ok(end[4].rewardInfo, 'graded');
  t.equal(end[1], (end[4].rewardInfo as { reward: number }).reward);
  t.same(stop.trajectory().at(-1), { role: 'assistant', content: '###STOP###' });
  const noStop = new TauEnv({ tasks: retailSource });
  noStop.reset({ seed: 1 });
  const dn = noStop.step({ toolCalls: [{ name: 'done', arguments: {} }] });
  t.equal(dn[4].errors, 1, 'without agentStopTool, done is an unknown tool');
  // a user that stops at once: the episode ends at reset
  const quitter: UserSimulator = { reset() {}, respond: () => ({ content: 'Never mind. ###STOP###' }) };
  const q = new TauEnv({ tasks: retailSource, user: quitter });
  const [qobs, qinfo] = q.reset({ seed: 1 });
  t.equal(qinfo.terminationReason, 'user_stop');
  t.equal(qobs.at(-1)?.content, 'Never mind. ###STOP###');
});

t.test('same seed, same trajectory', async (t) => {
  const play = (): unknown[] => {
    const env = make('sinkflex/TauRetail-v0', { tasks: retailSource });
    const raw = env.unwrapped as TauEnv;
    raw.actionSpace.seed(77);
    const out: unknown[] = [];
    for (let ep = 0; ep < 3; ep++) {
      const [obs] = env.reset({ seed: ep === 0 ? 42 : null });
      out.push(obs);
      const agent = new RandomAgent();
      agent.reset({ task: raw.currentTask!, tools: raw.tools, policy: '', seed: ep });
      let o = obs as ChatMessage[];
      for (let i = 0; i < 30; i++) {
        const r = env.step(agent.act(tauObs(o)) as never);
        o = r[0] as ChatMessage[];
        out.push(r);
        if (r[2] || r[3]) break;
      }
      out.push(raw.trajectory());
    }
    return out;
  };
  t.same(play(), play());
});

t.test(
  'LLM user: an AsyncTauEnv through makeAsync (make refuses), checkAsyncEnv, failures end with user_error',
  async (t) => {
    let calls = 0;
    const fakeFetch = (async (_url: string, init: { body: string }) => {
      calls++;
      const body = JSON.parse(init.body) as { messages: { role: string }[] };
      const turns = body.messages.filter((m) => m.role === 'assistant').length;
      const content = turns >= 2 ? 'Thanks, that is all. ###STOP###' : 'I would like to cancel an order.';
      return new Response(JSON.stringify({ choices: [{ message: { content } }] }), {
        status: 200,
        headers: { 'content-type': 'application/json' },
      });
    }) as unknown as typeof fetch;
    const user = { kind: 'llm' as const, model: 'fake', baseURL: 'http://fake/v1', fetch: fakeFetch, retries: 0 };
    t.throws(() => make('sinkflex/TauRetail-v0', { tasks: retailSource, user }), /makeAsync/);
    t.throws(() => new TauEnv({ tasks: retailSource, user }), TypeError);
    t.ok(createTauEnv({ tasks: retailSource, user }) instanceof AsyncTauEnv);
    const env = await makeAsync('sinkflex/TauRetail-v0', { tasks: retailSource, user });
    t.ok(env.unwrapped instanceof AsyncTauEnv);
    await checkAsyncEnv(env.unwrapped as AsyncTauEnv);
    const [obs, info] = await env.reset({ seed: 3 });
    t.same((obs as ChatMessage[])[1], { role: 'user', content: 'I would like to cancel an order.' });
    t.equal(info.domain, 'retail');
    let r = await env.step({ role: 'assistant', content: 'Sure, which one?' });
    t.notOk(r[2]);
    r = await env.step({ role: 'assistant', content: 'Done.' });
    t.same([r[2], r[4].terminationReason], [true, 'user_stop']);
    t.ok(calls >= 3);
    t.match(await (env.unwrapped as AsyncTauEnv).render(), null);
    const failing = (async () => new Response('down', { status: 503 })) as unknown as typeof fetch;
    const bad = new AsyncTauEnv({
      tasks: retailSource,
      user: { kind: 'llm', model: 'fake', fetch: failing, retries: 0 },
    });
    const [, binfo] = await bad.reset({ seed: 1 });
    t.equal(binfo.terminationReason, 'user_error', 'a user simulator failure ends the episode');
    const stop = new AsyncTauEnv({
      tasks: retailSource,
      user: { kind: 'llm', model: 'fake', fetch: fakeFetch },
      agentStopTool: true,
    });
    await stop.reset({ seed: 1 });
    const end = await stop.step({ toolCalls: [{ name: 'done', arguments: {} }] });
    t.same([end[2], end[4].terminationReason], [true, 'agent_stop']);
    const after = await captureWarningsAsync(() => stop.step('more'));
    t.same([after.result[1], after.result[2]], [0, true]);
    await stop.close();
    // a custom async simulator
    const asyncUser: UserSimulator = { reset() {}, respond: async () => ({ content: 'Bye ###STOP###' }) };
    const custom = createTauEnv({ tasks: retailSource, user: asyncUser, asyncUser: true }) as AsyncTauEnv;
    const [, cinfo] = await custom.reset({ seed: 1 });
    t.equal(cinfo.terminationReason, 'user_stop');
    t.equal(custom.trajectory().length, 2);
    t.equal(custom.currentTask?.id, cinfo.taskId);
    t.equal(custom.tools.length, 16);
    t.equal(custom.world.name, 'retail');
  },
);

const tau2Skip =
  existsSync(join(TAU2, 'retail')) && existsSync(join(TAU2, 'telecom'))
    ? false
    : `tau2 data not found at ${TAU2} (set SINKFLEX_TAU2_DIR)`;

t.test("tau2's files as the task source", { skip: tau2Skip }, async (t) => {
  t.throws(() => new TauEnv({ tasks: { kind: 'tau2', path: join(TAU2, 'retail'), split: 'train' } }), /LLM user/);
  const tel = make('sinkflex/TauTelecom-v0', { tasks: { kind: 'tau2', path: join(TAU2, 'telecom'), split: 'small' } });
  const raw = tel.unwrapped as TauEnv;
  t.equal(raw.world.tasks.length, 20);
  t.equal(raw.world.generated, false);
  const r = runAgent(tel, new ExpertTelecomAgent(), raw.world.taskIds[0], 1);
  t.equal(r.reward, 1, 'expert on a tau2 telecom task through the env');
  const prev = process.env.SINKFLEX_TAU2_DIR;
  process.env.SINKFLEX_TAU2_DIR = TAU2;
  try {
    const w = loadTauWorld('telecom', { kind: 'tau2', split: 'small' });
    t.equal(w, raw.world, 'SINKFLEX_TAU2_DIR/<domain> is the default path (same cached world)');
    delete process.env.SINKFLEX_TAU2_DIR;
    t.throws(() => loadTauWorld('telecom', { kind: 'tau2', split: 'small' }), /SINKFLEX_TAU2_DIR/);
  } finally {
    if (prev === undefined) delete process.env.SINKFLEX_TAU2_DIR;
    else process.env.SINKFLEX_TAU2_DIR = prev;
  }
  t.throws(() => loadTauWorld('retail', { kind: 'tau2', path: join(TAU2, 'nope') }), /not found/);
});

t.test(
  'a SyncVectorEnv over the tau env: batched observations, autoreset, experts reach reward 1 in every sub-env',
  async (t) => {
    const ids = ['gen_0', 'gen_1', 'gen_2'];
    const envs = new SyncVectorEnv(
      ids.map((taskId) => () => make('sinkflex/TauRetail-v0', { tasks: retailSource, taskId })),
    );
    t.equal(envs.numEnvs, 3);
    const [obs0, infos] = envs.reset({ seed: 21 }) as [ChatMessage[][], Info];
    let obs = obs0;
    t.equal(obs.length, 3);
    t.same(infos.taskId, ids);
    t.same(infos._taskId, [true, true, true]);
    const subs = envs.envs.map((e) => e.unwrapped as TauEnv);
    const agents = subs.map((raw, i) => {
      const a = new ExpertRetailAgent();
      a.reset({ task: raw.currentTask!, tools: raw.tools, policy: '', seed: 21 + i });
      return a;
    });
    const done = [false, false, false];
    const finalReward = [NaN, NaN, NaN];
    const resetSeen = [false, false, false];
    for (let step = 0; step < 250 && resetSeen.some((d) => !d); step++) {
      const actions = obs.map((o, i) => (done[i] ? 'idle' : agents[i].act(tauObs(o))));
      const wasDone = done.slice();
      const [next, rewards, terminated, truncated, info] = envs.step(actions as never);
      t.ok(rewards instanceof Float64Array);
      for (let i = 0; i < 3; i++) {
        if (wasDone[i] && !resetSeen[i]) {
          // NEXT_STEP autoreset: the step after the end starts a new episode of the same task
          resetSeen[i] = true;
          t.same([rewards[i], terminated[i], truncated[i]], [0, false, false]);
          t.equal((next as ChatMessage[][])[i][0].content, 'Hi! How can I help you today?');
          t.equal((info.taskId as unknown[])[i], ids[i]);
        } else if (!done[i] && (terminated[i] || truncated[i])) {
          done[i] = true;
          finalReward[i] = rewards[i];
          t.equal((info.terminationReason as unknown[])[i], 'user_stop');
          t.ok((info._rewardInfo as boolean[])[i]);
        }
      }
      obs = next as ChatMessage[][];
    }
    t.same(finalReward, [1, 1, 1]);
    t.same(resetSeen, [true, true, true]);
    envs.close();
  },
);
