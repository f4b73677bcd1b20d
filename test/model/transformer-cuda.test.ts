// The built-in transformer on a CUDA device against the same model on the CPU (the reference
// the GPU path is tested against; the CPU path itself is tested against float64 in
// transformer.test.ts): a GPU parameter store (same initialisation, copies, zeroGrad, gradient
// norm, AdamW with clipping and the non-finite skip), training forward/backward on packed
// batches with several documents, odd lengths, GQA, biases, a sliding window, temperature,
// fused and eager attention (log-probs, entropies and every parameter gradient within 1e-4
// relative, scaled by the parameter's largest gradient), batched sampling with KV caches on the
// device (greedy tokens equal, sampled tokens equal with the same seeds, forks), policy training
// steps, checkpoints across devices, and the errors (device requests, views, disposed objects,
// out of memory under a tracked limit). Skipped with a visible message without a CUDA build and
// a GPU (the CUDA emulator, `npm run build:cuda-emulator`, counts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import {
  ParamStore,
  Transformer,
  TransformerPolicy,
  type TransformerSession,
  modelConfig,
  type ModelConfig,
} from '../../lib/model/index.js';
import { modelAddon } from '../../lib/model/native.js';
import { DeviceUnavailableError, isOutOfMemoryError, memory } from '../../lib/native/index.js';
import { closeness, randint, rng } from './fixtures/reference.js';
import { randomizeStore } from './fixtures/transformer-reference.js';
import { noCudaModelOps } from './fixtures/cuda-skip.js';

const noGpu = noCudaModelOps();

const config = (over: Partial<ModelConfig> = {}): ModelConfig =>
  modelConfig({
    layers: 2,
    width: 24,
    heads: 4,
    kvHeads: 2,
    headDim: 6,
    window: 5,
    vocab: 53,
    context: 160,
    ffn: 20,
    ropeTheta: 1000,
    normEps: 1e-5,
    initStd: 0.1,
    swiglu: 'clamped',
    bias: false,
    ...over,
  });

/** max |a - b| / max |b| (scale-aware relative error of a whole tensor; 0 when both are 0). */
function scaled(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let e = 0;
  let m = 0;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    e = Number.isNaN(d) ? Infinity : Math.max(e, d);
    m = Math.max(m, Math.abs(b[i]));
  }
  return e === 0 ? 0 : e / Math.max(m, 1e-30);
}

/** A packed batch of documents of the given lengths (random tokens, some targets -1). */
function batchOf(lengths: number[], vocab: number, seed: number) {
  const T = lengths.reduce((a, b) => a + b, 0);
  const documentIds = new Int32Array(T);
  const positions = new Int32Array(T);
  let at = 0;
  lengths.forEach((n, d) => {
    for (let i = 0; i < n; i++) {
      documentIds[at + i] = 7 + 2 * d;
      positions[at + i] = i;
    }
    at += n;
  });
  return { tokens: randint(T, seed, 0, vocab), targets: randint(T, seed + 1, -1, vocab), positions, documentIds };
}

/** The same model on the CPU and on the GPU, with the same random parameters. */
function pair(c: ModelConfig, seed: number): { cpu: Transformer; gpu: Transformer } {
  const cpu = Transformer.create(c, seed);
  const gpu = Transformer.create(c, seed, { device: 'cuda' });
  randomizeStore(cpu.store, seed + 100);
  randomizeStore(gpu.store, seed + 100);
  return { cpu, gpu };
}

