// bench/gpu-kernels.ts at tiny sizes: one row per stage, CPU timings always, GPU timings exactly
// when a GPU with the CUDA GRPO / model kernels is usable (the emulator counts).
import t from 'tap';

import { main, runGpuKernelsBench } from '../../bench/gpu-kernels.js';
import { cudaAvailable } from '../../lib/native/index.js';
import { grpoAddon } from '../../lib/grpo/native.js';

t.test('runGpuKernelsBench reports every stage', async (t) => {
  const rows = runGpuKernelsBench({ tokens: 2048, rows: 4, dim: 16, vocab: 32, repeats: 1 });
  t.same(
    rows.map((r) => r.stage.split(' (')[0]),
    ['grpo advantages', 'grpo policy loss + grad', 'model-op step'],
  );
  const gpu = cudaAvailable() && grpoAddon().grpoDevices().includes('cuda');
  for (const r of rows) {
    t.ok(r.cpuMs >= 0, `${r.stage}: cpu time`);
    t.equal(r.gpuMs !== null, gpu, `${r.stage}: gpu time exactly with a usable GPU`);
    if (r.gpuMs !== null) t.equal(r.speedup, r.cpuMs / r.gpuMs);
  }
});

t.test('the command line prints one line per stage', async (t) => {
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void lines.push(a.join(' '));
  try {
    main(['--tokens', '1024', '--rows', '2', '--dim', '8', '--vocab', '16', '--repeats', '1']);
  } finally {
    console.log = log;
  }
  t.equal(lines.filter((l) => l.startsWith('gpu kernels: ') && l.includes(' ms')).length, 3);
});
