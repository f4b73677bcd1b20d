import t from 'tap';

import {
  Box,
  Discrete,
  MultiBinary,
  MultiDiscrete,
  RandomGenerator,
  captureWarnings,
  spaceFromJSON,
} from '../../lib/gym/index.js';
import { canCast } from '../../lib/gym/spaces/space.js';

t.test('Discrete', async (t) => {
  const d = new Discrete(5, { start: -2, seed: 1 });
  t.equal(d.toString(), 'Discrete(5, start=-2)');
  t.equal(new Discrete(3).toString(), 'Discrete(3)');
  t.same(d.shape, []);
  const seen = new Set<number>();
  for (let i = 0; i < 500; i++) seen.add(d.sample());
  t.same(
    [...seen].sort((a, b) => a - b),
    [-2, -1, 0, 1, 2],
    'samples cover start..start+n-1',
  );
  t.ok(d.contains(-2) && d.contains(2));
  t.notOk(d.contains(3), 'above the range');
  t.notOk(d.contains(-3), 'below the range');
  t.notOk(d.contains(0.5), 'not an integer');
  t.notOk(d.contains('1'), 'not a number');
  // mask: only entries with 1; all zero gives start (Gymnasium)
  const maskedSeen = new Set(Array.from({ length: 50 }, () => d.sample(Int8Array.of(0, 1, 0, 1, 0))));
  t.same([...maskedSeen].sort(), [-1, 1], 'masked samples use only the entries with 1');
  t.equal(d.sample([0, 0, 0, 0, 0]), -2, 'an all-zero mask returns start');
  t.throws(() => d.sample([0, 1]), RangeError, 'mask length');
  t.throws(() => d.sample([0, 1, 2, 0, 0]), RangeError, 'mask values must be 0/1');
  // probability
  t.same(new Set(Array.from({ length: 50 }, () => d.sample(null, [0, 0, 1, 0, 0]))), new Set([0]), 'probability one');
  t.throws(() => d.sample(null, [0.5, 0.5, 0.5, 0, 0]), RangeError, 'probabilities must sum to 1');
  t.throws(() => d.sample([1, 1, 1, 1, 1], [0.2, 0.2, 0.2, 0.2, 0.2]), RangeError, 'not both');
  // seeding
  const a = new Discrete(100, { seed: 42 });
  const b = new Discrete(100);
  t.equal(b.seed(42), 42, 'seed returns the seed used');
  t.same(
    Array.from({ length: 20 }, () => a.sample()),
    Array.from({ length: 20 }, () => b.sample()),
    'same seed, same samples',
  );
  t.ok(typeof new Discrete(4).seed() === 'number', 'seed() without a seed picks one');
  t.throws(() => new Discrete(0), RangeError);
  t.throws(() => new Discrete(2.5), TypeError);
  t.ok(d.equals(new Discrete(5, { start: -2 })));
  t.notOk(d.equals(new Discrete(5)));
  t.same(d.toJsonable([1, 2]), [1, 2]);
  t.same(d.fromJsonable([1, 2]), [1, 2]);
  t.throws(() => d.fromJsonable(['x']), TypeError);
  t.ok(spaceFromJSON(JSON.stringify(d.toJSON())).equals(d), 'JSON round trip');
  t.ok(d.isNpFlattenable);
});

