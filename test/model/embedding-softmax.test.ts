import t from 'tap';

import {
  crossEntropyBackward,
  crossEntropyForward,
  embeddingBackward,
  embeddingForward,
  logSoftmaxBackward,
  logSoftmaxForward,
} from '../../lib/model/index.js';
import {
  closeness,
  dot,
  float32Grad,
  numericGrad,
  pick,
  randint,
  randn,
  refLogSoftmax,
  sampleIndices,
  sameBits,
} from './fixtures/reference.js';

t.test('embedding gathers rows and scatter-adds gradients (repeated ids accumulate)', async (t) => {
  for (const [T, V, D] of [
    [1, 1, 1],
    [9, 5, 7],
    [300, 37, 129],
  ]) {
    const table = randn(V * D, V);
    const ids = randint(T, D, 0, V);
    const out = embeddingForward({ table, ids, vocab: V, dim: D });
    let exact = true;
    for (let t2 = 0; t2 < T; t2++)
      for (let i = 0; i < D; i++) if (out[t2 * D + i] !== table[ids[t2] * D + i]) exact = false;
    t.ok(exact, `gather ${T}x${V}x${D}`);
    const dout = randn(T * D, T + 1);
    const start = randn(V * D, 3);
    const dtable = embeddingBackward({ ids, dout, vocab: V, dim: D, dtable: start.slice() });
    const ref = Float64Array.from(start);
    for (let t2 = 0; t2 < T; t2++) for (let i = 0; i < D; i++) ref[ids[t2] * D + i] += dout[t2 * D + i];
    t.ok(closeness(dtable, ref, 1e-6, 1e-6) <= 1, `scatter-add ${T}x${V}x${D}`);
    // the gather is linear: its finite-difference gradient is the scatter-add
    if (T * V * D < 1000) {
      const num = numericGrad((v) => {
        let s = 0;
        for (let t2 = 0; t2 < T; t2++) for (let i = 0; i < D; i++) s += dout[t2 * D + i] * v[ids[t2] * D + i];
        return s;
      }, table);
      t.ok(closeness(embeddingBackward({ ids, dout, vocab: V, dim: D }), num, 1e-5, 1e-6) <= 1, 'finite differences');
    }
  }
});

t.test('log-softmax forward: lse, target log-probs, entropy, temperature, ignored targets', async (t) => {
  for (const [T, V, temperature] of [
    [1, 1, 1],
    [4, 33, 1],
    [9, 1000, 0.7],
    [129, 257, 1.3],
  ]) {
    const logits = randn(T * V, V, -4, 4);
    const targets = randint(T, T, 0, V);
    targets[0] = -1;
    const r = logSoftmaxForward({ logits, targets, rows: T, vocab: V, temperature });
    const ref = refLogSoftmax(logits, targets, T, V, 1 / temperature);
    t.ok(closeness(r.lse, ref.lse, 1e-6, 1e-5) <= 1, `lse ${T}x${V}`);
    t.ok(closeness(r.logp!, ref.logp, 1e-5, 1e-5) <= 1, `logp ${T}x${V}`);
    t.ok(closeness(r.entropy, ref.entropy, 1e-4, 1e-5) <= 1, `entropy ${T}x${V}`);
    t.equal(r.logp![0], 0, 'no target: logp 0');
  }
  // large logits stay finite; -Infinity logits (masked tokens) get probability 0
  const logits = new Float32Array([90, -90, 0, 80, -Infinity, 1, 2, 3]);
  const r = logSoftmaxForward({ logits, targets: Int32Array.from([0, 3]), rows: 2, vocab: 4 });
  t.ok([...r.lse, ...r.logp!, ...r.entropy].every(Number.isFinite), 'finite with extreme and -Infinity logits');
  const ref = refLogSoftmax(logits, [0, 3], 2, 4);
  t.ok(closeness(r.logp!, ref.logp, 1e-5, 1e-5) <= 1);
  t.ok(closeness(r.entropy, ref.entropy, 1e-4, 1e-5) <= 1);
  const g = logSoftmaxBackward({
    logits,
    targets: Int32Array.from([0, 3]),
    rows: 2,
    vocab: 4,
    lse: r.lse,
    entropy: r.entropy,
    dlogp: new Float32Array([1, 1]),
    dentropy: new Float32Array([1, 1]),
  });
  t.ok(g.every(Number.isFinite), 'backward is finite too');
  t.equal(g[4], 0, 'a -Infinity logit gets no gradient');
  const noTargets = logSoftmaxForward({ logits: randn(6, 1), rows: 2, vocab: 3 });
  t.equal(noTargets.logp, null, 'no targets: no logp');
});

