#!/usr/bin/env node
// Checks what users get from npm: packs the package, verifies the tarball holds dist/, the
// .d.ts files and prebuilds/<platform>-<arch>/*.node, installs it into an empty folder with
// --ignore-scripts (so nothing can be compiled) and imports it there: it must load the
// prebuilt binary, print the version and backends, and run a native call.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const work = mkdtempSync(join(tmpdir(), 'sinkflex-pack-'));
const fail = (msg) => {
  console.error(`check-pack: ${msg}`);
  process.exit(1);
};

try {
  const out = execFileSync(npm, ['pack', '--json', '--pack-destination', work], { cwd: root, encoding: 'utf8' });
  const info = JSON.parse(out.slice(out.indexOf('[')))[0];
  const files = info.files.map((f) => f.path);
  const prebuild = `prebuilds/${process.platform}-${process.arch}/`;
  const need = [
    ['dist/lib/index.js', (f) => f === 'dist/lib/index.js'],
    ['dist/lib/index.d.ts', (f) => f === 'dist/lib/index.d.ts'],
    [`${prebuild}*.node`, (f) => f.startsWith(prebuild) && f.endsWith('.node')],
    ['binding.gyp', (f) => f === 'binding.gyp'],
    ['scripts/build-native.cjs (the install hook)', (f) => f === 'scripts/build-native.cjs'],
    ['CMakeLists.txt', (f) => f === 'CMakeLists.txt'],
    ['native/**/*.cc', (f) => f.startsWith('native/') && f.endsWith('.cc')],
  ];
  for (const [what, test] of need) if (!files.some(test)) fail(`the tarball lacks ${what}`);
  const stray = files.filter((f) => f.startsWith('build/') || f.startsWith('test/') || f.startsWith('node_modules/'));
  if (stray.length) fail(`the tarball holds files users do not need: ${stray.slice(0, 5).join(', ')}`);
  console.log(`check-pack: ${info.filename}: ${files.length} files, ${(info.size / 1024 / 1024).toFixed(2)} MiB packed`);

  const app = join(work, 'app');
  execFileSync('mkdir', ['-p', app]);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }));
  execFileSync(npm, ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline', join(work, info.filename)], {
    cwd: app,
    stdio: 'inherit',
  });
  const installed = join(app, 'node_modules', 'sinkflex-rl');
  const top = readdirSync(installed);
  if (top.includes('build')) fail('the installed package has a build/ folder: something compiled');
  const probe = [
    "import * as s from 'sinkflex-rl';",
    "const b = s.backends();",
    "if (!b.some((x) => x.name === 'cpu')) throw new Error('no cpu backend');",
    "const a = s.loadAddon().allocTracked(1024);",
    "if (a.length !== 1024 || s.memory.peakBytes() < 4096) throw new Error('tracked allocation failed');",
    "console.log(JSON.stringify({ version: s.version(), backends: b.map((x) => x.device), build: s.buildInfo() }));",
  ].join('\n');
  const printed = execFileSync(process.execPath, ['--input-type=module', '-e', probe], {
    cwd: app,
    encoding: 'utf8',
    env: { ...process.env, PREBUILDS_ONLY: '1', CC: 'false', CXX: 'false' },
  });
  console.log(`check-pack: installed without scripts and imported: ${printed.trim()}`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
