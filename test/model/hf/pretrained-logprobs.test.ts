// Issue 17: logProbs of tiny random Hugging Face checkpoints (gpt-oss with MoE, sinks, windows,
// YaRN and MXFP4 or bf16 experts; Qwen3 tied and untied; Qwen2; Llama), written in F32, BF16 and
// F16, through the public API, against the float64 reference of test/model/hf/fixtures:
// - dtype 'float32': max |Δ| / max(1, |ref|) ≤ 1e-4;
// - dtype 'bfloat16': no further from the reference than transformers' own bf16 forward
//   (emulated op by op, fixtures/reference-forward.ts), per checkpoint as bf16Verdict states it.
// Sequences: odd lengths, several of different lengths in one call, longer than every window.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { loadPretrained } from '../../../lib/model/index.js';
import {
  FILE_DTYPES,
  LOGPROB_CASES,
  bf16Verdict,
  logProbSequences,
  maxRelativeError,
} from './fixtures/logprob-cases.js';
import { loadReferenceModel, referenceLogProbs } from './fixtures/reference-forward.js';
import { type TinySpec, writeTinyCheckpoint } from './fixtures/tiny-checkpoint.js';

type LoadPretrained = typeof loadPretrained;

const FLOAT32_BOUND = 1e-4;

function checkpoint(t: Test, spec: TinySpec): string {
  const dir = mkdtempSync(join(tmpdir(), 'hf-logprobs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeTinyCheckpoint(dir, spec);
  return dir;
}

async function logProbsOf(
  load: LoadPretrained,
  dir: string,
  dtype: 'float32' | 'bfloat16',
  ids: number[][],
  temperature: number,
): Promise<Float32Array[]> {
  const m = await load(dir, { device: 'cpu', dtype });
  try {
    return await m.logProbs(ids, { temperature });
  } finally {
    m.dispose();
  }
}

function checkShape(t: Test, got: Float32Array[], ids: number[][]): void {
  t.equal(got.length, ids.length, 'one result per sequence');
  got.forEach((g, i) => {
    t.ok(g instanceof Float32Array, `sequence ${i}: a Float32Array`);
    t.equal(g.length, Math.max(0, ids[i].length - 1), `sequence ${i}: log p(ids[t] | ids[<t]) for t ≥ 1`);
  });
}

function defineTests(load: LoadPretrained): void {
  for (const c of LOGPROB_CASES) {
    for (const dtype of FILE_DTYPES) {
      t.test(`${c.name}, ${dtype} file`, async (t) => {
        const dir = checkpoint(t, { ...c.spec, dtype });
        const model = loadReferenceModel(dir);
        const ids = logProbSequences(model.config.vocab);
        const ref = referenceLogProbs(model, ids, 1);

        const f32 = await logProbsOf(load, dir, 'float32', ids, 1);
        checkShape(t, f32, ids);
        const err = maxRelativeError(f32, ref);
        t.ok(
          err <= FLOAT32_BOUND,
          `float32: max |Δ| / max(1, |ref|) = ${err.toExponential(3)} (bound ${FLOAT32_BOUND})`,
        );

        const emulated = referenceLogProbs(model, ids, 1, { precision: 'transformers-bf16' });
        const bf16 = await logProbsOf(load, dir, 'bfloat16', ids, 1);
        checkShape(t, bf16, ids);
        const v = bf16Verdict(bf16, emulated, ref, dtype);
        t.ok(v.ok, `bfloat16: ${v.message}`);
      });
    }
  }

  t.test('temperature divides the logits before log_softmax', async (t) => {
    for (const [c, dtype] of [
      [LOGPROB_CASES[0], 'BF16'],
      [LOGPROB_CASES[2], 'F32'],
    ] as const) {
      const dir = checkpoint(t, { ...c.spec, dtype });
      const model = loadReferenceModel(dir);
      const ids = logProbSequences(model.config.vocab, 21);
      for (const temperature of [0.7, 1.6]) {
        const got = await logProbsOf(load, dir, 'float32', ids, temperature);
        const err = maxRelativeError(got, referenceLogProbs(model, ids, temperature));
        t.ok(err <= FLOAT32_BOUND, `${c.name}, temperature ${temperature}: ${err.toExponential(3)}`);
      }
    }
  });

  t.test('one-token sequences, batch order, and each row independent of the others', async (t) => {
    const dir = checkpoint(t, { ...LOGPROB_CASES[0].spec, dtype: 'BF16' });
    const model = loadReferenceModel(dir);
    const [a, , long] = logProbSequences(model.config.vocab, 33);
    const ids = [[5], long, [7, 9], a, [250]];
    const got = await logProbsOf(load, dir, 'float32', ids, 1);
    checkShape(t, got, ids);
    t.equal(got[0].length, 0, 'a one-token sequence has nothing to predict');
    const err = maxRelativeError(got, referenceLogProbs(model, ids, 1));
    t.ok(err <= FLOAT32_BOUND, `mixed batch: ${err.toExponential(3)}`);
    const alone = await logProbsOf(load, dir, 'float32', [long], 1);
    t.ok(maxRelativeError([got[1]], alone) <= 1e-5, 'the long row alone gives the same log-probs');
  });
}

defineTests(loadPretrained);
