// Argument validation of every native model function: wrong types give TypeError, wrong
// values/lengths/aliasing give RangeError, and the message names the argument.
import t from 'tap';

import { type ModelAddon, modelAddon } from '../../lib/model/native.js';

const f32 = (n: number): Float32Array => new Float32Array(n).fill(0.5);
const i32 = (n: number, v = 0): Int32Array => new Int32Array(n).fill(v);
type Loose = Record<string, (...args: unknown[]) => unknown>;

t.test('ops reject bad arguments naming them', async (t) => {
  const a = modelAddon() as unknown as Loose & ModelAddon;
  const cases: [string, Record<string, unknown> | unknown, 'TypeError' | 'RangeError', RegExp][] = [
    [
      'linearForward',
      { x: f32(6), weight: f32(6), out: f32(4), rows: 2, inFeatures: 3, outFeatures: 2, bias: f32(3) },
      'RangeError',
      /^bias has length 3, expected 2/,
    ],
    [
      'linearForward',
      { x: f32(6), weight: [1, 2], out: f32(4), rows: 2, inFeatures: 3, outFeatures: 2 },
      'TypeError',
      /^weight must be a Float32Array, got an Array/,
    ],
    [
      'linearForward',
      { x: f32(6), weight: f32(6), out: f32(4), rows: -2, inFeatures: 3, outFeatures: 2 },
      'RangeError',
      /^rows must be in/,
    ],
    ['linearForward', 'x', 'TypeError', /^options must be an object, got a string/],
    [
      'linearBackward',
      { dy: f32(4), dx: f32(6), rows: 2, inFeatures: 3, outFeatures: 2 },
      'TypeError',
      /^weight must be a Float32Array, got undefined/,
    ],
    [
      'linearBackward',
      { dy: f32(4), dweight: f32(6), rows: 2, inFeatures: 3, outFeatures: 2 },
      'TypeError',
      /^x must be a Float32Array/,
    ],
    [
      'rmsnormForward',
      { x: f32(6), weight: f32(3), out: f32(6), rstd: f32(2), rows: 2, dim: 0 },
      'RangeError',
      /^dim must be in \[1,/,
    ],
    [
      'rmsnormForward',
      { x: f32(6), weight: f32(3), out: f32(6), rstd: f32(2), rows: 2, dim: 3, eps: -1 },
      'RangeError',
      /eps must be a positive finite number/,
    ],
    [
      'rmsnormBackward',
      { x: f32(6), weight: f32(3), rstd: f32(2), dy: f32(6), dx: f32(6), dweight: f32(2), rows: 2, dim: 3 },
      'RangeError',
      /^dweight has length 2, expected 3/,
    ],
    [
      'ropeForward',
      { x: f32(8), out: f32(8), positions: i32(2), rows: 2, heads: 1, headDim: 3 },
      'RangeError',
      /^headDim must be even/,
    ],
    [
      'ropeForward',
      { x: f32(8), out: f32(8), positions: i32(2, -1), rows: 2, heads: 1, headDim: 4 },
      'RangeError',
      /^positions\[0\] = -1 is out of range/,
    ],
    [
      'ropeForward',
      { x: f32(8), out: f32(8), positions: new Uint32Array(2), rows: 2, heads: 1, headDim: 4 },
      'TypeError',
      /^positions must be an Int32Array/,
    ],
    [
      'ropeBackward',
      { dy: f32(8), dx: f32(7), positions: i32(2), rows: 2, heads: 1, headDim: 4 },
      'RangeError',
      /^dx has length 7, expected 8/,
    ],
    [
      'ropeForward',
      { x: f32(8), out: f32(8), positions: i32(2), rows: 2, heads: 1, headDim: 4, theta: 0 },
      'RangeError',
      /^theta must be positive/,
    ],
    [
      'swigluForward',
      { h: f32(8), out: f32(4), rows: 2, ffn: 2, alpha: 0 },
      'RangeError',
      /swiglu alpha must be a positive/,
    ],
    [
      'swigluForward',
      { h: f32(8), out: f32(4), rows: 2, ffn: 2, limit: -1 },
      'RangeError',
      /swiglu limit must be >= 0/,
    ],
    [
      'swigluBackward',
      { h: f32(8), dout: f32(4), dh: f32(8), rows: 2, ffn: 2, accumulate: 'yes' },
      'TypeError',
      /^accumulate must be a boolean/,
    ],
    [
      'embeddingForward',
      { table: f32(6), ids: i32(2, 3), out: f32(4), rows: 2, vocab: 3, dim: 2 },
      'RangeError',
      /^ids\[0\] = 3 is out of range \[0, 3\)/,
    ],
    [
      'embeddingBackward',
      { ids: i32(2, -1), dout: f32(4), dtable: f32(6), rows: 2, vocab: 3, dim: 2 },
      'RangeError',
      /^ids\[0\] = -1 is out of range/,
    ],
    [
      'logSoftmaxForward',
      { logits: f32(6), targets: i32(2, 3), lse: f32(2), rows: 2, vocab: 3 },
      'RangeError',
      /^targets\[0\] = 3 is out of range \[-1, 3\)/,
    ],
    [
      'logSoftmaxForward',
      { logits: f32(6), logp: f32(2), lse: f32(2), rows: 2, vocab: 3 },
      'TypeError',
      /^targets must be an Int32Array when logp is given/,
    ],
    [
      'logSoftmaxForward',
      { logits: f32(6), lse: f32(2), rows: 2, vocab: 3, scale: 0 },
      'RangeError',
      /scale must be a positive finite number/,
    ],
    [
      'logSoftmaxBackward',
      { logits: f32(6), lse: f32(2), dentropy: f32(2), dlogits: f32(6), rows: 2, vocab: 3 },
      'TypeError',
      /^entropy must be a Float32Array/,
    ],
    [
      'logSoftmaxBackward',
      { logits: f32(6), lse: f32(2), dlogp: f32(2), dlogits: f32(6), rows: 2, vocab: 3 },
      'TypeError',
      /^targets must be an Int32Array when dlogp is given/,
    ],
    [
      'crossEntropyForward',
      { logits: f32(6), targets: i32(3), lse: f32(2), rows: 2, vocab: 3 },
      'RangeError',
      /^targets has length 3, expected 2/,
    ],
    [
      'crossEntropyBackward',
      { logits: f32(6), targets: i32(2), lse: f32(2), dlogits: f32(6), rows: 2, vocab: 3, gradScale: Infinity },
      'RangeError',
      /^gradScale must be finite/,
    ],
    [
      'adamwUpdate',
      { param: f32(3), grad: f32(2), m: f32(3), v: f32(3), step: 1 },
      'RangeError',
      /^grad has length 2, expected 3/,
    ],
    [
      'adamwUpdate',
      { param: f32(3), grad: f32(3), m: f32(3), v: f32(3), step: 1, eps: 0 },
      'RangeError',
      /eps must be a positive finite number/,
    ],
    [
      'adamwUpdate',
      { param: f32(3), grad: f32(3), m: f32(3), v: f32(3), step: 1, weightDecay: -0.1 },
      'RangeError',
      /weightDecay must be/,
    ],
    ['fmaPeakGflops', 20, 'RangeError', /^seconds must be in \(0, 10\]/],
    ['sumSquares', [1, 2], 'TypeError', /^x must be a Float32Array/],
  ];
  for (const [fn, arg, name, message] of cases) {
    t.throws(() => a[fn](arg), { name, message }, `${fn}: ${String(message)}`);
  }
});

t.test('unsafe aliasing between outputs and inputs is rejected; supported in-place forms work', async (t) => {
  const a = modelAddon();
  const buf = f32(20);
  t.throws(
    () =>
      a.linearForward({
        x: buf.subarray(0, 6),
        weight: f32(6),
        out: buf.subarray(2, 6),
        rows: 2,
        inFeatures: 3,
        outFeatures: 2,
      }),
    { name: 'RangeError', message: /^out must not overlap x/ },
  );
  t.throws(
    () =>
      a.rmsnormForward({
        x: buf.subarray(0, 6),
        weight: f32(3),
        out: buf.subarray(1, 7),
        rstd: f32(2),
        rows: 2,
        dim: 3,
      }),
    { name: 'RangeError', message: /^out must be x itself or not overlap it/ },
  );
  t.throws(() => a.swigluForward({ h: buf.subarray(0, 8), out: buf.subarray(0, 4), rows: 2, ffn: 2 }), {
    name: 'RangeError',
    message: /^out must not overlap h/,
  });
  t.throws(
    () =>
      a.embeddingBackward({
        ids: i32(2),
        dout: buf.subarray(0, 4),
        dtable: buf.subarray(2, 8),
        rows: 2,
        vocab: 3,
        dim: 2,
      }),
    { message: /^dtable must not overlap dout/ },
  );
  const logits = f32(6);
  t.throws(() => a.logSoftmaxBackward({ logits, lse: f32(2), dlogits: logits, rows: 2, vocab: 3, accumulate: true }), {
    message: /^dlogits must not overlap logits/,
  });
  t.throws(
    () => a.adamwUpdate({ param: buf.subarray(0, 3), grad: buf.subarray(0, 3), m: f32(3), v: f32(3), step: 1 }),
    { message: /^param must not overlap grad/ },
  );
  const x = f32(6);
  a.rmsnormForward({ x, weight: f32(3), out: x, rstd: f32(2), rows: 2, dim: 3 });
  t.ok(x.every(Number.isFinite), 'in-place rmsnorm allowed');
});

t.test('ParamStore constructor and methods validate their arguments', async (t) => {
  const { ParamStore } = modelAddon();
  const P = ParamStore as unknown as new (o: unknown) => unknown;
  t.throws(() => new P(undefined), { name: 'TypeError', message: /^options must be an object/ });
  t.throws(() => new P({ seed: 1 }), { name: 'TypeError', message: /exactly one of specs and config/ });
  t.throws(() => new P({ seed: 1, specs: [], config: {} }), {
    name: 'TypeError',
    message: /exactly one of specs and config/,
  });
  t.throws(() => new P({ seed: 1.5, specs: [] }), { name: 'RangeError', message: /^options.seed must be an integer/ });
  t.throws(() => new P({ seed: 1, specs: [{ name: 5, shape: [1] }] }), {
    name: 'TypeError',
    message: /^options.specs\[0\].name must be a string/,
  });
  t.throws(() => new P({ seed: 1, specs: [{ name: 'a', shape: 3 }] }), {
    name: 'TypeError',
    message: /^options.specs\[0\].shape must be an array/,
  });
  t.throws(() => new P({ seed: 1, specs: [{ name: 'a', shape: [2], std: -1 }] }), {
    name: 'RangeError',
    message: /invalid init std/,
  });
  t.throws(() => new P({ seed: 1, specs: [{ name: 'a', shape: [2], decay: 1 }] }), {
    name: 'TypeError',
    message: /decay must be a boolean/,
  });
  t.throws(() => new P({ seed: 1, specs: ['a'] }), {
    name: 'TypeError',
    message: /^options.specs\[0\] must be an object/,
  });
  t.throws(() => new P({ seed: 1, config: { layers: 1 } }), {
    name: 'TypeError',
    message: /^options.config.width must be an integer/,
  });
  const s = new ParamStore({ seed: 1, specs: [{ name: 'a', shape: [2, 3] }] });
  t.teardown(() => s.dispose());
  t.throws(() => s.read(5 as unknown as string), { name: 'TypeError', message: /^name must be a string/ });
  t.throws(() => s.write('a', [1, 2] as unknown as Float32Array), {
    name: 'TypeError',
    message: /^data must be a Float32Array/,
  });
  t.throws(() => s.setStep(-1), { name: 'RangeError', message: /^step must be in/ });
  t.throws(() => s.adamwStep(null as unknown as object), { name: 'TypeError', message: /^options must be an object/ });
  t.throws(() => s.adamwStep({ lr: 'x' as unknown as number }), { name: 'TypeError', message: /^lr must be a number/ });
  t.throws(() => s.adamwStep({ skipNonFinite: 1 as unknown as boolean }), {
    name: 'TypeError',
    message: /skipNonFinite must be a boolean/,
  });
  t.throws(() => s.setRngState(5 as unknown as string), { name: 'TypeError', message: /^state must be a string/ });
  t.same(s.info()[0], {
    name: 'a',
    shape: [2, 3],
    numel: 6,
    init: 'normal',
    std: 0.02,
    decay: true,
    dtype: 'float32',
    trainable: true,
  });
});
