import t from 'tap';

import type { TransformerPolicy } from '../../lib/model/index.js';
import type { GenerativeModel } from '../../lib/model/policy.js';
import { startChatServer, type AdapterHost } from '../../lib/openai/index.js';
import { postJson, template, tinyPolicy } from './fixtures/setup.js';

const tpl = template();

const post = postJson;

/**
 * A host whose "adapters" are other tiny policies (one per path), to test the HTTP protocol; a
 * real LoRA host applies a PEFT adapter to the base model.
 */
class FakeHost implements AdapterHost {
  readonly calls: string[] = [];
  private readonly loaded = new Map<string, TransformerPolicy>();
  async load(name: string, path: string): Promise<void> {
    this.calls.push(`load ${name} ${path}`);
    const m = /^\/adapters\/seed-(\d+)$/.exec(path);
    if (!m) throw new Error(`no adapter at ${path} (adapter_config.json is missing)`);
    this.loaded.get(name)?.dispose();
    this.loaded.set(name, tinyPolicy(Number(m[1])));
  }
  async unload(name: string): Promise<void> {
    this.calls.push(`unload ${name}`);
    this.loaded.get(name)?.dispose();
    this.loaded.delete(name);
  }
  list(): string[] {
    return [...this.loaded.keys()];
  }
  model(name: string): GenerativeModel | undefined {
    return this.loaded.get(name);
  }
  dispose(): void {
    for (const p of this.loaded.values()) p.dispose();
  }
}

const prompt = tpl.render([{ role: 'user', content: 'Hello, I want to return an item.' }], {
  addGenerationPrompt: true,
});

async function sampleOf(policy: GenerativeModel, seed: number): Promise<number[]> {
  const s = policy.createSession({ seed });
  s.append(prompt);
  const r = await s.sample({ maxTokens: 8, temperature: 1, stop: tpl.stopTokens });
  s.dispose();
  return Array.from(r.tokens);
}

t.test(
  'runtime LoRA routes: vLLM’s requests, answers and errors; requests name the adapter; the models list shows it',
  async (t) => {
    const base = tinyPolicy(2);
    const host = new FakeHost();
    const server = await startChatServer({ policy: base, chat: tpl, port: 0, modelName: 'base', adapters: host });
    t.teardown(async () => {
      await server.dispose();
      host.dispose();
      base.dispose();
    });
    const v1 = server.baseURL;
    const load = (body: unknown) => post(`${v1}/load_lora_adapter`, body);
    const unload = (body: unknown) => post(`${v1}/unload_lora_adapter`, body);
    const complete = (model: string) =>
      post(`${v1}/completions`, {
        model,
        prompt,
        max_tokens: 8,
        seed: 3,
        return_token_ids: true,
        stop_token_ids: tpl.stopTokens,
      });

    const ok = await load({ lora_name: 'step-1', lora_path: '/adapters/seed-7' });
    t.equal(ok.status, 200);
    t.equal(ok.text, "Success: LoRA adapter 'step-1' added successfully.", "vLLM's plain-text answer");
    t.match(ok.type, /text\/plain/);
    const models = (await (await fetch(`${v1}/models`)).json()) as { data: Record<string, unknown>[] };
    t.same(
      models.data.map((m) => [m.id, m.parent, m.root]),
      [
        ['base', null, 'base'],
        ['step-1', 'base', '/adapters/seed-7'],
      ],
      'the models list: the base model, then the adapter with its parent and path',
    );
    const viaAdapter = await complete('step-1');
    t.equal(viaAdapter.status, 200);
    t.equal(viaAdapter.json.model, 'step-1');
    t.same(
      (viaAdapter.json.choices as { token_ids: number[] }[])[0].token_ids,
      await sampleOf(host.model('step-1') as GenerativeModel, 3),
      'a request naming the adapter samples from the adapter’s model',
    );
    t.same(
      ((await complete('base')).json.choices as { token_ids: number[] }[])[0].token_ids,
      await sampleOf(base, 3),
      'the base model still serves its name',
    );
    const chat = await post(`${v1}/chat/completions`, {
      model: 'step-1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
      seed: 1,
    });
    t.equal(chat.status, 200, 'chat completions may name the adapter too');
    t.equal(chat.json.model, 'step-1');

    // errors, as vLLM answers them
    const dup = await load({ lora_name: 'step-1', lora_path: '/adapters/seed-8' });
    t.equal(dup.status, 400, 'a name already loaded');
    t.match((dup.json.error as { message: string }).message, /has already been loaded/);
    t.equal((dup.json.error as { param: string }).param, 'lora_name');
    const inplace = await load({ lora_name: 'step-1', lora_path: '/adapters/seed-8', load_inplace: true });
    t.equal(inplace.status, 200, 'load_inplace replaces it');
    t.same(
      ((await complete('step-1')).json.choices as { token_ids: number[] }[])[0].token_ids,
      await sampleOf(host.model('step-1') as GenerativeModel, 3),
    );
    for (const [body, param] of [
      [{ lora_path: '/adapters/seed-7' }, 'lora_name'],
      [{ lora_name: 'x' }, 'lora_path'],
      [{ lora_name: '', lora_path: '/adapters/seed-7' }, 'lora_name'],
      [{ lora_name: 'x', lora_path: '/adapters/seed-7', load_inplace: 'yes' }, 'load_inplace'],
      [{ lora_name: 'base', lora_path: '/adapters/seed-7' }, 'lora_name'],
    ] as const) {
      const r = await load(body);
      t.equal(r.status, 400, `${JSON.stringify(body)} → 400`);
      t.equal((r.json.error as { param: string }).param, param);
    }
    const broken = await load({ lora_name: 'bad', lora_path: '/nowhere' });
    t.equal(broken.status, 400, 'a host that cannot load it');
    t.equal((broken.json.error as { param: string }).param, 'lora_path');
    t.match(
      (broken.json.error as { message: string }).message,
      /adapter_config\.json is missing/,
      'the host’s reason is passed on',
    );
    t.notOk(
      ((await (await fetch(`${v1}/models`)).json()) as { data: { id: string }[] }).data.some((m) => m.id === 'bad'),
      'a failed load is not listed',
    );
    const unknown = await unload({ lora_name: 'step-9' });
    t.equal(unknown.status, 404, 'unloading an unknown adapter');
    t.match((unknown.json.error as { message: string }).message, /The lora adapter 'step-9' cannot be found/);
    t.equal((await unload({})).status, 400, 'no name');

    // unload: the name is gone
    const gone = await unload({ lora_name: 'step-1' });
    t.equal(gone.status, 200);
    t.equal(gone.text, "Success: LoRA adapter 'step-1' removed successfully.");
    const after = await complete('step-1');
    t.equal(after.status, 404, 'an unloaded adapter is no model');
    t.equal((after.json.error as { param: string }).param, 'model');
    t.same(
      host.calls,
      ['load step-1 /adapters/seed-7', 'load step-1 /adapters/seed-8', 'load bad /nowhere', 'unload step-1'],
      'the host saw each change once, in order',
    );
    t.same(host.list(), []);
  },
);

