/**
 * evaluatePolicy (the trainer's validation and `sinkflex eval`): pass^k and the success rate
 * against a hand computation from the episodes' rewards, the k option, reruns of aborted
 * episodes (fresh seeds, slots kept), progress, and the option checks.
 */
import t from 'tap';

import { evaluatePolicy, type SessionContext, type TokenPolicy, type TokenSession } from '../../lib/rollout/index.js';
import { envFactory, NoisyExpertPolicy, retailWorld, template } from './fixtures/world.js';

const world = retailWorld();
const tpl = template();
const taskIds = world.taskIds.slice(0, 4);
const limits = { maxTurns: 12, maxTokensPerTurn: 512, maxContextTokens: 1 << 16 };

/** C(n, k) by the product formula in float64 (the test's own reference). */
function choose(n: number, k: number): number {
  if (k > n) return 0;
  let r = 1;
  for (let i = 0; i < k; i++) r *= (n - i) / (i + 1);
  return r;
}

t.test('pass^k and the success rate follow the per-task successes; k selects the values', async (t) => {
  const r = await evaluatePolicy({
    policy: new NoisyExpertPolicy(tpl, world, 0.15),
    chat: tpl,
    env: envFactory(world),
    taskIds,
    trials: 3,
    seed: 4,
    limits,
    concurrency: 3,
    source: 'x',
  });
  t.equal(r.episodes.length, 12);
  const byTask = taskIds.map((_, g) =>
    r.episodes.filter((e) => e.groupIndex === g).map((e) => (e.aborted ? 0 : e.reward)),
  );
  const succ = byTask.map((rs) => rs.filter((x) => x === 1).length);
  t.ok(succ.some((c) => c > 0) && succ.some((c) => c < 3), `a mix of successes and failures (${succ.join(', ')})`);
  t.same(
    r.perTask.map((p) => p.successes),
    succ,
  );
  t.same(
    r.perTask.map((p) => p.rewards),
    byTask,
  );
  for (const k of [1, 2, 3]) {
    const want = succ.reduce((a, c) => a + choose(c, k) / choose(3, k), 0) / taskIds.length;
    t.ok(Math.abs(r.passHatK[k] - want) < 1e-12, `pass^${k} ${r.passHatK[k]} = ${want}`);
    t.equal(r.metrics[`val-core/x/reward/pass^${k}`], r.passHatK[k]);
  }
  const flat = byTask.flat();
  t.ok(Math.abs(r.meanReward - flat.reduce((a, b) => a + b, 0) / 12) < 1e-12, 'mean reward');
  t.equal(r.metrics['val-core/x/reward/mean@1'], r.meanReward);
  t.equal(r.successRate, succ.reduce((a, b) => a + b, 0) / 12);
  t.equal(r.metrics['val-aux/x/episodes'], 12);
  t.same(
    Object.values(r.terminations).reduce((a, b) => a + b, 0),
    12,
  );

  const some = await evaluatePolicy({
    policy: new NoisyExpertPolicy(tpl, world, 0.15),
    chat: tpl,
    env: envFactory(world),
    taskIds,
    trials: 3,
    k: [2],
    seed: 4,
    limits,
    concurrency: 1,
    source: 'x',
  });
  t.same(Object.keys(some.passHatK), ['2'], 'only the asked k');
  t.equal(some.passHatK[2], r.passHatK[2], 'the same episodes whatever the concurrency');
  t.notOk('val-core/x/reward/pass^1' in some.metrics);
  await t.rejects(
    evaluatePolicy({
      policy: new NoisyExpertPolicy(tpl, world),
      chat: tpl,
      env: envFactory(world),
      taskIds,
      trials: 2,
      k: [3],
    }),
    /k must be an integer in \[1, trials = 2\]/,
  );
  await t.rejects(
    evaluatePolicy({
      policy: new NoisyExpertPolicy(tpl, world),
      chat: tpl,
      env: envFactory(world),
      taskIds,
      episodeRetries: -1,
    }),
    /episodeRetries must be an integer >= 0/,
  );
  await t.rejects(
    evaluatePolicy({ policy: new NoisyExpertPolicy(tpl, world), chat: tpl, env: envFactory(world), taskIds: [] }),
    /taskIds must be a non-empty array/,
  );
});

/** The expert, but the first session of each task fails on its first sample (a flaky server). */
class FlakyPolicy implements TokenPolicy {
  readonly seen = new Map<string, number>();
  readonly seeds: number[] = [];
  readonly inner = new NoisyExpertPolicy(tpl, world, 0);
  createSession(context: SessionContext): TokenSession {
    const n = (this.seen.get(context.taskId) ?? 0) + 1;
    this.seen.set(context.taskId, n);
    this.seeds.push(context.seed);
    const s = this.inner.createSession(context);
    if (n > 1) return s;
    return {
      append: (x) => s.append(x),
      get length() {
        return s.length;
      },
      dispose: () => s.dispose(),
      sample: async () => Promise.reject(new Error('server down')),
    };
  }
}

t.test('aborted episodes: counted as 0, or rerun with fresh seeds in their slots', async (t) => {
  const none = await evaluatePolicy({
    policy: new FlakyPolicy(),
    chat: tpl,
    env: envFactory(world),
    taskIds,
    trials: 2,
    seed: 1,
    limits,
    concurrency: 2,
  });
  t.equal(none.aborted, 4, 'the first episode of each task aborts');
  t.equal(none.retried, 0, 'no reruns by default');
  t.equal(none.metrics['val-aux/tau-retail/aborted'], 4);
  t.ok(none.episodes.filter((e) => e.aborted).every((e) => e.reward === 0 && /server down/.test(e.error ?? '')));

  const policy = new FlakyPolicy();
  const progress: [number, number][] = [];
  const r = await evaluatePolicy({
    policy,
    chat: tpl,
    env: envFactory(world),
    taskIds,
    trials: 2,
    seed: 1,
    limits,
    concurrency: 2,
    episodeRetries: 2,
    onProgress: (d, n) => progress.push([d, n]),
  });
  t.equal(r.retried, 4, 'four reruns');
  t.equal(r.aborted, 0, 'none aborted after the reruns');
  t.equal(r.meanReward, 1, 'the expert solves every task');
  t.same(
    r.episodes.map((e) => [e.uid, e.groupIndex, e.sampleIndex]),
    none.episodes.map((e) => [e.uid, e.groupIndex, e.sampleIndex]),
    'reruns keep their slots',
  );
  const firstSeeds = new Set(none.episodes.map((e) => e.seed));
  t.ok(
    r.episodes.filter((e, i) => none.episodes[i].aborted).every((e) => !firstSeeds.has(e.seed)),
    'reruns have fresh seeds',
  );
  t.same(progress[progress.length - 1], [8, 8], 'progress ends at the total');
  t.ok(
    progress.every(([d, n]) => n === 8 && d >= 1 && d <= 8),
    'progress stays within the total',
  );
  t.ok(progress.length >= 8 + 4, `one call per finished episode, reruns included (${progress.length})`);
});
