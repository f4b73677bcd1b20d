/**
 * evaluatePolicy per task kind: `val-core/<source>/<kind>/reward/mean@1` and
 * `val-aux/<source>/<kind>/episodes` against a hand computation on a tiny environment whose
 * reward is fixed per task (fractional rewards, an aborted episode, a repeated task id, a task
 * without a kind); the overall metrics do not change; bad kinds are refused.
 */
import t from 'tap';

import type { AnyEnv } from '../../lib/gym/index.js';
import { ChatTemplate, trainChatTokenizer } from '../../lib/chat/index.js';
import { evaluatePolicy, type SessionContext, type TokenPolicy, type TokenSession } from '../../lib/rollout/index.js';

const tpl = new ChatTemplate(trainChatTokenizer(['Done, thank you. hi sys'], { vocabSize: 300 }));

/** Says "Done." every turn. */
class DonePolicy implements TokenPolicy {
  createSession(_c: SessionContext): TokenSession {
    let n = 0;
    return {
      append: (x: ArrayLike<number>) => void (n += x.length),
      get length() {
        return n;
      },
      dispose: () => undefined,
      sample: async () => ({
        tokens: tpl.renderAssistantBody({ role: 'assistant', content: 'Done.' }),
        finishReason: 'stop' as const,
      }),
    };
  }
}

/** Reward by task; `boom` throws on its first step (an aborted episode). */
const REWARD: Record<string, number> = { t0: 1, t1: 0.5, t2: 0.25, t3: 1 };
const KIND: Record<string, string | null> = { t0: 'a', t1: 'a', t2: 'b', t3: null, boom: 'b' };

function makeEnv(): AnyEnv {
  let task = '';
  return {
    reset: (o: { options: { taskId: string } }) => {
      task = o.options.taskId;
      return [[{ role: 'user', content: 'hi' }], { tools: [], systemPrompt: 'sys' }];
    },
    step: () => {
      if (task === 'boom') throw new Error('the environment broke');
      return [[], REWARD[task], true, false, { terminationReason: 'agent_stop' }];
    },
    close: () => undefined,
  } as unknown as AnyEnv;
}

const taskIds = ['t0', 't1', 't2', 't3', 'boom', 't1'];
const common = {
  policy: new DonePolicy(),
  chat: tpl,
  env: makeEnv,
  taskIds,
  trials: 2,
  seed: 3,
  concurrency: 2,
  source: 'src',
  limits: { maxTurns: 3, maxTokensPerTurn: 32, maxContextTokens: 4096 },
};

t.test('per-kind mean@1 and episode counts follow a hand computation; overall metrics unchanged', async (t) => {
  const plain = await evaluatePolicy(common);
  const r = await evaluatePolicy({ ...common, taskKind: (id) => KIND[id] });
  t.equal(r.aborted, 2, 'both trials of boom abort');
  // by hand: a = t0 (1, 1) + t1 (0.5, 0.5) twice = 4 / 6; b = t2 (0.25, 0.25) + boom (0, 0) = 0.5 / 4
  t.equal(r.metrics['val-core/src/a/reward/mean@1'], 4 / 6);
  t.equal(r.metrics['val-core/src/b/reward/mean@1'], 0.125);
  t.equal(r.metrics['val-aux/src/a/episodes'], 6);
  t.equal(r.metrics['val-aux/src/b/episodes'], 4);
  t.equal(r.metrics['val-core/src/reward/mean@1'], 6.5 / 12, 'overall: (4 + 0.5 + 2 (t3) + 0) / 12');
  t.same(r.perKind, [
    { kind: 'a', tasks: 3, episodes: 6, meanReward: 4 / 6, successes: 2 },
    { kind: 'b', tasks: 2, episodes: 4, meanReward: 0.125, successes: 0 },
  ]);
  t.same(
    r.perTask.map((p) => p.kind),
    ['a', 'a', 'b', null, 'b', 'a'],
  );
  const added = Object.keys(r.metrics).filter((k) => !(k in plain.metrics));
  t.same(
    added.sort(),
    [
      'val-aux/src/a/episodes',
      'val-aux/src/b/episodes',
      'val-core/src/a/reward/mean@1',
      'val-core/src/b/reward/mean@1',
    ],
    'only the per-kind keys are new',
  );
  for (const [k, v] of Object.entries(plain.metrics)) t.equal(r.metrics[k], v, `${k} unchanged`);
  t.same(
    Object.keys(r.metrics).slice(0, Object.keys(plain.metrics).length),
    Object.keys(plain.metrics),
    'existing keys first, in their order',
  );
  t.same(plain.perKind, [], 'no kinds without taskKind');
  t.notOk(Object.keys(plain.metrics).some((k) => /\/(a|b)\//.test(k)));
});

t.test('a kind must be a metric-name segment', async (t) => {
  for (const bad of ['a/b', '', 'x y', 5]) {
    await t.rejects(
      evaluatePolicy({ ...common, taskKind: () => bad as string }),
      { name: 'RangeError', message: /taskKind\('t0'\) must be null or a string matching/ },
      JSON.stringify(bad),
    );
  }
});
