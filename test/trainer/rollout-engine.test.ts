import { existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { serve } from '../../lib/cli/commands/serve.js';
import { runTrainCommand } from '../../lib/cli/commands/train.js';
import { ChatTemplate } from '../../lib/chat/index.js';
import { TransformerPolicy } from '../../lib/model/index.js';
import type { GenerativeModel, ModelSession, SampleOptions } from '../../lib/model/policy.js';
import { startChatServer, transformerWeightsHost, type AdapterHost, type ChatServer } from '../../lib/openai/index.js';
import { validateSavedConfig, DEFAULT_CONFIG } from '../../lib/trainer/config.js';
import { ConfigError, resolveConfig, train, type MetricsRow, type TrainConfig } from '../../lib/trainer/index.js';
import { sameMetrics } from './fixtures/same-metrics.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-engine-'));
const smoke: TrainConfig = resolveConfig({ preset: 'smoke' });

function readRows(out: string): MetricsRow[] {
  return readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as MetricsRow);
}

/** The in-process run every remote run is compared with. */
const local = join(tmp, 'local');
let localRows: MetricsRow[] = [];

t.before(async () => {
  await train(smoke, { out: local });
  localRows = readRows(local);
});

const remote = (servers: string[], extra: Partial<TrainConfig['rollout']> = {}): TrainConfig =>
  resolveConfig({
    preset: 'smoke',
    patches: [{ rollout: { engine: 'openai', servers, sessions: true, timeoutS: 30, retries: 3, ...extra } }],
  });

t.test(
  'the smoke preset with rollouts on two sinkflex serve processes gives the in-process run’s metrics',
  async (t) => {
    // two servers started from a checkpoint of another run (same tokenizer and architecture);
    // the trainer pushes its own weights before every rollout and validation
    const ref = join(local, 'reference.safetensors');
    const s1 = await serve({ checkpoint: ref, port: 0 });
    const s2 = await serve({ checkpoint: ref, port: 0 });
    t.teardown(async () => {
      await s1.dispose();
      await s2.dispose();
    });
    const out = join(tmp, 'remote');
    const warnings: string[] = [];
    const r = await train(remote([s1.baseURL, s2.baseURL]), {
      out,
      onEvent: (e) => e.kind === 'warning' && warnings.push(e.message),
    });
    t.equal(r.step, smoke.grpo.steps);
    t.same(warnings, []);
    const rows = readRows(out);
    sameMetrics(t, localRows, rows, 'remote sessions');
    const grpo = rows.filter((x) => x.phase === 'grpo');
    t.ok(
      grpo.every(
        (x) =>
          (x['rollout/remote_requests'] as number) > 0 &&
          x['rollout/remote_failures'] === 0 &&
          x['rollout/servers_up'] === 2,
      ),
      'every step sampled on the servers, none failed, both up',
    );
    t.ok(
      grpo.every(
        (x) =>
          typeof x['rollout/logprob_abs_diff'] === 'number' &&
          (x['rollout/logprob_abs_diff'] as number) < 1e-4 &&
          typeof x['timing_s/sync_weights'] === 'number',
      ),
      'the servers’ log-probs against the recomputed old log-probs are logged',
    );
    const served = [s1, s2].map((s) => s.routes.completions.stats.requests);
    t.ok(
      served.every((n) => n > 0),
      `episodes spread over both servers (${served.join(' + ')} requests)`,
    );
    t.ok(
      [s1, s2].some((s) => s.routes.completions.stats.continued > 0),
      'sessions were continued turn after turn',
    );
    t.notOk(existsSync(join(out, 'rollout-weights')), 'the weights files pushed to the servers are removed at the end');

    // without sessions each turn is its own seeded request (vLLM's way): a valid run, other samples
    const plain = join(tmp, 'remote-plain');
    const rp = await train(remote([s1.baseURL, s2.baseURL], { sessions: false }), { out: plain });
    t.equal(rp.step, smoke.grpo.steps, 'a run without sessions finishes');
  },
);

