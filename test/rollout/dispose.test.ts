/**
 * One verb for releasing resources: `dispose()`, and `using` / `await using` through
 * `[Symbol.dispose]` / `[Symbol.asyncDispose]` on what holds native memory or OS handles (the
 * built-in policy and its sessions, the adapter's sessions, the agent loop's environments, the
 * chat server's socket).
 */
import t from 'tap';

import { modelConfig, Transformer, TransformerPolicy } from '../../lib/model/index.js';
import { startChatServer } from '../../lib/openai/index.js';
import { AgentLoop, type TokenPolicy } from '../../lib/rollout/index.js';
import { envFactory, retailWorld, template } from './fixtures/world.js';

const tpl = template();
const world = retailWorld();
const cfg = modelConfig('tiny', {
  layers: 1,
  width: 32,
  heads: 2,
  kvHeads: 1,
  headDim: 16,
  ffn: 48,
  vocab: tpl.tokenizer.vocabSize,
  context: 256,
});

t.test('Node defines the well-known symbols (Node >= 20.4: the same as Symbol.for(nodejs.*))', async (t) => {
  t.equal(typeof Symbol.dispose, 'symbol');
  t.equal(typeof Symbol.asyncDispose, 'symbol');
  t.equal(Symbol.dispose, Symbol.for('nodejs.dispose'));
  t.equal(Symbol.asyncDispose, Symbol.for('nodejs.asyncDispose'));
});

t.test('using: the policy and its sessions are freed at the end of the block', async (t) => {
  let kept: TransformerPolicy;
  {
    using policy = TransformerPolicy.create(cfg, { seed: 1, tokenizer: tpl.tokenizer });
    kept = policy;
    const asTokenPolicy: TokenPolicy = policy; // a model is an agent-loop policy as it is
    {
      using session = asTokenPolicy.createSession({ taskId: 'x', seed: 3, envInfo: {} }) as ReturnType<
        typeof policy.createSession
      >; // the episode context goes to the model itself
      session.append([tpl.start]);
      const r = await session.sample({ maxTokens: 2 });
      t.equal(r.tokens.length, 2);
      t.doesNotThrow(() => session.dispose(), 'dispose is idempotent (the block disposes it once more)');
    }
    using raw = policy.createSession({ seed: 1 });
    raw.append([tpl.start]);
    t.equal(raw.length, 1);
  }
  t.ok(kept.model.disposed, 'the policy is disposed after its block');
  t.throws(() => kept.createSession(), 'a disposed policy cannot make sessions');
});

t.test('using: the transformer, its sessions and its parameter store', async (t) => {
  let model: Transformer;
  let session: ReturnType<Transformer['createSession']>;
  {
    using m = Transformer.create(cfg, 1);
    using s = m.createSession(5);
    model = m;
    session = s;
    t.notOk(m.disposed || m.store.disposed || s.disposed);
  }
  t.ok(session.disposed, 'the session');
  t.ok(model.disposed, 'the model');
  t.ok(model.store.disposed, 'the store it made');
});

t.test('await using: the agent loop closes its environments, the server its socket', async (t) => {
  let loop: AgentLoop;
  {
    await using l = new AgentLoop({
      policy: TransformerPolicy.create(cfg, { seed: 2, tokenizer: tpl.tokenizer }),
      chat: tpl,
      env: envFactory(world),
      limits: { maxTurns: 1, maxTokensPerTurn: 4, maxContextTokens: 4096 },
      sanityCheck: 'disable',
      systemPrompt: () => 'sys',
      renderTools: false,
    });
    loop = l;
    t.equal((await l.rollout({ taskIds: world.taskIds.slice(0, 1) })).length, 1);
  }
  await t.rejects(loop.rollout({ taskIds: world.taskIds.slice(0, 1) }), /after dispose/);

  using policy = TransformerPolicy.create(cfg, { seed: 3, tokenizer: tpl.tokenizer });
  let url: string;
  {
    await using server = await startChatServer({ policy, chat: tpl, port: 0 });
    url = `${server.baseURL}/models`;
    t.equal((await fetch(url)).status, 200, 'serving inside the block');
  }
  await t.rejects(fetch(url), 'the socket is closed after the block');
});
