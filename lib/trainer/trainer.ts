/**
 * The training run: tokenizer → model → SFT warm start → validation → GRPO steps with
 * periodic validation, checkpoints (resumable exactly), metrics, samples and the report.
 *
 * With `model.source: 'hf:<dir>'` the policy is a pretrained model (lib/trainer/hf-run.ts):
 * no tokenizer is trained (the model's own tokenizer and chat format are used), the expert's
 * demonstrations are rendered in the model's format for SFT, GRPO and validation run as for the
 * built-in model, and checkpoints hold the LoRA adapter and its optimizer state (or, for full
 * fine-tuning, the whole float32 policy), never the frozen base.
 * @module
 */
import { appendFileSync, existsSync, mkdirSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';

import type { AnyEnv } from '../gym/index.js';
import { ChatTemplate, modelConfig, modelOpsDevice, TransformerPolicy, type ChatFormat, type ModelConfig, type PretrainedModel } from '../model/index.js';
import { AgentLoop, evaluatePolicy, mixSeed, ModelPolicyAdapter, type EpisodeRecord } from '../rollout/index.js';
import { taskKind } from '../tau/index.js';
import { checkpointDir, listCheckpoints, readMetricsFile, readRunConfig, readTrainerState, removeStaleTemporaries, resumeRunFolder, RunFolderError, saveRunCheckpoint, writeRunCheckpoint, writeTextAtomic, type TrainerState } from './checkpoint.js';
import { hfSourceDir, validateConfig, valSourceName, type RolloutEnginePatch, type TrainConfig } from './config.js';
import { grpoStep } from './grpo-step.js';
import { AdapterReference, BASE_FILE, checkRunBase, currentRunBase, loadRunModel, readRunBase, REFERENCE_ADAPTER_DIR, runBaseJson, writeRunPolicy, type LogProbSource, type RunBase } from './hf-run.js';
import { kindGains, renderReport, type KindGain, type MetricsRow } from './report.js';
import { REPORT_TRANSCRIPT_CAPS } from './transcript-html.js';
import { readReportValidations, removeValidationLogsAfter, selectValidationTranscripts, validationDir, writeValidationLog } from './validation-log.js';
import { createRolloutEngine, type PublishAdapter, type PublishWeights, type RolloutEngine } from './rollout-engine.js';
import { collectDemonstrations, episodeSequence, renderDemonstrations, runInductionWarmup, runSft, seededPermutation, type MaskedSequence } from './sft.js';
import { buildWorld, byteTemplate, demonstrationWorlds, promptSettings, trainEnvFactory, trainRunTokenizer, type TrainWorld } from './world.js';

/** A progress event of a run. */
export type TrainEvent =
  | { kind: 'phase'; phase: 'model' | 'tokenizer' | 'demonstrations' | 'sft' | 'validation' | 'grpo' | 'done'; message: string }
  | { kind: 'sft'; step: number; total: number; loss: number }
  | { kind: 'grpo'; step: number; total: number; metrics: Record<string, number> }
  | { kind: 'validation'; step: number; meanAt1: number; metrics: Record<string, number> }
  | { kind: 'warning'; message: string };

/** Options of {@link train}. */
export interface TrainOptions {
  /** The run folder. */
  out: string;
  /**
   * Continue the run in `out` from its newest checkpoint (its config.json is used, the
   * configuration passed to {@link train} is not). `out` may also be the run's newest checkpoint
   * folder (`<run>/checkpoints/step-<k>`): the run it belongs to is resumed.
   */
  resume?: boolean;
  /**
   * With `resume`: the run's new number of GRPO steps (`grpo.steps`, saved to its config.json).
   * More steps extend a run (also a finished one); fewer end it earlier, but never before its
   * newest checkpoint. The GRPO learning rate is constant and the task order, rollout seeds and
   * validation seeds do not depend on the total, so a run extended from N to M steps trains
   * exactly as an uninterrupted M-step run; the only difference is the validation (and the
   * checkpoint) the shorter run made at its end, step N, when `val.every` does not divide N.
   */
  steps?: number;
  /**
   * With `resume`, for a run of a pretrained model: its base model folder at a new place (the
   * folder moved). Used when its fingerprint is the run's (base.json); saved to the run's
   * config.json as `model.source`.
   */
  modelDir?: string;
  /** Stop after this GRPO step (a checkpoint is written there); the run can be resumed. */
  stopAfter?: number;
  /** Progress events. */
  onEvent?: (e: TrainEvent) => void;
  /** Wraps the training/validation environment factory (e.g. to inject failures in tests). */
  wrapEnv?: (make: () => AnyEnv) => () => AnyEnv | Promise<AnyEnv>;
  /**
   * With `resume`: a new rollout engine for the rest of the run (`rollout.engine`, `servers`,
   * `sessions`, `model`, `timeoutS`, `retries`, `syncTimeoutS`: where episodes are sampled,
   * not what is sampled), saved to its config.json.
   */
  rolloutEngine?: RolloutEnginePatch;
  /**
   * Engine `openai` with a policy that trains LoRA adapters: writes the adapter after a GRPO
   * step (a PEFT folder) and resolves with its path; the servers load it under a per-step name.
   * Without it the servers get full weights (`/update_weights_from_disk`).
   */
  publishAdapter?: PublishAdapter;
  /**
   * Called after each change of the policy's weights — after SFT (step 0) and after each GRPO
   * step's update (step k), before that step's validation and checkpoint; in a resumed run also
   * once with the checkpoint's step before its first rollout — and awaited (e.g. to publish the
   * new adapter to serving engines).
   */
  onPolicyUpdate?: (update: PolicyUpdate) => void | Promise<void>;
}

/** What {@link TrainOptions.onPolicyUpdate} is told. */
export interface PolicyUpdate {
  /** The GRPO step whose update just happened (0: the end of SFT). */
  step: number;
  /**
   * A LoRA run's adapter writer: writes the current adapter as a PEFT folder (default
   * `<out>/adapters/step-<k>`; each file atomically) and returns the folder, which vLLM's
   * `load_lora_adapter` and `loadPretrained(base, { adapter })` load. Null for the built-in
   * model and full fine-tuning.
   */
  saveAdapter: ((dir?: string) => Promise<string>) | null;
}

/** What {@link train} returns. */
export interface TrainResult {
  /** The run folder. */
  out: string;
  /** The configuration. */
  config: TrainConfig;
  /** Every metrics row of the run (also in metrics.jsonl). */
  rows: MetricsRow[];
  /** Validation mean@1 after SFT (step 0) and the last one. */
  firstValMeanAt1: number | null;
  /** The last validation mean@1. */
  lastValMeanAt1: number | null;
  /** Each task kind's validation mean@1 after SFT, best and last (empty without validations). */
  kinds: KindGain[];
  /** GRPO steps completed. */
  step: number;
  /** Wall seconds of this call. */
  wallS: number;
  /** Process CPU seconds (user + system) of this call. */
  cpuS: number;
}

/** The model configuration of a run (the tokenizer fixes the vocabulary). */
export function runModelConfig(config: TrainConfig, vocab: number): ModelConfig {
  const m = config.model;
  const over: Partial<ModelConfig> = { vocab, context: m.context };
  if (m.width > 0) over.width = m.width;
  if (m.layers > 0) over.layers = m.layers;
  if (m.ffn > 0) over.ffn = m.ffn;
  if (m.window >= 0) over.window = m.window;
  if (m.tokenShift) over.tokenShift = true;
  return modelConfig(m.preset, over);
}

/** The training tasks of GRPO step `step` (1-based): passes over a seeded permutation of the training tasks. */
export function stepTasks(config: TrainConfig, trainIds: readonly string[], step: number): string[] {
  const per = config.rollout.tasksPerStep;
  const out: string[] = [];
  let permPass = -1;
  let perm: number[] = [];
  for (let j = 0; j < per; j++) {
    const i = (step - 1) * per + j;
    const pass = Math.floor(i / trainIds.length);
    if (pass !== permPass) {
      perm = seededPermutation(trainIds.length, mixSeed(config.seed, 0x7a5, pass));
      permPass = pass;
    }
    out.push(trainIds[perm[i % trainIds.length]]);
  }
  return out;
}

/** Trajectories in OpenAI chat format with rewards (one JSON object per line). */
export function samplesJsonl(records: readonly EpisodeRecord[], step: number): string {
  return records
    .map((r) => JSON.stringify({ step, task_id: r.taskId, uid: r.uid, sample_index: r.sampleIndex, seed: r.seed, reward: r.reward, termination: r.termination, aborted: r.aborted, truncated: r.truncated, num_turns: r.numTurns, messages: r.messages }))
    .join('\n')
    .concat(records.length > 0 ? '\n' : '');
}

/**
 * Runs (or resumes) a training run in `options.out`. The same configuration and seed give the
 * same metrics (except `timing_s/*`), also across a stop and a resume.
 */
export async function train(configIn: TrainConfig, options: TrainOptions): Promise<TrainResult> {
  const wall0 = performance.now();
  const cpu0 = process.cpuUsage();
  const out = resolve(options.resume ? resumeRunFolder(options.out) : options.out);
  const emit = options.onEvent ?? (() => undefined);
  const metricsPath = join(out, 'metrics.jsonl');
  let config = configIn;
  let state: TrainerState = { step: 0, sftDone: false, skippedSteps: 0, abortedEpisodes: 0, elapsedS: 0 };
  let policy: TransformerPolicy | null = null;
  let pretrained: PretrainedModel | null = null;
  let rows: MetricsRow[] = [];
  if (options.steps !== undefined && !options.resume) throw new RunFolderError('steps applies to a resumed run (set grpo.steps in the configuration of a new run)');
  if (options.modelDir !== undefined && !options.resume) throw new RunFolderError('modelDir applies to a resumed run (a new run names its base in model.source)');
  if (options.rolloutEngine !== undefined && !options.resume) throw new RunFolderError('rolloutEngine applies to a resumed run (set rollout.* in the configuration of a new run)');
  if (options.steps !== undefined && (!Number.isSafeInteger(options.steps) || options.steps < 0)) throw new RunFolderError(`steps must be an integer >= 0, got ${options.steps}`);

  // Everything that can fail is checked before anything is written, so that a failed start
  // leaves no run behind and a failed resume changes nothing.
  let resumeFrom: string | null = null;
  let configChanged = false;
  if (options.resume) {
    config = readRunConfig(out);
    const steps = listCheckpoints(out);
    if (steps.length > 0) {
      resumeFrom = checkpointDir(out, steps[steps.length - 1]);
      state = readTrainerState(resumeFrom);
    }
    if (options.rolloutEngine !== undefined) {
      const next = validateConfig({ ...config, rollout: { ...config.rollout, ...options.rolloutEngine } });
      if (JSON.stringify(next) !== JSON.stringify(config)) configChanged = true;
      config = next;
    }
    if (options.modelDir !== undefined) {
      if (hfSourceDir(config) === null) throw new RunFolderError(`modelDir: ${out} is a run of the built-in model, which has no base model folder`);
      const source = `hf:${resolve(options.modelDir)}`;
      if (source !== config.model.source) configChanged = true;
      config = { ...config, model: { ...config.model, source } };
    }
    if (options.steps !== undefined && options.steps !== config.grpo.steps) {
      configChanged = true;
      if (options.steps < state.step) throw new RunFolderError(`steps ${options.steps}: the run's newest checkpoint is at GRPO step ${state.step}; a run can be extended or ended earlier, but not before its newest checkpoint`);
      config = { ...config, grpo: { ...config.grpo, steps: options.steps } };
    }
  } else if (existsSync(join(out, 'config.json'))) {
    throw new RunFolderError(`${out} already holds a run (config.json); use --resume or another --out`);
  }
  modelOpsDevice(config.model.device); // model.device 'cuda' without a usable GPU fails here
  // a pretrained model's base folder: resolved to an absolute path in a new run's config, and
  // unchanged since the run started when it resumes
  let base: RunBase | null = null;
  if (hfSourceDir(config) !== null) {
    base = await currentRunBase(config);
    // the checkpoint's own record (a run killed before its first checkpoint may lack base.json)
    if (options.resume) {
      if (resumeFrom || existsSync(join(out, BASE_FILE))) checkRunBase(readRunBase(resumeFrom ?? out), base);
    }
    else config = { ...config, model: { ...config.model, source: `hf:${base.dir}` } };
  }
  const source = valSourceName(config.env);
  const tw: TrainWorld = buildWorld(config);
  const prompt = promptSettings(config);
  const baseEnv = trainEnvFactory(config, tw.world);
  const env = options.wrapEnv ? options.wrapEnv(baseEnv) : baseEnv;
  let metricsToKeep: MetricsRow[] = [];
  if (resumeFrom) {
    const read = readMetricsFile(metricsPath);
    if (read.tornLastLine !== null) emit({ kind: 'warning', message: `${metricsPath}: dropped a torn last line (a write cut off by a kill; the run resumes from the checkpoint of step ${state.step} and logs it again): ${read.tornLastLine.slice(0, 80)}` });
    // what was logged after the checkpoint is dropped (it will be redone identically)
    metricsToKeep = read.rows.filter((r) => (r.step as number) <= state.step);
    if (!base) policy = TransformerPolicy.load(join(resumeFrom, 'policy.safetensors'), { device: config.model.device, activationCheckpointing: config.model.activationCheckpointing });
  }
  const limits = { maxTurns: config.rollout.maxTurns, maxTokensPerTurn: config.rollout.maxTokensPerTurn, maxContextTokens: config.rollout.maxContextTokens };
  const log = (row: MetricsRow) => {
    rows.push(row);
    appendFileSync(metricsPath, JSON.stringify(row) + '\n');
  };
  const baseElapsedS = state.elapsedS; // wall time of earlier sessions of this run (resume)
  const elapsed = () => baseElapsedS + (performance.now() - wall0) / 1000;
  const writeReport = () => {
    const val = rows.filter((r) => r.phase === 'val');
    const key = `val-core/${source}/reward/mean@1`;
    const summary: Record<string, string | number> = { env: config.env, preset: config.preset, 'GRPO steps': `${state.step} / ${config.grpo.steps}`, 'wall time (s)': Math.round(elapsed()) };
    if (val.length > 0) summary['val mean@1 (first → last)'] = `${(val[0][key] as number).toFixed(3)} → ${(val[val.length - 1][key] as number).toFixed(3)}`;
    // the folder's name, not its path: reports are shared and committed
    const v = readReportValidations(out, REPORT_TRANSCRIPT_CAPS.validations);
    writeTextAtomic(join(out, 'report.html'), renderReport(rows, { title: `sinkflex train: ${basename(out)}`, source, config, summary, validations: v.logs, validationsOmitted: v.omitted }));
  };
  /** Set once this call saved a checkpoint (from then on the run can be resumed). */
  let checkpointed = false;
  const saveCheckpoint = async (p: TransformerPolicy) => {
    const st = { ...state, elapsedS: elapsed() };
    if (pretrained && base) {
      const [m, b] = [pretrained, base];
      await writeRunCheckpoint(out, config, st, config.output.keepCheckpoints, (dir) => writeRunPolicy(dir, m, b, st));
    } else saveRunCheckpoint(out, p, config, st, config.output.keepCheckpoints);
    checkpointed = true;
  };
  const notifyUpdate = async (step: number) => {
    if (!options.onPolicyUpdate) return;
    const m = pretrained;
    const saveAdapter =
      m && m.lora !== null
        ? async (dir?: string) => {
            const at = dir ?? join(out, 'adapters', `step-${step}`);
            await m.saveAdapter(at);
            return at;
          }
        : null;
    await options.onPolicyUpdate({ step, saveAdapter });
  };
  const createdOut = !existsSync(out);
  /** A new run that fails before its first checkpoint cannot be resumed: it removes what it wrote, so that the same `out` can be used again. */
  const undoFailedStart = () => {
    for (const name of ['config.json', 'metrics.jsonl', 'reference.safetensors', 'report.html', BASE_FILE]) rmSync(join(out, name), { force: true });
    rmSync(join(out, REFERENCE_ADAPTER_DIR), { recursive: true, force: true });
    removeValidationLogsAfter(out, -1);
    removeStaleTemporaries(out);
    for (const dir of [join(out, 'checkpoints'), validationDir(out), ...(createdOut ? [out] : [])]) {
      if (existsSync(dir) && readdirSync(dir).length === 0) rmdirSync(dir);
    }
  };

  let reference: (LogProbSource & { dispose(): void }) | null = null;
  let engine: RolloutEngine | null = null;
  if (base) {
    emit({ kind: 'phase', phase: 'model', message: `loading ${base.dir}${config.model.lora ? ' with LoRA adapters' : ' (full fine-tuning)'}${resumeFrom ? ` and the checkpoint of step ${state.step}` : ''}` });
    pretrained = await loadRunModel(config, base, { checkpoint: resumeFrom, training: true });
    policy = pretrained.policy;
    if (pretrained.fallback) emit({ kind: 'warning', message: `model.device auto: running on the CPU (${pretrained.fallback})` });
    try {
      void pretrained.chat; // a model without a chat format cannot run episodes
    } catch (e) {
      pretrained.dispose();
      throw e;
    }
  }
  try {
    // writing starts here
    const removed = removeStaleTemporaries(out);
    if (removed.length > 0) emit({ kind: 'warning', message: `removed ${removed.length} temporary file(s) left by an interrupted run: ${removed.join(', ')}` });
    if (!options.resume) {
      mkdirSync(out, { recursive: true });
      writeTextAtomic(join(out, 'config.json'), JSON.stringify(config, null, 2));
      if (base) writeTextAtomic(join(out, BASE_FILE), runBaseJson(base));
    } else {
      if (configChanged) writeTextAtomic(join(out, 'config.json'), JSON.stringify(config, null, 2));
      if (base && !existsSync(join(out, BASE_FILE))) writeTextAtomic(join(out, BASE_FILE), runBaseJson(base));
      if (resumeFrom) writeTextAtomic(metricsPath, metricsToKeep.map((r) => JSON.stringify(r)).join('\n') + (metricsToKeep.length ? '\n' : ''));
      else rmSync(metricsPath, { force: true });
      rows = metricsToKeep;
      removeValidationLogsAfter(out, resumeFrom ? state.step : -1); // redone like the metrics rows
    }
    if (!policy) {
      emit({ kind: 'phase', phase: 'tokenizer', message: 'training the tokenizer on expert demonstrations' });
      const tokenizer = await trainRunTokenizer(config, tw);
      policy = TransformerPolicy.create(runModelConfig(config, tokenizer.vocabSize), { seed: config.seed, tokenizer, device: config.model.device, activationCheckpointing: config.model.activationCheckpointing });
    }
    let template: ChatFormat;
    if (pretrained) template = pretrained.chat;
    else {
      const tokenizer = policy.tokenizer;
      if (!tokenizer) throw new RunFolderError('the policy has no tokenizer');
      template = new ChatTemplate(tokenizer);
    }
    const refPath = join(out, 'reference.safetensors');
    const refAdapterPath = join(out, REFERENCE_ADAPTER_DIR);
    const loraRun = pretrained !== null && pretrained.lora !== null;
    // a LoRA run publishes its adapter to the rollout servers (a PEFT folder per step) unless the caller does
    const publishAdapter: PublishAdapter | undefined =
      options.publishAdapter ??
      (loraRun && pretrained
        ? ((m) => async (step: number) => {
            const at = join(out, 'adapters', `step-${step}`);
            await m.saveAdapter(at);
            return at;
          })(pretrained)
        : undefined);
    // a full fine-tuning run of a Hugging Face model on SGLang publishes a model folder per step,
    // in float32: the trained weights exactly (the server holds them in its own --dtype)
    const publishWeights: PublishWeights | undefined =
      !loraRun && pretrained && config.rollout.engine === 'sglang'
        ? ((m) => async (_step: number, dir: string) => {
            await m.save(dir, { dtype: 'float32' });
            return dir;
          })(pretrained)
        : undefined;
    const rolloutEngine = createRolloutEngine({ config, policy, template, out, ...(publishAdapter ? { publishAdapter } : {}), ...(publishWeights ? { publishWeights } : {}), onWarning: (message) => emit({ kind: 'warning', message }) });
    engine = rolloutEngine;

    const validate = async (step: number) => {
      emit({ kind: 'phase', phase: 'validation', message: `validation after step ${step}` });
      const t0 = performance.now();
      await rolloutEngine.sync(step);
      const r = await evaluatePolicy({
        policy: rolloutEngine.policy,
        template,
        env,
        taskIds: tw.valIds,
        trials: config.val.trials,
        seed: config.val.seed,
        temperature: config.val.temperature,
        limits,
        concurrency: config.rollout.concurrency,
        systemPrompt: prompt.systemPrompt,
        renderTools: prompt.renderTools,
        source,
        taskKind: (id) => taskKind(tw.world.task(id)),
      });
      const row: MetricsRow = { step, phase: 'val', ...r.metrics, ...rolloutEngine.takeMetrics(), 'timing_s/testing': (performance.now() - t0) / 1000 };
      writeValidationLog(out, step, selectValidationTranscripts(r, step, { format: template }));
      log(row);
      emit({ kind: 'validation', step, meanAt1: r.meanReward, metrics: r.metrics });
      return r;
    };

    if (!state.sftDone) {
      // the induction warm-up teaches the tiny built-in model to copy; a pretrained model can
      if (config.sft.inductionSteps > 0 && !pretrained) {
        emit({ kind: 'phase', phase: 'sft', message: `induction warm-up (${config.sft.inductionSteps} steps of copy data)` });
        const t0 = performance.now();
        const losses = await runInductionWarmup(policy, config.sft, config.seed, (step, loss) => {
          emit({ kind: 'sft', step, total: config.sft.inductionSteps, loss });
          if (step % 25 === 0 || step === config.sft.inductionSteps) log({ step: 0, phase: 'induction', 'induction/step': step, 'induction/loss': loss });
        });
        log({ step: 0, phase: 'induction-summary', 'induction/final_loss': losses[losses.length - 1], 'timing_s/induction': (performance.now() - t0) / 1000 });
      }
      emit({ kind: 'phase', phase: 'demonstrations', message: 'collecting expert demonstrations' });
      const t0 = performance.now();
      // demonstrations only need to fit the model's context (the expert's turns may be longer than
      // the rollout's per-turn limit); a pretrained model's are collected with a byte-level
      // template, then rendered in the model's format and kept when they fit
      const demoTemplate = pretrained ? byteTemplate() : (template as ChatTemplate);
      const demoLimits = pretrained
        ? { maxTurns: Math.max(64, limits.maxTurns), maxTokensPerTurn: 1 << 20, maxContextTokens: 1 << 24 }
        : { maxTurns: Math.max(64, limits.maxTurns), maxTokensPerTurn: limits.maxContextTokens, maxContextTokens: limits.maxContextTokens };
      // the training tasks, then each demonstration world's tasks, sharing the episodes round-robin
      const sources = [{ world: tw.world, taskIds: tw.trainIds, env }, ...demonstrationWorlds(config).map((d) => ({ world: d.world, taskIds: [...d.trainIds, ...d.valIds], env: trainEnvFactory(config, d.world) }))];
      const demos: { kept: EpisodeRecord[]; all: EpisodeRecord[] } = { kept: [], all: [] };
      for (const [k, src] of sources.entries()) {
        const count = Math.floor(config.sft.episodes / sources.length) + (k < config.sft.episodes % sources.length ? 1 : 0);
        const got = await collectDemonstrations({ ...src, count, template: demoTemplate, prompt, limits: demoLimits, seed: k === 0 ? mixSeed(config.seed, 0xde0) : mixSeed(config.seed, 0xde0, k) });
        demos.kept.push(...got.kept);
        demos.all.push(...got.all);
      }
      let seqs: MaskedSequence[];
      let dropped = demos.all.length - demos.kept.length;
      if (pretrained) {
        const r = renderDemonstrations(template, demos.kept, { renderTools: prompt.renderTools, maxTokens: limits.maxContextTokens });
        seqs = r.sequences;
        dropped += r.tooLong;
      } else seqs = demos.kept.map(episodeSequence);
      const demoS = (performance.now() - t0) / 1000;
      emit({ kind: 'phase', phase: 'sft', message: `SFT on ${seqs.length} demonstrations` });
      const t1 = performance.now();
      const infos = await runSft(policy, seqs, config.sft, config.seed, (i) => {
        emit({ kind: 'sft', step: i.step, total: config.sft.steps, loss: i.loss });
        if (i.step % 10 === 0 || i.step === config.sft.steps) log({ step: 0, phase: 'sft', 'sft/step': i.step, 'sft/loss': i.loss, 'sft/grad_norm': i.gradNorm, 'sft/lr': i.lr, 'sft/tokens': i.tokens, ...(config.sft.observationWeight > 0 ? { 'sft/observation_loss': i.observationLoss } : {}) });
      });
      const tokens = seqs.map((s) => s.tokens.length);
      log({
        step: 0,
        phase: 'sft-summary',
        'sft/demonstrations': seqs.length,
        'sft/demonstrations_dropped': dropped,
        'sft/demo_tokens/mean': tokens.length ? tokens.reduce((a, b) => a + b, 0) / tokens.length : 0,
        'sft/steps': infos.length,
        'sft/final_loss': infos.length ? infos[infos.length - 1].loss : 0,
        'timing_s/demonstrations': demoS,
        'timing_s/sft': (performance.now() - t1) / 1000,
      });
      state = { ...state, sftDone: true };
      if (config.grpo.klCoef > 0) {
        if (loraRun) await (pretrained as PretrainedModel).saveAdapter(refAdapterPath);
        else policy.save(refPath, { optimizer: false });
      }
      await notifyUpdate(0);
      await validate(0);
      await saveCheckpoint(policy);
      writeReport();
    }
    if (config.grpo.klCoef > 0) reference = loraRun ? await AdapterReference.load(policy, refAdapterPath) : TransformerPolicy.load(refPath, { device: config.model.device });
    // a resumed run's weights are its checkpoint's: announced before its first rollout
    if (resumeFrom) await notifyUpdate(state.step);

    const loop = new AgentLoop({
      policy: rolloutEngine.policy,
      template,
      env,
      concurrency: config.rollout.concurrency,
      limits,
      sampling: { temperature: config.rollout.temperature, topP: config.rollout.topP },
      sanityCheck: 'disable',
      systemPrompt: prompt.systemPrompt,
      renderTools: prompt.renderTools,
    });
    try {
      const last = Math.min(config.grpo.steps, options.stopAfter ?? Number.POSITIVE_INFINITY);
      if (state.step < last) emit({ kind: 'phase', phase: 'grpo', message: `GRPO steps ${state.step + 1}..${last}` });
      while (state.step < last) {
        const step = state.step + 1;
        const t0 = performance.now();
        await rolloutEngine.sync(state.step); // the servers sample with the policy of the last step
        const syncS = (performance.now() - t0) / 1000;
        const trained = policy;
        const r = await grpoStep({ policy, loop, reference, config, afterRollout: () => rolloutEngine.checkOnPolicy(trained) }, step, stepTasks(config, tw.trainIds, step));
        if (rolloutEngine.kind !== 'local') Object.assign(r.metrics, rolloutEngine.takeMetrics(), { 'timing_s/sync_weights': syncS });
        state = { ...state, step, skippedSteps: state.skippedSteps + r.skipped, abortedEpisodes: state.abortedEpisodes + (r.metrics['rollout/aborted'] ?? 0) };
        const row: MetricsRow = { step, phase: 'grpo', ...r.metrics, 'actor/skipped_steps_total': state.skippedSteps, 'rollout/aborted_total': state.abortedEpisodes };
        log(row);
        emit({ kind: 'grpo', step, total: config.grpo.steps, metrics: r.metrics });
        await notifyUpdate(step);
        if (config.output.samplesPerStep > 0) {
          mkdirSync(join(out, 'samples'), { recursive: true });
          writeFileSync(join(out, 'samples', `step-${step}.jsonl`), samplesJsonl(r.records.slice(0, config.output.samplesPerStep), step));
        }
        const end = step === config.grpo.steps;
        if (end || (config.val.every > 0 && step % config.val.every === 0)) await validate(step);
        if (end || step === last || (config.output.saveEvery > 0 && step % config.output.saveEvery === 0)) {
          await saveCheckpoint(policy);
        }
        writeReport();
      }
      // a run resumed with as many steps as it has done (`steps`) ends with the validation an
      // uninterrupted run of that length makes at its end
      if (state.sftDone && state.step === config.grpo.steps && !rows.some((r) => r.phase === 'val' && r.step === state.step)) await validate(state.step);
    } finally {
      await loop.dispose();
    }
    writeReport();
    emit({ kind: 'phase', phase: 'done', message: `done: ${state.step} GRPO steps` });
  } catch (e) {
    engine?.dispose();
    if (!options.resume && !checkpointed) undoFailedStart();
    throw e;
  } finally {
    engine?.dispose();
    reference?.dispose();
    if (pretrained) pretrained.dispose();
    else policy?.dispose();
  }
  const cpu = process.cpuUsage(cpu0);
  const val = rows.filter((r) => r.phase === 'val');
  const key = `val-core/${source}/reward/mean@1`;
  return {
    out,
    config,
    rows,
    firstValMeanAt1: val.length ? (val[0][key] as number) : null,
    lastValMeanAt1: val.length ? (val[val.length - 1][key] as number) : null,
    kinds: kindGains(rows, source),
    step: state.step,
    wallS: (performance.now() - wall0) / 1000,
    cpuS: (cpu.user + cpu.system) / 1e6,
  };
}
