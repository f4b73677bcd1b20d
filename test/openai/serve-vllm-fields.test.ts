// `sinkflex serve`'s completions as vLLM answers them (issue 24), on the tiny Qwen3 checkpoint
// whose generation_config.json carries Qwen3's temperature 0.6, top_k 20, top_p 0.95:
// - a field a request leaves out takes the generation config's default (`--generation-config
//   auto`, vLLM's default; `vllm`: neutral defaults), a field it sets wins;
// - `--logprobs-mode processed_logprobs`: the log-probs after temperature and truncation,
//   renormalised; `raw_logprobs`: the model's own log_softmax, before the temperature;
// - `stop_reason` null at the tokenizer's EOS, the stop token's id otherwise; `prompt_logprobs:
//   null`; errors with vLLM's `type` and `code` (the HTTP status).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { serve } from '../../lib/cli/commands/serve.js';
import type { ChatTemplate } from '../../lib/chat/index.js';
import type { GenerativeModel, SampleOptions } from '../../lib/model/index.js';
import { loadPretrained, type PretrainedModel } from '../../lib/model/hf/pretrained.js';
import { generationConfigDefaults, resolveSampling, startChatServer } from '../../lib/openai/index.js';
import { writeTinyCheckpoint } from '../model/hf/fixtures/tiny-checkpoint.js';
import { ScriptedModelPolicy } from './fixtures/setup.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-vllm-fields-'));
const base = join(tmp, 'qwen3-tiny');
writeTinyCheckpoint(base, { family: 'qwen3', tokenizer: 'qwen3' });
let m: PretrainedModel;
t.before(async () => {
  m = await loadPretrained(base);
});
t.teardown(() => {
  m.dispose();
  rmSync(tmp, { recursive: true, force: true });
});

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

const logSoftmax = (x: ArrayLike<number>, temperature = 1): Float64Array => {
  let mx = -Infinity;
  for (let i = 0; i < x.length; i++) mx = Math.max(mx, x[i] / temperature);
  let s = 0;
  for (let i = 0; i < x.length; i++) s += Math.exp(x[i] / temperature - mx);
  const lz = mx + Math.log(s);
  return Float64Array.from(x, (v) => v / temperature - lz);
};

/** log-probs after temperature, top-k and top-p, renormalised over the kept tokens (-Infinity elsewhere). */
function processed(logits: ArrayLike<number>, temperature: number, topK: number, topP: number): Float64Array {
  const lp = logSoftmax(logits, temperature);
  const order = Array.from(lp.keys()).sort((a, b) => lp[b] - lp[a] || a - b);
  let kept = topK > 0 ? order.slice(0, topK) : order;
  const mass = kept.reduce((a, i) => a + Math.exp(lp[i]), 0);
  let acc = 0;
  const nucleus: number[] = [];
  for (const i of kept) {
    nucleus.push(i);
    acc += Math.exp(lp[i]);
    if (acc >= topP * mass) break;
  }
  kept = nucleus;
  const z = kept.reduce((a, i) => a + Math.exp(lp[i]), 0);
  const out = new Float64Array(lp.length).fill(-Infinity);
  for (const i of kept) out[i] = lp[i] - Math.log(z);
  return out;
}

t.test(
  'generation-config defaults: read as vLLM reads them (fields differing from transformers’ defaults)',
  async (t) => {
    t.same(
      generationConfigDefaults({ temperature: 0.6, top_k: 20, top_p: 0.95, do_sample: true, eos_token_id: [1, 2] }),
      { temperature: 0.6, top_k: 20, top_p: 0.95 },
    );
    t.same(
      generationConfigDefaults({ temperature: 1, top_k: 50, top_p: 1, repetition_penalty: 1 }),
      {},
      "transformers' defaults are no diff (top_k 50 included)",
    );
    t.same(generationConfigDefaults({ repetition_penalty: 1.05, min_p: 0, max_new_tokens: 30 }), {
      repetition_penalty: 1.05,
      min_p: 0,
      max_tokens: 30,
    });
    t.same(generationConfigDefaults(null), {});
    const none = {
      temperature: null,
      topP: null,
      topK: null,
      minP: null,
      repetitionPenalty: null,
      presencePenalty: null,
      frequencyPenalty: null,
      maxTokens: null,
    };
    t.same(resolveSampling(none, { temperature: 0.6, top_k: 20, max_tokens: 8 }), {
      temperature: 0.6,
      topP: 1,
      topK: 20,
      minP: 0,
      repetitionPenalty: 1,
      presencePenalty: 0,
      frequencyPenalty: 0,
      maxTokens: 8,
    });
    t.same(
      resolveSampling(
        { ...none, topK: -1, temperature: 1, maxTokens: 100 },
        { temperature: 0.6, top_k: 20, max_tokens: 8 },
      ),
      {
        temperature: 1,
        topP: 1,
        topK: 0,
        minP: 0,
        repetitionPenalty: 1,
        presencePenalty: 0,
        frequencyPenalty: 0,
        maxTokens: 8,
      },
      'the request wins; max_tokens capped',
    );
  },
);