t.test('device requests of stores, models and policies', async (t) => {
  const c = config();
  const p = TransformerPolicy.create(c, { seed: 1 });
  t.equal(p.device, 'cpu', 'policies default to the cpu');
  t.equal(p.model.store.device, 'cpu');
  p.dispose();
  t.throws(() => ParamStore.fromConfig(c, 1, { device: 'tpu' as 'cpu' }), {
    name: 'RangeError',
    message: /must be 'cpu', 'cuda' or 'auto'/,
  });
  const auto = Transformer.create(c, 1, { device: 'auto' });
  t.equal(auto.device, noGpu ? 'cpu' : 'cuda:0', "'auto' picks the GPU when there is one");
  auto.dispose();
  const Native = modelAddon().ParamStore;
  t.throws(() => new Native({ config: c, seed: 1, device: 'cuda:7' }), { message: /device 'cuda:7' is not available/ });
  t.throws(() => new Native({ config: c, seed: 1, device: 'gpu' }), {
    name: 'RangeError',
    message: /options.device must be 'cpu', 'cuda'/,
  });
  if (noGpu) {
    t.throws(
      () => TransformerPolicy.create(c, { device: 'cuda' }),
      DeviceUnavailableError,
      'cuda without a GPU: DeviceUnavailableError',
    );
    t.throws(() => Transformer.create(c, 1, { device: 'cuda' }), {
      name: 'DeviceUnavailableError',
      message: /device 'cuda' is not available: /,
    });
    t.throws(() => ParamStore.fromConfig(c, 1, { device: 'cuda' }), { name: 'DeviceUnavailableError' });
    t.throws(() => new Native({ config: c, seed: 1, device: 'cuda' }), { message: /device 'cuda' is not available/ });
  }
});

t.test('a GPU parameter store: initialisation, copies, gradient norm, AdamW', { skip: noGpu }, async (t) => {
  const c = config({ bias: true });
  const cpu = ParamStore.fromConfig(c, 42);
  const gpu = ParamStore.fromConfig(c, 42, { device: 'cuda' });
  t.equal(gpu.device, 'cuda:0');
  t.same(gpu.names(), cpu.names());
  for (const n of cpu.names()) {
    t.same(gpu.read(n), cpu.read(n), `${n}: initialised bit for bit like the CPU store`);
    t.equal(
      Math.max(...gpu.read(n, 'grad').map(Math.abs), ...gpu.read(n, 'm'), ...gpu.read(n, 'v')),
      0,
      `${n}: zero gradient and moments`,
    );
  }
  t.throws(() => gpu.view('norm.weight'), {
    message: /lives on cuda:0 \(no host memory to alias\); use read\(\) and write\(\)/,
  });
  // The same gradients on both: the norm, one clipped AdamW step, then one unclipped.
  const r = rng(3);
  for (const info of cpu.info()) {
    const g = Float32Array.from({ length: info.numel }, () => (r() - 0.5) * (info.name.includes('sinks') ? 3 : 1));
    cpu.write(info.name, g, 'grad');
    gpu.write(info.name, g, 'grad');
    t.same(gpu.read(info.name, 'grad'), g, 'write/read round trip');
  }
  t.ok(
    Math.abs(gpu.gradNorm() - cpu.gradNorm()) <= 1e-6 * cpu.gradNorm(),
    'gradient norms equal to 1e-6 (float partial sums on the GPU)',
  );
  const opts = { lr: 0.01, weightDecay: 0.1, maxGradNorm: 1, beta2: 0.99 };
  const a = cpu.adamwStep(opts);
  const b = gpu.adamwStep(opts);
  t.equal(b.step, 1);
  t.ok(b.applied && b.finite);
  t.ok(Math.abs(b.clipScale - a.clipScale) <= 1e-6 * a.clipScale && a.clipScale < 1, 'clipped by the same factor');
  cpu.adamwStep({ lr: 0.02 });
  gpu.adamwStep({ lr: 0.02 });
  let err = 0;
  for (const n of cpu.names()) {
    for (const which of ['value', 'm', 'v'] as const)
      err = Math.max(err, closeness(gpu.read(n, which), cpu.read(n, which), 1e-5, 1e-7));
  }
  t.ok(err <= 1, `two AdamW steps: values and moments within 1e-5 of the CPU (worst ${err.toFixed(3)})`);
  t.comment(`AdamW: worst |gpu - cpu| / (1e-5 |cpu| + 1e-7) = ${err.toExponential(2)}`);
  gpu.zeroGrad();
  t.equal(gpu.gradNorm(), 0, 'zeroGrad');
  const bad = new Float32Array(cpu.info()[0].numel);
  bad[5] = Number.NaN;
  gpu.write(cpu.names()[0], bad, 'grad');
  const before = gpu.read('norm.weight');
  const skipped = gpu.adamwStep({ lr: 0.1 });
  t.same(
    { finite: skipped.finite, applied: skipped.applied, step: skipped.step },
    { finite: false, applied: false, step: 2 },
    'a NaN gradient skips the step',
  );
  t.same(gpu.read('norm.weight'), before, 'and leaves the values alone');
  gpu.dispose();
  cpu.dispose();
  t.ok(gpu.disposed);
  t.throws(() => gpu.read('norm.weight'), { message: /disposed/ });
});

