/**
 * `report.html`: the curves of a run (training reward, validation mean@1, KL, entropy,
 * response length, …) as inline SVG line charts in one self-contained page.
 * @module
 */

/** One row of `metrics.jsonl`. */
export type MetricsRow = Record<string, number | string>;

/** One chart: a title and the metric keys drawn as lines (x = the row's `step`). */
export interface ChartSpec {
  /** Title. */
  title: string;
  /** Metric keys (one line each). */
  keys: readonly string[];
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd'];

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function fmt(v: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  return a >= 1000 || a < 0.01 ? v.toExponential(1) : Number(v.toPrecision(3)).toString();
}

/** One SVG line chart of `keys` against `step` (rows without a key are skipped for that line). */
export function lineChartSvg(rows: readonly MetricsRow[], spec: ChartSpec, width = 440, height = 240): string {
  const series = spec.keys.map((k) => ({ key: k, pts: rows.filter((r) => typeof r[k] === 'number' && Number.isFinite(r[k] as number) && typeof r.step === 'number').map((r) => [r.step as number, r[k] as number] as const) }));
  const all = series.flatMap((s) => s.pts);
  const pad = { l: 48, r: 12, t: 28, b: 36 };
  const head = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img"><title>${esc(spec.title)}</title><rect width="100%" height="100%" fill="#fff"/><text x="${width / 2}" y="18" text-anchor="middle" font-size="13" font-family="sans-serif">${esc(spec.title)}</text>`;
  if (all.length === 0) return `${head}<text x="${width / 2}" y="${height / 2}" text-anchor="middle" font-size="12" fill="#888" font-family="sans-serif">no data yet</text></svg>`;
  let x0 = Math.min(...all.map((p) => p[0]));
  let x1 = Math.max(...all.map((p) => p[0]));
  let y0 = Math.min(...all.map((p) => p[1]));
  let y1 = Math.max(...all.map((p) => p[1]));
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) {
    y0 -= 0.5;
    y1 += 0.5;
  }
  const W = width - pad.l - pad.r;
  const H = height - pad.t - pad.b;
  const sx = (x: number) => pad.l + ((x - x0) / (x1 - x0)) * W;
  const sy = (y: number) => pad.t + H - ((y - y0) / (y1 - y0)) * H;
  const parts: string[] = [head];
  parts.push(`<g font-size="10" font-family="sans-serif" fill="#444">`);
  for (let i = 0; i <= 4; i++) {
    const y = y0 + ((y1 - y0) * i) / 4;
    parts.push(`<line x1="${pad.l}" x2="${pad.l + W}" y1="${sy(y).toFixed(1)}" y2="${sy(y).toFixed(1)}" stroke="#eee"/><text x="${pad.l - 4}" y="${(sy(y) + 3).toFixed(1)}" text-anchor="end">${fmt(y)}</text>`);
  }
  for (let i = 0; i <= 4; i++) {
    const x = x0 + ((x1 - x0) * i) / 4;
    parts.push(`<text x="${sx(x).toFixed(1)}" y="${pad.t + H + 14}" text-anchor="middle">${fmt(Math.round(x * 10) / 10)}</text>`);
  }
  parts.push(`<text x="${pad.l + W / 2}" y="${height - 4}" text-anchor="middle">step</text></g>`);
  parts.push(`<rect x="${pad.l}" y="${pad.t}" width="${W}" height="${H}" fill="none" stroke="#999"/>`);
  series.forEach((s, i) => {
    if (s.pts.length === 0) return;
    const c = COLORS[i % COLORS.length];
    const d = s.pts.map((p, j) => `${j === 0 ? 'M' : 'L'}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(' ');
    parts.push(`<path d="${d}" fill="none" stroke="${c}" stroke-width="1.8"/>`);
    for (const p of s.pts) parts.push(`<circle cx="${sx(p[0]).toFixed(1)}" cy="${sy(p[1]).toFixed(1)}" r="2.2" fill="${c}"><title>${esc(s.key)} @ ${p[0]}: ${fmt(p[1])}</title></circle>`);
    parts.push(`<text x="${pad.l + 6}" y="${pad.t + 12 + 12 * i}" font-size="10" font-family="sans-serif" fill="${c}">${esc(s.key)}</text>`);
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
    { title: 'SFT loss', keys: ['sft/loss'] },
    { title: 'seconds per step', keys: ['timing_s/step', 'timing_s/gen', 'timing_s/update_actor'] },
  ];
}

/** The whole report page. */
export function renderReport(rows: readonly MetricsRow[], options: { title: string; source: string; config?: unknown; summary?: Record<string, string | number> }): string {
  const charts = defaultCharts(options.source).map((c) => lineChartSvg(rows, c));
  const summary = Object.entries(options.summary ?? {})
    .map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(String(v))}</td></tr>`)
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(options.title)}</title>
<style>body{font-family:sans-serif;margin:20px;color:#222}.grid{display:flex;flex-wrap:wrap;gap:12px}th{text-align:left;padding-right:12px}pre{background:#f6f6f6;padding:8px;font-size:11px;max-height:300px;overflow:auto}</style>
</head><body>
<h1>${esc(options.title)}</h1>
<table>${summary}</table>
<div class="grid">${charts.join('\n')}</div>
<h2>Configuration</h2><pre>${esc(JSON.stringify(options.config ?? {}, null, 2))}</pre>
</body></html>
`;
}
