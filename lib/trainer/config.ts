/**
 * The training configuration: one zod schema for every knob of a run (world, tokenizer, model,
 * prompt, SFT, GRPO, rollout, validation, outputs), presets, loading from JSON or TOML files
 * and `a.b=c` overrides, with errors that name the field.
 * @module
 */
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';

import { parse as parseToml } from 'smol-toml';
import { z } from 'zod';

import { LORA_TARGETS } from '../model/lora/settings.js';

/** The environments `sinkflex train` can train on. */
export const TRAIN_ENV_IDS = ['sinkflex/TauRetail-v0', 'sinkflex/TauTelecom-v0'] as const;

/** An environment id of {@link TRAIN_ENV_IDS}. */
export type TrainEnvId = (typeof TRAIN_ENV_IDS)[number];

const int = (min: number) => z.number().int().min(min);
const prob = z.number().min(0).max(1);

const WorldSchema = z.strictObject({
  /** Seed of the task generator (and of the database generator). */
  seed: int(0),
  /** Training tasks (the first ones generated). */
  trainTasks: int(1),
  /** Held-out validation tasks (generated after the training tasks: disjoint ids). */
  valTasks: int(1),
  /** Retail: users in the generated database. */
  users: int(1),
  /** Retail: orders in the generated database. */
  orders: int(1),
  /** Telecom: customers in the generated database. */
  customers: int(1),
  /** Retail: relative weight of each task kind (missing kinds keep the generator's default; 0 disables). */
  kinds: z.record(z.string(), z.number().min(0)),
  /** Retail: probability of a change of mind. */
  changeOfMind: prob,
  /** Retail: probability of a second request. */
  secondRequest: prob,
  /** Telecom: most root causes per task (1–3). */
  maxFaults: z.number().int().min(1).max(3),
  /** Telecom: probability of an unfixable root cause. */
  unfixableRate: prob,
  /** Scripted user: turns without progress before it gives up. */
  userPatience: int(1),
  /** Scripted user (telecom): probability of each bad behaviour of the hard persona. */
  userHardness: prob,
  /**
   * Fresh worlds: each GRPO step draws its `rollout.tasksPerStep` tasks from a world generated
   * for that step (a new database — users, order ids, tracking numbers — seeded by `seed` and the
   * step), SFT's demonstrations come from the demonstration worlds only (`sft.demoWorlds` ≥ 1)
   * and the tokenizer's corpus from the first of them. The run's own world is then held out:
   * validation runs on its `valTasks` (the same tasks as without fresh worlds), nothing trains on
   * it, and only copying an id from the conversation earns a reward. False: GRPO and SFT use the
   * `trainTasks` of the run's world.
   */
  fresh: z.boolean(),
  /** Step limit of an episode (tau2 steps). */
  maxSteps: int(1),
  /** Tool-error budget of an episode. */
  maxErrors: int(1),
});

const TokenizerSchema = z.strictObject({
  /** Byte-level BPE vocabulary size (the model's vocabulary is this). */
  vocabSize: int(262),
  /** Expert episodes whose text trains the tokenizer (plus the policy text). */
  corpusEpisodes: int(1),
  /**
   * Most digits per pre-token (0: GPT-2's whole numbers). Short digit groups make ids, zip
   * codes and emails copyable token by token from a small set of frequent tokens.
   */
  digitGroup: z.number().int().min(0).max(16),
});

/** `model.lora`: LoRA adapters on a pretrained model (see {@link TrainConfig}). */
const LoraSchema = z.strictObject({
  /** r, the rank (1…65536). */
  rank: z.number().int().min(1).max(65536),
  /** lora_alpha: the adapters' product is scaled by alpha / rank (alpha / √rank with rslora). */
  alpha: z.number(),
  /**
   * The adapted projections: a list of PEFT module names (q_proj, k_proj, v_proj, o_proj,
   * gate_proj, up_proj, down_proj), or `all-linear` (PEFT's spelling: every projection the model
   * can adapt — all seven on a dense model, the attention's four on a mixture of experts such as
   * gpt-oss).
   */
  targets: z.union([z.literal('all-linear'), z.array(z.enum(LORA_TARGETS)).min(1)], {
    error: `must be 'all-linear' or a non-empty list of module names among ${LORA_TARGETS.join(', ')}`,
  }),
  /** Rank-stabilised scale alpha / √rank (PEFT's use_rslora). */
  rslora: z.boolean(),
});

