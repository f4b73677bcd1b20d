// The optimizer state of a store's trainable parameters (what a LoRA checkpoint keeps beside its
// PEFT adapter): moments, step and RNG state round trip exactly into another store with the same
// trainable parameters, frozen and bfloat16 parameters are left out, and a corrupt file or a
// store with other trainable parameters is refused naming what is wrong. And the fingerprint of
// a Hugging Face folder: defining files hashed whole, weights by size and header, differences named.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import {
  CheckpointError,
  ParamStore,
  fingerprintDifference,
  hfFolderFingerprint,
  loadOptimizerState,
  restoreOptimizerState,
  saveOptimizerState,
  type ParamSpec,
} from '../../lib/model/index.js';
import { writeTinyCheckpoint } from './hf/fixtures/tiny-checkpoint.js';

const tmp = mkdtempSync(join(tmpdir(), 'optimizer-state-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

const SPECS: ParamSpec[] = [
  { name: 'base.w', shape: [6, 5], dtype: 'bfloat16', trainable: false },
  { name: 'base.g', shape: [5], trainable: false },
  { name: 'a', shape: [3, 5] },
  { name: 'b', shape: [7] },
];

t.test('moments, step and RNG state of the trainable parameters round trip', async (t) => {
  const store = ParamStore.fromSpecs(SPECS, 3);
  t.teardown(() => store.dispose());
  for (const p of store.info().filter((q) => q.trainable)) {
    const n = p.shape.reduce((x, y) => x * y, 1);
    store.write(
      p.name,
      Float32Array.from({ length: n }, (_, i) => Math.sin(i + 1) * 0.1),
      'grad',
    );
  }
  store.adamwStep({ lr: 1e-2, weightDecay: 0.1, maxGradNorm: 1 });
  store.adamwStep({ lr: 1e-2, weightDecay: 0.1, maxGradNorm: 1 });
  const path = join(tmp, 'opt.safetensors');
  saveOptimizerState(path, store, { rng: { sampler: '5:9' }, trainer: { step: 4 } });

  const st = loadOptimizerState(path);
  t.same(
    st.params,
    [
      { name: 'a', shape: [3, 5] },
      { name: 'b', shape: [7] },
    ],
    'the trainable parameters only',
  );
  t.equal(st.step, 2);
  t.same(st.rng, { sampler: '5:9' });
  t.same(st.trainer, { step: 4 });
  const other = ParamStore.fromSpecs(SPECS, 9);
  t.teardown(() => other.dispose());
  restoreOptimizerState(st, other);
  t.equal(other.step, 2);
  t.equal(other.rngState(), store.rngState());
  for (const name of ['a', 'b']) {
    for (const which of ['m', 'v'] as const)
      t.same(other.read(name, which), store.read(name, which), `${name} ${which}`);
  }
  t.notSame(other.read('a'), store.read('a'), 'values are not part of it');

  // refused: a corrupt file, another layout of trainable parameters
  const bytes = readFileSync(path);
  bytes[bytes.length - 3] ^= 0xff;
  writeFileSync(join(tmp, 'bad.safetensors'), bytes);
  t.throws(() => loadOptimizerState(join(tmp, 'bad.safetensors')), {
    name: 'CheckpointError',
    message: /checksum mismatch/,
  });
  t.throws(() => loadOptimizerState(join(tmp, 'missing.safetensors')), CheckpointError);
  const fewer = ParamStore.fromSpecs([SPECS[0], SPECS[1], SPECS[2], { ...SPECS[3], trainable: false }], 1);
  t.teardown(() => fewer.dispose());
  t.throws(() => restoreOptimizerState(st, fewer), /store mismatch: .*'b' is saved but not trainable in the store/);
  const more = ParamStore.fromSpecs([SPECS[0], { ...SPECS[1], trainable: true }, SPECS[2], SPECS[3]], 1);
  t.teardown(() => more.dispose());
  t.throws(() => restoreOptimizerState(st, more), /'base\.g' trains in the store but is not saved/);
});

t.test('the fingerprint of a model folder', async (t) => {
  const dir = join(tmp, 'model');
  writeTinyCheckpoint(dir, { family: 'qwen3', shards: 2 });
  const a = await hfFolderFingerprint(dir);
  t.same(
    a.files.map((f) => [f.name, f.hashed]),
    [
      ['config.json', 'file'],
      ['generation_config.json', 'file'],
      ['model-00001-of-00002.safetensors', 'header'],
      ['model-00002-of-00002.safetensors', 'header'],
      ['model.safetensors.index.json', 'file'],
    ],
  );
  t.equal(fingerprintDifference(a, await hfFolderFingerprint(dir)), null, 'unchanged: equal');
  writeFileSync(join(dir, 'notes.md'), 'not part of the model');
  t.equal(fingerprintDifference(a, await hfFolderFingerprint(dir)), null, 'other files do not count');
  writeFileSync(join(dir, 'chat_template.jinja'), '{{ messages }}');
  t.equal(fingerprintDifference(a, await hfFolderFingerprint(dir)), 'chat_template.jinja is new');
  rmSync(join(dir, 'chat_template.jinja'));
  // a weight file with another header (a tensor renamed, same length), then one with other values only
  const shard = join(dir, 'model-00002-of-00002.safetensors');
  const original = readFileSync(shard);
  const renamed = Buffer.from(original);
  const at = renamed.indexOf('model.');
  renamed[at] = 'M'.charCodeAt(0);
  writeFileSync(shard, renamed);
  t.equal(
    fingerprintDifference(a, await hfFolderFingerprint(dir)),
    'model-00002-of-00002.safetensors changed (its tensor header)',
  );
  const values = Buffer.from(original);
  values[values.length - 1] ^= 0x01;
  writeFileSync(shard, values);
  t.equal(fingerprintDifference(a, await hfFolderFingerprint(dir)), null, 'values alone are not hashed (documented)');
  writeFileSync(shard, original.subarray(0, original.length - 2));
  t.match(
    fingerprintDifference(a, await hfFolderFingerprint(dir)),
    /model-00002-of-00002\.safetensors changed size \(\d+ → \d+ bytes\)/,
  );
  rmSync(join(dir, 'generation_config.json'));
  t.match(fingerprintDifference(a, await hfFolderFingerprint(dir)), /generation_config\.json is gone/);
  await t.rejects(hfFolderFingerprint(tmp), /not a Hugging Face model folder \(no config\.json\)/);
});
