// Merging LoRA adapters into the base: W' = W + scale · B A (the product in float32; a bfloat16
// weight widened, added to in float32 and rounded to nearest even), the adapters removed. The
// merged model's log-probs equal base + adapter (float32 base: within 1e-5 relative; bfloat16
// base: within the rounding of the merged weights to bfloat16, and exactly the float64 reference
// over those rounded weights); then it saves as a full Hugging Face folder (saveHf) that loads
// back with the same tensors and log-probs — the path of m.mergeAdapter(); m.save(dir).
import { rmSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import {
  ParamStore,
  Transformer,
  addLora,
  mergeLora,
  parameterLayout,
  type ModelConfigInput,
  type ParamSpec,
} from '../../lib/model/index.js';
import { loraAdapterSlots } from '../../lib/model/lora/layout.js';
import { loraScale } from '../../lib/model/lora/settings.js';
import { type HfTensor, loadHfCheckpoint, saveHf } from '../../lib/model/index.js';
import { closeness, randn } from './fixtures/reference.js';
import { randomizeStore, readParams, refTransformer } from './fixtures/transformer-reference.js';
import { hfShapes, randomTensors, tempDir, tinyConfig, writeHfFolder } from './hf/fixtures/loader/checkpoint.js';

const dirs: string[] = [];
t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const fresh = (): string => {
  const d = tempDir('lora-merge-');
  dirs.push(d);
  return d;
};

const cfg: ModelConfigInput = {
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
const batch = {
  tokens: Int32Array.from([5, 3, 9, 1, 22, 7, 0, 14, 2, 8, 8]),
  targets: Int32Array.from([3, 9, 1, 22, 7, 0, 14, 2, 8, 8, -1]),
  positions: Int32Array.from({ length: 11 }, (_, i) => i),
};

function bf16Bits(x: number): number {
  const u = new Uint32Array(new Float32Array([x]).buffer)[0];
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}
const bf16Value = (h: number): number => new Float32Array(new Uint32Array([h << 16]).buffer)[0];

/** A frozen base (matrices bf16 or float32) with random weights, plus random adapters. */
function adapted(bf16: boolean, seed: number, rslora = false): Transformer {
  const specs: ParamSpec[] = parameterLayout(cfg).map((p) => ({
    ...p,
    dtype: bf16 && p.shape.length >= 2 && p.decay ? 'bfloat16' : 'float32',
    trainable: false,
  }));
  const store = ParamStore.fromSpecs(specs, seed);
  const tmp = ParamStore.fromSpecs(parameterLayout(cfg), seed);
  randomizeStore(tmp, seed + 1, 0.4);
  for (const n of tmp.names()) store.write(n, tmp.read(n));
  tmp.dispose();
  const m = addLora(Transformer.fromStore(cfg, store), { rank: 3, alpha: 7, rslora, targets: [...ALL] });
  let s = seed * 10;
  for (const p of m.store.info()) if (p.trainable) m.store.write(p.name, randn(p.numel, s++, -0.4, 0.4));
  return m;
}

const maxRel = (a: ArrayLike<number>, b: ArrayLike<number>): number => {
  let r = 0;
  for (let i = 0; i < a.length; i++) r = Math.max(r, Math.abs(a[i] - b[i]) / Math.max(1, Math.abs(b[i])));
  return r;
};

t.test('float32 base: W + scale·B A, the adapters gone, log-probs within 1e-5', async (t) => {
  for (const rslora of [false, true]) {
    const m = adapted(false, 3, rslora);
    const before = m.logProbs(batch).logProbs;
    const p = readParams(m.store);
    const slots = loraAdapterSlots(m.config);
    const scale = loraScale(m.config.lora!);
    const merged = mergeLora(m);
    t.ok(m.disposed, 'the adapted model is disposed');
    t.equal(merged.config.lora, null);
    t.same(
      merged.store.names(),
      parameterLayout(cfg).map((s) => s.name),
      'only the base parameters are left',
    );
    t.equal(merged.store.trainableNumel, 0, 'the base stays frozen');
    // every merged weight against W + scale B A in float64
    let worst = 0;
    const expected = new Map<string, Float64Array>();
    for (const s of slots) {
      const w = expected.get(s.weight) ?? Float64Array.from(p.get(s.weight)!);
      const A = p.get(s.aName)!;
      const B = p.get(s.bName)!;
      for (let i = 0; i < s.out; i++)
        for (let j = 0; j < s.in; j++) {
          let d = 0;
          for (let k = 0; k < 3; k++) d += B[i * 3 + k] * A[k * s.in + j];
          w[(s.rowOffset + i) * s.in + j] += scale * d;
        }
      expected.set(s.weight, w);
    }
    for (const [name, w] of expected) worst = Math.max(worst, closeness(merged.store.read(name), w, 1e-6, 1e-6));
    t.ok(worst <= 1, `rslora ${rslora}: merged weights equal W + scale·B A (worst ${worst.toFixed(3)} of 1e-6)`);
    const after = merged.logProbs(batch).logProbs;
    const rel = maxRel(after, before);
    t.ok(rel <= 1e-5, `rslora ${rslora}: merged log-probs equal base + adapter within 1e-5 (${rel.toExponential(2)})`);
    const store = merged.store;
    merged.dispose();
    store.dispose();
  }
});

t.test('bfloat16 base: merged in float32 and rounded to bfloat16; log-probs within that rounding', async (t) => {
  const m = adapted(true, 5);
  const before = m.logProbs(batch).logProbs;
  const p = readParams(m.store);
  const slots = loraAdapterSlots(m.config);
  const scale = loraScale(m.config.lora!);
  const merged = mergeLora(m);
  let exact = 0;
  let total = 0;
  let farther = 0;
  for (const s of slots) {
    const bits = merged.store.readBf16(s.weight);
    const W = p.get(s.weight)!;
    const A = p.get(s.aName)!;
    const B = p.get(s.bName)!;
    for (let i = 0; i < s.out; i++)
      for (let j = 0; j < s.in; j++) {
        let d = 0;
        for (let k = 0; k < 3; k++) d += B[i * 3 + k] * A[k * s.in + j];
        const idx = (s.rowOffset + i) * s.in + j;
        const want = bf16Bits(W[idx] + scale * d);
        total++;
        if (bits[idx] === want) exact++;
        else if (
          Math.abs(bf16Value(bits[idx]) - (W[idx] + scale * d)) >
          Math.abs(bf16Value(want) - (W[idx] + scale * d)) + 1e-6 * Math.abs(W[idx] + scale * d)
        )
          farther++;
      }
  }
  t.ok(
    exact / total > 0.999,
    `the merged bits are round-to-nearest-even of W + scale·B A (${exact} of ${total}; the rest are float32 near-ties)`,
  );
  t.equal(farther, 0, 'none is farther from the exact sum than the nearest bfloat16 (beyond float32 rounding)');
  const after = merged.logProbs(batch).logProbs;
  // exactly the model of the rounded merged weights …
  const ref = refTransformer(merged.config, readParams(merged.store), batch).logp;
  t.ok(closeness(after, ref, 1e-4, 1e-5) <= 1, 'merged log-probs = the float64 reference over the merged bf16 weights');
  // … and base + adapter up to that rounding: every merged weight moved by at most half a bf16 ulp (2^-9 relative)
  const rel = maxRel(after, before);
  t.ok(
    rel > 0 && rel <= 2e-2,
    `merged log-probs equal base + adapter within bf16 rounding (max relative ${rel.toExponential(2)} ≤ 2e-2)`,
  );
  const store = merged.store;
  merged.dispose();
  store.dispose();
});

t.test(
  'm.mergeAdapter(); m.save(dir): a full HF folder that loads back with the merged tensors and log-probs',
  async (t) => {
    for (const fileDtype of ['BF16', 'F32'] as const) {
      const { tensors } = randomTensors(hfShapes('Qwen3ForCausalLM'), fileDtype, 31);
      const src = writeHfFolder(fresh(), tinyConfig('Qwen3ForCausalLM'), tensors);
      const ck = await loadHfCheckpoint(src, { dtype: 'auto' });
      // what loadPretrained does: a frozen store in the checkpoint's dtypes
      const specs: ParamSpec[] = parameterLayout(ck.modelConfig).map((s) => ({
        ...s,
        dtype: ck.tensors.get(s.name)!.dtype,
        trainable: false,
      }));
      const store = ParamStore.fromSpecs(specs, 1);
      for (const [name, tensor] of ck.tensors) store.write(name, tensor.data);
      let m = addLora(Transformer.fromStore(ck.modelConfig, store), {
        rank: 4,
        alpha: 8,
        targets: ['q_proj', 'v_proj', 'gate_proj', 'down_proj'],
      });
      let seed = 70;
      for (const p of m.store.info()) if (p.trainable) m.store.write(p.name, randn(p.numel, seed++, -0.05, 0.05));
      const ids = { tokens: Int32Array.from([1, 7, 3, 44, 2, 9]), targets: Int32Array.from([7, 3, 44, 2, 9, -1]) };
      const adaptedLp = m.logProbs(ids).logProbs;
      m = mergeLora(m);
      const mergedLp = m.logProbs(ids).logProbs;
      t.ok(
        maxRel(mergedLp, adaptedLp) <= (fileDtype === 'F32' ? 1e-5 : 2e-2),
        `${fileDtype}: merged ≈ base + adapter (${maxRel(mergedLp, adaptedLp).toExponential(2)})`,
      );
      const out = join(fresh(), 'merged');
      const read = (name: string): HfTensor => {
        const info = m.store.info().find((p) => p.name === name)!;
        return info.dtype === 'bfloat16'
          ? { dtype: 'bfloat16', shape: info.shape, data: m.store.readBf16(name) }
          : { dtype: 'float32', shape: info.shape, data: m.store.read(name) };
      };
      await saveHf(out, { hfConfig: ck.hfConfig, tensors: read, fileDtypes: ck.fileDtypes, copyFrom: src });
      const again = await loadHfCheckpoint(out, { dtype: 'auto' });
      let same = true;
      for (const [name, tensor] of again.tensors) {
        const mine = read(name);
        same &&=
          tensor.dtype === mine.dtype &&
          Buffer.compare(
            Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength),
            Buffer.from(mine.data.buffer, mine.data.byteOffset, mine.data.byteLength),
          ) === 0;
      }
      t.ok(same, `${fileDtype}: the saved folder holds the merged weights bit for bit`);
      t.ok(
        again.tensors.get('layers.0.attn.q.weight') !== undefined && !again.tensors.has('layers.0.attn.q.lora_a'),
        'no adapter tensors in the full folder',
      );
      const store2 = ParamStore.fromSpecs(
        parameterLayout(again.modelConfig).map((s) => ({
          ...s,
          dtype: again.tensors.get(s.name)!.dtype,
          trainable: false,
        })),
        1,
      );
      for (const [name, tensor] of again.tensors) store2.write(name, tensor.data);
      const reloaded = Transformer.fromStore(again.modelConfig, store2);
      t.same(reloaded.logProbs(ids).logProbs, mergedLp, `${fileDtype}: the reloaded model gives the merged log-probs`);
      reloaded.dispose();
      store2.dispose();
      const s = m.store;
      m.dispose();
      s.dispose();
    }
  },
);

t.test('merge refuses a model without adapters', async (t) => {
  const m = Transformer.create(cfg, 1);
  t.throws(() => mergeLora(m), { message: /config\.lora is null: this model has no LoRA adapters to merge/ });
  m.dispose();
});
