import t from 'tap';

import {
  balanceBatch,
  DataProto,
  episodesToDataProto,
  greedyPartition,
  karmarkarKarp,
  packMicroBatches,
  partitionByBudget,
  unpackDocuments,
  type EpisodeRecord,
} from '../../lib/rollout/index.js';
import { unpackColumn } from '../../lib/rollout/packing.js';
import { partition, rowTokenCounts } from '../../lib/rollout/partition.js';
import { Rng } from '../../lib/tau/rng.js';

const PAD = 0;

/** Random episode records: prompt 3..20 tokens, response 0..40 with a random model mask and log-probs. */
function records(n: number, seed: number): EpisodeRecord[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, (_, i) => {
    const p = rng.int(3, 20);
    const r = i === 2 ? 0 : rng.int(1, 40);
    const mask = Array.from({ length: r }, () => (rng.chance(0.6) ? 1 : 0));
    return {
      uid: `g${i >> 1}`,
      taskId: `t${i}`,
      groupIndex: i >> 1,
      sampleIndex: i & 1,
      seed: i,
      promptIds: Array.from({ length: p }, () => rng.int(6, 1000)),
      responseIds: Array.from({ length: r }, () => rng.int(6, 1000)),
      responseMask: mask,
      logProbs: mask.map((m) => (m ? -rng.next() - 0.01 : 0)),
      hasLogProbs: true,
      reward: rng.chance(0.5) ? 1 : 0,
      numTurns: 1,
      termination: 'user_stop',
      truncated: false,
      aborted: false,
      error: null,
      parseErrors: 0,
      tokenization: 'ok',
      messages: [],
      tools: [],
      rewardInfo: null,
      ms: 0,
    } satisfies EpisodeRecord;
  });
}

t.test('episodesToDataProto: VERL layout, padding, positions, reward placement', async (t) => {
  const recs = records(5, 1);
  const b = episodesToDataProto(recs, { padTokenId: PAD, meta: { step: 3 } });
  const P = Math.max(...recs.map((r) => r.promptIds.length));
  const R = Math.max(...recs.map((r) => r.responseIds.length));
  t.same(b.shape('input_ids'), [5, P + R]);
  t.same(b.shape('responses'), [5, R]);
  t.same(b.shape('rewards'), [5]);
  t.equal(b.meta.step, 3);
  recs.forEach((r, i) => {
    const ids = Array.from(b.row('input_ids', i));
    t.same(ids.slice(P - r.promptIds.length, P), r.promptIds, 'prompt right-aligned');
    t.same(ids.slice(P, P + r.responseIds.length), r.responseIds, 'response left-aligned');
    t.ok(ids.slice(0, P - r.promptIds.length).every((x) => x === PAD));
    const attn = Array.from(b.row('attention_mask', i));
    t.equal(
      attn.reduce((s, v) => s + v, 0),
      r.promptIds.length + r.responseIds.length,
    );
    t.same(rowTokenCounts(b)[i], r.promptIds.length + r.responseIds.length);
    const pos = Array.from(b.row('position_ids', i)).slice(P - r.promptIds.length, P + r.responseIds.length);
    t.same(
      pos,
      pos.map((_, j) => j),
    );
    t.same(Array.from(b.row('response_mask', i)).slice(0, r.responseIds.length), r.responseMask);
    const scores = Array.from(b.row('token_level_scores', i));
    const last = r.responseMask.lastIndexOf(1);
    t.same(
      scores,
      scores.map((_, j) => (j === last ? r.reward : 0)),
    );
  });
  t.throws(() => episodesToDataProto(recs, { padTokenId: 0.5 }), RangeError);
  const empty = episodesToDataProto([], { padTokenId: PAD });
  t.equal(empty.batchSize, 0);
  t.equal(empty.meta.has_rollout_log_probs, false);
});

