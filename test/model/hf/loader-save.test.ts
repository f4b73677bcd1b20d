// Saving an HF folder: load → save → load gives equal tensors; the saved files hold the original
// HF tensors bit for bit (names, layouts, dtypes); MXFP4 experts come back as bf16 without
// quantization_config; shards + index past the threshold; tokenizer files copied; atomic.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

import t, { type Test } from 'tap';

import { bf16ToF32, f32ToBf16 } from '../../../lib/model/hf/numeric.js';
import { TOKENIZER_FILES } from '../../../lib/model/hf/save.js';
import { type HfCheckpoint, type HfTensor, loadHfCheckpoint, saveHf } from '../../../lib/model/index.js';
import { readSafetensorsFile } from '../../../lib/model/safetensors.js';
import { hfShapes, randomTensors, tempDir, tinyConfig, writeHfFolder } from './fixtures/loader/checkpoint.js';

const ARCHS = ['GptOssForCausalLM', 'Qwen3ForCausalLM', 'Qwen2ForCausalLM', 'LlamaForCausalLM'] as const;
const dirs: string[] = [];
t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const fresh = (): string => {
  const d = tempDir();
  dirs.push(d);
  return d;
};

const sameTensors = (t: Test, a: Map<string, HfTensor>, b: Map<string, HfTensor>, what: string): void => {
  t.same([...a.keys()], [...b.keys()], `${what}: names`);
  let bad = 0;
  for (const [name, x] of a) {
    const y = b.get(name)!;
    if (
      x.dtype !== y.dtype ||
      x.shape.join() !== y.shape.join() ||
      Buffer.compare(
        Buffer.from(x.data.buffer, x.data.byteOffset, x.data.byteLength),
        Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength),
      ) !== 0
    ) {
      t.fail(`${what}: ${name} differs`);
      bad++;
    }
  }
  t.equal(bad, 0, `${what}: every tensor equal`);
};

const save = (ck: HfCheckpoint, dir: string, extra: Partial<Parameters<typeof saveHf>[1]> = {}) =>
  saveHf(dir, {
    hfConfig: ck.hfConfig,
    generationConfig: ck.generationConfig,
    tensors: ck.tensors,
    fileDtypes: ck.fileDtypes,
    copyFrom: ck.dir,
    ...extra,
  });

t.test('load → save → load, every architecture and file dtype; the files come back bit for bit', async (t) => {
  for (const arch of ARCHS) {
    for (const fileDtype of ['F32', 'BF16', 'F16'] as const) {
      const { tensors } = randomTensors(hfShapes(arch), fileDtype, 17);
      const src = writeHfFolder(fresh(), tinyConfig(arch), tensors, {
        generationConfig: { eos_token_id: 7 },
        files: { 'tokenizer.json': '{"model":{}}', 'chat_template.jinja': '{{ x }}' },
      });
      for (const mode of ['auto', 'float32'] as const) {
        const ck = await loadHfCheckpoint(src, { dtype: mode });
        const out = join(fresh(), 'saved');
        const result = await save(ck, out);
        t.same(result.files.sort(), [
          'chat_template.jinja',
          'config.json',
          'generation_config.json',
          'model.safetensors',
          'tokenizer.json',
        ]);
        const again = await loadHfCheckpoint(out, { dtype: mode });
        sameTensors(t, ck.tensors, again.tensors, `${arch} ${fileDtype} ${mode}`);
        t.same(again.hfConfig, ck.hfConfig);
        t.same(again.generationConfig, { eos_token_id: 7 });
        t.equal(readFileSync(join(out, 'chat_template.jinja'), 'utf8'), '{{ x }}');
        const file = readSafetensorsFile(join(out, 'model.safetensors'));
        t.same([...file.tensors.keys()].sort(), [...tensors.keys()].sort(), 'the HF names');
        let bad = 0;
        for (const [name, orig] of tensors) {
          const saved = file.tensors.get(name)!;
          if (
            saved.dtype !== orig.dtype ||
            saved.shape.join() !== orig.shape.join() ||
            Buffer.compare(
              Buffer.from(saved.data.buffer, saved.data.byteOffset, saved.data.byteLength),
              Buffer.from(orig.data.buffer, orig.data.byteOffset, orig.data.byteLength),
            ) !== 0
          ) {
            t.fail(`${name} is not written back as it was`);
            bad++;
          }
        }
        t.equal(bad, 0, `${arch} ${fileDtype} ${mode}: every HF tensor written back bit for bit`);
        t.same(file.metadata, { format: 'pt' });
      }
    }
  }
});

