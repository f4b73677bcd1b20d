#!/usr/bin/env node
// Checks what users get from npm: packs the package, verifies the tarball holds dist/, the
// .d.ts files and prebuilds/<platform>-<arch>/*.node, installs it into an empty folder with
// --ignore-scripts (so nothing can be compiled) and imports it there: it must load the
// prebuilt binary, print the version and backends, and run a native call. Every export of
// package.json (the root and each subpath) must import there, a deep import must be refused,
// and TypeScript must resolve each export's types (`types` conditions, NodeNext).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
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

/** The subpaths package.json exports besides `.` and `./package.json` (`./gym` → `gym`). */
const subpaths = Object.keys(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).exports)
  .filter((k) => k !== '.' && k !== './package.json')
  .map((k) => k.slice(2));

try {
  const out = execFileSync(npm, ['pack', '--json', '--pack-destination', work], { cwd: root, encoding: 'utf8' });
  const info = JSON.parse(out.slice(out.indexOf('[')))[0];
  const files = info.files.map((f) => f.path);
  const prebuild = `prebuilds/${process.platform}-${process.arch}/`;
  const need = [
    ['dist/lib/index.js', (f) => f === 'dist/lib/index.js'],
    ['dist/lib/index.d.ts', (f) => f === 'dist/lib/index.d.ts'],
    ...subpaths.flatMap((l) => [`dist/lib/${l}/index.js`, `dist/lib/${l}/index.d.ts`].map((p) => [p, (f) => f === p])),
    [`${prebuild}*.node`, (f) => f.startsWith(prebuild) && f.endsWith('.node')],
    ['binding.gyp', (f) => f === 'binding.gyp'],
    ['scripts/build-native.cjs (the install hook)', (f) => f === 'scripts/build-native.cjs'],
    ['CMakeLists.txt', (f) => f === 'CMakeLists.txt'],
    ['native/**/*.cc', (f) => f.startsWith('native/') && f.endsWith('.cc')],
  ];
  for (const [what, test] of need) if (!files.some(test)) fail(`the tarball lacks ${what}`);
  const stray = files.filter((f) => f.startsWith('build/') || f.startsWith('test/') || f.startsWith('node_modules/'));
  if (stray.length) fail(`the tarball holds files users do not need: ${stray.slice(0, 5).join(', ')}`);
  console.log(
    `check-pack: ${info.filename}: ${files.length} files, ${(info.size / 1024 / 1024).toFixed(2)} MiB packed`,
  );

  const app = join(work, 'app');
  execFileSync('mkdir', ['-p', app]);
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }),
  );
  execFileSync(
    npm,
    ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline', join(work, info.filename)],
    {
      cwd: app,
      stdio: 'inherit',
    },
  );
  const installed = join(app, 'node_modules', 'sinkflex-rl');
  const top = readdirSync(installed);
  if (top.includes('build')) fail('the installed package has a build/ folder: something compiled');
  const probe = [
    "import * as s from 'sinkflex-rl';",
    'const b = s.backends();',
    "if (!b.some((x) => x.name === 'cpu')) throw new Error('no cpu backend');",
    "const store = s.ParamStore.fromSpecs([{ name: 'w', shape: [32, 32] }], 1);",
    "const a = store.read('w');",
    "if (a.length !== 1024 || s.memory.peakBytes() < 4096) throw new Error('tracked allocation failed');",
    'store.dispose();',
    `const subpaths = ${JSON.stringify(subpaths)};`,
    'const names = {};',
    'for (const l of subpaths) names[l] = Object.keys(await import(`sinkflex-rl/${l}`)).length;',
    'for (const l of subpaths) if (names[l] === 0) throw new Error(`sinkflex-rl/${l} exports nothing`);',
    'let deep = null;',
    "try { await import('sinkflex-rl/dist/lib/index.js'); } catch (e) { deep = e.code; }",
    "if (deep !== 'ERR_PACKAGE_PATH_NOT_EXPORTED') throw new Error(`a deep import was not refused (${deep})`);",
    'console.log(JSON.stringify({ version: s.version(), backends: b.map((x) => x.device), build: s.buildInfo(), root: Object.keys(s).length, subpaths: names }));',
  ].join('\n');
  const printed = execFileSync(process.execPath, ['--input-type=module', '-e', probe], {
    cwd: app,
    encoding: 'utf8',
    env: { ...process.env, PREBUILDS_ONLY: '1', CC: 'false', CXX: 'false' },
  });
  console.log(`check-pack: installed without scripts and imported: ${printed.trim()}`);

  // The types: a TypeScript user's import of one name from each export resolves through the
  // `types` conditions (skipLibCheck: the declarations themselves were checked at build time).
  const typeProbe = [
    "import { version, type TauTask } from 'sinkflex-rl';",
    ...subpaths.map((l) => `import * as ${l} from 'sinkflex-rl/${l}';`),
    'export const v: string = version();',
    'export type T = TauTask;',
    `export const all = [${subpaths.join(', ')}];`,
  ].join('\n');
  writeFileSync(join(app, 'probe.ts'), typeProbe + '\n');
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        target: 'ES2022',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: [],
      },
      files: ['probe.ts'],
    }),
  );
  execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', app], {
    cwd: app,
    stdio: 'inherit',
  });
  console.log(
    `check-pack: TypeScript resolves the types of the root and of ${subpaths.map((l) => `sinkflex-rl/${l}`).join(', ')}`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
