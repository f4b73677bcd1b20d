// Issue 26 item 5: LoRA on gpt-oss's experts in PEFT's format (target_parameters). The adapter
// files are written here from what huggingface/peft's source says (lib/model/lora/peft-experts.ts
// has the facts): target_parameters ['mlp.experts.gate_up_proj', 'mlp.experts.down_proj'],
// lora_A.weight [r·E, in] (row e·r + k), lora_B.weight [out, r·E] (column k·E + e), down_proj's at
// base_model.model.model.layers.<i>.mlp.experts.lora_{A,B}.weight and gate_up_proj's one wrapper
// deeper at ….mlp.experts.base_layer.lora_{A,B}.weight; each expert's delta is
// scale · Σ_k A[e·r + k, i] B[o, k·E + e] added to the parameter [E, in, out] (gate_up's columns
// interleaved gate, up as transformers stores them). Checked: log-probs of a loaded adapter equal
// the float64 reference forward run on those parameters + delta; saveAdapter writes the same keys,
// shapes and values and loads back to the same log-probs; fresh expert adapters start at the base,
// train (a few SFT steps lower the loss) and save → load round trip; the packed MXFP4 base equals
// its bfloat16 dequantization bit for bit with expert adapters; bad input is refused naming the
// field or tensor.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { PeftAdapterError, cudaRefusal, loadPretrained, packSequences } from '../../../lib/model/index.js';
import { AdapterReference } from '../../../lib/trainer/hf-run.js';
import { maxRelativeError } from './fixtures/logprob-cases.js';
import { loadReferenceModel, referenceForward } from './fixtures/reference-forward.js';
import {
  decodeSafetensorsBytes,
  decodeValues,
  encodeSafetensorsBytes,
  encodeValues,
  type RawTensor,
} from './fixtures/safetensors-io.js';
import { uniformValues } from './fixtures/seeded.js';
import { type TinySpec, writeTinyCheckpoint } from './fixtures/tiny-checkpoint.js';

function tmp(t: Test, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function folder(t: Test, spec: TinySpec): string {
  const dir = tmp(t, 'hf-experts-lora-');
  writeTinyCheckpoint(dir, spec);
  return dir;
}

type Param = 'gate_up_proj' | 'down_proj';

/** PEFT's key of an expert parameter's matrix (the gate_up_proj wrapper sits inside down_proj's when both are targeted). */
const key = (layer: number, p: Param, m: 'A' | 'B', both: boolean): string =>
  `base_model.model.model.layers.${layer}.mlp.experts.${p === 'gate_up_proj' && both ? 'base_layer.' : ''}lora_${m}.weight`;

/** transformers' shape of gpt-oss's expert parameter, [E, in, out]. */
function paramShape(cfg: Record<string, number>, p: Param): [number, number, number] {
  const E = cfg.num_local_experts;
  const H = cfg.hidden_size;
  const I = cfg.intermediate_size;
  return p === 'gate_up_proj' ? [E, H, 2 * I] : [E, I, H];
}

/** Writes a PEFT adapter folder with random expert adapters (and q_proj's, optionally); returns the tensors in float64. */
function writeAdapter(
  dir: string,
  base: string,
  lora: { r: number; alpha: number; params: Param[]; qProj?: boolean },
  seed = 7,
): Map<string, { shape: number[]; values: Float64Array }> {
  const cfg = JSON.parse(readFileSync(join(base, 'config.json'), 'utf8')) as Record<string, number>;
  const both = lora.params.length === 2;
  const tensors = new Map<string, { shape: number[]; values: Float64Array }>();
  const raw: [string, RawTensor][] = [];
  const add = (k: string, shape: number[]): void => {
    const values = uniformValues(shape[0] * shape[1], seed, k, -0.3, 0.3);
    tensors.set(k, { shape, values });
    raw.push([k, { dtype: 'F32', shape, bytes: encodeValues(values, 'F32') }]);
  };
  for (let layer = 0; layer < cfg.num_hidden_layers; layer++) {
    for (const p of lora.params) {
      const [E, nIn, out] = paramShape(cfg, p);
      add(key(layer, p, 'A', both), [lora.r * E, nIn]);
      add(key(layer, p, 'B', both), [out, lora.r * E]);
    }
    if (lora.qProj) {
      const q = cfg.num_attention_heads * cfg.head_dim;
      add(`base_model.model.model.layers.${layer}.self_attn.q_proj.lora_A.weight`, [lora.r, cfg.hidden_size]);
      add(`base_model.model.model.layers.${layer}.self_attn.q_proj.lora_B.weight`, [q, lora.r]);
    }
  }
  writeFileSync(join(dir, 'adapter_model.safetensors'), encodeSafetensorsBytes(raw));
  const config = {
    peft_type: 'LORA',
    r: lora.r,
    lora_alpha: lora.alpha,
    target_modules: lora.qProj ? ['q_proj'] : [],
    target_parameters: lora.params.map((p) => `mlp.experts.${p}`),
    lora_dropout: 0,
    bias: 'none',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: 'tiny-gpt-oss',
  };
  writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify(config));
  return tensors;
}

