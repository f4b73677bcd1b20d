import t from 'tap';

import { CowMap } from '../../lib/tau/index.js';
import { calculate } from '../../lib/tau/domains/retail/calculate.js';
import { pyFloatRepr, pyJsonDumps, pyRound2 } from '../../lib/tau/pyjson.js';

// Expected strings were produced by CPython 3 (repr, round, json.dumps) and are typed in here.
t.test('pyFloatRepr matches CPython repr(float)', async (t) => {
  const xs = [0.1, 51.0, 1e-5, 1e16, 123456789012345.6, -0, 2.5e-7, 1e22, 0.0001, 100.0, 1234.5678];
  const py = [
    '0.1',
    '51.0',
    '1e-05',
    '1e+16',
    '123456789012345.6',
    '-0.0',
    '2.5e-07',
    '1e+22',
    '0.0001',
    '100.0',
    '1234.5678',
  ];
  t.same(xs.map(pyFloatRepr), py);
});

t.test('pyRound2 matches CPython round(x, 2) incl. exact ties (half to even)', async (t) => {
  const ys = [0.125, 0.375, 2.675, 1.005, -0.125, 0.625, 10 / 3, 1463.695, -2.5];
  const py = ['0.12', '0.38', '2.67', '1.0', '-0.12', '0.62', '3.33', '1463.69', '-2.5'];
  t.same(
    ys.map((y) => pyFloatRepr(pyRound2(y))),
    py,
  );
});

t.test('pyJsonDumps: separators, sort_keys, ensure_ascii, float style', async (t) => {
  t.equal(
    pyJsonDumps({ b: [1, 'é\u007f\n'], a: null }, { sortKeys: true }),
    '{"a": null, "b": [1.0, "\\u00e9\\u007f\\n"]}',
  );
  t.equal(pyJsonDumps({ z: 1, a: [], o: {} }), '{"z": 1.0, "a": [], "o": {}}');
  t.equal(pyJsonDumps({ n: 3 }, { numbers: 'int' }), '{"n": 3}');
});

t.test('calculate follows Python eval + round + str', async (t) => {
  const cases: [string, string][] = [
    ['2 + 2', '4.0'],
    ['10/3', '3.33'],
    ['2**10', '1024.0'],
    ['7//2', '3.0'],
    ['-3//2', '-2.0'],
    ['(1.5+2)*4', '14.0'],
    ['.5+5.', '5.5'],
    ['2**-1', '0.5'],
  ];
  for (const [e, want] of cases) t.equal(calculate(e), want, e);
  t.throws(() => calculate('2 + x'), { message: 'Invalid characters in expression' });
  t.throws(() => calculate('1/0'), { message: 'division by zero' });
  t.throws(() => calculate('1.0/0'), { message: 'float division by zero' });
  t.throws(() => calculate('(2'), { message: /invalid syntax/ });
  t.throws(() => calculate(''), { message: /invalid syntax/ });
  t.throws(() => calculate('2(3)'), { message: "'int' object is not callable" });
  t.throws(() => calculate('01 + 1'), { message: /leading zeros/ });
});

t.test('CowMap: forks share the base, writes stay private', async (t) => {
  const base = { a: { v: 1 }, b: { v: 2 } };
  const m = new CowMap(base);
  const f = m.fork();
  f.set('a', { v: 10 });
  f.set('c', { v: 3 });
  t.equal(m.get('a')?.v, 1);
  t.equal(f.get('a')?.v, 10);
  t.equal(f.get('b'), m.get('b'), 'unchanged entries are shared, not copied');
  t.same(f.keys(), ['a', 'b', 'c']);
  t.equal(f.size, 3);
  t.equal(m.size, 2);
  t.same(f.changedKeys().sort(), ['a', 'c']);
  t.notOk(m.has('c'));
  t.same(Object.keys(f.toObject()), ['a', 'b', 'c']);
});
