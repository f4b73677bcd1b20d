// Issue 19, SFT of pretrained models: the expert's demonstrations rendered in the model's own
// chat format (Qwen3's Jinja template, gpt-oss's harmony) are exactly the token sequences the
// agent loop assembles for an episode of that model whose turns are the expert's (prompt,
// sampled turns verbatim, environment messages appended by the format; loss mask = response
// mask), each turn parses back to the expert's message; and a seeded LoRA SFT through the
// trainer's path (rendered demonstrations → runSft) drives the loss down, deterministically.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { type ChatFormat } from '../../lib/chat/index.js';
import { loadPretrained, type PretrainedModel } from '../../lib/model/index.js';
import {
  AgentLoop,
  type EpisodeRecord,
  type SessionContext,
  type TokenPolicy,
  type TokenSampleResult,
  type TokenSession,
} from '../../lib/rollout/index.js';
import { buildWorld, resolveConfig, trainEnvFactory } from '../../lib/trainer/index.js';
import {
  collectDemonstrations,
  renderDemonstration,
  renderDemonstrations,
  runSft,
  type MaskedSequence,
} from '../../lib/trainer/sft.js';
import { byteTemplate, promptSettings } from '../../lib/trainer/world.js';
import { type TinySpec, writeTinyCheckpoint } from '../model/hf/fixtures/tiny-checkpoint.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-hf-sft-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

const config = resolveConfig({ preset: 'smoke' });
const tw = buildWorld(config);
const prompt = promptSettings(config);
const makeEnv = trainEnvFactory(config, tw.world);

/** The expert's successful episodes over the first training tasks (collected with the byte-level template). */
async function demonstrations(count: number): Promise<EpisodeRecord[]> {
  const got = await collectDemonstrations({
    world: tw.world,
    taskIds: tw.trainIds,
    count,
    chat: byteTemplate(),
    env: makeEnv,
    prompt,
    limits: { maxTurns: 64, maxTokensPerTurn: 1 << 20, maxContextTokens: 1 << 24 },
    seed: 11,
  });
  return got.kept;
}

async function model(spec: TinySpec, options: Parameters<typeof loadPretrained>[1] = {}): Promise<PretrainedModel> {
  const dir = mkdtempSync(join(tmp, 'model-'));
  writeTinyCheckpoint(dir, spec);
  return loadPretrained(dir, options);
}

/** The runs of mask-1 tokens of a sequence: its assistant turns. */
function turnsOf(seq: MaskedSequence): number[][] {
  const turns: number[][] = [];
  seq.lossMask.forEach((m, i) => {
    if (m !== 1) return;
    if (i === 0 || seq.lossMask[i - 1] !== 1) turns.push([]);
    turns[turns.length - 1].push(seq.tokens[i]);
  });
  return turns;
}

/** A policy that replays given turns (by task), as if the model had sampled them. */
class Replay implements TokenPolicy {
  constructor(private readonly turns: Map<string, number[][]>) {}
  createSession(context: SessionContext): TokenSession {
    const turns = [...(this.turns.get(context.taskId) ?? [])];
    let length = 0;
    return {
      get length() {
        return length;
      },
      append: (tokens: ArrayLike<number>) => void (length += tokens.length),
      dispose: () => undefined,
      sample: async (): Promise<TokenSampleResult> => {
        const next = turns.shift();
        if (!next) throw new Error('no more turns');
        length += next.length;
        return { tokens: next, finishReason: 'stop' };
      },
    };
  }
}

async function checkAgainstAgentLoop(
  t: Test,
  format: ChatFormat,
  demos: readonly EpisodeRecord[],
  renderTools: boolean,
): Promise<void> {
  const seqs = demos.map((r) => renderDemonstration(format, r, renderTools ? r.tools : []));
  const loop = new AgentLoop({
    policy: new Replay(new Map(demos.map((r, i) => [r.taskId, turnsOf(seqs[i])]))),
    chat: format,
    env: makeEnv,
    concurrency: 4,
    limits: { maxTurns: 64, maxTokensPerTurn: 4096, maxContextTokens: 1 << 20 },
    sanityCheck: 'disable',
    systemPrompt: prompt.systemPrompt,
    renderTools,
  });
  t.teardown(() => loop.dispose());
  for (const [i, r] of demos.entries()) {
    const [rec] = await loop.rollout({ taskIds: [r.taskId], seed: 11 });
    const seq = seqs[i];
    t.equal(rec.reward, 1, `${r.taskId}: the replayed expert succeeds in the model's format`);
    t.same(
      rec.messages.map((m) => m.role),
      r.messages.map((m) => m.role),
      `${r.taskId}: the same conversation`,
    );
    t.same([...rec.promptIds, ...rec.responseIds], seq.tokens, `${r.taskId}: the tokens the agent loop assembles`);
    t.same(
      [...new Array<number>(rec.promptIds.length).fill(0), ...rec.responseMask],
      seq.lossMask,
      `${r.taskId}: the loss mask is the response mask`,
    );
  }
}