/** A model that serves `inner` until `kill()` is armed: its next sample closes the server (mid-request). */
class Killable implements GenerativeModel {
  armed = false;
  killed = false;
  server: ChatServer | null = null;
  constructor(readonly inner: TransformerPolicy) {}
  get vocabSize(): number {
    return this.inner.vocabSize;
  }
  get contextLength(): number {
    return this.inner.contextLength;
  }
  createSession(options?: { seed?: number }): ModelSession {
    const s = this.inner.createSession(options);
    return {
      get length() {
        return s.length;
      },
      append: (x: ArrayLike<number>) => s.append(x),
      sample: async (o: SampleOptions) => {
        if (this.armed && !this.killed && this.server) {
          this.killed = true;
          void this.server.dispose(); // drops every connection, this request's included
          return new Promise<never>(() => undefined);
        }
        return s.sample(o);
      },
      dispose: () => s.dispose(),
    };
  }
  generate(): never {
    throw new Error('not used');
  }
}

t.test('killing one server mid-run: its episodes are retried on the other and the run finishes', async (t) => {
  const ref = join(local, 'reference.safetensors');
  const survivor = await serve({ checkpoint: ref, port: 0 });
  const inner = TransformerPolicy.load(ref);
  const victim = new Killable(inner);
  const doomed = await startChatServer({
    policy: victim,
    chat: new ChatTemplate(inner.tokenizer as NonNullable<typeof inner.tokenizer>),
    port: 0,
    weights: transformerWeightsHost(inner),
  });
  victim.server = doomed;
  t.teardown(async () => {
    await survivor.dispose();
    await doomed.dispose();
    inner.dispose();
  });
  const out = join(tmp, 'killed');
  const warnings: string[] = [];
  const r = await train(remote([doomed.baseURL, survivor.baseURL]), {
    out,
    onEvent: (e) => {
      if (e.kind === 'warning') warnings.push(e.message);
      // after GRPO step 1, the server dies during its next request
      if (e.kind === 'grpo' && e.step === 1) victim.armed = true;
    },
  });
  t.ok(victim.killed, 'the server was killed in the middle of a request');
  t.equal(r.step, smoke.grpo.steps, 'the run finished');
  const rows = readRows(out);
  const grpo = rows.filter((x) => x.phase === 'grpo');
  t.ok(
    grpo.every((x) => x['rollout/aborted'] === 0 && x['rollout/remote_failures'] === 0),
    'no episode was lost: every request that failed was retried on the other server',
  );
  const retried = rows.reduce((a, x) => a + ((x['rollout/remote_retries'] as number | undefined) ?? 0), 0);
  t.ok(retried >= 1, `the retries are counted (${retried})`);
  t.equal(grpo[grpo.length - 1]['rollout/servers_up'], 1, 'the dead server is out of routing');
  t.ok(
    warnings.some((w) => w.includes(doomed.baseURL) && /did not take the weights/.test(w)),
    'a warning names the server that missed the weights',
  );
  sameMetrics(
    t,
    localRows.filter((x) => x.step === 0 || (x.phase === 'grpo' && x.step === 1)),
    rows.filter((x) => x.step === 0 || (x.phase === 'grpo' && x.step === 1)),
    'before the kill',
  );
});

t.test(
  'a server that misses one sync is out of routing for that step and back at the next; results do not depend on routing',
  async (t) => {
    const ref = join(local, 'reference.safetensors');
    const steady = await serve({ checkpoint: ref, port: 0 });
    const inner = TransformerPolicy.load(ref);
    const host = transformerWeightsHost(inner);
    let loads = 0;
    const flaky = await startChatServer({
      policy: inner,
      chat: new ChatTemplate(inner.tokenizer as NonNullable<typeof inner.tokenizer>),
      port: 0,
      weights: { load: async (path) => (++loads === 2 ? Promise.reject(new Error('disk full')) : host.load(path)) },
    });
    t.teardown(async () => {
      await steady.dispose();
      await flaky.dispose();
      inner.dispose();
    });
    const out = join(tmp, 'flaky');
    const warnings: string[] = [];
    await train(remote([flaky.baseURL, steady.baseURL]), {
      out,
      onEvent: (e) => e.kind === 'warning' && warnings.push(e.message),
    });
    t.equal(warnings.length, 2, warnings.join('\n'));
    t.match(warnings[0], /did not take the weights of step 1 and is out of routing .*disk full/);
    t.match(warnings[1], /took the weights of step 2 and is back in routing/);
    const rows = readRows(out);
    t.same(
      rows.filter((x) => x.phase === 'grpo').map((x) => x['rollout/servers_up']),
      [2, 1, 2],
      'servers in routing per step',
    );
    sameMetrics(t, localRows, rows, 'with a server out of routing for a step');
  },
);