/** PEFT's delta on an expert parameter [E, in, out]: scale Σ_k A[e r + k, i] B[o, k E + e], added to the reference's weights. */
function addPeftDelta(
  W: { shape: number[]; values: Float64Array },
  A: Float64Array,
  B: Float64Array,
  r: number,
  scale: number,
): void {
  const [E, nIn, out] = W.shape;
  for (let e = 0; e < E; e++) {
    for (let i = 0; i < nIn; i++) {
      for (let o = 0; o < out; o++) {
        let s = 0;
        for (let k = 0; k < r; k++) s += A[(e * r + k) * nIn + i] * B[o * r * E + k * E + e];
        W.values[(e * nIn + i) * out + o] += scale * s;
      }
    }
  }
}

const SEQS = [
  [5, 17, 200, 3, 99, 42, 7, 150, 8, 61, 12, 77],
  [250, 1, 2, 3, 4, 5, 6, 31],
];
// hidden 64, intermediate 40: gate_up [E, 64, 80], down [E, 40, 64] (every dimension tells in from out)
const SPEC: TinySpec = {
  family: 'gpt_oss',
  layers: 2,
  hidden: 64,
  intermediate: 40,
  mxfp4: false,
  dtype: 'F32',
  seed: 21,
};

t.test("a PEFT adapter on gpt-oss's experts: log-probs are base + PEFT's delta; saveAdapter round trip", async (t) => {
  const base = folder(t, SPEC);
  const lora = { r: 3, alpha: 5, params: ['gate_up_proj', 'down_proj'] as Param[], qProj: true };
  const adapterDir = tmp(t, 'peft-experts-');
  const written = writeAdapter(adapterDir, base, lora);

  const ref = loadReferenceModel(base);
  const scale = lora.alpha / lora.r;
  for (let layer = 0; layer < 2; layer++) {
    for (const p of lora.params) {
      const W = ref.weights.get(`model.layers.${layer}.mlp.experts.${p}`)!;
      addPeftDelta(
        W,
        written.get(key(layer, p, 'A', true))!.values,
        written.get(key(layer, p, 'B', true))!.values,
        lora.r,
        scale,
      );
    }
    const Wq = ref.weights.get(`model.layers.${layer}.self_attn.q_proj.weight`)!;
    const A = written.get(`base_model.model.model.layers.${layer}.self_attn.q_proj.lora_A.weight`)!.values;
    const B = written.get(`base_model.model.model.layers.${layer}.self_attn.q_proj.lora_B.weight`)!.values;
    const [out, nIn] = Wq.shape;
    for (let o = 0; o < out; o++)
      for (let i = 0; i < nIn; i++)
        for (let k = 0; k < lora.r; k++) Wq.values[o * nIn + i] += scale * B[o * lora.r + k] * A[k * nIn + i];
  }
  const expected = referenceForward(ref, SEQS).logProbs;
  const plain = referenceForward(base, SEQS).logProbs;

  const m = await loadPretrained(base, { adapter: adapterDir });
  t.teardown(() => m.dispose());
  t.same(
    m.lora,
    { rank: 3, alpha: 5, targets: ['q_proj', 'experts.gate_up_proj', 'experts.down_proj'], rslora: false },
    'the adapter settings',
  );
  const info = m.params.info();
  t.same(info.find((p) => p.name === 'layers.0.mlp.experts.gate_up.lora_a')?.shape, [4, 3, 64], 'our A: [E, r, in]');
  t.same(info.find((p) => p.name === 'layers.0.mlp.experts.gate_up.lora_b')?.shape, [4, 80, 3], 'our B: [E, out, r]');
  t.ok(
    info.filter((p) => p.trainable).every((p) => /\.lora_[ab]$/.test(p.name) && p.dtype === 'float32'),
    'only the adapters train, in float32',
  );
  const got = await m.logProbs(SEQS);
  const err = maxRelativeError(got, expected);
  t.ok(
    err <= 1e-4,
    `log-probs equal the float64 reference of base + PEFT's delta (max relative error ${err.toExponential(2)})`,
  );
  t.ok(maxRelativeError(got, plain) > 100 * err, 'and differ from the base alone');

  // saveAdapter: PEFT's keys, shapes and values; adapter_config names the parameters
  const savedDir = tmp(t, 'saved-');
  await m.saveAdapter(savedDir);
  const saved = decodeSafetensorsBytes(readFileSync(join(savedDir, 'adapter_model.safetensors')));
  t.same([...saved.tensors.keys()].sort(), [...written.keys()].sort(), "PEFT's keys");
  for (const [k, w] of written) {
    const s = saved.tensors.get(k);
    t.same(s?.shape, w.shape, `${k} shape`);
    if (s && !decodeValues(s.bytes, s.dtype).every((v, i) => v === Math.fround(w.values[i])))
      t.fail(`${k} values differ`);
  }
  const cfg = JSON.parse(readFileSync(join(savedDir, 'adapter_config.json'), 'utf8')) as Record<string, unknown>;
  t.match(cfg, {
    peft_type: 'LORA',
    r: 3,
    lora_alpha: 5,
    target_modules: ['q_proj'],
    target_parameters: ['mlp.experts.gate_up_proj', 'mlp.experts.down_proj'],
    lora_dropout: 0,
    use_dora: false,
  });
  const again = await loadPretrained(base, { adapter: savedDir });
  t.teardown(() => again.dispose());
  t.same(await again.logProbs(SEQS), got, 'the saved adapter loads to the same log-probs');

  // merge (a float32 base): W[e] += scale · B_e A_e expert by expert; the base's layout, log-probs of base + adapter
  m.mergeAdapter();
  t.equal(m.lora, null, 'no adapters after the merge');
  t.ok(
    m.params.info().every((p) => !/lora/.test(p.name)),
    "the store holds the base's parameters only",
  );
  const merged = await m.logProbs(SEQS);
  const mergeErr = maxRelativeError(merged, got);
  t.ok(mergeErr <= 1e-5, `merged log-probs equal base + adapter (max relative error ${mergeErr.toExponential(2)})`);
  t.ok(maxRelativeError(merged, expected) <= 1e-4, 'and the float64 reference');
});

