// Tests of the Hugging Face test fixtures themselves (test/model/hf/fixtures): number formats,
// MXFP4, the safetensors writer/reader and shards, the tiny checkpoints' layout, and properties
// of the float64 reference forward that hold without any model of ours.

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import {
  FP4_VALUES,
  bf16BitsToNumber,
  decodeMxfp4,
  encodeMxfp4,
  f16BitsToNumber,
  numberToBf16Bits,
  numberToF16Bits,
  roundBf16,
} from './fixtures/numeric-formats.js';
import {
  type MoeWeights,
  expectedTensorShapes,
  loadReferenceModel,
  logProbsFromLogits,
  referenceAttention,
  referenceForward,
  referenceLogProbs,
  referenceMoe,
  readReferenceConfig,
  rmsNormRow,
} from './fixtures/reference-forward.js';
import {
  applyRotateHalf,
  defaultInvFreq,
  llama3InvFreq,
  ropeFromConfig,
  yarnParams,
} from './fixtures/rope-reference.js';
import {
  type RawTensor,
  decodeSafetensorsBytes,
  decodeValues,
  encodeSafetensorsBytes,
  encodeValues,
  readCheckpointTensors,
} from './fixtures/safetensors-io.js';
import { integerValues, uniformValues } from './fixtures/seeded.js';
import { specialTokenId, writeTinyCheckpoint } from './fixtures/tiny-checkpoint.js';

