import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { resolveConfig } from '../../lib/trainer/index.js';
import { createRolloutEngine } from '../../lib/trainer/rollout-engine.js';
import { template, tinyPolicy } from '../openai/fixtures/setup.js';

const tpl = template();

/** A fake SGLang-like server: admin routes at the root only, completions with `token_ids`. */
async function sglangLike(): Promise<{ url: string; calls: string[]; close: () => void }> {
  const calls: string[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      const send = (status: number, x: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(x));
      };
      calls.push(
        `${req.method} ${req.url}${body.lora_name ? ` ${String(body.lora_name)}` : ''}${req.url === '/v1/completions' ? ` model=${String(body.model)}` : ''}`,
      );
      if (req.url === '/v1/models') send(200, { object: 'list', data: [{ id: 'qwen', object: 'model' }] });
      else if (req.url === '/load_lora_adapter' || req.url === '/unload_lora_adapter')
        send(200, { success: true, error_message: null, loaded_adapters: {} });
      else if (req.url === '/v1/completions')
        send(200, {
          choices: [
            {
              index: 0,
              text: 'x',
              finish_reason: 'stop',
              token_ids: [tpl.stopTokens[0]],
              logprobs: { tokens: ['<end>'], token_logprobs: [-0.5] },
            },
          ],
        });
      else send(404, { detail: 'Not Found' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, calls, close: () => server.close() };
}

t.test(
  'adapter sync: SGLang’s root routes when /v1 has none, per-step names, the previous adapter unloaded, requests name the new one',
  async (t) => {
    const srv = await sglangLike();
    const policy = tinyPolicy(1);
    t.teardown(() => {
      srv.close();
      policy.dispose();
    });
    const out = join(mkdtempSync(join(tmpdir(), 'sfx-sync-')), 'my run');
    const config = resolveConfig({
      patches: [{ rollout: { engine: 'openai', servers: [srv.url], timeoutS: 5, retries: 0 } }],
    });
    const published: number[] = [];
    const engine = createRolloutEngine({
      config,
      policy,
      chat: tpl,
      out,
      publishAdapter: async (step) => (published.push(step), `/adapters/${step}`),
    });
    t.equal(engine.kind, 'openai');
    await engine.sync(0);
    await engine.sync(0);
    t.same(published, [0], 'one publication per step');
    const s = engine.policy.createSession({ taskId: 't', seed: 1, envInfo: {} });
    s.append([1, 2]);
    const r = await s.sample({ maxTokens: 4, stop: tpl.stopTokens, seed: 3 });
    t.same(Array.from(r.tokens), [tpl.stopTokens[0]], 'token_ids are read when the tokens are not token_id:<n>');
    s.dispose();
    await engine.sync(1);
    t.same(
      srv.calls,
      [
        'GET /v1/models',
        'POST /v1/load_lora_adapter my-run-step-0',
        'POST /load_lora_adapter my-run-step-0',
        'POST /v1/completions model=my-run-step-0',
        'POST /v1/completions model=my-run-step-0',
        'POST /load_lora_adapter my-run-step-1',
        'POST /unload_lora_adapter my-run-step-0',
      ],
      'the base name learned from /v1/models, then the root routes once /v1 answered 404',
    );
    t.same(engine.takeMetrics(), {
      'rollout/remote_requests': 1,
      'rollout/remote_failures': 0,
      'rollout/remote_retries': 0,
      'rollout/servers_up': 1,
    });
    t.same(engine.takeMetrics()['rollout/remote_requests'], 0, 'counters since the last call');
    engine.dispose();
  },
);

t.test(
  'adapter sync: a 404 about the adapter (vLLM: "No adapter found") is the route’s answer, not a missing route',
  async (t) => {
    const calls: string[] = [];
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        calls.push(`${req.method} ${req.url}`);
        const send = (status: number, x: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(x));
        };
        if (req.url === '/v1/models') send(200, { object: 'list', data: [{ id: 'qwen', object: 'model' }] });
        else if (req.url === '/v1/load_lora_adapter')
          send(404, {
            error: {
              message: 'Loading lora run-step-0 failed: No adapter found for /adapters/0',
              type: 'NotFoundError',
              param: null,
              code: 404,
            },
          });
        else send(404, { detail: 'Not Found' });
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    const policy = tinyPolicy(1);
    t.teardown(() => {
      server.close();
      policy.dispose();
    });
    const out = join(mkdtempSync(join(tmpdir(), 'sfx-sync-')), 'run');
    const config = resolveConfig({
      patches: [{ rollout: { engine: 'openai', servers: [url], timeoutS: 5, retries: 0 } }],
    });
    const engine = createRolloutEngine({
      config,
      policy,
      chat: tpl,
      out,
      publishAdapter: async (step) => `/adapters/${step}`,
    });
    await t.rejects(
      engine.sync(0),
      /no server took the adapter run-step-0 of step 0: .*POST \/load_lora_adapter answered 404: .*No adapter found for \/adapters\/0/,
      'the server’s reason, without the hint about a missing route',
    );
    t.same(calls, ['GET /v1/models', 'POST /v1/load_lora_adapter'], 'the root route is not tried');
    engine.dispose();
  },
);

t.test('the local engine: the trainer’s own policy, nothing to sync', async (t) => {
  const policy = tinyPolicy(1);
  t.teardown(() => policy.dispose());
  const engine = createRolloutEngine({ config: resolveConfig(), policy, chat: tpl, out: tmpdir() });
  t.equal(engine.kind, 'local');
  await engine.sync(3);
  t.same(engine.takeMetrics(), {});
  const s = engine.policy.createSession({ taskId: 't', seed: 1, envInfo: {} });
  s.append([1, 2]);
  const r = await s.sample({ maxTokens: 3 });
  t.ok(r.tokens.length > 0);
  s.dispose();
  engine.dispose();
});
