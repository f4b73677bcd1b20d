// RoPE scaling: the native table's inverse frequencies and attention factor against float64
// values computed here from the definitions in transformers' modeling_rope_utils (yarn with and
// without truncation, explicit attention factor and mscale ratio, llama3 bands, linear), for
// gpt-oss's real rope config and a Llama 3.1 config; RoPE forward/backward with the scaled table
// against a float64 rotation (the attention factor scales cos and sin).
import t from 'tap';

import { type RopeScaling, ropeBackward, ropeForward, ropeParameters } from '../../lib/model/index.js';
import { closeness, dot, numericGrad, pick, randint, randn, sampleIndices } from './fixtures/reference.js';
import { refRope } from './fixtures/rope-reference.js';

const GPT_OSS: RopeScaling = {
  type: 'yarn',
  factor: 32,
  originalContext: 4096,
  betaFast: 32,
  betaSlow: 1,
  truncate: false,
  attentionFactor: null,
};
const LLAMA31: RopeScaling = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 8192 };

t.test('inverse frequencies and attention factor equal the float64 definitions', async (t) => {
  const cases: [string, number, number, RopeScaling | null][] = [
    ['plain', 64, 10000, null],
    ['gpt-oss yarn (theta 150000, factor 32, no truncation)', 64, 150000, GPT_OSS],
    ['yarn, truncated (transformers default)', 64, 150000, { ...GPT_OSS, truncate: true }],
    [
      'yarn, odd correction range',
      22,
      5000,
      {
        type: 'yarn',
        factor: 4,
        originalContext: 300,
        betaFast: 16,
        betaSlow: 2,
        truncate: true,
        attentionFactor: null,
      },
    ],
    ['yarn, explicit attention factor', 64, 150000, { ...GPT_OSS, attentionFactor: 1.25 }],
    ['yarn, mscale ratio', 64, 10000, { ...GPT_OSS, mscale: 1.5, mscaleAllDim: 0.7 }],
    ['yarn, mscale without mscaleAllDim (ignored)', 64, 10000, { ...GPT_OSS, mscale: 1.5 }],
    ['yarn, factor <= 1', 32, 10000, { ...GPT_OSS, factor: 0.5 }],
    ['llama 3.1 (theta 500000, factor 8)', 128, 500000, LLAMA31],
    ['linear', 48, 10000, { type: 'linear', factor: 4 }],
  ];
  for (const [label, headDim, theta, scaling] of cases) {
    const got = ropeParameters(headDim, theta, scaling);
    const ref = refRope(headDim, theta, scaling);
    t.equal(got.inverseFrequencies.length, headDim / 2, `${label}: one per pair`);
    t.ok(closeness(got.inverseFrequencies, ref.inv, 1e-13, 0) <= 1, `${label}: inverse frequencies`);
    t.ok(
      Math.abs(got.attentionFactor - ref.factor) <= 1e-15 * ref.factor,
      `${label}: attention factor ${got.attentionFactor}`,
    );
  }
  // landmarks of the two real configs
  const oss = ropeParameters(64, 150000, GPT_OSS);
  t.ok(Math.abs(oss.attentionFactor - (0.1 * Math.log(32) + 1)) < 1e-15, 'gpt-oss: 0.1 ln 32 + 1');
  t.equal(oss.inverseFrequencies[0], 1, 'gpt-oss: the fastest pair keeps its frequency');
  t.ok(
    Math.abs(oss.inverseFrequencies[31] - 1 / (32 * 150000 ** (62 / 64))) < 1e-18,
    'gpt-oss: the slowest pair is interpolated by 32',
  );
  const truncated = ropeParameters(64, 150000, { ...GPT_OSS, truncate: true });
  t.ok(
    oss.inverseFrequencies.some((f, i) => f !== truncated.inverseFrequencies[i]),
    'truncate changes the ramp',
  );
  const llama = ropeParameters(128, 500000, LLAMA31);
  t.equal(llama.attentionFactor, 1);
  t.equal(llama.inverseFrequencies[0], 1, 'llama: high frequencies unchanged');
  t.ok(
    Math.abs(llama.inverseFrequencies[63] - 500000 ** (-126 / 128) / 8) < 1e-20,
    'llama: low frequencies divided by the factor',
  );
});

t.test('RoPE with a scaled table: forward against float64, backward against finite differences', async (t) => {
  for (const [label, theta, scaling] of [
    ['gpt-oss yarn', 150000, GPT_OSS],
    ['llama3', 500000, LLAMA31],
    ['linear', 10000, { type: 'linear', factor: 2.5 }],
  ] as const) {
    const [T, H, Dh] = [13, 3, 20];
    const x = randn(T * H * Dh, 1);
    const pos = randint(T, 2, 0, 9000);
    const { inv, factor } = refRope(Dh, theta, scaling);
    const ref = (v: ArrayLike<number>): Float64Array => {
      const out = new Float64Array(T * H * Dh);
      for (let r = 0; r < T; r++) {
        for (let h = 0; h < H; h++) {
          const b = (r * H + h) * Dh;
          for (let i = 0; i < Dh / 2; i++) {
            const a = pos[r] * inv[i];
            const [c, s] = [Math.cos(a) * factor, Math.sin(a) * factor];
            out[b + i] = v[b + i] * c - v[b + Dh / 2 + i] * s;
            out[b + Dh / 2 + i] = v[b + Dh / 2 + i] * c + v[b + i] * s;
          }
        }
      }
      return out;
    };
    const y = ropeForward({ x, positions: pos, rows: T, heads: H, headDim: Dh, theta, scaling });
    t.ok(closeness(y, ref(x), 1e-5, 1e-6) <= 1, `${label}: forward`);
    const w = randn(T * H * Dh, 3);
    const idx = sampleIndices(x.length, 20, 4);
    const dx = ropeBackward({ dy: w, positions: pos, rows: T, heads: H, headDim: Dh, theta, scaling });
    t.ok(
      closeness(
        pick(dx, idx),
        numericGrad((v) => dot(w, ref(v)), x, idx),
        1e-5,
        1e-6,
      ) <= 1,
      `${label}: backward`,
    );
  }
  t.throws(
    () =>
      ropeForward({
        x: new Float32Array(4),
        positions: new Int32Array(1),
        rows: 1,
        heads: 1,
        headDim: 4,
        scaling: { type: 'yarn', factor: 2, originalContext: 0 } as RopeScaling,
      }),
    {
      name: 'RangeError',
      message: /scaling\.originalContext must be in \[1/,
    },
  );
});
