// Option checking of the memory and speed benchmarks: nonsense is refused with a message naming
// the option, both from the command line and from the programmatic options.
import t from 'tap';

import {
  BenchOptionError,
  attentionShape,
  memorySchema,
  parseGiB,
  parseIntList,
  parseNames,
  parsePositive,
  parsePositiveInt,
  validateOptions,
} from '../../bench/common/options.js';
import { memoryOptionsFromCli, runMemoryBench } from '../../bench/memory.js';
import { runSpeedBench, speedOptionsFromCli } from '../../bench/speed.js';
import { summarize, svgPathFor, markdownTable, fmtBytes } from '../../bench/common/util.js';
import { benchModelConfig, stepGflop } from '../../bench/common/train-step.js';

t.test('command-line parsers refuse nonsense with the option name', async (t) => {
  t.same(parseIntList('--seqs', '1024,2048'), [1024, 2048]);
  t.same(parseIntList('--seqs', 'none'), []);
  t.throws(() => parseIntList('--seqs', '1024,-5'), {
    name: 'BenchOptionError',
    message: /--seqs: '-5' is not a positive integer/,
  });
  t.throws(() => parseIntList('--seqs', '1024,abc'), /--seqs: 'abc'/);
  t.throws(() => parsePositiveInt('--repeats', '0'), /--repeats: '0' is not a positive integer/);
  t.throws(() => parsePositiveInt('--repeats', '1.5'), /--repeats/);
  t.equal(parseGiB('--limit', '0.5'), 2 ** 29);
  t.throws(() => parseGiB('--limit', '0'), /--limit: '0' is not a positive number of GiB/);
  t.throws(() => parseGiB('--limit', '-1'), /--limit/);
  t.throws(() => parseGiB('--limit', ''), /--limit/);
  t.equal(parsePositive('--max-gflop', '2.5'), 2.5);
  t.throws(() => parsePositive('--max-gflop', 'NaN'), /--max-gflop/);
  t.same(parseNames('--masks', 'full,window', ['window', 'full'] as const), ['full', 'window']);
  t.throws(
    () => parseNames('--masks', 'diagonal', ['window', 'full'] as const),
    /--masks: unknown value 'diagonal' \(expected window, full\)/,
  );
  t.throws(() => attentionShape('llama'), /--shape: unknown shape 'llama' \(known: gpt-oss-20b/);
  t.throws(() => attentionShape('__proto__'), BenchOptionError);
  t.same(attentionShape('gpt-oss-20b'), { qHeads: 64, kvHeads: 8, headDim: 64, window: 128 });
});

t.test('memory options from the CLI', async (t) => {
  const o = memoryOptionsFromCli({
    shape: 'tiny',
    heads: '6/3',
    headDim: '16',
    window: '8',
    masks: 'full',
    seqs: '64',
    stepSeqs: 'none',
    model: 'tiny,gpt-oss',
    layers: '3',
    limit: '2',
    maxGflop: '10',
    repeats: '2',
    seed: '5',
    device: 'cpu',
  });
  t.same(o.shape, { qHeads: 6, kvHeads: 3, headDim: 16, window: 8 });
  t.same(o.masks, ['full']);
  t.same(o.stepSeqLens, []);
  t.same(o.models, ['tiny', 'gpt-oss']);
  t.equal(o.layers, 3);
  t.equal(o.limitBytes, 2 * 2 ** 30);
  t.equal(memoryOptionsFromCli({ heads: '4' }).shape!.kvHeads, 4);
  t.throws(() => memoryOptionsFromCli({ heads: '4/2/1' }), /--heads/);
  t.throws(() => memoryOptionsFromCli({ window: '0' }), /--window/);
  t.throws(() => memoryOptionsFromCli({ device: 'tpu' }), /--device: unknown value 'tpu'/);
  t.throws(() => memoryOptionsFromCli({ model: 'huge' }), /--model: unknown value 'huge'/);
  const s = speedOptionsFromCli({
    shape: 'small',
    seqs: '128',
    stepSeqs: '64',
    model: 'tiny',
    layers: '1',
    repeats: '1',
    peakSeconds: '0.1',
  });
  t.same(s.shape, attentionShape('small'));
  t.equal(s.layers, 1);
  t.throws(() => speedOptionsFromCli({ peakSeconds: '-1' }), /--peak-seconds/);
});

t.test('programmatic options are checked before anything runs', async (t) => {
  await t.rejects(runMemoryBench({ limitBytes: 0, log: null }), { name: 'BenchOptionError', message: /limitBytes/ });
  await t.rejects(runMemoryBench({ attentionSeqLens: [-1], log: null }), /attentionSeqLens\.0/);
  await t.rejects(
    runMemoryBench({ shape: { qHeads: 6, kvHeads: 4, headDim: 8, window: 4 }, log: null }),
    /kvHeads must divide qHeads/,
  );
  await t.rejects(runMemoryBench({ models: ['huge' as 'tiny'], log: null }), /models\.0/);
  await t.rejects(runMemoryBench({ masks: [], log: null }), /masks/);
  await t.rejects(runMemoryBench({ bogus: 1 } as never), /bogus|Unrecognized/);
  await t.rejects(runSpeedBench({ repeats: 0, log: null }), /repeats/);
  await t.rejects(runSpeedBench({ device: 'cuda', log: null }), /only --device cpu/);
  t.throws(() => validateOptions(memorySchema, 'x', 'memory'), /invalid memory options: options:/);
});

t.test('shared helpers', async (t) => {
  t.same(summarize([3, 1, 2]), { median: 2, min: 1, max: 3, n: 3 });
  t.equal(summarize([4, 1, 2, 3]).median, 2.5);
  t.throws(() => summarize([]), RangeError);
  t.equal(svgPathFor('out/r.json'), 'out/r.svg');
  t.equal(svgPathFor('r'), 'r.svg');
  t.equal(markdownTable(['a', 'b'], [['1', 'x|y']]), '| a | b |\n| --- | --- |\n| 1 | x\\|y |');
  t.equal(fmtBytes(null), 'OOM');
  t.equal(fmtBytes(3 * 2 ** 30), '3.00 GiB');
  const g = benchModelConfig('gpt-oss', 4096);
  t.match(g, { layers: 2, width: 2880, heads: 64, kvHeads: 8, headDim: 64, window: 128, context: 4096, bias: true });
  t.equal(benchModelConfig('tiny', 32).context, 128, 'room for the window');
  t.equal(benchModelConfig('gpt-oss', 1024, 4).layers, 4);
  const tiny = benchModelConfig('tiny', 512);
  // Eager counts every score, fused only the visible ones: eager work is larger at the same length.
  t.ok(stepGflop(tiny, 600000, 512, 'eager') > stepGflop(tiny, 600000, 512, 'fused'));
  const layer0Pairs = 512 * 64; // sliding layer, window 64
  const layer1Pairs = (512 * 513) / 2; // full causal layer
  const expected =
    (6 * (600000 - tiny.vocab * tiny.width) * 512 + 14 * tiny.headDim * tiny.heads * (layer0Pairs + layer1Pairs)) / 1e9;
  t.ok(Math.abs(stepGflop(tiny, 600000, 512, 'fused') - expected) < 1e-12);
});