t.test(
  'adapters: one per step, loaded into every server under its own name, named by the next rollouts, the old one unloaded',
  async (t) => {
    // The built-in model has no LoRA yet: the published "adapter" is a full checkpoint and the
    // host serves it as its own model, which exercises the trainer's adapter protocol end to end.
    const hosts: { calls: string[]; host: AdapterHost; dispose: () => void }[] = [0, 1].map(() => {
      const calls: string[] = [];
      const loaded = new Map<string, TransformerPolicy>();
      return {
        calls,
        host: {
          load: async (name, path) => {
            calls.push(`load ${name}`);
            loaded.get(name)?.dispose();
            loaded.set(name, TransformerPolicy.load(path));
          },
          unload: async (name) => {
            calls.push(`unload ${name}`);
            loaded.get(name)?.dispose();
            loaded.delete(name);
          },
          list: () => [...loaded.keys()],
          model: (name) => loaded.get(name),
        },
        dispose: () => {
          for (const p of loaded.values()) p.dispose();
        },
      };
    });
    const ref = join(local, 'reference.safetensors');
    const servers = await Promise.all(hosts.map((h) => serve({ checkpoint: ref, port: 0, adapters: h.host })));
    t.teardown(async () => {
      for (const s of servers) await s.dispose();
      for (const h of hosts) h.dispose();
    });
    const out = join(tmp, 'adapters');
    const published: number[] = [];
    const r = await train(remote(servers.map((s) => s.baseURL)), {
      out,
      publishAdapter: async (step, policy, runDir) => {
        published.push(step);
        t.equal(runDir, out);
        mkdirSync(join(tmp, 'published'), { recursive: true });
        const file = join(tmp, 'published', `step-${step}.safetensors`);
        policy.save(file, { optimizer: false });
        return file;
      },
    });
    t.equal(r.step, smoke.grpo.steps);
    t.same(published, [0, 1, 2, 3], 'one adapter per policy: after SFT and after each GRPO step');
    const names = published.map((k) => `adapters-step-${k}`);
    for (const h of hosts) {
      t.same(
        h.calls,
        [
          `load ${names[0]}`,
          `load ${names[1]}`,
          `unload ${names[0]}`,
          `load ${names[2]}`,
          `unload ${names[1]}`,
          `load ${names[3]}`,
          `unload ${names[2]}`,
        ],
        'every server loads each adapter, then unloads the previous one',
      );
    }
    t.ok(servers.every((s) => s.routes.completions.stats.requests > 0));
    sameMetrics(t, localRows, readRows(out), 'adapters reloaded at every step');
  },
);