/** The default `model.lora`: rank 16, alpha 32, every linear projection. */
export const DEFAULT_LORA: Readonly<z.infer<typeof LoraSchema>> = Object.freeze({
  rank: 16,
  alpha: 32,
  targets: 'all-linear',
  rslora: false,
});

const ModelSchema = z.strictObject({
  /**
   * What trains: `builtin` (the built-in transformer of `preset` … `window`, with a tokenizer
   * trained on the domain) or `hf:<dir>` (a Hugging Face model folder — gpt-oss, Qwen3, Qwen2,
   * Llama — with its own tokenizer and chat format; the `preset` … `window` fields and the
   * `tokenizer` section do not apply). Absent in older runs: builtin.
   */
  source: z.string().refine((v) => v === 'builtin' || (v.startsWith('hf:') && v.length > 3), {
    message: "must be 'builtin' or 'hf:<model folder>'",
  }),
  /**
   * hf sources: LoRA adapters to train over the frozen base (default rank 16, alpha 32,
   * all-linear); null trains every parameter (full fine-tuning: float32, for small models). The
   * built-in model always trains in full (leave the default or null).
   */
  lora: LoraSchema.nullable(),
  /**
   * hf sources: how the weights are held: `auto` (as the files store them — bfloat16 stays
   * bfloat16 — under LoRA; float32 for full fine-tuning), `float32` or `bfloat16` (LoRA only).
   * The built-in model is float32 (`auto` or `float32`).
   */
  dtype: z.enum(['auto', 'float32', 'bfloat16']),
  /** The architecture preset. */
  preset: z.enum(['tiny', 'small']),
  /** Residual width (0: the preset's). */
  width: int(0),
  /** Blocks (0: the preset's). */
  layers: int(0),
  /** SwiGLU hidden size (0: the preset's). */
  ffn: int(0),
  /** Sliding window of the even layers (-1: the preset's; 0: all full). */
  window: z.number().int().min(-1),
  /**
   * Token shift of the built-in model (`tokenShift` of the model config): each position's input
   * also gets a learned [width, width] projection of the previous token's embedding, so copying
   * ids from the conversation needs one attention layer, not a circuit of two that a small model
   * forms late. Absent in older runs: false. Does not apply to hf sources (no pretrained model has one).
   */
  tokenShift: z.boolean(),
  /** Context length in tokens (hf sources: a cap on the model's own context). */
  context: int(16),
  /**
   * Where the policy trains and samples: `cpu` (default), `cuda` (a GPU; the run stops with a
   * clear error where there is none) or `auto` (the GPU when usable). Absent in older runs: cpu.
   */
  device: z.enum(['cpu', 'cuda', 'auto']),
  /**
   * What a training step keeps for its backward: `none` (default) every layer's activations,
   * `layers` only each layer's input, the backward recomputing the layer (activation
   * checkpointing: the same gradients bit for bit, less memory, about one more forward of the
   * layers). Built-in and hf models. Absent in older runs: none.
   */
  activationCheckpointing: z.enum(['none', 'layers']),
});

const PromptSchema = z.strictObject({
  /** `compact` (a short instruction per domain), `full` (the environment's instructions + policy), or any other text used verbatim. */
  system: z.string(),
  /** Render the tools section (OpenAI function schemas) in the prompt. */
  renderTools: z.boolean(),
});

