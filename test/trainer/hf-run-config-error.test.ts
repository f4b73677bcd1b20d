// A broken config.json in a run's base folder is reported once as such: `model.source hf:<dir>:
// config.json: <field>: …` (the loader's error already names the file; issue 24 saw the prefix
// doubled).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { currentRunBase, loadRunModel } from '../../lib/trainer/hf-run.js';
import { resolveConfig } from '../../lib/trainer/index.js';
import { writeTinyCheckpoint } from '../model/hf/fixtures/tiny-checkpoint.js';

t.test('a bad field of config.json: named once, after the model source', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hf-run-cfg-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeTinyCheckpoint(dir, { family: 'qwen3' });
  const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...cfg, num_attention_heads: 0 }));
  const config = resolveConfig({
    preset: 'smoke',
    patches: [
      {
        model: { source: `hf:${dir}`, context: 512, lora: { rank: 2, alpha: 4, targets: 'all-linear', rslora: false } },
        rollout: { maxContextTokens: 512 },
        sft: { tokensPerStep: 512 },
        grpo: { microBatchTokens: 512 },
      },
    ],
  });
  const base = await currentRunBase(config);
  const err = await loadRunModel(config, base, { checkpoint: null, training: false }).then(
    () => null,
    (e: Error) => e,
  );
  t.ok(err, 'refused');
  t.match(
    err?.message,
    new RegExp(`^model\\.source hf:${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: config\\.json: num_attention_heads`),
  );
  t.notMatch(err?.message, /config\.json: config\.json:/, 'the file named once');
});
