import t from 'tap';

import { modelConfig, TransformerPolicy } from '../../lib/model/index.js';
import { AgentLoop, type TokenPolicy } from '../../lib/rollout/index.js';
import { envFactory, retailWorld, template } from './fixtures/world.js';

const tpl = template();
const world = retailWorld();

function policy(seed: number): TransformerPolicy {
  const cfg = modelConfig('tiny', {
    layers: 1,
    width: 64,
    heads: 2,
    kvHeads: 1,
    headDim: 32,
    ffn: 96,
    vocab: tpl.tokenizer.vocabSize,
    context: 4096,
  });
  return TransformerPolicy.create(cfg, { seed, tokenizer: tpl.tokenizer });
}

async function run(p: TokenPolicy, concurrency: number): Promise<{ tokens: number[][]; logProbs: number[][] }> {
  const loop = new AgentLoop({
    policy: p,
    chat: tpl,
    env: envFactory(world),
    concurrency,
    limits: { maxTurns: 2, maxTokensPerTurn: 12, maxContextTokens: 4000 },
    sanityCheck: 'disable',
    systemPrompt: () => 'You help retail customers.',
    renderTools: false,
  });
  const records = await loop.rollout({ taskIds: world.taskIds.slice(0, 2), n: 2, seed: 7 });
  await loop.dispose();
  return {
    tokens: records.map((r) => r.responseIds),
    logProbs: records.map((r) => r.logProbs.filter((_, i) => r.responseMask[i] === 1)),
  };
}

t.test('the built-in policy drives the agent loop as it is (a model is a TokenPolicy)', async (t) => {
  const a = await run(policy(1), 1);
  const b = await run(policy(1), 4);
  t.equal(a.tokens.length, 4, 'four episodes');
  t.ok(
    a.tokens.every((x) => x.length > 0),
    'every episode has response tokens',
  );
  t.same(a.tokens, b.tokens, 'same episodes whatever the concurrency (sessions are seeded per episode)');
  // equal up to float rounding: how many sessions share a decoding step picks the GEMM path
  const diff = Math.max(0, ...a.logProbs.flatMap((x, i) => x.map((v, j) => Math.abs(v - b.logProbs[i][j]))));
  t.ok(diff <= 1e-4, `same log-probs up to float rounding (max |diff| ${diff})`);
  const c = await run(policy(1), 4);
  t.same(c.tokens, a.tokens, 'reproducible');
  const flat = a.logProbs.flat();
  t.ok(flat.length > 0 && flat.every((v) => Number.isFinite(v) && v <= 0), 'log-probs are finite and <= 0');
});

t.test("a session whose context is full ('context') ends the turn as a length cut, not a policy error", async (t) => {
  const model = policy(2);
  const full: TokenPolicy = {
    createSession: (context) => {
      const inner = model.createSession(context);
      return {
        get length() {
          return inner.length;
        },
        append: (tokens) => inner.append(tokens),
        dispose: () => inner.dispose(),
        sample: async (options) => ({
          ...(await inner.sample({ ...options, maxTokens: 2 })),
          finishReason: 'context' as const,
        }),
      };
    },
  };
  const loop = new AgentLoop({
    policy: full,
    chat: tpl,
    env: envFactory(world),
    limits: { maxTurns: 2, maxTokensPerTurn: 12, maxContextTokens: 4000 },
    sanityCheck: 'disable',
    systemPrompt: () => 'You help retail customers.',
    renderTools: false,
  });
  const [r] = await loop.rollout({ taskIds: world.taskIds.slice(0, 1), n: 1, seed: 7 });
  await loop.dispose();
  model.dispose();
  t.equal(r.aborted, false, `not aborted (${r.error})`);
  t.equal(r.termination, 'turn_token_limit', 'cut like a turn that reached its token limit');
  t.equal(r.truncated, true);
});