t.test('one expert parameter alone: its tensors sit at mlp.experts.lora_{A,B}', async (t) => {
  const base = folder(t, SPEC);
  for (const p of ['gate_up_proj', 'down_proj'] as Param[]) {
    const lora = { r: 2, alpha: 4, params: [p] };
    const dir = tmp(t, `peft-${p}-`);
    const written = writeAdapter(dir, base, lora, 9);
    t.ok(
      [...written.keys()].every((k) => !k.includes('base_layer')),
      `${p}: no base_layer in the keys`,
    );
    const ref = loadReferenceModel(base);
    for (let layer = 0; layer < 2; layer++) {
      addPeftDelta(
        ref.weights.get(`model.layers.${layer}.mlp.experts.${p}`)!,
        written.get(key(layer, p, 'A', false))!.values,
        written.get(key(layer, p, 'B', false))!.values,
        2,
        2,
      );
    }
    const m = await loadPretrained(base, { adapter: dir });
    t.teardown(() => m.dispose());
    t.same(m.lora?.targets, [`experts.${p}`]);
    const err = maxRelativeError(await m.logProbs(SEQS), referenceForward(ref, SEQS).logProbs);
    t.ok(err <= 1e-4, `${p}: log-probs equal the reference (max relative error ${err.toExponential(2)})`);
    const out = tmp(t, 'saved-one-');
    await m.saveAdapter(out);
    t.same(
      [...decodeSafetensorsBytes(readFileSync(join(out, 'adapter_model.safetensors'))).tensors.keys()].sort(),
      [...written.keys()].sort(),
      `${p}: saved under the same keys`,
    );
  }
});

