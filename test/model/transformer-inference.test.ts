// KV-cache inference: cached, chunked and batched decoding give the logits of the float64
// reference over the whole sequence; sampling (greedy, temperature, top-k, top-p) follows the
// model's distribution, is seeded per session and independent of the batch; stop tokens, token
// and context limits; sliding-window caches stay bounded; forks are independent.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

import t from 'tap';

import {
  Transformer,
  type ModelConfig,
  type NativeJob,
  type TransformerSession,
  modelConfig,
} from '../../lib/model/index.js';
import { closeness, randint } from './fixtures/reference.js';
import { randomizeStore, readParams, refTransformer } from './fixtures/transformer-reference.js';

const cfg = (over: Partial<ModelConfig> = {}): ModelConfig =>
  modelConfig({
    layers: 3,
    width: 20,
    heads: 4,
    kvHeads: 2,
    headDim: 6,
    window: 3,
    vocab: 29,
    context: 64,
    ffn: 14,
    ropeTheta: 500,
    normEps: 1e-5,
    initStd: 0.1,
    swiglu: 'clamped',
    bias: true,
    ...over,
  });

function makeModel(c: ModelConfig, seed = 1): Transformer {
  const m = Transformer.create(c, seed);
  randomizeStore(m.store, seed + 100, 0.5);
  return m;
}

/** Reference logits at the last position of `tokens` (one document). */
function refLastLogits(c: ModelConfig, params: Map<string, Float64Array>, tokens: number[]): Float64Array {
  const T = tokens.length;
  const r = refTransformer(c, params, {
    tokens,
    targets: new Int32Array(T).fill(-1),
    positions: Int32Array.from({ length: T }, (_, i) => i),
  });
  return r.logits.slice((T - 1) * c.vocab, T * c.vocab);
}

function softmax(logits: ArrayLike<number>, temperature = 1): Float64Array {
  let m = -Infinity;
  for (let i = 0; i < logits.length; i++) m = Math.max(m, logits[i] / temperature);
  const p = Float64Array.from(logits, (x) => Math.exp(x / temperature - m));
  const s = p.reduce((a, b) => a + b, 0);
  return p.map((x) => x / s);
}

const greedy = (maxTokens: number, stop?: number[]): NativeJob => ({
  kind: 'sample',
  maxTokens,
  temperature: 0,
  stop: stop ? Int32Array.from(stop) : undefined,
});

async function sampleAlone(
  m: Transformer,
  prompt: number[],
  seed: number,
  job: NativeJob,
): Promise<{ tokens: number[]; logProbs: number[] }> {
  const s = m.createSession(seed);
  s.append(prompt);
  const [r] = await m.run([{ session: s, job }]);
  s.dispose();
  return { tokens: Array.from(r.tokens), logProbs: Array.from(r.logProbs) };
}

t.test('cached decoding in uneven chunks matches the reference over the whole sequence', async (t) => {
  const c = cfg();
  const m = makeModel(c);
  const params = readParams(m.store);
  const tokens = Array.from(randint(60, 5, 0, c.vocab));
  // up to 8 new tokens per session attend to the cache in place; longer chunks go through FusedForward
  for (const prefillChunk of [4, 512]) {
    const s = m.createSession(1);
    let at = 0;
    let worst = 0;
    for (const n of [1, 7, 3, 12, 1, 1, 15, 1, 19]) {
      s.append(tokens.slice(at, at + n));
      at += n;
      t.equal(s.logits(), null, 'no logits while tokens are pending');
      const [r] = await m.run([{ session: s, job: { kind: 'prefill' } }], { prefillChunk });
      t.ok(r.done && r.tokens.length === 0 && r.length === at, `prefill of ${n} done`);
      worst = Math.max(
        worst,
        closeness(s.logits() as Float32Array, refLastLogits(c, params, tokens.slice(0, at)), 1e-4, 1e-4),
      );
    }
    t.equal(s.processed, 60);
    t.ok(worst <= 1, `prefillChunk ${prefillChunk}: logits after each chunk match (worst ${worst.toFixed(3)})`);
    s.dispose();
  }
  m.dispose();
});