t.test('MXFP4 experts are saved as bf16 gate_up_proj / down_proj; quantization_config is dropped', async (t) => {
  const { D, F, E } = { D: 64, F: 32, E: 4 };
  const { tensors } = randomTensors(
    hfShapes('GptOssForCausalLM').filter(([n]) => !/experts\.(gate_up_proj|down_proj)$/.test(n)),
    'BF16',
    23,
  );
  for (const i of [0, 1]) {
    const x = `model.layers.${i}.mlp.experts.`;
    const bytes = (n: number, lo: number, span: number) =>
      Uint8Array.from({ length: n }, (_, k) => lo + ((k * 37 + i * 11) % span));
    tensors.set(`${x}gate_up_proj_blocks`, {
      dtype: 'U8',
      shape: [E, 2 * F, D / 32, 16],
      data: bytes((E * 2 * F * D) / 2, 0, 256),
    });
    tensors.set(`${x}gate_up_proj_scales`, {
      dtype: 'U8',
      shape: [E, 2 * F, D / 32],
      data: bytes((E * 2 * F * D) / 32, 120, 8),
    });
    tensors.set(`${x}down_proj_blocks`, {
      dtype: 'U8',
      shape: [E, D, F / 32, 16],
      data: bytes((E * D * F) / 2, 0, 256),
    });
    tensors.set(`${x}down_proj_scales`, { dtype: 'U8', shape: [E, D, F / 32], data: bytes((E * D * F) / 32, 122, 6) });
  }
  const config = tinyConfig('GptOssForCausalLM', { quantization_config: { quant_method: 'mxfp4' } });
  const src = writeHfFolder(fresh(), config, tensors);
  const ck = await loadHfCheckpoint(src);
  const out = join(fresh(), 'bf16');
  await save(ck, out);
  const savedConfig = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
  t.notOk('quantization_config' in savedConfig);
  t.equal(ck.hfConfig.quantization_config !== undefined, true, 'the loaded config object is not changed');
  const file = readSafetensorsFile(join(out, 'model.safetensors'));
  t.same(file.tensors.get('model.layers.1.mlp.experts.gate_up_proj')?.shape, [E, D, 2 * F]);
  t.same(file.tensors.get('model.layers.1.mlp.experts.down_proj')?.shape, [E, F, D]);
  t.equal(file.tensors.get('model.layers.1.mlp.experts.down_proj')?.dtype, 'BF16');
  t.notOk(file.tensors.has('model.layers.1.mlp.experts.down_proj_blocks'));
  // HF layout: gate_up_proj[e][d][2j] is gate row j of ours, [2j+1] up row j
  const gu = file.tensors.get('model.layers.1.mlp.experts.gate_up_proj')!.data as Uint16Array;
  const ours = ck.tensors.get('layers.1.mlp.experts.gate_up.weight')!.data as Uint16Array;
  const e = 3;
  const d = 17;
  const j = 9;
  t.equal(gu[(e * D + d) * 2 * F + 2 * j], ours[(e * 2 * F + j) * D + d]);
  t.equal(gu[(e * D + d) * 2 * F + 2 * j + 1], ours[(e * 2 * F + F + j) * D + d]);
  const again = await loadHfCheckpoint(out);
  sameTensors(t, ck.tensors, again.tensors, 'MXFP4 → bf16 → load');
});

t.test('shards and index past maxShardBytes', async (t) => {
  const { tensors } = randomTensors(hfShapes('LlamaForCausalLM'), 'BF16', 31);
  const ck = await loadHfCheckpoint(writeHfFolder(fresh(), tinyConfig('LlamaForCausalLM'), tensors));
  const out = join(fresh(), 'sharded');
  const result = await save(ck, out, { maxShardBytes: 20000 });
  const shards = result.files.filter((f) => f.endsWith('.safetensors')).sort();
  t.ok(shards.length > 2, `${shards.length} shards`);
  t.match(shards[0], /^model-00001-of-000\d\d\.safetensors$/);
  const index = JSON.parse(readFileSync(join(out, 'model.safetensors.index.json'), 'utf8'));
  t.same(Object.keys(index.weight_map).sort(), [...tensors.keys()].sort());
  t.equal(index.metadata.total_size, result.tensorBytes);
  t.equal(
    result.tensorBytes,
    [...tensors.values()].reduce((n, x) => n + x.data.byteLength, 0),
  );
  for (const f of shards) {
    const size = Object.entries(index.weight_map)
      .filter(([, v]) => v === f)
      .reduce((n, [k]) => n + tensors.get(k)!.data.byteLength, 0);
    t.ok(size <= 20000 || Object.values(index.weight_map).filter((v) => v === f).length === 1, `${f}: ${size} bytes`);
  }
  sameTensors(t, ck.tensors, (await loadHfCheckpoint(out)).tensors, 'sharded round trip');
});