t.test('packing: balanced micro-batches within the budget; unpack gives back every sequence', async (t) => {
  for (const [seed, n, budget, method] of [
    [1, 9, 64, 'karmarkar-karp'],
    [2, 17, 100, 'greedy'],
    [3, 12, 61, 'sequential'],
    [4, 30, 200, 'karmarkar-karp'],
  ] as const) {
    const recs = records(n, seed);
    const batch = episodesToDataProto(recs, { padTokenId: PAD });
    const P = batch.shape('prompts')[1];
    const R = batch.shape('responses')[1];
    const L = P + R;
    const micro = packMicroBatches(batch, {
      maxTokens: budget,
      method,
      columns: ['response_mask', 'rollout_log_probs', 'rewards', 'position_ids', 'attention_mask'],
    });
    const seen: number[] = [];
    const total = recs.reduce((s, r) => s + r.promptIds.length + r.responseIds.length, 0);
    t.ok(micro.length >= Math.ceil(total / budget), `${method}: at least ceil(total / budget) micro-batches`);
    for (const mb of micro) {
      t.ok(mb.numTokens <= budget, `${method}: ${mb.numTokens} tokens within ${budget}`);
      t.equal(mb.inputIds.length, mb.numTokens);
      t.equal(mb.cuSeqlens[0], 0);
      t.equal(mb.cuSeqlens[mb.rows.length], mb.numTokens);
      for (let d = 0; d < mb.rows.length; d++) {
        const row = mb.rows[d];
        seen.push(row);
        const r = recs[row];
        const s = mb.cuSeqlens[d];
        const e = mb.cuSeqlens[d + 1];
        t.same(Array.from(mb.inputIds.subarray(s, e)), [...r.promptIds, ...r.responseIds], `row ${row}: tokens`);
        t.ok(
          mb.documentIds.subarray(s, e).every((x) => x === d),
          'document ids',
        );
        t.same(
          Array.from(mb.positionIds.subarray(s, e)),
          Array.from({ length: e - s }, (_, j) => j),
          'positions restart per document',
        );
        t.same(
          Array.from(mb.columns.position_ids.subarray(s, e)),
          Array.from(mb.positionIds.subarray(s, e)),
          'the batch positions agree',
        );
        t.ok(mb.columns.attention_mask.subarray(s, e).every((x) => x === 1));
        const p = r.promptIds.length;
        t.same(
          Array.from(mb.columns.response_mask.subarray(s, e)),
          [...new Array(p).fill(0), ...r.responseMask],
          'response columns sit on the response tokens',
        );
        t.ok(
          mb.columns.rewards.subarray(s, e).every((x) => x === r.reward),
          'scalar columns are broadcast',
        );
      }
    }
    t.same(
      seen.slice().sort((a, b) => a - b),
      recs.map((r, i) => (r.responseIds.length + r.promptIds.length > 0 ? i : -1)).filter((i) => i >= 0),
      'every row exactly once',
    );
    const lp = unpackColumn(
      batch,
      micro,
      micro.map((mb) => mb.columns.rollout_log_probs),
      { width: R },
    );
    t.same(Array.from(lp), Array.from(batch.float32('rollout_log_probs')), 'unpack(pack(log-probs)) is the identity');
    const ids = unpackColumn(
      batch,
      micro,
      micro.map((mb) => mb.inputIds),
    );
    const attn = batch.int32('attention_mask');
    const orig = batch.int32('input_ids');
    let bad = 0;
    for (let i = 0; i < batch.batchSize * L; i++) if (ids[i] !== (attn[i] ? orig[i] : 0)) bad++;
    t.equal(bad, 0, 'unpack(pack(input ids)) on the real tokens');
    const docs = micro.flatMap(unpackDocuments);
    t.equal(docs.length, seen.length);
    for (const d of docs) t.same(Array.from(d.inputIds), [...recs[d.row].promptIds, ...recs[d.row].responseIds]);
  }
});

