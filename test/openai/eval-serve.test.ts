import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import { runEval, formatEvalReport, type EvalOptions } from '../../lib/cli/commands/eval.js';
import { serve } from '../../lib/cli/commands/serve.js';
import { buildProgram } from '../../lib/cli/main.js';
import { retailSource, tinyCheckpoint } from './fixtures/setup.js';

t.test('eval against sinkflex serve gives the same episodes and metrics as the in-process policy', async (t) => {
  const run = await tinyCheckpoint(4);
  const server = await serve({ checkpoint: run, port: 0, modelName: 'tiny' });
  t.teardown(() => server.dispose());
  const common: Omit<EvalOptions, 'policy'> = {
    checkpoint: run,
    taskCount: retailSource.count,
    taskSeed: retailSource.seed,
    limitTasks: 3,
    trials: 2,
    seed: 11,
    concurrency: 3,
    maxTurns: 4,
    maxTokensPerTurn: 150,
    temperature: 1,
    systemPrompt: 'You help retail customers.',
    renderTools: false,
  };
  const progress: number[] = [];
  const local = await runEval({ ...common, policy: 'builtin', onProgress: (d) => progress.push(d) });
  const exportPath = join(run, 'out.jsonl');
  const remote = await runEval({
    ...common,
    policy: 'openai',
    baseURL: [server.baseURL],
    model: 'tiny',
    export: exportPath,
  });
  t.equal(local.episodes.length, 6);
  for (const e of remote.episodes) if (e.error) t.comment(e.error);
  t.equal(progress[progress.length - 1], 6, 'progress reaches the total');
  t.same(
    remote.episodes.map((e) => [e.taskId, e.seed, e.termination, e.numTurns, e.reward]),
    local.episodes.map((e) => [e.taskId, e.seed, e.termination, e.numTurns, e.reward]),
    'same tasks, seeds, terminations, turns and rewards',
  );
  t.same(
    remote.episodes.map((e) => e.responseIds),
    local.episodes.map((e) => e.responseIds),
    'same tokens, token for token',
  );
  // Log-probs agree to float rounding: decoding takes a few-row path or the batched GEMM
  // depending on how many sessions share a step, which differs between the two runs.
  const lpDiff = Math.max(
    0,
    ...remote.episodes.flatMap((e, i) => e.logProbs.map((v, j) => Math.abs(v - local.episodes[i].logProbs[j]))),
  );
  t.same(
    remote.episodes.map((e) => e.logProbs.length),
    local.episodes.map((e) => e.logProbs.length),
    'log-probs for the same tokens',
  );
  t.ok(lpDiff <= 1e-4, `same log-probs up to float rounding (max |diff| ${lpDiff})`);
  t.equal(remote.meanReward, local.meanReward, 'same mean reward');
  t.same(remote.passHatK, local.passHatK, 'same pass^k');
  t.equal(remote.aborted, 0, 'nothing aborted');
  t.equal(remote.problem, null, 'a real evaluation');
  t.same(remote.connection, { failures: 0, stopped: null });
  t.ok(
    local.episodes.some((e) => e.numTurns > 1),
    'some episodes have several turns (sessions continued on the server)',
  );
  t.ok(server.engine.stats.continued > 0, `the server continued kept sessions (${server.engine.stats.continued})`);
  t.match(remote.policy, /\(sessions\)/, 'the sinkflex server was detected');
  t.match(formatEvalReport(remote), /pass\^2/);

  const lines = readFileSync(exportPath, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  t.equal(lines.length, 6, 'one exported line per episode');
  const first = lines[0] as {
    messages: { role: string }[];
    tools: unknown[];
    reward: number;
    task_id: string;
    seed: number;
    termination: string;
    turns?: { tokenIds?: number[] }[];
  };
  t.equal(first.messages[0].role, 'system', 'messages start with the system prompt');
  t.ok(
    first.messages.some((m) => m.role === 'assistant'),
    'assistant turns',
  );
  t.ok(Array.isArray(first.tools) && first.tools.length > 0, 'tools');
  t.equal(first.task_id, remote.episodes[0].taskId);
  t.equal(first.seed, remote.episodes[0].seed);
  t.equal(first.termination, remote.episodes[0].termination);
  t.ok(first.turns && first.turns.length > 0 && Array.isArray(first.turns[0].tokenIds), 'server token ids per turn');
});

t.test('the CLI commands are registered and validate their options', async (t) => {
  const p = buildProgram();
  const names = p.commands.map((c) => c.name());
  t.ok(names.includes('serve') && names.includes('eval'), 'serve and eval');
  await t.rejects(runEval({ policy: 'builtin' }), /needs --checkpoint/);
  await t.rejects(runEval({ policy: 'openai' }), /needs --model/);
  await t.rejects(runEval({ policy: 'builtin', env: 'x' }), /unknown env/);
  await t.rejects(runEval({ policy: 'nope' as never }), /unknown policy/);
  await t.rejects(runEval({ policy: 'builtin', checkpoint: '/nonexistent/run' }), /no checkpoint/);
  await t.rejects(serve({ checkpoint: '/nonexistent/run' }), /no checkpoint/);
});

t.test('eval --json through the CLI against a dead server: episodes aborted and counted, no hang', async (t) => {
  const logs: string[] = [];
  const errors: string[] = [];
  const orig = console.log;
  const origError = console.error;
  console.log = (s: string) => logs.push(s);
  console.error = (s: string) => errors.push(s);
  t.teardown(() => {
    console.log = orig;
    console.error = origError;
  });
  await buildProgram().parseAsync(
    [
      'node',
      'sinkflex',
      'eval',
      '--policy',
      'openai',
      '--base-url',
      'http://127.0.0.1:9/v1',
      '--model',
      'm',
      '--retries',
      '1',
      '--timeout-ms',
      '500',
      '--task-count',
      '4',
      '--limit-tasks',
      '2',
      '--trials',
      '2',
      '--json',
      '--server-sessions',
      'off',
    ],
    { from: 'node' },
  );
  const report = JSON.parse(logs.join('\n')) as {
    aborted: number;
    retried: number;
    meanReward: number;
    passHatK: Record<string, number>;
    episodes: { termination: string; error: string }[];
  };
  t.equal(report.aborted, 4, 'every episode aborted');
  t.equal(report.retried, 4, 'and rerun once');
  t.equal(report.meanReward, 0);
  t.same(Object.keys(report.passHatK), ['1', '2']);
  t.ok(
    report.episodes.every((e) => e.termination === 'policy_error' && /OpenAIError/.test(e.error)),
    'policy_error with the client error',
  );
  t.equal(process.exitCode, 1, 'exit status 1: the evaluation did not run');
  process.exitCode = undefined;
  t.ok(
    errors.some((l) => /^\d+ episodes aborted: OpenAIError: .*127\.0\.0\.1:9/.test(l)),
    `the cause on stderr: ${errors.join(' | ')}`,
  );
});
