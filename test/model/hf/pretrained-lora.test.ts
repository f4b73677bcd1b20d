// Issue 19, "LoRA" API: loadPretrained(dir, { adapter }) applies a PEFT adapter (its log-probs
// are base + adapter: checked against the float64 reference forward run on W + scale·B A computed
// here), { lora } adds fresh adapters (B = 0: the base's log-probs, A from the seed), saveAdapter
// writes the adapter as PEFT files that load back to the same model, mergeAdapter then save gives
// a full folder whose log-probs are those of base + adapter, save refuses unmerged adapters, and
// bad options are refused naming the field.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { PeftAdapterError, loadPretrained } from '../../../lib/model/index.js';
import { DeviceUnavailableError } from '../../../lib/native/errors.js';
import { memory } from '../../../lib/native/memory.js';
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
  const dir = tmp(t, 'hf-lora-');
  writeTinyCheckpoint(dir, spec);
  return dir;
}

type Target = 'q_proj' | 'k_proj' | 'v_proj' | 'o_proj' | 'gate_proj' | 'up_proj' | 'down_proj';
const ATTN = new Set<Target>(['q_proj', 'k_proj', 'v_proj', 'o_proj']);

/** In and out sizes of a projection of a Qwen3-shaped config.json. */
function shapeOf(cfg: Record<string, number>, target: Target): { in: number; out: number } {
  const q = cfg.num_attention_heads * cfg.head_dim;
  const kv = cfg.num_key_value_heads * cfg.head_dim;
  const D = cfg.hidden_size;
  const F = cfg.intermediate_size;
  return {
    q_proj: { in: D, out: q },
    k_proj: { in: D, out: kv },
    v_proj: { in: D, out: kv },
    o_proj: { in: q, out: D },
    gate_proj: { in: D, out: F },
    up_proj: { in: D, out: F },
    down_proj: { in: F, out: D },
  }[target];
}

const key = (layer: number, target: Target, m: 'A' | 'B'): string =>
  `base_model.model.model.layers.${layer}.${ATTN.has(target) ? 'self_attn' : 'mlp'}.${target}.lora_${m}.weight`;

/** Writes a PEFT adapter folder by hand (random A and B, F32) for the base folder `base`; returns its tensors (float64). */
function writeAdapter(
  dir: string,
  base: string,
  lora: { r: number; alpha: number; targets: Target[] },
  seed = 3,
): Map<string, { shape: number[]; values: Float64Array }> {
  const cfg = JSON.parse(readFileSync(join(base, 'config.json'), 'utf8')) as Record<string, number>;
  const tensors = new Map<string, { shape: number[]; values: Float64Array }>();
  const raw: [string, RawTensor][] = [];
  for (let layer = 0; layer < cfg.num_hidden_layers; layer++) {
    for (const target of lora.targets) {
      const s = shapeOf(cfg, target);
      for (const [m, shape] of [
        ['A', [lora.r, s.in]],
        ['B', [s.out, lora.r]],
      ] as const) {
        const k = key(layer, target, m);
        const values = uniformValues(shape[0] * shape[1], seed, k, -0.3, 0.3);
        tensors.set(k, { shape: [...shape], values });
        raw.push([k, { dtype: 'F32', shape: [...shape], bytes: encodeValues(values, 'F32') }]);
      }
    }
  }
  writeFileSync(join(dir, 'adapter_model.safetensors'), encodeSafetensorsBytes(raw));
  writeFileSync(
    join(dir, 'adapter_config.json'),
    JSON.stringify({
      peft_type: 'LORA',
      r: lora.r,
      lora_alpha: lora.alpha,
      target_modules: lora.targets,
      bias: 'none',
      task_type: 'CAUSAL_LM',
      base_model_name_or_path: 'tiny',
    }),
  );
  return tensors;
}

const SEQS = [
  [5, 17, 200, 3, 99, 42, 7, 150, 8, 61],
  [250, 1, 2, 3, 4, 5, 6],
];

