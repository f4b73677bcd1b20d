// Every way a checkpoint can be wrong fails with an error naming the tensor, file or field, and
// leaves nothing behind: no open file descriptors, no native memory.
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { HfCheckpointReader, loadHfCheckpoint } from '../../../lib/model/index.js';
import { settledBytes } from '../../native/fixtures/settled-bytes.js';
import type { SafeTensor } from '../../../lib/model/safetensors.js';
import { hfShapes, randomTensors, tempDir, tinyConfig, writeHfFolder } from './fixtures/loader/checkpoint.js';

const dirs: string[] = [];
t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const fresh = (): string => {
  const d = tempDir();
  dirs.push(d);
  return d;
};

const openFds = (): number => (existsSync('/proc/self/fd') ? readdirSync('/proc/self/fd').length : 0);

/** Loads `dir` expecting a failure matching `expected`; checks that nothing stays allocated or open. */
async function fails(
  t: Test,
  dir: string,
  expected: { name: string; [k: string]: unknown },
  what: string,
): Promise<void> {
  const fds = openFds();
  const bytes = await settledBytes();
  await t.rejects(loadHfCheckpoint(dir, { dtype: 'bfloat16' }), expected, what);
  await t.rejects(HfCheckpointReader.open(dir), expected, `${what} (reader)`);
  t.equal(openFds(), fds, `${what}: no file left open`);
  t.equal(await settledBytes(), bytes, `${what}: no native memory kept`);
}

const arch = 'GptOssForCausalLM';
const base = (): Map<string, SafeTensor> => randomTensors(hfShapes(arch), 'BF16', 1).tensors;
const folder = (
  tensors: Map<string, SafeTensor>,
  options: Parameters<typeof writeHfFolder>[3] = {},
  config = tinyConfig(arch),
): string => writeHfFolder(fresh(), config, tensors, options);
const tensorError = (tensor: string, message?: RegExp) => ({
  name: 'HfTensorError',
  tensor,
  ...(message ? { message } : {}),
});

