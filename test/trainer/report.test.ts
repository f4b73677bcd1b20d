import t from 'tap';

import type { MetricsRow } from '../../lib/trainer/index.js';
import { defaultCharts, lineChartSvg, niceTicks, renderReport, tickLabel } from '../../lib/trainer/report.js';
import { samplesJsonl } from '../../lib/trainer/trainer.js';

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
  const rec = {
    taskId: 't1',
    uid: 'g0',
    sampleIndex: 1,
    seed: 5,
    reward: 1,
    termination: 'user_stop',
    aborted: false,
    truncated: false,
    numTurns: 2,
    messages: [{ role: 'system', content: 's' }],
  };
  const text = samplesJsonl([rec as never], 3);
  const row = JSON.parse(text.trim()) as Record<string, unknown>;
  t.same(row, {
    step: 3,
    task_id: 't1',
    uid: 'g0',
    sample_index: 1,
    seed: 5,
    reward: 1,
    termination: 'user_stop',
    aborted: false,
    truncated: false,
    num_turns: 2,
    messages: [{ role: 'system', content: 's' }],
  });
  t.equal(samplesJsonl([], 1), '');
});

/** The tick labels of a chart: y labels (text-anchor end) and x labels (middle, on the axis row). */
function tickLabels(svg: string): { y: string[]; x: string[] } {
  const y = [...svg.matchAll(/text-anchor="end">([^<]*)</g)].map((m) => m[1]);
  const x = [...svg.matchAll(/<text x="[\d.]+" y="(\d+)" text-anchor="middle">([^<]*)</g)]
    .filter((m) => m[1] === '218')
    .map((m) => m[2]);
  return { y, x };
}

t.test('SFT rows are drawn against their SFT step, not at step 0', async (t) => {
  const rows: MetricsRow[] = [10, 20, 30, 40].map((k) => ({
    step: 0,
    phase: 'sft',
    'sft/step': k,
    'sft/loss': 5 - k / 10,
  }));
  rows.push({ step: 1, phase: 'grpo', 'critic/score/mean': 0.5 });
  const spec = defaultCharts('tau-retail').find((c) => c.title === 'SFT loss');
  t.ok(spec);
  const svg = lineChartSvg(rows, spec!);
  const xs = [...svg.matchAll(/<circle cx="([\d.]+)"/g)].map((m) => Number(m[1]));
  t.equal(xs.length, 4);
  t.equal(new Set(xs).size, 4, 'four points at four places');
  t.ok(
    xs.every((x, i) => i === 0 || x > xs[i - 1]),
    'in SFT step order',
  );
  t.same(tickLabels(svg).x, ['10', '20', '30', '40']);
  t.match(svg, />SFT step</, 'the axis says what x is');
  t.match(svg, /sft\/loss @ 40: 1/);
});

t.test('axis ticks: distinct y labels for small ranges, whole steps on x', async (t) => {
  // a loss between 6.21 and 6.24: "6.2, 6.2, 6.2" before
  const rows: MetricsRow[] = [1, 2, 3].map((k) => ({ step: k, v: 6.21 + 0.015 * (k - 1) }));
  const { y, x } = tickLabels(lineChartSvg(rows, { title: 'small range', keys: ['v'] }));
  t.ok(y.length >= 3, `${y.length} y ticks`);
  t.equal(new Set(y).size, y.length, `distinct y labels: ${y.join(', ')}`);
  t.same(y, ['6.21', '6.22', '6.23', '6.24']);
  t.same(x, ['1', '2', '3'], 'x ticks on whole steps only (not 1.5, 2.5)');
  const few = tickLabels(
    lineChartSvg(
      [
        { step: 0, v: 1 },
        { step: 3, v: 2 },
      ],
      { title: 'three steps', keys: ['v'] },
    ),
  );
  t.same(few.x, ['0', '1', '2', '3'], 'not 0, 0.8, 1.5, 2.3, 3');
  t.same(tickLabels(lineChartSvg([{ step: 5, v: 1 }], { title: 'one point', keys: ['v'] })).x, ['5', '6']);
  const many = tickLabels(
    lineChartSvg(
      [
        { step: 0, v: 0.001 },
        { step: 70, v: 0.0004 },
      ],
      { title: 'kl', keys: ['v'] },
    ),
  );
  t.same(many.x, ['0', '20', '40', '60']);
  t.equal(new Set(many.y).size, many.y.length, `distinct small labels: ${many.y.join(', ')}`);
  t.notOk(/NaN|Infinity/.test(lineChartSvg([{ step: 1, x: 3 }], { title: 'flat', keys: ['x'] })));
});

t.test('nice ticks and their labels', async (t) => {
  t.same(niceTicks(0, 2), { values: [0, 0.5, 1, 1.5, 2], step: 0.5 });
  t.same(niceTicks(0.3, 9.6).values, [0, 2, 4, 6, 8, 10]);
  t.same(niceTicks(0, 3, 4, true), { values: [0, 1, 2, 3], step: 1 });
  t.same(niceTicks(0, 70, 4, true).step, 20);
  const flat = niceTicks(6.2, 6.2);
  t.ok(flat.values[0] < 6.2 && flat.values[flat.values.length - 1] > 6.2, 'a single value sits inside the range');
  t.equal(tickLabel(6.220000000000001, 0.01), '6.22');
  t.equal(tickLabel(1.5, 0.5), '1.5');
  t.equal(tickLabel(40, 20), '40');
  t.equal(tickLabel(-0.1 + 0.1, 0.05), '0');
  t.equal(tickLabel(1.5e-6, 5e-7), '1.5e-6');
  t.equal(tickLabel(2.5e6, 5e5), '2.5e+6');
  for (const [lo, hi] of [
    [6.21, 6.24],
    [0.00012, 0.00019],
    [1234.5, 1234.9],
    [-3, 8],
    [1e6, 1.3e6],
    [0, 1e-9],
  ]) {
    const ticks = niceTicks(lo, hi);
    const labels = ticks.values.map((v) => tickLabel(v, ticks.step));
    t.equal(new Set(labels).size, labels.length, `${lo}..${hi}: ${labels.join(', ')}`);
    t.ok(ticks.values[0] <= lo && ticks.values[ticks.values.length - 1] >= hi, `${lo}..${hi} covered`);
  }
});
