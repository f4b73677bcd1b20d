import t from 'tap';

import {
  Box,
  Dict,
  Discrete,
  MultiBinary,
  MultiDiscrete,
  Sequence,
  Space,
  Text,
  Tuple,
  registerSpaceType,
  spaceFromJSON,
  type SpaceJSON,
} from '../../lib/gym/index.js';
import { ALPHANUMERIC } from '../../lib/gym/spaces/text.js';

t.test('Text', async (t) => {
  const text = new Text(5, { seed: 3 });
  t.equal(text.minLength, 1, 'default minLength is 1');
  t.equal(text.characters, ALPHANUMERIC);
  const lengths = new Set<number>();
  for (let i = 0; i < 300; i++) {
    const s = text.sample();
    lengths.add(s.length);
    if (!text.contains(s)) t.fail(`sample ${s} not contained`);
  }
  t.same([...lengths].sort(), [1, 2, 3, 4, 5], 'lengths uniform in [minLength, maxLength]');
  t.ok(text.contains('ab9Z'));
  t.notOk(text.contains(''), 'shorter than minLength');
  t.notOk(text.contains('abcdef'), 'longer than maxLength');
  t.notOk(text.contains('a b'), 'a character outside the set');
  t.notOk(text.contains(7), 'not a string');
  const abc = new Text(4, { minLength: 0, charset: 'abc', seed: 1 });
  t.equal(abc.sample([3, null]).length, 3, 'fixed length');
  t.match(abc.sample([4, [0, 1, 0]]), /^b{4}$/, 'charset mask');
  t.equal(abc.sample([null, [0, 0, 0]]), '', 'all-zero mask with minLength 0 gives an empty string');
  t.throws(() => new Text(4, { charset: 'abc' }).sample([null, [0, 0, 0]]), /minimum length > 0/);
  t.match(abc.sample(null, [4, [0, 0, 1]]), /^c{4}$/, 'charset probability');
  t.throws(() => abc.sample([9, null]), RangeError, 'length beyond maxLength');
  t.throws(() => abc.sample([1.5, null]), TypeError);
  t.throws(() => abc.sample('x' as never), TypeError);
  t.throws(() => new Text(2, { minLength: 3 }), RangeError);
  t.throws(() => new Text(2, { minLength: -1 }), RangeError);
  t.throws(() => new Text(1.5), TypeError);
  t.throws(() => new Text(3, { charset: ['ab'] }), TypeError);
  const uni = new Text(3, { charset: ['é', '😀', 'x'] });
  t.ok(uni.contains('😀é'), 'lengths count code points');
  t.equal(uni.characterIndex('😀'), 1);
  t.ok(spaceFromJSON(abc.toJSON()).equals(abc));
  t.notOk(abc.equals(text));
  t.same(abc.fromJsonable(['ab']), ['ab']);
  t.throws(() => abc.fromJsonable([1]), TypeError);
  t.equal(abc.toString(), 'Text(0, 4, charset=abc)');
});

