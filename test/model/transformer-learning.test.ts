// A real learning test: plain SFT on a synthetic copy task ("BOS a1..an SEP" -> "a1..an EOS",
// distinct symbols, n = 4..8) drives the loss near zero, then greedy decoding through the KV
// cache (batched sessions of the policy) reproduces the copies of unseen sequences. Copying
// beyond the first layer's sliding window of 8 keys needs the full-attention layer.
import t from 'tap';

import { TransformerPolicy, modelConfig, packSequences } from '../../lib/model/index.js';
import { rng } from './fixtures/reference.js';

const BOS = 1;
const SEP = 2;
const EOS = 3;
const FIRST_SYMBOL = 4;
const SYMBOLS = 16;

function makeExamples(seed: number): () => { tokens: number[]; lossMask: number[]; symbols: number[] } {
  const r = rng(seed);
  return () => {
    const n = 4 + Math.floor(r() * 5);
    const pool = Array.from({ length: SYMBOLS }, (_, i) => FIRST_SYMBOL + i);
    const symbols: number[] = [];
    for (let i = 0; i < n; i++) symbols.push(pool.splice(Math.floor(r() * pool.length), 1)[0]);
    const tokens = [BOS, ...symbols, SEP, ...symbols, EOS];
    // score the copy: the tokens after SEP
    return { tokens, lossMask: tokens.map((_, i) => (i > n + 1 ? 1 : 0)), symbols };
  };
}

t.test(
  'SFT on a copy task drives the loss near zero; greedy KV-cache decoding then copies unseen sequences',
  async (t) => {
    const config = modelConfig({
      layers: 2,
      width: 64,
      heads: 4,
      kvHeads: 2,
      headDim: 16,
      window: 8,
      vocab: 20,
      context: 64,
      ffn: 128,
      ropeTheta: 10000,
      normEps: 1e-5,
      initStd: 0.05,
      swiglu: 'clamped',
      bias: false,
    });
    const policy = TransformerPolicy.create(config, { seed: 3 });
    const train = makeExamples(1);
    const steps = 600;
    const losses: number[] = [];
    const probe = packSequences(Array.from({ length: 32 }, makeExamples(7)));
    const before = await policy.logProbs(probe);
    for (let step = 1; step <= steps; step++) {
      // two micro-batches of 16 sequences; weights 1 / (all targets) make the loss their joint mean
      const micro = [
        packSequences(Array.from({ length: 16 }, train)),
        packSequences(Array.from({ length: 16 }, train)),
      ];
      const total = micro.reduce((n, b) => n + b.targets.filter((x) => x >= 0).length, 0);
      const lr = 3e-3 * Math.min(1, step / 30) * (0.1 + 0.9 * 0.5 * (1 + Math.cos((Math.PI * step) / steps)));
      const r = await policy.trainStep(
        micro,
        (b) => ({
          kind: 'cross-entropy',
          weights: Float32Array.from(b.targets ?? [], (x) => (x >= 0 ? 1 / total : 0)),
        }),
        {
          optimizer: { lr, weightDecay: 0.01, maxGradNorm: 1 },
        },
      );
      losses.push(r.loss);
      if (r.targets !== total) t.fail('every target counted');
      if (!r.optimizer.applied) t.fail(`step ${step} was skipped (non-finite gradient norm)`);
    }
    const start = losses.slice(0, 10).reduce((a, b) => a + b, 0) / 10;
    const end = losses.slice(-20).reduce((a, b) => a + b, 0) / 20;
    t.ok(start > 2, `initial loss is about log(20) (${start.toFixed(3)})`);
    t.ok(end < 0.02, `final loss near zero (${end.toFixed(4)} over the last 20 steps)`);

    const after = await policy.logProbs(probe);
    const meanLogp = (r: { logProbs: Float32Array }): number => {
      let sum = 0;
      let n = 0;
      probe.targets.forEach((y, i) => {
        if (y >= 0) {
          sum += r.logProbs[i];
          n++;
        }
      });
      return sum / n;
    };
    t.ok(
      meanLogp(before) < -2 && meanLogp(after) > -0.02,
      `held-out copy log-likelihood ${meanLogp(before).toFixed(3)} -> ${meanLogp(after).toFixed(4)}`,
    );

    const test = makeExamples(999);
    const cases = Array.from({ length: 50 }, test);
    const results = await Promise.all(
      cases.map((c, i) => {
        const s = policy.createSession({ seed: i });
        s.append([BOS, ...c.symbols, SEP]);
        return s.sample({ maxTokens: 12, temperature: 0, stop: [EOS] }).finally(() => s.dispose());
      }),
    );
    const exact = results.filter(
      (r, i) => JSON.stringify(Array.from(r.tokens)) === JSON.stringify([...cases[i].symbols, EOS]),
    ).length;
    t.equal(exact, 50, `greedy decoding copies all 50 unseen sequences (${exact}/50)`);
    t.ok(
      results.every((r) => r.finishReason === 'stop'),
      'each copy ends with EOS',
    );
    policy.dispose();
  },
);