const RolloutSchema = z.strictObject({
  /** Samples per task (VERL `rollout.n`). */
  n: int(1),
  /** Tasks per GRPO step (groups). */
  tasksPerStep: int(1),
  /** Sampling temperature (the old log-probs are recomputed at this temperature). */
  temperature: z.number().gt(0),
  /** Nucleus mass. */
  topP: z.number().gt(0).max(1),
  /** Most assistant turns per episode. */
  maxTurns: int(1),
  /** Most tokens per assistant turn. */
  maxTokensPerTurn: int(1),
  /** Most tokens per episode (prompt + response); at most the model context. */
  maxContextTokens: int(16),
  /** Episodes in flight at once. */
  concurrency: int(1),
  /**
   * Where episodes are sampled: `local` (the trainer's own policy, in process), or servers at
   * `servers`, token-in/token-out through `/v1/completions`, kept on-policy after every
   * optimizer step: `openai` (`sinkflex serve`, or any vLLM-compatible server for LoRA runs),
   * `vllm` (LoRA runs only: vLLM has no route that loads full weights from disk) or `sglang`
   * (adapters named as SGLang reads them; full fine-tuning of a Hugging Face model through a
   * model folder per step and `/update_weights_from_disk`). Absent in older runs: local.
   */
  engine: z.enum(['local', 'openai', 'vllm', 'sglang']),
  /** Base URLs of the servers (`http://host:port/v1`) for engine `openai`; episodes go to the least loaded. */
  servers: z.array(
    z.string().regex(/^https?:\/\/\S+$/, 'must be an http(s) base URL such as http://127.0.0.1:8000/v1'),
  ),
  /**
   * Engine `openai`: send a session id per episode with the episode's seed (`sinkflex serve`
   * keeps the episode's context and random stream, so sampling equals the local engine's). Off:
   * each turn is an independent request seeded with its turn's seed (vLLM, SGLang).
   */
  sessions: z.boolean(),
  /** Engine `openai`: the served base model's name ('' : the first base model the servers list). */
  model: z.string(),
  /** Engine `openai`: timeout of one completion request in seconds (each is retried `retries` times, on another server when there is one). */
  timeoutS: z.number().gt(0),
  /** Engine `openai`: retries of a failed completion request. */
  retries: int(0),
  /** Engine `openai`: timeout in seconds of loading new weights or an adapter into one server. */
  syncTimeoutS: z.number().gt(0),
  /**
   * Servers: the bound on the mean |server log-prob − trainer log-prob| over the sampled tokens
   * of each server's first rollout batch (the on-policy check); above it the run stops. Absent
   * in older runs: 1e-2.
   */
  maxLogprobDiff: z.number().gt(0),
});

const SftSchema = z.strictObject({
  /**
   * Synthetic warm-up steps before SFT: random token spans followed by their repetition, loss on
   * the repetition. A tiny model learns to copy from its context (an induction circuit) in a
   * few hundred such steps, which it needs to copy ids, names and emails from the conversation
   * into tool calls. 0 skips it.
   */
  inductionSteps: int(0),
  /** Tokens per warm-up step. */
  inductionTokens: int(16),
  /** Length of each random span (each sequence is 1 + 2 × span tokens). */
  inductionSpan: int(2),
  /** Expert demonstrations (episodes over the training tasks and the demonstration worlds' tasks, seeded). 0 skips SFT. */
  episodes: int(0),
  /**
   * Extra generated worlds (fresh databases and tasks of the same kinds, seeds derived from
   * `world.seed`; no validation task is among them) whose expert episodes join the
   * demonstrations, shared round-robin with the training tasks. New names, ids and emails in
   * every world make the model copy them from the conversation instead of memorising the
   * training world's. 0: demonstrations over the training tasks only.
   */
  demoWorlds: int(0),
  /**
   * Loss weight of the observations after the prompt (user messages and tool results) relative
   * to the assistant's tokens (1). Tool results repeat what the conversation said (an order's
   * id, a user id, an order after a write), so predicting them trains copying from the context
   * far more often than the assistant's own tokens do. 0: the assistant's tokens only.
   */
  observationWeight: z.number().min(0).max(1e3),
  /**
   * Loss weight multiplier of the targets that continue a copy: token `t + 1` whose pair
   * (token `t`, token `t + 1`) already occurred earlier in the same sequence — an id, a name or
   * an email repeated from the conversation, the one part of a demonstration that a model can
   * only get right by copying. Applied on top of `observationWeight` (assistant and observation
   * targets alike). 1: no extra weight.
   */
  copyWeight: z.number().min(1).max(1e3),
  /** Optimiser steps. */
  steps: int(0),
  /** Tokens per optimiser step (packed sequences; one micro-batch each). */
  tokensPerStep: int(16),
  /** Peak learning rate (linear warm-up, then cosine to 10%). */
  lr: z.number().gt(0),
  /** Warm-up steps. */
  warmup: int(0),
  /** AdamW weight decay. */
  weightDecay: z.number().min(0),
});

