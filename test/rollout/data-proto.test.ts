import t from 'tap';

import { DataProto, DataProtoError, groupIds, mixSeed } from '../../lib/rollout/index.js';
import { deepEqual } from '../../lib/rollout/deep-equal.js';

/** A batch of `n` rows: ids [n, 3] int32, score [n] float32 scalar, uid strings; values encode the row. */
function batch(n: number, base = 0, meta: Record<string, unknown> = {}): DataProto {
  const ids = new Int32Array(n * 3);
  const score = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < 3; j++) ids[i * 3 + j] = (base + i) * 10 + j;
    score[i] = (base + i) / 2;
  }
  return DataProto.create({
    tensors: { ids: { data: ids, shape: [3] }, score: { data: score, shape: [] } },
    nonTensors: {
      uid: Array.from({ length: n }, (_, i) => `u${base + i}`),
      obj: Array.from({ length: n }, (_, i) => ({ row: base + i })),
    },
    meta,
  });
}

/** The row numbers a batch holds (from its ids column). */
const rowsOf = (b: DataProto): number[] => Array.from({ length: b.batchSize }, (_, i) => b.int32('ids')[i * 3] / 10);

t.test('create: shapes, inference, accessors and errors', async (t) => {
  const b = batch(4, 0, { temperature: 1 });
  t.equal(b.batchSize, 4);
  t.equal(b.length, 4);
  t.same(b.tensorKeys, ['ids', 'score']);
  t.same(b.nonTensorKeys, ['uid', 'obj']);
  t.same(b.shape('ids'), [4, 3]);
  t.same(b.shape('score'), [4]);
  t.same(Array.from(b.row('ids', 2)), [20, 21, 22]);
  t.equal(b.row('ids', 2).buffer, b.get('ids').buffer, 'rows are views');
  const item = b.item(1);
  t.same(Array.from(item.tensors.ids), [10, 11, 12]);
  t.same(item.nonTensors, { uid: 'u1', obj: { row: 1 } });
  t.same(item.meta, { temperature: 1 });
  t.ok(b.has('uid') && b.has('ids') && !b.has('nope'));
  t.ok(Object.isFrozen(b.meta));
  const inferred = DataProto.create({ tensors: { x: new Float32Array(12) }, batchSize: 4 });
  t.same(inferred.shape('x'), [4, 3], 'flat data: the row shape is inferred from batchSize');
  t.equal(
    DataProto.create({ tensors: { x: { data: new Float32Array(12), shape: [2, 3] } } }).batchSize,
    2,
    'batch size from the first column',
  );
  t.equal(DataProto.create({ batchSize: 5 }).batchSize, 5);
  t.equal(DataProto.create().batchSize, 0);
  t.equal(
    DataProto.create({ tensors: { x: new Float32Array(0) }, batchSize: 0 })
      .shape('x')
      .join(),
    '0,0',
  );
  t.match(
    b.toString(),
    /DataProto\(batchSize=4, tensors=\{ids: int32\[4, 3\], score: float32\[4\]\}, nonTensors=\[uid, obj\], meta=\[temperature\]\)/,
  );

  const bad: [() => unknown, RegExp | typeof TypeError][] = [
    [
      () => DataProto.create({ tensors: { x: { data: new Float32Array(7), shape: [3] } }, batchSize: 2 }),
      /'x' has 7 values but 2 rows of shape \[3\] need 6/,
    ],
    [
      () =>
        DataProto.create({
          tensors: { x: { data: new Float32Array(6), shape: [3] }, y: { data: new Int32Array(3), shape: [] } },
        }),
      /'y' has 3 values but 2 rows/,
    ],
    [() => DataProto.create({ tensors: { x: new Float64Array(4) as never }, batchSize: 2 }), TypeError],
    [() => DataProto.create({ tensors: { x: [1, 2] as never }, batchSize: 2 }), TypeError],
    [
      () => DataProto.create({ tensors: { x: new Float32Array(5) }, batchSize: 2 }),
      /not a multiple of the batch size 2/,
    ],
    [() => DataProto.create({ tensors: { x: new Float32Array(4) } }), /give batchSize or \{ data, shape \}/],
    [
      () => DataProto.create({ tensors: { x: { data: new Float32Array(4), shape: [-1] } } }),
      /shape must be an array of non-negative integers/,
    ],
    [() => DataProto.create({ tensors: { x: { data: new Float32Array(0), shape: [0] } } }), /empty row shape/],
    [
      () => DataProto.create({ tensors: { x: { data: new Float32Array(5), shape: [2] } } }),
      /not a multiple of its row size 2/,
    ],
    [() => DataProto.create({ nonTensors: { a: [1, 2], b: [1] } }), /'b' has 1 rows but the batch has 2/],
    [() => DataProto.create({ nonTensors: { a: 'xy' as never } }), TypeError],
    [
      () => DataProto.create({ nonTensors: { a: [1, 2] }, tensors: { a: new Float32Array(2) } }),
      /both as a tensor and as a non-tensor/,
    ],
    [() => DataProto.create({ batchSize: -1 }), /batchSize must be a non-negative integer/],
    [() => DataProto.create({ batchSize: 1, meta: [] as never }), TypeError],
    [() => DataProto.create(null as never), TypeError],
    [() => b.tensor('nope'), /no tensor column 'nope' \(has ids, score\)/],
    [() => b.nonTensor('nope'), /no non-tensor column 'nope'/],
    [() => b.float32('ids'), /is int32, not float32/],
    [() => b.int32('score'), /is float32, not int32/],
    [() => b.row('ids', 4), /not a row index of a batch of 4/],
    [() => b.item(-1), /not a row index/],
  ];
  for (const [fn, err] of bad) t.throws(fn, err);
  t.ok(new DataProtoError('x') instanceof RangeError);
});