t.test('token shift: chunked, batched and forked decoding see the previous token as the reference does', async (t) => {
  const c = cfg({ tokenShift: true, layers: 2 });
  const m = makeModel(c, 9);
  const params = readParams(m.store);
  const tokens = Array.from(randint(40, 15, 0, c.vocab));
  let worst = 0;
  const s = m.createSession(1);
  let at = 0;
  // a chunk's first token takes its previous token from the session (the last one processed)
  for (const n of [1, 1, 5, 2, 13, 1, 9]) {
    s.append(tokens.slice(at, at + n));
    at += n;
    await m.run([{ session: s, job: { kind: 'prefill' } }], { prefillChunk: 4 });
    worst = Math.max(
      worst,
      closeness(s.logits() as Float32Array, refLastLogits(c, params, tokens.slice(0, at)), 1e-4, 1e-4),
    );
  }
  t.ok(worst <= 1, `logits after each chunk match (worst ${worst.toFixed(3)})`);
  const f = s.fork(2);
  f.append([tokens[at]]);
  s.append([tokens[at + 1]]);
  await m.run([
    { session: f, job: { kind: 'prefill' } },
    { session: s, job: { kind: 'prefill' } },
  ]);
  t.ok(
    closeness(f.logits() as Float32Array, refLastLogits(c, params, tokens.slice(0, at + 1)), 1e-4, 1e-4) <= 1,
    'a fork continues from its last token',
  );
  t.ok(
    closeness(
      s.logits() as Float32Array,
      refLastLogits(c, params, [...tokens.slice(0, at), tokens[at + 1]]),
      1e-4,
      1e-4,
    ) <= 1,
    'so does the original',
  );
  const plain = refLastLogits({ ...c, tokenShift: false }, params, [...tokens.slice(0, at), tokens[at + 1]]);
  t.ok(closeness(s.logits() as Float32Array, plain, 1e-4, 1e-4) > 1, 'without the shift the logits differ');
  f.dispose();
  s.dispose();
  m.dispose();
});

t.test('token shift: greedy decoding follows the reference argmax over prompt and sampled tokens', async (t) => {
  const c = cfg({ tokenShift: true, layers: 2 });
  const m = makeModel(c, 10);
  const params = readParams(m.store);
  const prompt = Array.from(randint(11, 16, 0, c.vocab));
  const { tokens } = await sampleAlone(m, prompt, 3, greedy(8));
  t.equal(tokens.length, 8, '8 tokens');
  const seq = [...prompt];
  let agree = 0;
  for (const tok of tokens) {
    const ref = refLastLogits(c, params, seq);
    let best = 0;
    for (let v = 1; v < c.vocab; v++) if (ref[v] > ref[best]) best = v;
    if (best === tok) agree++;
    seq.push(tok);
  }
  t.equal(
    agree,
    tokens.length,
    'every sampled token is the reference argmax (the sampled ones feed the shift as they are processed)',
  );
  m.dispose();
});

t.test('greedy decoding follows the reference argmax; batched runs equal single runs', async (t) => {
  const c = cfg({ layers: 2, window: 5 });
  const m = makeModel(c, 2);
  const params = readParams(m.store);
  const prompts = [3, 10, 25, 1].map((n, i) => Array.from(randint(n, 60 + i, 0, c.vocab)));
  const alone: { tokens: number[]; logProbs: number[] }[] = [];
  for (const p of prompts) alone.push(await sampleAlone(m, p, 1, greedy(9)));
  // the reference's argmax, token by token, for the first prompt
  const seq = [...prompts[1]];
  for (let i = 0; i < 9; i++) {
    const logits = refLastLogits(c, params, seq);
    let best = 0;
    for (let v = 1; v < c.vocab; v++) if (logits[v] > logits[best]) best = v;
    const lse = Math.log(softmax(logits)[best]);
    t.equal(alone[1].tokens[i], best, `greedy token ${i} is the argmax`);
    t.ok(
      Math.abs(alone[1].logProbs[i] - lse) < 1e-4,
      `its log-prob is log softmax(logits) (${alone[1].logProbs[i]} vs ${lse})`,
    );
    seq.push(best);
  }
  const sessions = prompts.map((p, i) => {
    const s = m.createSession(i);
    s.append(p);
    return s;
  });
  const batched = await m.run(sessions.map((session) => ({ session, job: greedy(9) })));
  batched.forEach((r, i) => {
    t.same(Array.from(r.tokens), alone[i].tokens, `prompt ${i}: same tokens in a batch`);
    t.ok(closeness(r.logProbs, alone[i].logProbs, 1e-4, 1e-5) <= 1, `prompt ${i}: same log-probs`);
    t.equal(r.finishReason, 'length');
  });
  for (const s of sessions) s.dispose();
  m.dispose();
});

