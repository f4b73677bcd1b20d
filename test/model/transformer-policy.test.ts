// TransformerPolicy: concurrent sessions batched into shared native runs with the same results
// as alone, multi-turn append/sample, generate(), the training entry points (log-probs,
// forward/backward, the three loss kinds, optimiser steps), checkpoints that resume exactly,
// and argument/lifecycle errors (the chat adapter is test/rollout/model-chat-policy.test.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { trainChatTokenizer } from '../../lib/chat/index.js';
import {
  CheckpointError,
  type ModelConfig,
  type SampleResult,
  TransformerPolicy,
  modelConfig,
  packSequences,
} from '../../lib/model/index.js';
import { closeness, randint, sameBits } from './fixtures/reference.js';
import { randomizeStore } from './fixtures/transformer-reference.js';

const cfg = (over: Partial<ModelConfig> = {}): ModelConfig =>
  modelConfig({
    layers: 2,
    width: 24,
    heads: 4,
    kvHeads: 2,
    headDim: 6,
    window: 4,
    vocab: 31,
    context: 96,
    ffn: 16,
    ropeTheta: 1000,
    normEps: 1e-5,
    initStd: 0.1,
    swiglu: 'clamped',
    bias: false,
    ...over,
  });

function makePolicy(seed = 1, over: Partial<ModelConfig> = {}, maxForwardsPerRun?: number): TransformerPolicy {
  const p = TransformerPolicy.create(cfg(over), { seed, maxForwardsPerRun, prefillChunk: 8 });
  randomizeStore(p.model.store, seed + 50, 0.5);
  return p;
}

t.test('concurrent sessions share batched runs and get what they get alone', async (t) => {
  const policy = makePolicy(1, {}, 3);
  const prompts = [2, 9, 17, 30, 5, 1].map((n, i) => Array.from(randint(n, i, 0, 31)));
  const alone: SampleResult[] = [];
  for (const [i, p] of prompts.entries()) {
    const s = policy.createSession({ seed: 100 + i });
    s.append(p);
    alone.push(await s.sample({ maxTokens: 10 + i, temperature: 0.9, topP: 0.95 }));
    s.dispose();
  }
  const model = policy.model;
  const run = model.run.bind(model);
  let calls = 0;
  let widest = 0;
  model.run = (items, options) => {
    calls++;
    widest = Math.max(widest, items.length);
    return run(items, options);
  };
  const together = await Promise.all(
    prompts.map((p, i) => {
      const s = policy.createSession({ seed: 100 + i });
      s.append(p);
      return s.sample({ maxTokens: 10 + i, temperature: 0.9, topP: 0.95 }).finally(() => s.dispose());
    }),
  );
  together.forEach((r, i) => {
    t.same(r.tokens, alone[i].tokens, `session ${i}: same tokens`);
    t.ok(closeness(r.logProbs, alone[i].logProbs, 1e-4, 1e-5) <= 1, `session ${i}: same log-probs`);
    t.equal(r.finishReason, 'length');
  });
  t.equal(widest, prompts.length, 'all sessions joined one run');
  t.ok(calls >= 5, `jobs continued over several runs of 3 forwards (${calls} runs)`);
  policy.dispose();
});

t.test('multi-turn: appended environment tokens and sampled tokens form one context', async (t) => {
  const policy = makePolicy(2);
  const s = policy.createSession({ seed: 5 });
  const context: number[] = [];
  const turn = async (env: number[]): Promise<void> => {
    s.append(env);
    context.push(...env);
    const r = await s.sample({ maxTokens: 6, temperature: 0 });
    context.push(...r.tokens);
  };
  await turn([1, 2, 3, 4]);
  await turn([7, 8]);
  await turn([9]);
  t.equal(s.length, context.length, 'length counts appended and sampled tokens');
  const next = await s.sample({ maxTokens: 5, temperature: 0 });
  const [fresh] = await policy.generate([{ prompt: context, maxTokens: 5, temperature: 0 }]);
  t.same(next.tokens, fresh.tokens, 'continuing the session equals generating from the whole context');
  await s.prefill();
  t.ok(s.logits() instanceof Float32Array, 'logits after prefill');
  const f = s.fork({ seed: 1 });
  t.equal(f.length, s.length, 'a fork has the same context');
  f.dispose();
  s.dispose();
  policy.dispose();
});

