// Issue 20, SFT levers: `sft.observationWeight` also predicts the observations after the prompt
// (user messages and tool results, which repeat ids from the conversation) with a weight
// relative to the assistant's tokens; the prompt is never a target; 0 is the old objective.
import t from 'tap';

import { modelConfig, packSequences, TransformerPolicy } from '../../lib/model/index.js';
import { resolveConfig } from '../../lib/trainer/index.js';
import { copyTargets, observationWeightedStep, runSft, type MaskedSequence } from '../../lib/trainer/sft.js';

// prompt (mask 0) | assistant | observation | assistant — and a second document
const a: MaskedSequence = { tokens: [5, 6, 7, 8, 9, 10, 11], lossMask: [0, 0, 1, 1, 0, 0, 1] };
const b: MaskedSequence = { tokens: [12, 13, 14, 15], lossMask: [0, 1, 0, 1] };

t.test('targets and weights of a packed step', async (t) => {
  const w = observationWeightedStep([a, b], 0.5);
  // document a: position t predicts token t + 1; position 0 predicts the prompt's token 6 (no target)
  t.same(
    [...w.batch.targets],
    [-1, 7, 8, 9, 10, 11, -1, 13, 14, 15, -1],
    'every token after the first assistant token is a target; the prompt before it is not',
  );
  const raw = [0, 1, 1, 0.5, 0.5, 1, 0, 1, 0.5, 1, 0];
  const sum = raw.reduce((x, y) => x + y, 0);
  w.weights.forEach((v, i) => t.ok(Math.abs(v - raw[i] / sum) < 1e-7, `weight ${i}: ${v} = ${raw[i]}/${sum}`));
  t.same([...w.assistant], [0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0], 'the assistant positions');
  const zero = observationWeightedStep([a, b], 0);
  t.same(
    [...zero.batch.targets],
    [...packSequences([a, b]).targets],
    'weight 0: the assistant targets of packSequences',
  );
  const n = zero.assistant.reduce((x, y) => x + y, 0);
  t.ok(
    [...zero.weights].every((v, i) => (zero.assistant[i] ? Math.abs(v - 1 / n) < 1e-7 : v === 0)),
    'weight 0: the mean over the assistant tokens',
  );
  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY])
    t.throws(
      () => observationWeightedStep([a], bad),
      { name: 'RangeError', message: /sft\.observationWeight/ },
      `${bad} refused`,
    );
});

t.test('the config field: default 0, validated', async (t) => {
  t.equal(resolveConfig({}).sft.observationWeight, 1, 'the default run also predicts the observations');
  t.equal(resolveConfig({ preset: 'smoke' }).sft.observationWeight, 1);
  t.equal(resolveConfig({ patches: [{ sft: { observationWeight: 0.25 } }] }).sft.observationWeight, 0.25);
  t.throws(() => resolveConfig({ patches: [{ sft: { observationWeight: -1 } }] }), /sft\.observationWeight/);
});

t.test('observations are learned only with a weight > 0; the reported loss is the assistant mean', async (t) => {
  // every sequence: a random prompt token, then assistant 3 3, then an observation 9 9 9 9
  const seqs: MaskedSequence[] = Array.from({ length: 16 }, (_, k) => ({
    tokens: [20 + k, 3, 3, 9, 9, 9, 9],
    lossMask: [0, 1, 1, 0, 0, 0, 0],
  }));
  const sft = { ...resolveConfig({}).sft, steps: 25, tokensPerStep: 64, lr: 1e-2, warmup: 2 };
  const observationLogProb = async (p: TransformerPolicy) => {
    const lp = (await p.logProbs(packSequences([{ tokens: [40, 3, 3, 9, 9, 9, 9], lossMask: [0, 0, 0, 1, 1, 1, 1] }])))
      .logProbs;
    return lp[2] + lp[3] + lp[4] + lp[5];
  };
  const c = modelConfig('tiny', { vocab: 64, width: 32, heads: 2, kvHeads: 1, headDim: 16, ffn: 64, context: 64 });
  const got: number[] = [];
  for (const weight of [0, 1]) {
    const p = TransformerPolicy.create(c, { seed: 7 });
    const infos = await runSft(p, seqs, { ...sft, observationWeight: weight }, 3);
    t.equal(infos.length, 25);
    // 9 sequences of 7 tokens fit in 64, then the other 7 of the pass: 2 assistant targets each
    t.same(
      [infos[0].tokens, infos[1].tokens, infos[2].tokens],
      [18, 14, 18],
      `weight ${weight}: tokens counts the assistant's only`,
    );
    t.ok(
      infos[24].loss < infos[0].loss,
      `weight ${weight}: the assistant loss falls (${infos[0].loss.toFixed(3)} → ${infos[24].loss.toFixed(3)})`,
    );
    if (weight > 0)
      t.ok(
        infos[24].observationLoss > 0 && infos[24].observationLoss < infos[0].observationLoss,
        'the observation loss is reported and falls',
      );
    else
      t.ok(
        infos.every((i) => i.observationLoss === 0),
        'no observation loss without the weight',
      );
    got.push(await observationLogProb(p));
    p.dispose();
  }
  t.ok(
    got[1] > Math.log(0.5) * 4 && got[1] > got[0] + 2,
    `the observation is learned with weight 1 (log-prob ${got[1].toFixed(2)}) and not without (${got[0].toFixed(2)})`,
  );
});

t.test('sft.copyWeight: targets that continue a copy weigh more', async (t) => {
  // 4 5 6 ... 4 5 6: the second "5" and "6" continue the copy of "4 5 6"; the second 4 does not
  // (its pair with the token before it, 9, is new); in 7 7 7 the second 7 starts the pair (7, 7)
  // and only the third continues it
  t.same([...copyTargets([4, 5, 6, 9, 4, 5, 6, 7, 7, 7])], [0, 0, 0, 0, 0, 1, 1, 0, 0, 1]);
  t.same([...copyTargets([])], []);
  t.same([...copyTargets([3])], [0]);
  // one sequence: prompt 1, then assistant 2 3 (mask 1), observation 2 3 (the copy), assistant 8
  const s: MaskedSequence = { tokens: [1, 2, 3, 2, 3, 8], lossMask: [0, 1, 1, 0, 0, 1] };
  const w = observationWeightedStep([s], 0.5, 4);
  // targets at positions 0..4 predict tokens 1..5: 2 (assistant), 3 (assistant), 2 (obs), 3 (obs, copy), 8 (assistant)
  const raw = [1, 1, 0.5, 0.5 * 4, 1];
  const sum = raw.reduce((x, y) => x + y, 0);
  raw.forEach((r, i) => t.ok(Math.abs(w.weights[i] - r / sum) < 1e-7, `weight ${i}: ${w.weights[i]} = ${r}/${sum}`));
  const plain = observationWeightedStep([s], 0.5);
  t.same([...observationWeightedStep([s], 0.5, 1).weights], [...plain.weights], 'copyWeight 1 changes nothing');
  for (const bad of [0.5, Number.NaN, Number.POSITIVE_INFINITY])
    t.throws(() => observationWeightedStep([s], 0.5, bad), { name: 'RangeError', message: /sft\.copyWeight/ });
  t.equal(resolveConfig({}).sft.copyWeight, 4, 'the default run weighs copies 4x');
  t.equal(resolveConfig({ patches: [{ sft: { copyWeight: 2.5 } }] }).sft.copyWeight, 2.5);
  t.throws(() => resolveConfig({ patches: [{ sft: { copyWeight: 0.5 } }] }), /sft\.copyWeight/);
});
