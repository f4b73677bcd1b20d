/**
 * Element conversions between float32 and the 16-bit formats of checkpoints: bfloat16 (the top
 * half of a float32) and IEEE half (F16). Narrowing rounds to nearest, ties to even, as PyTorch
 * does (`tensor.to(torch.bfloat16)`, `.to(torch.float16)`): overflow gives ±infinity, NaN gives
 * a quiet NaN (bfloat16 0x7FC0 like c10::BFloat16, F16 sign | 0x7E00). Widening is exact.
 * 16-bit values travel as their bit patterns in Uint16Arrays.
 * @module
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The bfloat16 bits of a float32 bit pattern, rounded to nearest even. */
export function bf16FromF32Bits(bits: number): number {
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x007fffff) !== 0) return 0x7fc0;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** The bfloat16 bits of a number, after rounding it to float32 first (as a float32 tensor would hold it). */
export function bf16FromNumber(x: number): number {
  f32[0] = x;
  return bf16FromF32Bits(u32[0]);
}

/** The value of bfloat16 bits. */
export function bf16ToNumber(bits: number): number {
  u32[0] = (bits & 0xffff) << 16;
  return f32[0];
}

/** The F16 bits of a float32 bit pattern, rounded to nearest even (subnormals included). */
export function f16FromF32Bits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | (mant !== 0 ? 0x7e00 : 0x7c00);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    // An F16 subnormal (unit 2^-24) or zero: shift the full significand down, rounding.
    const shift = 14 - e;
    if (shift > 24) return sign;
    const m = mant | 0x800000;
    let half = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (half & 1) === 1)) half += 1;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1)) half += 1; // a carry moves into the exponent (up to infinity)
  return sign | half;
}

/** The value of F16 bits (exact). */
export function f16ToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 31) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

let f16Table: Float32Array | null = null;

/** float32 value of every F16 pattern (256 KiB, built once). */
function f16ToF32Table(): Float32Array {
  if (f16Table === null) {
    f16Table = new Float32Array(65536);
    for (let i = 0; i < 65536; i++) f16Table[i] = f16ToNumber(i);
  }
  return f16Table;
}

/** Widens bfloat16 bits to float32 (exact); into `out` when given. */
export function bf16ToF32(src: Uint16Array, out = new Float32Array(src.length)): Float32Array {
  const o = new Uint32Array(out.buffer, out.byteOffset, out.length);
  for (let i = 0; i < src.length; i++) o[i] = src[i] << 16;
  return out;
}

/** Narrows float32 to bfloat16 bits, rounding to nearest even; into `out` when given. */
export function f32ToBf16(src: Float32Array, out = new Uint16Array(src.length)): Uint16Array {
  const s = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < s.length; i++) {
    const bits = s[i];
    out[i] =
      (bits & 0x7f800000) === 0x7f800000 && (bits & 0x007fffff) !== 0
        ? 0x7fc0
        : ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
  }
  return out;
}

/** Widens F16 bits to float32 (exact); into `out` when given. */
export function f16ToF32(src: Uint16Array, out = new Float32Array(src.length)): Float32Array {
  const table = f16ToF32Table();
  for (let i = 0; i < src.length; i++) out[i] = table[src[i]];
  return out;
}

/** Narrows float32 to F16 bits, rounding to nearest even; into `out` when given. */
export function f32ToF16(src: Float32Array, out = new Uint16Array(src.length)): Uint16Array {
  const s = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < s.length; i++) out[i] = f16FromF32Bits(s[i]);
  return out;
}

/** F16 bits to bfloat16 bits: exact widening to float32, then rounding to nearest even. */
export function f16ToBf16(src: Uint16Array, out = new Uint16Array(src.length)): Uint16Array {
  const table = f16ToF32Table();
  const bits = new Uint32Array(table.buffer);
  for (let i = 0; i < src.length; i++) {
    const b = bits[src[i]];
    out[i] =
      (b & 0x7f800000) === 0x7f800000 && (b & 0x007fffff) !== 0
        ? 0x7fc0
        : ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
  }
  return out;
}

/** bfloat16 bits to F16 bits (rounding to nearest even; large values overflow to infinity). */
export function bf16ToF16(src: Uint16Array, out = new Uint16Array(src.length)): Uint16Array {
  for (let i = 0; i < src.length; i++) out[i] = f16FromF32Bits((src[i] << 16) >>> 0);
  return out;
}
