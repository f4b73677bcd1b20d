/**
 * The validation conversations of the report: per validation step a collapsible section, per
 * task kind a few transcripts (user, assistant, tool calls with their arguments, tool results)
 * with the reward and why (tau's reward breakdown in words), every text HTML-escaped and the
 * whole capped so that the page stays small.
 * @module
 */
import type { ChatMessage } from '../chat/index.js';
import { explainReward } from '../tau/index.js';
import { escapeHtml as esc } from './html.js';
import type { MetricsRow } from './report.js';
import type { ValidationLog, ValidationTranscript } from './validation-log.js';

/** How much of the validation transcripts a report shows. */
export interface TranscriptCaps {
  /** Validations shown: the first (after SFT) and the newest `validations - 1`. */
  validations: number;
  /** Transcripts per kind and validation. */
  perKind: number;
  /** Messages per transcript (beyond: the first three quarters and the last quarter, the middle elided). */
  messages: number;
  /** Characters per message text, tool-call arguments or tool result (beyond: clipped, saying how much). */
  messageChars: number;
  /** Characters of transcript HTML in the whole report, shared equally by the validations shown. */
  totalChars: number;
}

/** The report's caps. */
export const REPORT_TRANSCRIPT_CAPS: Readonly<TranscriptCaps> = Object.freeze({
  validations: 8,
  perKind: 2,
  messages: 40,
  messageChars: 600,
  totalChars: 1_000_000,
});