t.test(
  'fresh expert adapters: the base at first, a few SFT steps lower the loss, save → load gives the same log-probs',
  async (t) => {
    const base = folder(t, SPEC);
    const plain = await loadPretrained(base);
    t.teardown(() => plain.dispose());
    const m = await loadPretrained(base, {
      lora: { rank: 4, alpha: 8, targets: ['experts.gate_up_proj', 'experts.down_proj'] },
      seed: 3,
    });
    t.teardown(() => m.dispose());
    t.same(await m.logProbs(SEQS), await plain.logProbs(SEQS), 'B = 0: the log-probs of the base');
    const batch = packSequences(SEQS.map((tokens) => ({ tokens })));
    const scored = batch.targets.filter((x) => x >= 0).length;
    const loss = (lp: number[][] | Float32Array[]): number =>
      -lp.reduce((s, row) => s + Array.from(row).reduce((a, b) => a + b, 0), 0) / scored;
    const first = loss(await m.logProbs(SEQS));
    for (let step = 0; step < 8; step++) {
      const f = m.policy.model.forward(batch);
      f.backward({ dLogProbs: Float32Array.from(batch.targets, (x) => (x >= 0 ? -1 / scored : 0)) });
      m.params.adamwStep({ lr: 1e-2, weightDecay: 0 });
    }
    const after = await m.logProbs(SEQS);
    t.ok(loss(after) < first - 0.05, `the loss fell (${first.toFixed(4)} → ${loss(after).toFixed(4)})`);
    const dir = tmp(t, 'trained-');
    await m.saveAdapter(dir);
    const again = await loadPretrained(base, { adapter: dir });
    t.teardown(() => again.dispose());
    t.same(await again.logProbs(SEQS), after, 'saved and loaded: the same log-probs');

    // the trainer's KL reference reads the saved adapter back into our layout: after another step
    // of the policy, the reference still gives the saved adapter's log-probs
    const reference = await AdapterReference.load(m.policy, dir);
    const f = m.policy.model.forward(batch);
    f.backward({ dLogProbs: Float32Array.from(batch.targets, (x) => (x >= 0 ? -1 / scored : 0)) });
    m.params.adamwStep({ lr: 1e-2, weightDecay: 0 });
    const viaReference = await reference.logProbs(batch);
    const saved = await again.policy.logProbs(batch);
    t.same(
      Array.from(viaReference.logProbs),
      Array.from(saved.logProbs),
      "AdapterReference: the saved adapter, converted from PEFT's tensors",
    );
    t.notSame(
      Array.from((await m.policy.logProbs(batch)).logProbs),
      Array.from(saved.logProbs),
      'while the policy moved on',
    );
  },
);

t.test(
  'a packed MXFP4 base with expert adapters = its bfloat16 dequantization, bit for bit (log-probs and a training step)',
  async (t) => {
    const dir = folder(t, { family: 'gpt_oss', hidden: 64, intermediate: 64, layers: 2, seed: 11 });
    const lora = {
      rank: 4,
      alpha: 8,
      targets: ['q_proj', 'experts.gate_up_proj', 'experts.down_proj'] as (
        'q_proj' | 'experts.gate_up_proj' | 'experts.down_proj'
      )[],
    };
    const packed = await loadPretrained(dir, { lora, seed: 5 });
    const bf16 = await loadPretrained(dir, { lora, seed: 5, mxfp4: 'bf16' });
    t.teardown(() => {
      packed.dispose();
      bf16.dispose();
    });
    t.equal(packed.params.info().find((p) => p.name === 'layers.0.mlp.experts.gate_up.weight')?.dtype, 'mxfp4');
    // non-zero B so the adapters take part
    for (const m of [packed, bf16]) {
      for (const p of m.params.info().filter((q) => /experts\.(gate_up|down)\.lora_b$/.test(q.name)))
        m.params.write(p.name, Float32Array.from(uniformValues(p.numel, 2, p.name, -0.2, 0.2)));
    }
    const u32 = (a: ArrayLike<number>): number[] => Array.from(new Uint32Array(Float32Array.from(a).buffer));
    const a = await packed.logProbs(SEQS);
    const b = await bf16.logProbs(SEQS);
    a.forEach((row, i) => t.same(u32(row), u32(b[i]), `sequence ${i}: the same log-probs`));
    const batch = packSequences(SEQS.map((tokens) => ({ tokens })));
    for (const m of [packed, bf16]) {
      const f = m.policy.model.forward(batch);
      f.backward({ dLogProbs: Float32Array.from(batch.targets, (x) => (x >= 0 ? -0.1 : 0)) });
      m.params.adamwStep({ lr: 1e-2 });
    }
    for (const p of packed.params.info().filter((q) => q.trainable))
      t.same(u32(packed.params.read(p.name)), u32(bf16.params.read(p.name)), `${p.name} after one step`);

    // merging into MXFP4 experts is refused before anything changes; the bf16 dequantized base merges
    const before = await packed.logProbs(SEQS);
    t.throws(
      () => packed.mergeAdapter(),
      /'layers\.0\.mlp\.experts\.gate_up\.weight' is MXFP4: merging would need re-quantizing/,
      'merge refuses an MXFP4 base, naming why',
    );
    t.ok(packed.lora !== null, 'the adapters are still there');
    t.same(await packed.logProbs(SEQS), before, 'and the model is unchanged');
    const unmerged = await bf16.logProbs(SEQS);
    bf16.mergeAdapter();
    const mergedErr = maxRelativeError(await bf16.logProbs(SEQS), unmerged);
    t.ok(
      mergedErr <= 2e-2,
      `a bfloat16 base merges (the sums rounded to bfloat16: max relative error ${mergedErr.toExponential(2)})`,
    );
  },
);

