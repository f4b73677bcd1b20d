// Issue 17, "Run: everywhere the built-in model runs today": a loaded pretrained model (tiny,
// random weights, the real Qwen3 tokenizer and template / the real gpt-oss tokenizer and
// harmony) in a tau retail episode through the agent loop, in `sinkflex eval --model-dir` and
// behind `sinkflex serve --model-dir` (chat completions with tools, in the model's format).
// Random weights write random text; what must hold is the plumbing: the episode runs to its
// limits without aborting, the model's sampled tokens stay verbatim with finite log-probs, a
// tool call in the model's context is parsed and answered by the environment, and the model
// continues after the tool result.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { formatEvalReport, runEval } from '../../../lib/cli/commands/eval.js';
import { serve } from '../../../lib/cli/commands/serve.js';
import type { ChatAssistantMessage, ChatMessage } from '../../../lib/chat/messages.js';
import { loadPretrained } from '../../../lib/model/index.js';
import {
  AgentLoop,
  type SessionContext,
  type TokenPolicy,
  type SampleOptions,
  type TokenSampleResult,
  type TokenSession,
} from '../../../lib/rollout/index.js';
import { envFactory, retailSource, retailWorld } from '../../rollout/fixtures/world.js';
import { type TinySpec, writeTinyCheckpoint } from './fixtures/tiny-checkpoint.js';

