#!/usr/bin/env node
// Builds the addon with the CUDA emulator: every native .cu file compiled as plain C++ against
// scripts/cuda-emulator/include (stand-ins for <cuda_runtime.h> and <cuda_bf16.h>) and linked
// with emulator.cc, so the binary reports one emulated GPU ('cuda:0') whose kernels run on the
// CPU. `npm run build:cuda-emulator` puts it in build/Release/ — then the GPU tests
// (test/attention/cuda.test.ts, test/native/device-tensor.test.ts) run their CUDA parts
// without a GPU; `npm run build:native` restores the CPU addon. It checks the kernels'
// indexing, masking and synchronisation (run the tests again with SFX_EMU_ORDER=reverse), not
// their speed. Linux x86-64, g++ (or $CXX). SFX_EMU_SANITIZE=1 adds AddressSanitizer (device
// buffers are heap blocks, so an out-of-bounds kernel access is reported); run node with
// LD_PRELOAD=$(g++ -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 then.
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { cpus } from 'node:os';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(dirname(here));
const require = createRequire(import.meta.url);
const cxx = process.env.CXX || 'g++';
const sanitize = process.env.SFX_EMU_SANITIZE === '1';
const out = join(root, sanitize ? 'build-emu-asan' : 'build-emu');
mkdirSync(join(out, 'obj'), { recursive: true });

const list = async (ext) => (await run(process.execPath, [join(root, 'native', 'sources.mjs'), ext], { cwd: root })).stdout
  .split('\n').filter(Boolean);
const sources = [...(await list('cc')), ...(await list('cu')), 'scripts/cuda-emulator/emulator.cc'];

// An object is fresh when it is newer than its source and every header it included (the
// dependency list g++ wrote next to it with -MMD; no list yet means compile).
const depsFresh = (obj, t) => {
  let text;
  try {
    text = readFileSync(`${obj}.d`, 'utf8');
  } catch {
    return false;
  }
  const deps = text.replace(/\\\n/g, ' ').split(':').slice(1).join(':').split(/\s+/).filter(Boolean);
  return deps.every((d) => {
    try {
      return statSync(isAbsolute(d) ? d : join(root, d)).mtimeMs < t;
    } catch {
      return false;
    }
  });
};
const version = require(join(root, 'package.json')).version;
const flags = [
  '-std=c++17', '-O2', '-fPIC', '-pthread', '-fexceptions', '-DNAPI_VERSION=8', '-DNODE_ADDON_API_CPP_EXCEPTIONS',
  `-DSINKFLEX_VERSION="${version}"`, '-DSINKFLEX_WITH_CUDA', '-DSINKFLEX_CUDA_EMULATOR',
  `-I${join(here, 'include')}`, `-I${require('node-api-headers').include_dir}`,
  `-I${join(root, require('node-addon-api').include_dir)}`,
  ...(sanitize ? ['-fsanitize=address', '-fno-omit-frame-pointer'] : []),
];

const objects = [];
const jobs = sources.map((src) => async () => {
  const obj = join(out, 'obj', src.replace(/[\\/]/g, '_') + '.o');
  objects.push(obj);
  let fresh = false;
  try {
    const t = statSync(obj).mtimeMs;
    fresh = t > statSync(join(root, src)).mtimeMs && depsFresh(obj, t);
  } catch {
    fresh = false;
  }
  if (fresh) return;
  console.log(`emulator build: ${src}`);
  await run(cxx, [...flags, ...(src.endsWith('.cu') ? ['-x', 'c++'] : []), '-MMD', '-MF', `${obj}.d`, '-c', join(root, src), '-o', obj],
    { cwd: root, maxBuffer: 1 << 26 });
});
const width = Math.max(1, Number(process.env.SINKFLEX_BUILD_JOBS ?? 0) || cpus().length);
let next = 0;
try {
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < jobs.length) await jobs[next++]();
  }));
} catch (e) {
  console.error(e.stderr || e.message);
  process.exit(1);
}
const binary = join(out, 'sinkflex.node');
await run(cxx, ['-shared', '-pthread', ...(sanitize ? ['-fsanitize=address'] : []), '-o', binary, ...objects.sort()],
  { cwd: root });
const dest = join(root, 'build', 'Release', 'sinkflex.node');
mkdirSync(dirname(dest), { recursive: true });
copyFileSync(binary, dest);
console.log(`emulator build: installed ${dest} (${basename(binary)} with an emulated cuda:0)`);