t.test('generate() is reproducible from seeds and from the sampler state', async (t) => {
  const policy = makePolicy(3);
  const reqs = [
    { prompt: [1, 2, 3], maxTokens: 8, seed: 4 },
    { prompt: [5], maxTokens: 3, seed: 9 },
  ];
  const a = await policy.generate(reqs);
  const b = await policy.generate(reqs);
  t.same(a, b, 'same seeds, same results');
  const state = policy.samplerState();
  const c = await policy.generate([{ prompt: [1, 2, 3], maxTokens: 8 }]);
  policy.setSamplerState(state);
  const d = await policy.generate([{ prompt: [1, 2, 3], maxTokens: 8 }]);
  t.same(c, d, 'session seeds come from the sampler state');
  t.throws(() => policy.setSamplerState('nope'), RangeError);
  policy.dispose();
});

t.test('training entry points: log-probs, forward/backward and the three loss kinds', async (t) => {
  const policy = makePolicy(4);
  const batch = packSequences([
    { tokens: Array.from(randint(12, 1, 0, 31)) },
    { tokens: Array.from(randint(7, 2, 0, 31)), lossMask: [0, 0, 0, 1, 1, 1, 1] },
  ]);
  const lp = await policy.logProbs(batch);
  const count = batch.targets.filter((x) => x >= 0).length;
  let mean = 0;
  for (let i = 0; i < lp.logProbs.length; i++) mean -= lp.logProbs[i] / count;

  const ce = await policy.forwardBackward(batch, { kind: 'cross-entropy' });
  t.ok(Math.abs(ce.loss - mean) < 1e-5, `cross-entropy is the mean -logp (${ce.loss} vs ${mean})`);
  t.equal(ce.targets, count);
  const gCe = policy.model.store.read('layers.1.mlp.down.weight', 'grad');
  await policy.zeroGrad();

  const d = Float32Array.from(batch.targets, (x) => (x >= 0 ? -1 / count : 0));
  const co = await policy.forwardBackward(batch, { kind: 'coefficients', dLogProbs: d });
  t.ok(Math.abs(co.loss - mean) < 1e-5, 'coefficients: the linear objective');
  t.ok(
    sameBits(policy.model.store.read('layers.1.mlp.down.weight', 'grad'), gCe),
    'the same gradient as cross-entropy',
  );
  await policy.zeroGrad();

  let seen = 0;
  const cu = await policy.forwardBackward(batch, {
    kind: 'custom',
    fn: async (f) => {
      seen = f.logProbs.length;
      return { dLogProbs: d, loss: 42 };
    },
  });
  t.equal(seen, batch.tokens.length, 'custom losses see the forward');
  t.equal(cu.loss, 42);
  t.ok(sameBits(policy.model.store.read('layers.1.mlp.down.weight', 'grad'), gCe), 'and backpropagate their gradients');

  const w = new Float32Array(batch.tokens.length).fill(0.5);
  const weighted = await policy.forwardBackward(batch, { kind: 'cross-entropy', weights: w });
  t.ok(Math.abs(weighted.loss - (mean * count) / 2) < 1e-4, 'weighted cross-entropy sums w·(-logp)');
  await t.rejects(policy.forwardBackward(batch, { kind: 'cross-entropy', weights: new Float32Array(2) }), RangeError);
  await t.rejects(policy.forwardBackward(batch, { kind: 'nope' } as never), TypeError);

  const step = await policy.optimizerStep({ lr: 1e-3, maxGradNorm: 1 });
  t.equal(step.step, 1);
  t.ok(step.gradNorm > 0 && step.applied);
  t.equal(policy.model.store.gradNorm(), 0, 'gradients are zeroed after the step');
  const after = await policy.logProbs(batch);
  t.notSame(after.logProbs, lp.logProbs, 'the step changed the model');

  const pass = await policy.forward(batch, { temperature: 2 });
  const hot = await policy.logProbs(batch, { temperature: 2 });
  t.same(pass.logProbs, hot.logProbs, 'forward and logProbs agree');
  await pass.backward({ dEntropy: new Float32Array(batch.tokens.length).fill(1) });
  t.ok(policy.model.store.gradNorm() > 0, 'an entropy gradient reaches the parameters');
  pass.release();
  policy.dispose();
});

