import { execFileSync } from 'node:child_process';

import t from 'tap';

import { ParamStore, adamwUpdate, modelConfig, parameterLayout, sumSquares } from '../../lib/model/index.js';
import { memory } from '../../lib/native/index.js';
import { closeness, randn, refAdamW, sameBits } from './fixtures/reference.js';

const HP = { lr: 0.01, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 };

t.test('adamwUpdate follows the reference AdamW over several steps (decay, no decay, grad scale)', async (t) => {
  for (const [n, decay, gradScale] of [
    [1, true, 1],
    [37, true, 0.5],
    [70001, false, 1],
  ] as const) {
    const p = randn(n, 1);
    const m = new Float32Array(n);
    const v = new Float32Array(n);
    const rp = Float64Array.from(p);
    const rm = new Float64Array(n);
    const rv = new Float64Array(n);
    for (let step = 1; step <= 5; step++) {
      const g = randn(n, 100 + step, -2, 2);
      adamwUpdate({ param: p, grad: g, m, v, step, ...HP, gradScale, decay });
      refAdamW(rp, g, rm, rv, step, { ...HP, gradScale, decay });
    }
    t.ok(closeness(p, rp, 1e-5, 1e-6) <= 1, `params n=${n}`);
    t.ok(closeness(m, rm, 1e-5, 1e-7) <= 1, `first moment n=${n}`);
    t.ok(closeness(v, rv, 1e-5, 1e-9) <= 1, `second moment n=${n}`);
  }
  t.throws(
    () =>
      adamwUpdate({
        param: new Float32Array(2),
        grad: new Float32Array(2),
        m: new Float32Array(2),
        v: new Float32Array(2),
        step: 0,
      }),
    {
      name: 'RangeError',
      message: /step must be in/,
    },
  );
  t.throws(
    () =>
      adamwUpdate({
        param: new Float32Array(2),
        grad: new Float32Array(2),
        m: new Float32Array(2),
        v: new Float32Array(2),
        step: 1,
        beta1: 1,
      }),
    {
      name: 'RangeError',
      message: /beta1 must be in \[0, 1\)/,
    },
  );
  const x = randn(100003, 5);
  const ss = x.reduce((s, v) => s + v * v, 0);
  t.ok(Math.abs(sumSquares(x) - ss) <= 1e-6 * ss, 'sumSquares');
});

t.test('a store from a config: layout, seeded initialisation, copy-in/out, views', async (t) => {
  const config = modelConfig('tiny', { layers: 2, vocab: 300 });
  const a = ParamStore.fromConfig(config, 42);
  const b = ParamStore.fromConfig(config, 42);
  const c = ParamStore.fromConfig(config, 43);
  t.teardown(() => [a, b, c].forEach((s) => s.dispose()));
  const layout = parameterLayout(config);
  t.same(
    a.names(),
    layout.map((p) => p.name),
  );
  t.equal(
    a.numel,
    layout.reduce((n, p) => n + p.shape.reduce((x, y) => x * y, 1), 0),
  );
  t.equal(a.seed, 42);
  const bytes = (x: Float32Array): Buffer => Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  t.ok(
    a.names().every((name) => bytes(a.read(name)).equals(bytes(b.read(name)))),
    'same seed, same values',
  );
  t.notSame(
    Array.from(a.read('embed.weight').subarray(0, 16)),
    Array.from(c.read('embed.weight').subarray(0, 16)),
    'another seed differs',
  );
  // initialisation statistics
  const info = new Map(a.info().map((p) => [p.name, p]));
  const emb = a.read('embed.weight');
  const mean = emb.reduce((s, v) => s + v, 0) / emb.length;
  const std = Math.sqrt(emb.reduce((s, v) => s + (v - mean) ** 2, 0) / emb.length);
  t.ok(Math.abs(mean) < 0.002 && Math.abs(std - 0.02) < 0.001, `embedding ~ normal(0, 0.02): mean ${mean}, std ${std}`);
  const o = a.read('layers.0.attn.o.weight');
  const ostd = Math.sqrt(o.reduce((s, v) => s + v * v, 0) / o.length);
  t.ok(Math.abs(ostd - 0.02 / Math.sqrt(4)) < 0.001, `output projections scaled by 1/sqrt(2 layers): ${ostd}`);
  t.ok(
    a.read('norm.weight').every((v) => v === 1),
    'norm gains are ones',
  );
  t.ok(
    a.read('layers.1.attn.sinks').every((v) => v === 0),
    'sinks are zeros',
  );
  t.equal(info.get('norm.weight')?.decay, false);
  t.equal(info.get('lm_head.weight')?.decay, true);
  t.ok(
    a.read('embed.weight', 'grad').every((v) => v === 0) &&
      a.read('embed.weight', 'm').every((v) => v === 0) &&
      a.read('embed.weight', 'v').every((v) => v === 0),
    'grads and moments start at 0',
  );
  // copy-in/out and aliasing views
  const w = randn(128, 3);
  a.write('norm.weight', w);
  t.ok(sameBits(a.read('norm.weight'), w));
  const view = a.view('norm.weight', 'grad');
  view[5] = 2.5;
  t.equal(a.read('norm.weight', 'grad')[5], 2.5, 'a view writes the native buffer');
  a.zeroGrad();
  t.equal(view[5], 0, 'and sees native writes');
  t.throws(() => a.write('norm.weight', new Float32Array(3)), {
    name: 'RangeError',
    message: /data has length 3, expected 128/,
  });
  t.throws(() => a.read('nope'), { name: 'RangeError', message: /unknown parameter 'nope'/ });
  t.throws(() => a.read('norm.weight', 'x' as 'grad'), { name: 'RangeError', message: /which must be one of/ });
});

