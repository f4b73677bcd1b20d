// The tracked allocator's cache of large host blocks (native/core/allocator.cc): reused blocks
// hold the previous owner's bytes, so every kernel must write what it reads; results with the
// cache warm equal those of a process with the cache off (SINKFLEX_HOST_CACHE_MIB=0), live
// blocks never share memory, and the counters count live blocks only.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';

import t from 'tap';

import { Transformer, modelConfig, packSequences } from '../../lib/model/index.js';
import { memory } from '../../lib/native/index.js';
import { loadAddon } from '../../lib/native/loader.js';

/** Three training steps (forward, backward, AdamW) on packed batches of different sizes: a hash of every output. */
function stepsHash(): string {
  const config = modelConfig('tiny', { vocab: 1531, context: 2048, tokenShift: true, width: 64, ffn: 160 });
  const model = Transformer.create(config, 5);
  const h = createHash('sha256');
  let s = 17;
  const r = () => (s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32;
  try {
    for (const lengths of [
      [977, 1203, 311],
      [1500, 1029],
      [1999, 700, 531, 13],
    ]) {
      const batch = packSequences(
        lengths.map((n) => ({ tokens: Array.from({ length: n }, () => Math.floor(r() * config.vocab)) })),
      );
      const d = Float32Array.from(batch.targets, (x) => (x >= 0 ? -(r() - 0.25) / 500 : 0));
      const f = model.forward(batch, { temperature: 0.9 });
      h.update(Buffer.from(f.logProbs.buffer)).update(Buffer.from(f.entropy.buffer));
      f.backward({ dLogProbs: d });
      f.release();
      for (const name of model.store.names()) h.update(Buffer.from(model.store.read(name, 'grad').buffer));
      model.store.adamwStep({ lr: 1e-3, weightDecay: 0.01, maxGradNorm: 1 });
      model.store.zeroGrad();
    }
    for (const name of model.store.names()) h.update(Buffer.from(model.store.read(name).buffer));
  } finally {
    model.dispose();
  }
  return h.digest('hex');
}

if (process.argv[2] === '--child') {
  console.log(stepsHash());
} else {
  t.test('training steps with the cache warm equal a process without the cache', async (t) => {
    stepsHash(); // leaves freed blocks (with their bytes) in the cache
    const warm = stepsHash();
    const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--child'], {
      env: { ...process.env, SINKFLEX_HOST_CACHE_MIB: '0' },
      encoding: 'utf8',
    });
    t.equal(child.status, 0, child.stderr);
    t.equal(child.stdout.trim().split('\n').pop(), warm);
  });

  t.test('the counters count live blocks only, and a step measures the same peak twice', async (t) => {
    const config = modelConfig('tiny', { vocab: 997, context: 1024 });
    const model = Transformer.create(config, 3);
    const batch = packSequences([{ tokens: Array.from({ length: 1000 }, (_, i) => (i * 37) % 997) }]);
    const peaks: number[] = [];
    for (let k = 0; k < 2; k++) {
      const before = memory.currentBytes();
      memory.resetPeak();
      const f = model.forward(batch);
      f.backward({ dLogProbs: new Float32Array(batch.tokens.length).fill(-1e-3) });
      f.release();
      peaks.push(memory.peakBytes() - before);
      // what stays is the log-probs and entropies the forward handed to JS (freed when collected)
      t.ok(memory.currentBytes() - before <= 2 * 4 * batch.tokens.length, 'every native block of the step is released');
    }
    t.equal(peaks[1], peaks[0]);
    t.ok(peaks[0] > 4 << 20, 'the step holds blocks of the cached sizes');
    model.dispose();
  });

  t.test('live large blocks never share memory', async (t) => {
    const sizes = [262_144, 262_145, 300_000, 2_500_000, 2_600_000];
    const arrays = sizes.map((n, i) => {
      const a = loadAddon().allocTracked(n);
      a.fill(i + 1);
      return a;
    });
    arrays.forEach((a, i) => {
      t.equal(a.length, sizes[i]);
      t.ok(
        a.every((x) => x === i + 1),
        `array ${i} kept its values`,
      );
    });
  });
}
