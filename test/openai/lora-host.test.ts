// Issue 19, runtime LoRA adapters on `sinkflex serve --model-dir`: the PretrainedAdapterHost
// serves PEFT adapters of a tiny random Qwen3 checkpoint (real tokenizer). The model batches
// concurrent samples into one run, so the host holds one adapter in the model's LoRA slots at a
// time: concurrent requests naming two adapters and the base must each get exactly what that
// adapter (or the base) samples in process — the proof that no request is sampled with another
// adapter's values. Also: the slots' settings come from the first adapter (the policy is rebuilt
// and stale sessions dropped), mismatched and foreign adapters are refused naming why, in-place
// reloads, unload, --no-adapters, a model that came with its own adapter.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { serve } from '../../lib/cli/commands/serve.js';
import { loadPretrained, loraAdapterSlots, type LoraConfigInput, type PretrainedModel } from '../../lib/model/index.js';
import type { GenerativeModel } from '../../lib/model/policy.js';
import { PretrainedAdapterHost } from '../../lib/openai/index.js';
import { uniformValues } from '../model/hf/fixtures/seeded.js';
import { writeTinyCheckpoint } from '../model/hf/fixtures/tiny-checkpoint.js';
import { postJson } from './fixtures/setup.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-lora-host-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

const base = join(tmp, 'qwen3-tiny');
writeTinyCheckpoint(base, { family: 'qwen3', tokenizer: 'qwen3' });
const other = join(tmp, 'qwen3-other');
writeTinyCheckpoint(other, { family: 'qwen3', layers: 3, seed: 2 });
const wider = join(tmp, 'qwen3-wider');
writeTinyCheckpoint(wider, { family: 'qwen3', intermediate: 56, seed: 3 });

const LORA: LoraConfigInput = { rank: 4, alpha: 8, targets: ['q_proj', 'v_proj', 'o_proj', 'down_proj'] };

/** Writes a PEFT adapter of `dir`'s base with random A and B (B nonzero: the outputs change). */
async function makeAdapter(out: string, seed: number, lora: LoraConfigInput = LORA, from = base): Promise<string> {
  const m = await loadPretrained(from, { lora, seed });
  try {
    for (const s of loraAdapterSlots(m.modelConfig))
      m.params.write(s.bName, Float32Array.from(uniformValues(s.out * lora.rank, seed, s.bName, -0.5, 0.5)));
    await m.saveAdapter(out);
  } finally {
    m.dispose();
  }
  return out;
}

const a1 = await makeAdapter(join(tmp, 'a1'), 11);
const a2 = await makeAdapter(join(tmp, 'a2'), 12);
const a3 = await makeAdapter(join(tmp, 'a3-rank2'), 13, { rank: 2, alpha: 4, targets: ['q_proj', 'k_proj'] });
const a4 = await makeAdapter(join(tmp, 'a4-rank2'), 14, { rank: 2, alpha: 4, targets: ['q_proj', 'k_proj'] });
const foreign = await makeAdapter(join(tmp, 'foreign'), 15, LORA, other);
const misshapen = await makeAdapter(join(tmp, 'misshapen'), 16, LORA, wider);

// in-process references: the base, and the base with each adapter
const plain = await loadPretrained(base);
const withA1 = await loadPretrained(base, { adapter: a1 });
const withA2 = await loadPretrained(base, { adapter: a2 });
const withA3 = await loadPretrained(base, { adapter: a3 });
const withA4 = await loadPretrained(base, { adapter: a4 });
t.teardown(() => [plain, withA1, withA2, withA3, withA4].forEach((m) => m.dispose()));

const prompts = [
  plain.chat.renderTokens([{ role: 'user', content: 'Where is my order #W2378156?' }], { addGenerationPrompt: true }),
  plain.chat.renderTokens([{ role: 'user', content: 'Cancel it, please.' }], { addGenerationPrompt: true }),
];

interface Sampled {
  tokens: number[];
  logProbs: number[];
}

/** One seeded completion in process (a fresh session, as the server runs a request without session id). */
async function inProcess(
  m: GenerativeModel | PretrainedModel,
  prompt: readonly number[],
  seed: number,
  maxTokens = 6,
): Promise<Sampled> {
  const model = 'policy' in m ? m.policy : m;
  const s = model.createSession({ seed });
  try {
    s.append(prompt);
    const r = await s.sample({ maxTokens, temperature: 1 });
    return { tokens: Array.from(r.tokens), logProbs: Array.from(r.logProbs) };
  } finally {
    s.dispose();
  }
}

const post = postJson;

