import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

import t from 'tap';

import {
  createRetailDomain,
  ExpertRetailAgent,
  generateRetailDb,
  generateRetailTasks,
  LlmUserError,
  LlmUserSimulator,
  runEpisode,
  TauEpisode,
} from '../../lib/tau/index.js';

t.test('LLM user over a local OpenAI-compatible server: roles flipped, retries, timeout', async (t) => {
  const bodies: { messages: { role: string; content: string }[]; model: string }[] = [];
  let calls = 0;
  let mode: 'ok' | 'flaky' | 'slow' | 'bad' = 'ok';
  const server = createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      calls++;
      const body = JSON.parse(data);
      bodies.push(body);
      if (req.headers.authorization !== 'Bearer k') {
        res.writeHead(401).end('no');
        return;
      }
      if (mode === 'bad') {
        res.writeHead(400).end('bad request');
        return;
      }
      if (mode === 'flaky' && calls % 2 === 1) {
        res.writeHead(503).end('busy');
        return;
      }
      if (mode === 'slow') return; // never answers
      const n = body.messages.filter((m: { role: string }) => m.role === 'assistant').length;
      const content = n === 0 ? 'Hi, I want to cancel an order.' : '###STOP###';
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ choices: [{ message: { role: 'assistant', content } }] }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;

  const db = generateRetailDb({ seed: 3, users: 50, orders: 100 });
  const tasks = generateRetailTasks(db, {
    seed: 3,
    count: 3,
    weights: {
      cancel: 1,
      modify_address: 0,
      modify_payment: 0,
      modify_items: 0,
      return: 0,
      exchange: 0,
      user_address: 0,
      lookup_tracking: 0,
      lookup_price: 0,
      refuse: 0,
      transfer: 0,
    },
  });
  // a generous timeout where answers are expected (a loaded CI machine can be slow), a short one for the timeout checks
  const user = new LlmUserSimulator({ baseURL, model: 'm', apiKey: 'k', retries: 2, backoffMs: 1, timeoutMs: 20000 });
  const impatient = new LlmUserSimulator({
    baseURL,
    model: 'm',
    apiKey: 'k',
    retries: 2,
    backoffMs: 1,
    timeoutMs: 300,
  });
  const ep = new TauEpisode(createRetailDomain({ db }), { user });
  const r = await runEpisode(ep, new ExpertRetailAgent(), tasks[0], 0);
  t.equal(r.final.terminationReason, 'user_stop');
  t.equal(r.final.reward, 0, 'the user left before anything was done');
  t.match(bodies[0].messages[0].content, /###STOP###/);
  t.match(bodies[0].messages[0].content, /<scenario>/);
  t.same(
    bodies[0].messages.slice(1).map((m) => m.role),
    ['user'],
    "greeting sent as the simulator's user turn",
  );
  t.same(
    bodies[1].messages.slice(1).map((m) => m.role),
    ['user', 'assistant', 'user'],
    'roles flipped',
  );

  mode = 'flaky';
  calls = 0;
  const reply = await user.respond({
    history: [{ role: 'assistant', content: 'Hi' }],
    agentText: 'Hi',
    toolResults: [],
  });
  t.equal(reply.content, 'Hi, I want to cancel an order.');
  t.equal(calls, 2, 'one retry after a 503');

  mode = 'slow';
  await t.rejects(
    impatient.respond({ history: [], agentText: '', toolResults: [] }),
    LlmUserError,
    'times out after retries',
  );
  mode = 'bad';
  calls = 0;
  await t.rejects(user.respond({ history: [], agentText: '', toolResults: [] }), { message: /answered 400/ });
  t.equal(calls, 1, 'client errors are not retried');
  mode = 'slow';
  const ep2 = new TauEpisode(createRetailDomain({ db }), { user: impatient });
  t.equal(
    (await ep2.reset(tasks[0], 0)).terminationReason,
    'user_error',
    'endpoint failure ends the episode as user_error',
  );
  t.throws(() => new LlmUserSimulator({ baseURL }), /no model/);
});
