#!/usr/bin/env node
// Builds the addon with cmake-js (CUDA kernels included when nvcc is found) into build-cmake/
// and copies the binary where node-gyp-build looks for it:
//   node scripts/cmake-build.mjs --to build     → build/Release/sinkflex.node (local build)
//   node scripts/cmake-build.mjs --to prebuilds → prebuilds/<platform>-<arch>/sinkflex-rl.node
// On Linux it then checks with ldd that the binary needs no CUDA shared library.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const args = process.argv.slice(2);
const toIndex = args.indexOf('--to');
const target = toIndex >= 0 ? args[toIndex + 1] : 'build';
if (target !== 'build' && target !== 'prebuilds') {
  console.error(`--to must be 'build' or 'prebuilds', got '${target}'`);
  process.exit(2);
}
const extra = args.filter((_, i) => i !== toIndex && i !== toIndex + 1);
const jobs = String(
  Math.max(1, Number(process.env.SINKFLEX_BUILD_JOBS ?? 0) || (await import('node:os')).availableParallelism()),
);

const cmakeJs = join(root, 'node_modules', 'cmake-js', 'bin', 'cmake-js');
execFileSync(process.execPath, [cmakeJs, 'compile', '--out', 'build-cmake', '--parallel', jobs, ...extra], {
  cwd: root,
  stdio: 'inherit',
});

const built = join(root, 'build-cmake', 'Release', 'sinkflex.node');
if (!existsSync(built)) {
  console.error(`cmake-js finished but ${built} is missing`);
  process.exit(1);
}

if (process.platform === 'linux') {
  const deps = execFileSync('ldd', [built], { encoding: 'utf8' });
  const cuda = deps.split('\n').filter((l) => /libcuda|libcudart|libcublas|libnvrtc/.test(l));
  if (cuda.length > 0) {
    console.error(`the addon links CUDA shared libraries and would not load without them:\n${cuda.join('\n')}`);
    process.exit(1);
  }
}

const dest =
  target === 'build'
    ? join(root, 'build', 'Release', 'sinkflex.node')
    : join(root, 'prebuilds', `${process.platform}-${process.arch}`, 'sinkflex-rl.node');
mkdirSync(dirname(dest), { recursive: true });
copyFileSync(built, dest);
console.log(`sinkflex: installed ${dest}`);