t.test('packing errors', async (t) => {
  const batch = episodesToDataProto(records(4, 5), { padTokenId: PAD });
  const longest = Math.max(...rowTokenCounts(batch));
  t.throws(() => packMicroBatches(batch, { maxTokens: longest - 1 }), /more than the micro-batch budget/);
  t.throws(
    () => packMicroBatches(batch, { maxTokens: longest - 1, method: 'sequential' }),
    /more than the micro-batch budget/,
  );
  t.throws(() => packMicroBatches(batch, { maxTokens: 0 }), /positive integer/);
  t.throws(() => packMicroBatches(batch, { maxTokens: 500, method: 'magic' as never }), /partition method/);
  t.throws(() => packMicroBatches(batch, { maxTokens: 500, columns: ['uid'] }), /no tensor column 'uid'/);
  const L = batch.shape('input_ids')[1];
  const wide = batch.assign({
    tensors: {
      wide: { data: new Float32Array(4 * (L + 1)), shape: [L + 1] },
      grid: { data: new Float32Array(8), shape: [1, 2] },
    },
  });
  t.throws(
    () => packMicroBatches(wide, { maxTokens: 500, columns: ['wide'] }),
    /packing needs \[\] or \[k\] with k <= /,
  );
  t.throws(() => packMicroBatches(wide, { maxTokens: 500, columns: ['grid'] }), /row shape \[1, 2\]/);
  const holes = batch.assign({
    tensors: {
      attention_mask: { data: Int32Array.from(batch.int32('attention_mask'), (v, i) => (i === 0 ? 1 : v)), shape: [L] },
    },
  });
  t.throws(() => packMicroBatches(holes, { maxTokens: 500 }), /not one contiguous run/);
  const twos = batch.assign({
    tensors: { attention_mask: { data: Int32Array.from(batch.int32('attention_mask'), (v) => v * 2), shape: [L] } },
  });
  t.throws(() => packMicroBatches(twos, { maxTokens: 500 }), /not 0 or 1/);
  const flat = DataProto.create({
    tensors: {
      input_ids: { data: new Int32Array(4), shape: [2, 2] },
      attention_mask: { data: new Int32Array(4), shape: [4] },
    },
  });
  t.throws(() => packMicroBatches(flat, { maxTokens: 5 }), /row shape \[L\]/);
  const mismatch = DataProto.create({
    tensors: {
      input_ids: { data: new Int32Array(4), shape: [4] },
      attention_mask: { data: new Int32Array(2), shape: [2] },
    },
  });
  t.throws(() => packMicroBatches(mismatch, { maxTokens: 5 }), /must have row shape \[4\]/);
  const micro = packMicroBatches(batch, { maxTokens: 500 });
  t.throws(() => unpackColumn(batch, micro, []), /0 value arrays for/);
  t.throws(
    () =>
      unpackColumn(
        batch,
        micro,
        micro.map(() => new Float32Array(1)),
      ),
    /has \d+ tokens but 1 values/,
  );
  t.throws(
    () =>
      unpackColumn(
        batch,
        micro,
        micro.map((m) => m.inputIds),
        { width: L + 1 },
      ),
    /width must be an integer/,
  );
  t.throws(
    () =>
      unpackColumn(
        batch.slice(0, 2),
        micro,
        micro.map((m) => m.inputIds),
      ),
    /outside the batch|tokens, but row/,
  );
  const tampered = micro.map((m) => ({
    ...m,
    cuSeqlens: Int32Array.from(m.cuSeqlens, (v, i) => (i === 1 ? v - 1 : v)),
  }));
  t.throws(
    () =>
      unpackColumn(
        batch,
        tampered,
        micro.map((m) => m.inputIds),
      ),
    /document 0: \d+ tokens, but row/,
  );
  t.same(packMicroBatches(batch.slice(0, 0), { maxTokens: 5 }), []);
});

