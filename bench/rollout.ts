/**
 * Rollout benchmark: episodes/s and tokens/s of the agent loop with the scripted expert as a
 * token policy (`ExpertTokenPolicy`) on generated retail tasks — the environment, chat
 * template, tokenization and batching overhead, i.e. the ceiling a model-backed rollout can
 * reach on this machine — measured side by side (interleaved rounds, best round counts) with
 * the same episodes driven through the Gym environment without tokens, and with the loop's
 * tokenization sanity check on and at concurrency 1. Also times building the DataProto and
 * packing it into token-budget micro-batches.
 *
 * Run: `npm run build:ts && node dist/bench/rollout.js [--quick] [--json [file]]`.
 * @module
 */
import { loadavg } from 'node:os';

import { loadTauWorld, TauEnv, type ChatMessage as GymChatMessage } from '../lib/gym/index.js';
import { ChatTemplate, trainChatTokenizer, type ChatMessage } from '../lib/chat/index.js';
import {
  AgentLoop,
  episodesToDataProto,
  ExpertTokenPolicy,
  mixSeed,
  packMicroBatches,
  tauMessageOf,
  type EpisodeRecord,
  type TokenizationSanityCheck,
} from '../lib/rollout/index.js';
import { ExpertRetailAgent, type Message } from '../lib/tau/index.js';
import { benchProgram, parseBench, runWhenInvoked, writeJson, type BenchCliSettings } from './common/cli.js';

/** Options of {@link runRolloutBench}. */
export interface RolloutBenchOptions {
  /** Generated retail tasks (one group each). Default 48. */
  tasks?: number;
  /** Samples per task. Default 2. */
  n?: number;
  /** Episodes in flight in the loop. Default 16. */
  concurrency?: number;
  /** Interleaved rounds; the best of each case counts. Default 3. */
  rounds?: number;
  /** Vocabulary of the tokenizer trained on the domain's text. Default 1024 (the `tiny` preset's). */
  vocab?: number;
  /** Micro-batch token budget of the packing measurement. Default 16384. */
  packTokens?: number;
  /** Where progress lines go. Default console.log. */
  log?: (line: string) => void;
}

/** One measured case. */
export interface RolloutBenchRow {
  /** What ran. */
  name: string;
  /** Episodes per round. */
  episodes: number;
  /** Best round, seconds. */
  seconds: number;
  /** Episodes per second (best round). */
  episodesPerSec: number;
  /** Prompt + response tokens per second (0 for the token-free baseline). */
  tokensPerSec: number;
  /** Model (response-mask) tokens per second. */
  modelTokensPerSec: number;
  /** Mean reward. */
  meanReward: number;
}

/** The benchmark's result. */
export interface RolloutBenchResult {
  /** One row per case. */
  rows: RolloutBenchRow[];
  /** Loop (no check) episodes/s over the token-free baseline's. */
  loopOverEnv: number;
  /** Strict sanity check's episodes/s over no check. */
  strictOverNoCheck: number;
  /** Concurrency 1 over the default concurrency. */
  serialOverConcurrent: number;
  /** Mean prompt and response tokens per episode. */
  promptTokens: number;
  /** Mean response tokens per episode (model + environment). */
  responseTokens: number;
  /** Mean model tokens per episode. */
  modelTokens: number;
  /** Building the DataProto from the records, ms. */
  dataProtoMs: number;
  /** Packing it into micro-batches, ms, and how many. */
  packMs: number;
  /** Micro-batches made. */
  microBatches: number;
  /** Padding fraction of the padded batch (what packing saves). */
  paddingFraction: number;
  /** Tokenizer vocabulary. */
  vocab: number;
  /** 1-minute load average at the start. */
  loadAverage: number;
}

function tauObs(obs: readonly GymChatMessage[]): Message[] {
  return obs.map((m) => tauMessageOf(m as unknown as ChatMessage)).filter((m): m is Message => m !== null);
}

