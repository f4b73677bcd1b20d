import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { Tokenizer, trainChatTokenizer } from '../../lib/chat/index.js';
import {
  CheckpointError,
  ParamStore,
  type ModelConfig,
  type SafeTensor,
  loadCheckpoint,
  modelConfig,
  parameterLayout,
  restoreParamStore,
  saveCheckpoint,
} from '../../lib/model/index.js';
import { encodeSafetensors, readSafetensorsFile, writeSafetensorsFile } from '../../lib/model/safetensors.js';
import { randn, sameBits } from './fixtures/reference.js';

const config = modelConfig('tiny', {
  layers: 2,
  width: 32,
  heads: 2,
  kvHeads: 1,
  headDim: 16,
  ffn: 48,
  vocab: 300,
  context: 64,
  window: 16,
});
const tokenizer = trainChatTokenizer('return the order, exchange the item, refund the payment '.repeat(20), {
  vocabSize: 290,
});

/** Fills every gradient with seeded values and takes an AdamW step. */
function trainStep(store: ParamStore, seed: number): void {
  store.info().forEach((p, i) => store.write(p.name, randn(p.numel, seed * 1000 + i), 'grad'));
  store.adamwStep({ lr: 1e-2, weightDecay: 0.1, maxGradNorm: 1 });
}

