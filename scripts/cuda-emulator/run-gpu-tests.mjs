#!/usr/bin/env node
// Runs the tests with CUDA parts on the CUDA emulator build (`npm run build:cuda-emulator`:
// build-emu/Release/sinkflex.node, or the file $SINKFLEX_ADDON names). It first checks that the
// addon reports an emulated cuda:0 — without one the CUDA parts would skip and prove nothing —
// then runs tap (no coverage: a subset of the suite) over TESTS with SINKFLEX_ADDON set, so
// only these processes load the emulator. SFX_EMU_ORDER=reverse runs a block's threads between
// barriers in the other order (a missing barrier shows up as a wrong result). Extra arguments
// go to tap. `npm run test:cuda-emulator`; CI runs it in both orders.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Every test file with parts that run only on a CUDA device (they skip them without one). */
export const TESTS = [
  'test/attention/cuda.test.ts',
  'test/attention/cuda-tensor-cores.test.ts',
  'test/attention/cuda-tensor-cores-f16.test.ts',
  'test/attention/bench-gpu.test.ts',
  'test/grpo/cuda.test.ts',
  'test/grpo/bench-gpu.test.ts',
  'test/model/cuda-ops.test.ts',
  'test/model/cuda-moe.test.ts',
  'test/model/cuda-gemm-tc.test.ts',
  'test/model/cuda-gemm-tc-f16.test.ts',
  'test/model/transformer-cuda.test.ts',
  'test/model/transformer-cuda-architectures.test.ts',
  'test/model/transformer-memory-cuda.test.ts',
  'test/model/lora-cuda.test.ts',
  'test/model/hf/pretrained-api.test.ts',
  'test/model/bench-transformer-gpu.test.ts',
  'test/native/device-tensor.test.ts',
  'test/native/core.test.ts',
];

const root = fileURLToPath(new URL('../..', import.meta.url));
const require = createRequire(import.meta.url);
const addon = resolve(root, process.env.SINKFLEX_ADDON || join('build-emu', 'Release', 'sinkflex.node'));
if (!existsSync(addon)) {
  console.error(`cuda emulator tests: ${addon} not found (npm run build:cuda-emulator)`);
  process.exit(1);
}
const backends = require(addon).backends();
const cuda = backends.filter((b) => b.name === 'cuda');
if (cuda.length === 0) {
  console.error(
    `cuda emulator tests: ${addon} has no CUDA device (backends: ${backends.map((b) => b.device ?? b.name).join(', ')}); is it the emulator build?`,
  );
  process.exit(1);
}
const order = process.env.SFX_EMU_ORDER === 'reverse' ? 'reverse' : 'index';
console.log(
  `cuda emulator tests: ${addon} (${cuda.map((b) => `${b.device} ${b.deviceName}`).join(', ')}), ${order} thread order, ${TESTS.length} files`,
);
const tapDir = dirname(require.resolve('tap/package.json'));
const tapBin = join(tapDir, JSON.parse(readFileSync(join(tapDir, 'package.json'), 'utf8')).bin.tap);
const r = spawnSync(process.execPath, [tapBin, '--disable-coverage', ...process.argv.slice(2), ...TESTS], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, SINKFLEX_ADDON: addon },
});
process.exit(r.status ?? 1);
