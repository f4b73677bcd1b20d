import { existsSync } from 'node:fs';

import t from 'tap';

import { make } from '../../lib/gym/index.js';
import { clearTauWorldCache, loadTauWorld } from '../../lib/gym/envs/tau-world.js';
import type { TauEnv } from '../../lib/gym/envs/tau.js';
import type { SimulationRun, TauTask } from '../../lib/tau/index.js';
import { ExpertAirlineAgent, loadTau2Airline, runEpisodeSync, TauEpisode, TauEvaluator } from '../../lib/tau/index.js';
import { AIRLINE_DIR, ConfirmingUser, goldTrajectory } from './fixtures/airline.js';

const skip = existsSync(AIRLINE_DIR) ? false : `tau2 data not found at ${AIRLINE_DIR} (set SINKFLEX_TAU2_DIR)`;

const run = (task: TauTask, messages: SimulationRun['messages']): SimulationRun => ({
  taskId: task.id,
  messages,
  terminationReason: 'user_stop',
});
const withBasis = (task: TauTask, basis: ('DB' | 'ACTION' | 'COMMUNICATE')[]): TauTask => ({
  ...task,
  evaluation_criteria: { ...task.evaluation_criteria, reward_basis: basis },
});

/** A different value for one argument of a write, so that the database ends up different. */
function alter(name: string, args: Record<string, unknown>): Record<string, unknown> {
  const a = structuredClone(args);
  if (name === 'cancel_reservation') a.reservation_id = 'ZZZZZZ';
  else if (name === 'update_reservation_baggages') a.total_baggages = (a.total_baggages as number) + 1;
  else if (name === 'update_reservation_passengers') (a.passengers as { dob: string }[])[0].dob = '1900-01-01';
  else if (name === 'update_reservation_flights') a.cabin = a.cabin === 'business' ? 'economy' : 'business';
  else if (name === 'book_reservation') a.insurance = a.insurance === 'yes' ? 'no' : 'yes';
  else if (name === 'send_certificate') a.amount = (a.amount as number) + 1;
  else throw new Error(`no alteration for ${name}`);
  return a;
}

t.test(
  'gold trajectories score 1; a dropped or altered gold write scores 0 on the DB check; ACTION is all-or-nothing',
  { skip },
  async (t) => {
    const { domain, tasks } = loadTau2Airline(AIRLINE_DIR, { split: 'train' });
    const evaluator = new TauEvaluator(domain);
    let writes = 0;
    for (const task of tasks) {
      const actions = task.evaluation_criteria?.actions ?? [];
      const gold = goldTrajectory(domain, task);
      const full = evaluator.evaluate(withBasis(task, ['DB', 'ACTION']), run(task, gold));
      t.equal(full.reward, 1, `task ${task.id}: the gold calls score 1 on DB and ACTION`);
      t.equal(full.dbCheck?.predictedHash, full.dbCheck?.goldHash);
      t.same(full.info.gold_action_errors ?? [], [], `task ${task.id}: no gold action fails`);
      const reads = actions.map((a, i) => [a, i] as const).filter(([a]) => !domain.tools.get(a.name)?.mutates);
      if (reads.length > 0) {
        const noRead = evaluator.evaluate(
          withBasis(task, ['DB', 'ACTION']),
          run(
            task,
            goldTrajectory(domain, task, (i, a) => (i === reads[0][1] ? null : a)),
          ),
        );
        t.same(
          [noRead.rewardBreakdown.DB, noRead.rewardBreakdown.ACTION, noRead.reward],
          [1, 0, 0],
          `task ${task.id}: a missing read leaves DB at 1 and ACTION at 0`,
        );
      }
      const writeIdx = actions.map((a, i) => (domain.tools.get(a.name)?.mutates ? i : -1)).filter((i) => i >= 0);
      for (const w of writeIdx) {
        writes++;
        const dropped = evaluator.evaluate(
          task,
          run(
            task,
            goldTrajectory(domain, task, (i, a) => (i === w ? null : a)),
          ),
        );
        t.equal(
          dropped.rewardBreakdown.DB,
          0,
          `task ${task.id}: dropping gold write ${w} (${actions[w].name}) gives DB 0`,
        );
        const altered = evaluator.evaluate(
          task,
          run(
            task,
            goldTrajectory(domain, task, (i, a) => (i === w ? alter(actions[w].name, a) : a)),
          ),
        );
        t.equal(altered.rewardBreakdown.DB, 0, `task ${task.id}: altering one argument of gold write ${w} gives DB 0`);
      }
    }
    t.equal(writes, 26, 'every gold write of the train split checked');
  },
);

t.test('the expert agent solves every train task through TauEpisode', { skip }, async (t) => {
  const { domain, tasks } = loadTau2Airline(AIRLINE_DIR, { split: 'train' });
  const ep = new TauEpisode(domain, { user: new ConfirmingUser() });
  for (const task of tasks) {
    const r = runEpisodeSync(ep, new ExpertAirlineAgent(), task, 1);
    t.equal(r.final.terminationReason, 'user_stop', `task ${task.id}: the user ends it`);
    t.equal(r.final.reward, 1, `task ${task.id}: reward 1 (${JSON.stringify(r.final.rewardInfo?.rewardBreakdown)})`);
    const calls = r.trajectory.filter((m) => m.role === 'assistant' && m.toolCalls).length;
    t.equal(calls, task.evaluation_criteria?.actions?.length ?? 0, `task ${task.id}: one call per gold action`);
  }
});

t.test('sinkflex/TauAirline-v0: the expert scores 1 on every train task through the Gym env', { skip }, async (t) => {
  clearTauWorldCache();
  const env = make('sinkflex/TauAirline-v0', {
    tasks: { kind: 'tau2', path: AIRLINE_DIR, split: 'train' },
    user: new ConfirmingUser(),
  });
  const raw = env.unwrapped as TauEnv;
  t.equal(raw.world.name, 'airline');
  t.equal(raw.tools.length, 14);
  for (const task of raw.world.tasks) {
    const [, info] = env.reset({ seed: 0, options: { taskId: task.id } });
    t.equal(info.domain, 'airline');
    const agent = new ExpertAirlineAgent();
    agent.reset({ task, tools: raw.tools, policy: raw.episode.policy, seed: 0 });
    let result: ReturnType<TauEnv['step']> | null = null;
    for (let i = 0; i < 100 && !(result && (result[2] || result[3])); i++)
      result = env.step(agent.act([]) as unknown as Record<string, unknown>) as ReturnType<TauEnv['step']>;
    t.same([result?.[1], result?.[2]], [1, true], `task ${task.id}: reward 1, terminated`);
  }
  t.throws(
    () => make('sinkflex/TauAirline-v0', { tasks: { kind: 'tau2', path: AIRLINE_DIR, split: 'train' } }),
    /airline domain has no scripted user/,
  );
  t.throws(() => loadTauWorld('airline', { kind: 'generated' }), /no task generator/);
  t.throws(() => loadTauWorld('airline', { kind: 'tau2', path: AIRLINE_DIR }), /no tasks\.json or|no tasks\.json/);
  env.close();
});
