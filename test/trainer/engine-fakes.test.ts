// Issue 24: rollouts on vLLM and SGLang stay on-policy. The trainer runs end to end against the
// fakes of test/trainer/fixtures/engine-fakes.ts (each samples with the tiny Qwen3 checkpoint,
// whose generation_config.json carries Qwen3's temperature 0.6, top_k 20, top_p 0.95):
// - vLLM as it runs by default (raw log-probs): the on-policy check stops the run after the
//   first rollout batch, naming --logprobs-mode; with --logprobs-mode processed_logprobs the LoRA
//   run finishes with the servers' log-probs equal to the trainer's;
// - a client that leaves top_k out gets Qwen3's top_k 20 from vLLM and the check catches it;
// - SGLang: every completion of a LoRA run is served by the step's adapter (a plain adapter name
//   as `model` would sample the base model — the fake selects adapters as SGLang does);
// - SGLang full fine-tuning: a Hugging Face folder per step through /update_weights_from_disk;
// - vLLM full fine-tuning and SGLang with the built-in model are refused at config time.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { loadPretrained } from '../../lib/model/hf/pretrained.js';
import {
  OpenAIChatClient,
  OpenAITokenCompletions,
  readTokenCompletion,
  type CompletionResponse,
} from '../../lib/openai/index.js';
import type { TokenCompletionRequest } from '../../lib/rollout/index.js';
import { ConfigError, resolveConfig, train, type MetricsRow, type TrainConfig } from '../../lib/trainer/index.js';
import { OffPolicyError, OnPolicyCheck } from '../../lib/trainer/on-policy-check.js';
import { writeTinyCheckpoint } from '../model/hf/fixtures/tiny-checkpoint.js';
import { fakeSglang, fakeVllm, sglangParseModel, sglangResolveAdapter } from './fixtures/engine-fakes.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-engine-fakes-'));
const base = join(tmp, 'qwen3-tiny');
writeTinyCheckpoint(base, { family: 'qwen3', tokenizer: 'qwen3' });
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

/** One GRPO step of the smoke preset on the tiny checkpoint, LoRA unless `lora: null`. */
function hfConfig(
  rollout: Partial<TrainConfig['rollout']>,
  lora: TrainConfig['model']['lora'] | undefined = { rank: 8, alpha: 16, targets: 'all-linear', rslora: false },
): TrainConfig {
  return resolveConfig({
    preset: 'smoke',
    patches: [
      {
        model: { source: `hf:${base}`, context: 512, lora },
        rollout: { maxContextTokens: 512, timeoutS: 60, retries: 1, ...rollout },
        sft: { tokensPerStep: 512, lr: 1e-2, steps: 1 },
        grpo: { microBatchTokens: 512, steps: 1 },
        val: { every: 0, trials: 1 },
      },
    ],
  });
}

function readRows(out: string): MetricsRow[] {
  return readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as MetricsRow);
}

t.test(
  'vLLM as it runs by default (raw log-probs, before the temperature): the first rollout batch stops the run, naming --logprobs-mode',
  async (t) => {
    const vllm = await fakeVllm(base);
    t.teardown(() => vllm.dispose());
    const out = join(tmp, 'vllm-raw');
    await t.rejects(train(hfConfig({ engine: 'vllm', servers: [vllm.baseURL] }), { out }), {
      name: 'OffPolicyError',
      message:
        /rollout servers sample off-policy \(above rollout\.maxLogprobDiff 0\.01\): http:\/\/127\.0\.0\.1:\d+\/v1: mean .* over \d+ sampled tokens\. Likely causes: .*--generation-config vllm.*--logprobs-mode processed_logprobs/,
    });
    const rows = readRows(out);
    t.notOk(
      rows.some((r) => r.phase === 'grpo'),
      'no GRPO step was taken on the off-policy samples',
    );
  },
);

