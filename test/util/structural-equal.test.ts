// The one structural equality and the semantics each caller keeps through its options:
// deepEqual (rollout: NaN equal, exact, plain objects only), dataEquivalence (gym: plain NaN
// unequal, typed arrays within allclose tolerance unless exact, objects of one class by keys),
// jsonEqual (tau: JSON values, NaN unequal) and the JSON-schema enum check (key order free).
import t from 'tap';

import type { JsonSchema } from '../../lib/gym/index.js';
import { validateJson } from '../../lib/gym/spaces/json-schema.js';
import { dataEquivalence } from '../../lib/gym/utils/data-equivalence.js';
import { deepEqual } from '../../lib/rollout/deep-equal.js';
import { jsonEqual } from '../../lib/tau/evaluate.js';
import { structuralEqual } from '../../lib/util/structural-equal.js';

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}
class Other {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

t.test('structuralEqual: defaults (deepEqual semantics)', async (t) => {
  t.ok(structuralEqual({ a: [1, 'x', null, { b: true }] }, { a: [1, 'x', null, { b: true }] }), 'nested plain values');
  t.ok(structuralEqual({ a: 1, b: 2 }, { b: 2, a: 1 }), 'key order is free');
  t.notOk(structuralEqual({ a: 1 }, { a: 1, b: undefined }), 'a missing key is not an undefined one');
  t.notOk(structuralEqual({ a: 1 }, { b: 1 }));
  t.notOk(structuralEqual([1, 2], [1, 2, 3]));
  t.notOk(structuralEqual([1], { 0: 1 }), 'an array is not an object with index keys');
  t.notOk(structuralEqual({ 0: 1 }, [1]));
  t.ok(structuralEqual(NaN, NaN), 'NaN equals NaN');
  t.ok(structuralEqual(0, -0), '0 and -0 are ===');
  t.notOk(structuralEqual(1, '1'));
  t.notOk(structuralEqual(null, {}));
  t.ok(structuralEqual(Float32Array.of(1, NaN), Float32Array.of(1, NaN)), 'typed arrays: NaN equals NaN');
  t.notOk(structuralEqual(Float32Array.of(1), Float64Array.of(1)), 'typed arrays: the type matters');
  t.notOk(structuralEqual(Float32Array.of(1), [1]), 'a typed array is not an array');
  t.notOk(structuralEqual(Float64Array.of(1), Float64Array.of(1 + 1e-12)), 'exact by default');
  t.ok(structuralEqual(BigInt64Array.of(3n), BigInt64Array.of(3n)));
  t.notOk(structuralEqual(BigInt64Array.of(3n), BigInt64Array.of(4n)));
  t.ok(structuralEqual(new Date(5), new Date(5)));
  t.notOk(structuralEqual(new Date(5), new Date(6)));
  t.ok(structuralEqual(new Map([['k', [1]]]), new Map([['k', [1]]])));
  t.notOk(structuralEqual(new Map([['k', [1]]]), new Map([['k', [2]]])));
  t.ok(structuralEqual(new Set([1, 2]), new Set([2, 1])));
  t.notOk(structuralEqual(new Set([1, 2]), new Set([1, 3])));
  t.notOk(structuralEqual(new Point(1, 2), new Point(1, 2)), 'plain mode: a class instance equals only itself');
  const p = new Point(1, 2);
  t.ok(structuralEqual(p, p));
  t.ok(
    structuralEqual(Object.assign(Object.create(null) as object, { a: 1 }), { a: 1 }),
    'null-prototype objects are plain',
  );
});

t.test('structuralEqual: options', async (t) => {
  t.notOk(structuralEqual(NaN, NaN, { nanEqual: false }), 'nanEqual false: plain NaN numbers compare with ===');
  t.notOk(structuralEqual([NaN], [NaN], { nanEqual: false }));
  t.ok(
    structuralEqual(Float64Array.of(NaN), Float64Array.of(NaN), { nanEqual: false }),
    'inside typed arrays NaN always equals NaN',
  );
  const tolerance = { rtol: 1e-3, atol: 0.5 };
  t.ok(structuralEqual(Float64Array.of(10), Float64Array.of(10.5), { tolerance }), 'within atol + rtol·|b|');
  t.notOk(
    structuralEqual(Float64Array.of(10), Float64Array.of(10.6), { tolerance }),
    'outside the tolerance (0.5 + 0.0106)',
  );
  t.ok(
    structuralEqual(Float64Array.of(1000), Float64Array.of(1001.4), { tolerance }),
    'the relative part scales with |b|',
  );
  t.notOk(
    structuralEqual(Float64Array.of(Infinity), Float64Array.of(1e308), { tolerance }),
    'infinities equal only themselves',
  );
  t.ok(structuralEqual(Float64Array.of(-Infinity), Float64Array.of(-Infinity), { tolerance }));
  t.notOk(structuralEqual(10, 10.1, { tolerance }), 'the tolerance is for typed arrays only');
  t.ok(
    structuralEqual(new Point(1, 2), new Point(1, 2), { objects: 'sameClass' }),
    'sameClass: instances by their keys',
  );
  t.notOk(structuralEqual(new Point(1, 2), new Point(1, 3), { objects: 'sameClass' }));
  t.notOk(
    structuralEqual(new Point(1, 2), new Other(1, 2), { objects: 'sameClass' }),
    'sameClass: the prototype matters',
  );
  t.notOk(structuralEqual(new Point(1, 2), { x: 1, y: 2 }, { objects: 'sameClass' }));
});

t.test('the callers keep their semantics', async (t) => {
  t.ok(deepEqual({ v: NaN, t: Int32Array.of(1, 2) }, { v: NaN, t: Int32Array.of(1, 2) }), 'deepEqual: NaN equal');
  t.notOk(deepEqual(new Point(1, 2), new Point(1, 2)), 'deepEqual: instances by identity');
  t.notOk(dataEquivalence(NaN, NaN), 'dataEquivalence: plain NaN unequal');
  t.ok(dataEquivalence(Float32Array.of(1), Float32Array.of(1 + 9e-6)), 'dataEquivalence: allclose');
  t.notOk(dataEquivalence(Float32Array.of(1), Float32Array.of(1 + 9e-6), true), 'dataEquivalence exact');
  t.ok(dataEquivalence(new Point(1, 2), new Point(1, 2)), 'dataEquivalence: instances of one class by keys');
  t.notOk(
    dataEquivalence(new Map([[1, 'a']]), new Map([[1, 'b']])),
    'dataEquivalence: Maps by content (not by their absent own keys)',
  );
  t.notOk(dataEquivalence(new Date(1), new Date(2)), 'dataEquivalence: Dates by time');
  t.ok(jsonEqual({ a: [1, { b: 'x' }] }, { a: [1, { b: 'x' }] }), 'jsonEqual: JSON values');
  t.ok(jsonEqual({ a: 1, b: 2 }, { b: 2, a: 1 }), 'jsonEqual: key order free (Python dict ==)');
  t.notOk(jsonEqual({ a: 1 }, { a: '1' }));
  t.notOk(jsonEqual(NaN, NaN), 'jsonEqual: NaN unequal (float nan == nan is False)');
  const schema: JsonSchema = { type: 'object', properties: { o: { type: 'object', enum: [{ a: 1, b: 2 }] } } };
  t.equal(
    validateJson({ o: { b: 2, a: 1 } }, schema),
    null,
    'enum: an object with its keys in another order is the same instance',
  );
  t.match(validateJson({ o: { a: 1, b: 3 } }, schema), /not one of/);
});