t.test(
  'completions: generation-config defaults for left-out fields, the request’s own fields win; processed and raw log-probs',
  async (t) => {
    const auto = await serve({ modelDir: base, port: 0, modelName: 'qwen' });
    const neutral = await serve({ modelDir: base, port: 0, modelName: 'qwen', generationConfig: 'vllm' });
    const raw = await serve({ modelDir: base, port: 0, modelName: 'qwen', logprobsMode: 'raw_logprobs' });
    t.teardown(async () => {
      await auto.dispose();
      await neutral.dispose();
      await raw.dispose();
    });
    const prompt = m.chat.renderTokens([{ role: 'user', content: 'hello there' }], { addGenerationPrompt: true });
    const s = m.policy.createSession({ seed: 0 });
    s.append(prompt);
    await s.prefill();
    const logits = Float64Array.from(s.logits() as Float32Array);
    s.dispose();
    const qwen = processed(logits, 0.6, 20, 0.95);
    const full = logSoftmax(logits);
    const tempered = logSoftmax(logits, 0.6);
    const one = async (
      url: string,
      fields: Record<string, unknown>,
      seed: number,
    ): Promise<{ token: number; lp: number }> => {
      const r = await post(`${url}/completions`, {
        model: 'qwen',
        prompt,
        max_tokens: 1,
        logprobs: 0,
        return_token_ids: true,
        seed,
        ...fields,
      });
      t.equal(r.status, 200);
      const c = (r.json.choices as { token_ids: number[]; logprobs: { token_logprobs: number[] } }[])[0];
      return { token: c.token_ids[0], lp: c.logprobs.token_logprobs[0] };
    };
    let worst = 0;
    let truncated = 0;
    for (let seed = 0; seed < 12; seed++) {
      const a = await one(auto.baseURL, {}, seed);
      t.ok(Number.isFinite(qwen[a.token]), `defaults: token ${a.token} within Qwen3's top_k 20 / top_p 0.95`);
      worst = Math.max(worst, Math.abs(a.lp - qwen[a.token]));
      truncated = Math.max(truncated, Math.abs(a.lp - tempered[a.token]));
    }
    t.ok(
      worst < 1e-4,
      `defaults: processed log-probs at temperature 0.6, top_k 20, top_p 0.95 (worst ${worst.toExponential(2)})`,
    );
    t.ok(
      truncated > 1e-3,
      `not the untruncated tempered log-probs the trainer computes (${truncated.toExponential(2)} apart)`,
    );
    // the request's own truncation, wide enough to sample several tokens: renormalised over the kept ones
    const wide = processed(logits, 1.5, 5, 1);
    const seen = new Set<number>();
    worst = 0;
    for (let seed = 0; seed < 16; seed++) {
      const a = await one(auto.baseURL, { temperature: 1.5, top_k: 5, top_p: 1 }, seed);
      t.ok(Number.isFinite(wide[a.token]), `top_k 5: token ${a.token} among the 5 most likely`);
      worst = Math.max(worst, Math.abs(a.lp - wide[a.token]));
      seen.add(a.token);
    }
    t.ok(seen.size >= 2, `several tokens sampled (${seen.size})`);
    t.ok(
      worst < 1e-4,
      `top_k 5 at temperature 1.5: processed log-probs renormalised over the 5 (worst ${worst.toExponential(2)})`,
    );
    const every = {
      temperature: 1,
      top_p: 1,
      top_k: -1,
      min_p: 0,
      repetition_penalty: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
    };
    worst = 0;
    for (let seed = 0; seed < 6; seed++) {
      const a = await one(auto.baseURL, every, seed);
      const b = await one(neutral.baseURL, {}, seed);
      t.same(a, b, 'every field set on a generation-config server = nothing set on a neutral one');
      worst = Math.max(worst, Math.abs(a.lp - full[a.token]));
    }
    t.ok(worst < 1e-4, `the full distribution at temperature 1 (worst ${worst.toExponential(2)})`);
    worst = 0;
    let apart = 0;
    for (let seed = 0; seed < 6; seed++) {
      const a = await one(raw.baseURL, { ...every, temperature: 0.6 }, seed);
      worst = Math.max(worst, Math.abs(a.lp - full[a.token]));
      apart = Math.max(apart, Math.abs(a.lp - tempered[a.token]));
    }
    t.ok(
      worst < 1e-4,
      `raw_logprobs: the model's own log_softmax, before the temperature (worst ${worst.toExponential(2)})`,
    );
    t.ok(apart > 1e-3, `raw_logprobs differ from the tempered ones the trainer computes (${apart.toExponential(2)})`);
    const bad = await post(`${auto.baseURL}/completions`, { model: 'qwen', prompt, min_p: 2 });
    t.match(
      bad,
      { status: 400, json: { error: { param: 'min_p', type: 'BadRequestError', code: 400 } } },
      'a bad field: vLLM’s error type and code',
    );
    const missing = await post(`${auto.baseURL}/completions`, { model: 'nope', prompt });
    t.match(missing, { status: 404, json: { error: { param: 'model', type: 'NotFoundError', code: 404 } } });
  },
);

