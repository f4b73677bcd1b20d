// PEFT's adapter format: what savePeftAdapter writes is named, shaped and typed as PEFT's
// `save_pretrained` writes a LoRA adapter of a *ForCausalLM (keys of get_peft_model_state_dict —
// `base_model.model.` + the module path + `.lora_A.weight` / `.lora_B.weight`, the adapter name
// dropped —, A [r, in], B [out, r], F32, metadata format pt; adapter_config.json with LoraConfig's
// fields, sorted), expectations written here from PEFT's code, not from our output; written and
// read back equal; a hand-made PEFT adapter (BF16 tensors, dotted target_modules, extra fields)
// applied gives the float64 reference's base + adapter; adapters for another base model and
// adapters on modules we do not support are refused naming the mismatch, leaving the model as it
// was.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import {
  ParamStore,
  Transformer,
  addLora,
  applyPeftAdapter,
  modelConfig,
  parameterLayout,
  readPeftAdapter,
  savePeftAdapter,
  type ModelConfig,
  type ModelConfigInput,
  type SafeTensor,
} from '../../lib/model/index.js';
import { peftAdapterKey } from '../../lib/model/lora/peft.js';
import { writeSafetensorsFile, readSafetensorsFile } from '../../lib/model/safetensors.js';
import { closeness, randn } from './fixtures/reference.js';
import { randomizeStore, readParams, refTransformer } from './fixtures/transformer-reference.js';

const dirs: string[] = [];
t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const fresh = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'lora-peft-'));
  dirs.push(d);
  return d;
};

const qwen3: ModelConfigInput = {
  layers: 2,
  width: 19,
  heads: 3,
  kvHeads: 1,
  headDim: 6,
  window: 0,
  vocab: 23,
  context: 64,
  ffn: 11,
  ropeTheta: 500,
  normEps: 1e-6,
  initStd: 0.1,
  swiglu: 'standard',
  qkNorm: true,
  sinks: false,
  tieEmbeddings: true,
};
const ALL = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;

/** A frozen float32 base of `c` with seeded random weights. */
function base(c: ModelConfigInput, seed: number): Transformer {
  const specs = parameterLayout(c).map((p) => ({ ...p, trainable: false }));
  const store = ParamStore.fromSpecs(specs, seed);
  const tmp = ParamStore.fromSpecs(parameterLayout(c), seed);
  randomizeStore(tmp, seed + 1, 0.4);
  for (const n of tmp.names()) store.write(n, tmp.read(n));
  tmp.dispose();
  return Transformer.fromStore(c, store);
}

const batch = {
  tokens: Int32Array.from([5, 3, 9, 1, 22, 7, 0, 14, 2]),
  targets: Int32Array.from([3, 9, 1, 22, 7, 0, 14, 2, -1]),
  positions: Int32Array.from([0, 1, 2, 3, 4, 5, 6, 7, 8]),
};
const free = (m: Transformer): void => {
  const s = m.store;
  m.dispose();
  s.dispose();
};

