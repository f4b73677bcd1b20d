/**
 * Why an episode got its reward, in words: the reward basis and each component's value, a
 * premature end or a failed replay, and every check behind the components (gold actions
 * matched or missed, facts communicated or not, env assertions, the database comparison, NL
 * assertions). Reports and evaluations show these lines next to a transcript.
 * @module
 */
import type { RewardInfo } from './evaluate.js';

/** One line of an explanation. */
export interface RewardReason {
  /** Whether the check passed (true), failed (false), or the line is not a check (null). */
  ok: boolean | null;
  /** The text. */
  text: string;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function records(v: unknown): Record<string, unknown>[] {
  return Array.isArray(v) ? v.filter(isRecord) : [];
}

function fmtNumber(v: number): string {
  return Number.isInteger(v) ? String(v) : Number(v.toPrecision(4)).toString();
}

/** `name({"a":1})` for a gold action (tau2's `TaskAction`: name and arguments). */
function actionText(a: Record<string, unknown>): string {
  const name = typeof a.name === 'string' ? a.name : '?';
  const who = a.requestor === 'user' ? 'user ' : '';
  return `${who}${name}(${JSON.stringify(a.arguments ?? {})})`;
}

/**
 * The reasons behind a reward breakdown (tau's {@link RewardInfo}, also as read back from JSON):
 * first the reward as the product of its basis components, then notes (premature end, failed
 * replay, unevaluated components), then each check. Returns an empty list for a value that is
 * not a reward breakdown (an environment without one).
 */
export function explainReward(info: RewardInfo | Readonly<Record<string, unknown>> | null | undefined): RewardReason[] {
  if (!isRecord(info) || typeof info.reward !== 'number') return [];
  const out: RewardReason[] = [];
  const basis = Array.isArray(info.rewardBasis)
    ? info.rewardBasis.filter((b): b is string => typeof b === 'string')
    : [];
  const breakdown = isRecord(info.rewardBreakdown) ? info.rewardBreakdown : {};
  const parts = basis
    .filter((b) => typeof breakdown[b] === 'number')
    .map((b) => `${b} ${fmtNumber(breakdown[b] as number)}`);
  out.push({
    ok: null,
    text: `reward ${fmtNumber(info.reward)}${parts.length > 0 ? ` = ${parts.join(' × ')}` : ''}${basis.length > 0 ? ` (basis ${basis.join(', ')})` : ''}`,
  });
  const notes = isRecord(info.info) ? info.info : {};
  for (const key of ['note', 'error', 'env', 'nl'] as const) {
    if (typeof notes[key] === 'string') out.push({ ok: key === 'error' ? false : null, text: notes[key] as string });
  }
  for (const g of records(notes.gold_action_errors))
    out.push({
      ok: null,
      text: `gold action ${String(g.action_id ?? '')} ${String(g.name ?? '')} failed on the gold database: ${String(g.error ?? '')}`,
    });
  const notEvaluated = Array.isArray(info.notEvaluated)
    ? info.notEvaluated.filter((b): b is string => typeof b === 'string')
    : [];
  if (notEvaluated.length > 0)
    out.push({ ok: null, text: `not evaluated (left out of the reward): ${notEvaluated.join(', ')}` });
  const inBasis = (b: string) => (basis.includes(b) ? '' : ' (diagnostic, not in the basis)');
  if (isRecord(info.dbCheck)) {
    const match = info.dbCheck.dbMatch === true;
    out.push({
      ok: match,
      text: `${match ? 'database matches' : 'database differs from'} the gold database${inBasis('DB')}`,
    });
  }
  for (const c of records(info.envAssertions)) {
    const met = c.met === true;
    out.push({
      ok: met,
      text: `env assertion ${String(c.funcName ?? '?')}${met ? ' holds' : ` fails${typeof c.note === 'string' ? `: ${c.note}` : ''}`}${inBasis('ENV_ASSERTION')}`,
    });
  }
  for (const c of records(info.actionChecks)) {
    const met = c.actionMatch === true;
    const action = isRecord(c.action) ? actionText(c.action) : '?';
    out.push({ ok: met, text: `gold action ${met ? 'called' : 'missed'}: ${action}${inBasis('ACTION')}` });
  }
  for (const c of records(info.communicateChecks)) {
    const met = c.met === true;
    out.push({
      ok: met,
      text: `fact ${met ? 'communicated' : 'not communicated'}: '${String(c.info ?? '')}'${inBasis('COMMUNICATE')}`,
    });
  }
  for (const c of records(info.nlAssertions)) {
    const met = c.met === true;
    out.push({
      ok: met,
      text: `NL assertion ${met ? 'met' : 'not met'}: ${String(c.nlAssertion ?? '')}${typeof c.justification === 'string' ? ` (${c.justification})` : ''}`,
    });
  }
  return out;
}