t.test('Box: construction and bounds', async (t) => {
  const b = new Box(-1, 2, [3, 4]);
  t.equal(b.dtype, 'float32');
  t.same(b.shape, [3, 4]);
  t.equal(b.size, 12);
  t.equal(b.toString(), 'Box(-1., 2., (3, 4), float32)');
  const v = new Box([-1, -2], [2, 4], undefined, 'float64');
  t.same(v.shape, [2]);
  t.equal(v.toString(), 'Box([-1. -2.], [2. 4.], (2,), float64)');
  t.same(new Box(0, 1).shape, [1], 'scalar bounds give shape [1]');
  t.same(
    new Box(
      [
        [0, 0, 0],
        [1, 1, 1],
      ],
      5,
    ).shape,
    [2, 3],
    'nested bounds give the shape',
  );
  t.same(new Box(0, 1, { shape: [2], dtype: 'uint8' }).dtype, 'uint8', 'options form');
  t.equal(new Box(0.1, 1).low[0], Math.fround(0.1), 'float32 bounds are rounded to float32');
  t.throws(() => new Box(1, 0), /low values must be less than or equal to high/);
  t.throws(() => new Box(NaN, 0), RangeError);
  t.throws(() => new Box(0, NaN), RangeError);
  t.throws(() => new Box([0, 0], [1, 1, 1]), RangeError);
  t.throws(() => new Box(-Infinity, 1, [2], 'uint8'), /unsigned/);
  t.throws(() => new Box(0, 300, [2], 'uint8'), RangeError);
  t.throws(() => new Box(0.5, 3, [2], 'int32'), RangeError);
  t.throws(() => new Box(0, 1, [2], 'int64' as never), TypeError);
  t.throws(() => new Box('a' as never, 1), TypeError);
  const ib = new Box(-Infinity, Infinity, [2], 'int8');
  t.same(Array.from(ib.low), [-128, -128], 'signed int -inf becomes the dtype minimum');
  t.same(Array.from(ib.high), [127, 127]);
  t.notOk(ib.isBounded(), 'but stays unbounded');
  const half = new Box([0, -Infinity], [Infinity, 1]);
  t.ok(half.isBounded('below') === false && half.isBounded('above') === false);
  t.ok(new Box(0, Infinity, [2]).isBounded('below'));
  t.ok(new Box(-Infinity, 0, [2]).isBounded('above'));
  t.ok(new Box(0, 1, [2]).isBounded());
  t.throws(() => b.isBounded('sideways' as never), RangeError);
});

t.test('Box: sampling follows the kind of interval', async (t) => {
  const b = new Box([0, 0, -Infinity, -Infinity], [1, Infinity, 5, Infinity], [4], 'float64', 3);
  let lowBoundedMin = Infinity;
  let upperMax = -Infinity;
  let normalSq = 0;
  let outside = 0;
  for (let i = 0; i < 4000; i++) {
    const s = b.sample();
    if (!(s[0] >= 0 && s[0] <= 1)) outside++;
    lowBoundedMin = Math.min(lowBoundedMin, s[1]);
    upperMax = Math.max(upperMax, s[2]);
    normalSq += s[3] * s[3];
  }
  t.equal(outside, 0, 'bounded elements are uniform within the bounds');
  t.ok(lowBoundedMin >= 0, 'low + exponential stays above low');
  t.ok(upperMax <= 5, 'high - exponential stays below high');
  t.ok(Math.abs(normalSq / 4000 - 1) < 0.1, 'unbounded elements are standard normal');
  const ints = new Box(-2, 2, [1000], 'int32', 7).sample();
  t.ok(ints instanceof Int32Array);
  t.same(
    [...new Set(ints)].sort((a, b) => a - b),
    [-2, -1, 0, 1, 2],
    'integer boxes include high',
  );
  t.ok(new Box(0, 1, [3], 'uint8', 1).sample() instanceof Uint8Array);
  t.ok(
    new Box(-Infinity, Infinity, [50], 'int16', 1).contains(new Box(-Infinity, Infinity, [50], 'int16', 1).sample()),
    'unbounded int sample contained',
  );
  const a = new Box(0, 1, [5], 'float32', 99);
  const c = new Box(0, 1, [5], 'float32', 99);
  t.same(a.sample(), c.sample(), 'seeded');
  t.throws(() => a.sample([1] as never), TypeError, 'Box takes no mask');
  t.throws(() => a.sample(null, [1] as never), TypeError);
  const seeded = new Box(0, 1, [2], 'float32', new RandomGenerator(4));
  t.ok(seeded.contains(seeded.sample()), 'a generator can seed a space');
});