t.test('a PEFT adapter: log-probs are base + adapter; saveAdapter round trip; merge then save', async (t) => {
  const base = folder(t, { family: 'qwen3', dtype: 'F32' });
  const targets: Target[] = ['q_proj', 'v_proj', 'o_proj', 'up_proj', 'down_proj'];
  const lora = { r: 4, alpha: 6, targets };
  const adapterDir = tmp(t, 'peft-');
  const written = writeAdapter(adapterDir, base, lora);

  // the reference: the base's weights plus scale · B A, in float64
  const ref = loadReferenceModel(base);
  const scale = lora.alpha / lora.r;
  const layers = (ref.hfConfig.num_hidden_layers as number) ?? 0;
  for (let layer = 0; layer < layers; layer++) {
    for (const target of targets) {
      const W = ref.weights.get(`model.layers.${layer}.${ATTN.has(target) ? 'self_attn' : 'mlp'}.${target}.weight`);
      const A = written.get(key(layer, target, 'A'));
      const B = written.get(key(layer, target, 'B'));
      if (!W || !A || !B) throw new Error(`missing ${target} of layer ${layer}`);
      const [out, inDim] = W.shape;
      for (let o = 0; o < out; o++) {
        for (let i = 0; i < inDim; i++) {
          let s = 0;
          for (let k = 0; k < lora.r; k++) s += B.values[o * lora.r + k] * A.values[k * inDim + i];
          W.values[o * inDim + i] += scale * s;
        }
      }
    }
  }
  const expected = referenceForward(ref, SEQS).logProbs;
  const plain = referenceForward(base, SEQS).logProbs;

  const m = await loadPretrained(base, { adapter: adapterDir });
  t.teardown(() => m.dispose());
  t.same(m.lora, { rank: 4, alpha: 6, targets, rslora: false }, 'the adapter settings');
  const trainable = m.params.info().filter((p) => p.trainable);
  t.ok(
    trainable.length === layers * targets.length * 2 &&
      trainable.every((p) => /\.lora_[ab]$/.test(p.name) && p.dtype === 'float32'),
    'only the adapters train, in float32',
  );
  const got = await m.logProbs(SEQS);
  const err = maxRelativeError(got, expected);
  t.ok(
    err <= 1e-4,
    `log-probs equal the float64 reference of base + adapter (max relative error ${err.toExponential(2)})`,
  );
  t.ok(maxRelativeError(got, plain) > 100 * err, 'and differ from the base alone');

  // save → the same PEFT files (keys, shapes, values), loadable again
  await t.rejects(
    m.save(tmp(t, 'full-')),
    /unmerged LoRA adapters .*mergeAdapter\(\) .*saveAdapter\(dir\)/,
    'save refuses while adapters are unmerged, naming the two ways out',
  );
  const savedDir = tmp(t, 'saved-');
  const r = await m.saveAdapter(savedDir);
  t.same(r.files.sort(), ['adapter_config.json', 'adapter_model.safetensors']);
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
    r: 4,
    lora_alpha: 6,
    target_modules: targets,
    base_model_name_or_path: base,
    task_type: 'CAUSAL_LM',
  });
  const again = await loadPretrained(base, { adapter: savedDir });
  t.teardown(() => again.dispose());
  t.same(await again.logProbs(SEQS), got, 'the saved adapter loads to the same log-probs');

  // merge → the base's layout, log-probs of base + adapter; save → load gives the same
  const before = m.policy;
  m.mergeAdapter();
  t.equal(m.lora, null, 'no adapters after the merge');
  t.not(m.policy, before, 'a new policy over the merged model');
  t.ok(
    m.params.info().every((p) => !/lora/.test(p.name)),
    "the store holds the base's parameters only",
  );
  const merged = await m.logProbs(SEQS);
  const mergeErr = maxRelativeError(merged, got);
  t.ok(mergeErr <= 1e-5, `merged log-probs equal base + adapter (max relative error ${mergeErr.toExponential(2)})`);
  t.ok(maxRelativeError(merged, expected) <= 1e-4, 'and the float64 reference');
  t.throws(() => m.mergeAdapter(), /no LoRA adapters to merge/);
  await t.rejects(m.saveAdapter(tmp(t, 'none-')), /no LoRA adapters/);
  const fullDir = tmp(t, 'merged-');
  await m.save(fullDir);
  const reloaded = await loadPretrained(fullDir);
  t.teardown(() => reloaded.dispose());
  t.same(await reloaded.logProbs(SEQS), merged, 'the merged folder loads to the same log-probs');
  t.equal(reloaded.lora, null);
});

