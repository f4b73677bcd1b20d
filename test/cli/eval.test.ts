/**
 * `sinkflex eval --policy openai` when the evaluation cannot really run: the console says why
 * episodes aborted, the exit status is non-zero, repeated connection failures stop it early,
 * and `--base-url` shows its real default.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import t from 'tap';

import { abortReasons, evalProblem, openaiCheckpointProblem, progressBar } from '../../lib/cli/commands/eval.js';
import { ChatTemplate, trainChatTokenizer } from '../../lib/chat/index.js';
import { JinjaChatFormat } from '../../lib/chat/hf/jinja-format.js';
import { qwen3Tokenizer } from '../chat/hf/fixtures/tokenizers.js';
import { buildProgram } from '../../lib/cli/main.js';

/** Runs the CLI, capturing stdout and stderr lines and the exit status it sets. */
async function run(
  args: string[],
): Promise<{ out: string; err: string[]; exitCode: number | string | undefined; ms: number }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = console.log;
  const error = console.error;
  console.log = (...a: unknown[]) => void out.push(a.join(' '));
  console.error = (...a: unknown[]) => void err.push(a.join(' '));
  const before = process.exitCode;
  const t0 = performance.now();
  try {
    await buildProgram()
      .exitOverride()
      .parseAsync(['node', 'sinkflex', ...args]);
  } finally {
    console.log = log;
    console.error = error;
  }
  const exitCode = process.exitCode;
  process.exitCode = before;
  return { out: out.join('\n'), err, exitCode, ms: performance.now() - t0 };
}

/** A port nothing listens on (a server was there a moment ago). */
async function deadURL(): Promise<string> {
  const s: Server = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}/v1`;
}

const common = [
  'eval',
  '--policy',
  'openai',
  '--model',
  'm',
  '--timeout-ms',
  '2000',
  '--task-count',
  '8',
  '--trials',
  '2',
  '--server-sessions',
  'off',
  '--no-progress',
];

t.test(
  'a dead server: the cause on the console, exit status 1, stopped early after repeated connection failures',
  async (t) => {
    const url = await deadURL();
    const port = new URL(url).port;
    const r = await run([...common, '--base-url', url, '--retries', '1', '--max-connection-failures', '3']);
    t.equal(r.exitCode, 1, 'non-zero exit status');
    t.match(r.out, /mean reward\s+0\.0000/, 'the report is still printed');
    t.match(r.out, /connection\s+\d+ calls failed to reach the server; stopped early/);
    const reasons = r.err.filter((l) => /^\d+ episodes? aborted: /.test(l));
    t.ok(reasons.length >= 1, `why episodes aborted: ${JSON.stringify(reasons)}`);
    t.ok(
      reasons.some((l) => l.includes(`ECONNREFUSED 127.0.0.1:${port}`)),
      'the connection error itself (not just "fetch failed")',
    );
    t.equal(
      reasons.reduce((n, l) => n + Number(/^(\d+)/.exec(l)?.[1]), 0),
      16,
      'every aborted episode is accounted for',
    );
    t.ok(
      r.err.some((l) =>
        /did not really run: 16 of 16 episodes aborted; stopped after 3 consecutive calls failed to reach the server/.test(
          l,
        ),
      ),
      r.err.join('\n'),
    );
    t.comment(`finished in ${r.ms.toFixed(0)} ms`);

    const j = await run([
      ...common,
      '--base-url',
      url,
      '--retries',
      '0',
      '--max-connection-failures',
      '2',
      '--concurrency',
      '1',
      '--json',
    ]);
    const report = JSON.parse(j.out) as {
      problem: string;
      connection: { failures: number; stopped: string };
      aborted: number;
      episodes: unknown[];
    };
    t.equal(j.exitCode, 1);
    t.equal(report.aborted, 16);
    t.equal(report.connection.failures, 2, 'one episode at a time: exactly 2 calls made before it stopped');
    t.match(
      report.connection.stopped,
      /stopped after 2 consecutive calls failed to reach the server \(last: .*ECONNREFUSED/,
    );
    t.match(report.problem, /stopped after 2/);
    t.ok(
      j.err.some((l) => /^\d+ episodes aborted: /.test(l)),
      'reasons on stderr with --json too',
    );

    const never = await run([
      ...common,
      '--base-url',
      url,
      '--retries',
      '0',
      '--max-connection-failures',
      '0',
      '--concurrency',
      '4',
      '--json',
      '--limit-tasks',
      '2',
    ]);
    const all = JSON.parse(never.out) as { problem: string; connection: { failures: number; stopped: string | null } };
    t.equal(never.exitCode, 1);
    t.equal(all.connection.stopped, null, '--max-connection-failures 0: never stops');
    t.equal(all.connection.failures, 8, 'every call tried (4 episodes, each rerun once)');
    t.match(all.problem, /all 4 episodes aborted/);
    await t.rejects(
      run([...common, '--base-url', url, '--max-connection-failures', '1.5']),
      /--max-connection-failures/,
    );
  },
);

t.test('a server that refuses every request: all episodes aborted, exit status 1, the refusal shown', async (t) => {
  const s: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'this model does not exist', code: 'model_not_found' } }));
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => s.close(() => r())));
  const r = await run([
    ...common,
    '--base-url',
    `http://127.0.0.1:${(s.address() as AddressInfo).port}/v1`,
    '--limit-tasks',
    '2',
  ]);
  t.equal(r.exitCode, 1);
  t.ok(
    r.err.some((l) => /^4 episodes aborted: .*answered 400.*this model does not exist/.test(l)),
    r.err.join('\n'),
  );
  t.ok(r.err.some((l) => /did not really run: all 4 episodes aborted/.test(l)));
  t.notMatch(r.out, /connection/, 'no connection problem');
});

