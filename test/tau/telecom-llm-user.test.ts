import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

import t from 'tap';

import type { Message } from '../../lib/tau/index.js';
import {
  createTelecomDomain,
  generateTelecomDb,
  generateTelecomTasks,
  LlmUserSimulator,
  TauEpisode,
} from '../../lib/tau/index.js';
import { flipRoles } from '../../lib/tau/users/llm.js';

type Body = {
  messages: {
    role: string;
    content: string | null;
    tool_calls?: { function: { name: string; arguments: string } }[];
    tool_call_id?: string;
  }[];
  tools?: { function: { name: string } }[];
};

t.test('an LLM user with tools on its own phone (dual control), over a local OpenAI-compatible server', async (t) => {
  const bodies: Body[] = [];
  const server = createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const body = JSON.parse(data) as Body;
      bodies.push(body);
      const last = body.messages[body.messages.length - 1];
      let message: Record<string, unknown>;
      if (body.messages.length === 2) message = { role: 'assistant', content: "My phone shows 'No Service'." };
      else if (last.role === 'user' && /check_status_bar/.test(last.content ?? '')) {
        message = {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'x1', type: 'function', function: { name: 'check_status_bar', arguments: '{}' } }],
        };
      } else if (last.role === 'tool') message = { role: 'assistant', content: `It says: ${last.content} ###STOP###` };
      else message = { role: 'assistant', content: 'Okay.' };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ choices: [{ message }] }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;

  const db = generateTelecomDb({ seed: 2, customers: 10 });
  const task = generateTelecomTasks(db, { seed: 2, count: 1, categories: { mobile_data: 0, mms: 0 } })[0];
  const user = new LlmUserSimulator({ baseURL, model: 'm', apiKey: 'k', timeoutMs: 30000 });
  const ep = new TauEpisode(createTelecomDomain({ db }), { user });
  let step = await ep.reset(task, 0);
  t.equal(step.observation.at(-1)?.content, "My phone shows 'No Service'.");
  t.same(bodies[0].tools?.length, 30, 'the user tools are offered to the model');
  t.match(bodies[0].messages[0].content, /Your own device/);
  step = await ep.act('Please run check_status_bar on your phone and tell me what it shows.');
  t.equal(step.done, true);
  t.equal(step.stopMarker, '###STOP###');
  t.same(
    step.observation.map((m) => m.role),
    ['user'],
    'the agent sees only the user text, not its tool call',
  );
  t.match(String(step.observation[0].content), /It says: Status Bar: /);
  const traj = ep.trajectory();
  t.ok(
    traj.some(
      (m) => m.role === 'user' && m.toolCalls?.[0]?.name === 'check_status_bar' && m.toolCalls[0].requestor === 'user',
    ),
  );
  const withTool = bodies[bodies.length - 1].messages;
  t.same(
    withTool.slice(1).map((m) => m.role),
    ['user', 'assistant', 'user', 'assistant', 'tool'],
    'its own call and result are in its chat',
  );
  t.equal(withTool[4].tool_calls?.[0].function.name, 'check_status_bar');

  const hist: Message[] = [
    { role: 'assistant', content: 'Hi' },
    {
      role: 'assistant',
      content: null,
      toolCalls: [{ id: 'a', name: 'get_customer_by_phone', arguments: {}, requestor: 'assistant' }],
    },
    { role: 'tool', id: 'a', content: '{}', requestor: 'assistant', error: false },
  ];
  t.same(
    flipRoles('s', hist).map((m) => m.role),
    ['system', 'user'],
    "the agent's tool traffic is hidden from the user",
  );
});