t.test('log-softmax backward: gradients of logp and entropy by finite differences', async (t) => {
  for (const [T, V, temperature, sampled] of [
    [4, 33, 1, false],
    [5, 17, 0.6, false],
    [9, 1000, 1.4, true],
  ] as const) {
    const scale = 1 / temperature;
    const logits = randn(T * V, 50 + V, -3, 3);
    const targets = randint(T, 51, 0, V);
    targets[1] = -1;
    const a = randn(T, 52);
    const b = randn(T, 53);
    const fwd = logSoftmaxForward({ logits, targets, rows: T, vocab: V, temperature });
    const idx = sampled ? sampleIndices(logits.length, 24, 54) : undefined;
    const cases: [string, Float32Array | null, Float32Array | null, (x: ArrayLike<number>) => number][] = [
      ['logp', a, null, (x) => dot(a, refLogSoftmax(x, targets, T, V, scale).logp)],
      ['entropy', null, b, (x) => dot(b, refLogSoftmax(x, targets, T, V, scale).entropy)],
      [
        'both',
        a,
        b,
        (x) => {
          const r = refLogSoftmax(x, targets, T, V, scale);
          return dot(a, r.logp) + dot(b, r.entropy);
        },
      ],
    ];
    for (const [name, dlogp, dentropy, loss] of cases) {
      const d = logSoftmaxBackward({
        logits,
        targets,
        rows: T,
        vocab: V,
        temperature,
        lse: fwd.lse,
        entropy: fwd.entropy,
        dlogp,
        dentropy,
      });
      const num = numericGrad((x) => loss(x), logits, idx);
      t.ok(closeness(idx ? pick(d, idx) : d, num, 1e-3, 1e-5) <= 1, `${name} ${T}x${V} temperature ${temperature}`);
    }
    // in place: dlogits may be the logits buffer
    const both = logSoftmaxBackward({
      logits,
      targets,
      rows: T,
      vocab: V,
      temperature,
      lse: fwd.lse,
      entropy: fwd.entropy,
      dlogp: a,
      dentropy: b,
    });
    const buf = logits.slice();
    logSoftmaxBackward({
      logits: buf,
      targets,
      rows: T,
      vocab: V,
      temperature,
      lse: fwd.lse,
      entropy: fwd.entropy,
      dlogp: a,
      dentropy: b,
      dlogits: buf,
    });
    t.ok(sameBits(buf, both), 'in place gives the same gradient');
    const acc = logSoftmaxBackward({
      logits,
      targets,
      rows: T,
      vocab: V,
      temperature,
      lse: fwd.lse,
      entropy: fwd.entropy,
      dlogp: a,
      dentropy: b,
      dlogits: both.slice(),
      accumulate: true,
    });
    t.ok(
      closeness(
        acc,
        both.map((v) => 2 * v),
        1e-6,
        1e-8,
      ) <= 1,
      'accumulate',
    );
  }
  const [T, V] = [3, 11];
  const logits = randn(T * V, 61, -2, 2);
  const targets = randint(T, 62, 0, V);
  const a = randn(T, 63);
  const b = randn(T, 64);
  const fwd = logSoftmaxForward({ logits, targets, rows: T, vocab: V });
  const d = logSoftmaxBackward({
    logits,
    targets,
    rows: T,
    vocab: V,
    lse: fwd.lse,
    entropy: fwd.entropy,
    dlogp: a,
    dentropy: b,
  });
  const idx = sampleIndices(logits.length, 10, 65);
  const loss = (): number => {
    const r = logSoftmaxForward({ logits, targets, rows: T, vocab: V });
    return dot(a, r.logp!) + dot(b, r.entropy);
  };
  t.ok(closeness(pick(d, idx), float32Grad(loss, logits, idx, 1e-2), 3e-2, 3e-3) <= 1, 'native forward/backward agree');
});

t.test('cross-entropy: mean over rows with targets, gradient by finite differences', async (t) => {
  for (const [T, V] of [
    [1, 2],
    [7, 29],
    [65, 513],
  ]) {
    const logits = randn(T * V, T * 3 + V, -3, 3);
    const targets = randint(T, 71, 0, V);
    if (T > 2) targets[2] = -100;
    const r = crossEntropyForward({ logits, targets, rows: T, vocab: V });
    const ref = refLogSoftmax(logits, targets, T, V);
    let sum = 0;
    let count = 0;
    targets.forEach((y, i) => {
      if (y >= 0) {
        sum -= ref.logp[i];
        count++;
      }
    });
    t.equal(r.count, count);
    t.ok(Math.abs(r.loss - sum / count) <= 1e-5 * Math.max(1, sum / count), `loss ${T}x${V}`);
    if (T > 2) t.equal(r.losses[2], 0, 'ignored row has loss 0');
    const d = crossEntropyBackward({ logits, targets, rows: T, vocab: V, lse: r.lse });
    const idx = T * V > 500 ? sampleIndices(logits.length, 40, 72) : undefined;
    const num = numericGrad(
      (x) => {
        const f = refLogSoftmax(x, targets, T, V);
        let s = 0;
        targets.forEach((y, i) => {
          if (y >= 0) s -= f.logp[i];
        });
        return s / count;
      },
      logits,
      idx,
    );
    t.ok(closeness(idx ? pick(d, idx) : d, num, 1e-3, 1e-6) <= 1, `gradient ${T}x${V}`);
    if (T > 2)
      t.ok(
        d.subarray(2 * V, 3 * V).every((v) => v === 0),
        'ignored row gets no gradient',
      );
  }
  const none = crossEntropyForward({ logits: randn(6, 1), targets: Int32Array.from([-1, -1]), rows: 2, vocab: 3 });
  t.same([none.loss, none.count], [0, 0], 'no targets: loss 0');
  const d = crossEntropyBackward({
    logits: randn(6, 1),
    targets: Int32Array.from([-1, -1]),
    rows: 2,
    vocab: 3,
    lse: none.lse,
  });
  t.ok(d.every((v) => v === 0));
});