t.test('fresh adapters: the base log-probs, A drawn from the seed, only adapters train', async (t) => {
  const base = folder(t, { family: 'qwen3' }); // BF16 base
  const plain = await loadPretrained(base);
  t.teardown(() => plain.dispose());
  const lora = {
    rank: 8,
    alpha: 16,
    targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as Target[],
  };
  const a = await loadPretrained(base, { lora, seed: 1 });
  const b = await loadPretrained(base, { lora, seed: 1 });
  const c = await loadPretrained(base, { lora, seed: 2 });
  t.teardown(() => [a, b, c].forEach((m) => m.dispose()));
  t.same(await a.logProbs(SEQS), await plain.logProbs(SEQS), 'B = 0: the log-probs of the base');
  const name = 'layers.1.mlp.down.lora_a';
  t.same(a.params.read(name), b.params.read(name), 'the same seed, the same A');
  t.notSame(a.params.read(name), c.params.read(name), 'another seed, another A');
  t.ok(
    a.params.info().every((p) => p.trainable === /\.lora_[ab]$/.test(p.name)),
    'the base frozen, the adapters trainable',
  );
  t.ok(
    a.params
      .info()
      .filter((p) => p.decay && !/lora/.test(p.name))
      .every((p) => p.dtype === 'bfloat16'),
    'the base stays bfloat16',
  );
});

