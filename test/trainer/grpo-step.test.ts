import t from 'tap';

import { TauEnv, type TauEnvAction } from '../../lib/gym/index.js';
import { packSequences, TransformerPolicy } from '../../lib/model/index.js';
import {
  AgentLoop,
  mixSeed,
  type SessionContext,
  type TokenPolicy,
  type SampleOptions,
  type TokenSession,
} from '../../lib/rollout/index.js';
import { buildWorld, resolveConfig } from '../../lib/trainer/index.js';
import { grpoStep } from '../../lib/trainer/grpo-step.js';
import { episodeSequence } from '../../lib/trainer/sft.js';
import { runModelConfig } from '../../lib/trainer/trainer.js';
import { promptSettings, trainRunTokenizer } from '../../lib/trainer/world.js';
import { ChatTemplate } from '../../lib/chat/index.js';

/** One-turn episodes rewarded by a fixed function of the assistant's first action (its length parity). */
class ParityRewardEnv extends TauEnv {
  override step(action: TauEnvAction) {
    const reward = JSON.stringify(action).length % 2;
    return [[], reward, true, false, { terminationReason: 'user_stop' }] as ReturnType<TauEnv['step']>;
  }
}

const REPLIES = [
  'Sure.',
  'One moment, please.',
  'Hi',
  'Let me check that.',
  'Could you tell me your order id?',
  'Okay!',
  'Thanks',
  'I can help with that.',
];

/** Picks one of a few short replies by the request seed (a behaviour policy without log-probs). */
class ReplyPolicy implements TokenPolicy {
  constructor(readonly template: ChatTemplate) {}
  createSession(_c: SessionContext): TokenSession {
    let n = 0;
    return {
      append: (x: ArrayLike<number>) => void (n += x.length),
      get length() {
        return n;
      },
      dispose: () => undefined,
      sample: async (p: SampleOptions) => {
        const tokens = this.template.renderAssistantBody({
          role: 'assistant',
          content: REPLIES[mixSeed(p.seed ?? 0, 3) % REPLIES.length],
        });
        n += tokens.length;
        return { tokens, finishReason: 'stop' as const };
      },
    };
  }
}

t.test('a GRPO step raises the log-probability of rewarded samples relative to unrewarded ones', async (t) => {
  const config = resolveConfig({
    preset: 'smoke',
    patches: [
      {
        rollout: { n: 8, tasksPerStep: 4, maxTokensPerTurn: 6, maxTurns: 1 },
        grpo: { lr: 3e-3, klCoef: 0, miniBatches: 1, ppoEpochs: 2 },
      },
    ],
  });
  const tw = buildWorld(config);
  const tokenizer = await trainRunTokenizer(config, tw);
  const policy = TransformerPolicy.create(runModelConfig(config, tokenizer.vocabSize), { seed: 3, tokenizer });
  const before = TransformerPolicy.create(runModelConfig(config, tokenizer.vocabSize), { seed: 3, tokenizer });
  const template = new ChatTemplate(tokenizer);
  const prompt = promptSettings(config);
  const loop = new AgentLoop({
    policy: new ReplyPolicy(new ChatTemplate(tokenizer)),
    chat: template,
    env: () => new ParityRewardEnv({ world: tw.world }),
    concurrency: 8,
    limits: { maxTurns: 1, maxTokensPerTurn: 6, maxContextTokens: config.rollout.maxContextTokens },
    sanityCheck: 'disable',
    systemPrompt: prompt.systemPrompt,
    renderTools: false,
  });
  try {
    const r = await grpoStep({ policy, loop, config }, 1, tw.trainIds.slice(0, 4));
    const m = r.metrics;
    t.equal(m['rollout/episodes'], 32);
    t.ok(m['critic/score/mean'] > 0 && m['critic/score/mean'] < 1, `mixed rewards (${m['critic/score/mean']})`);
    t.equal(m['actor/updates'], 2, 'one optimiser step per mini-batch and epoch');
    t.ok(m['actor/grad_norm'] > 0);
    t.ok(Math.abs(m['actor/ppo_kl']) > 0, 'the second epoch sees a changed policy');
    t.equal(m['actor/skipped_steps'], 0);
    for (const k of ['timing_s/gen', 'timing_s/old_log_prob', 'timing_s/adv', 'timing_s/update_actor', 'timing_s/step'])
      t.ok(m[k] >= 0, k);
    // each sample's log-probability under the same initial parameters vs after the update
    const packed = packSequences(r.records.map(episodeSequence));
    const was = await before.logProbs(packed);
    const now = await policy.logProbs(packed);
    const gains = { won: [] as number[], lost: [] as number[] };
    r.records.forEach((rec, i) => {
      let d = 0;
      for (let k = packed.offsets[i]; k < packed.offsets[i + 1]; k++)
        if (packed.targets[k] >= 0) d += now.logProbs[k] - was.logProbs[k];
      (rec.reward > 0 ? gains.won : gains.lost).push(d);
    });
    const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
    t.ok(
      mean(gains.won) > mean(gains.lost),
      `rewarded samples gain more log-prob (${mean(gains.won).toFixed(3)}) than unrewarded ones (${mean(gains.lost).toFixed(3)})`,
    );
  } finally {
    await loop.dispose();
    policy.dispose();
    before.dispose();
  }
});
