import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { chartSvg, formatRow, main, runGrpoBench } from '../../bench/grpo.js';

t.test('the GRPO benchmark runs every stage and reports consistent numbers', async (t) => {
  const lines: string[] = [];
  const res = runGrpoBench({ tokens: [4096, 10000], responseLen: 64, repeats: 1, kl: 'k2', log: (l) => lines.push(l) });
  t.equal(res.rows.length, 14);
  t.equal(lines.length, 15);
  t.ok(res.inCacheLossTokensPerSec > 0);
  t.match(lines[14]!, /^# loss on 512K tokens \(12 MB, cache-resident\): \d+ Mtok\/s/);
  t.match(res.kernelIsa, /^(avx512|avx2|generic)$/);
  for (const r of res.rows) {
    t.equal(r.tokens, r.batch * r.responseLen);
    t.ok(r.ms > 0 && r.copyMs > 0 && r.bytes > 0, r.stage);
    t.ok(Math.abs(r.gbPerSec / r.copyGbPerSec - r.ratioToCopy) < 1e-12);
    t.ok(r.bestMs <= r.ms && r.copyBestMs <= r.copyMs);
    t.ok(
      Math.abs(r.bestRatioToCopy - (r.ratioToCopy * r.ms * r.copyBestMs) / (r.bestMs * r.copyMs)) <
        1e-9 * r.bestRatioToCopy,
    );
    t.ok(Math.abs(r.tokensPerSec - (r.tokens / r.ms) * 1e3) < 1e-6 * r.tokensPerSec);
  }
  t.equal(res.rows[7]!.batch, Math.round(10000 / 64));
  t.match(formatRow(res.rows[2]!), /^4096\s+loss \(token advantages\)/);
  const svg = chartSvg(res);
  t.match(svg, /^<svg /);
  t.equal(
    (svg.match(/<rect /g) ?? []).length,
    2 * 6 + 6,
    'one bar per stage and size (advantages left out), one legend box per stage',
  );
});

t.test('the command line writes JSON and the chart', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-bench-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const printed: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void printed.push(a.join(' '));
  try {
    main(['--tokens', '2k', '--len', '32', '--repeats', '1', '--kl', 'none', '--json']);
    main([
      '--tokens',
      '2k',
      '--len',
      '32',
      '--repeats',
      '1',
      '--kl',
      'none',
      '--group',
      '4',
      '--seed',
      '3',
      '--json',
      join(dir, 'r.json'),
      '--svg',
      join(dir, 'c.svg'),
    ]);
  } finally {
    console.log = log;
  }
  const parsed = JSON.parse(printed[0]!) as { rows: unknown[]; options: { kl: string; tokens: number[] } };
  t.equal(parsed.rows.length, 7);
  t.same(parsed.options.tokens, [2048]);
  t.equal(parsed.options.kl, 'none');
  const written = JSON.parse(readFileSync(join(dir, 'r.json'), 'utf8')) as typeof parsed & {
    options: { groupSize: number; seed: number };
  };
  t.same(written.options, { ...parsed.options, groupSize: 4, seed: 3 }, '--json <file>: the JSON written there');
  t.equal(written.rows.length, 7);
  t.match(readFileSync(join(dir, 'c.svg'), 'utf8'), /GRPO kernels vs parallel memcpy/);
  t.match(printed[1]!, /^tokens\s+stage/);
  t.match(printed.at(-1)!, /^# .*cores, load [\d.]+\), kernel threads \d+, ISA/);
  t.throws(() => main(['--tokens', 'lots']), { name: 'RangeError', message: /--tokens: cannot read 'lots'/ });
});
