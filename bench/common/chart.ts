/**
 * SVG line chart of peak memory against sequence length (both on log scales is overkill for
 * powers of two: x is evenly spaced by index, y is logarithmic), one line per series, out of
 * memory drawn as a cross on the limit line. Used by the attention and memory benchmarks.
 */

/** One point of a memory chart. */
export interface ChartPoint {
  /** Series name, e.g. `eager/full`; names starting with `eager` are drawn in reds, `fused` in blues. */
  series: string;
  seqLen: number;
  /** Peak bytes, or null when out of memory. */
  bytes: number | null;
}

const PALETTE: Record<string, string[]> = {
  eager: ['#d62728', '#ff9896', '#8c2d04', '#e6550d'],
  fused: ['#1f77b4', '#aec7e8', '#08519c', '#6baed6'],
  other: ['#2ca02c', '#9467bd', '#8c564b', '#7f7f7f'],
};

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function colors(series: readonly string[]): Map<string, string> {
  const used: Record<string, number> = { eager: 0, fused: 0, other: 0 };
  const out = new Map<string, string>();
  for (const name of series) {
    const family = name.startsWith('eager') ? 'eager' : name.startsWith('fused') ? 'fused' : 'other';
    const list = PALETTE[family]!;
    out.set(name, list[used[family]! % list.length]!);
    used[family]!++;
  }
  return out;
}

/** Renders the points as a standalone SVG document with a dashed limit line. */
export function memoryChart(
  points: readonly ChartPoint[],
  title: string,
  limitBytes: number,
  yLabel = 'peak tracked bytes',
): string {
  const width = 680,
    height = 400,
    left = 70,
    right = 190,
    top = 40,
    bottom = 50;
  const seqs = [...new Set(points.map((r) => r.seqLen))].sort((a, b) => a - b);
  const values = points.map((r) => r.bytes ?? limitBytes).filter((v) => v > 0);
  const lo = Math.log10(Math.min(...values, limitBytes) / 2);
  const hi = Math.log10(Math.max(...values, limitBytes) * 2);
  const x = (s: number) =>
    left + (seqs.length === 1 ? 0.5 : seqs.indexOf(s) / (seqs.length - 1)) * (width - left - right);
  const y = (b: number) => top + (1 - (Math.log10(b) - lo) / (hi - lo)) * (height - top - bottom);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="20" text-anchor="middle" font-size="14">${esc(title)}</text>`,
    `<line x1="${left}" y1="${height - bottom}" x2="${width - right}" y2="${height - bottom}" stroke="black"/>`,
    `<line x1="${left}" y1="${top}" x2="${left}" y2="${height - bottom}" stroke="black"/>`,
    `<text x="${(left + width - right) / 2}" y="${height - 12}" text-anchor="middle">sequence length</text>`,
    `<text x="16" y="${(top + height - bottom) / 2}" text-anchor="middle" transform="rotate(-90 16 ${(top + height - bottom) / 2})">${esc(yLabel)}</text>`,
  ];
  for (const s of seqs) parts.push(`<text x="${x(s)}" y="${height - bottom + 16}" text-anchor="middle">${s}</text>`);
  for (let e = Math.ceil(lo); e <= Math.floor(hi); e++) {
    const label = e >= 9 ? `${10 ** (e - 9)} GB` : e >= 6 ? `${10 ** (e - 6)} MB` : `${10 ** (e - 3)} kB`;
    parts.push(`<line x1="${left - 4}" y1="${y(10 ** e)}" x2="${width - right}" y2="${y(10 ** e)}" stroke="#eee"/>`);
    parts.push(`<text x="${left - 6}" y="${y(10 ** e) + 4}" text-anchor="end">${label}</text>`);
  }
  parts.push(
    `<line x1="${left}" y1="${y(limitBytes)}" x2="${width - right}" y2="${y(limitBytes)}" stroke="#999" stroke-dasharray="4 3"/>`,
  );
  parts.push(`<text x="${width - right + 4}" y="${y(limitBytes) + 4}" fill="#666">limit</text>`);
  const series = [...new Set(points.map((r) => r.series))];
  const color = colors(series);
  series.forEach((name, n) => {
    const c = color.get(name)!;
    const pts = points.filter((r) => r.series === name).sort((a, b) => a.seqLen - b.seqLen);
    const ok = pts.filter((p) => p.bytes !== null);
    if (ok.length > 1)
      parts.push(
        `<polyline fill="none" stroke="${c}" stroke-width="2" points="${ok.map((p) => `${x(p.seqLen)},${y(p.bytes!)}`).join(' ')}"/>`,
      );
    for (const p of pts) {
      const px = x(p.seqLen);
      if (p.bytes === null) {
        const py = y(limitBytes);
        parts.push(
          `<path d="M${px - 5},${py - 5}L${px + 5},${py + 5}M${px - 5},${py + 5}L${px + 5},${py - 5}" stroke="${c}" stroke-width="2"/>`,
        );
      } else {
        parts.push(`<circle cx="${px}" cy="${y(p.bytes)}" r="3" fill="${c}"/>`);
      }
    }
    const ly = top + 10 + n * 18;
    parts.push(`<rect x="${width - right + 10}" y="${ly - 8}" width="12" height="4" fill="${c}"/>`);
    parts.push(`<text x="${width - right + 28}" y="${ly - 2}">${esc(name)}</text>`);
  });
  parts.push(
    `<text x="${width - right + 10}" y="${top + 10 + series.length * 18 + 4}" fill="#666">x = out of memory</text>`,
  );
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
