import t from 'tap';

import { buildProgram } from '../../lib/cli/main.js';
import { version } from '../../lib/native/index.js';

async function run(args: string[]): Promise<string> {
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void lines.push(a.join(' '));
  try {
    await buildProgram()
      .exitOverride()
      .parseAsync(['node', 'sinkflex', ...args]);
  } finally {
    console.log = log;
  }
  return lines.join('\n');
}

t.test('sinkflex info prints the version and the backends', async (t) => {
  const text = await run(['info']);
  t.match(text, new RegExp(`^sinkflex-rl ${version().replace(/\./g, '\\.')} \\(N-API 8`));
  t.match(text, /\n {2}cpu {6}\d+ threads/);
  const json = JSON.parse(await run(['info', '--json'])) as { version: string; backends: { name: string }[] };
  t.equal(json.version, version());
  t.equal(json.backends[0]?.name, 'cpu');
});
