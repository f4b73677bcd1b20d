// bench/transformer-gpu.ts at tiny sizes: a training step and a sampling run timed on the CPU
// always, on the GPU exactly when a GPU with the CUDA model kernels is usable (the emulator
// counts), the GPU's loss next to the CPU's, and the one-line command-line report.
import t from 'tap';

import { formatTransformerGpu, main, runTransformerGpuBench } from '../../bench/transformer-gpu.js';
import { modelConfig } from '../../lib/model/index.js';
import { modelAddon } from '../../lib/model/native.js';
import { cudaAvailable } from '../../lib/native/index.js';

const tiny = modelConfig('tiny', {
  layers: 2,
  width: 16,
  heads: 2,
  kvHeads: 1,
  headDim: 8,
  ffn: 16,
  vocab: 40,
  context: 64,
  window: 8,
});

t.test('runTransformerGpuBench times a train step and a sampling run on both devices', async (t) => {
  const r = await runTransformerGpuBench({
    model: tiny,
    tokens: 50,
    docLength: 20,
    sessions: 2,
    promptTokens: 5,
    sampleTokens: 3,
    repeats: 1,
  });
  const gpu = cudaAvailable() && modelAddon().modelOpsDevices().includes('cuda');
  t.equal(r.rows.length, 2);
  t.match(r.rows[0].stage, /^train step \(50 tokens in 2 micro-batches/);
  t.match(r.rows[1].stage, /^sampling \(2 sessions: 5-token prompt \+ 3 tokens\)/);
  t.ok(r.parameters > 0);
  for (const x of r.rows) {
    t.ok(x.cpuMs > 0 && x.cpuTokensPerSecond > 0, `${x.stage}: cpu time`);
    t.equal(x.gpuMs !== null, gpu, 'gpu time exactly with a usable GPU');
    if (x.gpuMs !== null) t.equal(x.speedup, x.cpuMs / x.gpuMs);
  }
  t.equal(r.gpuUnavailable === '', gpu);
  if (gpu) t.ok(r.lossRelativeDifference !== null && r.lossRelativeDifference < 1e-4, 'the GPU loss is the CPU loss');
  const line = formatTransformerGpu(r);
  t.match(
    line,
    /^transformer gpu: custom \(2 layers, width 16, vocab 40\), 0\.0M parameters; train step .*; sampling .*/,
  );
  t.match(line, gpu ? /loss gpu vs cpu/ : /CPU only$/);
});

t.test('the command line prints one line and checks --model', async (t) => {
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void lines.push(a.join(' '));
  try {
    await t.rejects(main(['--model', 'huge']), { name: 'RangeError', message: /--model must be 'tiny' or 'small'/ });
    await main([
      '--model',
      'tiny',
      '--tokens',
      '24',
      '--doc',
      '12',
      '--sessions',
      '1',
      '--prompt',
      '3',
      '--sample',
      '2',
      '--repeats',
      '1',
    ]);
  } finally {
    console.log = log;
  }
  t.equal(lines.length, 1);
  t.match(lines[0], /^transformer gpu: tiny /);
});
