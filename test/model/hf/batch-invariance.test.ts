// Seeded sampling gives the same tokens whatever shares the batch (docs/models.md): many seeded
// sessions sampling at once (prompts of 3 to 40 tokens, so decoding rows and prefill chunks mix
// in one forward, and the batch crosses the GEMM's small-M and packed sizes as sessions join
// and finish) against the same sessions run one at a time. Tiny random Qwen3 (dense, tied head)
// and gpt-oss (MoE: the experts' row groups change with the batch) with their real tokenizers'
// vocabularies, bfloat16 and float32 weights.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { loadPretrained } from '../../../lib/model/index.js';
import type { GenerativeModel } from '../../../lib/model/policy.js';
import { type TinySpec, writeTinyCheckpoint } from './fixtures/tiny-checkpoint.js';

interface Run {
  tokens: number[];
  logProbs: number[];
}

async function sample(model: GenerativeModel, prompt: number[], seed: number): Promise<Run> {
  const s = model.createSession({ seed });
  try {
    s.append(prompt);
    const r = await s.sample({ maxTokens: 12, temperature: 1, topP: 1, stop: [] });
    return { tokens: Array.from(r.tokens), logProbs: Array.from(r.logProbs) };
  } finally {
    s.dispose();
  }
}

const cases: [string, TinySpec, 'bfloat16' | 'float32'][] = [
  ['qwen3 bf16', { family: 'qwen3', tokenizer: 'qwen3', dtype: 'BF16' }, 'bfloat16'],
  ['qwen3 float32', { family: 'qwen3', tokenizer: 'qwen3', dtype: 'BF16' }, 'float32'],
  ['gpt-oss bf16', { family: 'gpt_oss', tokenizer: 'gptoss', mxfp4: true, layers: 2 }, 'bfloat16'],
];

for (const [name, spec, dtype] of cases) {
  t.test(`${name}: 24 concurrent seeded sessions sample what each samples alone`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'batch-inv-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    writeTinyCheckpoint(dir, spec);
    const m = await loadPretrained(dir, { dtype });
    t.teardown(() => m.dispose());
    const vocab = m.modelConfig.vocab;
    const prompts = Array.from({ length: 24 }, (_, i) =>
      Array.from({ length: 3 + ((i * 7) % 38) }, (_, j) => (i * 7919 + j * 104729) % vocab),
    );
    const together = await Promise.all(prompts.map((p, i) => sample(m.policy, p, 1000 + i)));
    for (const [i, p] of prompts.entries()) {
      const alone = await sample(m.policy, p, 1000 + i);
      t.same(together[i].tokens, alone.tokens, `session ${i} (${p.length} prompt tokens): tokens`);
      t.same(together[i].logProbs, alone.logProbs, `session ${i}: log-probs bit for bit`);
    }
  });
}
