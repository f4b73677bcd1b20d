#!/usr/bin/env node
// Builds the addon with the CUDA emulator: every native .cu file compiled as plain C++ against
// scripts/cuda-emulator/include (stand-ins for <cuda_runtime.h> and <cuda_bf16.h>) and linked
// with emulator.cc and the .cc files, so the binary reports one emulated GPU ('cuda:0') whose
// kernels run on the CPU. `npm run build:cuda-emulator` writes build-emu/Release/sinkflex.node
// (never build/Release: the ordinary addon and `npm test` stay as they are); the tests load it
// through SINKFLEX_ADDON:
//   SINKFLEX_ADDON=build-emu/Release/sinkflex.node npx tap test/attention/cuda.test.ts …
// (again with SFX_EMU_ORDER=reverse). It checks the kernels' indexing, masking and
// synchronisation, not their speed. Linux x86-64, g++ (or $CXX).
//
// Objects are reused where they can be: the emulator's own objects when newer than their source
// and every header they included (the -MMD lists), and a .cc object of the ordinary node-gyp
// build (build/Release/obj.target) when it is fresh by node-gyp's dependency list and neither its
// source nor its headers mention the CUDA build macros (so it is the same code either way). Jobs:
// $SINKFLEX_BUILD_JOBS, default the CPU count. SFX_EMU_SANITIZE=1 adds AddressSanitizer (into
// build-emu-asan/, compiling everything; device buffers are heap blocks, so an out-of-bounds kernel
// access is reported); run node with LD_PRELOAD=$(g++ -print-file-name=libasan.so)
// ASAN_OPTIONS=detect_leaks=0 then.
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { cpus } from 'node:os';
import { isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';

const run = promisify(execFile);
const here = fileURLToPath(new URL('.', import.meta.url));
const root = fileURLToPath(new URL('../..', import.meta.url));
const require = createRequire(import.meta.url);
const cxx = process.env.CXX || 'g++';
const sanitize = process.env.SFX_EMU_SANITIZE === '1';
const out = join(root, sanitize ? 'build-emu-asan' : 'build-emu');
const started = Date.now();
mkdirSync(join(out, 'obj'), { recursive: true });
mkdirSync(join(out, 'Release'), { recursive: true });

const list = async (ext) =>
  (await run(process.execPath, [join(root, 'native', 'sources.mjs'), ext], { cwd: root })).stdout
    .split('\n')
    .filter(Boolean);
const sources = [...(await list('cc')), ...(await list('cu')), 'scripts/cuda-emulator/emulator.cc'];

/**
 * The prerequisites of the object's rule in a make-style dependency file (`x.o: a.cc b.h \` …,
 * after node-gyp's `cmd_…` line when there is one), resolved from `base`.
 */
const depsOf = (file, base) => {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const rule = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .find((line) => /^\S+\.o: /.test(line));
  if (rule === undefined) return null;
  const colon = rule.indexOf(': ');
  return rule
    .slice(colon + 2)
    .split(/\s+/)
    .filter(Boolean)
    .map((d) => (isAbsolute(d) ? d : join(base, d)));
};
/** Whether every file of `deps` exists and is older than `t`. */
const olderThan = (deps, t) =>
  deps !== null &&
  deps.every((d) => {
    try {
      return statSync(d).mtimeMs < t;
    } catch {
      return false;
    }
  });
const mtime = (f) => {
  try {
    return statSync(f).mtimeMs;
  } catch {
    return -1;
  }
};

// What differs between the ordinary build and this one: the CUDA build macros (a preprocessor
// line testing one) and the CUDA headers.
const CUDA_MACROS =
  /^\s*#\s*(?:if|ifdef|ifndef|elif|include)\b.*(?:SINKFLEX_WITH_CUDA|SINKFLEX_CUDA_EMULATOR|__CUDACC__|__CUDA_ARCH__|cuda_runtime|cuda_bf16)/m;
const gypBuild = join(root, 'build');
/** The fresh node-gyp object of a .cc source whose code does not depend on the CUDA macros, else null. */
const gypObject = (src) => {
  if (sanitize || !src.startsWith('native/') || !src.endsWith('.cc')) return null;
  const obj = join(gypBuild, 'Release', 'obj.target', 'sinkflex', src.replace(/\.cc$/, '.o'));
  const t = mtime(obj);
  if (t < 0) return null;
  const deps = depsOf(
    join(gypBuild, 'Release', '.deps', 'Release', 'obj.target', 'sinkflex', `${src.replace(/\.cc$/, '.o')}.d`),
    gypBuild,
  );
  if (!olderThan(deps, t)) return null;
  const own = deps.filter((d) => d.startsWith(join(root, 'native')));
  return own.some((d) => CUDA_MACROS.test(readFileSync(d, 'utf8'))) ? null : obj;
};

const version = require(join(root, 'package.json')).version;
const flags = [
  '-std=c++17',
  '-O2',
  '-fPIC',
  '-pthread',
  '-fexceptions',
  '-DNAPI_VERSION=8',
  '-DNODE_ADDON_API_CPP_EXCEPTIONS',
  `-DSINKFLEX_VERSION="${version}"`,
  '-DSINKFLEX_WITH_CUDA',
  '-DSINKFLEX_CUDA_EMULATOR',
  `-I${join(here, 'include')}`,
  `-I${require('node-api-headers').include_dir}`,
  `-I${join(root, require('node-addon-api').include_dir)}`,
  ...(sanitize ? ['-fsanitize=address', '-fno-omit-frame-pointer'] : []),
];

const objects = [];
const counts = { compiled: 0, fresh: 0, reused: 0 };
const jobs = sources.map((src) => async () => {
  const obj = join(out, 'obj', src.replace(/[\\/]/g, '_') + '.o');
  const t = mtime(obj);
  if (t > mtime(join(root, src)) && olderThan(depsOf(`${obj}.d`, root), t)) {
    objects.push(obj);
    counts.fresh++;
    return;
  }
  const reuse = gypObject(src);
  if (reuse !== null) {
    objects.push(reuse);
    counts.reused++;
    return;
  }
  console.log(`emulator build: ${src}`);
  await run(
    cxx,
    [
      ...flags,
      ...(src.endsWith('.cu') ? ['-x', 'c++'] : []),
      '-MMD',
      '-MF',
      `${obj}.d`,
      '-c',
      join(root, src),
      '-o',
      obj,
    ],
    { cwd: root, maxBuffer: 1 << 26 },
  );
  objects.push(obj);
  counts.compiled++;
});
const width = Math.max(1, Number(process.env.SINKFLEX_BUILD_JOBS ?? 0) || cpus().length);
let next = 0;
try {
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < jobs.length) await jobs[next++]();
    }),
  );
} catch (e) {
  console.error(e.stderr || e.message);
  process.exit(1);
}
const binary = join(out, 'Release', 'sinkflex.node');
await run(cxx, ['-shared', '-pthread', ...(sanitize ? ['-fsanitize=address'] : []), '-o', binary, ...objects.sort()], {
  cwd: root,
});
console.log(
  `emulator build: ${relative(root, binary)} (an emulated cuda:0): ${counts.compiled} compiled, ${counts.fresh} up to date, ` +
    `${counts.reused} objects of the node-gyp build reused, ${width} jobs, ${((Date.now() - started) / 1000).toFixed(1)} s; ` +
    `load it with SINKFLEX_ADDON=${relative(root, binary)}`,
);
