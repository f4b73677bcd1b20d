// SINKFLEX_ADDON=<path> makes the loader use that addon file (the CUDA emulator build in
// build-emu/Release, for the tests with CUDA parts) instead of build/Release or prebuilds/;
// unset or empty, the ordinary lookup. A path that does not load is a NativeLoadError naming it.
import { join } from 'node:path';

import t from 'tap';

import { NativeLoadError } from '../../lib/native/errors.js';
import { addonOverride, loadAddon, packageRoot } from '../../lib/native/loader.js';

const saved = process.env.SINKFLEX_ADDON;
t.teardown(() => {
  if (saved === undefined) delete process.env.SINKFLEX_ADDON;
  else process.env.SINKFLEX_ADDON = saved;
});

t.test('the override path', async (t) => {
  delete process.env.SINKFLEX_ADDON;
  t.equal(addonOverride(), null, 'unset: none');
  process.env.SINKFLEX_ADDON = '';
  t.equal(addonOverride(), null, 'empty: none');
  process.env.SINKFLEX_ADDON = 'build-emu/Release/sinkflex.node';
  t.equal(
    addonOverride(),
    join(process.cwd(), 'build-emu', 'Release', 'sinkflex.node'),
    'relative to the current folder',
  );
  process.env.SINKFLEX_ADDON = '/abs/x.node';
  t.equal(addonOverride(), '/abs/x.node');
});

t.test('the loader uses it', async (t) => {
  // this process has not loaded the addon yet: the first load reads the variable
  process.env.SINKFLEX_ADDON = join(packageRoot(), 'no-such-dir', 'sinkflex.node');
  t.throws(
    () => loadAddon(),
    { name: 'NativeLoadError', message: /SINKFLEX_ADDON=.*no-such-dir.*sinkflex\.node/ },
    'a missing file is refused, naming it',
  );
  t.throws(() => loadAddon(), NativeLoadError, 'and nothing was cached');
  process.env.SINKFLEX_ADDON = join(packageRoot(), 'build', 'Release', 'sinkflex.node');
  t.ok(
    loadAddon()
      .backends()
      .some((b) => b.name === 'cpu'),
    'an addon file loads',
  );
});