t.test('Box: contains', async (t) => {
  const b = new Box(-1, 1, [2, 2]);
  t.ok(b.contains(Float32Array.of(0, 1, -1, 0.5)));
  t.notOk(b.contains(Float32Array.of(0, 1, -1)), 'wrong size');
  t.notOk(b.contains(Float32Array.of(0, 1.5, 0, 0)), 'out of bounds');
  t.notOk(b.contains(Float32Array.of(0, NaN, 0, 0)), 'NaN');
  t.notOk(b.contains(Float64Array.of(0, 0, 0, 0)), 'float64 does not cast safely to float32 (NumPy can_cast)');
  t.ok(b.contains(Int8Array.of(0, 1, -1, 0)), 'int8 casts safely to float32');
  t.ok(
    b.contains([
      [0, 0.5],
      [1, -1],
    ]),
    'nested arrays of the right shape',
  );
  t.notOk(b.contains([0, 0.5, 1, -1]), 'a flat array has the wrong shape');
  t.notOk(b.contains('x'));
  const scalar = new Box(0, 1, []);
  t.ok(scalar.contains(0.5), 'a number for the scalar shape');
  t.notOk(new Box(0, 1, [1]).contains(0.5), 'a number has shape [] not [1]');
  const ints = new Box(0, 10, [2], 'int32');
  t.ok(ints.contains([3, 4]));
  t.notOk(ints.contains([3.5, 4]), 'non-integer values do not fit an int box');
  t.notOk(ints.contains(Uint32Array.of(1, 2)), 'uint32 does not cast safely to int32');
  t.ok(new Box(0, 10, [2], 'float64').contains(Int32Array.of(1, 2)));
  t.ok(
    canCast('uint16', 'int32') &&
      !canCast('uint32', 'int32') &&
      !canCast('int8', 'uint8') &&
      canCast('float32', 'float64') &&
      !canCast('int32', 'float32'),
  );
  t.ok(b.equals(new Box(-1, 1, [2, 2])));
  t.notOk(b.equals(new Box(-1, 1, [4])), 'shape');
  t.notOk(b.equals(new Box(-1, 1, [2, 2], 'float64')), 'dtype');
  t.notOk(b.equals(new Box(-1, 2, [2, 2])), 'bounds');
});

t.test('Box: JSON', async (t) => {
  const b = new Box([0, -Infinity], [1, Infinity], [2], 'float64');
  const json = JSON.stringify(b.toJSON());
  t.match(json, /"-inf"/, 'infinite bounds are strings');
  const back = spaceFromJSON(json) as Box<'float64'>;
  t.ok(back.equals(b) && !back.isBounded(), 'round trip keeps infinite bounds');
  const ib = new Box(-Infinity, 5, [2], 'int16');
  t.notOk((spaceFromJSON(ib.toJSON()) as Box<'int16'>).boundedBelow[0], 'int box keeps unboundedness');
  const m = new Box(0, 5, [2, 2], 'int32');
  const samples = [Int32Array.of(1, 2, 3, 4), Int32Array.of(0, 0, 5, 5)];
  const js = m.toJsonable(samples);
  t.same(
    js,
    [
      [
        [1, 2],
        [3, 4],
      ],
      [
        [0, 0],
        [5, 5],
      ],
    ],
    'nested lists',
  );
  const fromJs = m.fromJsonable(js);
  t.same(
    fromJs.map((x) => Array.from(x)),
    samples.map((x) => Array.from(x)),
  );
  t.ok(fromJs[0] instanceof Int32Array);
  t.throws(() => m.fromJsonable([[1, 2]]), RangeError);
  t.throws(() => m.fromJsonable('x'), TypeError);
});