const tmp = (t: Test): string => {
  const dir = mkdtempSync(join(tmpdir(), 'hf-fixture-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
};

const maxAbs = (a: ArrayLike<number>, b: ArrayLike<number>): number => {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
};

t.test('bfloat16: known bit patterns decode exactly and encoding rounds to nearest even', async (t) => {
  t.equal(bf16BitsToNumber(0x3f80), 1);
  t.equal(bf16BitsToNumber(0xc000), -2);
  t.equal(bf16BitsToNumber(0x3e80), 0.25);
  t.equal(bf16BitsToNumber(0x7f80), Infinity);
  t.equal(bf16BitsToNumber(0xff80), -Infinity);
  t.ok(Number.isNaN(bf16BitsToNumber(0x7fc0)));
  t.equal(bf16BitsToNumber(0x0001), 2 ** -133, 'smallest subnormal');
  t.equal(bf16BitsToNumber(0x7f7f), (2 - 2 ** -7) * 2 ** 127, 'largest finite');
  t.ok(Object.is(bf16BitsToNumber(0x8000), -0));
  t.equal(numberToBf16Bits(1 + 2 ** -8), 0x3f80, 'halfway, ties to the even 1.0');
  t.equal(numberToBf16Bits(1 + 3 * 2 ** -8), 0x3f82, 'halfway, ties to the even 1 + 2^-6');
  t.equal(numberToBf16Bits(1 + 2 ** -8 + 2 ** -20), 0x3f81, 'past halfway rounds up');
  t.equal(numberToBf16Bits(-2.5), 0xc020);
  t.equal(numberToBf16Bits(3.4e38), 0x7f80, 'overflow to +Inf');
  t.ok(Number.isNaN(roundBf16(NaN)));
  let bad = 0;
  for (let bits = 0; bits < 0x10000; bits++) {
    const v = bf16BitsToNumber(bits);
    if (!Number.isNaN(v) && numberToBf16Bits(v) !== bits) bad++;
  }
  t.equal(bad, 0, 'every non-NaN pattern survives decode → encode');
});

t.test('float16: known bit patterns decode exactly and encoding rounds to nearest even', async (t) => {
  t.equal(f16BitsToNumber(0x3c00), 1);
  t.equal(f16BitsToNumber(0xc400), -4);
  t.equal(f16BitsToNumber(0x7bff), 65504);
  t.equal(f16BitsToNumber(0x0001), 2 ** -24);
  t.equal(f16BitsToNumber(0x03ff), 1023 * 2 ** -24);
  t.equal(f16BitsToNumber(0x0400), 2 ** -14);
  t.equal(f16BitsToNumber(0x3555), 0x155 / 1024 / 4 + 0.25);
  t.equal(f16BitsToNumber(0x7c00), Infinity);
  t.ok(Number.isNaN(f16BitsToNumber(0x7e00)));
  t.ok(Object.is(f16BitsToNumber(0x8000), -0));
  t.equal(numberToF16Bits(65519), 0x7bff, 'below the halfway point to 65536');
  t.equal(numberToF16Bits(65520), 0x7c00, 'halfway: ties to even = Inf');
  t.equal(numberToF16Bits(2 ** -25), 0x0000, 'half the smallest subnormal ties to 0');
  t.equal(numberToF16Bits(3 * 2 ** -25), 0x0002, '1.5 subnormal units ties to 2');
  t.equal(numberToF16Bits(1 + 2 ** -11), 0x3c00);
  t.equal(numberToF16Bits(1 + 3 * 2 ** -11), 0x3c02);
  t.equal(numberToF16Bits(2 ** -14 - 2 ** -25), 0x0400, 'rounds up from subnormal to the smallest normal');
  t.equal(numberToF16Bits(-0), 0x8000);
  let bad = 0;
  for (let bits = 0; bits < 0x10000; bits++) {
    const v = f16BitsToNumber(bits);
    if (!Number.isNaN(v) && numberToF16Bits(v) !== bits) bad++;
  }
  t.equal(bad, 0, 'every non-NaN pattern survives decode → encode');
});

t.test('bf16 / f16 encoding picks the nearest pattern (ties: even) found by searching all patterns', async (t) => {
  for (const [name, decode, encode] of [
    ['bf16', bf16BitsToNumber, numberToBf16Bits],
    ['f16', f16BitsToNumber, numberToF16Bits],
  ] as const) {
    const finite: { v: number; bits: number }[] = [];
    for (let bits = 0; bits < 0x10000; bits++) {
      const v = decode(bits);
      if (Number.isFinite(v) && !Object.is(v, -0)) finite.push({ v, bits });
    }
    finite.sort((a, b) => a.v - b.v);
    const nearest = (x: number): number => {
      let lo = 0;
      let hi = finite.length - 1;
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (finite[mid].v <= x) lo = mid;
        else hi = mid;
      }
      const a = finite[lo];
      const b = finite[hi];
      const da = Math.abs(x - a.v);
      const db = Math.abs(x - b.v);
      if (da !== db) return da < db ? a.bits : b.bits;
      return (a.bits & 1) === 0 ? a.bits : b.bits;
    };
    const next = uniformValues(3000, 9, `${name} probes`, 0, 1);
    let bad = 0;
    next.forEach((u, i) => {
      // float32 values (both encoders round a double to float32 first), across many binades.
      const scale = name === 'f16' ? 2 ** (Math.floor(u * 40) - 26) : 2 ** (Math.floor(u * 200) - 100);
      const x = Math.fround((i % 2 ? -1 : 1) * (1 + ((u * 7919) % 1)) * scale);
      if (Math.abs(x) >= (name === 'f16' ? 65504 : 3.3e38)) return;
      if (decode(encode(x)) !== decode(nearest(x))) bad++;
    });
    t.equal(bad, 0, `${name}: every probe rounds to the nearest value`);
  }
});

t.test(
  'MXFP4: hand-built blocks decode to the values encoded (low nibble first, scale - 127, transposed)',
  async (t) => {
    // E = 1, R = 2 rows, G = 1 block of 32 values per row.
    const blocks = new Uint8Array(32);
    blocks.fill(0x21, 0, 16); // row 0: lo nibble 1 (0.5), hi nibble 2 (1.0)
    blocks[5] = 0x73; // row 0, values 10 and 11: lo 3 (1.5), hi 7 (6)
    blocks.fill(0xf8, 16, 32); // row 1: lo 8 (-0), hi 15 (-6)
    const scales = new Uint8Array([128, 125]); // ×2 and ×1/4
    const { shape, values } = decodeMxfp4(blocks, scales, [1, 2, 1, 16]);
    t.same(shape, [1, 32, 2], 'rows and the 32 values swap places');
    const at = (c: number, r: number): number => values[c * 2 + r];
    t.equal(at(0, 0), 1);
    t.equal(at(1, 0), 2);
    t.equal(at(10, 0), 3, 'low nibble of byte 5 is value 10');
    t.equal(at(11, 0), 12, 'high nibble of byte 5 is value 11');
    t.equal(at(31, 0), 2);
    t.ok(Object.is(at(0, 1), -0));
    t.equal(at(1, 1), -1.5);
    t.same(FP4_VALUES.slice(0, 8), [0, 0.5, 1, 1.5, 2, 3, 4, 6]);
    t.throws(() => decodeMxfp4(blocks, new Uint8Array(3), [1, 2, 1, 16]), /scales/);
  },
);

t.test('MXFP4: encode → decode round trip over [E, C, R] with per-block scales', async (t) => {
  const E = 2;
  const C = 64;
  const R = 3;
  const vals = new Float64Array(E * C * R);
  const nib = integerValues(vals.length, 3, 'nibbles', 0, 16);
  const exps = integerValues(E * R * 2, 3, 'exps', -6, 3);
  for (let e = 0; e < E; e++)
    for (let c = 0; c < C; c++)
      for (let r = 0; r < R; r++) {
        const i = (e * C + c) * R + r;
        vals[i] = FP4_VALUES[nib[i]] * 2 ** exps[(e * R + r) * 2 + (c >> 5)];
      }
  const enc = encodeMxfp4(vals, [E, C, R]);
  t.same(enc.blocksShape, [E, R, C / 32, 16]);
  const dec = decodeMxfp4(enc.blocks, enc.scales, enc.blocksShape);
  t.same(dec.shape, [E, C, R]);
  let bad = 0;
  for (let i = 0; i < vals.length; i++)
    if (!Object.is(dec.values[i], vals[i]) && !(dec.values[i] === 0 && vals[i] === 0)) bad++;
  t.equal(bad, 0);
  t.throws(() => encodeMxfp4(new Float64Array(32).fill(0.3), [1, 32, 1]), /not FP4/);
});

t.test('safetensors: header aligned, every dtype round-trips, bad offsets are refused', async (t) => {
  const vals = [1.5, -2, 0.25, 3, 1e-3, -7.5];
  const entries: [string, RawTensor][] = [
    ['a', { dtype: 'F32', shape: [2, 3], bytes: encodeValues(vals, 'F32') }],
    ['b', { dtype: 'BF16', shape: [6], bytes: encodeValues(vals, 'BF16') }],
    ['c', { dtype: 'F16', shape: [3, 2], bytes: encodeValues(vals, 'F16') }],
    ['d', { dtype: 'U8', shape: [3], bytes: encodeValues([0, 7, 255], 'U8') }],
  ];
  const file = encodeSafetensorsBytes(entries);
  const n = Number(new DataView(file.buffer).getBigUint64(0, true));
  t.equal((8 + n) % 8, 0, 'data starts 8-byte aligned');
  const { tensors, metadata } = decodeSafetensorsBytes(file);
  t.same(metadata, { format: 'pt' });
  t.same([...tensors.keys()], ['a', 'b', 'c', 'd']);
  t.same(Array.from(decodeValues(tensors.get('a')!.bytes, 'F32')), vals.map(Math.fround));
  t.same(Array.from(decodeValues(tensors.get('b')!.bytes, 'BF16')), vals.map(roundBf16));
  t.same(Array.from(decodeValues(tensors.get('c')!.bytes, 'F16')), [
    1.5,
    -2,
    0.25,
    3,
    f16BitsToNumber(numberToF16Bits(1e-3)),
    -7.5,
  ]);
  t.same(Array.from(decodeValues(tensors.get('d')!.bytes, 'U8')), [0, 7, 255]);
  t.same(tensors.get('c')!.shape, [3, 2]);
  const broken = new Uint8Array(file);
  broken.set(Buffer.from('[0,99]'), 8 + Buffer.from(file.subarray(8, 8 + n)).indexOf('[0,24]'));
  t.throws(() => decodeSafetensorsBytes(broken), /tensor a offsets \[0, 99\)/);
});

t.test('tiny gpt-oss checkpoint: config fields and MXFP4 tensor shapes as the real ones', async (t) => {
  const dir = tmp(t);
  const ck = writeTinyCheckpoint(dir, { family: 'gpt_oss' });
  const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  t.same(cfg.architectures, ['GptOssForCausalLM']);
  t.equal(cfg.model_type, 'gpt_oss');
  t.equal(cfg.num_local_experts, 4);
  t.equal(cfg.num_experts_per_tok, 2);
  t.equal(cfg.experts_per_token, 2);
  t.same(cfg.layer_types, ['sliding_attention', 'full_attention', 'sliding_attention']);
  t.equal(cfg.sliding_window, 8);
  t.equal(cfg.attention_bias, true);
  t.equal(cfg.swiglu_limit, 7);
  t.equal(cfg.tie_word_embeddings, false);
  t.not(
    cfg.head_dim,
    (cfg.hidden_size as number) / (cfg.num_attention_heads as number),
    'head_dim is not hidden / heads',
  );
  const rs = cfg.rope_scaling as Record<string, unknown>;
  t.equal(rs.rope_type, 'yarn');
  t.equal(rs.truncate, false);
  t.equal(cfg.max_position_embeddings, (rs.factor as number) * (rs.original_max_position_embeddings as number));
  t.equal((cfg.quantization_config as Record<string, unknown>).quant_method, 'mxfp4');
  const gen = JSON.parse(readFileSync(join(dir, 'generation_config.json'), 'utf8')) as Record<string, unknown>;
  t.ok(Array.isArray(gen.eos_token_id) && (gen.eos_token_id as number[]).length === 3, 'eos list');
  const p = 'model.layers.1.mlp.experts.';
  t.same(ck.tensors.get(`${p}gate_up_proj_blocks`)!.shape, [4, 64, 2, 16], '[E, 2F, D/32, 16]');
  t.same(ck.tensors.get(`${p}gate_up_proj_scales`)!.shape, [4, 64, 2], '[E, 2F, D/32]');
  t.same(ck.tensors.get(`${p}down_proj_blocks`)!.shape, [4, 64, 1, 16], '[E, D, F/32, 16]');
  t.same(ck.tensors.get(`${p}down_proj_scales`)!.shape, [4, 64, 1]);
  t.same(ck.tensors.get(`${p}gate_up_proj_bias`)!.shape, [4, 64]);
  t.equal(ck.tensors.get(`${p}gate_up_proj_blocks`)!.dtype, 'U8');
  t.equal(ck.tensors.get('model.layers.0.self_attn.sinks')!.dtype, 'BF16');
  t.ok(ck.tensors.has('lm_head.weight'), 'untied: lm_head.weight present');
  // Dequantized through the reference: the bf16 layouts, and every value nonzero somewhere.
  const m = loadReferenceModel(dir);
  const gu = m.weights.get(`${p}gate_up_proj`)!;
  t.same(gu.shape, [4, 64, 64], '[E, D, 2F]');
  t.same(m.weights.get(`${p}down_proj`)!.shape, [4, 32, 64], '[E, F, D]');
  t.ok(gu.values.some((v) => v !== 0) && gu.values.every((v) => Number.isFinite(v)));
  // Non-expert tensors are random, never zero.
  for (const [name, w] of m.weights)
    if (!name.includes('experts.gate_up_proj') && !name.includes('experts.down_proj'))
      t.notOk(
        w.values.some((v) => v === 0),
        `${name} has no zeros`,
      );
});

t.test('tiny Qwen3/Qwen2/Llama checkpoints: the fields and tensors of their families', async (t) => {
  const q3 = writeTinyCheckpoint(tmp(t), { family: 'qwen3' });
  t.equal(q3.config.tie_word_embeddings, true);
  t.notOk(q3.tensors.has('lm_head.weight'), 'tied: no lm_head.weight');
  t.ok(
    q3.tensors.has('model.layers.0.self_attn.q_norm.weight') &&
      q3.tensors.has('model.layers.1.self_attn.k_norm.weight'),
  );
  t.same(q3.tensors.get('model.layers.0.self_attn.q_norm.weight')!.shape, [16]);
  t.not(q3.config.head_dim, 48 / 4);
  t.equal(q3.config.use_sliding_window, false);
  t.equal(q3.config.sliding_window, 4);
  const q3u = writeTinyCheckpoint(tmp(t), { family: 'qwen3', tie: false, dtype: 'F16' });
  t.ok(q3u.tensors.has('lm_head.weight'));
  t.equal(q3u.tensors.get('lm_head.weight')!.dtype, 'F16');
  const q2 = writeTinyCheckpoint(tmp(t), { family: 'qwen2' });
  t.ok(
    q2.tensors.has('model.layers.0.self_attn.q_proj.bias') && q2.tensors.has('model.layers.0.self_attn.v_proj.bias'),
  );
  t.notOk(q2.tensors.has('model.layers.0.self_attn.o_proj.bias'), 'qwen2: no o_proj bias');
  t.notOk('head_dim' in q2.config);
  t.throws(() => writeTinyCheckpoint(tmp(t), { family: 'qwen2', headDim: 16 }), /head_dim/);
  const ll = writeTinyCheckpoint(tmp(t), { family: 'llama', dtype: 'F32' });
  t.same(ll.config.architectures, ['LlamaForCausalLM']);
  t.equal((ll.config.rope_scaling as Record<string, unknown>).rope_type, 'llama3');
  t.equal(ll.tensors.get('model.embed_tokens.weight')!.dtype, 'F32');
  t.ok(ll.tensors.has('model.layers.1.mlp.gate_proj.weight'));
  const gen = ll.generationConfig;
  t.same(gen.eos_token_id, [248, 250]);
  const one = writeTinyCheckpoint(tmp(t), { family: 'llama', eos: 3 });
  t.equal(one.generationConfig.eos_token_id, 3, 'eos as one int');
  t.throws(() => writeTinyCheckpoint(tmp(t), { family: 'gpt_oss', hidden: 48 }), /multiples of 32/);
});

t.test('shards + index round trip: every tensor once, in the shard the index names', async (t) => {
  const dir = tmp(t);
  const ck = writeTinyCheckpoint(dir, { family: 'qwen2', shards: 3, seed: 4 });
  t.same(ck.files, [
    'model-00001-of-00003.safetensors',
    'model-00002-of-00003.safetensors',
    'model-00003-of-00003.safetensors',
  ]);
  t.notOk(existsSync(join(dir, 'model.safetensors')));
  const index = JSON.parse(readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8')) as {
    metadata: { total_size: number };
    weight_map: Record<string, string>;
  };
  t.same(Object.keys(index.weight_map).sort(), [...ck.tensors.keys()].sort());
  t.equal(
    index.metadata.total_size,
    [...ck.tensors.values()].reduce((n, x) => n + x.bytes.length, 0),
  );
  t.same(new Set(Object.values(index.weight_map)), new Set(ck.files), 'every shard used');
  const back = readCheckpointTensors(dir);
  t.equal(back.size, ck.tensors.size);
  for (const [name, raw] of ck.tensors) t.same(Buffer.from(back.get(name)!.bytes), Buffer.from(raw.bytes), name);
  // The same seed in one file gives the same model.
  const single = tmp(t);
  writeTinyCheckpoint(single, { family: 'qwen2', shards: 1, seed: 4 });
  const ids = [[3, 1, 4, 1, 5, 9, 2, 6]];
  t.same(referenceForward(dir, ids).logits, referenceForward(single, ids).logits);
  // An index naming the wrong shard is caught.
  const name = Object.keys(index.weight_map)[0];
  index.weight_map[name] = ck.files[2] === index.weight_map[name] ? ck.files[0] : ck.files[2];
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify(index));
  t.throws(() => readCheckpointTensors(dir), new RegExp(name.replace(/\./g, '\\.')));
});