t.test('union: merges, requires equal shared values', async (t) => {
  const a = batch(3, 0, { temperature: 1 });
  const extra = DataProto.create({
    tensors: { mask: { data: Float32Array.of(1, 0, 1), shape: [] } },
    nonTensors: { task: ['a', 'b', 'c'] },
    meta: { n: 2 },
  });
  const u = a.union(extra);
  t.same(u.tensorKeys, ['ids', 'score', 'mask']);
  t.same(u.nonTensorKeys, ['uid', 'obj', 'task']);
  t.same(u.meta, { temperature: 1, n: 2 });
  t.same(a.tensorKeys, ['ids', 'score'], 'inputs are not mutated');
  t.same(u.union(a).tensorKeys, u.tensorKeys, 'shared equal columns are fine');
  t.throws(() => a.union(batch(4)), /batch sizes differ \(3 and 4\)/);
  t.throws(
    () => a.union(batch(3, 1)),
    /tensor column 'ids' differs between the two batches \(int32 \[3\] vs int32 \[3\], different values\)/,
  );
  const otherDtype = DataProto.create({ tensors: { ids: { data: new Float32Array(9), shape: [3] } } });
  t.throws(() => a.union(otherDtype), /'ids' differs .*int32 \[3\] vs float32 \[3\]/);
  t.throws(
    () => a.union(DataProto.create({ nonTensors: { uid: ['u0', 'u1', 'x'] } })),
    /non-tensor column 'uid' differs/,
  );
  t.throws(() => a.union(DataProto.create({ batchSize: 3, meta: { temperature: 0.5 } })), /meta 'temperature' differs/);
  t.throws(
    () => a.union(DataProto.create({ nonTensors: { ids: [1, 2, 3] } })),
    /'ids' is a tensor column on one side and a non-tensor column on the other/,
  );
  t.throws(
    () => a.union(DataProto.create({ tensors: { uid: new Int32Array(3) }, batchSize: 3 })),
    /'uid' is a non-tensor column on one side and a tensor column on the other/,
  );
  t.throws(() => a.union({} as never), TypeError);
  const nan = DataProto.create({ tensors: { x: Float32Array.of(NaN, 1) }, batchSize: 2 });
  t.equal(
    nan.union(DataProto.create({ tensors: { x: Float32Array.of(NaN, 1) }, batchSize: 2 })).batchSize,
    2,
    'NaN equals NaN in union',
  );
});

