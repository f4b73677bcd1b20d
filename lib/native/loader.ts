import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { CoreAddon } from './addon-types.js';
import { DeviceError, NativeLoadError, OutOfMemoryError } from './errors.js';

const require = createRequire(import.meta.url);

let root: string | undefined;
let addon: CoreAddon | undefined;

/** The installed package's root folder (the one holding its package.json). */
export function packageRoot(): string {
  if (root !== undefined) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pj = join(dir, 'package.json');
    if (existsSync(pj)) {
      const name = (JSON.parse(readFileSync(pj, 'utf8')) as { name?: string }).name;
      if (name === 'sinkflex-rl') return (root = dir);
    }
    const up = dirname(dir);
    if (up === dir) throw new NativeLoadError('cannot find the sinkflex-rl package root');
    dir = up;
  }
}

let cachedVersion: string | undefined;

/** The package version (from its package.json). */
export function packageVersion(): string {
  cachedVersion ??= (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string })
    .version;
  return cachedVersion;
}

/**
 * The addon file named by the environment variable `SINKFLEX_ADDON` (resolved from the current
 * folder), or null when it is unset or empty: e.g. the CUDA emulator build,
 * `SINKFLEX_ADDON=build-emu/Release/sinkflex.node`.
 */
export function addonOverride(): string | null {
  const path = process.env.SINKFLEX_ADDON;
  return path === undefined || path === '' ? null : resolve(path);
}

/**
 * Loads the native addon once and returns it typed as `T` (the functions a layer uses): the
 * file `SINKFLEX_ADDON` names when set (see {@link addonOverride}), else through node-gyp-build
 * (a local build in `build/Release` first, then `prebuilds/<platform>-<arch>/`).
 */
export function loadAddon<T extends object = CoreAddon>(): T & CoreAddon {
  if (addon === undefined) {
    const override = addonOverride();
    const dir = packageRoot();
    let loaded: CoreAddon;
    try {
      loaded = (
        override !== null ? require(override) : (require('node-gyp-build') as (dir: string) => unknown)(dir)
      ) as CoreAddon;
    } catch (e) {
      if (override !== null) {
        throw new NativeLoadError(
          `could not load the sinkflex native addon SINKFLEX_ADDON=${override}: ${(e as Error).message}`,
          { cause: e },
        );
      }
      throw new NativeLoadError(
        `could not load the sinkflex native addon from ${dir}: ${(e as Error).message}. ` +
          'Reinstall the package, or build it from source with `npm run build:native` (needs a C++ compiler).',
        { cause: e },
      );
    }
    const expected = packageVersion();
    const built = typeof loaded.version === 'function' ? loaded.version() : 'unknown';
    if (built !== expected) {
      throw new NativeLoadError(
        `the sinkflex native addon was built for version ${built} but the package is ${expected}; ` +
          'rebuild it with `npm run build:native` (or reinstall the package)',
      );
    }
    loaded.setErrorClasses({ OutOfMemoryError, DeviceError });
    addon = loaded;
  }
  return addon as T & CoreAddon;
}