const GrpoSchema = z.strictObject({
  /** GRPO steps. */
  steps: int(0),
  /** Learning rate (constant). */
  lr: z.number().gt(0),
  /** Advantage estimator. */
  estimator: z.enum(['grpo', 'rloo', 'grpo_passk']),
  /** Divide by the group std (false: Dr. GRPO). */
  normByStd: z.boolean(),
  /** PPO clip range below 1. */
  clipLow: z.number().min(0).max(1),
  /** PPO clip range above 1 (DAPO clip-higher). */
  clipHigh: z.number().min(0),
  /** KL-loss coefficient against the reference (the policy after SFT); 0 skips the reference pass. */
  klCoef: z.number().min(0),
  /** KL estimator. */
  klType: z.enum(['k1', 'k2', 'k3', 'abs']),
  /** Entropy bonus coefficient. */
  entropyCoef: z.number(),
  /** Loss aggregation. */
  aggMode: z.enum(['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm']),
  /** PPO epochs over each step's batch. */
  ppoEpochs: int(1),
  /** Mini-batches per epoch (one optimiser step each). */
  miniBatches: int(1),
  /** Token budget of a packed micro-batch (gradients accumulate over a mini-batch's micro-batches). */
  microBatchTokens: int(16),
  /** Global gradient-norm clip. */
  maxGradNorm: z.number().gt(0),
  /** AdamW weight decay. */
  weightDecay: z.number().min(0),
});

const ValSchema = z.strictObject({
  /** Validate every this many GRPO steps (and after SFT and at the end); 0: only after SFT and at the end. */
  every: int(0),
  /** Trials per validation task (pass^k up to k). */
  trials: int(1),
  /** Sampling temperature of validation (0: greedy). */
  temperature: z.number().min(0),
  /** Seed of the validation episodes (fixed across the run). */
  seed: int(0),
});

const OutputSchema = z.strictObject({
  /** Checkpoint every this many GRPO steps (0: only at the end). */
  saveEvery: int(0),
  /** Checkpoints kept (the oldest are deleted). */
  keepCheckpoints: int(1),
  /** Trajectories written to `samples/step-<k>.jsonl` per step (0: none). */
  samplesPerStep: int(0),
});

/** The schema of a whole training configuration. */
export const TrainConfigSchema = z.strictObject({
  /** The preset the configuration started from. */
  preset: z.enum(['default', 'smoke']),
  /** Master seed (model init, SFT order, rollout seeds). */
  seed: int(0),
  /** The environment. */
  env: z.enum(TRAIN_ENV_IDS),
  /** The generated world. */
  world: WorldSchema,
  /** The tokenizer. */
  tokenizer: TokenizerSchema,
  /** The policy model. */
  model: ModelSchema,
  /** The prompt format (saved with the run; eval and serve reuse it). */
  prompt: PromptSchema,
  /** Rollouts. */
  rollout: RolloutSchema,
  /** SFT warm start. */
  sft: SftSchema,
  /** GRPO. */
  grpo: GrpoSchema,
  /** Validation. */
  val: ValSchema,
  /** Checkpoints and samples. */
  output: OutputSchema,
});

/** A resolved training configuration. */
export type TrainConfig = z.infer<typeof TrainConfigSchema>;

/** A partial configuration (presets, files, overrides). */
export type TrainConfigPatch = {
  [K in keyof TrainConfig]?: TrainConfig[K] extends object ? Partial<TrainConfig[K]> : TrainConfig[K];
};

/** The names of the presets. */
export type PresetName = TrainConfig['preset'];