t.test('the reference loader names a missing, extra or misshapen tensor', async (t) => {
  const dir = tmp(t);
  const ck = writeTinyCheckpoint(dir, { family: 'llama', layers: 1 });
  const rewrite = (edit: (m: Map<string, RawTensor>) => void): void => {
    const m = new Map(ck.tensors);
    edit(m);
    writeFileSync(join(dir, 'model.safetensors'), encodeSafetensorsBytes([...m.entries()]));
  };
  rewrite((m) => m.delete('model.layers.0.self_attn.k_proj.weight'));
  t.throws(() => loadReferenceModel(dir), /model\.layers\.0\.self_attn\.k_proj\.weight is missing/);
  rewrite((m) =>
    m.set('model.layers.0.self_attn.sinks', { dtype: 'F32', shape: [4], bytes: encodeValues([1, 2, 3, 4], 'F32') }),
  );
  t.throws(() => loadReferenceModel(dir), /model\.layers\.0\.self_attn\.sinks is not part/);
  rewrite((m) =>
    m.set('model.norm.weight', {
      dtype: 'F32',
      shape: [31],
      bytes: encodeValues(new Array<number>(31).fill(1), 'F32'),
    }),
  );
  t.throws(() => loadReferenceModel(dir), /model\.norm\.weight has shape \[31\]/);
  t.equal(
    expectedTensorShapes(readReferenceConfig(ck.config)).size,
    ck.tensors.size,
    'the config implies exactly the tensors written',
  );
});