t.test('GPU training forward and backward equal the CPU on packed batches', { skip: noGpu }, async (t) => {
  const cases: { name: string; c: ModelConfig; lengths: number[]; temperature: number; impl: 'fused' | 'eager' }[] = [
    { name: 'fused, window 5, GQA, 3 documents', c: config(), lengths: [29, 41, 3], temperature: 1, impl: 'fused' },
    {
      name: 'fused, biases, temperature 0.7, one long document',
      c: config({ bias: true, layers: 3, swiglu: 'standard' }),
      lengths: [131],
      temperature: 0.7,
      impl: 'fused',
    },
    {
      name: 'eager, window 9, MHA, 2 documents',
      c: config({ window: 9, kvHeads: 4, headDim: 8, width: 30 }),
      lengths: [66, 1],
      temperature: 1.3,
      impl: 'eager',
    },
    {
      name: 'fused, no window, 5 documents',
      c: config({ window: 0, heads: 6, kvHeads: 3 }),
      lengths: [12, 1, 30, 7, 19],
      temperature: 1,
      impl: 'fused',
    },
  ];
  let worstLogp = 0;
  let worstGrad = 0;
  for (const [i, k] of cases.entries()) {
    const { cpu, gpu } = pair(k.c, 11 + i);
    const batch = batchOf(k.lengths, k.c.vocab, 300 + i);
    const T = batch.tokens.length;
    const opts = { temperature: k.temperature, impl: k.impl };
    const noSave = gpu.logProbs(batch, opts);
    const f1 = cpu.forward(batch, opts);
    const f2 = gpu.forward(batch, opts);
    const e = Math.max(
      closeness(f2.logProbs, f1.logProbs, 1e-4, 1e-6),
      closeness(f2.entropy, f1.entropy, 1e-4, 1e-6),
      closeness(noSave.logProbs, f1.logProbs, 1e-4, 1e-6),
    );
    worstLogp = Math.max(worstLogp, e);
    t.ok(e <= 1, `${k.name}: log-probs and entropies within 1e-4 (worst ${e.toFixed(3)})`);
    t.ok(f2.bytes > 0, 'the GPU forward keeps its activations');
    const r = rng(500 + i);
    const dLogProbs = Float32Array.from({ length: T }, () => r() - 0.5);
    const dEntropy = Float32Array.from({ length: T }, () => 0.3 * (r() - 0.5));
    f1.backward({ dLogProbs, dEntropy });
    await f2.backwardAsync({ dLogProbs, dEntropy });
    t.equal(f2.bytes, 0, 'activations freed by the backward');
    let g = 0;
    let where = '';
    for (const n of cpu.store.names()) {
      const s = scaled(gpu.store.read(n, 'grad'), cpu.store.read(n, 'grad'));
      if (s > g) [g, where] = [s, n];
    }
    worstGrad = Math.max(worstGrad, g);
    t.ok(
      g <= 1e-4,
      `${k.name}: every parameter gradient within 1e-4 of its scale (worst ${g.toExponential(2)} at ${where})`,
    );
    t.ok(Math.abs(gpu.store.gradNorm() - cpu.store.gradNorm()) <= 1e-4 * cpu.store.gradNorm(), 'gradient norms agree');
    cpu.dispose();
    gpu.dispose();
  }
  t.comment(
    `forward: worst |gpu - cpu| / (1e-4 |cpu| + 1e-6) = ${worstLogp.toExponential(2)}; gradients: worst max|gpu - cpu| / max|cpu| = ${worstGrad.toExponential(2)}`,
  );
});

