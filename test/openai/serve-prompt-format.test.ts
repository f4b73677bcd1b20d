/**
 * The run's prompt format decides how tools reach a served model: a run trained without the
 * tools section (`prompt.renderTools = false`) ignores request `tools` for the prompt (so a
 * standard agent client's tool list does not overflow its context) and still parses tool calls.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import { serve } from '../../lib/cli/commands/serve.js';
import { startChatServer } from '../../lib/openai/index.js';
import { saveRunCheckpoint } from '../../lib/trainer/checkpoint.js';
import { resolveConfig } from '../../lib/trainer/config.js';
import { ScriptedModelPolicy, template, tinyCheckpoint, tinyPolicy } from './fixtures/setup.js';

const tpl = template();

/** A tool list like a standard agent client's: far more tokens than the tiny model's context. */
const manyTools = Array.from({ length: 40 }, (_, i) => ({
  type: 'function',
  function: {
    name: `tool_${i}`,
    description: `Tool number ${i}: looks up orders, users and products, and explains in detail what it returns and when to use it.`,
    parameters: {
      type: 'object',
      properties: {
        order_id: { type: 'string', description: 'The order id, such as #W0000000.' },
        user_id: { type: 'string' },
      },
      required: ['order_id'],
    },
  },
}));

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

t.test('renderTools: false leaves request tools out of the prompt and still parses tool calls', async (t) => {
  const messages = [
    { role: 'system', content: 'You help retail customers.' },
    { role: 'user', content: 'Where is my order #W0000001?' },
  ];
  t.ok(
    tpl.render(messages as never, { tools: manyTools, addGenerationPrompt: true }).length > 4096,
    'the tools alone overflow a 4096-token context',
  );
  const policy = tinyPolicy(2);
  const withTools = await startChatServer({ policy, chat: tpl, port: 0 });
  const without = await startChatServer({ policy, chat: tpl, port: 0, renderTools: false });
  t.teardown(async () => {
    await withTools.dispose();
    await without.dispose();
    policy.dispose();
  });
  const req = { model: 'sinkflex', messages, tools: manyTools, max_tokens: 8, seed: 1, return_token_ids: true };
  const a = await post(`${withTools.baseURL}/chat/completions`, req);
  t.equal(a.status, 400);
  t.match(a.json.error, { code: 400, message: /context/ }, 'rendered, the tools do not fit');
  const b = await post(`${without.baseURL}/chat/completions`, req);
  t.equal(b.status, 200, 'not rendered, the request is served');
  t.same(
    b.json.prompt_token_ids,
    tpl.render(messages as never, { addGenerationPrompt: true }),
    'the prompt has no tools section',
  );

  const call = {
    role: 'assistant' as const,
    content: null,
    tool_calls: [{ type: 'function' as const, function: { name: 'tool_3', arguments: '{"order_id":"#W0000001"}' } }],
  };
  const scripted = new ScriptedModelPolicy(tpl, [call, { role: 'assistant', content: 'It ships tomorrow.' }]);
  const server = await startChatServer({ policy: scripted, chat: tpl, port: 0, renderTools: false });
  t.teardown(() => server.dispose());
  const r1 = await post(`${server.baseURL}/chat/completions`, {
    model: 'sinkflex',
    messages,
    tools: manyTools,
    seed: 3,
    session_id: 'c',
  });
  const c1 = (
    r1.json.choices as {
      finish_reason: string;
      message: { tool_calls: { id: string; function: { name: string; arguments: string } }[] };
    }[]
  )[0];
  t.equal(c1.finish_reason, 'tool_calls', 'the tool call is parsed');
  t.same(
    c1.message.tool_calls.map((c) => [c.function.name, c.function.arguments]),
    [['tool_3', '{"order_id":"#W0000001"}']],
  );
  t.same(scripted.contexts[0], tpl.render(messages as never, { addGenerationPrompt: true }), 'no tools section');
  // the kept conversation continues although the client sends (other) tools: they are not part of the prompt
  const next = [
    ...messages,
    { role: 'assistant', content: null, tool_calls: c1.message.tool_calls.map((c) => ({ ...c, type: 'function' })) },
    { role: 'tool', tool_call_id: c1.message.tool_calls[0].id, content: 'shipped' },
  ];
  const r2 = await post(`${server.baseURL}/chat/completions`, {
    model: 'sinkflex',
    messages: next,
    tools: manyTools.slice(0, 3),
    seed: 3,
    session_id: 'c',
  });
  t.equal(r2.status, 200);
  t.equal(server.engine.stats.continued, 1, 'the conversation was continued');
  t.throws(
    () => new (server.engine.constructor as new (...a: unknown[]) => unknown)(scripted, tpl, { renderTools: 'no' }),
    TypeError,
  );
});

t.test('sinkflex serve takes the prompt format of the run it serves', async (t) => {
  const policy = tinyPolicy(7);
  const dir = await tinyCheckpoint(7);
  const config = resolveConfig({ preset: 'smoke', patches: [{ prompt: { renderTools: false } }] });
  const ckpt = saveRunCheckpoint(
    join(dir, 'run'),
    policy,
    config,
    { step: 2, sftDone: true, skippedSteps: 0, abortedEpisodes: 0, elapsedS: 1 },
    1,
  );
  writeFileSync(join(dir, 'run', 'config.json'), JSON.stringify(config)); // a run folder
  policy.dispose();
  const messages = [{ role: 'user', content: 'hello' }];
  const req = { model: 'sinkflex', messages, tools: manyTools, max_tokens: 4, seed: 1, return_token_ids: true };
  for (const [path, mode, expected] of [
    [ckpt, undefined, false],
    [join(dir, 'run'), 'auto', false],
    [ckpt, 'on', true],
    [join(dir, 'step-0.safetensors'), undefined, true],
    [join(dir, 'step-0.safetensors'), 'off', false],
  ] as const) {
    const s = await serve({ checkpoint: path, port: 0, toolsSection: mode });
    try {
      t.equal(
        s.renderTools,
        expected,
        `${path.slice(dir.length)} ${mode ?? '(default)'}: tools ${expected ? '' : 'not '}rendered`,
      );
      const r = await post(`${s.baseURL}/chat/completions`, req);
      t.equal(
        r.status,
        expected ? 400 : 200,
        expected ? 'the tools overflow the context' : 'served without the tools section',
      );
    } finally {
      await s.dispose();
    }
  }
  await t.rejects(serve({ checkpoint: ckpt, port: 0, toolsSection: 'maybe' as never }), /--tools-section/);
});
