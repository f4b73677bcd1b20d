/**
 * What a run trains on: the generated world (training and held-out validation tasks, disjoint),
 * the environment factory, the prompt format, and the domain tokenizer trained on expert
 * demonstrations.
 * @module
 */
import { buildTauWorld, loadTauWorld, TauEnv, type TauWorld } from '../gym/index.js';
import { ChatTemplate, trainChatTokenizer, type Tokenizer } from '../chat/index.js';
import { AgentLoop, ExpertTokenPolicy, mixSeed } from '../rollout/index.js';
import { domainOf, type TrainConfig } from './config.js';

/** A world split into training and validation tasks. */
export interface TrainWorld {
  /** The world (every task: training first, then validation). */
  world: TauWorld;
  /** Training task ids. */
  trainIds: string[];
  /** Held-out validation task ids (disjoint from `trainIds`). */
  valIds: string[];
}

/**
 * The world of `config.world` for `config.env` (the Gym layer's generated world, cached there
 * unless `cached` is false): `trainTasks + valTasks` tasks of distinct scenarios, so that no
 * validation task repeats a training task's content, the first `trainTasks` for training.
 */
export function buildWorld(config: Pick<TrainConfig, 'env' | 'world'>, cached = true): TrainWorld {
  const w = config.world;
  const count = w.trainTasks + w.valTasks;
  const load = cached ? loadTauWorld : buildTauWorld;
  const world = generateWorld(config, w.seed, count, load, `trainTasks + valTasks = ${count} tasks`);
  const ids = world.taskIds;
  return { world, trainIds: ids.slice(0, w.trainTasks), valIds: ids.slice(w.trainTasks) };
}

/**
 * The fresh world of GRPO step `step` (1-based) of a run with `world.fresh`: `config.world`'s
 * generator with the seed `mixSeed(world.seed, 0xf7e, step)` and `rollout.tasksPerStep` tasks of
 * distinct scenarios, all of them training tasks. Not cached: a run draws one per step.
 */
export function stepWorld(
  config: Pick<TrainConfig, 'env' | 'world' | 'rollout'>,
  step: number,
): { world: TauWorld; taskIds: string[] } {
  const count = config.rollout.tasksPerStep;
  const seed = mixSeed(config.world.seed, 0xf7e, step);
  const world = generateWorld(
    config,
    seed,
    count,
    buildTauWorld,
    `the world of GRPO step ${step}: rollout.tasksPerStep = ${count} tasks`,
  );
  return { world, taskIds: world.taskIds };
}

/** `count` tasks of distinct scenarios from `config.world`'s generator with `seed` (database and tasks). */
function generateWorld(
  config: Pick<TrainConfig, 'env' | 'world'>,
  seed: number,
  count: number,
  load: typeof buildTauWorld,
  what: string,
): TauWorld {
  const w = config.world;
  const domain = domainOf(config.env);
  try {
    return load(
      domain,
      domain === 'retail'
        ? {
            kind: 'generated',
            seed,
            count,
            distinct: true,
            users: w.users,
            orders: w.orders,
            weights: w.kinds,
            changeOfMind: w.changeOfMind,
            secondRequest: w.secondRequest,
          }
        : {
            kind: 'generated',
            seed,
            count,
            distinct: true,
            customers: w.customers,
            maxFaults: w.maxFaults,
            unfixableRate: w.unfixableRate,
          },
    );
  } catch (e) {
    throw new RangeError(
      `world (${what}; world.users / world.orders / world.customers size the database): ${(e as Error).message}`,
      { cause: e },
    );
  }
}

/**
 * The demonstration worlds of `config.sft.demoWorlds`: world `i` is `config.world` with the
 * seed `mixSeed(world.seed, 0xde3, i)` (a fresh database and tasks); all of its tasks are
 * demonstration tasks (`trainIds` and `valIds` together). Not cached (hundreds of them are used
 * once, for the demonstrations).
 */
export function demonstrationWorlds(config: Pick<TrainConfig, 'env' | 'world' | 'sft'>): TrainWorld[] {
  return Array.from({ length: config.sft.demoWorlds }, (_, i) => demonstrationWorld(config, i));
}

function demonstrationWorld(config: Pick<TrainConfig, 'env' | 'world'>, i: number): TrainWorld {
  return buildWorld({ env: config.env, world: { ...config.world, seed: demoWorldSeed(config, i) } }, false);
}

/**
 * The world whose training tasks' expert conversations train the run's tokenizer: the run's
 * world, or with `world.fresh` (the run's world held out) the first demonstration world.
 */
