import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

import t from 'tap';

import { invokedDirectly } from '../../bench/common/entry.js';

t.test('invokedDirectly: true only for the module node was started with', async (t) => {
  const saved = [...process.argv];
  const argv1 = process.argv[1];
  t.teardown(() => {
    process.argv.splice(0, process.argv.length, ...saved);
  });
  t.ok(argv1, 'tap starts this file with node');
  t.ok(invokedDirectly(pathToFileURL(realpathSync(argv1 as string)).href), "the script's own URL");
  t.notOk(invokedDirectly(pathToFileURL('/nowhere/bench/x.js').href), 'another module');
  process.argv[1] = '/does/not/exist.js';
  t.notOk(invokedDirectly(pathToFileURL('/does/not/exist.js').href), 'a script path that does not exist (node -e)');
  process.argv.splice(1, process.argv.length - 1);
  t.notOk(invokedDirectly(import.meta.url), 'no script at all');
});