/** `text`, clipped to `max` characters with a note of what was cut. */
export function clipText(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`;
}

function messageHtml(m: ChatMessage, caps: TranscriptCaps): string {
  const clip = (s: string) => esc(clipText(s, caps.messageChars));
  if (m.role === 'assistant') {
    const parts: string[] = [];
    if (typeof m.content === 'string' && m.content.length > 0)
      parts.push(`<div class="m a"><span class="who">assistant</span><div class="txt">${clip(m.content)}</div></div>`);
    for (const c of m.tool_calls ?? []) {
      parts.push(
        `<div class="m c"><span class="who">tool call</span><div class="txt"><b>${esc(c.function.name)}</b>(${clip(c.function.arguments)})</div></div>`,
      );
    }
    if (parts.length === 0)
      parts.push('<div class="m a"><span class="who">assistant</span><div class="txt"><i>(empty)</i></div></div>');
    return parts.join('');
  }
  if (m.role === 'tool')
    return `<div class="m t"><span class="who">tool result${m.name ? ` (${esc(m.name)})` : ''}</span><div class="txt">${clip(m.content)}</div></div>`;
  return `<div class="m ${m.role === 'user' ? 'u' : 's'}"><span class="who">${esc(m.role)}</span><div class="txt">${clip(m.content)}</div></div>`;
}

/** One transcript: a collapsible block whose summary line gives the reward, the task and the ending. */
export function transcriptHtml(t: ValidationTranscript, caps: TranscriptCaps = REPORT_TRANSCRIPT_CAPS): string {
  const reward = Number.isInteger(t.reward) ? String(t.reward) : t.reward.toFixed(3);
  const cls = t.reward >= 1 - 1e-6 ? 'ok' : t.reward > 0 ? 'part' : 'bad';
  const summary = `<span class="rw ${cls}">reward ${reward}</span> · ${esc(t.task_id)} (trial ${t.trial}) · ${esc(t.termination)} · ${t.num_turns} turns`;
  const why = explainReward(t.reward_info as Record<string, unknown> | null).map(
    (r) => `<li class="${r.ok === null ? 'note' : r.ok ? 'ok' : 'bad'}">${esc(r.text)}</li>`,
  );
  if (t.aborted)
    why.unshift(`<li class="bad">aborted: ${esc(clipText(t.error ?? 'no error recorded', caps.messageChars))}</li>`);
  if (why.length === 0)
    why.push(`<li class="note">no reward breakdown (the episode ended by ${esc(t.termination)})</li>`);
  let msgs = t.messages.map((m) => messageHtml(m, caps));
  if (typeof t.cut_turn === 'string')
    msgs.push(
      `<div class="m a"><span class="who">assistant (cut off)</span><div class="txt">${esc(clipText(t.cut_turn, caps.messageChars))}<br><i>— cut off by ${esc(t.termination)}</i></div></div>`,
    );
  if (msgs.length > caps.messages) {
    const head = Math.ceil((caps.messages * 3) / 4);
    const tail = caps.messages - head;
    msgs = [
      ...msgs.slice(0, head),
      `<div class="m s"><i>… ${msgs.length - head - tail} messages elided …</i></div>`,
      ...(tail > 0 ? msgs.slice(msgs.length - tail) : []),
    ];
  }
  return `<details class="tr"><summary>${summary}</summary><ul class="why">${why.join('')}</ul><div class="msgs">${msgs.join('')}</div></details>`;
}

function fmtMean(v: unknown): string {
  return typeof v === 'number' && Number.isFinite(v) ? v.toFixed(3) : '–';
}

/**
 * The validation conversations section: one collapsible block per validation (the newest
 * open), within it the kinds, within each kind up to `caps.perKind` transcripts. `rows` (the
 * metrics) give each validation's mean@1 overall and per kind; `omitted` is the number of
 * validations left out of the report by `caps.validations`.
 */
export function validationTranscriptsHtml(
  logs: readonly ValidationLog[],
  rows: readonly MetricsRow[],
  source: string,
  caps: TranscriptCaps = REPORT_TRANSCRIPT_CAPS,
  omitted = 0,
): string {
  const notes = `Up to ${caps.perKind} conversations per task kind (the first validation tasks of each kind, first trial: the same tasks at every validation) for the first validation and the newest ${caps.validations - 1}; messages clipped to ${caps.messageChars} characters, transcripts to ${caps.messages} messages, about ${Math.round(caps.totalChars / 1000)} kB of transcripts in all. The run folder's validation/step-&lt;k&gt;.jsonl files hold more, in full.`;
  if (logs.length === 0)
    return `<h2>Validation conversations</h2><p class="small">${notes}</p><p class="small">No validation yet.</p>`;
  const share = Math.floor(caps.totalChars / logs.length);
  const blocks = logs.map((log, i) => {
    const row = rows.find((r) => r.phase === 'val' && r.step === log.step) ?? {};
    const groups = new Map<string | null, ValidationTranscript[]>();
    for (const t of log.transcripts) {
      const g = groups.get(t.kind) ?? [];
      if (g.length < caps.perKind) g.push(t);
      groups.set(t.kind, g);
    }
    let used = 0;
    let left = 0;
    const parts: string[] = [];
    for (const [kind, ts] of groups) {
      const key = kind === null ? `val-core/${source}/reward/mean@1` : `val-core/${source}/${kind}/reward/mean@1`;
      const n = kind === null ? null : row[`val-aux/${source}/${kind}/episodes`];
      const head = `<h4>${kind === null ? 'tasks without a kind' : esc(kind)}${kind === null ? '' : ` — mean@1 ${fmtMean(row[key])}${typeof n === 'number' ? ` over ${n} episodes` : ''}`}</h4>`;
      const items: string[] = [];
      for (const t of ts) {
        const html = transcriptHtml(t, caps);
        if (used + html.length > share) {
          left++;
          continue;
        }
        used += html.length;
        items.push(html);
      }
      if (items.length > 0) parts.push(head + items.join(''));
    }
    if (left > 0)
      parts.push(
        `<p class="small">${left} more transcript${left === 1 ? '' : 's'} of this validation in validation/step-${log.step}.jsonl (report size cap).</p>`,
      );
    const open = i === logs.length - 1 ? ' open' : '';
    return `<details class="val"${open}><summary>step ${log.step} — mean@1 ${fmtMean(row[`val-core/${source}/reward/mean@1`])}</summary>${parts.join('')}</details>`;
  });
  const skipped =
    omitted > 0
      ? `<p class="small">${omitted} other validation${omitted === 1 ? '' : 's'} not shown (see validation/).</p>`
      : '';
  return `<h2>Validation conversations</h2><p class="small">${notes}</p>${skipped}${blocks.join('\n')}`;
}