/** The default run: learns on a 2-core CPU in about 20 minutes. */
export const DEFAULT_CONFIG: TrainConfig = {
  preset: 'default',
  seed: 0,
  env: 'sinkflex/TauRetail-v0',
  world: {
    seed: 0,
    trainTasks: 96,
    valTasks: 32,
    users: 30,
    orders: 60,
    customers: 60,
    kinds: {
      cancel: 1,
      modify_address: 0,
      modify_payment: 0,
      modify_items: 0,
      return: 0,
      exchange: 0,
      user_address: 0,
      lookup_tracking: 1,
      lookup_price: 0,
      refuse: 3,
      transfer: 3,
    },
    changeOfMind: 0,
    secondRequest: 0,
    maxFaults: 1,
    unfixableRate: 0,
    userPatience: 6,
    userHardness: 0,
    fresh: true,
    maxSteps: 60,
    maxErrors: 10,
  },
  tokenizer: { vocabSize: 2048, corpusEpisodes: 64, digitGroup: 3 },
  model: {
    source: 'builtin',
    lora: { ...DEFAULT_LORA },
    dtype: 'auto',
    preset: 'tiny',
    width: 0,
    layers: 0,
    ffn: 0,
    window: -1,
    tokenShift: true,
    context: 2048,
    device: 'cpu',
    activationCheckpointing: 'none',
  },
  prompt: { system: 'compact', renderTools: false },
  rollout: {
    n: 8,
    tasksPerStep: 16,
    temperature: 1,
    topP: 1,
    maxTurns: 14,
    maxTokensPerTurn: 96,
    maxContextTokens: 2048,
    concurrency: 64,
    engine: 'local',
    servers: [],
    sessions: false,
    model: '',
    timeoutS: 120,
    retries: 3,
    syncTimeoutS: 600,
    maxLogprobDiff: 1e-2,
  },
  sft: {
    inductionSteps: 0,
    inductionTokens: 2048,
    inductionSpan: 24,
    episodes: 4096,
    demoWorlds: 256,
    observationWeight: 1,
    copyWeight: 4,
    steps: 2400,
    tokensPerStep: 8192,
    lr: 3e-3,
    warmup: 10,
    weightDecay: 0,
  },
  grpo: {
    steps: 80,
    lr: 2e-4,
    estimator: 'grpo',
    normByStd: true,
    clipLow: 0.2,
    clipHigh: 0.28,
    klCoef: 0.02,
    klType: 'k3',
    entropyCoef: 0,
    aggMode: 'token-mean',
    ppoEpochs: 1,
    miniBatches: 2,
    microBatchTokens: 8192,
    maxGradNorm: 1,
    weightDecay: 0,
  },
  val: { every: 10, trials: 4, temperature: 0.7, seed: 1234 },
  output: { saveEvery: 10, keepCheckpoints: 2, samplesPerStep: 8 },
};

/** The presets, as patches over {@link DEFAULT_CONFIG}. */
export const PRESETS: Record<PresetName, TrainConfigPatch> = {
  default: {},
  smoke: {
    preset: 'smoke',
    world: { trainTasks: 8, valTasks: 4, users: 40, orders: 80, fresh: false },
    tokenizer: { vocabSize: 512, corpusEpisodes: 8 },
    model: {
      preset: 'tiny',
      width: 64,
      layers: 2,
      ffn: 128,
      window: -1,
      tokenShift: false,
      context: 2048,
      device: 'cpu',
    },
    rollout: { n: 2, tasksPerStep: 2, maxTurns: 4, maxTokensPerTurn: 24, concurrency: 8 },
    sft: {
      inductionSteps: 2,
      inductionTokens: 512,
      episodes: 8,
      demoWorlds: 1,
      steps: 3,
      tokensPerStep: 4096,
      warmup: 1,
    },
    grpo: { steps: 3, miniBatches: 2, ppoEpochs: 1, klCoef: 0.01, microBatchTokens: 4096 } as Partial<
      TrainConfig['grpo']
    >,
    val: { every: 2, trials: 2 },
    output: { saveEvery: 1, keepCheckpoints: 2, samplesPerStep: 2 },
  },
};

