/**
 * `sinkflex eval --env sinkflex/TauAirline-v0` with an OpenAI-compatible agent and the LLM user
 * simulator, both served by a local stand-in server: the agent only ever asks whether anything
 * else is needed; the user opens, then stops. Tasks whose gold actions change nothing and that
 * need nothing communicated score 1, the others 0, and pass^k follows.
 */
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import t from 'tap';

import { runEval } from '../../lib/cli/commands/eval.js';
import { listEnvs } from '../../lib/cli/commands/env.js';
import { AIRLINE_DIR } from './fixtures/airline.js';

const skip = existsSync(AIRLINE_DIR) ? false : `tau2 data not found at ${AIRLINE_DIR} (set SINKFLEX_TAU2_DIR)`;

t.test('env list shows sinkflex/TauAirline-v0 (not trainable)', async (t) => {
  t.same(
    listEnvs().find((r) => r.id === 'sinkflex/TauAirline-v0'),
    { id: 'sinkflex/TauAirline-v0', trainable: false, maxEpisodeSteps: null },
  );
});

t.test('eval --env sinkflex/TauAirline-v0: OpenAI agent, LLM user, pass^k', { skip }, async (t) => {
  const userPrompts: string[] = [];
  const s: Server = createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const body = JSON.parse(data) as { model: string; messages: { role: string; content: string | null }[] };
      let content: string;
      if (body.model === 'user-m') {
        userPrompts.push(body.messages[0].content ?? '');
        const spoke = body.messages.some((m) => m.role === 'assistant');
        content = spoke ? 'Thanks, that is all. ###STOP###' : 'Hi, I have a question about my reservation.';
      } else content = 'Is there anything else I can help you with?';
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          created: 0,
          model: body.model,
          choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => s.close(() => r())));
  const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}/v1`;
  const report = await runEval({
    policy: 'openai',
    model: 'agent-m',
    baseURL: [url],
    serverSessions: 'off',
    user: 'llm',
    userBaseURL: url,
    userModel: 'user-m',
    env: 'sinkflex/TauAirline-v0',
    tasks: AIRLINE_DIR,
    split: 'train',
    limitTasks: 3,
    trials: 2,
    concurrency: 2,
  });
  t.equal(report.env, 'sinkflex/TauAirline-v0');
  t.equal(report.problem, null);
  t.equal(report.episodes.length, 6);
  // tasks 0 and 1: nothing to change or communicate (reward 1); task 3 needs '4' communicated (reward 0)
  t.same(Object.fromEntries(report.episodes.map((e) => [e.taskId, e.reward])), { '0': 1, '1': 1, '3': 0 });
  t.equal(report.meanReward, 4 / 6);
  t.same(report.passHatK, { 1: 2 / 3, 2: 2 / 3 });
  t.ok(userPrompts.length >= 12, 'two user turns per episode');
  t.match(userPrompts.join('\n'), /EHGLP3/, "the user simulator is given the task's instructions");

  await t.rejects(
    runEval({
      policy: 'openai',
      model: 'agent-m',
      baseURL: [url],
      env: 'sinkflex/TauAirline-v0',
      tasks: AIRLINE_DIR,
      split: 'train',
    }),
    /needs --user llm/,
  );
  await t.rejects(
    runEval({
      policy: 'openai',
      model: 'agent-m',
      baseURL: [url],
      user: 'llm',
      userModel: 'u',
      env: 'sinkflex/TauAirline-v0',
      tasks: 'generated',
    }),
    /no generated tasks/,
  );
  await t.rejects(
    runEval({ policy: 'openai', model: 'agent-m', baseURL: [url], env: 'sinkflex/TauPlanes-v0' }),
    /unknown env sinkflex\/TauPlanes-v0 \(sinkflex\/TauRetail-v0, sinkflex\/TauTelecom-v0, sinkflex\/TauAirline-v0\)/,
  );
});
