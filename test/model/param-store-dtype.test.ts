// ParamStore storage dtypes and frozen parameters: bfloat16 values (rounded to nearest even on
// write, widened exactly on read, raw bits in and out without loss), bf16 initialisation equal
// to the rounded float32 initialisation, frozen parameters without gradient or moments that
// zeroGrad, the gradient norm and AdamW skip, resident bytes, and the errors naming the
// parameter.
import t from 'tap';

import { ParamStore, type ParamSpec } from '../../lib/model/index.js';
import { randn } from './fixtures/reference.js';

/** float32 -> bfloat16 bits, round to nearest even, written from the definition (float64 arithmetic on the bit pattern). */
function refBf16(x: number): number {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  if (Number.isNaN(f[0])) return (u >>> 16) | 0x40;
  const upper = u >>> 16;
  const lower = u & 0xffff;
  if (lower > 0x8000 || (lower === 0x8000 && (upper & 1) === 1)) return (upper + 1) & 0xffff;
  return upper;
}

/** bfloat16 bits -> float value. */
function fromBf16(h: number): number {
  return new Float32Array(new Uint32Array([h << 16]).buffer)[0];
}

const specs = (over: Partial<ParamSpec> = {}): ParamSpec[] => [
  { name: 'w', shape: [7, 9], ...over },
  { name: 'g', shape: [9], init: 'ones' },
  { name: 'big', shape: [300, 300], std: 0.5, ...over },
];