t.test(
  'sink attention equals exp(s) / (Σ exp(s) + exp(sink)) computed directly; -Inf sinks give the plain softmax',
  async (t) => {
    const T = 9;
    const H = 4;
    const KV = 2;
    const hd = 6;
    const q = uniformValues(T * H * hd, 1, 'q', -1.5, 1.5);
    const k = uniformValues(T * KV * hd, 1, 'k', -1.5, 1.5);
    const v = uniformValues(T * KV * hd, 1, 'v', -1, 1);
    const sinks = [0.7, -0.4, 1.9, -2];
    const scale = 1 / Math.sqrt(hd);
    for (const window of [null, 3]) {
      const { out } = referenceAttention(q, k, v, { T, heads: H, kvHeads: KV, headDim: hd, window, sinks, scale });
      const want = new Float64Array(T * H * hd);
      for (let h = 0; h < H; h++) {
        const kvh = h < 2 ? 0 : 1; // two query heads per kv head
        for (let t0 = 0; t0 < T; t0++) {
          let den = Math.exp(sinks[h]);
          const num = new Float64Array(hd);
          for (let j = 0; j <= t0; j++) {
            if (window !== null && t0 - j >= window) continue;
            let s = 0;
            for (let d = 0; d < hd; d++) s += q[(t0 * H + h) * hd + d] * k[(j * KV + kvh) * hd + d];
            const e = Math.exp(s * scale);
            den += e;
            for (let d = 0; d < hd; d++) num[d] += e * v[(j * KV + kvh) * hd + d];
          }
          for (let d = 0; d < hd; d++) want[(t0 * H + h) * hd + d] = num[d] / den;
        }
      }
      t.ok(maxAbs(out, want) < 1e-14, `window ${window}: max diff ${maxAbs(out, want)}`);
    }
    const plain = referenceAttention(q, k, v, {
      T,
      heads: H,
      kvHeads: KV,
      headDim: hd,
      window: null,
      sinks: null,
      scale,
    }).out;
    const noSink = referenceAttention(q, k, v, {
      T,
      heads: H,
      kvHeads: KV,
      headDim: hd,
      window: null,
      sinks: [-Infinity, -Infinity, -Infinity, -Infinity],
      scale,
    }).out;
    t.ok(maxAbs(plain, noSink) < 1e-15);
    // Window 1 without sinks: each query sees only itself, so the output is its own value row.
    const self = referenceAttention(q, k, v, { T, heads: H, kvHeads: KV, headDim: hd, window: 1, sinks: null, scale });
    for (let t0 = 0; t0 < T; t0++)
      for (let d = 0; d < hd; d++) t.equal(self.out[(t0 * H + 3) * hd + d], v[(t0 * KV + 1) * hd + d]);
    t.equal(self.windowed, T - 1, 'every query after the first had keys hidden');
  },
);