t.test('GPU training: train-state errors, async forward, no logits without targets', { skip: noGpu }, async (t) => {
  const c = config();
  const { cpu, gpu } = pair(c, 21);
  const batch = batchOf([20, 13], c.vocab, 9);
  const f = await gpu.forwardAsync({ tokens: batch.tokens, documentIds: batch.documentIds });
  t.same(Array.from(f.logProbs), new Array(33).fill(0), 'no targets: log-probs 0');
  const ref = cpu.logProbs({ tokens: batch.tokens, documentIds: batch.documentIds });
  t.ok(closeness(f.entropy, ref.entropy, 1e-4, 1e-6) <= 1, 'entropies without targets');
  gpu.store.adamwStep({ lr: 0.01 });
  t.throws(() => f.backward({ dEntropy: new Float32Array(33) }), {
    message: /the parameters changed \(optimiser step 0 -> 1\)/,
  });
  const f2 = gpu.forward(batch);
  f2.backward({ dLogProbs: new Float32Array(33).fill(1) });
  t.throws(() => f2.backward({}), { message: /already used/ });
  const f3 = gpu.forward(batch);
  const held = memory.currentBytes('cuda');
  f3.release();
  t.ok(memory.currentBytes('cuda') < held, 'release frees the device activations');
  t.throws(() => gpu.forward({ tokens: Int32Array.of(1, 99) }), {
    name: 'RangeError',
    message: /tokens\[1\] = 99 is out of range/,
  });
  cpu.dispose();
  gpu.dispose();
});

/** Runs the same jobs on both models' sessions; returns both results. */
async function runBoth(
  cpu: Transformer,
  gpu: Transformer,
  a: TransformerSession[],
  b: TransformerSession[],
  job: Parameters<Transformer['run']>[0][number]['job'],
  prefillChunk = 512,
) {
  const ra = await cpu.run(
    a.map((session) => ({ session, job })),
    { prefillChunk },
  );
  const rb = await gpu.run(
    b.map((session) => ({ session, job })),
    { prefillChunk },
  );
  return { ra, rb };
}

t.test('GPU sampling: KV caches on the device, batched decoding, the CPU tokens', { skip: noGpu }, async (t) => {
  const c = config({ layers: 3, window: 6, bias: true });
  const { cpu, gpu } = pair(c, 31);
  // Sessions of different prompt lengths: decode rows (<= 8 new tokens) and fused prefill chunks.
  const prompts = [3, 17, 70, 1, 9].map((n, i) => randint(n, 700 + i, 0, c.vocab));
  const mk = (m: Transformer, seeds: number[]) =>
    prompts.map((p, i) => {
      const s = m.createSession(seeds[i]);
      s.append(p);
      return s;
    });
  const seeds = [5, 6, 7, 8, 9];
  const sa = mk(cpu, seeds);
  const sb = mk(gpu, seeds);
  let logitErr = 0;
  const greedy = await runBoth(cpu, gpu, sa, sb, { kind: 'sample', maxTokens: 12, temperature: 0 }, 16);
  for (let i = 0; i < prompts.length; i++) {
    t.same(Array.from(greedy.rb[i].tokens), Array.from(greedy.ra[i].tokens), `greedy session ${i}: the CPU's tokens`);
    t.ok(closeness(greedy.rb[i].logProbs, greedy.ra[i].logProbs, 1e-4, 1e-5) <= 1, 'and their log-probs');
  }
  // Continue the same sessions with sampling (temperature, top-k, top-p), past 64 cached rows.
  const sampled = await runBoth(cpu, gpu, sa, sb, {
    kind: 'sample',
    maxTokens: 30,
    temperature: 1,
    topK: 20,
    topP: 0.95,
  });
  for (let i = 0; i < prompts.length; i++) {
    t.same(
      Array.from(sampled.rb[i].tokens),
      Array.from(sampled.ra[i].tokens),
      `sampled session ${i}: the same tokens from the same seed`,
    );
  }
  t.equal(sb[0].logits(), null, 'the last sampled token is pending');
  await runBoth(cpu, gpu, sa, sb, { kind: 'prefill' });
  for (let i = 0; i < prompts.length; i++) {
    const la = sa[i].logits();
    const lb = sb[i].logits();
    t.ok(la !== null && lb !== null);
    logitErr = Math.max(logitErr, closeness(lb!, la!, 1e-4, 1e-5));
    t.equal(sb[i].length, sa[i].length);
    t.ok(sb[i].bytes > 0);
  }
  t.ok(logitErr <= 1, `logits after 42 steps within 1e-4 (worst ${logitErr.toFixed(3)})`);
  t.comment(`sampling: logits worst |gpu - cpu| / (1e-4 |cpu| + 1e-5) = ${logitErr.toExponential(2)}`);
  // Forks: deep copies of the device caches with their own seeds.
  const fa = sa[2].fork(77);
  const fb = sb[2].fork(77);
  t.equal(fb.bytes, fa.bytes, 'a fork holds the same cache rows');
  const forked = await runBoth(cpu, gpu, [fa, sa[2]], [fb, sb[2]], { kind: 'sample', maxTokens: 10, temperature: 0.8 });
  t.same(Array.from(forked.rb[0].tokens), Array.from(forked.ra[0].tokens), 'the fork samples like the CPU fork');
  t.same(Array.from(forked.rb[1].tokens), Array.from(forked.ra[1].tokens), 'and the original goes on unchanged');
  const held = memory.currentBytes('cuda');
  fb.dispose();
  t.ok(memory.currentBytes('cuda') < held, 'dispose frees the device cache');
  t.ok(fb.disposed);
  t.throws(() => gpu.run([{ session: sb[0] }, { session: sb[0] }]), { message: /appears twice/ });
  for (const s of [...sa, ...sb, fa]) s.dispose();
  cpu.dispose();
  gpu.dispose();
});

