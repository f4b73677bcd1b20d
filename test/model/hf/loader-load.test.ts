// Loading tiny HF checkpoints of each architecture: names and layouts against explicit index
// formulas, each file dtype under each dtype option, MXFP4 experts, shards.
import { rmSync } from 'node:fs';

import t, { type Test } from 'tap';

import { f32ToBf16 } from '../../../lib/model/hf/numeric.js';
import { HfCheckpointReader, type HfTensor, loadHfCheckpoint } from '../../../lib/model/index.js';
import type { SafeTensor } from '../../../lib/model/safetensors.js';
import { rng } from '../fixtures/reference.js';
import {
  DIMS,
  type FileDtype,
  hfShapes,
  randomTensors,
  tempDir,
  tinyConfig,
  writeHfFolder,
} from './fixtures/loader/checkpoint.js';
import { expectedParams, isMatrix } from './fixtures/loader/expected.js';

const ARCHS = ['GptOssForCausalLM', 'Qwen3ForCausalLM', 'Qwen2ForCausalLM', 'LlamaForCausalLM'] as const;
const dirs: string[] = [];
t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const fresh = (): string => {
  const d = tempDir();
  dirs.push(d);
  return d;
};

/** First index where the loaded float32 values differ from the expected ones (-1: none). */
function firstDiff(got: Float32Array, want: Float64Array): number {
  if (got.length !== want.length) return 0;
  for (let i = 0; i < got.length; i++) if (!Object.is(got[i], want[i])) return i;
  return -1;
}

function checkAll(
  t: Test,
  loaded: Map<string, HfTensor>,
  want: Map<string, Float64Array>,
  mode: 'float32' | 'bfloat16' | 'auto',
  fileDtype: FileDtype,
  what: string,
): void {
  t.same([...loaded.keys()].sort(), [...want.keys()].sort(), `${what}: parameter names`);
  let bad = 0;
  for (const [name, w] of want) {
    const got = loaded.get(name)!;
    const matrix = isMatrix(name);
    const expectBf16 = matrix && (mode === 'bfloat16' || (mode === 'auto' && fileDtype === 'BF16'));
    if (got.dtype !== (expectBf16 ? 'bfloat16' : 'float32')) {
      t.fail(`${what}: ${name} is ${got.dtype}`);
      bad++;
      continue;
    }
    if (expectBf16) {
      const bits = f32ToBf16(Float32Array.from(w));
      const i = (got.data as Uint16Array).findIndex((b, k) => b !== bits[k]);
      if (i >= 0 || got.data.length !== bits.length) {
        t.fail(`${what}: ${name} bf16 bits differ at ${i}`);
        bad++;
      }
    } else {
      const i = firstDiff(got.data as Float32Array, w);
      if (i >= 0) {
        t.fail(`${what}: ${name} differs at ${i}: ${got.data[i]} vs ${w[i]}`);
        bad++;
      }
    }
  }
  t.equal(bad, 0, `${what}: every parameter has the expected values and dtype`);
}

t.test('each architecture, file dtype and dtype option', async (t) => {
  for (const arch of ARCHS) {
    for (const fileDtype of ['F32', 'BF16', 'F16'] as const) {
      const { tensors, values } = randomTensors(hfShapes(arch), fileDtype, 7);
      const dir = writeHfFolder(fresh(), tinyConfig(arch), tensors, { generationConfig: { eos_token_id: [1, 2] } });
      const want = expectedParams(arch, values);
      for (const mode of ['float32', 'bfloat16', 'auto'] as const) {
        const ck = await loadHfCheckpoint(dir, { dtype: mode });
        checkAll(t, ck.tensors, want, mode, fileDtype, `${arch} ${fileDtype} → ${mode}`);
        t.equal(ck.architecture, arch);
        t.same(ck.generationConfig, { eos_token_id: [1, 2] });
        t.ok(
          [...ck.fileDtypes.values()].every((d) => d === fileDtype),
          'fileDtypes record the file dtype',
        );
        for (const [name, tensor] of ck.tensors)
          if (tensor.data.length !== tensor.shape.reduce((a, b) => a * b, 1))
            t.fail(`${name}: shape and data disagree`);
      }
    }
  }
});

t.test('shapes in our layout', async (t) => {
  const { tensors } = randomTensors(hfShapes('GptOssForCausalLM'), 'BF16', 3);
  const ck = await loadHfCheckpoint(writeHfFolder(fresh(), tinyConfig('GptOssForCausalLM'), tensors));
  const { D, F, E, H, hd, KV } = DIMS;
  t.same(ck.tensors.get('layers.1.mlp.experts.gate_up.weight')?.shape, [E, 2 * F, D]);
  t.same(ck.tensors.get('layers.1.mlp.experts.gate_up.bias')?.shape, [E, 2 * F]);
  t.same(ck.tensors.get('layers.1.mlp.experts.down.weight')?.shape, [E, D, F]);
  t.same(ck.tensors.get('layers.0.attn.q.weight')?.shape, [H * hd, D]);
  t.same(ck.tensors.get('layers.0.attn.k.bias')?.shape, [KV * hd]);
  t.same(ck.tensors.get('layers.0.attn.sinks')?.shape, [H]);
  t.equal(ck.modelConfig.window, 8);
  t.same(ck.modelConfig.layerTypes, ['sliding', 'full']);
  const q = await loadHfCheckpoint(
    writeHfFolder(
      fresh(),
      tinyConfig('Qwen3ForCausalLM'),
      randomTensors(hfShapes('Qwen3ForCausalLM'), 'F32', 4).tensors,
    ),
  );
  t.same(q.tensors.get('layers.0.mlp.gate_up.weight')?.shape, [2 * F, D]);
  t.notOk(q.tensors.has('lm_head.weight'), 'tied: no lm_head');
});