function tmp(t: { teardown: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-ckpt-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

t.test('save and load round-trip weights, optimiser state, config, tokenizer, RNG and trainer state', async (t) => {
  const dir = tmp(t);
  const store = ParamStore.fromConfig(config, 11);
  t.teardown(() => store.dispose());
  trainStep(store, 1);
  trainStep(store, 2);
  const path = join(dir, 'step2.safetensors');
  saveCheckpoint(path, { config, store, tokenizer, rng: { sampler: 'abc' }, trainer: { epoch: 1, cursor: [3, 4] } });
  t.same(readdirSync(dir), ['step2.safetensors'], 'written atomically, no temporary file left');
  const ck = loadCheckpoint(path, { expectConfig: config });
  t.same(ck.config, config);
  t.equal(ck.step, 2);
  t.equal(ck.seed, 11);
  t.ok(ck.hasOptimizerState);
  t.equal(ck.storeRng, store.rngState());
  t.same(ck.rng, { sampler: 'abc' });
  t.same(ck.trainer, { epoch: 1, cursor: [3, 4] });
  t.same(ck.tokenizer, tokenizer.toJSON());
  t.same(Tokenizer.fromJSON(ck.tokenizer!).encode('refund the order'), tokenizer.encode('refund the order'));
  const restored = restoreParamStore(ck);
  t.teardown(() => restored.dispose());
  for (const p of store.info()) {
    for (const which of ['value', 'm', 'v'] as const) {
      if (!sameBits(restored.read(p.name, which), store.read(p.name, which))) t.fail(`${p.name} ${which} differs`);
    }
  }
  t.equal(restored.step, 2);
  t.equal(restored.rngState(), store.rngState());
  // the file is plain safetensors: any reader sees the tensors and the metadata
  const raw = readSafetensorsFile(path);
  t.equal(raw.metadata.format, 'sinkflex-rl/checkpoint');
  t.ok(raw.tensors.has('optimizer.m.layers.0.attn.q.weight'));
  t.equal(raw.tensors.size, 3 * parameterLayout(config).length);
});

t.test('resuming from a checkpoint continues exactly like the uninterrupted run', async (t) => {
  const dir = tmp(t);
  const a = ParamStore.fromConfig(config, 5);
  t.teardown(() => a.dispose());
  trainStep(a, 1);
  trainStep(a, 2);
  saveCheckpoint(join(dir, 'mid.safetensors'), { config, store: a });
  trainStep(a, 3);
  trainStep(a, 4);
  const b = ParamStore.fromConfig(config, 999); // different init, overwritten by the restore
  t.teardown(() => b.dispose());
  restoreParamStore(loadCheckpoint(join(dir, 'mid.safetensors')), b);
  trainStep(b, 3);
  trainStep(b, 4);
  t.ok(
    a.names().every((n) => sameBits(a.read(n), b.read(n)) && sameBits(a.read(n, 'v'), b.read(n, 'v'))),
    'bit-identical after 2 more steps',
  );
  t.equal(b.step, 4);
});

t.test('weights-only checkpoints restore zero moments', async (t) => {
  const dir = tmp(t);
  const s = ParamStore.fromConfig(config, 3);
  t.teardown(() => s.dispose());
  trainStep(s, 1);
  const path = join(dir, 'w.safetensors');
  saveCheckpoint(path, { config, store: s, optimizer: false });
  const ck = loadCheckpoint(path);
  t.notOk(ck.hasOptimizerState);
  t.equal(ck.tensors.size, parameterLayout(config).length);
  t.equal(ck.tokenizer, null);
  const r = restoreParamStore(ck);
  t.teardown(() => r.dispose());
  t.ok(sameBits(r.read('embed.weight'), s.read('embed.weight')));
  t.ok(r.read('embed.weight', 'm').every((v) => v === 0));
});

t.test('corrupt, truncated, foreign and mismatched files fail with a clear CheckpointError', async (t) => {
  const dir = tmp(t);
  const s = ParamStore.fromConfig(config, 4);
  t.teardown(() => s.dispose());
  const path = join(dir, 'ok.safetensors');
  saveCheckpoint(path, { config, store: s, tokenizer });
  const good = readFileSync(path);
  const variant = (name: string, bytes: Uint8Array): string => {
    const p = join(dir, name);
    writeFileSync(p, bytes);
    return p;
  };
  const flipped = Buffer.from(good);
  flipped[flipped.length - 100] ^= 0x40;
  t.throws(() => loadCheckpoint(variant('flipped.safetensors', flipped)), {
    name: 'CheckpointError',
    message: /checksum mismatch: the tensor data is corrupt/,
  });
  t.throws(() => loadCheckpoint(variant('short.safetensors', good.subarray(0, good.length - 10))), {
    name: 'CheckpointError',
    message: /not a readable safetensors file: file is truncated/,
  });
  t.throws(() => loadCheckpoint(variant('tiny.safetensors', good.subarray(0, 5))), {
    name: 'CheckpointError',
    message: /truncated/,
  });
  t.throws(() => loadCheckpoint(join(dir, 'missing.safetensors')), { code: 'ENOENT' });
  const foreign = join(dir, 'foreign.safetensors');
  writeSafetensorsFile(foreign, [['w', { dtype: 'F32', shape: [1], data: new Float32Array(1) }]], { format: 'pt' });
  t.throws(() => loadCheckpoint(foreign), {
    name: 'CheckpointError',
    message: /not a sinkflex checkpoint \(metadata format is "pt"\)/,
  });
  const other: ModelConfig = { ...config, width: 64 };
  t.throws(() => loadCheckpoint(path, { expectConfig: other }), {
    name: 'CheckpointError',
    message: /config mismatch: width is 32 in the checkpoint, 64 expected/,
  });
  const big = ParamStore.fromConfig(other, 1);
  t.teardown(() => big.dispose());
  t.throws(() => restoreParamStore(loadCheckpoint(path), big), {
    name: 'CheckpointError',
    message: /store mismatch: parameter 0 is 'embed.weight' \[300, 64\], the checkpoint has 'embed.weight' \[300, 32\]/,
  });
  const fewer = ParamStore.fromSpecs([{ name: 'x', shape: [1] }], 1);
  t.teardown(() => fewer.dispose());
  t.throws(() => restoreParamStore(loadCheckpoint(path), fewer), { message: /the store has 1 parameters/ });
  t.throws(() => saveCheckpoint(join(dir, 'x.safetensors'), { config: other, store: s }), {
    name: 'CheckpointError',
    message: /does not hold the parameters of this config/,
  });
  t.throws(
    () =>
      saveCheckpoint(join(dir, 'x.safetensors'), {
        config: { ...config, vocab: 100 },
        store: ParamStore.fromConfig({ ...config, vocab: 100 }, 1),
        tokenizer,
      }),
    { message: /more tokens than config.vocab/ },
  );
  // a consistent file whose tensors do not match its config (rewritten with a valid checksum)
  const raw = readSafetensorsFile(path);
  const tensors = [...raw.tensors].filter(([k]) => k !== 'norm.weight');
  const resave = (name: string, list: typeof tensors, meta: Record<string, string>): string => {
    const p = join(dir, name);
    writeSafetensorsFile(p, list, { ...meta, data_sha256: sha(list) });
    return p;
  };
  t.throws(() => loadCheckpoint(resave('missing-tensor.safetensors', tensors, raw.metadata)), {
    name: 'CheckpointError',
    message: /missing tensor 'norm.weight'/,
  });
  const reshaped = [...raw.tensors].map(([k, v]): (typeof tensors)[number] =>
    k === 'norm.weight' ? [k, { ...v, shape: [2, 16] }] : [k, v],
  );
  t.throws(() => loadCheckpoint(resave('reshaped.safetensors', reshaped, raw.metadata)), {
    message: /tensor 'norm.weight' has shape \[2, 16\], the config expects \[32\]/,
  });
  const extra = [
    ...raw.tensors,
    ['bonus', { dtype: 'F32' as const, shape: [1], data: new Float32Array(1) }] as (typeof tensors)[number],
  ];
  t.throws(() => loadCheckpoint(resave('extra.safetensors', extra, raw.metadata)), {
    message: /unexpected tensor 'bonus'/,
  });
  const all = [...raw.tensors];
  t.throws(() => loadCheckpoint(resave('badcfg.safetensors', all, { ...raw.metadata, config: '{"layers": 0}' })), {
    message: /invalid config: config.layers/,
  });
  t.throws(() => loadCheckpoint(resave('badjson.safetensors', all, { ...raw.metadata, optimizer: '{' })), {
    message: /metadata 'optimizer' is not valid JSON/,
  });
  t.throws(
    () =>
      loadCheckpoint(
        resave('badopt.safetensors', all, { ...raw.metadata, optimizer: '{"step": -1, "moments": true}' }),
      ),
    { message: /integer step/ },
  );
  t.throws(() => loadCheckpoint(resave('badrng.safetensors', all, { ...raw.metadata, rng: '{}' })), {
    message: /'rng' is malformed/,
  });
  t.throws(() => loadCheckpoint(resave('badseed.safetensors', all, { ...raw.metadata, seed: 'x' })), {
    message: /'seed'/,
  });
  t.throws(() => loadCheckpoint(resave('badtok.safetensors', all, { ...raw.metadata, tokenizer: '{"type": "x"}' })), {
    message: /invalid tokenizer/,
  });
  t.throws(() => loadCheckpoint(resave('version.safetensors', all, { ...raw.metadata, format_version: '9' })), {
    message: /unsupported checkpoint version "9"/,
  });
  const noCfg = { ...raw.metadata };
  delete noCfg.config;
  t.throws(() => loadCheckpoint(resave('nocfg.safetensors', all, noCfg)), { message: /metadata has no 'config'/ });
  t.ok(new CheckpointError('m', 'p').message === 'p: m');
});

function sha(list: [string, SafeTensor][]): string {
  const h = createHash('sha256');
  for (const p of encodeSafetensors(list).slice(1)) h.update(p);
  return h.digest('hex');
}