async function complete(
  v1: string,
  model: string,
  prompt: readonly number[],
  seed: number,
  extra: Record<string, unknown> = {},
): Promise<Sampled> {
  const r = await post(`${v1}/completions`, {
    model,
    prompt,
    max_tokens: 6,
    temperature: 1,
    top_p: 1,
    top_k: -1,
    seed,
    logprobs: 0,
    return_token_ids: true,
    ...extra,
  });
  if (r.status !== 200) throw new Error(`completion for ${model}: ${r.status} ${r.text}`);
  const c = (r.json.choices as { token_ids: number[]; logprobs: { token_logprobs: number[] } }[])[0];
  return { tokens: c.token_ids, logProbs: c.logprobs.token_logprobs };
}

t.test(
  'two adapters and the base requested concurrently: each request gets exactly its model’s in-process tokens and log-probs',
  async (t) => {
    const server = await serve({ modelDir: base, port: 0, modelName: 'tiny', log: false });
    t.teardown(() => server.dispose());
    const host = server.adapters as PretrainedAdapterHost;
    t.ok(host instanceof PretrainedAdapterHost, 'serve --model-dir has an adapter host by default');
    const v1 = server.baseURL;

    t.same(
      await complete(v1, 'tiny', prompts[0], 1),
      await inProcess(plain, prompts[0], 1),
      'the base before any adapter: the base',
    );
    t.equal(host.slots, null, 'no LoRA slots before the first adapter');
    t.equal((await post(`${v1}/load_lora_adapter`, { lora_name: 'a1', lora_path: a1 })).status, 200);
    t.equal((await post(`${v1}/load_lora_adapter`, { lora_name: 'a2', lora_path: a2 })).status, 200);
    t.match(
      host.slots,
      { rank: 4, alpha: 8, targets: ['q_proj', 'v_proj', 'o_proj', 'down_proj'] },
      'the slots take the first adapter’s settings',
    );

    const models: [string, PretrainedModel][] = [
      ['a1', withA1],
      ['a2', withA2],
      ['tiny', plain],
    ];
    const jobs = Array.from({ length: 12 }, (_, i) => ({
      name: models[i % 3][0],
      ref: models[i % 3][1],
      prompt: prompts[(i >> 1) % 2],
      seed: 100 + i,
    }));
    const expected: Sampled[] = [];
    for (const j of jobs) expected.push(await inProcess(j.ref, j.prompt, j.seed));
    // the same seed and prompt under the three models: three different samples
    const bySeed = await Promise.all(models.map(([, m]) => inProcess(m, prompts[0], 7)));
    t.ok(
      bySeed[0].logProbs[0] !== bySeed[1].logProbs[0] &&
        bySeed[0].logProbs[0] !== bySeed[2].logProbs[0] &&
        bySeed[1].logProbs[0] !== bySeed[2].logProbs[0],
      'the adapters change the model (a sample with the wrong weights would show)',
    );

    const before = { ...host.stats };
    const got = await Promise.all(jobs.map((j) => complete(v1, j.name, j.prompt, j.seed)));
    const wrong = jobs
      .map((j, i) => (JSON.stringify(got[i]) === JSON.stringify(expected[i]) ? null : `${j.name} seed ${j.seed}`))
      .filter((x) => x !== null);
    t.same(wrong, [], 'every concurrent request: exactly its model’s tokens and log-probs');
    // scored by loadPretrained(base, { adapter }).logProbs: each answer's log-probs are its own
    // adapter's (a teacher-forced pass: equal up to float rounding), and clearly not the others'
    const gaps: string[] = [];
    for (let i = 0; i < 3; i++) {
      const seq = [...jobs[i].prompt, ...got[i].tokens];
      const n = got[i].tokens.length;
      for (const [name, ref] of models) {
        const lp = Array.from((await ref.logProbs([seq]))[0].slice(-n));
        const diff = Math.max(...lp.map((x, k) => Math.abs(x - got[i].logProbs[k])));
        if (name === jobs[i].name ? diff > 1e-4 : diff < 1e-3) gaps.push(`${jobs[i].name} scored by ${name}: ${diff}`);
      }
    }
    t.same(
      gaps,
      [],
      'the log-probs of a1, a2 and the base answers equal their own model’s logProbs (≤ 1e-4) and differ from the others’ (≥ 1e-3)',
    );
    t.ok(
      host.stats.waited > before.waited,
      `requests waited for another adapter’s turn (${host.stats.waited - before.waited})`,
    );
    t.ok(
      host.stats.swaps - before.swaps >= 2,
      `the slots were switched between the adapters (${host.stats.swaps - before.swaps} times)`,
    );
    t.ok(host.stats.maxRunning >= 2, `requests of one adapter still batch together (up to ${host.stats.maxRunning})`);

    // sessions keep their adapter: a kept a1 conversation continued after a2 and the base sampled
    const s1 = await complete(v1, 'a1', prompts[0], 5, { session_id: 'conv' });
    await Promise.all([complete(v1, 'a2', prompts[1], 6), complete(v1, 'tiny', prompts[1], 6)]);
    const next = [...prompts[0], ...s1.tokens, ...prompts[1].slice(-4)];
    const s2 = await complete(v1, 'a1', next, 5, { session_id: 'conv' });
    const ref = withA1.policy.createSession({ seed: 5 });
    ref.append(prompts[0]);
    const r1 = await ref.sample({ maxTokens: 6, temperature: 1 });
    ref.append(prompts[1].slice(-4));
    const r2 = await ref.sample({ maxTokens: 6, temperature: 1 });
    ref.dispose();
    t.same(
      [s1, s2],
      [
        { tokens: Array.from(r1.tokens), logProbs: Array.from(r1.logProbs) },
        { tokens: Array.from(r2.tokens), logProbs: Array.from(r2.logProbs) },
      ],
      'a kept session of a1, continued between other adapters’ requests: the in-process session’s tokens',
    );
    t.ok(server.routes.completions.stats.continued >= 1, 'the session was continued');

    // unloading: the name is gone, the others go on
    t.equal((await post(`${v1}/unload_lora_adapter`, { lora_name: 'a1' })).status, 200);
    t.equal((await post(`${v1}/completions`, { model: 'a1', prompt: prompts[0], max_tokens: 2 })).status, 404);
    t.same(host.list(), ['a2']);
    t.same(await complete(v1, 'a2', prompts[1], 9), await inProcess(withA2, prompts[1], 9));
    t.same(
      await complete(v1, 'tiny', prompts[1], 9),
      await inProcess(plain, prompts[1], 9),
      'the base with the slots at B = 0: the base bit for bit',
    );
  },
);