t.test('a GPU policy: generate, train steps and checkpoints across devices', { skip: noGpu }, async (t) => {
  const c = config({ window: 4 });
  const cpu = TransformerPolicy.create(c, { seed: 3, device: 'cpu' });
  const gpu = TransformerPolicy.create(c, { seed: 3, device: 'cuda' });
  t.equal(gpu.device, 'cuda:0');
  const requests = [0, 1, 2].map((i) => ({
    prompt: Array.from(randint(5 + 7 * i, 40 + i, 0, c.vocab)),
    maxTokens: 8,
    temperature: 0.9,
    seed: 100 + i,
  }));
  const ga = await cpu.generate(requests);
  const gb = await gpu.generate(requests);
  for (let i = 0; i < 3; i++)
    t.same(Array.from(gb[i].tokens), Array.from(ga[i].tokens), `generate ${i}: the CPU's tokens`);
  const batches = [batchOf([30, 12], c.vocab, 50), batchOf([57], c.vocab, 52)];
  // eps 1e-3 keeps the first AdamW update a smooth function of the gradient (with 1e-8 it is
  // about lr * sign(g), which may flip for gradients at rounding level).
  const optimizer = { lr: 0.01, eps: 1e-3, maxGradNorm: 0.5, weightDecay: 0.01 };
  const sa = await cpu.trainStep(batches, { kind: 'cross-entropy' }, { optimizer });
  const sb = await gpu.trainStep(batches, { kind: 'cross-entropy' }, { optimizer });
  t.ok(Math.abs(sb.loss - sa.loss) <= 1e-4 * Math.abs(sa.loss), `train step losses agree (${sa.loss} vs ${sb.loss})`);
  t.equal(sb.targets, sa.targets);
  t.ok(Math.abs(sb.optimizer.gradNorm - sa.optimizer.gradNorm) <= 1e-4 * sa.optimizer.gradNorm, 'gradient norms agree');
  let pe = 0;
  for (const n of cpu.model.store.names())
    pe = Math.max(pe, closeness(gpu.model.store.read(n), cpu.model.store.read(n), 1e-5, 1e-6));
  t.ok(pe <= 1, `parameters after the step within 1e-5 (worst ${pe.toFixed(3)})`);
  t.equal(Math.max(...gpu.model.store.read('norm.weight', 'grad').map(Math.abs)), 0, 'gradients zeroed after the step');

  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-cuda-ck-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'gpu.safetensors');
  gpu.save(path);
  const onCpu = TransformerPolicy.load(path);
  t.equal(onCpu.device, 'cpu', 'a GPU checkpoint loads on the CPU by default');
  const onGpu = TransformerPolicy.load(path, { device: 'cuda' });
  t.equal(onGpu.device, 'cuda:0');
  for (const n of cpu.model.store.names()) {
    for (const which of ['value', 'm', 'v'] as const) {
      const saved = gpu.model.store.read(n, which);
      if (!sameArray(onCpu.model.store.read(n, which), saved) || !sameArray(onGpu.model.store.read(n, which), saved)) {
        t.fail(`${n}.${which} does not round-trip`);
      }
    }
  }
  t.pass('values and AdamW moments round-trip bit for bit (GPU -> file -> CPU and GPU)');
  t.equal(onCpu.model.store.step, 1);
  t.equal(onGpu.model.store.step, 1);
  const probe = batchOf([25, 16], c.vocab, 60);
  const la = await onCpu.logProbs(probe);
  const lb = await gpu.logProbs(probe);
  const lc = await onGpu.logProbs(probe);
  t.ok(closeness(la.logProbs, lb.logProbs, 1e-4, 1e-6) <= 1, 'saved on the GPU, loaded on the CPU: the same log-probs');
  t.same(Array.from(lc.logProbs), Array.from(lb.logProbs), 'loaded on the GPU: the same bits as before saving');
  const cpuPath = join(dir, 'cpu.safetensors');
  cpu.save(cpuPath);
  const fromCpu = TransformerPolicy.load(cpuPath, { device: 'cuda' });
  t.same(
    fromCpu.model.store.read('lm_head.weight', 'm'),
    cpu.model.store.read('lm_head.weight', 'm'),
    'a CPU checkpoint loads on the GPU',
  );
  for (const p of [cpu, gpu, onCpu, onGpu, fromCpu]) p.dispose();
});

