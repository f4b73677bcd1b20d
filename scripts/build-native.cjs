#!/usr/bin/env node
// Builds the native addon from source on every core. `npm install` runs it bare, as the
// node-gyp-build install hook: a matching prebuilt binary is kept, else the addon is compiled
// (node-gyp rebuild). `npm run build:native` runs it with --from-source: always compile.
// node-gyp reads the job count from JOBS (every node-gyp version; "max" = one per core), so
// `JOBS=2 npm install` uses two.
'use strict';

process.env.JOBS ??= 'max';
if (process.argv.includes('--from-source')) process.env.npm_config_build_from_source = 'true';
// node-gyp-build's bin takes argv[2] and argv[3] as commands to run before and after the build.
process.argv.length = 2;
require('node-gyp-build/bin.js');