t.test('checkpoints restore model, optimiser, tokenizer and sampler: training resumes bit for bit', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-policy-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const tokenizer = trainChatTokenizer(['hello world', 'the order was cancelled'], { vocabSize: 280 });
  const config = cfg({ vocab: 300 });
  const batches = [1, 2, 3, 4, 5].map((s) => packSequences([{ tokens: Array.from(randint(20, s, 0, 300)) }]));
  const train = async (p: TransformerPolicy, from: number, to: number): Promise<void> => {
    for (let i = from; i < to; i++) {
      await p.forwardBackward(batches[i], { kind: 'cross-entropy' });
      await p.optimizerStep({ lr: 1e-2, weightDecay: 0.1, maxGradNorm: 1 });
    }
  };
  const a = TransformerPolicy.create(config, { seed: 8, tokenizer });
  await train(a, 0, 3);
  a.createSession().dispose(); // advances the sampler stream
  const path = join(dir, 'ck.safetensors');
  a.save(path, { trainer: { step: 3 } });
  await train(a, 3, 5);
  const seedA = a.createSession();

  const b = TransformerPolicy.load(path, { expectConfig: config });
  t.equal(b.tokenizer?.vocabSize, tokenizer.vocabSize, 'tokenizer restored');
  t.equal(b.model.store.step, 3, 'optimiser step restored');
  await train(b, 3, 5);
  const seedB = b.createSession();
  let same = true;
  for (const name of a.model.store.names()) same &&= sameBits(a.model.store.read(name), b.model.store.read(name));
  t.ok(same, 'parameters after resuming equal those of the uninterrupted run');
  t.equal(seedB.seed, seedA.seed, 'the sampler stream continues where it was saved');
  t.throws(() => TransformerPolicy.load(path, { expectConfig: cfg({ vocab: 301 }) }), CheckpointError);
  a.dispose();
  b.dispose();
});

t.test('argument and lifecycle errors', async (t) => {
  const policy = makePolicy(6);
  const s = policy.createSession({ seed: 1 });
  t.throws(() => s.sample({ maxTokens: 3 }), /empty/, 'sampling needs a prompt');
  s.append([1, 2]);
  t.throws(() => s.sample({ maxTokens: -1 }), RangeError);
  t.throws(() => s.sample({ maxTokens: 2, temperature: -1 }), RangeError);
  t.throws(() => s.sample({ maxTokens: 2, topP: 1.5 }), RangeError);
  t.throws(() => s.sample({ maxTokens: 2, topK: 0.5 }), RangeError);
  t.throws(() => s.sample({ maxTokens: 2, stop: [31] }), RangeError);
  t.throws(() => s.sample(null as never), TypeError);
  t.throws(() => policy.createSession({ seed: -1 }), RangeError);
  t.throws(() => s.append([99]), RangeError);
  const pending = s.sample({ maxTokens: 50 });
  t.throws(() => s.append([1]), /still running/, 'no append during sample()');
  t.throws(() => s.sample({ maxTokens: 1 }), /still running/);
  s.dispose();
  await t.rejects(pending, /disposed/, 'disposing a session rejects its sample()');
  t.throws(() => s.append([1]), /disposed/);
  const other = policy.createSession();
  other.append([3]);
  const p2 = other.sample({ maxTokens: 1000 });
  policy.dispose();
  await t.rejects(p2, /disposed/, 'disposing the policy rejects pending samples');
  t.throws(() => TransformerPolicy.create(cfg(), { maxForwardsPerRun: 0 }), RangeError);
  t.throws(
    () => TransformerPolicy.create(cfg({ vocab: 100 }), { tokenizer: trainChatTokenizer(['abc'], { vocabSize: 270 }) }),
    RangeError,
  );
  const p3 = makePolicy(7);
  await t.rejects(p3.logProbs({ tokens: new Int32Array(0) }), RangeError, 'an empty batch');
  await t.rejects(
    p3.logProbs({ tokens: new Int32Array(3), positions: new Int32Array(2) }),
    RangeError,
    'mismatched lengths',
  );
  await t.rejects(p3.logProbs({ tokens: [1, 2] as never }), TypeError, 'tokens must be an Int32Array');
  p3.dispose();
});