/** A tiny checkpoint with a real tokenizer and a context long enough for the retail prompt. */
function modelDir(t: Test, spec: TinySpec): string {
  const dir = mkdtempSync(join(tmpdir(), 'hf-agent-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeTinyCheckpoint(dir, spec);
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  config.max_position_embeddings = 16384;
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  return dir;
}

/**
 * The model's own sessions, except that the first turn of each episode is a given tool call:
 * its tokens go into the model's context as if sampled (log-prob 0 each), and the model
 * samples every later turn after the environment's answer.
 */
class FirstTurnCall implements TokenPolicy {
  constructor(
    private readonly model: TokenPolicy,
    private readonly call: number[],
  ) {}
  createSession(context: SessionContext): TokenSession {
    const inner = this.model.createSession(context);
    let turn = 0;
    const call = this.call;
    return {
      get length() {
        return inner.length;
      },
      append: (tokens: ArrayLike<number>) => inner.append(tokens),
      dispose: () => inner.dispose(),
      async sample(params: SampleOptions): Promise<TokenSampleResult> {
        if (turn++ > 0) return inner.sample(params);
        inner.append(call);
        return { tokens: call, logProbs: call.map(() => 0), finishReason: 'stop' };
      },
    };
  }
}

const world = retailWorld();

const CASES = [
  {
    name: 'Qwen3 (Jinja template)',
    spec: { family: 'qwen3', tokenizer: 'qwen3' } as TinySpec,
    call: '<tool_call>\n{"name": "find_user_id_by_email", "arguments": {"email": "nobody@example.com"}}\n</tool_call><|im_end|>',
  },
  {
    name: 'gpt-oss (harmony)',
    spec: { family: 'gpt_oss', tokenizer: 'gptoss', layers: 2 } as TinySpec,
    call: '<|channel|>commentary to=functions.find_user_id_by_email <|constrain|>json<|message|>{"email": "nobody@example.com"}<|call|>',
  },
];

for (const c of CASES) {
  t.test(`a tau retail episode with a loaded ${c.name} model`, async (t) => {
    const m = await loadPretrained(modelDir(t, c.spec));
    t.teardown(() => m.dispose());
    const call = m.tokenizer.encode(c.call);
    const loop = new AgentLoop({
      policy: new FirstTurnCall(m.policy, call),
      chat: m.chat,
      env: envFactory(world),
      limits: { maxTurns: 3, maxTokensPerTurn: 32 },
      sampling: { temperature: 1 },
      concurrency: 1,
    });
    t.teardown(() => loop.dispose());
    const [rec] = await loop.rollout({ taskIds: [world.taskIds[0]], seed: 5 });
    t.equal(rec.aborted, false, `not aborted (${rec.error ?? ''})`);
    t.comment(`termination ${rec.termination} after ${rec.numTurns} turns`);
    t.ok(rec.numTurns >= 2, 'the model took turns after the call');
    t.ok(rec.promptIds.length > 1000, `the prompt holds the retail policy and tools (${rec.promptIds.length} tokens)`);
    const msgs = rec.messages as ChatMessage[];
    const firstCall = msgs.findIndex(
      (msg) => msg.role === 'assistant' && ((msg as { tool_calls?: unknown[] }).tool_calls?.length ?? 0) > 0,
    );
    t.ok(firstCall > 0, 'the tool call in the model context is parsed');
    const parsed = (msgs[firstCall] as ChatAssistantMessage).tool_calls?.[0];
    t.equal(parsed?.function.name, 'find_user_id_by_email');
    t.same(JSON.parse(parsed?.function.arguments ?? 'null'), { email: 'nobody@example.com' }, 'its arguments');
    t.equal(msgs[firstCall + 1]?.role, 'tool', "the environment's tool result follows");
    // the model's own turns: verbatim in the response (mask 1), with log-probs of a distribution
    const sampled = rec.responseMask.map((v, i) => (v === 1 ? i : -1)).filter((i) => i >= 0);
    t.equal(sampled.length > call.length, true, 'the model sampled tokens after the scripted call');
    const modelLogProbs = sampled.slice(call.length).map((i) => rec.logProbs[i]);
    t.ok(
      modelLogProbs.every((v) => Number.isFinite(v) && v <= 0),
      'finite log-probs ≤ 0',
    );
    t.ok(
      modelLogProbs.some((v) => v < 0),
      'log-probs of the model, not the script',
    );
    t.same(rec.responseIds.slice(0, call.length), call, 'the call tokens are kept verbatim');
  });
}

t.test('sinkflex eval --model-dir evaluates a pretrained model on generated tasks', async (t) => {
  const dir = modelDir(t, CASES[0].spec);
  const report = await runEval({
    policy: 'builtin',
    modelDir: dir,
    taskCount: retailSource.count,
    taskSeed: retailSource.seed,
    limitTasks: 2,
    trials: 1,
    concurrency: 2,
    maxTurns: 2,
    maxTokensPerTurn: 8,
  });
  t.equal(report.episodes.length, 2, 'two episodes');
  t.equal(report.aborted, 0, `nothing aborted (${report.episodes.map((e) => e.error ?? '').join('; ')})`);
  t.equal(report.problem, null, 'a real evaluation');
  t.match(report.policy, /^pretrained Qwen3ForCausalLM .* \(cpu\)$/);
  t.comment(report.episodes.map((e) => `${e.termination} after ${e.numTurns} turns`).join('; '));
  t.ok(
    report.episodes.every((e) => e.numTurns >= 1 && e.responseIds.length > 0),
    'each episode has model turns',
  );
  t.match(formatEvalReport(report), /mean reward/);
  // --model-dir with --checkpoint names a run's moved base folder: a model folder is no run
  await t.rejects(
    runEval({ policy: 'builtin', modelDir: dir, checkpoint: dir }),
    /modelDir: .* is a Hugging Face model folder, not a run's checkpoint/,
  );
  await t.rejects(runEval({ policy: 'openai', modelDir: dir, model: 'x' }), /--policy builtin/);
  await t.rejects(runEval({ policy: 'builtin', modelDir: join(dir, 'missing') }), /config\.json/);
});

t.test('sinkflex serve --model-dir serves chat completions with tools in the model format', async (t) => {
  const dir = modelDir(t, CASES[1].spec);
  const server = await serve({ modelDir: dir, port: 0, modelName: 'tiny-oss' });
  t.teardown(() => server.dispose());
  t.equal(server.checkpoint, dir);
  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Weather of a city.',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    },
  ];
  const post = async (
    body: Record<string, unknown>,
  ): Promise<{ status: number; json: Record<string, unknown>; text: string }> => {
    const res = await fetch(`${server.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    return {
      status: res.status,
      json: res.headers.get('content-type')?.includes('json') ? (JSON.parse(text) as Record<string, unknown>) : {},
      text,
    };
  };
  const messages = [
    { role: 'system', content: 'You answer briefly.' },
    { role: 'user', content: 'Weather in Paris?' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }],
    },
    { role: 'tool', tool_call_id: 'c1', content: '{"sky": "clear"}' },
  ];
  const r = await post({
    model: 'tiny-oss',
    messages,
    tools,
    max_tokens: 6,
    seed: 3,
    logprobs: true,
    return_token_ids: true,
  });
  t.equal(r.status, 200, r.text.slice(0, 300));
  const choice = (r.json.choices as Record<string, unknown>[])[0];
  const tokenIds = choice.token_ids as number[];
  t.equal(tokenIds.length, 6, 'six sampled tokens (max_tokens)');
  t.equal(choice.finish_reason, 'length');
  t.equal(typeof (choice.message as { content: unknown }).content, 'string', 'the unparsed reply comes back as text');
  const promptIds = r.json.prompt_token_ids as number[];
  const m = await loadPretrained(dir);
  t.teardown(() => m.dispose());
  t.same(
    promptIds,
    m.chat.render(messages as ChatMessage[], { tools, addGenerationPrompt: true }).ids,
    "the prompt is the model's harmony rendering with the tools",
  );
  t.match(
    m.chat.render(messages as ChatMessage[], { tools }).text,
    /namespace functions \{[\s\S]*type get_weather = \(_: \{/,
  );
  const lp = (choice.logprobs as { content: { token: string; logprob: number; bytes: number[] }[] }).content;
  t.equal(lp.length, 6);
  t.ok(
    lp.every((e, i) => e.logprob <= 0 && Number.isFinite(e.logprob) && e.token === m.tokenizer.decode([tokenIds[i]])),
    'a log-prob and the text of each token',
  );
  t.same(
    lp.map((e) => e.bytes),
    tokenIds.map((id) => Array.from(m.tokenizer.tokenBytes(id))),
    "each token's bytes",
  );
  // the same request streamed (harmony stream; a truncated reply is raw text, sent at the end): the same content and tokens
  const s = await post({
    model: 'tiny-oss',
    messages,
    tools,
    max_tokens: 6,
    seed: 3,
    stream: true,
    return_token_ids: true,
  });
  t.equal(s.status, 200);
  const events = s.text
    .split('\n\n')
    .filter((e) => e.startsWith('data: {'))
    .map(
      (e) =>
        JSON.parse(e.slice(6)) as {
          choices: {
            delta: { content?: string; reasoning_content?: string; tool_calls?: unknown[] };
            token_ids?: number[];
          }[];
        },
    );
  const streamed = events.map((e) => e.choices[0]?.delta.content ?? '').join('');
  t.equal(streamed, (choice.message as { content: string }).content, 'the streamed content equals the reply');
  t.equal(
    events.map((e) => e.choices[0]?.delta.reasoning_content ?? '').join(''),
    (choice.message as { reasoning_content?: string }).reasoning_content ?? '',
    'the streamed reasoning too',
  );
  t.same(
    events.flatMap((e) => e.choices[0]?.delta.tool_calls ?? []),
    [],
    'no calls in the truncated reply',
  );
  t.same(events.at(-1)?.choices[0].token_ids, tokenIds, 'the same tokens for the same seed');
  // a prompt far beyond the context is refused from its length, before tokenizing
  const huge = await post({
    model: 'tiny-oss',
    messages: [{ role: 'user', content: 'x '.repeat(2_200_000) }],
    max_tokens: 4,
  });
  t.equal(huge.status, 400);
  t.match(huge.text, /counted from its length, before tokenizing/);
  await t.rejects(
    serve({ modelDir: dir, checkpoint: dir }),
    /modelDir: .* is a Hugging Face model folder, not a run's checkpoint/,
  );
  await t.rejects(serve({}), /--checkpoint or --model-dir/);
});