t.test(
  'sampled log-probs are the tempered training log-probs; seeds make runs reproducible in any batch',
  async (t) => {
    const c = cfg({ layers: 2 });
    const m = makeModel(c, 3);
    const prompt = Array.from(randint(6, 7, 0, c.vocab));
    const job: NativeJob = { kind: 'sample', maxTokens: 20, temperature: 0.7 };
    const a = await sampleAlone(m, prompt, 42, job);
    const seq = [...prompt, ...a.tokens];
    const targets = Int32Array.from(seq.slice(1).concat([-1]));
    for (let i = 0; i < prompt.length - 1; i++) targets[i] = -1;
    const lp = m.logProbs({ tokens: Int32Array.from(seq), targets }, { temperature: 0.7 });
    t.ok(
      closeness(a.logProbs, lp.logProbs.slice(prompt.length - 1, seq.length - 1), 1e-4, 1e-5) <= 1,
      'rollout log-probs = recomputed log-probs at the same temperature',
    );

    // same seed, other sessions around it, and the work split over several calls
    const sessions: TransformerSession[] = [];
    for (let i = 0; i < 5; i++) {
      const s = m.createSession(i === 2 ? 42 : 1000 + i);
      s.append(i === 2 ? prompt : Array.from(randint(3 + 4 * i, i, 0, c.vocab)));
      sessions.push(s);
    }
    const got: number[][] = sessions.map(() => []);
    let results = await m.run(
      sessions.map((session) => ({ session, job })),
      { maxForwards: 3 },
    );
    while (results.some((r) => !r.done)) {
      results.forEach((r, i) => got[i].push(...r.tokens));
      results = await m.run(
        sessions.map((session) => ({ session })),
        { maxForwards: 2 },
      );
    }
    results.forEach((r, i) => got[i].push(...r.tokens));
    t.same(got[2], a.tokens, 'the same seed gives the same tokens whatever the batch and the call split');
    t.notSame(got[0], got[1], 'different seeds give different samples');
    const b = await sampleAlone(m, prompt, 43, job);
    t.notSame(b.tokens, a.tokens, 'another seed, other tokens');
    for (const s of sessions) s.dispose();
    m.dispose();
  },
);