t.test(
  'loading: the first adapter gives the slots their settings; mismatched and foreign adapters are refused naming why',
  async (t) => {
    const server = await serve({ modelDir: base, port: 0, modelName: 'tiny', log: false });
    t.teardown(() => server.dispose());
    const host = server.adapters as PretrainedAdapterHost;
    const v1 = server.baseURL;
    const load = (name: string, path: string, extra: Record<string, unknown> = {}) =>
      post(`${v1}/load_lora_adapter`, { lora_name: name, lora_path: path, ...extra });

    // a kept base session before the first load: the policy is rebuilt, so it is dropped (not continued)
    const k1 = await complete(v1, 'tiny', prompts[0], 3, { session_id: 'kept' });
    const firstPolicy = host.pretrained.policy;
    t.equal((await load('r2', a3)).status, 200);
    t.not(host.pretrained.policy, firstPolicy, 'the policy was rebuilt with LoRA slots');
    const continuedBefore = server.routes.completions.stats.continued;
    const k2 = await complete(v1, 'tiny', [...prompts[0], ...k1.tokens, ...prompts[1].slice(-3)], 3, {
      session_id: 'kept',
    });
    t.equal(
      server.routes.completions.stats.continued,
      continuedBefore,
      'the stale session was dropped: the request started afresh',
    );
    t.same(
      k2,
      await inProcess(plain, [...prompts[0], ...k1.tokens, ...prompts[1].slice(-3)], 3),
      'and sampled as the base',
    );
    t.same(await complete(v1, 'r2', prompts[0], 4), await inProcess(withA3, prompts[0], 4));

    const mismatch = await load('r4', a1);
    t.equal(mismatch.status, 400);
    t.match(mismatch.json, { error: { param: 'lora_path', code: 400, type: 'BadRequestError' } }, 'the field is named');
    t.match(
      mismatch.text,
      /the adapter's LoRA settings \(r 4, lora_alpha 8, use_rslora false, target_modules q_proj, v_proj, o_proj, down_proj\) differ from those of the adapters loaded now \(r 2, lora_alpha 4, use_rslora false, target_modules q_proj, k_proj: r2\)/,
    );
    const alien = await load('x', foreign);
    t.equal(alien.status, 400);
    t.match(alien.json, { error: { param: 'lora_path' } });
    t.match(
      alien.text,
      /adapter_model\.safetensors: has adapters for 3 layers, the model has 2: the adapter was made for another base model/,
    );
    const shaped = await load('x', misshapen);
    t.equal(shaped.status, 400, 'an adapter of a base with another MLP width');
    t.match(
      shaped.json,
      {
        error: {
          param: 'lora_path',
          message:
            /adapter_model\.safetensors base_model\.model\.model\.layers\.0\.mlp\.down_proj\.lora_A\.weight: has shape \[4, 56\], the model's down_proj needs \[4, 40\] \(in 40, out 48\): the adapter was made for another base model/,
        },
      },
      'names the tensor and both shapes',
    );
    const missing = await load('y', join(tmp, 'nowhere'));
    t.equal(missing.status, 404, 'no adapter at the path: 404, as vLLM answers "No adapter found"');
    t.match(missing.json, {
      error: {
        param: 'lora_path',
        code: 404,
        type: 'NotFoundError',
        message: /no adapter found at .*nowhere \(no adapter_config\.json there\)/,
      },
    });
    const unknown = await post(`${v1}/completions`, { model: 'nope', prompt: prompts[0], max_tokens: 2 });
    t.equal(unknown.status, 404, 'a completion naming an unknown adapter: 404');
    t.match(unknown.json, {
      error: { param: 'model', code: 404, type: 'NotFoundError', message: /the model 'nope' does not exist/ },
    });
    const gone = await post(`${v1}/unload_lora_adapter`, { lora_name: 'nope' });
    t.equal(gone.status, 404);
    t.match(gone.json, { error: { param: 'lora_name', message: "The lora adapter 'nope' cannot be found." } });
    t.same(host.list(), ['r2'], 'refused loads change nothing');

    // in place: the same name, new values
    t.equal((await load('r2', a4)).status, 400, 'a loaded name needs load_inplace');
    t.equal((await load('r2', a4, { load_inplace: true })).status, 200);
    t.same(
      await complete(v1, 'r2', prompts[0], 4),
      await inProcess(withA4, prompts[0], 4),
      'the reloaded adapter’s values',
    );

    // with none loaded, an adapter of other settings rebuilds the slots
    t.equal((await post(`${v1}/unload_lora_adapter`, { lora_name: 'r2' })).status, 200);
    t.equal((await load('big', a1)).status, 200);
    t.match(host.slots, { rank: 4 });
    t.same(await complete(v1, 'big', prompts[1], 8), await inProcess(withA1, prompts[1], 8));
    t.same(await complete(v1, 'tiny', prompts[1], 8), await inProcess(plain, prompts[1], 8));

    const models = (await (await fetch(`${v1}/models`)).json()) as {
      data: { id: string; parent: string | null; root: string }[];
    };
    t.same(
      models.data.map((m) => [m.id, m.parent]),
      [
        ['tiny', null],
        ['big', 'tiny'],
      ],
    );
  },
);

