import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { computeAdvantages, policyLoss, type PolicyLossOptions } from '../../lib/grpo/index.js';
import { packageRoot } from '../../lib/native/loader.js';
import { grpoAddon } from '../../lib/grpo/native.js';
import { closeness, lossInputs, rng } from './fixtures/reference.js';

// Child processes run the same inputs with another kernel pool size or another ISA build of
// the token kernel; the parent compares their results with its own.
const batch = 24;
const len = 20000; // 2 pieces per row, 15 parallel tasks
const opts: PolicyLossOptions = { aggMode: 'seq-mean-token-mean', klCoef: 0.05, entropyCoef: 0.01 };
const inp = lossInputs(2024, batch, len, { ref: true, entropy: true, perTokenAdv: true });
const r = rng(99);
const rewards = Float32Array.from({ length: 70001 }, () => r() * 4 - 1);
const ids = Int32Array.from({ length: 70001 }, () => Math.floor(r() * 9000) * 7 - 30000);

interface ChildResult {
  isa: string;
  loss: number;
  metrics: Record<string, number>;
  grad: Float32Array;
  adv: Float32Array;
}

function runChild(dir: string, env: Record<string, string>): ChildResult {
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
    const res = addon.grpoPolicyLoss(inp, { batch: ${batch}, responseLen: ${len} }, { ...${JSON.stringify(opts)}, device: 'cpu' });
    const adv = addon.grpoAdvantages(f32('rewards'), i32('ids'), { device: 'cpu' });
    writeFileSync(dir + '/child.json', JSON.stringify({ isa: addon.grpoKernelIsa(), loss: res.loss, metrics: res.metrics }));
    writeFileSync(dir + '/child.grad', res.dLogProbs);
    writeFileSync(dir + '/child.adv', adv);
  `;
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });
  if (child.status !== 0) throw new Error(`child failed: ${child.stderr}`);
  const f32 = (name: string) => {
    const b = readFileSync(join(dir, name));
    return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  };
  const meta = JSON.parse(readFileSync(join(dir, 'child.json'), 'utf8')) as {
    isa: string;
    loss: number;
    metrics: Record<string, number>;
  };
  return { ...meta, grad: f32('child.grad'), adv: f32('child.adv') };
}

t.test('thread count and ISA builds of the kernels', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-grpo-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const files: Record<string, Float32Array | Int32Array | undefined> = { ...inp, rewards, ids };
  for (const [k, v] of Object.entries(files))
    if (v) writeFileSync(join(dir, k), new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  const here = policyLoss(inp, { batch, responseLen: len }, { ...opts, device: 'cpu' });
  const adv = computeAdvantages(rewards, ids, { device: 'cpu' });
  const isa = grpoAddon().grpoKernelIsa();
  t.match(isa, /^(avx512|avx2|generic)$/);

  t.test('one thread gives the same bits as the default pool', async (t) => {
    const one = runChild(dir, { SINKFLEX_NUM_THREADS: '1' });
    t.equal(one.isa, isa);
    t.equal(one.loss, here.loss, 'loss');
    t.same(one.metrics, here.metrics, 'metrics');
    t.ok(
      Buffer.from(one.grad.buffer, one.grad.byteOffset, one.grad.byteLength).equals(Buffer.from(here.dLogProbs.buffer)),
      'dLogProbs',
    );
    t.ok(
      Buffer.from(one.adv.buffer, one.adv.byteOffset, one.adv.byteLength).equals(Buffer.from(adv.buffer)),
      'advantages',
    );
  });

  for (const features of ['generic', 'avx2']) {
    t.test(`SINKFLEX_CPU_FEATURES=${features} runs another build with the same results up to rounding`, async (t) => {
      const other = runChild(dir, { SINKFLEX_CPU_FEATURES: features });
      if (features === 'generic') t.equal(other.isa, 'generic');
      else t.match(other.isa, isa === 'generic' ? /^generic$/ : /^avx2$/);
      t.ok(Math.abs(other.loss - here.loss) <= 1e-6 * Math.abs(here.loss) + 1e-9, `loss ${other.loss} vs ${here.loss}`);
      for (const [k, v] of Object.entries(here.metrics))
        t.ok(Math.abs(other.metrics[k]! - v) <= 1e-6 * Math.abs(v) + 1e-9, k);
      t.ok(closeness(other.grad, here.dLogProbs, 1e-6, 1e-12) <= 1, 'dLogProbs');
      t.same(other.adv, adv, 'advantages do not use the token kernel');
    });
  }
});