/** The token-free baseline: the expert agent through the Gym env on the same episodes. */
function envOnly(env: TauEnv, taskIds: readonly string[], n: number): { seconds: number; rewards: number[] } {
  const world = env.world;
  const rewards: number[] = [];
  const t0 = performance.now();
  taskIds.forEach((taskId, g) => {
    for (let s = 0; s < n; s++) {
      const seed = mixSeed(0, g, s);
      const [obs0, info] = env.reset({ seed, options: { taskId } });
      const agent = new ExpertRetailAgent();
      agent.reset({ task: world.task(taskId), tools: env.tools, policy: String(info.policy), seed });
      let obs = obs0;
      for (;;) {
        const [o, r, term, trunc] = env.step(agent.act(tauObs(obs)) as never);
        obs = o;
        if (term || trunc) {
          rewards.push(r);
          break;
        }
      }
    }
  });
  return { seconds: (performance.now() - t0) / 1000, rewards };
}

/** Runs the benchmark. */
export async function runRolloutBench(options: RolloutBenchOptions = {}): Promise<RolloutBenchResult> {
  const log = options.log ?? ((l: string) => console.log(l));
  const nTasks = options.tasks ?? 48;
  const n = options.n ?? 2;
  const concurrency = options.concurrency ?? 16;
  const rounds = options.rounds ?? 3;
  const vocab = options.vocab ?? 1024;
  const loadAverage = loadavg()[0];
  const world = loadTauWorld('retail', { kind: 'generated', seed: 0, count: Math.max(nTasks, 1) });
  const taskIds = world.taskIds.slice(0, nTasks);
  const probe = new TauEnv({ world });
  const corpus = [
    world.domain.policy,
    JSON.stringify(probe.tools),
    ...world.tasks.slice(0, 20).map((t) => JSON.stringify(t)),
  ];
  const template = new ChatTemplate(trainChatTokenizer(corpus, { vocabSize: vocab }));
  const policy = new ExpertTokenPolicy(template, { tasks: world });
  const baselineEnv = new TauEnv({ world });
  const loops = new Map<string, AgentLoop>();
  const loopFor = (sanityCheck: TokenizationSanityCheck, conc: number): AgentLoop => {
    const key = `${sanityCheck}/${conc}`;
    let l = loops.get(key);
    if (!l) {
      l = new AgentLoop({
        policy,
        chat: template,
        env: () => new TauEnv({ world }),
        concurrency: conc,
        sanityCheck,
        limits: { maxContextTokens: 1 << 20, maxTokensPerTurn: 4096 },
      });
      loops.set(key, l);
    }
    return l;
  };
  type Case = {
    name: string;
    run: () => Promise<{ seconds: number; records: EpisodeRecord[] | null; rewards: number[] }>;
  };
  const loopCase = (name: string, check: TokenizationSanityCheck, conc: number): Case => ({
    name,
    run: async () => {
      const t0 = performance.now();
      const records = await loopFor(check, conc).rollout({ taskIds, n, seed: 0 });
      return { seconds: (performance.now() - t0) / 1000, records, rewards: records.map((r) => r.reward) };
    },
  });
  const cases: Case[] = [
    { name: 'env only (expert, no tokens)', run: async () => ({ ...envOnly(baselineEnv, taskIds, n), records: null }) },
    loopCase(`agent loop, no check, concurrency ${concurrency}`, 'disable', concurrency),
    loopCase(`agent loop, strict check, concurrency ${concurrency}`, 'strict', concurrency),
    loopCase('agent loop, no check, concurrency 1', 'disable', 1),
  ];
  for (const c of cases) await c.run(); // warm-up: JIT, and every environment's cache of gold states
  const best = new Map<string, { seconds: number; records: EpisodeRecord[] | null; rewards: number[] }>();
  for (let r = 0; r < rounds; r++) {
    for (const c of cases) {
      const out = await c.run();
      const prev = best.get(c.name);
      if (!prev || out.seconds < prev.seconds) best.set(c.name, out);
    }
  }
  const rows: RolloutBenchRow[] = cases.map((c) => {
    const b = best.get(c.name) as { seconds: number; records: EpisodeRecord[] | null; rewards: number[] };
    const eps = b.rewards.length;
    const tokens = b.records ? b.records.reduce((s, x) => s + x.promptIds.length + x.responseIds.length, 0) : 0;
    const model = b.records ? b.records.reduce((s, x) => s + x.responseMask.reduce((a, m) => a + m, 0), 0) : 0;
    return {
      name: c.name,
      episodes: eps,
      seconds: b.seconds,
      episodesPerSec: eps / b.seconds,
      tokensPerSec: tokens / b.seconds,
      modelTokensPerSec: model / b.seconds,
      meanReward: b.rewards.reduce((s, x) => s + x, 0) / Math.max(1, eps),
    };
  });
  const records = best.get(cases[1].name)?.records as EpisodeRecord[];
  let t0 = performance.now();
  const batch = episodesToDataProto(records, { padTokenId: template.pad });
  const dataProtoMs = performance.now() - t0;
  const longest = Math.max(...records.map((r) => r.promptIds.length + r.responseIds.length));
  t0 = performance.now();
  const micro = packMicroBatches(batch, {
    maxTokens: Math.max(options.packTokens ?? 16384, longest),
    columns: ['response_mask', 'rollout_log_probs'],
  });
  const packMs = performance.now() - t0;
  const real = records.reduce((s, r) => s + r.promptIds.length + r.responseIds.length, 0);
  const padded = batch.batchSize * batch.shape('input_ids')[1];
  for (const l of loops.values()) await l.dispose();
  const result: RolloutBenchResult = {
    rows,
    loopOverEnv: rows[1].episodesPerSec / rows[0].episodesPerSec,
    strictOverNoCheck: rows[2].episodesPerSec / rows[1].episodesPerSec,
    serialOverConcurrent: rows[3].episodesPerSec / rows[1].episodesPerSec,
    promptTokens: records.reduce((s, r) => s + r.promptIds.length, 0) / records.length,
    responseTokens: records.reduce((s, r) => s + r.responseIds.length, 0) / records.length,
    modelTokens: records.reduce((s, r) => s + r.responseMask.reduce((a, m) => a + m, 0), 0) / records.length,
    dataProtoMs,
    packMs,
    microBatches: micro.length,
    paddingFraction: padded > 0 ? 1 - real / padded : 0,
    vocab: template.tokenizer.vocabSize,
    loadAverage,
  };
  log(
    `rollout benchmark: ${taskIds.length} retail tasks x ${n} samples, vocab ${result.vocab}, best of ${rounds} interleaved rounds, load average ${loadAverage.toFixed(2)}`,
  );
  for (const r of rows) {
    log(
      `  ${r.name.padEnd(44)} ${r.episodesPerSec.toFixed(1).padStart(7)} episodes/s ${(r.tokensPerSec / 1000).toFixed(0).padStart(6)}k tokens/s ${(r.modelTokensPerSec / 1000).toFixed(1).padStart(6)}k model tokens/s  reward ${r.meanReward.toFixed(3)}`,
    );
  }
  log(
    `  loop / env only ${result.loopOverEnv.toFixed(2)}x, strict check / none ${result.strictOverNoCheck.toFixed(2)}x, concurrency 1 / ${concurrency} ${result.serialOverConcurrent.toFixed(2)}x`,
  );
  log(
    `  per episode: ${result.promptTokens.toFixed(0)} prompt + ${result.responseTokens.toFixed(0)} response tokens (${result.modelTokens.toFixed(0)} model tokens)`,
  );
  log(
    `  DataProto of ${records.length} episodes ${dataProtoMs.toFixed(1)} ms; packing into ${micro.length} micro-batches ${packMs.toFixed(1)} ms (the padded batch is ${(result.paddingFraction * 100).toFixed(0)}% padding)`,
  );
  return result;
}

/** The command line (the arguments after the script): `[--quick] [--json [file]]`. */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli: BenchCliSettings = {},
): Promise<RolloutBenchResult> {
  const program = benchProgram('rollout', 'agent-loop rollouts through the tau envs: episodes/s and tokens/s', cli);
  const o = parseBench(program, argv);
  const log = o.json === true ? () => undefined : undefined;
  const result = await runRolloutBench(o.quick ? { tasks: 8, n: 2, rounds: 1, log } : { log });
  writeJson(o.json, result);
  return result;
}

runWhenInvoked(import.meta.url, 'rollout', main);
