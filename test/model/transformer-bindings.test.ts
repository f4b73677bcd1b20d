// The native transformer bindings validate every argument: TypeError for wrong types,
// RangeError for wrong values or lengths, messages naming the argument; nothing aborts.
import t from 'tap';

import { ParamStore, Transformer, modelConfig } from '../../lib/model/index.js';
import { transformerAddon } from '../../lib/model/transformer-native.js';

const config = modelConfig('tiny', {
  layers: 2,
  width: 16,
  heads: 2,
  kvHeads: 1,
  headDim: 8,
  vocab: 50,
  context: 32,
  ffn: 8,
  window: 4,
});

t.test('constructor: config and store must match', async (t) => {
  const { Transformer: Native } = transformerAddon();
  const store = ParamStore.fromConfig(config, 1);
  t.throws(() => new Native({ config, store: {} as never }), TypeError, 'a plain object is not a store');
  t.throws(() => new Native({ config, store: store.handle, extra: 1 } as never), /unknown field 'extra'/);
  t.throws(
    () => new Native({ config: { ...config, vocab: 51 }, store: store.handle }),
    /does not match/,
    'shapes must match',
  );
  t.throws(
    () => new Native({ config: { ...config, layers: 3 }, store: store.handle }),
    /parameters/,
    'parameter count must match',
  );
  t.throws(
    () => Transformer.fromStore(modelConfig(config, { heads: 3 }), store),
    RangeError,
    'invalid configs are rejected',
  );
  const other = ParamStore.fromSpecs([{ name: 'w', shape: [2, 2] }], 1);
  t.throws(() => Transformer.fromStore(config, other), /parameters/);
  other.dispose();
  store.dispose();
  t.throws(() => new Native({ config, store: store.handle }), /disposed/, 'a disposed store');
});

t.test('forward and backward check batches, options and gradients', async (t) => {
  const m = Transformer.create(config, 2);
  const tokens = Int32Array.from([1, 2, 3, 4]);
  const good = { tokens, positions: Int32Array.from([0, 1, 2, 3]) };
  t.throws(() => m.logProbs({ tokens: Int32Array.from([1, 50]) }), /tokens\[1\] = 50 is out of range/);
  t.throws(() => m.logProbs({ ...good, targets: Int32Array.from([1, 2, 3, -2]) }), /targets\[3\]/);
  t.throws(
    () => m.logProbs({ ...good, positions: Int32Array.from([0, 1, 2, 32]) }),
    /positions\[3\] = 32/,
    'positions below the context',
  );
  t.throws(() => m.logProbs({ ...good, documentIds: new Int32Array(3) }), RangeError);
  t.throws(() => m.logProbs({ ...good, targets: new Float32Array(4) as never }), TypeError);
  t.throws(() => m.logProbs(good, { temperature: 0 }), /temperature/);
  t.throws(() => m.logProbs(good, { impl: 'flash' as never }), /impl/);
  t.throws(() => m.logProbs(good, { nope: 1 } as never), /unknown field 'nope'/);
  t.throws(() => m.logProbs(null as never), TypeError);
  const f = m.forward(good);
  t.throws(() => f.backward({ dLogProbs: new Float32Array(4), dEntropy: new Int32Array(4) as never }), TypeError);
  const native = (
    m as unknown as { native: { backward(s: unknown, g: unknown): void; releaseState(s: unknown): void } }
  ).native;
  t.throws(() => native.backward({}, {}), TypeError, 'a state must come from forward');
  t.throws(() => native.releaseState(1), TypeError);
  const m2 = Transformer.create(config, 3);
  const f2 = m2.forward(good);
  const state = (f2 as unknown as { state: object }).state;
  t.throws(() => native.backward(state, {}), /another transformer/);
  f.backward({});
  t.equal(m.store.gradNorm(), 0, 'no gradients in, no gradients out');
  m.dispose();
  m2.dispose();
  t.throws(() => m.logProbs(good), /disposed/);
  t.throws(() => m.createSession(1), /disposed/);
});

t.test('sessions check their arguments', async (t) => {
  const m = Transformer.create(config, 2);
  const { TransformerSession } = transformerAddon();
  t.throws(() => new TransformerSession({ seed: 1 }), TypeError, 'model or forkOf');
  t.throws(() => new TransformerSession({ model: {} as never, seed: 1 }), TypeError);
  t.throws(() => m.createSession(-1), RangeError);
  const s = m.createSession(1);
  t.throws(
    () => (s.native as unknown as { append(x: unknown): void }).append([1]),
    TypeError,
    'append takes an Int32Array natively',
  );
  t.throws(() => m.run([{ session: s }], { maxForwards: -1 }), RangeError);
  t.throws(() => m.run([{ session: s }], { prefillChunk: 0 }), RangeError);
  t.throws(() => m.run([{ session: s }], { bogus: 1 } as never), /unknown field/);
  t.throws(() => (m as unknown as { native: { runAsync(x: unknown): void } }).native.runAsync({}), TypeError);
  const r = await m.run([]);
  t.same(r, [], 'an empty run');
  s.dispose();
  t.ok(s.disposed);
  m.dispose();
});