t.test('rotate-half RoPE: identity at position 0, norm-preserving, relative; attention factor scales', async (t) => {
  const hd = 10;
  const inv = defaultInvFreq(10000, hd);
  const x = uniformValues(hd, 2, 'x', -1, 1);
  const y = uniformValues(hd, 2, 'y', -1, 1);
  const rot = (vec: Float64Array, pos: number, af = 1): Float64Array => {
    const out = Float64Array.from(vec);
    applyRotateHalf(
      out,
      0,
      hd,
      Array.from(inv, (f) => Math.cos(f * pos) * af),
      Array.from(inv, (f) => Math.sin(f * pos) * af),
    );
    return out;
  };
  t.same(Array.from(rot(x, 0)), Array.from(x), 'position 0 is the identity');
  const norm = (v: Float64Array): number => Math.hypot(...v);
  t.ok(Math.abs(norm(rot(x, 17)) - norm(x)) < 1e-14, 'norm preserved');
  t.ok(Math.abs(norm(rot(x, 17, 1.3)) - 1.3 * norm(x)) < 1e-14, 'attention factor scales the norm');
  const dot = (a: Float64Array, b: Float64Array): number => a.reduce((s, v, i) => s + v * b[i], 0);
  t.ok(Math.abs(dot(rot(x, 9), rot(y, 4)) - dot(rot(x, 25), rot(y, 20))) < 1e-13, 'q·k depends on the distance only');
  // Pair i rotates (x_i, x_{i+5}) by the angle inv_i·pos.
  const r = rot(x, 3);
  const a = inv[2] * 3;
  t.ok(Math.abs(r[2] - (x[2] * Math.cos(a) - x[7] * Math.sin(a))) < 1e-15);
  t.ok(Math.abs(r[7] - (x[7] * Math.cos(a) + x[2] * Math.sin(a))) < 1e-15);
});

t.test("YaRN with gpt-oss's real rope_scaling matches values derived by hand", async (t) => {
  // dim 64, theta 150000, factor 32, original 4096, beta_fast 32, beta_slow 1, truncate false.
  // low  = 64·ln(4096 / (32·2π)) / (2·ln 150000) = 8.092779115512402
  // high = 64·ln(4096 / (1·2π))  / (2·ln 150000) = 17.39802450158856
  // inv_i = θ^(-2i/64)·[(1 - ramp_i) + ramp_i / 32], ramp_i = clamp((i - low) / (high - low), 0, 1)
  const y = yarnParams(150000, 64, { factor: 32, originalMax: 4096, betaFast: 32, betaSlow: 1, truncate: false });
  t.ok(Math.abs(y.low - 8.092779115512402) < 1e-12 && Math.abs(y.high - 17.39802450158856) < 1e-12);
  const want: [number, number][] = [
    [0, 1.0],
    [8, 0.050813274815461475], // ramp 0: extrapolation, 150000^(-1/4)
    [9, 0.03170569618466377], // ramp 0.0975
    [12, 0.006794959489732219], // ramp 0.4199
    [18, 3.8308812373753384e-5], // ramp 1: interpolation, 150000^(-36/64) / 32
    [31, 3.0235114281192144e-7],
  ];
  for (const [i, v] of want)
    t.ok(Math.abs(y.invFreq[i] - v) / v < 1e-12, `inv_freq[${i}] = ${y.invFreq[i]}, want ${v}`);
  t.ok(Math.abs(y.attentionFactor - 1.3465735902799727) < 1e-15, '0.1·ln 32 + 1');
  // truncate true (the default) floors / ceils the range to [8, 18]: a different value at 12.
  const tr = yarnParams(150000, 64, { factor: 32, originalMax: 4096, betaFast: 32, betaSlow: 1 });
  t.equal(tr.low, 8);
  t.equal(tr.high, 18);
  t.ok(Math.abs(tr.invFreq[12] - 0.007015713910504388) < 1e-15);
  // Through a config.json: rope_scaling as gpt-oss writes it, truncate false read.
  const cfg = {
    model_type: 'gpt_oss',
    hidden_size: 2880,
    num_attention_heads: 64,
    head_dim: 64,
    max_position_embeddings: 131072,
    rope_theta: 150000,
    rope_scaling: {
      beta_fast: 32,
      beta_slow: 1,
      factor: 32,
      original_max_position_embeddings: 4096,
      rope_type: 'yarn',
      truncate: false,
    },
  };
  const r = ropeFromConfig(cfg);
  t.same(Array.from(r.invFreq), Array.from(y.invFreq));
  t.equal(r.attentionFactor, y.attentionFactor);
  const withMscale = ropeFromConfig({ ...cfg, rope_scaling: { ...cfg.rope_scaling, mscale: 1, mscale_all_dim: 0.5 } });
  t.ok(
    Math.abs(withMscale.attentionFactor - (0.1 * Math.log(32) + 1) / (0.05 * Math.log(32) + 1)) < 1e-15,
    'mscale / mscale_all_dim',
  );
  t.equal(
    ropeFromConfig({ ...cfg, rope_scaling: { ...cfg.rope_scaling, attention_factor: 0.9 } }).attentionFactor,
    0.9,
  );
});