t.test('MultiDiscrete', async (t) => {
  const md = new MultiDiscrete([3, 2, 4], { seed: 5 });
  t.equal(md.toString(), 'MultiDiscrete([3 2 4])');
  t.same(md.shape, [3]);
  for (let i = 0; i < 100; i++) {
    const s = md.sample();
    if (!(s instanceof Int32Array) || s[0] > 2 || s[1] > 1 || s[2] > 3 || Math.min(...s) < 0)
      t.fail('sample out of range');
  }
  const started = new MultiDiscrete(
    [
      [2, 2],
      [3, 3],
    ],
    {
      start: [
        [1, 1],
        [-1, -1],
      ],
    },
  );
  t.same(started.shape, [2, 2]);
  t.match(started.toString(), /start=\[\[1 1\] \[-1 -1\]\]/);
  t.ok(started.contains(Int32Array.of(1, 2, -1, 1)));
  t.notOk(started.contains(Int32Array.of(0, 2, -1, 1)), 'below start');
  t.ok(
    started.contains([
      [2, 1],
      [0, 1],
    ]),
    'nested arrays',
  );
  t.notOk(started.contains([2, 1, 0, 1]), 'wrong nesting');
  t.notOk(md.contains(Float32Array.of(0, 0, 0)), 'float arrays are not integer samples');
  t.notOk(md.contains([0, 0]));
  const masked = md.sample([Int8Array.of(0, 0, 1), null, Int8Array.of(0, 0, 0, 0)]);
  t.equal(masked[0], 2, 'masked element');
  t.equal(masked[2], 0, 'all-zero mask gives start');
  t.equal(
    md
      .sample(null, [
        [0, 1, 0],
        [1, 0],
        [0, 0, 0, 1],
      ])
      .join(),
    '1,0,3',
    'probability vectors',
  );
  t.throws(() => md.sample([null]), RangeError);
  t.throws(() => new MultiDiscrete([0, 2]), RangeError);
  t.throws(() => new MultiDiscrete([2], { dtype: 'float32' as never }), TypeError);
  t.throws(() => new MultiDiscrete([200], { dtype: 'int8' }), RangeError);
  t.equal(md.at(2).n, 4, 'at(i) is a Discrete');
  t.throws(() => md.at(3), RangeError);
  t.throws(() => started.at(0), RangeError);
  t.ok(md.equals(new MultiDiscrete([3, 2, 4])));
  t.notOk(md.equals(new MultiDiscrete([3, 2, 5])));
  t.ok(spaceFromJSON(started.toJSON()).equals(started));
  t.same(md.toJsonable([Int32Array.of(1, 1, 1)]), [[1, 1, 1]]);
  t.ok(md.fromJsonable([[1, 1, 1]])[0] instanceof Int32Array);
  t.ok(new MultiDiscrete([2, 2], { dtype: 'uint8' }).sample() instanceof Uint8Array, 'dtype option');
});

t.test('MultiBinary', async (t) => {
  const mb = new MultiBinary(6, { seed: 1 });
  t.equal(mb.toString(), 'MultiBinary(6)');
  const s = mb.sample();
  t.ok(s instanceof Int8Array && s.length === 6 && s.every((v) => v === 0 || v === 1));
  t.same(
    Array.from(mb.sample([0, 1, 2, 2, 0, 1])).filter((_, i) => [0, 1, 4, 5].includes(i)),
    [0, 1, 0, 1],
    'mask fixes 0/1, 2 is random',
  );
  t.same(Array.from(mb.sample(null, [0, 1, 0, 1, 0, 1])), [0, 1, 0, 1, 0, 1], 'probability of a one');
  t.throws(() => mb.sample([3, 0, 0, 0, 0, 0]), RangeError);
  t.throws(() => mb.sample(null, [0.5]), RangeError);
  t.throws(() => mb.sample(null, [2, 0, 0, 0, 0, 0]), RangeError);
  const grid = new MultiBinary([2, 3]);
  t.equal(grid.toString(), 'MultiBinary((2, 3))');
  t.ok(
    grid.contains([
      [0, 1, 0],
      [1, 1, 1],
    ]),
  );
  t.ok(grid.contains(Int8Array.of(0, 1, 0, 1, 1, 1)));
  t.notOk(
    grid.contains([
      [0, 2, 0],
      [1, 1, 1],
    ]),
    'only 0 and 1',
  );
  t.notOk(grid.contains(Int8Array.of(0, 1)), 'size');
  t.throws(() => new MultiBinary([0]), RangeError);
  t.ok(spaceFromJSON(grid.toJSON()).equals(grid));
  t.notOk(grid.equals(mb));
  t.same(grid.toJsonable([Int8Array.of(1, 0, 1, 0, 1, 0)]), [
    [
      [1, 0, 1],
      [0, 1, 0],
    ],
  ]);
  t.same(
    Array.from(
      grid.fromJsonable([
        [
          [1, 0, 1],
          [0, 1, 0],
        ],
      ])[0],
    ),
    [1, 0, 1, 0, 1, 0],
  );
  t.throws(() => grid.fromJsonable([[1]]), RangeError);
});

t.test('Box contains warns nothing and sampling is reproducible across seed()', async (t) => {
  const b = new Box(0, 1, [3]);
  const { warnings } = captureWarnings(() => b.contains([0, 0, 0]));
  t.same(warnings, []);
  b.seed(10);
  const first = b.sample();
  b.seed(10);
  t.same(b.sample(), first);
});
