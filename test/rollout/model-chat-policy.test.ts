// ModelChatPolicy: a generative model behind the message-level ChatPolicy interface renders the
// conversation, samples to the format's stop token and parses the reply; a reply that does not
// parse comes back as the format's raw text; a real TransformerPolicy runs through it, and a
// ChatTokenPolicy over the same format records its tokens verbatim.
import t, { type Test } from 'tap';

import { ChatTemplate, trainChatTokenizer } from '../../lib/chat/index.js';
import { modelConfig, TransformerPolicy, type GenerativeModel } from '../../lib/model/index.js';
import { ChatTokenPolicy } from '../../lib/rollout/chat-token-policy.js';
import { ModelChatPolicy } from '../../lib/rollout/model-chat-policy.js';
import type { ChatTurn, SessionContext } from '../../lib/rollout/policy.js';

const tokenizer = trainChatTokenizer(['hello there, how can I help?', '{"name":"find_user","arguments":{"id":1}}'], {
  vocabSize: 300,
});
const format = new ChatTemplate(tokenizer);
const reply = format.renderAssistantBody({
  role: 'assistant',
  content: 'hi',
  tool_calls: [{ function: { name: 'find_user', arguments: '{"id":1}' } }],
});
const context: SessionContext = { taskId: 't', seed: 1, envInfo: {} };
const messages = [{ role: 'user' as const, content: 'hello' }];

/** A scripted model: what it returns is fixed, what it was given is recorded. */
function scripted(t: Test, seen: { prompt: number[]; seed?: number; maxTokens?: number }): GenerativeModel {
  return {
    vocabSize: 300,
    contextLength: 1000,
    createSession: (o) => {
      seen.seed = o?.seed;
      const ctx: number[] = [];
      return {
        get length() {
          return ctx.length;
        },
        append: (tokens) => void ctx.push(...Array.from(tokens)),
        sample: async (o) => {
          seen.prompt = [...ctx];
          seen.maxTokens = o.maxTokens;
          t.same(o.stop, format.stopTokens, 'stops at <|end|>');
          const n = Math.min(reply.length, o.maxTokens);
          return {
            tokens: Int32Array.from(reply.slice(0, n)),
            logProbs: new Float32Array(n).fill(-0.5),
            finishReason: o.maxTokens >= reply.length ? 'stop' : 'length',
          };
        },
        dispose: () => undefined,
      };
    },
    generate: async () => [],
  };
}

t.test('renders, samples to <|end|> and parses', async (t) => {
  const seen: { prompt: number[]; seed?: number; maxTokens?: number } = { prompt: [] };
  const policy = new ModelChatPolicy(scripted(t, seen), format);
  const conv = policy.startConversation(context);
  const ok = (await conv.respond({ messages, tools: [], params: { maxTokens: 100, seed: 9 } })) as ChatTurn;
  t.same(
    seen.prompt,
    format.render(messages, { addGenerationPrompt: true }),
    'the prompt is the rendered conversation',
  );
  t.equal(seen.seed, 9, 'the seed of the request');
  t.same(ok.message, {
    role: 'assistant',
    content: 'hi',
    tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'find_user', arguments: '{"id":1}' } }],
  });
  t.same(ok.tokens, reply, 'the sampled tokens');
  t.same(ok.logProbs, Array(reply.length).fill(-0.5));
  t.equal(ok.finishReason, 'stop');
  t.equal(ok.rawText, undefined);

  await conv.respond({ messages, tools: [], params: {} });
  t.equal(seen.maxTokens, 1000 - seen.prompt.length, 'default: what the context leaves');

  const cut = (await conv.respond({ messages, tools: [], params: { maxTokens: 3 } })) as ChatTurn;
  t.equal(cut.finishReason, 'length');
  t.equal(cut.rawText, format.rawActionText(reply.slice(0, 3)), 'a truncated reply is handed over as raw text');
  t.same(cut.message, { role: 'assistant', content: cut.rawText });

  const long = Array(600).fill({ role: 'user', content: 'hello there, how can I help?' });
  await t.rejects(conv.respond({ messages: long, tools: [], params: {} }), /leaves no room/);
});

t.test('a ChatTokenPolicy over the same format records its tokens verbatim', async (t) => {
  const seen: { prompt: number[] } = { prompt: [] };
  const tokens = new ChatTokenPolicy(new ModelChatPolicy(scripted(t, seen), format), format);
  const s = tokens.createSession(context);
  s.append(format.render(messages, { addGenerationPrompt: true }));
  const r = await s.sample({ maxTokens: 100 });
  t.same(Array.from(r.tokens), reply);
  t.same(Array.from(r.logProbs ?? []), Array(reply.length).fill(-0.5));
  s.dispose();
});

t.test('a real TransformerPolicy through the adapter', async (t) => {
  const model = TransformerPolicy.create(
    modelConfig({
      layers: 2,
      width: 24,
      heads: 4,
      kvHeads: 2,
      headDim: 6,
      window: 4,
      vocab: 300,
      context: 200,
      ffn: 16,
      ropeTheta: 1000,
      normEps: 1e-5,
      initStd: 0.1,
      swiglu: 'clamped',
      bias: false,
    }),
    { seed: 1, tokenizer },
  );
  const conv = new ModelChatPolicy(model, format).startConversation(context);
  const a = (await conv.respond({
    messages,
    tools: [],
    params: { maxTokens: 5, temperature: 1, seed: 3 },
  })) as ChatTurn;
  const b = (await conv.respond({
    messages,
    tools: [],
    params: { maxTokens: 5, temperature: 1, seed: 3 },
  })) as ChatTurn;
  t.ok(a.tokens !== undefined && a.tokens.length >= 1 && a.tokens.length <= 5);
  t.same(a.tokens, b.tokens, 'the same seed gives the same reply');
  t.ok(['stop', 'length'].includes(a.finishReason ?? ''));
  t.equal(a.logProbs?.length, a.tokens?.length);
  model.dispose();
});