t.test('Llama 3 and linear scaling inverse frequencies match values derived by hand', async (t) => {
  // head_dim 12, theta 500000, factor 8, low 1, high 4, original 64: wavelengths 6.28 (kept),
  // 55.98 (smoothed: s = (64/55.98 - 1) / 3), 498.7 and up (divided by 8).
  const inv = llama3InvFreq(500000, 12, { factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMax: 64 });
  const want = [
    1.0, 0.018723196287486383, 0.0015749013123685918, 0.00017677669529663688, 1.9842513149602502e-5,
    2.227246795350847e-6,
  ];
  for (let i = 0; i < 6; i++) t.ok(Math.abs(inv[i] - want[i]) / want[i] < 1e-12, `inv_freq[${i}]`);
  const lin = ropeFromConfig({
    model_type: 'llama',
    hidden_size: 32,
    num_attention_heads: 4,
    max_position_embeddings: 512,
    rope_theta: 10000,
    rope_scaling: { type: 'linear', factor: 2 },
  });
  t.equal(lin.type, 'linear');
  t.same(
    Array.from(lin.invFreq),
    Array.from(defaultInvFreq(10000, 8), (v) => v / 2),
  );
  t.equal(
    ropeFromConfig({
      model_type: 'qwen3',
      hidden_size: 32,
      num_attention_heads: 4,
      head_dim: 16,
      max_position_embeddings: 512,
    }).theta,
    10000,
  );
  t.equal(
    ropeFromConfig({ model_type: 'gpt_oss', hidden_size: 32, num_attention_heads: 4, max_position_embeddings: 512 })
      .theta,
    150000,
    'gpt-oss default theta',
  );
});

/** One gpt-oss expert written from the definition, on the non-interleaved view of its columns. */
function expertDirect(x: Float64Array, w: MoeWeights, e: number, D: number, F: number): Float64Array {
  const act = new Float64Array(F);
  for (let f = 0; f < F; f++) {
    let gate = w.gateUpBias[e * 2 * F + 2 * f];
    let up = w.gateUpBias[e * 2 * F + 2 * f + 1];
    for (let d = 0; d < D; d++) {
      gate += x[d] * w.gateUp[e * D * 2 * F + d * 2 * F + 2 * f];
      up += x[d] * w.gateUp[e * D * 2 * F + d * 2 * F + 2 * f + 1];
    }
    gate = Math.min(gate, 7);
    up = Math.max(-7, Math.min(7, up));
    act[f] = (up + 1) * (gate / (1 + Math.exp(-1.702 * gate)));
  }
  const y = new Float64Array(D);
  for (let d = 0; d < D; d++) {
    y[d] = w.downBias[e * D + d];
    for (let f = 0; f < F; f++) y[d] += act[f] * w.down[e * F * D + f * D + d];
  }
  return y;
}

t.test('MoE: top-k = experts with equal router logits is the plain average; top-1 is the argmax expert', async (t) => {
  const D = 8;
  const F = 6;
  const E = 4;
  const T = 3;
  const x = uniformValues(T * D, 5, 'x', -2, 2);
  const w: MoeWeights = {
    routerWeight: new Float64Array(E * D),
    routerBias: new Float64Array(E).fill(0.3),
    gateUp: uniformValues(E * D * 2 * F, 5, 'gu', -1.5, 1.5),
    gateUpBias: uniformValues(E * 2 * F, 5, 'gub', -0.5, 0.5),
    down: uniformValues(E * F * D, 5, 'dn', -0.5, 0.5),
    downBias: uniformValues(E * D, 5, 'dnb', -0.3, 0.3),
  };
  const stats = { gateClamped: 0, upClamped: 0, windowedQueries: 0, expertUse: [0, 0, 0, 0], routes: [] as number[] };
  const all = referenceMoe(x, w, { T, hidden: D, intermediate: F, experts: E, topK: E, limit: 7, alpha: 1.702, stats });
  for (let t0 = 0; t0 < T; t0++) {
    const xt = x.subarray(t0 * D, (t0 + 1) * D);
    const avg = new Float64Array(D);
    for (let e = 0; e < E; e++) expertDirect(xt, w, e, D, F).forEach((v, d) => (avg[d] += v / E));
    t.ok(maxAbs(all.subarray(t0 * D, (t0 + 1) * D), avg) < 1e-13, `token ${t0}`);
  }
  t.ok(stats.gateClamped + stats.upClamped > 0, 'the inputs reach the clamp');
  // Ties pick the lower indices: top-2 of four equal logits averages experts 0 and 1.
  const two = referenceMoe(x, w, { T, hidden: D, intermediate: F, experts: E, topK: 2, limit: 7, alpha: 1.702 });
  const x0 = x.subarray(0, D);
  const want2 = expertDirect(x0, w, 0, D, F).map((v, d) => (v + expertDirect(x0, w, 1, D, F)[d]) / 2);
  t.ok(maxAbs(two.subarray(0, D), want2) < 1e-13);
  // Distinct logits: top-1 is exactly the best expert (softmax over one value = 1).
  const wr = { ...w, routerWeight: uniformValues(E * D, 6, 'wr', -1, 1), routerBias: uniformValues(E, 6, 'br', -1, 1) };
  const one = referenceMoe(x, wr, { T, hidden: D, intermediate: F, experts: E, topK: 1, limit: 7, alpha: 1.702 });
  for (let t0 = 0; t0 < T; t0++) {
    const xt = x.subarray(t0 * D, (t0 + 1) * D);
    const logits = Array.from(
      { length: E },
      (_, e) => wr.routerBias[e] + xt.reduce((s, v, d) => s + v * wr.routerWeight[e * D + d], 0),
    );
    const best = logits.indexOf(Math.max(...logits));
    t.ok(maxAbs(one.subarray(t0 * D, (t0 + 1) * D), expertDirect(xt, wr, best, D, F)) < 1e-13);
  }
});

