/**
 * What the phases of a run share: the prepared run, its state and metrics rows, and the actions
 * every phase takes the same way — logging a metrics row, writing the report, saving a
 * checkpoint, announcing a policy update, and undoing a start that failed before its first
 * checkpoint.
 * @module
 */
import { appendFileSync, existsSync, readdirSync, rmdirSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { performance } from 'node:perf_hooks';

import { removeStaleTemporaries, writeRunCheckpoint, writeTextAtomic, type TrainerState } from '../checkpoint.js';
import type { ModelHandle } from '../model-handle.js';
import { renderReport, type MetricsRow } from '../report.js';
import type { TrainEvent, TrainOptions } from '../train-types.js';
import { REPORT_TRANSCRIPT_CAPS } from '../transcript-html.js';
import { readReportValidations, removeValidationLogsAfter, validationDir } from '../validation-log.js';
import type { PreparedRun } from './prepare.js';

/** The shared state and actions of a run's phases. */
export class RunContext {
  /** The trainer state (step, SFT done, counters), saved in each checkpoint. */
  state: TrainerState;
  /** Every metrics row of the run (also in metrics.jsonl). */
  rows: MetricsRow[] = [];
  /** Set once this call saved a checkpoint (from then on the run can be resumed). */
  checkpointed = false;
  /** metrics.jsonl of the run. */
  readonly metricsPath: string;
  /** Progress events. */
  readonly emit: (e: TrainEvent) => void;
  /** Whether this call created the run folder. */
  private readonly createdOut: boolean;
  /** Wall time of earlier sessions of this run (resume). */
  private readonly baseElapsedS: number;

  /**
   * @param run - the prepared run.
   * @param options - the options of the call.
   * @param wall0 - when the call started (performance.now()).
   */
  constructor(
    readonly run: PreparedRun,
    readonly options: TrainOptions,
    private readonly wall0: number,
  ) {
    this.state = run.state;
    this.metricsPath = join(run.out, 'metrics.jsonl');
    this.emit = options.onEvent ?? (() => undefined);
    this.createdOut = !existsSync(run.out);
    this.baseElapsedS = run.state.elapsedS;
  }

  /** The run's wall seconds, earlier sessions included. */
  elapsed(): number {
    return this.baseElapsedS + (performance.now() - this.wall0) / 1000;
  }

  /** Appends a metrics row (to {@link rows} and metrics.jsonl). */
  log(row: MetricsRow): void {
    this.rows.push(row);
    appendFileSync(this.metricsPath, JSON.stringify(row) + '\n');
  }

  /** Rewrites report.html from the rows and the validation logs. */
  writeReport(): void {
    const { out, config, source } = this.run;
    const val = this.rows.filter((r) => r.phase === 'val');
    const key = `val-core/${source}/reward/mean@1`;
    const summary: Record<string, string | number> = {
      env: config.env,
      preset: config.preset,
      'GRPO steps': `${this.state.step} / ${config.grpo.steps}`,
      'wall time (s)': Math.round(this.elapsed()),
    };
    if (val.length > 0)
      summary['val mean@1 (first → last)'] =
        `${(val[0][key] as number).toFixed(3)} → ${(val[val.length - 1][key] as number).toFixed(3)}`;
    // the folder's name, not its path: reports are shared and committed
    const v = readReportValidations(out, REPORT_TRANSCRIPT_CAPS.validations);
    writeTextAtomic(
      join(out, 'report.html'),
      renderReport(this.rows, {
        title: `sinkflex train: ${basename(out)}`,
        source,
        config,
        summary,
        validations: v.logs,
        validationsOmitted: v.omitted,
      }),
    );
  }

  /** Saves a checkpoint of the current step (the model's files, config.json, trainer.json), keeping the newest `output.keepCheckpoints`. */
  async saveCheckpoint(model: ModelHandle): Promise<void> {
    const st = { ...this.state, elapsedS: this.elapsed() };
    const { out, config } = this.run;
    await writeRunCheckpoint(out, config, st, config.output.keepCheckpoints, (dir) => model.writeCheckpoint(dir, st));
    this.checkpointed = true;
  }

  /** Tells `options.onPolicyUpdate` that the weights changed at `step` (with the adapter writer of a LoRA model). */
  async notifyUpdate(model: ModelHandle, step: number): Promise<void> {
    if (!this.options.onPolicyUpdate) return;
    const a = model.adapters;
    const saveAdapter = a ? (dir?: string) => a.save(dir ?? join(this.run.out, 'adapters', `step-${step}`)) : null;
    await this.options.onPolicyUpdate({ step, saveAdapter });
  }

  /** A new run that fails before its first checkpoint cannot be resumed: it removes what it wrote, so that the same `out` can be used again. */
  undoFailedStart(runFiles: readonly string[]): void {
    const out = this.run.out;
    for (const name of ['config.json', 'metrics.jsonl', 'report.html', ...runFiles])
      rmSync(join(out, name), { recursive: true, force: true });
    removeValidationLogsAfter(out, -1);
    removeStaleTemporaries(out);
    for (const dir of [join(out, 'checkpoints'), validationDir(out), ...(this.createdOut ? [out] : [])]) {
      if (existsSync(dir) && readdirSync(dir).length === 0) rmdirSync(dir);
    }
  }
}
