import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

import t from 'tap';

const child = join(process.cwd(), 'test', 'model', 'fixtures', 'determinism-child.mjs');
const run = (threads: number): string =>
  execFileSync(process.execPath, [child], {
    env: { ...process.env, SINKFLEX_NUM_THREADS: String(threads) },
    encoding: 'utf8',
  });

t.test('ops, initialisation and AdamW give the same bits with 1 and 3 threads', async (t) => {
  const one = run(1);
  t.match(one, /^[0-9a-f]{64}$/);
  t.equal(run(3), one, '3 threads');
});