t.test('partitions: Karmarkar–Karp and greedy, equal sizes, budgets', async (t) => {
  const sums = (parts: number[][], w: number[]): number[] => parts.map((p) => p.reduce((s, i) => s + w[i], 0));
  const w = [4, 5, 6, 7, 8];
  const kk = karmarkarKarp(w, 2);
  t.same(
    sums(kk, w).sort((a, b) => a - b),
    [14, 16],
    'largest differencing on the textbook example (diff 2)',
  );
  t.same(kk.flat().sort(), [0, 1, 2, 3, 4]);
  const rng = new Rng(9);
  for (let trial = 0; trial < 30; trial++) {
    const n = rng.int(1, 40);
    const k = rng.int(1, 6);
    const weights = Array.from({ length: n }, () => rng.int(0, 500));
    for (const method of ['karmarkar-karp', 'greedy'] as const) {
      const parts = partition(weights, k, method);
      t.equal(parts.length, k);
      t.same(
        parts.flat().sort((a, b) => a - b),
        weights.map((_, i) => i),
        'every item once',
      );
      const s = sums(parts, weights);
      const spread = Math.max(...s) - Math.min(...s);
      if (n >= k) t.ok(spread <= Math.max(...weights), `${method}: spread ${spread} <= the largest item`);
      const m = n - (n % k);
      if (m > 0) {
        const eq = partition(weights.slice(0, m), k, method, true);
        t.ok(
          eq.every((p) => p.length === m / k),
          `${method}: equal sizes`,
        );
        t.same(
          eq.flat().sort((a, b) => a - b),
          weights.slice(0, m).map((_, i) => i),
        );
      }
    }
  }
  t.same(karmarkarKarp([], 3), [[], [], []]);
  t.same(greedyPartition([3, 1, 2], 1), [[0, 1, 2]]);
  t.throws(() => karmarkarKarp([1, 2, 3], 2, { equalSize: true }), /multiple of the number of parts/);
  t.throws(() => karmarkarKarp([1, -2], 2), /weights\[1\] must be a finite number >= 0/);
  t.throws(() => karmarkarKarp([1], 0), /positive integer/);
  t.throws(() => karmarkarKarp('x' as never, 1), TypeError);
  t.throws(() => partition([1], 1, 'x' as never), /partition method/);
  const lengths = [50, 10, 40, 30, 20, 60, 5];
  const mbs = partitionByBudget(lengths, 70);
  t.ok(sums(mbs, lengths).every((s) => s <= 70));
  t.equal(mbs.length, 4, 'the fewest parts: ceil(215 / 70) = 4');
  t.same(
    mbs.flat().sort((a, b) => a - b),
    [0, 1, 2, 3, 4, 5, 6],
  );
  t.same(partitionByBudget([], 5), []);
  t.same(partitionByBudget([5, 5, 5], 5), [[0], [1], [2]]);
  t.throws(() => partitionByBudget([6], 5), /more than the micro-batch budget/);
  t.throws(() => partitionByBudget([1.5], 5), /non-negative integer/);
  t.throws(() => partitionByBudget([1], 0), /positive integer/);
});

t.test('balanceBatch reorders rows so that equal chunks carry equal work', async (t) => {
  const recs = records(24, 12);
  const batch = episodesToDataProto(recs, { padTokenId: PAD });
  const tokens = rowTokenCounts(batch);
  const { batch: balanced, partitions, workloads, metrics } = balanceBatch(batch, 4);
  t.equal(partitions.length, 4);
  t.ok(partitions.every((p) => p.length === 6));
  const chunks = balanced.chunk(4);
  chunks.forEach((c, i) => {
    t.same(
      c.nonTensor('task_id'),
      partitions[i].map((r) => `t${r}`),
      'chunk i holds partition i',
    );
    t.equal(
      rowTokenCounts(c).reduce((s, x) => s + x, 0),
      workloads[i],
    );
  });
  const spreadAfter = Math.max(...workloads) - Math.min(...workloads);
  t.ok(spreadAfter <= Math.max(...tokens), `balanced spread ${spreadAfter}`);
  t.ok(
    metrics['global_seqlen/minmax_diff'] >=
      metrics['global_seqlen/balanced_max'] - metrics['global_seqlen/balanced_min'],
  );
  t.equal(metrics['global_seqlen/mean'], tokens.reduce((s, x) => s + x, 0) / 4);
  const quad = balanceBatch(batch, 3, { method: 'greedy', workload: (n) => 24576 * n + n * n });
  t.equal(quad.partitions.length, 3);
  const loose = balanceBatch(batch.slice(0, 7), 2, { equalSize: false });
  t.same(
    loose.partitions.flat().sort((a, b) => a - b),
    [0, 1, 2, 3, 4, 5, 6],
  );
  t.notOk('global_seqlen/min' in loose.metrics, 'no before-metrics when the batch does not divide');
  t.throws(() => balanceBatch(batch.slice(0, 7), 2), /multiple of the number of parts/);
  t.throws(() => balanceBatch(batch, 0), /positive integer/);
});