t.test('sampling frequencies follow softmax(logits / T); top-k and top-p restrict to the right sets', async (t) => {
  const c = cfg({ layers: 2 });
  const m = makeModel(c, 4);
  const base = m.createSession(0);
  base.append(Array.from(randint(5, 3, 0, c.vocab)));
  await m.run([{ session: base, job: { kind: 'prefill' } }]);
  const logits = base.logits() as Float32Array;
  const draw = async (job: NativeJob, n: number): Promise<Float64Array> => {
    const forks = Array.from({ length: n }, (_, i) => base.fork(i + 1));
    const rs = await m.run(forks.map((session) => ({ session, job })));
    const freq = new Float64Array(c.vocab);
    for (const r of rs) freq[r.tokens[0]] += 1 / n;
    for (const f of forks) f.dispose();
    return freq;
  };
  const tv = (p: ArrayLike<number>, q: ArrayLike<number>): number => {
    let s = 0;
    for (let i = 0; i < p.length; i++) s += Math.abs(p[i] - q[i]);
    return s / 2;
  };
  const n = 8000;
  const p1 = softmax(logits, 1.5);
  const f1 = await draw({ kind: 'sample', maxTokens: 1, temperature: 1.5 }, n);
  t.ok(tv(f1, p1) < 0.05, `temperature 1.5: total variation ${tv(f1, p1).toFixed(3)}`);

  const order = Array.from(p1.keys()).sort((a, b) => p1[b] - p1[a]);
  const fk = await draw({ kind: 'sample', maxTokens: 1, temperature: 1.5, topK: 3 }, n);
  const top3 = new Set(order.slice(0, 3));
  t.ok(
    fk.every((f, i) => f === 0 || top3.has(i)),
    'top-k 3: only the 3 most likely tokens',
  );
  const pk = new Float64Array(c.vocab);
  for (const i of top3) pk[i] = p1[i];
  const zk = pk.reduce((a, b) => a + b, 0);
  t.ok(
    tv(
      fk,
      pk.map((x) => x / zk),
    ) < 0.05,
    'top-k 3: renormalised frequencies',
  );

  let mass = 0;
  const nucleus = new Set<number>();
  for (const i of order) {
    nucleus.add(i);
    mass += p1[i];
    if (mass >= 0.6) break;
  }
  const fp = await draw({ kind: 'sample', maxTokens: 1, temperature: 1.5, topP: 0.6 }, n);
  t.ok(
    fp.every((f, i) => f === 0 || nucleus.has(i)),
    `top-p 0.6: only the nucleus (${nucleus.size} tokens)`,
  );
  const pp = new Float64Array(c.vocab);
  for (const i of nucleus) pp[i] = p1[i] / mass;
  t.ok(tv(fp, pp) < 0.05, 'top-p 0.6: renormalised frequencies');
  base.dispose();
  m.dispose();
});

t.test('stop tokens, maxTokens and the context limit', async (t) => {
  const c = cfg({ layers: 2 });
  const m = makeModel(c, 5);
  const prompt = Array.from(randint(4, 9, 0, c.vocab));
  const free = await sampleAlone(m, prompt, 1, greedy(12));
  const stopAt = free.tokens.findIndex((x, i) => i >= 2);
  const stopTok = free.tokens[stopAt];
  const first = free.tokens.indexOf(stopTok);
  const s = m.createSession(1);
  s.append(prompt);
  const [r] = await m.run([{ session: s, job: greedy(12, [stopTok, c.vocab - 1]) }]);
  t.same(Array.from(r.tokens), free.tokens.slice(0, first + 1), 'stops after the first stop token, which is included');
  t.equal(r.finishReason, 'stop');
  t.equal(s.length, prompt.length + first + 1, 'sampled tokens are part of the context');
  t.equal(s.processed, prompt.length + first, 'the last sampled token waits to be processed');
  // continue the same session: the pending token is processed with the next appended ones
  s.append([1, 2]);
  const [r2] = await m.run([{ session: s, job: greedy(0) }]);
  t.equal(r2.tokens.length, 0, 'maxTokens 0 samples nothing');
  t.equal(r2.finishReason, 'length');
  const [r3] = await m.run([{ session: s, job: greedy(3) }]);
  const whole = await sampleAlone(m, [...prompt, ...free.tokens.slice(0, first + 1), 1, 2], 1, greedy(3));
  t.same(Array.from(r3.tokens), whole.tokens, 'continuing a session equals decoding the whole context afresh');

  const long = m.createSession(2);
  long.append(Array.from(randint(c.context - 3, 4, 0, c.vocab)));
  const [rc] = await m.run([{ session: long, job: greedy(10) }]);
  t.equal(rc.tokens.length, 3, 'stops when the context is full');
  t.equal(rc.finishReason, 'context');
  t.equal(long.length, c.context);
  t.throws(() => long.append([1]), RangeError, 'appending past the context throws');
  const [rz] = await m.run([{ session: long, job: greedy(5) }]);
  t.equal(rz.finishReason, 'context', 'a full context samples nothing');
  s.dispose();
  long.dispose();
  m.dispose();
});

