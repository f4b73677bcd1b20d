// Seeded random configurations (sizes, GQA ratio, mask trees, sinks, softcap, scale, tile
// size, queries after a cache) against the float64 reference: forward, LSE and gradients.
import t from 'tap';

import {
  allKeys,
  and,
  causal,
  documents,
  not,
  or,
  prefix,
  sinkAttentionBackward,
  sinkAttentionForward,
  slidingWindow,
  type AttentionImpl,
  type MaskSpec,
} from '../../lib/attention/index.js';
import { Rng, expectClose, packedIds, refBackward, refForward, type Shape } from './fixtures/reference.js';

// These tests are about the CPU kernels: with a CUDA build on a GPU machine `'auto'` would pick
// the GPU (test/attention/cuda.test.ts covers that), so the default device is pinned to the cpu.
process.env.SINKFLEX_DEVICE = 'cpu';

const CASES = Number(process.env.SINKFLEX_FUZZ_CASES ?? 24);

function randomMask(rng: Rng, s: Shape, depth = 0): MaskSpec {
  const kvLen = s.kvLen ?? s.seqLen;
  const pick = rng.int(depth > 1 ? 6 : 9);
  switch (pick) {
    case 0:
      return causal();
    case 1:
      return slidingWindow(1 + rng.int(Math.max(1, kvLen)));
    case 2:
      return prefix(rng.int(kvLen + 2));
    case 3:
      return documents(
        rng.uniform() < 0.5
          ? packedIds(rng, s.batch, kvLen, 1 + rng.int(4))
          : Int32Array.from({ length: s.batch * kvLen }, () => rng.int(3)),
      );
    case 4:
      return allKeys();
    case 5: {
      const m: { causal?: boolean; window?: number; prefix?: number; documentIds?: Int32Array } = {};
      if (rng.uniform() < 0.3) m.causal = false;
      if (rng.uniform() < 0.7) m.window = rng.int(kvLen + 1);
      if (rng.uniform() < 0.5) m.prefix = rng.int(6);
      if (rng.uniform() < 0.3) m.documentIds = packedIds(rng, s.batch, kvLen, 2);
      return m;
    }
    case 6:
      return not(randomMask(rng, s, depth + 1));
    case 7:
      return and(randomMask(rng, s, depth + 1), randomMask(rng, s, depth + 1));
    default:
      return or(randomMask(rng, s, depth + 1), randomMask(rng, s, depth + 1));
  }
}

for (let n = 0; n < CASES; n++) {
  const rng = new Rng(5000 + n);
  const kvHeads = 1 + rng.int(3);
  const group = [1, 2, 3, 8][rng.int(4)]!;
  const seqLen = 1 + rng.int(n % 4 === 0 ? 300 : 90);
  const cached = rng.uniform() < 0.25;
  const kvLen = cached ? seqLen + rng.int(60) : seqLen;
  const s: Shape = {
    batch: 1 + rng.int(3),
    seqLen,
    qHeads: kvHeads * group,
    kvHeads,
    headDim: 1 + rng.int(n % 5 === 0 ? 130 : 40),
    ...(cached ? { kvLen, queryOffset: kvLen - seqLen } : {}),
  };
  const mask = randomMask(rng, s);
  const sinks = rng.uniform() < 0.7 ? rng.floats(s.qHeads, 2) : null;
  const softcap = rng.uniform() < 0.25 ? 0.5 + 5 * rng.uniform() : undefined;
  const scale = rng.uniform() < 0.25 ? 0.05 + rng.uniform() : undefined;
  const blockSize = [16, 32, 64, 128, 256][rng.int(5)]!;
  const impl: AttentionImpl = rng.uniform() < 0.7 ? 'fused' : 'eager';
  t.test(
    `case ${n}: ${JSON.stringify({ ...s, group, sinks: !!sinks, softcap, scale, blockSize, impl })}`,
    async (t) => {
      const q = rng.floats(s.batch * s.seqLen * s.qHeads * s.headDim);
      const k = rng.floats(s.batch * kvLen * s.kvHeads * s.headDim);
      const v = rng.floats(k.length);
      const dOut = rng.floats(q.length);
      const dLse = rng.uniform() < 0.5 ? rng.floats(s.batch * s.qHeads * s.seqLen) : undefined;
      const opts = { mask, softcap, scale, blockSize, impl };
      const ref = refForward(q, k, v, sinks, s, opts);
      const g = refBackward(q, k, v, sinks, dOut, s, opts, dLse);
      const r = sinkAttentionForward(q, k, v, sinks, s, opts);
      expectClose(t, r.out, ref.out, 'out');
      expectClose(t, r.lse, ref.lse, 'lse');
      const a = sinkAttentionBackward(q, k, v, sinks, r.out, r.lse, dOut, s, { ...opts, dLse });
      expectClose(t, a.dq, g.dq, 'dq');
      expectClose(t, a.dk, g.dk, 'dk');
      expectClose(t, a.dv, g.dv, 'dv');
      if (sinks) expectClose(t, a.dSinks!, g.dSinks!, 'dSinks');
      else t.equal(a.dSinks, null);
    },
  );
}