t.test('store memory is tracked and freed by dispose; views are detached', async (t) => {
  const before = memory.currentBytes();
  const s = ParamStore.fromSpecs([{ name: 'w', shape: [1000, 100] }], 1);
  t.ok(memory.currentBytes() - before >= 4 * 4 * 100000, 'value, grad, m, v counted');
  const v = s.view('w');
  t.equal(v.length, 100000);
  s.dispose();
  s.dispose();
  t.ok(s.disposed);
  t.equal(v.length, 0, 'views are detached');
  t.throws(() => s.names(), { message: /ParamStore has been disposed/ });
  t.throws(() => s.adamwStep({}), { message: /disposed/ });
  // Without views, dispose frees at once; with views, once the detached views are collected
  // (checked in a child process that can force garbage collection).
  const script = `
    const addon = require('node-gyp-build')(process.cwd());
    const mb = () => addon.memoryStats('cpu').currentBytes / 1e6;
    (async () => {
      const base = mb();
      const a = new addon.ParamStore({ seed: 1, specs: [{ name: 'w', shape: [1000, 1000] }] });
      const grown = mb() - base;
      a.dispose();
      const plain = mb() - base;
      const b = new addon.ParamStore({ seed: 1, specs: [{ name: 'w', shape: [1000, 1000] }] });
      let view = b.view('w');
      b.dispose();
      const held = mb() - base;
      view = null;
      for (let i = 0; i < 5; i++) { gc(); await new Promise((r) => setTimeout(r, 20)); }
      console.log(JSON.stringify([grown, plain, held, mb() - base]));
    })();`;
  const [grown, plain, held, after] = JSON.parse(
    execFileSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' }),
  ) as number[];
  t.ok(grown >= 16, `a 1M-parameter store takes ${grown} MB (value, grad, m, v)`);
  t.equal(plain, 0, 'dispose without views frees at once');
  t.ok(held >= 16, 'a live (detached) view defers the release');
  t.equal(after, 0, 'released once the view is collected');
});