t.test('bfloat16 values: rounding to nearest even, exact widening, raw bits without loss', async (t) => {
  const s = ParamStore.fromSpecs(specs({ dtype: 'bfloat16' }), 3);
  t.teardown(() => s.dispose());
  t.same(
    s.info().map((p) => [p.name, p.dtype, p.trainable]),
    [
      ['w', 'bfloat16', false],
      ['g', 'float32', true],
      ['big', 'bfloat16', false],
    ],
  );
  // ties and near-ties around 1 + k 2^-7, signs, tiny and huge values, infinities, NaN
  const probes = [
    1 + 2 ** -8,
    1 + 3 * 2 ** -8,
    1 + 2 ** -8 + 2 ** -20,
    -(1 + 3 * 2 ** -8),
    3.14159,
    -2.5e-38,
    1e-40,
    3.3e38,
    3.4e38,
    Infinity,
    -Infinity,
    Number.NaN,
    0,
    -0,
  ];
  const data = randn(63, 5, -4, 4);
  probes.forEach((v, i) => (data[i] = v));
  s.write('w', data);
  const back = s.read('w');
  const bits = s.readBf16('w');
  for (let i = 0; i < data.length; i++) {
    const want = refBf16(data[i]);
    if (bits[i] !== want)
      t.fail(`element ${i} (${data[i]}): bits ${bits[i].toString(16)}, expected ${want.toString(16)}`);
    if (!Object.is(back[i], fromBf16(want)) && !(Number.isNaN(back[i]) && Number.isNaN(fromBf16(want))))
      t.fail(`element ${i} widened to ${back[i]}`);
  }
  t.equal(bits[0], 0x3f80, '1 + 2^-8 is a tie: rounds to even (1.0)');
  t.equal(bits[1], 0x3f82, '1 + 3 2^-8 is a tie: rounds to even (1 + 2^-6)');
  t.equal(bits[2], 0x3f81, 'just above the tie rounds up');
  t.ok(Number.isNaN(back[11]), 'NaN stays NaN');
  t.equal(back[8], Infinity, '3.4e38 rounds past the largest bf16 to infinity');
  // raw bits: every pattern survives a write/read, including NaN payloads and subnormals
  const raw = Uint16Array.from({ length: 63 }, (_, i) => (i * 1031 + 7) & 0xffff);
  raw[0] = 0x7fc1;
  raw[1] = 0x0001;
  raw[2] = 0x8000;
  s.write('w', raw);
  t.same(Array.from(s.readBf16('w')), Array.from(raw), 'bits in, bits out');
  const widened = s.read('w');
  t.ok(
    raw.every((h, i) => Object.is(widened[i], fromBf16(h)) || (Number.isNaN(widened[i]) && Number.isNaN(fromBf16(h)))),
    'read widens the bits exactly',
  );
  // errors
  t.throws(() => s.write('g', new Uint16Array(9)), {
    name: 'TypeError',
    message: /only for the value of a bfloat16 parameter; 'g' is float32/,
  });
  t.throws(() => s.write('w', new Uint16Array(62)), {
    name: 'RangeError',
    message: /data must have 63 elements, got 62/,
  });
  t.throws(() => s.readBf16('g'), { name: 'TypeError', message: /parameter 'g' is float32/ });
  t.throws(() => s.read('w', 'grad'), {
    name: 'RangeError',
    message: /parameter 'w' is not trainable: it has no gradient/,
  });
  t.throws(() => s.write('w', new Float32Array(63), 'm'), {
    name: 'RangeError',
    message: /parameter 'w' is not trainable: it has no AdamW moments/,
  });
  t.throws(() => s.view('w'), { message: /parameter 'w' has no float32 values \(it is bfloat16/ });
  t.throws(() => s.view('w', 'grad'), { message: /no float32 gradient or moments \(it is not trainable\)/ });
});

t.test('bfloat16 initialisation is the float32 initialisation of the same seed, rounded', async (t) => {
  const f32 = ParamStore.fromSpecs(specs(), 11);
  const b16 = ParamStore.fromSpecs(specs({ dtype: 'bfloat16' }), 11);
  t.teardown(() => [f32, b16].forEach((s) => s.dispose()));
  for (const name of ['w', 'big']) {
    const a = f32.read(name);
    const b = b16.readBf16(name);
    t.ok(
      a.every((v, i) => refBf16(v) === b[i]),
      `${name}: bits of the rounded float32 values`,
    );
  }
  t.same(b16.read('g'), f32.read('g'));
});

t.test('frozen parameters: no gradient or moments; zeroGrad, gradNorm and AdamW skip them; bytes', async (t) => {
  const frozen = ParamStore.fromSpecs(
    [
      { name: 'a', shape: [4, 5] },
      { name: 'b', shape: [6], trainable: false },
      { name: 'c', shape: [3, 3], dtype: 'bfloat16' },
    ],
    2,
  );
  const plain = ParamStore.fromSpecs(
    [
      { name: 'a', shape: [4, 5] },
      { name: 'b', shape: [6] },
      { name: 'c', shape: [3, 3] },
    ],
    2,
  );
  t.teardown(() => [frozen, plain].forEach((s) => s.dispose()));
  t.equal(frozen.numel, 20 + 6 + 9);
  t.equal(frozen.trainableNumel, 20);
  t.equal(plain.trainableNumel, 35);
  t.equal(frozen.bytes, 20 * 16 + 6 * 4 + 9 * 2, 'values 4 or 2 bytes; grad and moments only for trainable ones');
  t.equal(plain.bytes, 35 * 16);
  const g = randn(20, 7);
  frozen.write('a', g, 'grad');
  plain.write('a', g, 'grad');
  const bBefore = frozen.read('b');
  const cBefore = frozen.readBf16('c');
  t.ok(Math.abs(frozen.gradNorm() - Math.hypot(...g)) < 1e-6 * Math.hypot(...g), 'norm over the trainable gradients');
  const r = frozen.adamwStep({ lr: 0.1, weightDecay: 0.5 });
  plain.adamwStep({ lr: 0.1, weightDecay: 0.5 });
  t.ok(r.applied);
  t.same(frozen.read('a'), plain.read('a'), 'the trainable parameter moves as in a plain store');
  t.same(frozen.read('b'), bBefore, 'a frozen float32 parameter does not move (no weight decay either)');
  t.same(frozen.readBf16('c'), cBefore, 'nor a bfloat16 one');
  frozen.zeroGrad();
  t.equal(frozen.gradNorm(), 0);
  t.same(
    frozen.info().map((p) => p.trainable),
    [true, false, false],
  );
  t.throws(() => ParamStore.fromSpecs([{ name: 'x', shape: [2], dtype: 'bfloat16', trainable: true }], 1), {
    name: 'RangeError',
    message: /parameter 'x': a bfloat16 parameter must be non-trainable/,
  });
  t.throws(() => ParamStore.fromSpecs([{ name: 'x', shape: [2], dtype: 'float16' as 'bfloat16' }], 1), {
    name: 'RangeError',
    message: /options\.specs\[0\]\.dtype must be one of/,
  });
  t.throws(() => ParamStore.fromSpecs([{ name: 'x', shape: [2], trainable: 1 as unknown as boolean }], 1), {
    name: 'TypeError',
    message: /options\.specs\[0\]\.trainable must be a boolean/,
  });
});

t.test('checkpoints refuse stores with frozen or bfloat16 parameters, naming the parameter', async (t) => {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { modelConfig, parameterLayout, saveCheckpoint } = await import('../../lib/model/index.js');
  const config = modelConfig('tiny', { layers: 1, vocab: 64, width: 16, heads: 2, kvHeads: 1, headDim: 8, ffn: 8 });
  const store = ParamStore.fromSpecs(
    parameterLayout(config).map((p) => (p.name === 'embed.weight' ? { ...p, dtype: 'bfloat16' as const } : p)),
    1,
  );
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-dtype-'));
  t.teardown(() => {
    store.dispose();
    rmSync(dir, { recursive: true, force: true });
  });
  t.throws(() => saveCheckpoint(join(dir, 'a.safetensors'), { config, store }), {
    name: 'CheckpointError',
    message: /parameter 'embed\.weight' is bfloat16, frozen: checkpoints hold stores of float32 trainable parameters/,
  });
});