t.test('concat: rows in order, meta checked, metrics merged', async (t) => {
  const parts = [
    batch(2, 0, { temperature: 1, metrics: { a: 1 } }),
    batch(3, 2, { temperature: 1, metrics: { a: 2, b: [3, 4] } }),
    batch(1, 5, { temperature: 1 }),
  ];
  const c = DataProto.concat(parts);
  t.equal(c.batchSize, 6);
  t.same(rowsOf(c), [0, 1, 2, 3, 4, 5]);
  t.same(Array.from(c.float32('score')), [0, 0.5, 1, 1.5, 2, 2.5]);
  t.same(c.nonTensor('uid'), ['u0', 'u1', 'u2', 'u3', 'u4', 'u5']);
  t.same(c.meta, { temperature: 1, metrics: { a: [1, 2], b: [3, 4] } });
  t.same(DataProto.concat([batch(1)]).meta, {});
  t.throws(() => DataProto.concat([]), /at least one batch/);
  t.throws(() => DataProto.concat([batch(1), {} as never]), TypeError);
  t.throws(
    () => DataProto.concat([batch(1, 0, { temperature: 1 }), batch(1, 0, { temperature: 2 })]),
    /meta 'temperature' of part 1 differs/,
  );
  t.throws(() => DataProto.concat([batch(1, 0, { temperature: 1 }), batch(1)]), /part 1 has no meta 'temperature'/);
  t.throws(() => DataProto.concat([batch(1), batch(1, 0, { metrics: 5 })]), /metrics of part 1 must be an object/);
  t.throws(
    () => DataProto.concat([batch(1), batch(1).select({ tensors: ['ids'] })]),
    /part 1 has tensor columns \[ids\]/,
  );
  t.throws(
    () => DataProto.concat([batch(1), batch(1).select({ nonTensors: [] })]),
    /part 1 has non-tensor columns \[\]/,
  );
  const wide = DataProto.create({
    tensors: { ids: { data: new Int32Array(4), shape: [4] }, score: { data: new Float32Array(1), shape: [] } },
    nonTensors: { uid: ['x'], obj: [{}] },
  });
  t.throws(() => DataProto.concat([batch(1), wide]), /'ids' has row shape \[4\] in part 1 but \[3\] in part 0/);
  const floaty = DataProto.create({
    tensors: { ids: { data: new Float32Array(3), shape: [3] }, score: { data: new Float32Array(1), shape: [] } },
    nonTensors: { uid: ['x'], obj: [{}] },
  });
  t.throws(() => DataProto.concat([batch(1), floaty]), /'ids' is float32 in part 1 but int32 in part 0/);
  const reordered = DataProto.create({
    tensors: { score: { data: new Float32Array(1), shape: [] }, ids: { data: new Int32Array(3), shape: [3] } },
    nonTensors: { obj: [{}], uid: ['x'] },
  });
  t.same(DataProto.concat([batch(1), reordered]).tensorKeys, ['ids', 'score'], 'column order may differ');
});