t.test('bad LoRA options are refused naming the field, leaving nothing allocated', async (t) => {
  const base = folder(t, { family: 'qwen3', dtype: 'F32' });
  const before = memory.currentBytes();
  await t.rejects(
    loadPretrained(base, { lora: { rank: 0, alpha: 8, targets: ['q_proj'] } }),
    /options\.lora\.rank must be an integer in \[1, 65536\], got 0/,
  );
  await t.rejects(loadPretrained(base, { lora: { rank: -2, alpha: 8, targets: ['q_proj'] } }), /options\.lora\.rank/);
  await t.rejects(
    loadPretrained(base, { lora: { rank: 4, alpha: 8, targets: ['q_proj', 'embed_tokens' as Target] } }),
    /options\.lora\.targets\[1\] "embed_tokens" is not a LoRA target module/,
  );
  await t.rejects(
    loadPretrained(base, { lora: { rank: 4, alpha: 8, targets: ['qproj' as Target] } }),
    /options\.lora\.targets\[0\] "qproj" is not a LoRA target module; the targets are q_proj, k_proj/,
  );
  await t.rejects(
    loadPretrained(base, { lora: { rank: 4, alpha: 8, targets: [] } }),
    /options\.lora\.targets must be a non-empty array/,
  );
  const adapterDir = tmp(t, 'peft-');
  writeAdapter(adapterDir, base, { r: 2, alpha: 4, targets: ['q_proj'] });
  await t.rejects(
    loadPretrained(base, { adapter: adapterDir, lora: { rank: 4, alpha: 8, targets: ['q_proj'] } }),
    /options\.adapter and options\.lora: give one/,
  );
  await t.rejects(
    loadPretrained(base, { lora: { rank: 4, alpha: 8, targets: ['q_proj'] }, trainable: true, dtype: 'float32' }),
    /options\.trainable: full fine-tuning and LoRA \(options\.lora\) exclude each other/,
  );
  await t.rejects(
    loadPretrained(base, { lora: { rank: 4, alpha: 8, targets: ['q_proj'] }, device: 'cuda' }),
    DeviceUnavailableError,
  );
  await t.rejects(loadPretrained(base, { adapter: join(base, 'nowhere') }), /adapter_config\.json: not found/);

  // adapters made for other base models: a wider model, a deeper one
  const wider = folder(t, { family: 'qwen3', hidden: 64, dtype: 'F32' });
  const wideAdapter = tmp(t, 'peft-wide-');
  writeAdapter(wideAdapter, wider, { r: 2, alpha: 4, targets: ['q_proj', 'down_proj'] });
  const e1 = await loadPretrained(base, { adapter: wideAdapter }).then(
    () => null,
    (e: unknown) => e,
  );
  t.ok(e1 instanceof PeftAdapterError, 'a PeftAdapterError');
  t.match(
    String(e1),
    /adapter_model\.safetensors base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_A\.weight: has shape \[2, 64\], the model's q_proj needs \[2, 48\].*made for another base model/,
  );
  const deeper = folder(t, { family: 'qwen3', layers: 3, dtype: 'F32' });
  const deepAdapter = tmp(t, 'peft-deep-');
  writeAdapter(deepAdapter, deeper, { r: 2, alpha: 4, targets: ['v_proj'] });
  await t.rejects(
    loadPretrained(base, { adapter: deepAdapter }),
    /has adapters for 3 layers, the model has 2: the adapter was made for another base model/,
  );
  t.ok(memory.currentBytes() <= before, 'nothing allocated by the failed loads');

  // a mixture of experts: the MLP is no target, the attention is
  const oss = folder(t, { family: 'gpt_oss', layers: 2 });
  await t.rejects(
    loadPretrained(oss, { lora: { rank: 4, alpha: 8, targets: ['q_proj', 'gate_proj'] } }),
    /options\.lora\.targets\[1\] 'gate_proj' is an MLP projection, but the MLP is a mixture of experts/,
  );
  const m = await loadPretrained(oss, {
    lora: { rank: 4, alpha: 8, targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] },
  });
  t.teardown(() => m.dispose());
  t.same(m.lora?.targets, ['q_proj', 'k_proj', 'v_proj', 'o_proj'], 'gpt-oss: adapters on the attention');
});

t.test(
  "lora targets 'all-linear' (PEFT's spelling, as the trainer takes it): every projection the model can adapt",
  async (t) => {
    const dense = await loadPretrained(folder(t, { family: 'qwen3', dtype: 'F32' }), {
      lora: { rank: 2, alpha: 4, targets: 'all-linear' },
    });
    t.teardown(() => dense.dispose());
    t.same(
      dense.lora?.targets,
      ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
      'a dense model: the attention and the MLP',
    );
    const moe = await loadPretrained(folder(t, { family: 'gpt_oss', layers: 2, mxfp4: false }), {
      lora: { rank: 2, alpha: 4, targets: 'all-linear' },
    });
    t.teardown(() => moe.dispose());
    t.same(moe.lora?.targets, ['q_proj', 'k_proj', 'v_proj', 'o_proj'], 'a mixture of experts: the attention only');
  },
);

t.test('save creates the missing parent folders of its destination', async (t) => {
  const base = folder(t, { family: 'qwen3', dtype: 'F32' });
  const m = await loadPretrained(base);
  t.teardown(() => m.dispose());
  const out = join(tmp(t, 'hf-save-'), 'runs', 'exported', 'model');
  await m.save(out);
  const again = await loadPretrained(out);
  t.teardown(() => again.dispose());
  t.equal(again.architecture, m.architecture, 'saved and loaded again');
});
