/**
 * `report.html`: the curves of a run (training reward, validation mean@1 overall and per task
 * kind, KL, entropy, response length, …) as inline SVG line charts, and a few validation
 * conversations per kind at each validation, in one self-contained page.
 * @module
 */
import { escapeHtml as esc } from './html.js';
import { REPORT_TRANSCRIPT_CAPS, validationTranscriptsHtml, type TranscriptCaps } from './transcript-html.js';
import type { ValidationLog } from './validation-log.js';

/** One row of `metrics.jsonl`. */
export type MetricsRow = Record<string, number | string>;

/** One chart: a title and the metric keys drawn as lines against the x key (default the row's `step`). */
export interface ChartSpec {
  /** Title. */
  title: string;
  /** Metric keys (one line each). */
  keys: readonly string[];
  /**
   * The key of the x value (default `step`). SFT rows log `step: 0` (no GRPO step yet) and
   * their own step as `sft/step`, so the SFT chart uses `sft/step`.
   */
  x?: string;
  /** The x-axis label (default `step`). */
  xLabel?: string;
  /** A y range the axis always covers (e.g. [0, 1] for rewards); values outside widen it. Default: the data's range. */
  yRange?: readonly [number, number];
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd'];

function fmt(v: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  return a >= 1000 || a < 0.01 ? v.toExponential(1) : Number(v.toPrecision(3)).toString();
}

/** Axis ticks: the values and the spacing between them. */
export interface AxisTicks {
  /** Tick values, ascending. */
  values: number[];
  /** The spacing (1, 2 or 5 times a power of ten). */
  step: number;
}

/** The one of 1, 2, 5 × 10^k nearest to `raw` (`raw` > 0; nearest on a log scale). */
function niceStep(raw: number): number {
  const p = 10 ** Math.floor(Math.log10(raw));
  const r = raw / p;
  return (r >= Math.sqrt(50) ? 10 : r >= Math.sqrt(10) ? 5 : r >= Math.sqrt(2) ? 2 : 1) * p;
}

/**
 * "Nice" ticks for the range `lo..hi`: about `target` intervals of 1, 2 or 5 × 10^k, on
 * multiples of the spacing, covering the range (the first tick at or below `lo`, the last at or
 * above `hi`; a single value gets a range around it). With `integer`, the spacing is a whole
 * number (step axes).
 */
export function niceTicks(lo: number, hi: number, target = 4, integer = false): AxisTicks {
  if (!(hi > lo)) {
    // one value: a range around it (a flat line in the middle of the chart)
    const d = integer ? 1 : Math.abs(lo) > 0 ? Math.abs(lo) * 0.05 : 0.5;
    lo -= d;
    hi += d;
  }
  let step = niceStep((hi - lo) / target);
  if (integer) step = Math.max(1, Math.round(step));
  const first = Math.floor(lo / step + 1e-9);
  const last = Math.ceil(hi / step - 1e-9);
  const values: number[] = [];
  for (let i = first; i <= last; i++) values.push(i * step);
  return { values, step };
}

/**
 * A tick label with as many digits as the tick spacing needs, so that neighbouring ticks never
 * read the same: spacing 0.01 → `6.21`, spacing 0.5 → `1.5`, spacing 20 → `40`; exponents for
 * very large or very small values (`2.5e-6` with spacing 5e-7).
 */
export function tickLabel(v: number, step: number): string {
  const stepExp = Math.floor(Math.log10(step) + 1e-9);
  if (Math.abs(v) < step * 1e-6) return '0';
  const a = Math.abs(v);
  if (a >= 1e6 || (a < 1e-3 && step < 1e-3)) {
    const vExp = Math.floor(Math.log10(a));
    return v.toExponential(Math.min(20, Math.max(0, vExp - stepExp)));
  }
  return v.toFixed(Math.min(20, Math.max(0, -stepExp)));
}

/**
 * One SVG line chart of `keys` against `spec.x` (default `step`; rows without the key or the x
 * value are skipped for that line). The y axis has nice ticks labelled with the precision their
 * spacing needs; x ticks are whole numbers when every x value is (steps).
 */
export function lineChartSvg(rows: readonly MetricsRow[], spec: ChartSpec, width = 440, height = 240): string {
  const xKey = spec.x ?? 'step';
  const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
  const series = spec.keys.map((k) => ({
    key: k,
    pts: rows.filter((r) => finite(r[k]) && finite(r[xKey])).map((r) => [r[xKey] as number, r[k] as number] as const),
  }));
  const all = series.flatMap((s) => s.pts);
  const pad = { l: 48, r: 12, t: 28, b: 36 };
  const head = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img"><title>${esc(spec.title)}</title><rect width="100%" height="100%" fill="#fff"/><text x="${width / 2}" y="18" text-anchor="middle" font-size="13" font-family="sans-serif">${esc(spec.title)}</text>`;
  if (all.length === 0)
    return `${head}<text x="${width / 2}" y="${height / 2}" text-anchor="middle" font-size="12" fill="#888" font-family="sans-serif">no data yet</text></svg>`;
  let x0 = Math.min(...all.map((p) => p[0]));
  let x1 = Math.max(...all.map((p) => p[0]));
  const integerX = all.every((p) => Number.isInteger(p[0]));
  if (x1 === x0) x1 = x0 + 1;
  const ys = all.map((p) => p[1]).concat(spec.yRange ? [spec.yRange[0], spec.yRange[1]] : []);
  const yt = niceTicks(Math.min(...ys), Math.max(...ys));
  const y0 = yt.values[0];
  const y1 = yt.values[yt.values.length - 1];
  const xt = niceTicks(x0, x1, 4, integerX);
  const xTicks = xt.values.filter((x) => x >= x0 - 1e-9 && x <= x1 + 1e-9);
  if (!integerX) {
    x0 = Math.min(x0, xt.values[0]);
    x1 = Math.max(x1, xt.values[xt.values.length - 1]);
  }
  const W = width - pad.l - pad.r;
  const H = height - pad.t - pad.b;
  const sx = (x: number) => pad.l + ((x - x0) / (x1 - x0)) * W;
  const sy = (y: number) => pad.t + H - ((y - y0) / (y1 - y0)) * H;
  const parts: string[] = [head];
  parts.push(`<g font-size="10" font-family="sans-serif" fill="#444">`);
  for (const y of yt.values) {
    parts.push(
      `<line x1="${pad.l}" x2="${pad.l + W}" y1="${sy(y).toFixed(1)}" y2="${sy(y).toFixed(1)}" stroke="#eee"/><text x="${pad.l - 4}" y="${(sy(y) + 3).toFixed(1)}" text-anchor="end">${tickLabel(y, yt.step)}</text>`,
    );
  }
  for (const x of integerX ? xTicks : xt.values) {
    parts.push(
      `<text x="${sx(x).toFixed(1)}" y="${pad.t + H + 14}" text-anchor="middle">${tickLabel(x, xt.step)}</text>`,
    );
  }
  parts.push(
    `<text x="${pad.l + W / 2}" y="${height - 4}" text-anchor="middle">${esc(spec.xLabel ?? 'step')}</text></g>`,
  );
  parts.push(`<rect x="${pad.l}" y="${pad.t}" width="${W}" height="${H}" fill="none" stroke="#999"/>`);
  series.forEach((s, i) => {
    if (s.pts.length === 0) return;
    const c = COLORS[i % COLORS.length];
    const d = s.pts.map((p, j) => `${j === 0 ? 'M' : 'L'}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(' ');
    parts.push(`<path d="${d}" fill="none" stroke="${c}" stroke-width="1.8"/>`);
    for (const p of s.pts)
      parts.push(
        `<circle cx="${sx(p[0]).toFixed(1)}" cy="${sy(p[1]).toFixed(1)}" r="2.2" fill="${c}"><title>${esc(s.key)} @ ${p[0]}: ${fmt(p[1])}</title></circle>`,
      );
    parts.push(
      `<text x="${pad.l + 6}" y="${pad.t + 12 + 12 * i}" font-size="10" font-family="sans-serif" fill="${c}">${esc(s.key)}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('');
}

/** The charts of a training report for validation source `source` (`tau-retail`). */
export function defaultCharts(source: string): ChartSpec[] {
  return [
    { title: 'validation reward', keys: [`val-core/${source}/reward/mean@1`, `val-core/${source}/reward/pass^2`] },
    { title: 'training reward', keys: ['critic/score/mean'] },
    { title: 'KL', keys: ['actor/ppo_kl', 'actor/kl_loss'] },
    { title: 'entropy', keys: ['actor/entropy'] },
    { title: 'response length (tokens)', keys: ['response_length/mean'] },
    { title: 'policy loss and grad norm', keys: ['actor/pg_loss', 'actor/grad_norm'] },
    { title: 'SFT loss', keys: ['sft/loss'], x: 'sft/step', xLabel: 'SFT step' },
    { title: 'seconds per step', keys: ['timing_s/step', 'timing_s/gen', 'timing_s/update_actor'] },
  ];
}

/** The task kinds that have a validation metric `val-core/<source>/<kind>/reward/mean@1` in `rows`, sorted. */
export function validationKinds(rows: readonly MetricsRow[], source: string): string[] {
  const prefix = `val-core/${source}/`;
  const suffix = '/reward/mean@1';
  const kinds = new Set<string>();
  for (const r of rows) {
    if (r.phase !== 'val') continue;
    for (const k of Object.keys(r)) {
      if (!k.startsWith(prefix) || !k.endsWith(suffix)) continue;
      const kind = k.slice(prefix.length, k.length - suffix.length);
      if (kind.length > 0 && !kind.includes('/')) kinds.add(kind);
    }
  }
  return [...kinds].sort();
}

/** One task kind's validation mean@1: after SFT (the first validation), its best, and the last. */
export interface KindGain {
  /** The task kind. */
  kind: string;
  /** Mean@1 at the first validation (after SFT). */
  first: number;
  /** The highest mean@1 of any validation. */
  best: number;
  /** Mean@1 at the last validation. */
  last: number;
}

/** Each kind's validation mean@1 first → last (and best), from the validation rows of `rows`; kinds sorted. */
export function kindGains(rows: readonly MetricsRow[], source: string): KindGain[] {
  const val = rows.filter((r) => r.phase === 'val');
  return validationKinds(rows, source).map((kind) => {
    const key = `val-core/${source}/${kind}/reward/mean@1`;
    const xs = val.map((r) => r[key]).filter((v): v is number => typeof v === 'number');
    return { kind, first: xs[0], best: Math.max(...xs), last: xs[xs.length - 1] };
  });
}

function kindTableHtml(gains: readonly KindGain[]): string {
  if (gains.length === 0) return '';
  const row = (g: KindGain) =>
    `<tr><th>${esc(g.kind)}</th><td>${g.first.toFixed(3)}</td><td>${g.last.toFixed(3)}</td><td>${(g.last - g.first >= 0 ? '+' : '') + (g.last - g.first).toFixed(3)}</td><td>${g.best.toFixed(3)}</td></tr>`;
  return `<table><tr><th>kind</th><th>after SFT</th><th>last</th><th>gain</th><th>best</th></tr>${gains.map(row).join('')}</table>`;
}

/** One chart per task kind: its validation mean@1 on a 0..1 axis. */
export function kindCharts(rows: readonly MetricsRow[], source: string): ChartSpec[] {
  return validationKinds(rows, source).map((kind) => ({
    title: `${kind}: validation mean@1`,
    keys: [`val-core/${source}/${kind}/reward/mean@1`],
    yRange: [0, 1] as const,
  }));
}

/** Options of {@link renderReport}. */
export interface ReportOptions {
  /** Page title. */
  title: string;
  /** Validation data-source name (`tau-retail`). */
  source: string;
  /** The run's configuration (shown as JSON). */
  config?: unknown;
  /** Summary table rows. */
  summary?: Record<string, string | number>;
  /** Validation transcripts (the run folder's `validation/step-<k>.jsonl`, see `readReportValidations`). */
  validations?: readonly ValidationLog[];
  /** Validations left out of `validations` by the cap (said in the page). */
  validationsOmitted?: number;
  /** How much of the transcripts to show. Default {@link REPORT_TRANSCRIPT_CAPS}. */
  transcriptCaps?: TranscriptCaps;
}

/** The whole report page. */
export function renderReport(rows: readonly MetricsRow[], options: ReportOptions): string {
  const charts = defaultCharts(options.source).map((c) => lineChartSvg(rows, c));
  const kinds = kindCharts(rows, options.source).map((c) => lineChartSvg(rows, c, 300, 180));
  const kindSection =
    kinds.length > 0
      ? `<h2>Validation by task kind</h2>${kindTableHtml(kindGains(rows, options.source))}<div class="grid">${kinds.join('\n')}</div>`
      : '';
  const transcripts = options.validations
    ? validationTranscriptsHtml(
        options.validations,
        rows,
        options.source,
        options.transcriptCaps ?? REPORT_TRANSCRIPT_CAPS,
        options.validationsOmitted ?? 0,
      )
    : '';
  const summary = Object.entries(options.summary ?? {})
    .map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(String(v))}</td></tr>`)
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(options.title)}</title>
<style>body{font-family:sans-serif;margin:20px;color:#222}.grid{display:flex;flex-wrap:wrap;gap:12px}th{text-align:left;padding-right:12px}pre{background:#f6f6f6;padding:8px;font-size:11px;max-height:300px;overflow:auto}
.small{font-size:12px;color:#555}details.val{margin:6px 0;border:1px solid #ddd;padding:4px 8px}details.val>summary{font-weight:bold;cursor:pointer}h4{margin:10px 0 4px}
details.tr{margin:3px 0 3px 12px;font-size:12px}details.tr>summary{cursor:pointer}.rw{font-weight:bold}.ok{color:#1a7f37}.part{color:#9a6700}.bad{color:#cf222e}.note{color:#555}
ul.why{margin:4px 0;padding-left:20px}.msgs{margin-left:8px}.m{display:flex;gap:8px;margin:2px 0}.who{flex:0 0 110px;color:#666;font-weight:bold}.txt{white-space:pre-wrap;word-break:break-word;font-family:monospace;font-size:11px}
.m.u .txt{color:#0b4f9c}.m.c .txt{color:#6f42c1}.m.t .txt{color:#555}</style>
</head><body>
<h1>${esc(options.title)}</h1>
<table>${summary}</table>
<div class="grid">${charts.join('\n')}</div>
${kindSection}
${transcripts}
<h2>Configuration</h2><pre>${esc(JSON.stringify(options.config ?? {}, null, 2))}</pre>
</body></html>
`;
}