t.test('store AdamW step: matches the reference with global-norm clipping; non-finite norms skip', async (t) => {
  const specs = [
    { name: 'w', shape: [7, 5] },
    { name: 'g', shape: [5], init: 'ones' as const, decay: false },
    { name: 'z', shape: [3, 2, 2], init: 'zeros' as const },
  ];
  const s = ParamStore.fromSpecs(specs, 7);
  t.teardown(() => s.dispose());
  const ref = new Map(
    specs.map((p) => [
      p.name,
      {
        p: Float64Array.from(s.read(p.name)),
        m: new Float64Array(s.read(p.name).length),
        v: new Float64Array(s.read(p.name).length),
      },
    ]),
  );
  const maxGradNorm = 1.5;
  for (let step = 1; step <= 4; step++) {
    const grads = new Map(specs.map((p, i) => [p.name, randn(s.read(p.name).length, step * 10 + i, -2, 2)]));
    for (const [name, g] of grads) s.write(name, g, 'grad');
    const norm = Math.sqrt([...grads.values()].reduce((acc, g) => acc + g.reduce((x, v) => x + v * v, 0), 0));
    t.ok(Math.abs(s.gradNorm() - norm) < 1e-6 * norm, 'gradNorm');
    const scale = Math.min(1, maxGradNorm / (norm + 1e-6));
    const r = s.adamwStep({ ...HP, maxGradNorm });
    t.ok(r.applied && r.finite && r.step === step, `step ${step} applied`);
    t.ok(Math.abs(r.gradNorm - norm) < 1e-6 * norm, 'reported norm');
    t.ok(Math.abs(r.clipScale - scale) < 1e-6 * scale, `clip scale ${r.clipScale}`);
    for (const p of specs) {
      const q = ref.get(p.name)!;
      refAdamW(q.p, grads.get(p.name)!, q.m, q.v, step, { ...HP, gradScale: scale, decay: p.decay ?? true });
    }
  }
  for (const p of specs) {
    const q = ref.get(p.name)!;
    t.ok(closeness(s.read(p.name), q.p, 1e-5, 1e-6) <= 1, `${p.name} values`);
    t.ok(closeness(s.read(p.name, 'm'), q.m, 1e-5, 1e-7) <= 1, `${p.name} m`);
    t.ok(closeness(s.read(p.name, 'v'), q.v, 1e-5, 1e-9) <= 1, `${p.name} v`);
  }
  // a NaN gradient: reported, nothing changes, the step count stays
  const before = s.read('w');
  const g = s.read('w', 'grad');
  g[3] = Number.NaN;
  s.write('w', g, 'grad');
  const r = s.adamwStep({ ...HP, maxGradNorm });
  t.same([r.finite, r.applied, r.step], [false, false, 4]);
  t.ok(Number.isNaN(r.gradNorm));
  t.ok(sameBits(s.read('w'), before), 'values unchanged');
  g[3] = Number.POSITIVE_INFINITY;
  s.write('w', g, 'grad');
  t.equal(s.adamwStep({ ...HP }).finite, false, 'an infinite norm is not finite either');
  const forced = s.adamwStep({ ...HP, skipNonFinite: false });
  t.same([forced.applied, forced.step], [true, 5], 'skipNonFinite: false applies anyway');
  s.step = 2;
  t.equal(s.step, 2);
  t.throws(() => (s.step = -1), { name: 'RangeError' });
  t.throws(() => s.adamwStep({ lr: -1 }), { name: 'RangeError', message: /lr must be/ });
  t.throws(() => s.adamwStep({ maxGradNorm: -1 }), { name: 'RangeError', message: /maxGradNorm/ });
});

t.test('store RNG state round-trips; spec errors are reported', async (t) => {
  const s = ParamStore.fromSpecs([{ name: 'a', shape: [2] }], 5);
  t.teardown(() => s.dispose());
  const st = s.rngState();
  t.match(st, /^[0-9a-f]{64}$/);
  t.equal(ParamStore.fromSpecs([{ name: 'a', shape: [2] }], 5).rngState(), st, 'seeded');
  s.setRngState('0'.repeat(63) + '1');
  t.equal(s.rngState(), '0'.repeat(63) + '1');
  t.throws(() => s.setRngState('0'.repeat(64)), { name: 'RangeError', message: /all zeros/ });
  t.throws(() => s.setRngState('xyz'), { name: 'RangeError', message: /64 hexadecimal/ });
  t.throws(() => ParamStore.fromSpecs([], 1), { name: 'RangeError', message: /at least one parameter/ });
  t.throws(
    () =>
      ParamStore.fromSpecs(
        [
          { name: 'a', shape: [2] },
          { name: 'a', shape: [3] },
        ],
        1,
      ),
    { name: 'RangeError', message: /duplicate parameter name 'a'/ },
  );
  t.throws(() => ParamStore.fromSpecs([{ name: 'a', shape: [] }], 1), {
    name: 'RangeError',
    message: /1 to 4 dimensions/,
  });
  t.throws(() => ParamStore.fromSpecs([{ name: 'a', shape: [0] }], 1), {
    name: 'RangeError',
    message: /shape\[0\] must be in/,
  });
  t.throws(() => ParamStore.fromSpecs([{ name: '', shape: [1] }], 1), { name: 'RangeError', message: /empty name/ });
  t.throws(() => ParamStore.fromSpecs([{ name: 'a', shape: [1], init: 'xavier' as 'ones' }], 1), {
    name: 'RangeError',
    message: /init must be one of/,
  });
  t.throws(() => ParamStore.fromSpecs([{ name: 'a', shape: [1] }], -1), {
    name: 'RangeError',
    message: /seed must be in/,
  });
  t.throws(() => ParamStore.fromSpecs('x' as unknown as [], 1), {
    name: 'TypeError',
    message: /specs must be an array/,
  });
});