t.test(
  'vLLM with --logprobs-mode processed_logprobs: the LoRA run finishes on-policy; the per-server difference is logged',
  async (t) => {
    const vllm = await fakeVllm(base, { logprobsMode: 'processed_logprobs' });
    t.teardown(() => vllm.dispose());
    const out = join(tmp, 'vllm-processed');
    const config = hfConfig({ engine: 'vllm', servers: [vllm.baseURL] });
    const r = await train(config, { out });
    t.equal(r.step, config.grpo.steps);
    const grpo = readRows(out).filter((x) => x.phase === 'grpo');
    const d = grpo.map((x) => x['rollout/logprob_abs_diff/server_0']);
    t.ok(
      d.length > 0 && d.every((x) => typeof x === 'number' && x <= 1e-4),
      `rollout/logprob_abs_diff/server_0 logged, ≤ 1e-4: ${d.join(', ')}`,
    );
    t.ok(vllm.served.routes.completions.stats.requests > 0, 'the episodes were sampled on the server');
  },
);

t.test(
  'a client that leaves the sampling fields out gets Qwen3’s generation-config top_k 20 from vLLM: the on-policy check catches it; the rollout client’s requests do not',
  async (t) => {
    const vllm = await fakeVllm(base, { logprobsMode: 'processed_logprobs' });
    const m = await loadPretrained(base);
    t.teardown(async () => {
      await vllm.dispose();
      m.dispose();
    });
    const prompt = m.chat.renderTokens([{ role: 'user', content: 'hello there' }], { addGenerationPrompt: true });
    const request: TokenCompletionRequest = {
      prompt,
      maxTokens: 6,
      temperature: 1,
      topP: 1,
      stop: [],
      seed: 1,
      affinity: 'a',
    };
    const client = new OpenAIChatClient({ baseURL: vllm.baseURL, model: 'qwen', retries: 0 });
    // the requests of the rollout client before issue 24: temperature and top_p only
    const old = async (seed: number): Promise<void> => {
      const body = {
        model: 'qwen',
        prompt,
        max_tokens: 6,
        temperature: 1,
        top_p: 1,
        seed,
        logprobs: 0,
        return_tokens_as_token_ids: true,
      };
      const r = await client.postTo(vllm.baseURL, '/completions', body);
      const result = readTokenCompletion(r.json as CompletionResponse, 'vllm');
      before.record({ baseURL: vllm.baseURL, request: { ...request, seed }, result });
    };
    const before = new OnPolicyCheck([vllm.baseURL], 1e-2, 512);
    for (let s = 0; s < 4; s++) await old(s);
    await t.rejects(before.check(m.policy), OffPolicyError, 'top_k 20 from the generation config: off-policy');
    const now = new OnPolicyCheck([vllm.baseURL], 1e-2, 512);
    const tc = new OpenAITokenCompletions(client, { onCompletion: (done) => now.record(done) });
    for (let s = 0; s < 4; s++) await tc.complete({ ...request, seed: s });
    const metrics = await now.check(m.policy);
    t.ok(
      metrics['rollout/logprob_abs_diff/server_0'] <= 1e-4,
      `every field set: on-policy (${metrics['rollout/logprob_abs_diff/server_0']})`,
    );
  },
);

t.test('the fake SGLang selects adapters as SGLang’s serving_base does (its unit tests’ cases)', async (t) => {
  t.same(sglangParseModel('llama-3.1-8B'), { base: 'llama-3.1-8B', adapter: null });
  t.same(sglangParseModel('meta-llama/Llama-3.1-8B-Instruct:adapter-name'), {
    base: 'meta-llama/Llama-3.1-8B-Instruct',
    adapter: 'adapter-name',
  });
  t.same(sglangParseModel('model:adapter:extra'), { base: 'model', adapter: 'adapter:extra' });
  t.same(sglangParseModel(' model-name : adapter-name '), { base: 'model-name', adapter: 'adapter-name' });
  t.same(sglangParseModel('model-name:   '), { base: 'model-name', adapter: null });
  t.equal(sglangResolveAdapter('model:sql-expert', 'python-expert'), 'sql-expert', 'the adapter in model wins');
  t.equal(sglangResolveAdapter('model-name', 'python-expert'), 'python-expert');
  t.equal(sglangResolveAdapter('run-step-3', undefined), null, 'a plain adapter name as model: the base model');
});