export function tokenizerWorld(config: Pick<TrainConfig, 'env' | 'world' | 'sft'>, tw: TrainWorld): TrainWorld {
  if (!config.world.fresh) return tw;
  return demonstrationWorld(config, 0);
}

function demoWorldSeed(config: Pick<TrainConfig, 'world'>, i: number): number {
  return mixSeed(config.world.seed, 0xde3, i);
}

/** An environment factory for the agent loop (scripted user with the configured patience). */
export function trainEnvFactory(config: Pick<TrainConfig, 'world'>, world: TauWorld): () => TauEnv {
  const w = config.world;
  return () =>
    new TauEnv({
      world,
      user: { kind: 'scripted', patience: w.userPatience, hardness: w.userHardness },
      maxSteps: w.maxSteps,
      maxErrors: w.maxErrors,
    });
}

/** The short system prompts of the `compact` prompt format (the model learns the tools from the demonstrations). */
export const COMPACT_SYSTEM_PROMPTS: Readonly<Record<'retail' | 'telecom', string>> = Object.freeze({
  retail:
    'You are a retail customer service agent. Verify the user (email, or name and zip), look up what you need with tools, follow the policy, confirm before any change, one tool call or one message per turn.',
  telecom:
    'You are a telecom technical support agent. Find the customer by phone number, check the line and bills with tools, guide the user through fixes on their phone step by step, one tool call or one message per turn.',
});

/** The prompt settings the agent loop needs (identical for training, eval and serving). */
export interface PromptSettings {
  /** The system prompt of an episode from the environment's reset info. */
  systemPrompt: (info: Readonly<Record<string, unknown>>) => string;
  /** The fixed system prompt text, or null when it comes from the environment (`full`). */
  systemPromptText: string | null;
  /** Whether the tools section is rendered. */
  renderTools: boolean;
}

/** The prompt settings of `config.prompt` for `config.env`. */
export function promptSettings(config: Pick<TrainConfig, 'env' | 'prompt'>): PromptSettings {
  const domain = domainOf(config.env);
  const sys = config.prompt.system;
  if (sys === 'full') {
    return {
      systemPrompt: (info) => (typeof info.systemPrompt === 'string' ? info.systemPrompt : ''),
      systemPromptText: null,
      renderTools: config.prompt.renderTools,
    };
  }
  const text = sys === 'compact' ? COMPACT_SYSTEM_PROMPTS[domain] : sys;
  return { systemPrompt: () => text, systemPromptText: text, renderTools: config.prompt.renderTools };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * A byte-level template (no merges): enough to run the expert for the tokenizer's corpus, and
 * for the demonstrations of a pretrained model (whose messages are then rendered in its format).
 */
export function byteTemplate(): ChatTemplate {
  return new ChatTemplate(trainChatTokenizer([''], { vocabSize: 262 }));
}

/**
 * Trains the run's byte-level BPE tokenizer on the domain's text: the policy, the system
 * prompt, the tools and `config.tokenizer.corpusEpisodes` expert conversations over the
 * training tasks (seeded, so the same config gives the same tokenizer).
 */
export async function trainRunTokenizer(config: TrainConfig, tw: TrainWorld): Promise<Tokenizer> {
  const prompt = promptSettings(config);
  const format = byteTemplate();
  const make = trainEnvFactory(config, tw.world);
  const loop = new AgentLoop({
    policy: new ExpertTokenPolicy(format, { tasks: tw.world }),
    chat: format,
    env: make,
    concurrency: 16,
    sanityCheck: 'disable',
    systemPrompt: prompt.systemPrompt,
    renderTools: prompt.renderTools,
    limits: { maxTurns: 64, maxTokensPerTurn: 1 << 16, maxContextTokens: 1 << 22 },
  });
  const ids = Array.from({ length: config.tokenizer.corpusEpisodes }, (_, i) => tw.trainIds[i % tw.trainIds.length]);
  let records;
  try {
    records = await loop.rollout({ taskIds: ids, n: 1, seed: config.seed ^ 0x70c });
  } finally {
    await loop.dispose();
  }
  const corpus: string[] = [tw.world.domain.policy];
  if (prompt.systemPromptText) corpus.push(prompt.systemPromptText);
  const env = make();
  corpus.push(JSON.stringify(env.tools));
  env.close();
  for (const r of records) {
    for (const m of r.messages) {
      if (typeof m.content === 'string') corpus.push(m.content);
      if (m.role === 'assistant' && m.tool_calls)
        for (const c of m.tool_calls)
          corpus.push(JSON.stringify({ name: c.function.name, arguments: parseJson(c.function.arguments) }));
    }
  }
  return trainChatTokenizer(corpus, { vocabSize: config.tokenizer.vocabSize, digitGroup: config.tokenizer.digitGroup });
}