t.test('evalProblem and abortReasons', async (t) => {
  const ep = (aborted: boolean, error: string | null = null) => ({ aborted, error });
  t.equal(
    evalProblem({ episodes: [ep(false), ep(true, 'x')], aborted: 1 }),
    null,
    'a partly aborted run of a reachable server runs',
  );
  t.equal(
    evalProblem({ episodes: [ep(false), ep(true, 'x')], aborted: 1, connection: { failures: 0, stopped: null } }),
    null,
  );
  t.match(
    evalProblem({ episodes: [ep(false), ep(true, 'x')], aborted: 1, connection: { failures: 2, stopped: null } }) ?? '',
    /1 of 2 episodes aborted; 2 calls failed/,
  );
  t.match(evalProblem({ episodes: [ep(true, 'x'), ep(true, 'x')], aborted: 2 }) ?? '', /all 2 episodes aborted/);
  t.same(abortReasons([ep(true, 'a'), ep(false), ep(true, 'b'), ep(true, 'a\nmore')]), [
    '2 episodes aborted: a',
    '1 episode aborted: b',
  ]);
  t.same(abortReasons([ep(true, '1'), ep(true, '2'), ep(true, '3')], 2), [
    '1 episode aborted: 1',
    '1 episode aborted: 2',
    '(1 more reasons, see --json)',
  ]);
});

t.test('--base-url shows its real default', async (t) => {
  const evalCmd = buildProgram().commands.find((c) => c.name() === 'eval');
  const help = evalCmd?.helpInformation() ?? '';
  t.notMatch(help, /\(default: \[\]\)/);
  t.match(
    help.replace(/\s+/g, ' '),
    /--base-url <url> OpenAI-compatible base URL \(repeatable\) \(default: env OPENAI_BASE_URL, else https:\/\/api\.openai\.com\/v1\)/,
  );
});

t.test('the progress bar prints its last line once (the evaluation reports its end again)', async (t) => {
  for (const isTTY of [false, true]) {
    const written: string[] = [];
    const bar = progressBar({ isTTY, write: (s: string) => void written.push(s) } as unknown as Parameters<
      typeof progressBar
    >[0]);
    for (let i = 1; i <= 4; i++) bar(i, 4);
    bar(4, 4);
    t.equal(written.filter((s) => s.includes('4/4 episodes')).length, 1, `one final line (TTY ${isTTY})`);
  }
});

t.test('--policy openai with the checkpoint of a pretrained run: refused saying why and what to do', async (t) => {
  const jinja = new JinjaChatFormat(await qwen3Tokenizer(), '{% for m in messages %}{{ m.content }}{% endfor %}');
  const problem = openaiCheckpointProblem({ chat: jinja, checkpoint: 'runs/qwen/checkpoints/step-4' });
  t.match(
    problem,
    /--policy openai --checkpoint runs\/qwen\/checkpoints\/step-4: the checkpoint is a run of a pretrained model/,
  );
  t.match(problem, /--policy builtin --checkpoint runs\/qwen\/checkpoints\/step-4/);
  t.notMatch(problem, /createReader|renderAssistantBody|ChatTokenPolicy/, 'no internal names');
  t.equal(
    openaiCheckpointProblem({
      chat: new ChatTemplate(trainChatTokenizer(' ', { vocabSize: 262 })),
      checkpoint: 'x',
    }),
    null,
    'the built-in template works',
  );
});
