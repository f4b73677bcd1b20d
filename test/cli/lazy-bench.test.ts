// bench/ is off the run-time path: building the `sinkflex` program and running `sinkflex train
// --help` or `sinkflex bench` (the list) loads no module of bench/; `sinkflex bench tau --help`
// loads that one benchmark (and its helpers) only. Each case runs in a child process whose
// module loads a loader hook records.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import t from 'tap';

const root = new URL('../../', import.meta.url);
const benchDir = new URL('bench/', root).href;

/**
 * The bench/ modules a fresh process loads while it builds the program and parses each command
 * line of `runs` in turn (one list per run: what that run added).
 */
function benchModulesLoadedBy(runs: string[][]): string[][] {
  const hook = `
    let port;
    export function initialize(data) { port = data.port; }
    export async function load(url, context, next) { port.postMessage(url); return next(url, context); }`;
  const script = `
    import { register } from 'node:module';
    import { MessageChannel } from 'node:worker_threads';
    const { port1, port2 } = new MessageChannel();
    let urls = [];
    let sentinelSeen = () => undefined;
    port1.on('message', (u) => (u.includes('sentinel') ? sentinelSeen() : urls.push(u)));
    register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hook)}), { data: { port: port2 }, transferList: [port2] });
    /** What was loaded since the last call (a sentinel module marks the end of the messages). */
    const loadedSince = async (i) => {
      const seen = new Promise((resolve) => (sentinelSeen = resolve));
      await import('data:text/javascript,export%20default%20' + i + '%3B%2F%2Fsentinel');
      await seen;
      const out = urls;
      urls = [];
      return out;
    };
    const { buildProgram } = await import(${JSON.stringify(new URL('lib/cli/main.ts', root).href)});
    process.exit = (code) => { throw Object.assign(new Error('exit'), { exitCode: code }); };
    const write = process.stdout.write;
    process.stdout.write = () => true;
    const log = console.log;
    console.log = () => undefined;
    const result = [await loadedSince(0)];
    for (const [i, args] of ${JSON.stringify(runs)}.entries()) {
      try {
        await buildProgram().parseAsync(['node', 'sinkflex', ...args]);
      } catch (e) {
        if (e.exitCode !== 0) throw e;
      }
      result.push(await loadedSince(i + 1));
    }
    port1.close();
    process.stdout.write = write;
    console.log = log;
    console.log(JSON.stringify(result));`;
  const child = spawnSync(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], {
    cwd: fileURLToPath(root),
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (child.status !== 0) throw new Error(`child failed (${child.status}): ${child.stderr}`);
  const [program, ...perRun] = JSON.parse(child.stdout.trim().split('\n').pop()!) as string[][];
  if (!program.some((u) => u.endsWith('/lib/cli/main.ts'))) throw new Error('the hook saw no module of the program');
  const benchOnly = (urls: string[]) => urls.filter((u) => u.startsWith(benchDir)).map((u) => u.slice(benchDir.length));
  return [benchOnly(program), ...perRun.map(benchOnly)];
}

t.test('only the benchmark that runs is loaded', async (t) => {
  const [program, trainHelp, list, tau] = benchModulesLoadedBy([
    ['train', '--help'],
    ['bench'],
    ['bench', 'tau', '--help'],
  ]);
  t.same(program, [], 'importing lib/cli/main.js loads no benchmark module');
  t.same(trainHelp, [], 'sinkflex train --help loads none');
  t.same(list, [], 'sinkflex bench (the list) loads none');
  t.ok(tau.includes('tau.ts'), `sinkflex bench tau --help loads bench/tau.ts (${tau.join(', ')})`);
  t.notOk(
    tau.some((m) => /^(memory|speed|attention|gym|grpo|rollout|model-|gpu-|transformer-)/.test(m)),
    'and no other benchmark',
  );
});