t.test('a server that answers without log-probs stops the run with a clear error', async (t) => {
  const srv: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const send = (status: number, x: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(x));
      };
      if (req.url === '/v1/models') send(200, { object: 'list', data: [{ id: 'm', object: 'model' }] });
      else if (req.url === '/update_weights_from_disk') send(200, { success: true, message: 'ok' });
      else if (req.url === '/v1/completions') send(200, { choices: [{ index: 0, text: 'hi', finish_reason: 'stop' }] });
      else send(404, { detail: 'Not Found' });
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => srv.close());
  const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/v1`;
  await t.rejects(train(remote([url]), { out: join(tmp, 'no-logprobs') }), {
    name: 'CompletionFormatError',
    message: /rollout server http:\/\/127\.0\.0\.1:\d+\/v1 answered a completion without log-probs/,
  });
  await t.rejects(
    train(remote(['http://127.0.0.1:1/v1']), { out: join(tmp, 'unreachable') }),
    /rollout\.model: cannot learn the served model's name from the servers/,
    'no reachable server: a clear error',
  );
  await t.rejects(
    train(remote(['http://127.0.0.1:1/v1'], { model: 'm' }), { out: join(tmp, 'unreachable2') }),
    /rollout\.servers: no server took the weights of step 0: http:\/\/127\.0\.0\.1:1\/v1: /,
    'no server takes the weights: a clear error',
  );
  t.notOk(existsSync(join(tmp, 'unreachable2', 'config.json')), 'a failed start leaves no run behind');
});

t.test('rollout.engine in the configuration: errors name the field; saved runs without it read as local', async (t) => {
  t.throws(() => resolveConfig({ preset: 'smoke', patches: [{ rollout: { engine: 'openai' } }] }), {
    name: 'ConfigError',
    message: /rollout\.servers: give at least one server base URL/,
  });
  t.throws(() => resolveConfig({ patches: [{ rollout: { engine: 'tgi' } }] }), /rollout\.engine/);
  t.throws(
    () => resolveConfig({ preset: 'smoke', patches: [{ rollout: { engine: 'sglang' } }] }),
    /rollout\.servers: .* for rollout\.engine 'sglang'/,
  );
  t.throws(
    () => resolveConfig({ patches: [{ rollout: { engine: 'openai', servers: ['localhost:8000'] } }] }),
    /rollout\.servers\.0: must be an http\(s\) base URL/,
  );
  t.throws(() => resolveConfig({ patches: [{ rollout: { timeoutS: 0 } }] }), /rollout\.timeoutS/);
  t.throws(() => resolveConfig({ patches: [{ rollout: { sessions: 'yes' } }] }), /rollout\.sessions/);
  t.ok(new ConfigError('x') instanceof Error);
  const saved = JSON.parse(JSON.stringify(DEFAULT_CONFIG)) as { rollout: Record<string, unknown> };
  for (const k of ['engine', 'servers', 'sessions', 'model', 'timeoutS', 'retries', 'syncTimeoutS', 'maxLogprobDiff'])
    delete saved.rollout[k];
  const c = validateSavedConfig(saved);
  t.equal(c.rollout.engine, 'local', 'a config.json from before the engine reads as local');
  t.equal(c.rollout.maxLogprobDiff, 1e-2, 'and one from before the on-policy check gets its default bound');
  t.same(c.rollout.servers, []);
  t.same(validateSavedConfig(DEFAULT_CONFIG), DEFAULT_CONFIG);
});

t.test(
  'the CLI flow of the docs: SFT only (--stop-after 0), serve that run, resume with the rollout engine on the servers',
  async (t) => {
    const out = join(tmp, 'cli');
    const quiet = {
      stdout: { isTTY: false, columns: 80, write: () => true },
      stderr: { isTTY: false, columns: 80, write: () => true },
    };
    const r0 = await runTrainCommand({ preset: 'smoke', out, stopAfter: '0', progress: false }, () => undefined, quiet);
    t.equal(r0.step, 0, '--stop-after 0 stops after SFT (and its checkpoint)');
    const s1 = await serve({ checkpoint: out, port: 0 });
    const s2 = await serve({ checkpoint: out, port: 0 });
    t.teardown(async () => {
      await s1.dispose();
      await s2.dispose();
    });
    await t.rejects(
      runTrainCommand({ resume: out, set: ['grpo.lr=0.1'] }, () => undefined, quiet),
      {
        name: 'ConfigError',
        message:
          /^--set cannot be used with --resume: grpo\.lr is not a rollout engine field; .*rollout\.engine, rollout\.servers/,
      },
      'only the rollout engine fields change on resume',
    );
    await t.rejects(
      runTrainCommand({ resume: out, set: ['rollout.n=4'] }, () => undefined, quiet),
      /rollout\.n is not a rollout engine field/,
    );
    await t.rejects(
      runTrainCommand({ resume: out, set: ['rollout.engine=openai'] }, () => undefined, quiet),
      /rollout\.servers: give at least one server/,
      'the changed configuration is validated',
    );
    t.equal(
      JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).rollout.engine,
      'local',
      'a refused resume changes nothing',
    );
    const r = await runTrainCommand(
      {
        resume: out,
        set: [
          'rollout.engine=openai',
          `rollout.servers=${JSON.stringify([s1.baseURL, s2.baseURL])}`,
          'rollout.sessions=true',
        ],
      },
      () => undefined,
      quiet,
    );
    t.equal(r.step, smoke.grpo.steps);
    const saved = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as TrainConfig;
    t.same(
      [saved.rollout.engine, saved.rollout.servers, saved.rollout.sessions],
      ['openai', [s1.baseURL, s2.baseURL], true],
      'the new engine is saved with the run',
    );
    sameMetrics(t, localRows, readRows(out), 'SFT in process, GRPO on the servers');
  },
);