t.test('sliding-window layers keep only their window; forks are independent copies', async (t) => {
  const withWindow = makeModel(cfg({ layers: 2, window: 4, context: 600 }), 6);
  const noWindow = makeModel(cfg({ layers: 2, window: 0, context: 600 }), 6);
  const bytes: number[] = [];
  for (const m of [withWindow, noWindow]) {
    const s = m.createSession(3);
    s.append([1, 2, 3]);
    const [r] = await m.run([{ session: s, job: { kind: 'sample', maxTokens: 500, temperature: 1 } }]);
    t.equal(r.tokens.length, 500, '500 decoding steps');
    bytes.push(s.bytes);
    s.dispose();
  }
  const row = 2 * 2 * 6 * 4; // k and v, kvHeads x headDim floats
  t.ok(
    bytes[0] < (600 + 64) * row + 29 * 4,
    `window 4: one full layer's cache plus a small window buffer (${bytes[0]} bytes)`,
  );
  t.ok(bytes[1] > 2 * 500 * row, `no window: two full caches (${bytes[1]} bytes)`);

  const m = withWindow;
  const a = m.createSession(7);
  a.append(Array.from(randint(30, 1, 0, 29)));
  await m.run([{ session: a, job: { kind: 'prefill' } }]);
  const b = a.fork(7);
  t.same(b.logits(), a.logits(), 'a fork has the same logits');
  const [ra, rb] = await m.run([
    { session: a, job: { kind: 'sample', maxTokens: 8, temperature: 1 } },
    { session: b, job: { kind: 'sample', maxTokens: 8, temperature: 1 } },
  ]);
  t.same(ra.tokens, rb.tokens, 'same seed after a fork: same continuation');
  a.append([5, 6, 7]);
  t.equal(b.length, 38, 'appending to the original does not change the fork');
  a.dispose();
  b.dispose();
  withWindow.dispose();
  noWindow.dispose();
});

t.test('run() checks its sessions and jobs', async (t) => {
  const c = cfg({ layers: 1 });
  const m = makeModel(c, 7);
  const other = makeModel(c, 8);
  const s = m.createSession(1);
  t.throws(() => m.run([{ session: s, job: greedy(1) }]), /empty/, 'sampling needs a prompt');
  s.append([1, 2]);
  t.throws(() => m.run([{ session: s, job: greedy(1) }, { session: s }]), /twice/, 'a session appears once');
  t.throws(() => other.run([{ session: s, job: greedy(1) }]), RangeError, 'a session of another model');
  t.throws(() => m.run([{ session: s, job: { kind: 'sample', maxTokens: 1, topP: 0 } }]), /topP/);
  t.throws(() => m.run([{ session: s, job: { kind: 'sample', maxTokens: -1 } }]), /maxTokens/);
  t.throws(
    () => m.run([{ session: s, job: { kind: 'sample', maxTokens: 1, stop: Int32Array.from([99]) } }]),
    /stop token/,
  );
  t.throws(() => m.run([{ session: s, job: { kind: 'oops' } as unknown as NativeJob }]), /kind/);
  t.throws(() => s.append([29]), RangeError, 'token ids are checked');
  t.throws(() => s.append([1.5]), /not an integer/, 'token ids are integers');
  const running = m.run([{ session: s, job: greedy(5) }]);
  t.throws(() => s.append([1]), /in use/, 'no append while a run uses the session');
  t.throws(() => m.run([{ session: s }]), /in use/, 'no second run on a busy session');
  await running;
  const partial = await m.run([{ session: s, job: greedy(5) }], { maxForwards: 0 });
  t.notOk(partial[0].done, 'maxForwards 0 leaves the job unfinished');
  t.throws(() => m.run([{ session: s, job: greedy(1) }]), /already has a job/, 'one job at a time');
  const rest = await m.run([{ session: s }]);
  t.ok(rest[0].done && rest[0].tokens.length === 5, 'a later run finishes it');
  s.dispose();
  t.throws(() => s.append([1]), /disposed/);
  m.dispose();
  other.dispose();
});

t.test('training and sampling give the same bits with 1 and 3 threads', async (t) => {
  const child = join(process.cwd(), 'test', 'model', 'fixtures', 'transformer-determinism-child.mjs');
  const run = (threads: number): string =>
    execFileSync(process.execPath, [child], {
      env: { ...process.env, SINKFLEX_NUM_THREADS: String(threads) },
      encoding: 'utf8',
    });
  const one = run(1);
  t.match(one, /^[0-9a-f]{64}$/);
  t.equal(run(3), one, '3 threads');
});