/** Random MXFP4 experts for the tiny gpt-oss (other tensors BF16). */
function mxfp4Checkpoint(seed: number): {
  tensors: Map<string, SafeTensor>;
  values: Map<string, Float64Array>;
  raw: Map<string, Uint8Array>;
} {
  const { D, F, E, layers } = DIMS;
  const shapes = hfShapes('GptOssForCausalLM').filter(([n]) => !/experts\.(gate_up_proj|down_proj)$/.test(n));
  const { tensors, values } = randomTensors(shapes, 'BF16', seed);
  const raw = new Map<string, Uint8Array>();
  const r = rng(seed);
  const u8 = (name: string, shape: number[], lo: number, hi: number): void => {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Uint8Array(n);
    for (let i = 0; i < n; i++) data[i] = lo + Math.floor(r() * (hi - lo));
    tensors.set(name, { dtype: 'U8', shape, data });
    raw.set(name, data);
  };
  for (let i = 0; i < layers; i++) {
    const x = `model.layers.${i}.mlp.experts.`;
    u8(`${x}gate_up_proj_blocks`, [E, 2 * F, D / 32, 16], 0, 256);
    u8(`${x}gate_up_proj_scales`, [E, 2 * F, D / 32], 118, 131);
    u8(`${x}down_proj_blocks`, [E, D, F / 32, 16], 0, 256);
    u8(`${x}down_proj_scales`, [E, D, F / 32], 118, 131);
  }
  return { tensors, values, raw };
}

t.test('gpt-oss MXFP4 experts dequantize into our layout', async (t) => {
  const { tensors, values, raw } = mxfp4Checkpoint(21);
  const config = tinyConfig('GptOssForCausalLM', {
    quantization_config: { quant_method: 'mxfp4', modules_to_not_convert: [] },
  });
  const dir = writeHfFolder(fresh(), config, tensors);
  const want = expectedParams('GptOssForCausalLM', values, { mxfp4: raw });
  for (const mode of ['auto', 'float32', 'bfloat16'] as const) {
    const ck = await loadHfCheckpoint(dir, { dtype: mode });
    checkAll(t, ck.tensors, want, mode, 'BF16', `MXFP4 → ${mode}`);
    t.equal(
      ck.fileDtypes.get('layers.0.mlp.experts.gate_up.weight'),
      'BF16',
      'MXFP4 counts as BF16 (its dequantized form)',
    );
  }
});

t.test('shards with an index load like one file', async (t) => {
  const arch = 'LlamaForCausalLM';
  const shapes = hfShapes(arch);
  const { tensors, values } = randomTensors(shapes, 'BF16', 5);
  const names = shapes.map(([n]) => n);
  const dir = writeHfFolder(fresh(), tinyConfig(arch), tensors, {
    shards: [names.slice(0, 5), names.slice(5, 20), names.slice(20)],
  });
  const ck = await loadHfCheckpoint(dir, { dtype: 'float32' });
  checkAll(t, ck.tensors, expectedParams(arch, values), 'float32', 'BF16', 'sharded');
});

t.test('the reader streams one parameter at a time', async (t) => {
  const { tensors, values } = randomTensors(hfShapes('Qwen2ForCausalLM'), 'F32', 8);
  const dir = writeHfFolder(fresh(), tinyConfig('Qwen2ForCausalLM'), tensors);
  const reader = await HfCheckpointReader.open(dir, { dtype: 'bfloat16', maxPositions: 64 });
  try {
    t.equal(reader.config.modelConfig.context, 64);
    t.same(reader.tensors[0], {
      name: 'embed.weight',
      shape: [DIMS.V, DIMS.D],
      dtype: 'bfloat16',
      fileDtype: 'F32',
      sources: ['model.embed_tokens.weight'],
    });
    t.same(reader.tensors.find((x) => x.name === 'layers.1.mlp.gate_up.weight')?.sources, [
      'model.layers.1.mlp.gate_proj.weight',
      'model.layers.1.mlp.up_proj.weight',
    ]);
    const norm = await reader.read('norm.weight');
    t.same(Array.from(norm.data as Float32Array), Array.from(Float32Array.from(values.get('model.norm.weight')!)));
    await t.rejects(reader.read('nope'), RangeError);
    let n = 0;
    for await (const [info, tensor] of reader.entries()) {
      t.equal(tensor.dtype, info.dtype);
      n++;
    }
    t.equal(n, reader.tensors.length);
  } finally {
    await reader.dispose();
    await reader.dispose();
  }
  t.equal(reader.generationConfig, null, 'no generation_config.json');
});

t.test('rotary inv_freq buffers are skipped; a tied lm_head copy is accepted', async (t) => {
  const arch = 'Qwen3ForCausalLM';
  const { tensors, values } = randomTensors(hfShapes(arch), 'F32', 9);
  tensors.set('model.layers.0.self_attn.rotary_emb.inv_freq', {
    dtype: 'F32',
    shape: [8],
    data: new Float32Array(8).fill(1),
  });
  tensors.set('lm_head.weight', tensors.get('model.embed_tokens.weight')!);
  const ck = await loadHfCheckpoint(writeHfFolder(fresh(), tinyConfig(arch), tensors), { dtype: 'float32' });
  checkAll(t, ck.tensors, expectedParams(arch, values), 'float32', 'F32', 'with extras');
});
