/**
 * SVG chart of the attention benchmark: peak tracked memory of eager and fused
 * forward+backward against sequence length (log scale), one line per implementation and mask
 * (drawn by the shared {@link memoryChart}).
 */
import type { MemoryRow } from './attention.js';
import { memoryChart } from './common/chart.js';

/** Renders the memory rows as a standalone SVG document (out-of-memory points drawn as crosses at the limit). */
export function memoryChartSvg(rows: MemoryRow[], title: string, limitBytes: number): string {
  return memoryChart(
    rows.map((r) => ({ series: `${r.impl}/${r.mask}`, seqLen: r.seqLen, bytes: r.peakBytes })),
    title,
    limitBytes,
  );
}