t.test('a one-layer Llama with identity-like weights behaves as worked out by hand', async (t) => {
  const dir = tmp(t);
  const V = 8;
  const D = 8;
  const c = 2;
  const eps = 1e-5;
  writeTinyCheckpoint(dir, {
    family: 'llama',
    layers: 1,
    hidden: D,
    heads: 2,
    kvHeads: 2,
    headDim: 4,
    intermediate: 4,
    vocab: V,
    tie: true,
    ropeScaling: null,
    eos: 7,
    rmsNormEps: eps,
  });
  const eye = (n: number, s = 1): number[] => Array.from({ length: n * n }, (_, i) => (i % (n + 1) === 0 ? s : 0));
  const f32 = (name: string, shape: number[], values: number[]): [string, RawTensor] => [
    name,
    { dtype: 'F32', shape, bytes: encodeValues(values, 'F32') },
  ];
  const ones = (n: number): number[] => new Array<number>(n).fill(1);
  const zeros = (n: number): number[] => new Array<number>(n).fill(0);
  const p = 'model.layers.0.';
  writeFileSync(
    join(dir, 'model.safetensors'),
    encodeSafetensorsBytes([
      f32('model.embed_tokens.weight', [V, D], eye(D, c)),
      f32(`${p}input_layernorm.weight`, [D], ones(D)),
      f32(`${p}self_attn.q_proj.weight`, [D, D], zeros(D * D)), // all scores 0: uniform over the past
      f32(`${p}self_attn.k_proj.weight`, [D, D], zeros(D * D)),
      f32(`${p}self_attn.v_proj.weight`, [D, D], eye(D)),
      f32(`${p}self_attn.o_proj.weight`, [D, D], eye(D)),
      f32(`${p}post_attention_layernorm.weight`, [D], ones(D)),
      f32(
        `${p}mlp.gate_proj.weight`,
        [4, D],
        Array.from({ length: 4 * D }, (_, i) => (i % 3) - 1),
      ),
      f32(
        `${p}mlp.up_proj.weight`,
        [4, D],
        Array.from({ length: 4 * D }, (_, i) => (i % 5) - 2),
      ),
      f32(`${p}mlp.down_proj.weight`, [D, 4], zeros(4 * D)), // the MLP adds nothing
      f32('model.norm.weight', [D], ones(D)),
    ]),
  );
  const ids = [[3, 5, 3, 0, 7, 7]];
  const { logits } = referenceForward(dir, ids);
  // normed(e_i) = e_i / sqrt(c²/D + eps); h_t = e_{x_t} + mean_{j≤t} normed(e_{x_j});
  // logits_t = c · rmsnorm(h_t) (tied head: embed = c·I).
  const a = c / Math.sqrt((c * c) / D + eps);
  ids[0].forEach((id, t0) => {
    const h = new Float64Array(D);
    h[id] += c;
    for (let j = 0; j <= t0; j++) h[ids[0][j]] += a / (t0 + 1);
    const rms = Math.sqrt(h.reduce((s, v) => s + v * v, 0) / D + eps);
    const want = Array.from(h, (v) => (c * v) / rms);
    t.ok(maxAbs(logits[0].subarray(t0 * V, (t0 + 1) * V), want) < 1e-12, `position ${t0}`);
  });
  // And rmsNormRow itself: weight 2, x = [3, 4] → 2·x / sqrt(12.5 + eps).
  const out = new Float64Array(2);
  rmsNormRow(
    [3, 4],
    0,
    2,
    [2, 2],
    eps,
    out,
    0,
    'llama',
    (v) => v,
    (v) => v,
  );
  t.ok(maxAbs(out, [6 / Math.sqrt(12.5 + eps), 8 / Math.sqrt(12.5 + eps)]) < 1e-15);
});