t.test('chunk, split, slice, padToDivisor: views and the divisibility rule', async (t) => {
  const b = batch(6, 0, { k: 1 });
  const chunks = b.chunk(3);
  t.same(chunks.map(rowsOf), [
    [0, 1],
    [2, 3],
    [4, 5],
  ]);
  t.same(
    chunks.map((c) => c.meta),
    [{ k: 1 }, { k: 1 }, { k: 1 }],
    'every chunk gets the meta',
  );
  t.equal(chunks[1].get('ids').buffer, b.get('ids').buffer, 'chunks are views');
  t.throws(() => b.chunk(4), /batch of 6 cannot be split into 4 equal chunks \(pad it with padToDivisor\(4\) first\)/);
  t.throws(() => b.chunk(0), /positive integer/);
  t.same(b.split(4).map(rowsOf), [
    [0, 1, 2, 3],
    [4, 5],
  ]);
  t.same(b.split(6).map(rowsOf), [[0, 1, 2, 3, 4, 5]]);
  t.same(DataProto.create({ batchSize: 0 }).split(2), []);
  t.throws(() => b.split(0), /positive integer/);
  t.same(rowsOf(b.slice(1, 3)), [1, 2]);
  t.same(rowsOf(b.slice(-2)), [4, 5]);
  t.same(rowsOf(b.slice(4, 100)), [4, 5]);
  t.same(rowsOf(b.slice(3, 1)), []);
  t.same(b.slice(0, -1).nonTensor('uid'), ['u0', 'u1', 'u2', 'u3', 'u4']);
  t.throws(() => b.slice(0.5), /integers/);
  const { batch: padded, pad } = batch(5).padToDivisor(4);
  t.equal(pad, 3);
  t.same(rowsOf(padded), [0, 1, 2, 3, 4, 0, 1, 2], 'padded with the leading rows (VERL)');
  t.same(
    padded.chunk(4).map((c) => c.batchSize),
    [2, 2, 2, 2],
  );
  t.same(rowsOf(padded.slice(0, -pad)), [0, 1, 2, 3, 4]);
  t.equal(batch(4).padToDivisor(2).pad, 0);
  t.same(rowsOf(batch(1).padToDivisor(3).batch), [0, 0, 0]);
  t.equal(DataProto.create({ batchSize: 0 }).padToDivisor(3).pad, 0);
  t.throws(() => b.padToDivisor(0), /positive integer/);
});

t.test('repeat (interleave or tile), select, selectRows, reorder, assign, drop', async (t) => {
  const b = batch(3, 0, { m: 1, n: 2 });
  t.same(rowsOf(b.repeat(2)), [0, 0, 1, 1, 2, 2], 'interleave: [a, a, b, b]');
  t.same(rowsOf(b.repeat(2, { interleave: false })), [0, 1, 2, 0, 1, 2], 'tile: [a, b, a, b]');
  t.same(rowsOf(b.repeat(2, false)), [0, 1, 2, 0, 1, 2], 'repeat(n, interleave) with a boolean');
  t.same(rowsOf(b.repeat(2, true)), [0, 0, 1, 1, 2, 2]);
  t.same(b.repeat(2).nonTensor('uid'), ['u0', 'u0', 'u1', 'u1', 'u2', 'u2']);
  t.same(Array.from(b.repeat(3).float32('score')), [0, 0, 0, 0.5, 0.5, 0.5, 1, 1, 1]);
  t.throws(() => b.repeat(0), /positive integer/);
  const s = b.select({ tensors: ['score'], nonTensors: ['uid'], meta: ['n'] });
  t.same([s.tensorKeys, s.nonTensorKeys, s.meta], [['score'], ['uid'], { n: 2 }]);
  t.same(b.select({ tensors: [] }).tensorKeys, []);
  t.same(b.select({}).tensorKeys, ['ids', 'score']);
  const byName = b.select(['uid', 'score']);
  t.same(
    [byName.tensorKeys, byName.nonTensorKeys, byName.meta],
    [['score'], ['uid'], { m: 1, n: 2 }],
    'a list of names of either kind',
  );
  t.throws(() => b.select(['nope']), /select: no column 'nope'/);
  t.throws(() => b.select({ tensors: ['x'] }), /no tensor column 'x'/);
  t.throws(() => b.select({ nonTensors: ['x'] }), /no non-tensor column 'x'/);
  t.throws(() => b.select({ meta: ['x'] }), /no meta key 'x'/);
  t.same(rowsOf(b.selectRows([2, 0, 2])), [2, 0, 2], 'indices in order, repeats allowed');
  t.same(rowsOf(b.selectRows([true, false, true])), [0, 2], 'boolean mask');
  t.same(b.selectRows(Int32Array.of(1)).nonTensor('obj'), [{ row: 1 }]);
  t.not(b.selectRows([0]).get('ids').buffer, b.get('ids').buffer, 'gathers copy');
  t.throws(() => b.selectRows([3]), /selectRows\[0\] = 3 is not a row index of a batch of 3/);
  t.throws(() => b.selectRows([true]), /boolean mask needs 3 entries, got 1/);
  t.same(rowsOf(b.reorder([2, 0, 1])), [2, 0, 1]);
  t.throws(() => b.reorder([0, 0, 1]), /row 0 appears twice/);
  t.throws(() => b.reorder([0, 1]), /permutation has 2 entries, the batch 3 rows/);
  t.throws(() => b.reorder([0, 1, 1.5]), /not a row index/);
  const a = b.assign({
    tensors: { w: { data: new Float32Array(3).fill(2), shape: [] } },
    nonTensors: { score: ['x', 'y', 'z'] },
    meta: { m: 5 },
  });
  t.same(a.tensorKeys, ['ids', 'w'], 'a non-tensor replaces a tensor of the same name');
  t.same(a.nonTensor('score'), ['x', 'y', 'z']);
  t.same(a.meta, { m: 5, n: 2 });
  t.same(a.assign({ tensors: { score: new Float32Array(3) } }).nonTensorKeys, ['uid', 'obj'], 'and the reverse');
  t.throws(() => b.assign({ tensors: { w: new Float32Array(4) } }), /not a multiple of the batch size 3/);
  const d = b.drop(['score', 'obj'], ['m']);
  t.same([d.tensorKeys, d.nonTensorKeys, d.meta], [['ids'], ['uid'], { n: 2 }]);
  t.throws(() => b.drop(['x']), /no column 'x'/);
  t.throws(() => b.drop([], ['x']), /no meta key 'x'/);
});