t.test('limits: --no-adapters, --max-adapters', async (t) => {
  const off = await serve({ modelDir: base, port: 0, adapters: false, log: false });
  t.teardown(() => off.dispose());
  t.equal(off.adapters, null);
  const r = await post(`${off.baseURL}/load_lora_adapter`, { lora_name: 'a', lora_path: a1 });
  t.equal(r.status, 404);
  t.match(r.text, /runtime LoRA adapters are not enabled.*"type":"NotFoundError".*"code":404/);
  const one = await serve({ modelDir: base, port: 0, maxAdapters: 1, log: false });
  t.teardown(() => one.dispose());
  t.equal((await post(`${one.baseURL}/load_lora_adapter`, { lora_name: 'a', lora_path: a1 })).status, 200);
  const full = await post(`${one.baseURL}/load_lora_adapter`, { lora_name: 'b', lora_path: a2 });
  t.equal(full.status, 400);
  t.match(full.text, /1 adapters are loaded, the most this server holds \(1\): unload one first/);
  t.throws(
    () => new PretrainedAdapterHost(plain, { maxAdapters: 0 }),
    /options\.maxAdapters must be a positive integer/,
  );
});

t.test(
  'a model that came with its own adapter: its base view keeps it; other adapters of its settings replace it for their requests',
  async (t) => {
    const m = await loadPretrained(base, { adapter: a1 });
    t.teardown(() => m.dispose());
    const host = new PretrainedAdapterHost(m);
    t.same(
      await inProcess(host.base, prompts[0], 21),
      await inProcess(withA1, prompts[0], 21),
      'the base view: the model as loaded',
    );
    await host.load('two', a2);
    const view = host.model('two');
    if (!view) throw new Error('no view');
    const [x, y] = await Promise.all([inProcess(view, prompts[0], 21), inProcess(host.base, prompts[1], 22)]);
    t.same(x, await inProcess(withA2, prompts[0], 21));
    t.same(y, await inProcess(withA1, prompts[1], 22), 'the own adapter’s values are written back for the base view');
    await t.rejects(host.load('r2', a3), /differ from those of the served model's own adapter \(r 4, lora_alpha 8/);
    await host.unload('two');
    t.equal(host.model('two'), undefined);
    await t.rejects(host.unload('two'), /the adapter 'two' is not loaded/);
    const gen = await host.base.generate([{ prompt: prompts[0], seed: 21, maxTokens: 6, temperature: 1 }]);
    t.same(Array.from(gen[0].tokens), (await inProcess(withA1, prompts[0], 21)).tokens, 'generate takes its turn too');
  },
);