t.test(
  "savePeftAdapter writes PEFT's names, shapes, dtype and config; reading back gives the same adapter",
  async (t) => {
    const r = 4;
    let m = addLora(base(qwen3, 3), { rank: r, alpha: 8, targets: [...ALL] });
    let seed = 10;
    for (const p of m.store.info()) if (p.trainable) m.store.write(p.name, randn(p.numel, seed++, -0.3, 0.3));
    const dir = join(fresh(), 'adapter');
    const res = await savePeftAdapter(m, dir, { baseModelNameOrPath: 'Qwen/Qwen3-0.6B' });
    t.same(res.files, ['adapter_config.json', 'adapter_model.safetensors']);

    // Expectations from PEFT: a LoraModel wraps the *ForCausalLM as `model` inside the PeftModel's
    // `base_model`; each nn.Linear target gets lora_A (Linear(in, r): weight [r, in]) and lora_B
    // (Linear(r, out): weight [out, r]); get_peft_model_state_dict keeps the `lora_` keys and drops
    // the adapter name ('.default'). HF shapes: q_proj [heads·hd, D], k/v_proj [kv·hd, D],
    // o_proj [D, heads·hd], gate/up_proj [F, D], down_proj [D, F].
    const D = 19;
    const q = 3 * 6;
    const kv = 1 * 6;
    const F = 11;
    const hf: [string, number, number][] = [
      ['self_attn.q_proj', D, q],
      ['self_attn.k_proj', D, kv],
      ['self_attn.v_proj', D, kv],
      ['self_attn.o_proj', q, D],
      ['mlp.gate_proj', D, F],
      ['mlp.up_proj', D, F],
      ['mlp.down_proj', F, D],
    ];
    const expected = new Map<string, number[]>();
    for (let i = 0; i < 2; i++) {
      for (const [mod, inF, outF] of hf) {
        expected.set(`base_model.model.model.layers.${i}.${mod}.lora_A.weight`, [r, inF]);
        expected.set(`base_model.model.model.layers.${i}.${mod}.lora_B.weight`, [outF, r]);
      }
    }
    const file = readSafetensorsFile(join(dir, 'adapter_model.safetensors'));
    t.same(
      [...file.tensors.keys()].sort(),
      [...expected.keys()].sort(),
      "the keys PEFT's get_peft_model_state_dict gives",
    );
    for (const [key, shape] of expected) {
      const e = file.tensors.get(key)!;
      t.same([e.dtype, e.shape], ['F32', shape], `${key}: F32 ${JSON.stringify(shape)}`);
    }
    t.same(file.metadata, { format: 'pt' }, 'metadata as safetensors.torch.save_file writes it for PEFT');
    t.same(
      file.tensors.get('base_model.model.model.layers.1.mlp.up_proj.lora_A.weight')!.data,
      m.store.read('layers.1.mlp.up.lora_a'),
      'values: up_proj A is our layers.1.mlp.up.lora_a',
    );
    t.same(
      file.tensors.get('base_model.model.model.layers.0.self_attn.o_proj.lora_B.weight')!.data,
      m.store.read('layers.0.attn.o.lora_b'),
    );

    const json = JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8')) as Record<string, unknown>;
    t.same(Object.keys(json), [...Object.keys(json)].sort(), 'keys sorted (json.dumps(sort_keys=True))');
    t.match(json, {
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      r,
      lora_alpha: 8,
      use_rslora: false,
      use_dora: false,
      bias: 'none',
      fan_in_fan_out: false,
      modules_to_save: null,
      base_model_name_or_path: 'Qwen/Qwen3-0.6B',
      rank_pattern: {},
      alpha_pattern: {},
      layers_to_transform: null,
      inference_mode: true,
    });
    t.same([...(json.target_modules as string[])].sort(), [...ALL].sort());
    // every field is one of LoraConfig's / PeftConfig's (an older PEFT rejects unknown ones)
    const peftFields = [
      'alpha_pattern',
      'auto_mapping',
      'base_model_name_or_path',
      'bias',
      'fan_in_fan_out',
      'inference_mode',
      'init_lora_weights',
      'layers_pattern',
      'layers_to_transform',
      'lora_alpha',
      'lora_dropout',
      'modules_to_save',
      'peft_type',
      'r',
      'rank_pattern',
      'revision',
      'target_modules',
      'task_type',
      'use_dora',
      'use_rslora',
    ];
    t.same(
      Object.keys(json).filter((k) => !peftFields.includes(k)),
      [],
    );

    // read back: the same settings and tensors; applied to the same base: the same model
    const a = await readPeftAdapter(dir);
    t.same(a.lora, { rank: r, alpha: 8, targets: [...ALL], rslora: false });
    t.equal(a.layers, 2);
    t.equal(a.baseModelNameOrPath, 'Qwen/Qwen3-0.6B');
    for (const [key, tensor] of file.tensors) t.same(a.tensors.get(key)!.data, tensor.data, `${key} read back equal`);
    const before = m.logProbs(batch).logProbs;
    const other = await applyPeftAdapter(base(qwen3, 3), dir);
    t.same(other.logProbs(batch).logProbs, before, 'base + loaded adapter: the same log-probs, bit for bit');
    for (const p of m.store.info()) if (p.trainable) t.same(other.store.read(p.name), m.store.read(p.name));
    // saving the loaded one again writes the same files
    const dir2 = join(fresh(), 'again');
    await savePeftAdapter(other, dir2, { baseModelNameOrPath: 'Qwen/Qwen3-0.6B' });
    t.equal(
      readFileSync(join(dir2, 'adapter_model.safetensors')).compare(
        readFileSync(join(dir, 'adapter_model.safetensors')),
      ),
      0,
      'adapter_model.safetensors byte for byte',
    );
    t.equal(
      readFileSync(join(dir2, 'adapter_config.json'), 'utf8'),
      readFileSync(join(dir, 'adapter_config.json'), 'utf8'),
    );
    // a model that already has adapters of the same settings takes new values
    const reloaded = await applyPeftAdapter(m, dir2);
    t.same(reloaded.logProbs(batch).logProbs, before);
    free(other);
    m = reloaded;
    free(m);
  },
);

