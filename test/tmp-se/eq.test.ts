import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { serve } from '../../lib/cli/commands/serve.js';
import { resolveConfig, train, type MetricsRow } from '../../lib/trainer/index.js';

const rows = (out: string): MetricsRow[] => readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as MetricsRow);
t.test('eq', async (t) => {
  const tmp = mkdtempSync(join(tmpdir(), 'se-'));
  const smoke = resolveConfig({ preset: 'smoke' });
  const a = join(tmp, 'a');
  await train(smoke, { out: a });
  const s1 = await serve({ checkpoint: join(a, 'reference.safetensors'), port: 0 });
  const s2 = await serve({ checkpoint: join(a, 'reference.safetensors'), port: 0 });
  const b = join(tmp, 'b');
  const cfg = resolveConfig({ preset: 'smoke', patches: [{ rollout: { engine: 'openai', servers: [s1.baseURL, s2.baseURL], sessions: true } }] });
  const t0 = Date.now();
  await train(cfg, { out: b, onEvent: (e) => { if (e.kind === 'warning') console.log(e.message); } });
  console.log('remote wall', (Date.now() - t0) / 1000, s1.routes.completions.stats, s2.routes.completions.stats);
  const ra = rows(a), rb = rows(b);
  let diffs = 0;
  ra.forEach((r, i) => {
    for (const [k, v] of Object.entries(r)) {
      if (k.startsWith('timing_s/')) continue;
      if (rb[i][k] !== v) { diffs++; console.log(r.phase, r.step, k, v, rb[i][k]); }
    }
  });
  console.log('diffs', diffs, rb.filter((r) => r.phase === 'grpo').map((r) => [r['rollout/remote_requests'], r['rollout/remote_failures'], r['rollout/servers_up'], r['rollout/logprob_abs_diff']]));
  await s1.dispose(); await s2.dispose();
  t.pass();
});