t.test(
  'stop_reason: null at the tokenizer’s EOS (vLLM checks it first), the stop token’s id otherwise; prompt_logprobs null',
  async (t) => {
    const tok = m.chat.tokenizer as unknown as {
      specialTokensMap: { eos_token: string };
      tokenToId(s: string): number;
    };
    const eos = tok.tokenToId(tok.specialTokensMap.eos_token);
    const other =
      tok.tokenToId('<|endoftext|>') === eos ? tok.tokenToId('<|im_start|>') : tok.tokenToId('<|endoftext|>');
    t.not(other, eos);
    const policy = new ScriptedModelPolicy(m.chat as unknown as ChatTemplate, [
      [100, eos],
      [101, other],
      [102, eos],
      [103, other],
    ]);
    const stops: number[][] = [];
    const recording: GenerativeModel = {
      vocabSize: policy.vocabSize,
      contextLength: policy.contextLength,
      createSession: () => {
        const s = policy.createSession();
        return {
          get length() {
            return s.length;
          },
          append: (x: ArrayLike<number>) => s.append(x),
          sample: (o: SampleOptions) => {
            stops.push([...(o.stop ?? [])]);
            return s.sample(o);
          },
          dispose: () => s.dispose(),
        };
      },
      generate: (r) => policy.generate(r),
    };
    const server = await startChatServer({ policy: recording, chat: m.chat, port: 0 });
    t.teardown(() => server.dispose());
    const ask = (stop: number[]) =>
      post(`${server.baseURL}/completions`, { prompt: [1, 2], max_tokens: 5, stop_token_ids: stop });
    const choice = (r: { json: Record<string, unknown> }) => (r.json.choices as Record<string, unknown>[])[0];
    const a = choice(await ask([eos, other]));
    t.match(
      a,
      { finish_reason: 'stop', stop_reason: null, prompt_logprobs: null },
      'EOS: stop_reason null even when it is in stop_token_ids',
    );
    t.ok('prompt_logprobs' in a);
    const b = choice(await ask([other]));
    t.match(b, { finish_reason: 'stop', stop_reason: other }, 'another stop token: its id');
    const c = choice(await ask([]));
    t.match(c, { finish_reason: 'stop', stop_reason: null });
    t.same(stops[2], [eos], 'the sampler stops at EOS without stop_token_ids, as vLLM does');
    await post(`${server.baseURL}/completions`, {
      prompt: [1, 2],
      max_tokens: 5,
      stop_token_ids: [other],
      ignore_eos: true,
    });
    t.same(stops[3], [other], 'ignore_eos: EOS is not a stop token');
  },
);
