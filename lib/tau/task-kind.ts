/**
 * The kind of a task, for metrics and reports broken down by kind: a generated retail task's
 * kind (`cancel`, `lookup_tracking`, `refuse`, `transfer`, … — the kind of its first request,
 * as generated, before any change of mind), a telecom task's issue category (`service`,
 * `mobile_data`, `mms`; generated tasks and tau2's, whose ids name the category), else none
 * (tau2's retail tasks).
 * @module
 */
import { scenarioFromTau2Task } from './domains/telecom/scenario.js';
import type { TauTask } from './task.js';

/** The characters a task kind may hold (it becomes a segment of a metric name). */
export const TASK_KIND_PATTERN = /^[A-Za-z0-9_.-]+$/;

/** The task's kind (see the module description), or null when it has none. */
export function taskKind(task: TauTask): string | null {
  const s = task.sinkflex_scenario as Record<string, unknown> | null | undefined;
  if (s && typeof s === 'object') {
    if (typeof s.kind === 'string' && Array.isArray(s.requests)) return s.kind;
    if (typeof s.category === 'string') return s.category;
    return null;
  }
  return scenarioFromTau2Task(task)?.category ?? null;
}