/** A configuration error: the message names the field (`grpo.lr: …`). */
export class ConfigError extends Error {
  /** @param message - what is wrong, naming the field. */
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Merges patches into a copy of `base`: objects recursively (records too), anything else replaced. */
export function deepMerge<T>(base: T, ...patches: readonly unknown[]): T {
  let out: unknown = structuredClone(base);
  for (const p of patches) out = mergeOne(out, p);
  return out as T;
}

function mergeOne(a: unknown, b: unknown): unknown {
  if (b === undefined) return a;
  if (isPlainObject(a) && isPlainObject(b)) {
    const out: Record<string, unknown> = { ...a };
    for (const [k, v] of Object.entries(b)) out[k] = mergeOne(a[k], v);
    return out;
  }
  return structuredClone(b);
}

/** Parses `a.b.c=value` into a patch; the value is JSON when it parses (numbers, booleans, objects), else a string. */
export function parseOverride(assignment: string): Record<string, unknown> {
  const eq = assignment.indexOf('=');
  if (eq <= 0) throw new ConfigError(`--set expects path=value, got ${JSON.stringify(assignment)}`);
  const path = assignment.slice(0, eq).trim().split('.');
  if (path.some((p) => p.length === 0))
    throw new ConfigError(`--set: bad field path ${JSON.stringify(assignment.slice(0, eq))}`);
  const raw = assignment.slice(eq + 1);
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    value = raw;
  }
  const root: Record<string, unknown> = {};
  let cur = root;
  path.forEach((key, i) => {
    if (i === path.length - 1) cur[key] = value;
    else {
      const next: Record<string, unknown> = {};
      cur[key] = next;
      cur = next;
    }
  });
  return root;
}

/** Reads a configuration file: `.json` or `.toml` (a patch over the preset). */
export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read the config file ${path}: ${(e as Error).message}`);
  }
  const ext = extname(path).toLowerCase();
  let data: unknown;
  try {
    if (ext === '.toml') data = parseToml(text);
    else if (ext === '.json' || ext === '') data = JSON.parse(text);
    else throw new ConfigError(`config file ${path}: use .json or .toml`);
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(
      `config file ${path} is not valid ${ext === '.toml' ? 'TOML' : 'JSON'}: ${(e as Error).message}`,
    );
  }
  if (!isPlainObject(data)) throw new ConfigError(`config file ${path} must hold an object`);
  return data;
}

/** Validates a whole configuration; throws {@link ConfigError} naming every bad field. */
export function validateConfig(value: unknown): TrainConfig {
  const r = TrainConfigSchema.safeParse(value);
  if (r.success) {
    const c = r.data;
    if (c.rollout.maxContextTokens > c.model.context)
      throw new ConfigError(
        `rollout.maxContextTokens (${c.rollout.maxContextTokens}) exceeds model.context (${c.model.context})`,
      );
    if (c.world.fresh && c.sft.episodes > 0 && c.sft.demoWorlds === 0)
      throw new ConfigError(
        'world.fresh: the demonstrations come from the demonstration worlds only; set sft.demoWorlds >= 1 (or sft.episodes 0)',
      );
    if (c.grpo.estimator === 'grpo_passk' && c.rollout.n < 2)
      throw new ConfigError('grpo.estimator grpo_passk needs rollout.n >= 2');
    if (c.rollout.engine !== 'local' && c.rollout.servers.length === 0)
      throw new ConfigError(
        `rollout.servers: give at least one server base URL (http://host:port/v1) for rollout.engine '${c.rollout.engine}'`,
      );
    const fullWeights = c.model.source === 'builtin' || c.model.lora === null;
    if (c.rollout.engine === 'vllm' && fullWeights) {
      throw new ConfigError(
        "rollout.engine 'vllm': full fine-tuning (model.source 'builtin', or model.lora null) needs the servers to load new full weights after every step, and vLLM's OpenAI server has no route that loads them from disk; train LoRA adapters on a Hugging Face model (model.lora), or use rollout.engine 'sglang' (a Hugging Face model) or 'openai' with sinkflex serve",
      );
    }
    if (c.rollout.engine === 'sglang' && c.model.source === 'builtin') {
      throw new ConfigError(
        "rollout.engine 'sglang' with model.source 'builtin': SGLang loads Hugging Face model folders, and the built-in model has no Hugging Face architecture it could be written as; serve it with sinkflex serve (rollout.engine 'openai')",
      );
    }
    // every demonstration and episode (up to rollout.maxContextTokens) must fit one packed batch
    if (c.sft.tokensPerStep < c.rollout.maxContextTokens)
      throw new ConfigError(
        `sft.tokensPerStep (${c.sft.tokensPerStep}) is less than rollout.maxContextTokens (${c.rollout.maxContextTokens}): a demonstration of that length would not fit one SFT step`,
      );
    if (c.grpo.microBatchTokens < c.rollout.maxContextTokens)
      throw new ConfigError(
        `grpo.microBatchTokens (${c.grpo.microBatchTokens}) is less than rollout.maxContextTokens (${c.rollout.maxContextTokens}): an episode of that length would not fit one micro-batch`,
      );
    const m = c.model;
    if (m.source === 'builtin') {
      if (m.dtype === 'bfloat16')
        throw new ConfigError(
          "model.dtype: the built-in model trains in float32 ('auto' or 'float32'); bfloat16 applies to hf sources",
        );
      if (m.lora !== null && JSON.stringify(m.lora) !== JSON.stringify(DEFAULT_LORA))
        throw new ConfigError(
          "model.lora: the built-in model trains all its parameters; LoRA applies to hf sources (model.source 'hf:<dir>')",
        );
    } else {
      if (m.lora === null && m.dtype === 'bfloat16')
        throw new ConfigError(
          'model.dtype bfloat16: full fine-tuning (model.lora null) trains float32 parameters; use LoRA to keep a bfloat16 base',
        );
    }
    return c;
  }
  const lines = r.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(config)'}: ${i.message}`);
  throw new ConfigError(`invalid training config:\n  ${lines.join('\n  ')}`);
}

