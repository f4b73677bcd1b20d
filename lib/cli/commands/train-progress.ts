/**
 * What `sinkflex train` shows while it runs: the progress bar on a terminal, and plain lines
 * (phases, validation results, periodic step lines; no terminal control codes) for logs, pipes
 * and CI, where a bar cannot be drawn.
 * @module
 */
import type { TrainEvent } from '../../trainer/index.js';
import type { ProgressBar } from './progress.js';

/** Where the progress of a run goes. */
export interface TrainProgressSinks {
  /** The bar (draws only when enabled, i.e. on a TTY). */
  bar: ProgressBar;
  /** Receives plain progress lines; null: none. */
  plain: ((line: string) => void) | null;
  /** Receives warnings. */
  warn: (line: string) => void;
  /** The validation source name (`tau-retail`), for the pass^k metric keys. */
  source: string;
}

/** SFT step lines in plain mode: about ten per phase (and the last step). */
function sftLineDue(step: number, total: number): boolean {
  return step === total || step % Math.max(1, Math.ceil(total / 10)) === 0;
}

/** The text of a GRPO step's metrics (bar and plain lines). */
export function grpoStepText(m: Readonly<Record<string, number>>): string {
  return `reward ${(m['critic/score/mean'] ?? 0).toFixed(3)} kl ${(m['actor/ppo_kl'] ?? 0).toExponential(1)} ent ${(m['actor/entropy'] ?? 0).toFixed(2)} len ${(m['response_length/mean'] ?? 0).toFixed(0)} ${(m['timing_s/step'] ?? 0).toFixed(1)}s/step`;
}

/**
 * Turns training events into bar updates and plain lines: every phase, every validation, SFT
 * steps about every tenth of the phase and every GRPO step.
 */
export function trainProgress(s: TrainProgressSinks): (e: TrainEvent) => void {
  const { bar, plain, source } = s;
  let phase = '';
  return (e: TrainEvent) => {
    switch (e.kind) {
      case 'phase': {
        const line = `[${e.phase}] ${e.message}`;
        bar.log(line);
        plain?.(line);
        break;
      }
      case 'sft': {
        if (e.step === 1 || phase !== 'sft') bar.start('sft ', e.total);
        phase = 'sft';
        const info = `loss ${e.loss.toFixed(3)}`;
        bar.update(e.step, info);
        if (plain && sftLineDue(e.step, e.total)) plain(`sft ${e.step}/${e.total} ${info}`);
        break;
      }
      case 'grpo': {
        if (e.step === 1 || phase !== 'grpo') bar.start('grpo', e.total);
        phase = 'grpo';
        const info = grpoStepText(e.metrics);
        bar.update(e.step, info);
        plain?.(`grpo ${e.step}/${e.total} ${info}`);
        break;
      }
      case 'validation': {
        const passK = Object.entries(e.metrics)
          .filter(([k]) => k.startsWith(`val-core/${source}/reward/pass^`))
          .map(([k, v]) => `${k.slice(k.lastIndexOf('/') + 1)}=${v.toFixed(3)}`)
          .join(' ');
        const line = `validation after step ${e.step}: mean@1 ${e.meanAt1.toFixed(3)}, pass^k ${passK}`;
        bar.log(line);
        plain?.(line);
        break;
      }
      case 'warning':
        s.warn(`warning: ${e.message}`);
        break;
    }
  };
}