t.test('Dict', async (t) => {
  const d = new Dict({ pos: new Box(-1, 1, [2]), id: new Discrete(3) }, { seed: 7 });
  t.same(d.keys, ['id', 'pos'], 'keys of an object are sorted (as Gymnasium sorts a mapping)');
  const ordered = new Dict([
    ['z', new Discrete(2)],
    ['a', new Discrete(2)],
  ]);
  t.same(ordered.keys, ['z', 'a'], 'pairs keep their order');
  const s = d.sample();
  t.ok(d.contains(s));
  t.same(Object.keys(s).sort(), ['id', 'pos']);
  t.notOk(d.contains({ id: 1 }), 'missing key');
  t.notOk(d.contains({ id: 1, pos: Float32Array.of(0, 0), extra: 1 }), 'extra key');
  t.notOk(d.contains({ id: 5, pos: Float32Array.of(0, 0) }), 'value outside a subspace');
  t.notOk(d.contains([1, 2]));
  t.equal(d.get('id').n, 3);
  t.equal(d.sample({ id: [0, 0, 1] }).id, 2, 'per-key masks');
  t.equal(d.sample(null, { id: [0, 1, 0] }).id, 1, 'per-key probabilities');
  t.throws(() => d.sample({ nope: [1] } as never), RangeError);
  t.throws(() => d.sample([1] as never), TypeError);
  // seeding: one integer seeds the dict and derives one seed per subspace
  const a = new Dict({ x: new Discrete(1000), y: new Discrete(1000) });
  const b = new Dict({ x: new Discrete(1000), y: new Discrete(1000) });
  const seeds = a.seed(1) as Record<string, number>;
  b.seed(1);
  t.same(Object.keys(seeds), ['x', 'y']);
  t.not(seeds.x, seeds.y, 'sub-seeds differ');
  t.same(
    Array.from({ length: 5 }, () => a.sample()),
    Array.from({ length: 5 }, () => b.sample()),
    'same seed, same samples',
  );
  const direct = a.seed({ x: 5, y: 6 }) as Record<string, number>;
  t.same(direct, { x: 5, y: 6 }, 'a dict of seeds seeds each key');
  t.throws(() => a.seed({ x: 5 }), RangeError);
  t.throws(() => a.seed('x' as never), TypeError);
  t.same(Object.keys(a.seed(null) as object), ['x', 'y']);
  t.throws(() => new Dict({ x: 5 as never }), TypeError);
  t.throws(
    () =>
      new Dict([
        ['x', new Discrete(2)],
        ['x', new Discrete(2)],
      ]),
    RangeError,
  );
  // JSON
  const samples = [d.sample(), d.sample()];
  const js = d.toJsonable(samples);
  t.same(Object.keys(js), ['id', 'pos']);
  const back = d.fromJsonable(JSON.parse(JSON.stringify(js)));
  t.equal(back.length, 2);
  t.same(
    back.map((x) => x.id),
    samples.map((x) => x.id),
  );
  t.same(Array.from(back[1].pos), Array.from(samples[1].pos));
  t.throws(() => d.fromJsonable([]), TypeError);
  t.throws(() => d.fromJsonable({ id: [1], pos: [] }), RangeError);
  t.ok(spaceFromJSON(JSON.stringify(ordered.toJSON())).equals(ordered), 'JSON keeps the key order');
  t.notOk(
    ordered.equals(
      new Dict([
        ['a', new Discrete(2)],
        ['z', new Discrete(2)],
      ]),
    ),
    'order matters for equality',
  );
  t.match(d.toString(), /^Dict\('id': Discrete\(3\), 'pos': Box/);
  t.ok(d.isNpFlattenable);
});

t.test('Tuple', async (t) => {
  const tu = new Tuple([new Discrete(2), new Box(0, 1, [2])] as const, { seed: 2 });
  const s = tu.sample();
  t.ok(Array.isArray(s) && s.length === 2 && tu.contains(s));
  t.notOk(tu.contains([1]));
  t.notOk(tu.contains([5, Float32Array.of(0, 0)]));
  t.notOk(tu.contains({ 0: 1, 1: Float32Array.of(0, 0) }), 'an object is not a tuple');
  t.equal(tu.length, 2);
  t.ok(tu.at(0) instanceof Discrete);
  t.equal(tu.sample([[0, 1], null])[0], 1, 'per-position masks');
  t.equal(tu.sample(null, [[1, 0], null])[0], 0);
  t.throws(() => tu.sample([null] as never), RangeError);
  const a = new Tuple([new Discrete(1000), new Discrete(1000)]);
  const b = new Tuple([new Discrete(1000), new Discrete(1000)]);
  t.equal((a.seed(3) as number[]).length, 2);
  b.seed(3);
  t.same(a.sample(), b.sample());
  t.same(a.seed([1, 2]), [1, 2]);
  t.throws(() => a.seed([1]), RangeError);
  t.throws(() => a.seed({} as never), TypeError);
  t.equal((a.seed() as unknown[]).length, 2);
  t.throws(() => new Tuple([1 as never]), TypeError);
  t.throws(() => new Tuple('x' as never), TypeError);
  const samples = [tu.sample(), tu.sample()];
  const js = tu.toJsonable(samples);
  t.equal(js.length, 2, 'one list per subspace');
  const back = tu.fromJsonable(JSON.parse(JSON.stringify(js)));
  t.same(
    back.map((x) => x[0]),
    samples.map((x) => x[0]),
  );
  t.throws(() => tu.fromJsonable([[]]), TypeError);
  t.throws(() => tu.fromJsonable([[1], []]), RangeError);
  t.ok(spaceFromJSON(tu.toJSON()).equals(tu));
  t.equal(
    new Tuple([new Discrete(2), new Text(3)]).toString(),
    `Tuple(Discrete(2), Text(1, 3, charset=${ALPHANUMERIC}))`,
  );
  t.notOk(new Tuple([new Text(3)]).isNpFlattenable);
});

t.test('Sequence', async (t) => {
  const seq = new Sequence(new Discrete(4), { seed: 9 });
  let total = 0;
  let min = Infinity;
  for (let i = 0; i < 2000; i++) {
    const s = seq.sample();
    total += s.length;
    min = Math.min(min, s.length);
    if (!seq.contains(s)) t.fail('sample not contained');
  }
  t.equal(min, 1, 'lengths are geometric(0.25), from 1');
  t.ok(Math.abs(total / 2000 - 4) < 0.3, 'mean length 4');
  t.ok(seq.contains([]), 'an empty sequence is contained');
  t.notOk(seq.contains([0, 9]));
  t.notOk(seq.contains(3));
  t.equal(seq.sample([5, null]).length, 5, 'fixed length');
  t.ok([2, 7].includes(seq.sample([[2, 7], null]).length), 'allowed lengths');
  t.same(seq.sample([3, [0, 0, 1, 0]]), [2, 2, 2], 'feature mask');
  t.same(seq.sample(null, [2, [0, 0, 0, 1]]), [3, 3], 'feature probability');
  t.throws(() => seq.sample([-1, null]), RangeError);
  t.throws(() => seq.sample([[1.5], null]), RangeError);
  t.throws(() => seq.sample([1] as never), TypeError);
  const a = new Sequence(new Discrete(100));
  const b = new Sequence(new Discrete(100));
  t.equal((a.seed(4) as unknown[]).length, 2);
  b.seed(4);
  t.same(
    Array.from({ length: 5 }, () => a.sample()),
    Array.from({ length: 5 }, () => b.sample()),
    'same seed, same sequences',
  );
  t.same(a.seed([1, 2]), [1, 2]);
  t.throws(() => a.seed([1]), RangeError);
  t.throws(() => a.seed({} as never), TypeError);
  t.equal((a.seed() as unknown[]).length, 2);
  // stacked
  const stacked = new Sequence(new Box(0, 1, [2]), { stack: true, seed: 1 });
  const st = stacked.sample([3, null]);
  t.ok(st instanceof Float32Array && st.length === 6, 'a stacked Box sequence is one typed array');
  t.ok(stacked.contains(st));
  t.ok(stacked.contains(new Float32Array(0)));
  t.notOk(stacked.contains(new Float32Array(3)), 'not a multiple of the feature size');
  t.notOk(stacked.contains([Float32Array.of(0, 0)]), 'stacked values are batches');
  const stackedDict = new Sequence(new Dict({ a: new Discrete(3), b: new Box(0, 1, [1]) }), { stack: true, seed: 2 });
  const sd = stackedDict.sample([4, null]) as { a: Int32Array; b: Float32Array };
  t.ok(sd.a instanceof Int32Array && sd.a.length === 4 && sd.b.length === 4);
  t.ok(stackedDict.contains(sd));
  const stackedTuple = new Sequence(new Tuple([new Discrete(2), new Text(2)]), { stack: true, seed: 3 });
  const stt = stackedTuple.sample([2, null]);
  t.ok(stackedTuple.contains(stt));
  t.equal(stackedTuple.items(stt)?.length, 2);
  t.equal(stackedTuple.items('x'), null);
  t.notOk(new Sequence(new Text(2), { stack: true }).contains('x'));
  // JSON
  const samples = [seq.sample(), seq.sample()];
  t.same(seq.fromJsonable(JSON.parse(JSON.stringify(seq.toJsonable(samples)))), samples);
  const stJs = stacked.toJsonable([st]);
  t.same(Array.from(stacked.fromJsonable(stJs)[0] as Float32Array), Array.from(st as Float32Array));
  t.throws(() => seq.toJsonable([5 as never]), TypeError);
  t.throws(() => seq.fromJsonable('x'), TypeError);
  t.ok(spaceFromJSON(stacked.toJSON()).equals(stacked));
  t.notOk(stacked.equals(seq));
  t.equal(seq.toString(), 'Sequence(Discrete(4), stack=False)');
  t.throws(() => new Sequence(5 as never), TypeError);
});

t.test('MultiDiscrete and MultiBinary inside Sequence stacks', async (t) => {
  const s1 = new Sequence(new MultiDiscrete([2, 3]), { stack: true, seed: 1 });
  const v1 = s1.sample([2, null]);
  t.ok(v1 instanceof Int32Array && v1.length === 4 && s1.contains(v1));
  const s2 = new Sequence(new MultiBinary(3), { stack: true, seed: 1 });
  const v2 = s2.sample([2, null]);
  t.ok(v2 instanceof Int8Array && s2.contains(v2));
});

t.test('custom spaces join the JSON registry', async (t) => {
  class Parity extends Space<number> {
    constructor() {
      super(null, null);
    }
    sample(): number {
      return 2 * this.npRandom.integers(10);
    }
    contains(x: unknown): boolean {
      return typeof x === 'number' && x % 2 === 0;
    }
    equals(o: unknown): boolean {
      return o instanceof Parity;
    }
    toJSON(): SpaceJSON {
      return { type: 'Parity' };
    }
    toString(): string {
      return 'Parity()';
    }
  }
  t.throws(() => spaceFromJSON({ type: 'Parity' }), /unknown space type/);
  registerSpaceType('Parity', () => new Parity());
  t.ok(spaceFromJSON({ type: 'Parity' }) instanceof Parity);
  const p = new Parity();
  t.ok(p.contains(p.sample()));
  t.same(p.toJsonable([2, 4]), [2, 4], 'default toJsonable copies');
  t.same(p.fromJsonable([2]), [2]);
  t.throws(() => p.fromJsonable(3), TypeError);
  t.throws(() => p.seed('x' as never), TypeError);
  t.notOk(p.isNpFlattenable);
  t.throws(() => registerSpaceType('', () => p), TypeError);
  t.throws(() => spaceFromJSON('{"nope":1}'), TypeError);
  t.throws(() => spaceFromJSON({ type: 'Box', low: 'x', high: 1 }), TypeError);
});