/** A PEFT adapter folder written by hand, as PEFT would write one: BF16 tensors, rsLoRA, extra fields. */
function handMadeAdapter(
  dir: string,
  c: ModelConfig,
  r: number,
  targets: readonly (typeof ALL)[number][],
  extra: Record<string, unknown> = {},
  tweak?: (m: Map<string, SafeTensor>) => void,
): Map<string, Float32Array> {
  const values = new Map<string, Float32Array>();
  const tensors = new Map<string, SafeTensor>();
  let seed = 50;
  const q = c.heads * c.headDim;
  const kv = c.kvHeads * c.headDim;
  const dims: Record<string, [number, number]> = {
    q_proj: [c.width, q],
    k_proj: [c.width, kv],
    v_proj: [c.width, kv],
    o_proj: [q, c.width],
    gate_proj: [c.width, c.ffn],
    up_proj: [c.width, c.ffn],
    down_proj: [c.ffn, c.width],
  };
  for (let i = 0; i < c.layers; i++) {
    for (const target of targets) {
      const [inF, outF] = dims[target];
      for (const [mat, shape] of [
        ['A', [r, inF]],
        ['B', [outF, r]],
      ] as const) {
        const f = randn(shape[0] * shape[1], seed++, -0.3, 0.3);
        const bits = new Uint16Array(f.length);
        const u = new Uint32Array(f.buffer);
        for (let k = 0; k < f.length; k++) bits[k] = u[k] >>> 16; // truncation: any bf16 pattern will do
        const widened = new Float32Array(new Uint32Array(Array.from(bits, (b) => b << 16)).buffer);
        const group = ['gate_proj', 'up_proj', 'down_proj'].includes(target) ? 'mlp' : 'self_attn';
        const key = `base_model.model.model.layers.${i}.${group}.${target}.lora_${mat}.weight`;
        tensors.set(key, { dtype: 'BF16', shape: [...shape], data: bits });
        values.set(key, widened);
      }
    }
  }
  tweak?.(tensors);
  writeSafetensorsFile(join(dir, 'adapter_model.safetensors'), tensors, { format: 'pt' });
  const config = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    r,
    lora_alpha: 6,
    lora_dropout: 0.05,
    use_rslora: true,
    target_modules: targets.map((m) => (['q_proj', 'k_proj', 'v_proj', 'o_proj'].includes(m) ? `self_attn.${m}` : m)),
    base_model_name_or_path: 'somewhere/base',
    bias: 'none',
    fan_in_fan_out: false,
    init_lora_weights: 'gaussian',
    peft_version: '0.17.0',
    exclude_modules: null,
    ...extra,
  };
  writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify(config));
  return values;
}

t.test("a PEFT-made adapter gives the float64 reference's base + adapter (BF16 tensors, rsLoRA)", async (t) => {
  const c = modelConfig(qwen3);
  const dir = fresh();
  const values = handMadeAdapter(dir, c, 3, ['q_proj', 'v_proj', 'up_proj', 'down_proj']);
  const m = await applyPeftAdapter(base(qwen3, 5), dir);
  t.same(m.config.lora, { rank: 3, alpha: 6, rslora: true, targets: ['q_proj', 'v_proj', 'up_proj', 'down_proj'] });
  const params = readParams(m.store);
  // the reference reads the adapters from the PEFT tensors themselves
  for (const key of values.keys()) {
    const match = /layers\.(\d+)\.(self_attn|mlp)\.(\w+)_proj\.lora_([AB])/.exec(key)!;
    const ours = `layers.${match[1]}.${match[2] === 'mlp' ? 'mlp' : 'attn'}.${match[3]}.lora_${match[4].toLowerCase()}`;
    params.set(ours, Float64Array.from(values.get(key)!));
  }
  const ref = refTransformer(m.config, params, batch);
  t.ok(
    closeness(m.logProbs(batch).logProbs, ref.logp, 1e-4, 1e-5) <= 1,
    'log-probs: base + scale (x Aᵀ) Bᵀ with scale = alpha / √r',
  );
  const noAdapter = base(qwen3, 5);
  t.ok(closeness(noAdapter.logProbs(batch).logProbs, ref.logp, 1e-4, 1e-5) > 1, 'and differ from the base alone');
  free(noAdapter);
  free(m);
});