t.test('missing, extra, misshapen tensors and bad dtypes', async (t) => {
  const missing = base();
  missing.delete('model.layers.1.mlp.experts.down_proj');
  await fails(
    t,
    folder(missing),
    tensorError(
      'model.layers.1.mlp.experts.down_proj',
      /is missing from the checkpoint \(needed for layers\.1\.mlp\.experts\.down\.weight/,
    ),
    'missing tensor',
  );

  const extra = base();
  extra.set('model.layers.0.mlp.shared_expert.weight', { dtype: 'BF16', shape: [2], data: new Uint16Array(2) });
  await fails(t, folder(extra), tensorError('model.layers.0.mlp.shared_expert.weight', /unexpected/), 'extra tensor');

  const extraLayer = base();
  extraLayer.set('model.layers.2.input_layernorm.weight', { dtype: 'BF16', shape: [64], data: new Uint16Array(64) });
  await fails(
    t,
    folder(extraLayer),
    tensorError('model.layers.2.input_layernorm.weight'),
    'a layer beyond num_hidden_layers',
  );

  const shape = base();
  shape.set('model.layers.0.self_attn.sinks', { dtype: 'BF16', shape: [5], data: new Uint16Array(5) });
  await fails(
    t,
    folder(shape),
    tensorError('model.layers.0.self_attn.sinks', /has shape \[5\], the config implies \[4\]/),
    'wrong shape',
  );

  const transposed = base();
  const gu = transposed.get('model.layers.0.mlp.experts.gate_up_proj')!;
  transposed.set('model.layers.0.mlp.experts.gate_up_proj', { ...gu, shape: [4, 4096] });
  await fails(
    t,
    folder(transposed),
    tensorError('model.layers.0.mlp.experts.gate_up_proj', /has shape \[4, 4096\], the config implies \[4, 64, 64\]/),
    'experts shape',
  );

  const i32 = base();
  i32.set('model.norm.weight', { dtype: 'I32', shape: [64], data: new Int32Array(64) });
  await fails(
    t,
    folder(i32),
    tensorError('model.norm.weight', /dtype I32 is not supported here \(expected F32, BF16, F16\)/),
    'integer weights',
  );

  const f64 = base();
  f64.set('model.embed_tokens.weight', { dtype: 'F64', shape: [50, 64], data: new Float64Array(50 * 64) });
  await fails(t, folder(f64), tensorError('model.embed_tokens.weight', /dtype F64/), 'F64 weights');

  const u8 = base();
  u8.set('model.norm.weight', { dtype: 'U8', shape: [64], data: new Uint8Array(64) });
  await fails(t, folder(u8), tensorError('model.norm.weight', /dtype U8/), 'bytes where floats belong');

  const tied = randomTensors(hfShapes('Qwen3ForCausalLM', { tied: false }), 'BF16', 2).tensors;
  await fails(
    t,
    writeHfFolder(fresh(), tinyConfig('Qwen3ForCausalLM'), tied),
    tensorError('lm_head.weight', /tie_word_embeddings = true and differs/),
    'a tied checkpoint with its own lm_head',
  );

  const untied = randomTensors(hfShapes('Qwen2ForCausalLM', { tied: true }), 'BF16', 2).tensors;
  await fails(
    t,
    writeHfFolder(fresh(), tinyConfig('Qwen2ForCausalLM'), untied),
    tensorError('lm_head.weight', /missing/),
    'an untied checkpoint without lm_head',
  );
});

t.test('MXFP4 blocks need their scales and a packed axis divisible by 32', async (t) => {
  const { D, F, E } = { D: 64, F: 32, E: 4 };
  const mx = base();
  mx.delete('model.layers.0.mlp.experts.gate_up_proj');
  mx.set('model.layers.0.mlp.experts.gate_up_proj_blocks', {
    dtype: 'U8',
    shape: [E, 2 * F, D / 32, 16],
    data: new Uint8Array((E * 2 * F * D) / 2),
  });
  await fails(
    t,
    folder(mx),
    tensorError('model.layers.0.mlp.experts.gate_up_proj_scales', /missing/),
    'blocks without scales',
  );

  const f16Blocks = base();
  f16Blocks.delete('model.layers.0.mlp.experts.down_proj');
  f16Blocks.set('model.layers.0.mlp.experts.down_proj_blocks', {
    dtype: 'BF16',
    shape: [E, D, F / 32, 16],
    data: new Uint16Array((E * D * F) / 2),
  });
  f16Blocks.set('model.layers.0.mlp.experts.down_proj_scales', {
    dtype: 'U8',
    shape: [E, D, F / 32],
    data: new Uint8Array((E * D * F) / 32),
  });
  await fails(
    t,
    folder(f16Blocks),
    tensorError('model.layers.0.mlp.experts.down_proj_blocks', /dtype BF16 is not supported here \(expected U8\)/),
    'blocks of the wrong dtype',
  );

  const odd = randomTensors(hfShapes(arch), 'BF16', 3).tensors;
  odd.delete('model.layers.0.mlp.experts.down_proj');
  odd.set('model.layers.0.mlp.experts.down_proj_blocks', { dtype: 'U8', shape: [1], data: new Uint8Array(1) });
  const cfg = tinyConfig(arch, { intermediate_size: 48 });
  await fails(t, folder(odd, {}, cfg), { name: 'HfTensorError' }, 'intermediate_size not a multiple of 32');
});

t.test('shards: missing shard, tensor not in its shard, unlisted tensor, bad index', async (t) => {
  const tensors = base();
  const names = [...tensors.keys()];
  const split = [names.slice(0, 10), names.slice(10)];

  const noShard = folder(tensors, { shards: split });
  rmSync(join(noShard, 'model-00002-of-00002.safetensors'));
  await fails(
    t,
    noShard,
    tensorError('model-00002-of-00002.safetensors', /the weight file is missing/),
    'missing shard',
  );

  const wrongMap: Record<string, string> = {};
  split.forEach((ns, i) => ns.forEach((n) => (wrongMap[n] = `model-0000${i + 1}-of-00002.safetensors`)));
  wrongMap[names[0]] = 'model-00002-of-00002.safetensors';
  await fails(
    t,
    folder(tensors, { shards: split, index: { weight_map: wrongMap } }),
    tensorError(names[0], /maps it to model-00002-of-00002\.safetensors, which does not hold it/),
    'tensor missing from its shard',
  );

  const unlisted: Record<string, string> = {};
  split.forEach((ns, i) => ns.forEach((n) => (unlisted[n] = `model-0000${i + 1}-of-00002.safetensors`)));
  delete unlisted[names[3]];
  await fails(
    t,
    folder(tensors, { shards: split, index: { weight_map: unlisted } }),
    tensorError(names[3], /does not list it/),
    'tensor in a shard but not in the index',
  );

  await fails(
    t,
    folder(tensors, { shards: split, index: { weight_map: { ...unlisted, [names[3]]: '../elsewhere.safetensors' } } }),
    tensorError(names[3], /not a file name in the folder/),
    'index escaping the folder',
  );
  await fails(
    t,
    folder(tensors, { shards: split, index: { metadata: {} } }),
    tensorError('model.safetensors.index.json', /no weight_map/),
    'index without weight_map',
  );
  const badJson = folder(tensors, { shards: split });
  writeFileSync(join(badJson, 'model.safetensors.index.json'), '{"weight_map": ');
  await fails(t, badJson, tensorError('model.safetensors.index.json', /not valid JSON/), 'index not JSON');
});

t.test('folders without weights or config, corrupt files, bad configs', async (t) => {
  const noWeights = folder(base());
  rmSync(join(noWeights, 'model.safetensors'));
  await fails(
    t,
    noWeights,
    tensorError('model.safetensors', /has neither model\.safetensors nor model\.safetensors\.index\.json/),
    'no weights',
  );

  const truncated = folder(base());
  writeFileSync(join(truncated, 'model.safetensors'), Buffer.from([1, 0, 0, 0]));
  await fails(t, truncated, tensorError('model.safetensors', /truncated/), 'truncated file');

  const noConfig = folder(base());
  rmSync(join(noConfig, 'config.json'));
  await fails(t, noConfig, { name: 'HfConfigError', path: 'config.json', message: /not found/ }, 'no config.json');

  const badConfig = folder(base());
  writeFileSync(join(badConfig, 'config.json'), '{');
  await fails(t, badConfig, { name: 'HfConfigError', message: /not valid JSON/ }, 'config.json not JSON');

  await fails(
    t,
    folder(base(), {}, { ...tinyConfig(arch), architectures: ['PhiForCausalLM'] }),
    { name: 'HfConfigError', field: 'architectures[0]', message: /'PhiForCausalLM' is not supported/ },
    'unknown architecture',
  );

  const badGen = folder(base(), { files: { 'generation_config.json': '[1]' } });
  await fails(
    t,
    badGen,
    { name: 'HfConfigError', path: 'generation_config.json' },
    'generation_config.json not an object',
  );

  await t.rejects(loadHfCheckpoint(folder(base()), { dtype: 'float16' as 'auto' }), RangeError, 'unknown dtype option');
});
