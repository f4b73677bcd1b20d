/**
 * MXFP4 (the OCP microscaling FP4 format gpt-oss stores its expert weights in) dequantized to
 * bfloat16 exactly as Hugging Face transformers does it (`integrations/mxfp4.py`,
 * `convert_moe_packed_tensors`):
 * - a tensor `W` of logical shape [..., R, C] is stored as `*_blocks` u8 [..., R, C/32, 16] and
 *   `*_scales` u8 [..., R, C/32]: 32 consecutive columns share one scale byte;
 * - each block byte holds two FP4 (E2M1) codes: the LOW nibble is the even column, the HIGH nibble
 *   the odd column (byte j of a block: columns 2j, 2j+1);
 * - a code indexes the table +0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6;
 * - the value is code × 2^(scale − 127), computed as transformers does: the bf16 table value times
 *   the float32 power of two (`torch.ldexp`), rounded to bfloat16 (results that exceed the float32
 *   range become ±infinity, 0 × 2^128 is NaN);
 * - transformers then transposes the last two axes of the [..., R, C] result to get its
 *   parameter layout ([E, D, 2F] gate_up_proj, [E, F, D] down_proj). Our layouts ([E, 2F, D],
 *   [E, D, F]) are the untransposed [..., R, C] one, so the loader decodes rows straight into place
 *   (de-interleaving gate/up rows on the way) and never transposes.
 * Decoding uses one 65536-entry table: (scale, byte) → the two bf16 values, written as one u32.
 * @module
 */
import { endianness } from 'node:os';

import { bf16FromNumber } from './numeric.js';

/** The FP4 (E2M1) code table, index = 4-bit code. */
export const FP4_VALUES: readonly number[] = Object.freeze([
  0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6,
]);

/** Elements per scale (one block). */
export const MXFP4_BLOCK = 32;

const LITTLE_ENDIAN = endianness() === 'LE';
let pairTable: Uint32Array | null = null;

/** The bfloat16 bits of code × 2^(scale − 127), as transformers computes it. */
export function mxfp4Value(code: number, scale: number): number {
  const power = Math.fround(2 ** (scale - 127)); // float32 2^e: subnormal below 2^-126, infinity at 2^128
  return bf16FromNumber(FP4_VALUES[code & 15] * power); // the product is exact in double; rounds once
}

/** (scale << 8 | byte) → bf16(low nibble) in the first element, bf16(high nibble) in the second. */
function table(): Uint32Array {
  if (pairTable === null) {
    const t = new Uint32Array(65536);
    for (let s = 0; s < 256; s++) {
      const v = FP4_VALUES.map((_, code) => mxfp4Value(code, s));
      for (let b = 0; b < 256; b++) {
        const lo = v[b & 15];
        const hi = v[b >>> 4];
        t[(s << 8) | b] = LITTLE_ENDIAN ? (lo | (hi << 16)) >>> 0 : (hi | (lo << 16)) >>> 0;
      }
    }
    pairTable = t;
  }
  return pairTable;
}

/**
 * Decodes `rows` rows of `cols` columns (cols a multiple of 32): `blocks` holds rows × cols/2 bytes
 * ([rows, cols/32, 16]), `scales` rows × cols/32 bytes. Row `r` is written to
 * `out[rowTarget(r) * cols ...]` (default: row r), as bfloat16 bits.
 */
export function decodeMxfp4Rows(
  blocks: Uint8Array,
  scales: Uint8Array,
  rows: number,
  cols: number,
  out: Uint16Array,
  rowTarget: (row: number) => number = (r) => r,
): void {
  if (cols % MXFP4_BLOCK !== 0)
    throw new RangeError(`MXFP4 rows must have a multiple of ${MXFP4_BLOCK} columns, got ${cols}`);
  const groups = cols / MXFP4_BLOCK;
  if (blocks.length !== rows * groups * 16)
    throw new RangeError(`MXFP4 blocks hold ${blocks.length} bytes, expected ${rows * groups * 16}`);
  if (scales.length !== rows * groups)
    throw new RangeError(`MXFP4 scales hold ${scales.length} bytes, expected ${rows * groups}`);
  if (out.byteOffset % 4 !== 0) throw new RangeError('MXFP4 output must be 4-byte aligned');
  const t = table();
  const out32 = new Uint32Array(out.buffer, out.byteOffset, out.length >>> 1);
  const halfCols = cols >>> 1;
  for (let r = 0; r < rows; r++) {
    const target = rowTarget(r);
    if (!(target >= 0 && (target + 1) * cols <= out.length))
      throw new RangeError(`MXFP4 row ${r} maps outside the output`);
    let o = target * halfCols;
    let b = r * groups * 16;
    for (let g = r * groups, gEnd = g + groups; g < gEnd; g++) {
      const base = scales[g] << 8;
      for (let j = 0; j < 16; j++) out32[o++] = t[base | blocks[b++]];
    }
  }
}
