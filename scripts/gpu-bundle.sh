#!/usr/bin/env bash
# Prepares an offline bundle for bench/gpu-check.sh on a GPU machine that has no network and
# maybe no Node.js: everything is built here (where npm, node_modules and nvcc are) and packed
# into one folder, which travels with the checkout (names only: the folder is not committed).
#
#   scripts/gpu-bundle.sh [DIR] [ARCH]     # DIR default .gpu-bundle, ARCH default 90 (sm_90)
#
# DIR then holds node.xz (this machine's node binary, when the GPU machine has none),
# packages.tar.xz (the runtime packages and tap's test runtime, nothing else), dist.tar.xz (lib,
# bench and test compiled by tsc, so the tests run with plain node, no TypeScript loader),
# sinkflex.node (the CUDA addon for ARCH, built in a scratch worktree; the CUDA runtime linked
# statically) and run.sh. On the GPU machine, in the checkout's root: `bash DIR/run.sh`; it
# unpacks, runs bench/gpu-check.sh stage by stage (GEMMs, attention, the GPU tests, the kernel,
# transformer and pretrained benchmarks), each time-boxed within BUDGET_ALL seconds (default
# 400), and after every stage packs the logs into $OUT/results.tgz (else DIR/results.tgz).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$(cd "$root" && mkdir -p "${1:-.gpu-bundle}" && cd "${1:-.gpu-bundle}" && pwd)"
arch="${2:-90}"
cd "$root"
say() { echo "gpu-bundle: $*"; }

scratch="$(mktemp -d)"
trap 'git -C "$root" worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
say "scratch worktree of HEAD (uncommitted changes are not bundled)"
git worktree add --detach "$scratch/tree" HEAD >/dev/null
ln -s "$root/node_modules" "$scratch/tree/node_modules"

say "tsc: lib, bench and test into dist/"
cat >"$scratch/tree/tsconfig.bundle.json" <<'JSON'
{ "extends": "./tsconfig.json",
  "compilerOptions": { "declaration": false, "declarationMap": false, "sourceMap": false },
  "include": ["lib/**/*.ts", "bench/**/*.ts", "test/**/*.ts"] }
JSON
(cd "$scratch/tree" && node_modules/.bin/tsc -p tsconfig.bundle.json)
(cd "$scratch/tree" && tar cf - dist | xz -T0 -6 >"$dir/dist.tar.xz")

say "CUDA addon for sm_$arch (cmake-js; takes minutes)"
(cd "$scratch/tree" && mkdir -p build && node scripts/cmake-build.mjs --to build "--CDSINKFLEX_CUDA_ARCHITECTURES=$arch" >"$scratch/build.log" 2>&1) \
  || { tail -30 "$scratch/build.log"; exit 1; }
cp "$scratch/tree/build/Release/sinkflex.node" "$dir/sinkflex.node"

say "runtime packages: the dependencies' closure and what the compiled tests load (tap's runtime)"
node - "$root" >"$scratch/packages.txt" <<'JS'
const fs = require('fs'), path = require('path');
const root = process.argv[2], seen = new Set();
const find = (from, name) => {
  for (let d = from; ; d = path.dirname(d)) {
    const c = path.join(d, 'node_modules', name);
    if (fs.existsSync(path.join(c, 'package.json'))) return c;
    if (d === root || d === path.dirname(d)) return null;
  }
};
const walk = (dir) => {
  if (!dir || seen.has(dir)) return;
  seen.add(dir);
  const pj = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  for (const n of Object.keys({ ...pj.dependencies, ...pj.optionalDependencies })) walk(find(dir, n));
};
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
for (const n of Object.keys(pkg.dependencies ?? {})) walk(find(root, n));
// tap's own closure holds its TypeScript loaders (typescript itself); compiled tests need only
// the test runtime, which these packages are (and what they load)
for (const n of ['tap', '@tapjs/core', '@tapjs/test', '@tapjs/after', '@tapjs/after-each', '@tapjs/asserts',
  '@tapjs/before', '@tapjs/before-each', '@tapjs/chdir', '@tapjs/filter', '@tapjs/fixture', '@tapjs/intercept',
  '@tapjs/mock', '@tapjs/node-serialize', '@tapjs/snapshot', '@tapjs/spawn', '@tapjs/stdin', '@tapjs/typescript',
  '@tapjs/worker', '@tapjs/error-serdes', '@tapjs/processinfo', '@tapjs/stack', '@base2/pretty-print-object',
  '@isaacs/cliui', 'async-hook-domain', 'diff', 'events-to-array', 'function-loop', 'glob', 'is-actual-promise',
  'is-plain-object', 'jackspeak', 'minipass', 'mkdirp', 'node-options-to-argv', 'react', 'react-element-to-jsx-string',
  'react-is', 'resolve-import', 'rimraf', 'signal-exit', 'tap-parser', 'tap-yaml', 'tcompare', 'trivial-deferred',
  'walk-up-path', 'yaml', 'yaml-types']) {
  const d = find(root, n);
  if (d) seen.add(d);
}
for (const d of [...seen].sort()) console.log(path.relative(path.join(root, 'node_modules'), d));
JS
(cd node_modules && tar cf - $(cat "$scratch/packages.txt") | xz -T0 -6 >"$dir/packages.tar.xz")

say "node binary ($(node -v))"
xz -T0 -6 -c "$(command -v node)" >"$dir/node.xz"
cp "$root/scripts/gpu-bundle-run.sh" "$dir/run.sh"
du -sh "$dir"/* | sed 's/^/gpu-bundle: /'
say "done: on the GPU machine, in the checkout's root: bash $(realpath --relative-to="$root" "$dir")/run.sh"