t.test('dtype override, tensors read through a function, config changes', async (t) => {
  const { tensors } = randomTensors(hfShapes('Qwen3ForCausalLM'), 'F32', 41);
  const ck = await loadHfCheckpoint(
    writeHfFolder(fresh(), { ...tinyConfig('Qwen3ForCausalLM'), torch_dtype: 'float32' }, tensors),
  );
  const out = join(fresh(), 'bf16');
  const reads: string[] = [];
  await saveHf(out, {
    hfConfig: { ...ck.hfConfig, bos_token_id: 3 },
    tensors: (name) => {
      reads.push(name);
      return ck.tensors.get(name)!;
    },
    dtype: 'bfloat16',
  });
  const cfg = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
  t.equal(cfg.torch_dtype, 'bfloat16');
  t.equal(cfg.bos_token_id, 3);
  t.notOk(existsSync(join(out, 'generation_config.json')));
  t.equal(new Set(reads).size, ck.tensors.size, 'every parameter read');
  t.equal(reads.length, ck.tensors.size, 'each read once (gate and up come from one read)');
  const file = readSafetensorsFile(join(out, 'model.safetensors'));
  const norm = file.tensors.get('model.norm.weight')!;
  t.equal(norm.dtype, 'BF16');
  t.same(
    Array.from(norm.data as Uint16Array),
    Array.from(f32ToBf16(ck.tensors.get('norm.weight')!.data as Float32Array)),
    'rounded to nearest even',
  );
  const back = await loadHfCheckpoint(out, { dtype: 'float32' });
  t.same(Array.from(back.tensors.get('norm.weight')!.data), Array.from(bf16ToF32(norm.data as Uint16Array)));

  const f16 = join(fresh(), 'f16');
  await save(ck, f16, { dtype: 'float16', generationConfig: null });
  t.equal(
    readSafetensorsFile(join(f16, 'model.safetensors')).tensors.get('lm_head.weight'),
    undefined,
    'tied: no lm_head written',
  );
  t.equal(readSafetensorsFile(join(f16, 'model.safetensors')).tensors.get('model.embed_tokens.weight')?.dtype, 'F16');
});

t.test('atomic: replaces a model folder, refuses others, a failure changes nothing', async (t) => {
  const { tensors } = randomTensors(hfShapes('Qwen2ForCausalLM'), 'BF16', 51);
  const src = writeHfFolder(fresh(), tinyConfig('Qwen2ForCausalLM'), tensors);
  const ck = await loadHfCheckpoint(src);
  const parent = fresh();
  const out = join(parent, 'model');
  await save(ck, out);
  writeFileSync(join(out, 'stale.txt'), 'old');
  await save(ck, out);
  t.notOk(existsSync(join(out, 'stale.txt')), 'the folder is replaced whole');
  t.same(readdirSync(parent), ['model'], 'no temporary folders left');

  await save(ck, src); // over the folder it was loaded from: tokenizer files are copied before the swap
  sameTensors(t, ck.tensors, (await loadHfCheckpoint(src)).tensors, 'saved over its source');

  const other = join(parent, 'notes');
  mkdirSync(other);
  writeFileSync(join(other, 'a.txt'), 'keep');
  await t.rejects(save(ck, other), /non-empty folder without a config\.json/);
  t.equal(readFileSync(join(other, 'a.txt'), 'utf8'), 'keep');

  const broken = new Map(ck.tensors);
  broken.delete('layers.1.mlp.down.weight');
  const before = readFileSync(join(out, 'model.safetensors'));
  await t.rejects(save(ck, out, { tensors: broken }), { name: 'HfTensorError', tensor: 'layers.1.mlp.down.weight' });
  t.ok(readFileSync(join(out, 'model.safetensors')).equals(before), 'a failed save leaves the old folder');
  t.same(readdirSync(parent).sort(), ['model', 'notes'], 'and no temporary folder');

  const wrongShape = new Map(ck.tensors);
  wrongShape.set('norm.weight', { dtype: 'float32', shape: [3], data: new Float32Array(3) });
  await t.rejects(save(ck, out, { tensors: wrongShape }), {
    name: 'HfTensorError',
    tensor: 'norm.weight',
    message: /the config needs \[64\]/,
  });
  const wrongType = new Map(ck.tensors);
  wrongType.set('norm.weight', { dtype: 'bfloat16', shape: [64], data: new Float32Array(64) });
  await t.rejects(save(ck, out, { tensors: wrongType }), { name: 'HfTensorError', tensor: 'norm.weight' });
  const extra = new Map(ck.tensors);
  extra.set('layers.0.attn.sinks', { dtype: 'float32', shape: [4], data: new Float32Array(4) });
  await t.rejects(save(ck, out, { tensors: extra }), {
    name: 'HfTensorError',
    tensor: 'layers.0.attn.sinks',
    message: /unexpected/,
  });
  await t.rejects(save(ck, out, { dtype: 'int8' as 'auto' }), RangeError);
  await t.rejects(save(ck, out, { maxShardBytes: 0 }), RangeError);
  await t.rejects(save(ck, join(out, 'model.safetensors')), /not a folder/);
  t.same(readdirSync(parent).sort(), ['model', 'notes']);
  t.ok(TOKENIZER_FILES.includes('tokenizer_config.json'));
  t.equal(basename(dirname(out)), basename(parent));
});
