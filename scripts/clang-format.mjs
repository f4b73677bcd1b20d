// clang-format over native/ (C++ and CUDA sources) with the repository's .clang-format, through the
// clang-format npm package's binary (no system install needed).
//   node scripts/clang-format.mjs          rewrites the files in place
//   node scripts/clang-format.mjs --check  lists the files that differ and exits 1 if any does
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const check = process.argv.includes('--check');
const SOURCE = /\.(cc|h|cu|cuh|inl)$/;

/** Every C++/CUDA source under `dir`, sorted. */
function sources(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && SOURCE.test(e.name))
    .map((e) => join(e.parentPath ?? e.path, e.name))
    .sort();
}

const require = createRequire(import.meta.url);
const binary = join(
  dirname(require.resolve('clang-format/package.json')),
  'bin',
  `${process.platform}_${process.arch}`,
  'clang-format',
);
const files = sources(join(root, 'native'));
const args = check ? ['--style=file', '--dry-run', '-Werror', ...files] : ['--style=file', '-i', ...files];
const r = spawnSync(binary, args, { cwd: root, encoding: 'utf8' });
if (r.error) {
  console.error(`clang-format could not run (${binary}): ${r.error.message}`);
  process.exit(2);
}
if (r.status !== 0) {
  const differing = [...new Set([...r.stderr.matchAll(/^(\S+?):\d+:\d+: error/gm)].map((m) => relative(root, m[1])))];
  console.error(
    differing.length > 0
      ? `clang-format: ${differing.length} files differ from .clang-format (run npm run format):\n  ${differing.join('\n  ')}`
      : r.stderr,
  );
  process.exit(1);
}
if (check) console.log(`clang-format: ${files.length} native sources formatted`);