t.test(
  'SGLang, LoRA: adapters through the root routes, every completion served by the step’s adapter, never the base',
  async (t) => {
    const sglang = await fakeSglang(base);
    t.teardown(() => sglang.dispose());
    const out = join(tmp, 'sglang-lora');
    const config = hfConfig({ engine: 'sglang', servers: [sglang.baseURL] });
    const r = await train(config, { out });
    t.equal(r.step, config.grpo.steps);
    const completions = sglang.calls.filter((c) => c.startsWith('POST /v1/completions'));
    t.ok(completions.length > 1, `${completions.length} completions`);
    t.same(
      completions.filter((c) => !/ sglang-lora-step-\d+$/.test(c)),
      [],
      'none served by the base model',
    );
    t.ok(
      sglang.calls.includes('POST /load_lora_adapter sglang-lora-step-0') &&
        sglang.calls.includes('POST /unload_lora_adapter sglang-lora-step-0'),
      'loaded at the root, the previous one unloaded',
    );
    const d = readRows(out)
      .filter((x) => x.phase === 'grpo')
      .map((x) => x['rollout/logprob_abs_diff/server_0']);
    t.ok(
      d.every((x) => typeof x === 'number' && x <= 1e-4),
      `on-policy: ${d.join(', ')}`,
    );
  },
);

t.test(
  'SGLang, full fine-tuning: a Hugging Face folder per step loaded with /update_weights_from_disk; on-policy',
  async (t) => {
    const sglang = await fakeSglang(base);
    t.teardown(() => sglang.dispose());
    const out = join(tmp, 'sglang-full');
    const config = hfConfig({ engine: 'sglang', servers: [sglang.baseURL] }, null);
    const r = await train(config, { out });
    t.equal(r.step, config.grpo.steps);
    const updates = sglang.calls.filter((c) => c.startsWith('POST /update_weights_from_disk'));
    t.same(
      updates,
      [0, 1].map((k) => `POST /update_weights_from_disk ${join(out, 'rollout-weights', `step-${k}`)}`),
      'one folder per policy (after SFT, after the step)',
    );
    const d = readRows(out)
      .filter((x) => x.phase === 'grpo')
      .map((x) => x['rollout/logprob_abs_diff/server_0']);
    t.ok(
      d.every((x) => typeof x === 'number' && x <= 1e-4),
      `the server samples the trained weights: ${d.join(', ')}`,
    );
  },
);

t.test(
  'full weights on vLLM and the built-in model on SGLang are refused at config time, naming rollout.engine',
  async (t) => {
    const servers = ['http://127.0.0.1:1/v1'];
    t.throws(() => resolveConfig({ preset: 'smoke', patches: [{ rollout: { engine: 'vllm', servers } }] }), {
      name: 'ConfigError',
      message: /rollout\.engine 'vllm': full fine-tuning .* no route that loads them from disk/,
    });
    t.throws(() => hfConfig({ engine: 'vllm', servers }, null), ConfigError);
    t.throws(() => resolveConfig({ preset: 'smoke', patches: [{ rollout: { engine: 'sglang', servers } }] }), {
      name: 'ConfigError',
      message: /rollout\.engine 'sglang' with model\.source 'builtin': SGLang loads Hugging Face model folders/,
    });
    t.ok(hfConfig({ engine: 'vllm', servers }), 'LoRA on vLLM is fine');
    t.throws(() => resolveConfig({ patches: [{ rollout: { maxLogprobDiff: 0 } }] }), /rollout\.maxLogprobDiff/);
  },
);
