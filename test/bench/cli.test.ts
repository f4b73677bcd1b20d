// `sinkflex bench <name>`: every benchmark has one entry (its module's main): it shows its help
// for --help (running nothing), lists the common --quick and --json options and receives the
// arguments given after its name; every bench module in bench/ is listed.
import { readdirSync } from 'node:fs';

import t from 'tap';

import { BENCHES, runBench } from '../../lib/cli/commands/bench.js';
import { buildProgram } from '../../lib/cli/main.js';

interface Caught {
  code?: string;
  exitCode?: number;
}

/** Runs `sinkflex bench <name> args` with help and errors caught; returns what it wrote and the commander error. */
async function caught(name: string, args: string[]): Promise<{ out: string; err: string; error: Caught | null }> {
  let out = '';
  let err = '';
  try {
    await runBench(name, args, {
      exitOverride: true,
      output: { writeOut: (s) => void (out += s), writeErr: (s) => void (err += s) },
    });
    return { out, err, error: null };
  } catch (e) {
    return { out, err, error: e as Caught };
  }
}

const benches = BENCHES.map((b) => b.name);

t.test('every benchmark module of bench/ has an entry', async (t) => {
  const helpers = new Set(['attention-chart', 'gym-heavy-env']); // a chart and an env the benches use, no benchmark of their own
  const modules = readdirSync(new URL('../../bench/', import.meta.url))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => f.slice(0, -3))
    .filter((n) => !helpers.has(n));
  t.same([...benches].sort(), modules.sort());
});

t.test('every benchmark shows its help for --help and runs nothing', async (t) => {
  for (const name of benches) {
    const t0 = Date.now();
    const r = await caught(name, ['--help']);
    t.equal(r.error?.code, 'commander.helpDisplayed', `${name}: help shown`);
    t.equal(r.error?.exitCode, 0);
    t.match(r.out, new RegExp(`^Usage: sinkflex bench ${name} \\[options\\]`), `${name}: usage names the command`);
    t.match(r.out, /--quick[\s\S]*--json \[file\]/, `${name}: the common options are listed`);
    t.ok(Date.now() - t0 < 5000, `${name}: nothing ran`);
  }
});

t.test('every benchmark receives its arguments: unknown ones are refused', async (t) => {
  for (const name of benches) {
    const r = await caught(name, ['--no-such-option']);
    t.equal(r.error?.code, 'commander.unknownOption', `${name}: the bench parsed the argument`);
    t.match(r.err, /unknown option '--no-such-option'/);
  }
  const extra = await caught('tau', ['stray']);
  t.equal(extra.error?.code, 'commander.excessArguments', 'stray arguments are refused too');
  await t.rejects(runBench('nope', []), /unknown benchmark 'nope' \(known: .*tau-telecom/);
});

t.test('the command line hands the arguments after the name to the bench', async (t) => {
  // through the program: `sinkflex bench gym --help` reaches the bench (commander exits after help)
  const exit = process.exit;
  const write = process.stdout.write;
  let out = '';
  process.exit = ((code?: number) => {
    throw Object.assign(new Error('exit'), { exitCode: code });
  }) as typeof process.exit;
  process.stdout.write = ((s: string) => {
    out += s;
    return true;
  }) as typeof process.stdout.write;
  let exitCode: number | undefined;
  try {
    await buildProgram().parseAsync(['node', 'sinkflex', 'bench', 'gym', '--help']);
  } catch (e) {
    exitCode = (e as { exitCode?: number }).exitCode;
  } finally {
    process.exit = exit;
    process.stdout.write = write;
  }
  t.equal(exitCode, 0);
  t.match(out, /Usage: sinkflex bench gym \[options\][\s\S]*--quick[\s\S]*--json/);
});
