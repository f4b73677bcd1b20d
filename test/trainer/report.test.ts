import t from 'tap';

import { lineChartSvg, renderReport, samplesJsonl, type MetricsRow } from '../../lib/trainer/index.js';

t.test('line charts: points at the right places, empty charts say so', async (t) => {
  const rows: MetricsRow[] = [
    { step: 0, phase: 'val', a: 0 },
    { step: 10, phase: 'grpo', a: 1 },
    { step: 5, phase: 'grpo', b: 2 },
  ];
  const svg = lineChartSvg(rows, { title: 'A & B', keys: ['a', 'b'] }, 200, 100);
  t.match(svg, /^<svg/);
  t.match(svg, /A &amp; B/);
  // a: x 0..10 → 48..188, y 0..2 → 64..28 (padding left 48, right 12, top 28, bottom 36)
  t.match(svg, /M48\.0,64\.0 L188\.0,46\.0/);
  t.match(svg, /a @ 10: 1/);
  t.match(lineChartSvg([], { title: 'none', keys: ['x'] }), /no data yet/);
  const flat = lineChartSvg([{ step: 1, x: 3 }], { title: 'one', keys: ['x'] });
  t.notMatch(flat, /NaN/);
  const html = renderReport(rows, { title: 'run <1>', source: 'tau-retail', config: { a: 1 }, summary: { steps: 3 } });
  t.match(html, /<!doctype html>/);
  t.match(html, /run &lt;1&gt;/);
  t.ok((html.match(/<svg/g) ?? []).length >= 5, 'reward, validation, KL, entropy and length charts');
});

t.test('samples are JSON lines in OpenAI chat format', async (t) => {
  const rec = { taskId: 't1', uid: 'g0', sampleIndex: 1, seed: 5, reward: 1, termination: 'user_stop', aborted: false, truncated: false, numTurns: 2, messages: [{ role: 'system', content: 's' }] };
  const text = samplesJsonl([rec as never], 3);
  const row = JSON.parse(text.trim()) as Record<string, unknown>;
  t.same(row, { step: 3, task_id: 't1', uid: 'g0', sample_index: 1, seed: 5, reward: 1, termination: 'user_stop', aborted: false, truncated: false, num_turns: 2, messages: [{ role: 'system', content: 's' }] });
  t.equal(samplesJsonl([], 1), '');
});