function sameArray(a: Float32Array, b: Float32Array): boolean {
  return (
    a.length === b.length &&
    Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))
  );
}

t.test('GPU model memory: freed on dispose, out of memory is catchable', { skip: noGpu }, async (t) => {
  const c = config();
  const base = memory.currentBytes('cuda');
  const policy = TransformerPolicy.create(c, { seed: 4, device: 'cuda' });
  const held = memory.currentBytes('cuda');
  t.ok(held > base, 'the GPU store is counted by the tracked device allocator');
  const batch = batchOf([40, 21], c.vocab, 70);
  let caught: unknown;
  memory.setLimit(held + 20000, 'cuda');
  try {
    await policy.forwardBackward(batch, { kind: 'cross-entropy' });
  } catch (e) {
    caught = e;
  } finally {
    memory.setLimit(null, 'cuda');
  }
  t.ok(isOutOfMemoryError(caught), 'activations past the tracked device limit: OutOfMemoryError');
  t.equal(memory.currentBytes('cuda'), held, 'nothing is left behind by the failed step');
  const r = await policy.forwardBackward(batch, { kind: 'cross-entropy' });
  t.ok(Number.isFinite(r.loss), 'the model works again without the limit');
  let sampleError: unknown;
  const s = policy.createSession({ seed: 1 });
  s.append(Array.from(randint(30, 71, 0, c.vocab)));
  try {
    memory.setLimit(memory.currentBytes('cuda') + 1000, 'cuda');
    await s.sample({ maxTokens: 4 });
  } catch (e) {
    sampleError = e;
  } finally {
    memory.setLimit(null, 'cuda');
  }
  t.ok(isOutOfMemoryError(sampleError), 'a KV cache past the limit: OutOfMemoryError from sample()');
  s.dispose();
  policy.dispose();
  t.equal(memory.currentBytes('cuda'), base, 'dispose frees the store, states and caches');
  t.throws(() => policy.model.store.read('norm.weight'), { message: /disposed/ });
  await t.rejects(policy.logProbs(batch), { message: /disposed/ });
});
