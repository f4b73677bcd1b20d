// MXFP4 dequantization against hand-built blocks whose values are known: E2M1 codes decoded from
// their definition (1 sign bit, 2 exponent bits with bias 1, 1 mantissa bit), times 2^(scale - 127);
// the low nibble is the even element.
import t from 'tap';

import { FP4_VALUES, decodeMxfp4Rows, mxfp4Value } from '../../../lib/model/hf/mxfp4.js';
import { bf16ToNumber } from '../../../lib/model/hf/numeric.js';
import { rng } from '../fixtures/reference.js';

/** E2M1 from the bit layout. */
function e2m1(code: number): number {
  const sign = code & 8 ? -1 : 1;
  const e = (code >> 1) & 3;
  const m = code & 1;
  return sign * (e === 0 ? m * 0.5 : (1 + m / 2) * 2 ** (e - 1));
}

t.test('the FP4 table is E2M1', async (t) => {
  for (let c = 0; c < 16; c++)
    t.ok(Object.is(FP4_VALUES[c], e2m1(c)) || (c === 8 && Object.is(FP4_VALUES[c], -0)), `code ${c}`);
});

t.test('values: code × 2^(scale − 127) in bfloat16, edges as transformers (float32 power, bf16 result)', async (t) => {
  t.equal(bf16ToNumber(mxfp4Value(2, 127)), 1);
  t.equal(bf16ToNumber(mxfp4Value(7, 128)), 12);
  t.equal(bf16ToNumber(mxfp4Value(15, 120)), -6 / 128);
  t.equal(bf16ToNumber(mxfp4Value(1, 0)), 2 ** -128, 'a float32-subnormal power of two, exact in bf16');
  t.equal(bf16ToNumber(mxfp4Value(3, 0)), 1.5 * 2 ** -127);
  t.equal(mxfp4Value(8, 127), 0x8000, '-0 keeps its sign');
  t.equal(bf16ToNumber(mxfp4Value(3, 254)), 1.5 * 2 ** 127, 'largest finite');
  t.equal(bf16ToNumber(mxfp4Value(4, 254)), Infinity, '2 × 2^127 overflows float32');
  t.equal(bf16ToNumber(mxfp4Value(15, 255)), -Infinity, 'scale 255: 2^128 is infinite in float32');
  t.equal(mxfp4Value(0, 255), 0x7fc0, '0 × infinity is NaN (0x7FC0 as c10 writes it)');
});

t.test('decoding hand-built rows: nibble order, scale per 32 elements, row targets', async (t) => {
  // Two rows of 64 columns: 2 blocks per row, 16 bytes per block.
  const rows = 2;
  const cols = 64;
  const blocks = new Uint8Array(rows * (cols / 32) * 16);
  const scales = new Uint8Array([127, 129, 126, 127]);
  const r = rng(3);
  for (let i = 0; i < blocks.length; i++) blocks[i] = Math.floor(r() * 256);
  blocks[0] = 0x72; // element 0: code 2 (1.0), element 1: code 7 (6.0)
  const out = new Uint16Array(rows * cols);
  decodeMxfp4Rows(blocks, scales, rows, cols, out);
  const expect = (row: number, col: number): number => {
    const byte = blocks[row * 32 + (col >> 1)];
    const code = col & 1 ? byte >> 4 : byte & 15;
    return e2m1(code) * 2 ** (scales[row * 2 + (col >> 5)] - 127);
  };
  t.equal(bf16ToNumber(out[0]), 1);
  t.equal(bf16ToNumber(out[1]), 6);
  let bad = 0;
  for (let row = 0; row < rows; row++)
    for (let col = 0; col < cols; col++) if (!Object.is(bf16ToNumber(out[row * cols + col]), expect(row, col))) bad++;
  t.equal(bad, 0, 'every element equals code × 2^(scale − 127)');

  const swapped = new Uint16Array(rows * cols);
  decodeMxfp4Rows(blocks, scales, rows, cols, swapped, (row) => rows - 1 - row);
  t.same(Array.from(swapped.subarray(0, cols)), Array.from(out.subarray(cols)), 'rowTarget places rows');
  t.throws(() => decodeMxfp4Rows(blocks, scales, rows, 48, out), RangeError);
  t.throws(() => decodeMxfp4Rows(blocks.subarray(1), scales, rows, cols, out), RangeError);
  t.throws(() => decodeMxfp4Rows(blocks, scales.subarray(1), rows, cols, out), RangeError);
  t.throws(() => decodeMxfp4Rows(blocks, scales, rows, cols, out, () => 5), RangeError);
  t.throws(() => decodeMxfp4Rows(blocks, scales, rows, cols, new Uint16Array(out.buffer, 2, 128)), RangeError);
});

t.test('speed on one gpt-oss-20b expert (gate_up: 5760 rows × 2880 columns)', async (t) => {
  const rows = 5760;
  const cols = 2880;
  const blocks = new Uint8Array((rows * cols) / 2);
  const scales = new Uint8Array((rows * cols) / 32);
  const r = rng(9);
  for (let i = 0; i < blocks.length; i++) blocks[i] = (r() * 256) | 0;
  for (let i = 0; i < scales.length; i++) scales[i] = 115 + ((r() * 10) | 0);
  const out = new Uint16Array(rows * cols);
  decodeMxfp4Rows(blocks.subarray(0, (8 * cols) / 2), scales.subarray(0, (8 * cols) / 32), 8, cols, out); // build the table
  const t0 = process.hrtime.bigint();
  decodeMxfp4Rows(blocks, scales, rows, cols, out);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  t.comment(
    `MXFP4 → bf16: ${((rows * cols) / 1e6).toFixed(1)}M values in ${ms.toFixed(1)} ms (${((rows * cols) / ms / 1e3).toFixed(0)} M values/s)`,
  );
  const i = 12345 * 2 + 1;
  t.equal(bf16ToNumber(out[i]), e2m1(blocks[i >> 1] >> 4) * 2 ** (scales[i >> 5] - 127));
});