t.test('a server without an adapter host answers the adapter routes 404', async (t) => {
  const base = tinyPolicy(2);
  const server = await startChatServer({ policy: base, chat: tpl, port: 0, modelName: 'base' });
  t.teardown(async () => {
    await server.dispose();
    base.dispose();
  });
  for (const route of ['load_lora_adapter', 'unload_lora_adapter']) {
    const r = await post(`${server.baseURL}/${route}`, { lora_name: 'a', lora_path: '/x' });
    t.equal(r.status, 404, route);
    t.match(r.json.error, { code: 404, type: 'NotFoundError', message: /runtime LoRA adapters are not enabled/ });
  }
});

/** A model whose samples wait until `release()` (one token, the first stop token). */
class BlockingModel implements GenerativeModel {
  readonly vocabSize = tpl.tokenizer.vocabSize;
  readonly contextLength = 4096;
  started = 0;
  private waiting: (() => void)[] = [];
  release(): void {
    for (const w of this.waiting.splice(0)) w();
  }
  createSession(): ReturnType<GenerativeModel['createSession']> {
    let n = 0;
    return {
      get length() {
        return n;
      },
      append: (x: ArrayLike<number>) => void (n += x.length),
      sample: async () => {
        this.started++;
        await new Promise<void>((r) => this.waiting.push(r));
        return {
          tokens: Int32Array.of(tpl.stopTokens[0]),
          logProbs: Float32Array.of(-0.5),
          finishReason: 'stop' as const,
        };
      },
      dispose: () => undefined,
    };
  }
  async generate(): Promise<never[]> {
    return [];
  }
}

t.test('a change of adapters waits for the requests in flight', async (t) => {
  const base = tinyPolicy(2);
  const blocking = new BlockingModel();
  const host: AdapterHost = {
    load: async () => undefined,
    unload: async () => undefined,
    list: () => ['a'],
    model: () => blocking,
  };
  const server = await startChatServer({ policy: base, chat: tpl, port: 0, modelName: 'base', adapters: host });
  t.teardown(async () => {
    await server.dispose();
    base.dispose();
  });
  await post(`${server.baseURL}/load_lora_adapter`, { lora_name: 'a', lora_path: '/adapters/a' });
  const order: string[] = [];
  const completion = post(`${server.baseURL}/completions`, { model: 'a', prompt, max_tokens: 4, seed: 1 }).then((r) =>
    order.push(`completion ${r.status}`),
  );
  while (blocking.started === 0) await new Promise((r) => setTimeout(r, 1));
  const unload = post(`${server.baseURL}/unload_lora_adapter`, { lora_name: 'a' }).then((r) =>
    order.push(`unload ${r.status}`),
  );
  await new Promise((r) => setTimeout(r, 100));
  t.same(order, [], 'the unload waits while a request naming the adapter samples');
  const late = post(`${server.baseURL}/completions`, { prompt, max_tokens: 2, seed: 1 }).then((r) =>
    order.push(`late ${r.status}`),
  );
  await new Promise((r) => setTimeout(r, 50));
  t.same(order, [], 'a new request waits while the change is pending');
  blocking.release();
  await Promise.all([completion, unload, late]);
  t.same(
    order,
    ['completion 200', 'unload 200', 'late 200'],
    'in flight, then the change, then the requests that waited',
  );
});