t.test('bad input: errors name the field or tensor', async (t) => {
  const base = folder(t, SPEC);
  const dense = folder(t, { family: 'qwen3', dtype: 'F32' });
  await t.rejects(
    loadPretrained(dense, { lora: { rank: 2, alpha: 4, targets: ['experts.down_proj'] } }),
    /options\.lora\.targets\[0\] 'experts\.down_proj' adapts the experts of a mixture of experts, but this model's MLP is dense/,
  );
  await t.rejects(
    loadPretrained(base, { lora: { rank: 2, alpha: 4, targets: ['mlp.experts' as 'q_proj'] } }),
    /options\.lora\.targets\[0\] "mlp\.experts" is not a LoRA target module \(the experts are named 'experts\.gate_up_proj' and 'experts\.down_proj'\)/,
  );
  const m = await loadPretrained(base, { lora: { rank: 2, alpha: 4, targets: 'all-linear' } });
  t.teardown(() => m.dispose());
  t.same(
    m.lora?.targets,
    ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
    "'all-linear' does not include the experts (as in PEFT)",
  );
  const withExperts = {
    ...m.policy.model.config,
    lora: { rank: 2, alpha: 4, targets: ['experts.gate_up_proj' as const], rslora: false },
  };
  t.equal(
    cudaRefusal(withExperts, 'float32'),
    null,
    'the CUDA transformer runs expert adapters too (test/model/lora-cuda.test.ts)',
  );

  // an adapter whose expert tensors have the wrong shape (the in/out-swapped layout)
  const bad = tmp(t, 'peft-bad-');
  writeAdapter(bad, base, { r: 2, alpha: 4, params: ['gate_up_proj', 'down_proj'] });
  const file = decodeSafetensorsBytes(readFileSync(join(bad, 'adapter_model.safetensors')));
  const k = key(0, 'gate_up_proj', 'A', true);
  const swapped: [string, RawTensor][] = [...file.tensors].map(([name, v]) =>
    name === k
      ? [name, { ...v, shape: [8, 80], bytes: encodeValues(new Float64Array(8 * 80).fill(0.1), 'F32') }]
      : [name, v],
  );
  writeFileSync(join(bad, 'adapter_model.safetensors'), encodeSafetensorsBytes(swapped));
  const e = await loadPretrained(base, { adapter: bad }).then(
    () => null,
    (x: unknown) => x,
  );
  t.ok(e instanceof PeftAdapterError, 'a PeftAdapterError');
  t.match(
    String(e),
    /base_model\.model\.model\.layers\.0\.mlp\.experts\.base_layer\.lora_A\.weight: has shape \[8, 80\], the model's experts\.gate_up_proj needs \[8, 64\]/,
  );

  // target_parameters naming something else, or missing while expert tensors are there
  const other = tmp(t, 'peft-other-');
  writeAdapter(other, base, { r: 2, alpha: 4, params: ['down_proj'] });
  const cfgPath = join(other, 'adapter_config.json');
  const cfg = JSON.parse(readFileSync(cfgPath, 'utf8')) as Record<string, unknown>;
  writeFileSync(cfgPath, JSON.stringify({ ...cfg, target_parameters: ['mlp.router.weight'] }));
  await t.rejects(
    loadPretrained(base, { adapter: other }),
    /adapter_config\.json target_parameters\[0\]: "mlp\.router\.weight" is not a parameter we adapt/,
  );
  writeFileSync(cfgPath, JSON.stringify({ ...cfg, target_parameters: null }));
  await t.rejects(
    loadPretrained(base, { adapter: other }),
    /mlp\.experts\.lora_A\.weight: adapts the experts, but adapter_config\.json target_parameters \(null\) lists none/,
  );
  writeFileSync(
    cfgPath,
    JSON.stringify({ ...cfg, target_parameters: ['mlp.experts.down_proj', 'mlp.experts.gate_up_proj'] }),
  );
  await t.rejects(loadPretrained(base, { adapter: other }), /holds no tensors of mlp\.experts\.gate_up_proj/);

  // an expert adapter for a dense model
  const denseAdapter = tmp(t, 'peft-dense-');
  writeAdapter(denseAdapter, base, { r: 2, alpha: 4, params: ['down_proj'] });
  await t.rejects(
    loadPretrained(dense, { adapter: denseAdapter }),
    /experts\.down_proj, but the model's MLP is dense|has adapters for 2 layers/,
  );
});