t.test('demonstrations in the Qwen3 format are the agent loop’s token sequences', async (t) => {
  const m = await model({ family: 'qwen3', tokenizer: 'qwen3' });
  t.teardown(() => m.dispose());
  const demos = (await demonstrations(4)).filter((r, i, all) => all.findIndex((x) => x.taskId === r.taskId) === i);
  t.ok(demos.length >= 2, `${demos.length} demonstrations`);
  await checkAgainstAgentLoop(t, m.chat, demos, false);
  await checkAgainstAgentLoop(t, m.chat, demos.slice(0, 1), true);
  const [seq] = demos.map((r) => renderDemonstration(m.chat, r, []));
  const text = m.tokenizer.decode(turnsOf(seq)[0]);
  t.match(
    text,
    /^<think>\n\n<\/think>\n\n.+<\|im_end\|>$/s,
    'a turn as Qwen3 renders the last assistant message: an empty think block, the reply, <|im_end|>',
  );
  const r = renderDemonstrations(m.chat, demos, { renderTools: false, maxTokens: 300 });
  t.equal(r.sequences.length + r.tooLong, demos.length, 'longer ones are counted, not kept');
  t.ok(r.sequences.every((s) => s.tokens.length <= 300));
});

t.test('demonstrations in the harmony format (gpt-oss) are the agent loop’s token sequences', async (t) => {
  const m = await model({ family: 'gpt_oss', tokenizer: 'gptoss', layers: 2 });
  t.teardown(() => m.dispose());
  const demos = (await demonstrations(3)).filter((r, i, all) => all.findIndex((x) => x.taskId === r.taskId) === i);
  await checkAgainstAgentLoop(t, m.chat, demos, false);
  const turns = turnsOf(renderDemonstration(m.chat, demos[0], []));
  const texts = turns.map((x) => m.tokenizer.decode(x));
  t.ok(
    texts.some((x) => /^<\|channel\|>final<\|message\|>.+<\|return\|>$/s.test(x)),
    'final answers end with <|return|>',
  );
  t.ok(
    texts.some((x) =>
      /^<\|channel\|>commentary to=functions\.\w+ <\|constrain\|>json<\|message\|>\{.*\}<\|call\|>$/s.test(x),
    ),
    'tool calls as gpt-oss samples them',
  );
});

t.test('a seeded LoRA SFT through the trainer path drives the loss down', async (t) => {
  const demos = await demonstrations(4);
  const run = async (): Promise<number[]> => {
    const m = await model(
      { family: 'qwen3', tokenizer: 'qwen3' },
      {
        lora: {
          rank: 8,
          alpha: 16,
          targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
        },
        seed: 5,
      },
    );
    try {
      const { sequences } = renderDemonstrations(m.chat, demos, { renderTools: false, maxTokens: 400 });
      const two = sequences.slice(0, 2);
      t.equal(two.length, 2);
      const tokens = two.reduce((n, s) => n + s.tokens.length, 0);
      const infos = await runSft(
        m.policy,
        two,
        // copyWeight 1: the plain objective, whose reported loss is the one optimised
        { ...config.sft, copyWeight: 1, steps: 8, tokensPerStep: tokens, lr: 2e-2, warmup: 0, weightDecay: 0 },
        7,
      );
      return infos.map((i) => i.loss);
    } finally {
      m.dispose();
    }
  };
  const t0 = performance.now();
  const losses = await run();
  t.comment(`losses ${losses.map((l) => l.toFixed(2)).join(' ')} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  t.ok(
    losses.every((l, i) => i === 0 || l < losses[i - 1]),
    'the loss falls at every step',
  );
  t.ok(losses[losses.length - 1] < 0.6 * losses[0], 'to below 60% of its start');
  t.same(await run(), losses, 'the same seed gives the same losses');
});