t.test('helpers: deepEqual, groupIds, mixSeed', async (t) => {
  t.ok(deepEqual({ a: [1, { b: NaN }], c: Float32Array.of(1) }, { c: Float32Array.of(1), a: [1, { b: NaN }] }));
  t.notOk(deepEqual(Float32Array.of(1), Int32Array.of(1)));
  t.notOk(deepEqual(Float32Array.of(1), Float32Array.of(1, 2)));
  t.notOk(deepEqual(Float32Array.of(1), Float32Array.of(2)));
  t.notOk(deepEqual([1], [1, 2]));
  t.notOk(deepEqual([1], { 0: 1 }));
  t.notOk(deepEqual({ a: 1 }, { b: 1 }));
  t.notOk(deepEqual({ a: 1 }, { a: 1, b: 2 }));
  t.ok(deepEqual(new Map([[1, { x: 1 }]]), new Map([[1, { x: 1 }]])));
  t.notOk(deepEqual(new Map([[1, 1]]), new Map([[2, 1]])));
  t.ok(deepEqual(new Set([1, 2]), new Set([2, 1])));
  t.notOk(deepEqual(new Set([1]), new Set([2])));
  t.ok(deepEqual(new Date(5), new Date(5)));
  t.notOk(deepEqual(new Date(5), new Date(6)));
  class K {}
  t.notOk(deepEqual(new K(), new K()), 'class instances are equal only to themselves');
  t.notOk(deepEqual(1, '1'));
  t.notOk(deepEqual(null, {}));
  t.same(Array.from(groupIds(['b', 'a', 'b', 'c', 'a'])), [0, 1, 0, 2, 1]);
  t.equal(mixSeed(1, 2, 3), mixSeed(1, 2, 3));
  t.not(mixSeed(1, 2, 3), mixSeed(1, 3, 2));
  t.not(mixSeed(0), mixSeed(2 ** 32), 'high bits count');
  const seeds = new Set(Array.from({ length: 1000 }, (_, i) => mixSeed(7, i)));
  t.equal(seeds.size, 1000);
  t.ok([...seeds].every((s) => Number.isInteger(s) && s >= 0 && s < 2 ** 31));
  t.throws(() => mixSeed(0.5), RangeError);
});
