// gpt-oss with its MXFP4 experts kept packed (loadPretrained's default) against the same checkpoint
// dequantized to bfloat16 (`mxfp4: 'bf16'`): the store holds the blocks and scales (17/32 bytes a
// weight, its dtype 'mxfp4'), reads back as the exact bfloat16 dequantization, and the model gives
// the same log-probs and the same LoRA training step (adapters after one AdamW step), bit for bit.
// Bad input: wrong block shapes or dtypes, a truncated shard and a missing index entry fail with an
// error naming the tensor or file and leave no native memory behind; a bad option value is refused.
import { mkdtempSync, rmSync, statSync, truncateSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { ParamStore, loadPretrained, packSequences } from '../../../lib/model/index.js';
import { isOutOfMemoryError } from '../../../lib/native/index.js';
import { memory } from '../../../lib/native/memory.js';
import { settledBytes } from '../../native/fixtures/settled-bytes.js';
import { type TinySpec, writeTinyCheckpoint } from './fixtures/tiny-checkpoint.js';

function checkpoint(t: Test, spec: TinySpec): string {
  const dir = mkdtempSync(join(tmpdir(), 'hf-mxfp4-packed-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeTinyCheckpoint(dir, spec);
  return dir;
}

const u32 = (a: Float32Array): number[] => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
const spec: TinySpec = {
  family: 'gpt_oss',
  hidden: 64,
  intermediate: 64,
  layers: 2,
  layerTypes: ['sliding_attention', 'full_attention'],
  seed: 11,
};

t.test('packed experts = dequantized experts: store, log-probs, a LoRA step', async (t) => {
  const dir = checkpoint(t, spec);
  const lora = { rank: 4, alpha: 8, targets: ['q_proj', 'v_proj'] as ('q_proj' | 'v_proj')[] };
  const packed = await loadPretrained(dir, { lora, seed: 5 });
  const bf16 = await loadPretrained(dir, { lora, seed: 5, mxfp4: 'bf16' });
  t.teardown(() => {
    packed.dispose();
    bf16.dispose();
  });
  const name = 'layers.1.mlp.experts.gate_up.weight';
  const pInfo = packed.params.info().find((p) => p.name === name)!;
  t.equal(pInfo.dtype, 'mxfp4', 'the packed model stores the experts as MXFP4');
  t.equal(bf16.params.info().find((p) => p.name === name)!.dtype, 'bfloat16', "mxfp4: 'bf16' dequantizes them");
  const expertElems = packed.params
    .info()
    .filter((p) => /experts\.(gate_up|down)\.weight$/.test(p.name))
    .reduce((n, p) => n + p.numel, 0);
  t.equal(
    bf16.bytes - packed.bytes,
    expertElems * 2 - (expertElems * 17) / 32,
    'the store saves 2 − 17/32 bytes a packed weight',
  );
  t.same(
    Array.from(packed.params.readBf16(name)),
    Array.from(bf16.params.readBf16(name)),
    'readBf16 of a packed weight is its bfloat16 dequantization',
  );
  t.same(u32(packed.params.read(name)), u32(bf16.params.read(name)), 'read widens it exactly');
  const raw = packed.params.readMxfp4(name);
  t.equal(raw.blocks.length, pInfo.numel / 2);
  t.equal(raw.scales.length, pInfo.numel / 32);

  const ids = [
    [1, 17, 33, 200, 5, 9, 64, 128, 250, 3, 7, 100, 2],
    [4, 8, 15, 16, 23, 42],
  ];
  const a = await packed.logProbs(ids);
  const b = await bf16.logProbs(ids);
  a.forEach((row, i) => t.same(u32(row), u32(b[i]), `sequence ${i}: the same log-probs, bit for bit`));

  // one LoRA SFT step on each: the input gradients through the packed experts equal the dequantized ones
  const batch = packSequences(ids.map((tokens) => ({ tokens })));
  const scored = batch.targets.filter((x) => x >= 0).length;
  for (const m of [packed, bf16]) {
    const f = m.policy.model.forward(batch);
    f.backward({ dLogProbs: Float32Array.from(batch.targets, (x) => (x >= 0 ? -1 / scored : 0)) });
    m.params.adamwStep({ lr: 1e-2 });
  }
  const adapters = packed.params.info().filter((p) => p.trainable);
  t.ok(adapters.length > 0, 'the adapters train');
  for (const p of adapters)
    t.same(u32(packed.params.read(p.name)), u32(bf16.params.read(p.name)), `${p.name}: the same after one step`);
  t.notOk(
    packed.params.info().some((p) => p.dtype === 'mxfp4' && p.trainable),
    'MXFP4 weights are frozen',
  );
});

t.test('the ParamStore refuses what an MXFP4 parameter cannot be', async (t) => {
  t.throws(
    () => ParamStore.fromSpecs([{ name: 'w', shape: [4, 48], dtype: 'mxfp4', init: 'zeros' }], 1),
    /multiple of 32/,
    'a last dimension that is not whole blocks',
  );
  t.throws(
    () => ParamStore.fromSpecs([{ name: 'w', shape: [4, 64], dtype: 'mxfp4', init: 'zeros', trainable: true }], 1),
    /non-trainable/,
    'a trainable MXFP4 parameter',
  );
  t.throws(
    () => ParamStore.fromSpecs([{ name: 'w', shape: [4, 64], dtype: 'mxfp4', init: 'normal' }], 1),
    /zeros or ones/,
    'a random init',
  );
  const s = ParamStore.fromSpecs([{ name: 'w', shape: [2, 64], dtype: 'mxfp4', init: 'ones' }], 1);
  t.teardown(() => s.dispose());
  t.same(Array.from(s.read('w')), new Array(128).fill(1), "init 'ones' decodes to 1");
  t.throws(() => s.write('w', new Float32Array(128)), /MXFP4/, 'float values are not re-quantized');
  t.throws(
    () => s.writeMxfp4('w', { blocks: new Uint8Array(63), scales: new Uint8Array(4) }),
    /blocks of 'w' must have 64 bytes, got 63/,
  );
  t.throws(
    () => s.writeMxfp4('w', { blocks: new Uint8Array(64), scales: new Uint8Array(3) }),
    /scales of 'w' must have 4 bytes, got 3/,
  );
  const blocks = Uint8Array.from({ length: 64 }, (_, i) => (i * 37) & 255);
  const scales = Uint8Array.from([120, 127, 130, 0]);
  s.writeMxfp4('w', { blocks, scales });
  t.same(Array.from(s.readMxfp4('w').blocks), Array.from(blocks), 'blocks read back as written');
  t.equal(s.bytes, 64 + 4, 'the store holds 17/32 bytes a weight');
});

t.test('bad input: an error naming the tensor, nothing left allocated', async (t) => {
  async function fails(dir: string, expected: RegExp, what: string): Promise<void> {
    const bytes = await settledBytes();
    await t.rejects(loadPretrained(dir), { message: expected }, what);
    t.equal(await settledBytes(), bytes, `${what}: no native memory kept`);
  }
  await t.rejects(
    loadPretrained(checkpoint(t, spec), { mxfp4: 'fp4' as 'packed' }),
    /options\.mxfp4 must be 'packed' or 'bf16'/,
    'a bad option value',
  );

  // a shard cut short inside the experts' blocks
  const cut = checkpoint(t, { ...spec, shards: 2 });
  const shard = join(cut, 'model-00002-of-00002.safetensors');
  truncateSync(shard, statSync(shard).size - 100);
  await fails(cut, /model-00002-of-00002\.safetensors|truncated|extends past/, 'a truncated shard');

  // an index that lost the entry of a scales tensor
  const noEntry = checkpoint(t, { ...spec, shards: 2 });
  const indexPath = join(noEntry, 'model.safetensors.index.json');
  const index = JSON.parse(readFileSync(indexPath, 'utf8')) as { weight_map: Record<string, string> };
  delete index.weight_map['model.layers.1.mlp.experts.down_proj_scales'];
  writeFileSync(indexPath, JSON.stringify(index));
  await fails(noEntry, /model\.layers\.1\.mlp\.experts\.down_proj_scales/, 'a missing index entry');

  // out of memory while loading: an OutOfMemoryError with the bytes held and asked, the process still usable
  const ok = checkpoint(t, spec);
  const before = await settledBytes();
  const limit = memory.limitBytes();
  let err: unknown = null;
  memory.setLimit(before + 20000);
  try {
    await loadPretrained(ok);
  } catch (e) {
    err = e;
  } finally {
    memory.setLimit(limit);
  }
  t.match(err, { name: 'OutOfMemoryError' }, 'past the limit: OutOfMemoryError');
  t.ok(
    isOutOfMemoryError(err) && err.currentBytes >= 0 && err.requestedBytes > 0,
    `it names the bytes held and asked (${(err as Error).message})`,
  );
  t.equal(await settledBytes(), before, 'nothing kept');
  const m = await loadPretrained(ok);
  t.equal((await m.logProbs([[1, 2, 3]]))[0].length, 2, 'the next load works');
  m.dispose();
});
