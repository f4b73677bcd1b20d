#!/usr/bin/env node
// The one list of native sources, read by binding.gyp (node-gyp) and CMakeLists.txt (cmake-js):
// `node native/sources.mjs cc` prints every native/**/*.cc, `... cu` every native/**/*.cu,
// as paths relative to the package root, one per line, sorted.
import { readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);
const ext = process.argv[2] === 'cu' ? '.cu' : '.cc';

function walk(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    return e.isDirectory() ? walk(p) : e.name.endsWith(ext) ? [p] : [];
  });
}

process.stdout.write(walk(here).map((p) => relative(root, p).split('\\').join('/')).sort().join('\n') + '\n');