/**
 * Fields added to the configuration after the first release, with the values that reproduce
 * what a run saved before them did (not necessarily today's defaults).
 */
const ADDED_FIELDS = {
  tokenizer: { digitGroup: 0 },
  model: {
    device: 'cpu',
    source: 'builtin',
    lora: DEFAULT_LORA,
    dtype: 'auto',
    tokenShift: false,
    activationCheckpointing: 'none',
  },
  world: { fresh: false },
  sft: { demoWorlds: 0, observationWeight: 0, copyWeight: 1 },
  rollout: {
    engine: 'local',
    servers: [],
    sessions: false,
    model: '',
    timeoutS: 120,
    retries: 3,
    syncTimeoutS: 600,
    maxLogprobDiff: 1e-2,
  },
} as const;

/** The rollout fields a resumed run may change (where and how episodes are sampled, not what is sampled). */
export const ROLLOUT_ENGINE_FIELDS = [
  'engine',
  'servers',
  'sessions',
  'model',
  'timeoutS',
  'retries',
  'syncTimeoutS',
  'maxLogprobDiff',
] as const;

/** A change of {@link ROLLOUT_ENGINE_FIELDS}. */
export type RolloutEnginePatch = Partial<Pick<TrainConfig['rollout'], (typeof ROLLOUT_ENGINE_FIELDS)[number]>>;

/** Validates a configuration saved by a run, filling the fields added since it was saved (see `ADDED_FIELDS`). */
export function validateSavedConfig(value: unknown): TrainConfig {
  return validateConfig(isPlainObject(value) ? deepMerge(ADDED_FIELDS, value) : value);
}

/** Where a configuration comes from. */
export interface ResolveConfigOptions {
  /** The preset (default `default`). */
  preset?: PresetName;
  /** Patches applied in order after the preset (a file's content, flags). */
  patches?: readonly unknown[];
}

/** Defaults ← preset ← patches, validated. */
export function resolveConfig(options: ResolveConfigOptions = {}): TrainConfig {
  const preset = options.preset ?? 'default';
  if (!(preset in PRESETS))
    throw new ConfigError(`preset: expected one of ${Object.keys(PRESETS).join(', ')}, got ${JSON.stringify(preset)}`);
  const merged = deepMerge(DEFAULT_CONFIG, PRESETS[preset], ...(options.patches ?? []));
  return validateConfig(merged);
}

/** The model folder of an `hf:<dir>` source, or null for the built-in model. */
export function hfSourceDir(config: Pick<TrainConfig, 'model'>): string | null {
  const s = config.model.source;
  return s.startsWith('hf:') ? s.slice(3) : null;
}

/** The domain of an environment id. */
export function domainOf(env: TrainEnvId): 'retail' | 'telecom' {
  return env === 'sinkflex/TauTelecom-v0' ? 'telecom' : 'retail';
}

/** The data-source name of the validation metrics (`val-core/<name>/reward/mean@1`). */
export function valSourceName(env: TrainEnvId): string {
  return domainOf(env) === 'telecom' ? 'tau-telecom' : 'tau-retail';
}