t.test('Qwen ignores sliding_window unless use_sliding_window; windows count the token itself', async (t) => {
  const dir = tmp(t);
  writeTinyCheckpoint(dir, { family: 'qwen2', window: 4, seed: 8 });
  const ids = [integerValues(12, 8, 'ids', 0, 271)];
  const off = referenceForward(dir, ids);
  t.equal(off.stats.windowedQueries, 0);
  t.same(loadReferenceModel(dir).config.windows, [null, null]);
  const cfgPath = join(dir, 'config.json');
  const cfg = JSON.parse(readFileSync(cfgPath, 'utf8')) as Record<string, unknown>;
  writeFileSync(cfgPath, JSON.stringify({ ...cfg, use_sliding_window: true, max_window_layers: 0 }));
  t.same(loadReferenceModel(dir).config.windows, [4, 4], 'layers ≥ max_window_layers slide');
  const on = referenceForward(dir, ids);
  const V = 271;
  // Positions 0..3 see at most 4 keys (themselves included): identical. Position 4 loses key 0.
  t.same(Array.from(on.logits[0].subarray(0, 4 * V)), Array.from(off.logits[0].subarray(0, 4 * V)));
  t.ok(maxAbs(on.logits[0].subarray(4 * V, 5 * V), off.logits[0].subarray(4 * V, 5 * V)) > 1e-6);
  t.equal(on.stats.windowedQueries, 2 * 8, '8 windowed queries in each of 2 layers');
  writeFileSync(cfgPath, JSON.stringify({ ...cfg, use_sliding_window: true }));
  t.same(loadReferenceModel(dir).config.windows, [null, null], 'max_window_layers = layers: no sliding layer');
});

t.test('the default tiny gpt-oss exercises clamping, windows, every expert and YaRN', async (t) => {
  const dir = tmp(t);
  writeTinyCheckpoint(dir, { family: 'gpt_oss' });
  const m = loadReferenceModel(dir);
  t.same(m.config.windows, [8, null, 8]);
  t.equal(m.config.rope.type, 'yarn');
  t.ok(m.config.rope.attentionFactor > 1.3);
  const plain = defaultInvFreq(150000, 24);
  t.ok(
    m.config.rope.invFreq[0] === plain[0] && m.config.rope.invFreq[11] < plain[11] / 31,
    'yarn keeps the fastest pair, interpolates the slowest',
  );
  const ids = [integerValues(40, 9, 'ids', 0, 257)];
  const r = referenceForward(m, ids);
  t.ok(r.stats.gateClamped > 0, `gate clamped ${r.stats.gateClamped} times`);
  t.ok(r.stats.upClamped > 0, `up clamped ${r.stats.upClamped} times`);
  t.equal(r.stats.windowedQueries, 2 * (40 - 8), 'window 8 in layers 0 and 2');
  t.ok(
    r.stats.expertUse.every((n) => n > 0),
    `expert use ${r.stats.expertUse.join(',')}`,
  );
  // log-probs: a proper distribution and the temperature applied to the logits.
  const V = 257;
  for (let t0 = 0; t0 < 5; t0++) {
    const row = r.logits[0].subarray(t0 * V, (t0 + 1) * V);
    const lps = Array.from(row, (_, i) => logProbsFromLogits(row, [0, i], V, 1)[0]);
    t.ok(Math.abs(lps.reduce((s, lp) => s + Math.exp(lp), 0) - 1) < 1e-12);
  }
  const hot = referenceLogProbs(m, ids, 0.5)[0];
  const row0 = r.logits[0].subarray(0, V);
  const lse = Math.log(row0.reduce((s, z) => s + Math.exp(2 * z), 0));
  t.ok(Math.abs(hot[0] - (2 * row0[ids[0][1]] - lse)) < 1e-12, 'temperature 0.5 doubles the logits');
  t.throws(() => referenceLogProbs(m, ids, 0), /temperature/);
  t.throws(() => referenceForward(m, [[257]]), /outside the vocabulary/);
  // Each row is its own sequence from position 0: a prefix gives the same logits.
  const prefix = referenceForward(m, [ids[0].slice(0, 11)]);
  t.ok(maxAbs(prefix.logits[0], r.logits[0].subarray(0, 11 * V)) < 1e-12);
  // The bf16 emulation rounds the logits to bf16 and stays close; BF16 weights are unchanged by bf16-matrices.
  const bf = referenceForward(m, ids, { precision: 'transformers-bf16' });
  t.ok(bf.logits[0].every((v) => roundBf16(v) === v));
  t.ok(maxAbs(bf.logProbs[0], r.logProbs[0]) < 0.5 && maxAbs(bf.logProbs[0], r.logProbs[0]) > 1e-4);
  t.same(referenceForward(m, ids, { precision: 'bf16-matrices' }).logits, r.logits, 'a BF16 file is already bf16');
});

t.test('real tokenizers are copied with the vocabulary and eos ids of their models', async (t) => {
  const q = writeTinyCheckpoint(tmp(t), {
    family: 'qwen3',
    layers: 1,
    hidden: 8,
    heads: 2,
    kvHeads: 1,
    headDim: 4,
    intermediate: 8,
    tokenizer: 'qwen3',
  });
  t.equal(q.config.vocab_size, 151936);
  t.same(q.generationConfig.eos_token_id, [
    specialTokenId('qwen3', '<|im_end|>'),
    specialTokenId('qwen3', '<|endoftext|>'),
  ]);
  t.equal(specialTokenId('qwen3', '<|im_end|>'), 151645);
  t.ok(existsSync(join(q.dir, 'tokenizer.json')) && existsSync(join(q.dir, 'tokenizer_config.json')));
  const g = writeTinyCheckpoint(tmp(t), {
    family: 'gpt_oss',
    layers: 1,
    hidden: 8,
    heads: 2,
    kvHeads: 1,
    headDim: 4,
    intermediate: 8,
    experts: 2,
    topK: 1,
    mxfp4: false,
    tie: true,
    layerTypes: ['sliding_attention'],
    tokenizer: 'gptoss',
  });
  t.equal(g.config.vocab_size, 201088);
  t.same(g.generationConfig.eos_token_id, [200002, 199999, 200012]);
  const tc = JSON.parse(readFileSync(join(g.dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  t.notOk('chat_template' in tc, "gpt-oss's tokenizer_config has no chat template");
  t.throws(() => writeTinyCheckpoint(tmp(t), { family: 'qwen3', tokenizer: 'qwen3', vocab: 1000 }), /smaller than/);
});
