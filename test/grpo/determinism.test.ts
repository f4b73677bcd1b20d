import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { backends, computeAdvantages, packageRoot, policyLoss } from '../../lib/index.js';
import { lossInputs, rng } from './fixtures/reference.js';

// The same inputs through a child process with a one-thread kernel pool must give the same
// bits as this process (one thread per core): partial sums are fixed by the shape alone.
t.test('results are bitwise identical with 1 thread and with the default pool', async (t) => {
  const threads = backends()[0]?.name === 'cpu' ? (backends()[0] as { threads: number }).threads : 1;
  if (threads < 2) {
    t.comment(`the kernel pool has ${threads} thread here: comparing against 1 thread proves little, still run`);
  }
  const batch = 24;
  const len = 20000; // 2 pieces per row, 15 tasks
  const inp = lossInputs(2024, batch, len, { ref: true, entropy: true, perTokenAdv: true });
  const r = rng(99);
  const rewards = Float32Array.from({ length: 70001 }, () => r() * 4 - 1);
  const ids = Int32Array.from({ length: 70001 }, () => Math.floor(r() * 9000) * 7 - 30000);

  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-grpo-'));
  try {
    const files: Record<string, Float32Array | Int32Array | undefined> = { ...inp, rewards, ids };
    for (const [k, v] of Object.entries(files)) if (v) writeFileSync(join(dir, k), new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
    const script = `
      const { createRequire } = await import('node:module');
      const { readFileSync, writeFileSync } = await import('node:fs');
      const require = createRequire(${JSON.stringify(join(packageRoot(), 'package.json'))});
      const addon = require('node-gyp-build')(${JSON.stringify(packageRoot())});
      const dir = ${JSON.stringify(dir)};
      const f32 = (k) => { const b = readFileSync(dir + '/' + k); return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4); };
      const i32 = (k) => { const b = readFileSync(dir + '/' + k); return new Int32Array(b.buffer, b.byteOffset, b.byteLength / 4); };
      const inp = { logProbs: f32('logProbs'), oldLogProbs: f32('oldLogProbs'), advantages: f32('advantages'),
                    responseMask: f32('responseMask'), refLogProbs: f32('refLogProbs'), entropy: f32('entropy') };
      const res = addon.grpoPolicyLoss(inp, { batch: ${batch}, responseLen: ${len} },
                                        { aggMode: 'seq-mean-token-mean', klCoef: 0.05, entropyCoef: 0.01, device: 'cpu' });
      const adv = addon.grpoAdvantages(f32('rewards'), i32('ids'), { device: 'cpu' });
      writeFileSync(dir + '/child.json', JSON.stringify({ loss: res.loss, metrics: res.metrics }));
      writeFileSync(dir + '/child.grad', res.dLogProbs);
      writeFileSync(dir + '/child.adv', adv);
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, SINKFLEX_NUM_THREADS: '1' },
      encoding: 'utf8',
    });
    t.equal(child.status, 0, child.stderr);

    const here = policyLoss(inp, { batch, responseLen: len }, { aggMode: 'seq-mean-token-mean', klCoef: 0.05, entropyCoef: 0.01 });
    const theirs = JSON.parse(readFileSync(join(dir, 'child.json'), 'utf8')) as { loss: number; metrics: Record<string, number> };
    t.equal(theirs.loss, here.loss, 'loss');
    t.same(theirs.metrics, here.metrics, 'metrics');
    t.ok(Buffer.from(here.dLogProbs.buffer).equals(readFileSync(join(dir, 'child.grad'))), 'dLogProbs');
    const adv = computeAdvantages(rewards, ids);
    t.ok(Buffer.from(adv.buffer).equals(readFileSync(join(dir, 'child.adv'))), 'advantages');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
