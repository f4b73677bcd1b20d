import t from 'tap';

import { ChatTemplate, trainChatTokenizer } from '../../lib/chat/index.js';
import {
  evaluatePolicy,
  ExpertTokenPolicy,
  type SessionContext,
  type TokenPolicy,
  type TokenSession,
} from '../../lib/rollout/index.js';
import { buildWorld, resolveConfig, trainEnvFactory } from '../../lib/trainer/index.js';
import { demonstrationWorlds, promptSettings } from '../../lib/trainer/world.js';

const config = resolveConfig({ preset: 'smoke' });
const tw = buildWorld(config);
const tpl = new ChatTemplate(trainChatTokenizer([tw.world.domain.policy], { vocabSize: 400 }));
const prompt = promptSettings(config);

/** Answers every turn with the same short text (never solves a task). */
class ParrotPolicy implements TokenPolicy {
  createSession(_c: SessionContext): TokenSession {
    let n = 0;
    return {
      append: (x: ArrayLike<number>) => void (n += x.length),
      get length() {
        return n;
      },
      dispose: () => undefined,
      sample: async () => ({
        tokens: tpl.renderAssistantBody({ role: 'assistant', content: 'Sorry.' }),
        finishReason: 'stop' as const,
      }),
    };
  }
}

t.test('the expert scores 1, a parrot 0; metrics use the VERL names; validation tasks are held out', async (t) => {
  t.equal(
    new Set([...tw.trainIds, ...tw.valIds]).size,
    tw.trainIds.length + tw.valIds.length,
    'train and validation ids are disjoint',
  );
  const common = {
    chat: tpl,
    env: trainEnvFactory(config, tw.world),
    taskIds: tw.valIds,
    trials: 2,
    seed: 5,
    systemPrompt: prompt.systemPrompt,
    renderTools: prompt.renderTools,
  };
  const expert = await evaluatePolicy({ ...common, policy: new ExpertTokenPolicy(tpl, { tasks: tw.world }) });
  t.equal(expert.meanReward, 1);
  t.equal(expert.metrics['val-core/tau-retail/reward/mean@1'], 1);
  t.equal(expert.metrics['val-core/tau-retail/reward/pass^2'], 1);
  t.equal(expert.episodes.length, tw.valIds.length * 2);
  t.same(
    expert.perTask.map((p) => p.taskId),
    tw.valIds,
  );
  t.ok(expert.perTask.every((p) => p.trials === 2 && p.successes === 2));
  const again = await evaluatePolicy({ ...common, policy: new ExpertTokenPolicy(tpl, { tasks: tw.world }) });
  t.same(
    again.episodes.map((e) => e.responseIds),
    expert.episodes.map((e) => e.responseIds),
    'fixed seeds: same episodes',
  );
  const parrot = await evaluatePolicy({
    ...common,
    policy: new ParrotPolicy(),
    source: 'custom',
    limits: { maxTurns: 3 },
  });
  t.equal(parrot.meanReward, 0);
  t.equal(parrot.metrics['val-core/custom/reward/pass^1'], 0);
  t.equal(parrot.metrics['val-aux/custom/truncated'], tw.valIds.length * 2, 'every parrot episode hits the turn limit');
  await t.rejects(evaluatePolicy({ ...common, policy: new ParrotPolicy(), taskIds: [] }), RangeError);
  await t.rejects(evaluatePolicy({ ...common, policy: new ParrotPolicy(), trials: 0 }), RangeError);
});

t.test('demonstration worlds: fresh databases and tasks, none shared with the validation tasks', async (t) => {
  t.same(demonstrationWorlds({ ...config, sft: { ...config.sft, demoWorlds: 0 } }), [], 'sft.demoWorlds 0: none');
  t.equal(demonstrationWorlds(config).length, config.sft.demoWorlds, 'the smoke preset uses one');
  const withDemos = resolveConfig({ preset: 'smoke', patches: [{ sft: { demoWorlds: 2 } }] });
  const worlds = demonstrationWorlds(withDemos);
  t.equal(worlds.length, 2);
  const scenarios = (w: typeof tw, ids: readonly string[]) =>
    ids.map((id) => JSON.stringify(w.world.task(id).sinkflex_scenario));
  const val = new Set(scenarios(tw, tw.valIds));
  const emails = (w: typeof tw) =>
    new Set(JSON.stringify((w.world.domain as unknown as { db: unknown }).db).match(/[\w.]+@example\.com/g));
  for (const [i, d] of worlds.entries()) {
    t.notOk(
      scenarios(d, [...d.trainIds, ...d.valIds]).some((s) => val.has(s)),
      `world ${i}: no validation scenario among its tasks`,
    );
    const shared = [...emails(d)].filter((e) => emails(tw).has(e));
    t.ok(
      emails(d).size >= 10 && shared.length < emails(d).size / 2,
      `world ${i}: a different database (${shared.length} of ${emails(d).size} emails shared)`,
    );
  }
  t.same(
    scenarios(demonstrationWorlds(withDemos)[1], worlds[1].trainIds),
    scenarios(worlds[1], worlds[1].trainIds),
    'seeded: the same worlds again',
  );
});