t.test(
  'adapters for another base model, or on modules we do not adapt, are refused naming the mismatch; the model stays as it was',
  async (t) => {
    const c = modelConfig(qwen3);
    const model = base(qwen3, 7);
    const before = model.logProbs(batch).logProbs;
    const refuse = async (label: string, write: (dir: string) => void, message: RegExp): Promise<void> => {
      const dir = fresh();
      write(dir);
      await t.rejects(applyPeftAdapter(model, dir), { message }, label);
      t.notOk(model.disposed, `${label}: the model is not disposed`);
    };
    await refuse(
      'more layers',
      (d) => handMadeAdapter(d, modelConfig(qwen3, { layers: 3 }), 2, ['q_proj']),
      /adapter_model\.safetensors: has adapters for 3 layers, the model has 2: the adapter was made for another base model/,
    );
    await refuse(
      'another width',
      (d) => handMadeAdapter(d, modelConfig(qwen3, { width: 24 }), 2, ['q_proj']),
      /base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_A\.weight: has shape \[2, 24\], the model's q_proj needs \[2, 19\]/,
    );
    await refuse(
      'another ffn',
      (d) => handMadeAdapter(d, modelConfig(qwen3, { ffn: 12 }), 2, ['down_proj']),
      /mlp\.down_proj\.lora_A\.weight: has shape \[2, 12\], the model's down_proj needs \[2, 11\].*another base model/,
    );
    await refuse(
      'more kv heads',
      (d) => handMadeAdapter(d, modelConfig(qwen3, { kvHeads: 3 }), 2, ['k_proj']),
      /k_proj\.lora_B\.weight: has shape \[18, 2\], the model's k_proj needs \[6, 2\]/,
    );
    await refuse(
      'a LoRA on the embedding',
      (d) =>
        handMadeAdapter(d, c, 2, ['q_proj'], {}, (m) =>
          m.set('base_model.model.model.embed_tokens.lora_embedding_A', {
            dtype: 'F32',
            shape: [2, 23],
            data: new Float32Array(46),
          }),
        ),
      /base_model\.model\.model\.embed_tokens\.lora_embedding_A: adapts embed_tokens: LoRA on the embedding is not supported/,
    );
    await refuse(
      'a LoRA on the LM head',
      (d) =>
        handMadeAdapter(d, c, 2, ['q_proj'], {}, (m) =>
          m.set('base_model.model.lm_head.lora_A.weight', { dtype: 'F32', shape: [2, 19], data: new Float32Array(38) }),
        ),
      /lm_head\.lora_A\.weight: adapts lm_head: LoRA on the LM head is not supported/,
    );
    await refuse(
      'a LoRA on MoE experts',
      (d) =>
        handMadeAdapter(d, c, 2, ['q_proj'], {}, (m) =>
          m.set('base_model.model.model.layers.0.mlp.experts.gate_up_proj.lora_A.weight', {
            dtype: 'F32',
            shape: [2, 19],
            data: new Float32Array(38),
          }),
        ),
      /mlp\.experts\.gate_up_proj\.lora_A\.weight: adapts MoE experts in a way we do not read \(gpt-oss's mlp\.experts\.gate_up_proj \/ down_proj through target_parameters are read/,
    );
    await refuse(
      'target_modules names the embedding',
      (d) => handMadeAdapter(d, c, 2, ['q_proj'], { target_modules: ['q_proj', 'embed_tokens'] }),
      /adapter_config\.json target_modules\[1\]: "embed_tokens" is not a module we adapt \(LoRA on the embedding is not supported\)/,
    );
    await refuse(
      'target_modules names lm_head',
      (d) => handMadeAdapter(d, c, 2, ['q_proj'], { target_modules: ['lm_head', 'q_proj'] }),
      /target_modules\[0\]: "lm_head" is not a module we adapt \(LoRA on the LM head is not supported\)/,
    );
    await refuse(
      'a tensor of a module target_modules does not list',
      (d) => handMadeAdapter(d, c, 2, ['q_proj', 'v_proj'], { target_modules: ['q_proj'] }),
      /v_proj\.lora_A\.weight: adapts v_proj, which adapter_config\.json target_modules \(q_proj\) does not list/,
    );
    await refuse(
      'r = 0',
      (d) => handMadeAdapter(d, c, 2, ['q_proj'], { r: 0 }),
      /adapter_config\.json r: \(the rank\) must be an integer in \[1, 65536\], got 0/,
    );
    await refuse(
      'r differs from the tensors',
      (d) => handMadeAdapter(d, c, 2, ['q_proj'], { r: 4 }),
      /q_proj\.lora_A\.weight: has shape \[2, 19\]: its rank dimension is 2, adapter_config\.json r = 4/,
    );
    await refuse(
      'DoRA',
      (d) => handMadeAdapter(d, c, 2, ['q_proj'], { use_dora: true }),
      /adapter_config\.json use_dora: is true: DoRA adapters are not supported/,
    );
    await refuse(
      'bias all',
      (d) => handMadeAdapter(d, c, 2, ['q_proj'], { bias: 'all' }),
      /adapter_config\.json bias: is "all"/,
    );
    await refuse(
      'modules_to_save',
      (d) => handMadeAdapter(d, c, 2, ['q_proj'], { modules_to_save: ['lm_head'] }),
      /adapter_config\.json modules_to_save: is \["lm_head"\]/,
    );
    await refuse(
      'another PEFT type',
      (d) => handMadeAdapter(d, c, 2, ['q_proj'], { peft_type: 'IA3' }),
      /adapter_config\.json peft_type: must be "LORA", got "IA3"/,
    );
    await refuse(
      'a layer subset',
      (d) => handMadeAdapter(d, c, 2, ['q_proj'], { layers_to_transform: [0] }),
      /layers_to_transform: is set/,
    );
    await refuse(
      'a missing layer',
      (d) =>
        handMadeAdapter(d, c, 2, ['q_proj', 'v_proj'], {}, (m) =>
          m.delete('base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight'),
        ),
      /layers\.0\.self_attn\.v_proj\.lora_B\.weight: is missing/,
    );
    await refuse(
      'no adapter_config.json',
      () => undefined,
      /adapter_config\.json: not found in .* \(not a PEFT adapter folder\)/,
    );
    t.same(model.logProbs(batch).logProbs, before, 'the model is unchanged after every refusal');
    free(model);

    // MLP adapters on a mixture of experts (gpt-oss's targets are the attention projections)
    const moeConfig: ModelConfigInput = {
      ...qwen3,
      qkNorm: false,
      sinks: true,
      tieEmbeddings: false,
      experts: 3,
      expertsPerToken: 2,
      bias: true,
    };
    const moe = base(moeConfig, 9);
    const dir = fresh();
    handMadeAdapter(dir, modelConfig(moeConfig), 2, ['q_proj', 'gate_proj']);
    await t.rejects(applyPeftAdapter(moe, dir), {
      message:
        /mlp\.gate_proj\.lora_A\.weight: adapts gate_proj, but the model's MLP is a mixture of experts \(experts = 3\)/,
    });
    const okDir = fresh();
    handMadeAdapter(okDir, modelConfig(moeConfig), 2, ['q_proj', 'k_proj', 'v_proj', 'o_proj']);
    const withAdapter = await applyPeftAdapter(moe, okDir);
    t.same(
      withAdapter.config.lora?.targets,
      ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
      'gpt-oss-like: attention adapters apply',
    );
    free(withAdapter);
  },
);

t.test('peftAdapterKey', async (t) => {
  t.equal(peftAdapterKey(3, 'gate_proj', 'B'), 'base_model.model.model.layers.3.mlp.gate_proj.lora_B.weight');
  t.equal(peftAdapterKey(0, 'o_proj', 'A'), 'base_model.model.model.layers.0.self_attn.o_proj.lora_A.weight');
});
