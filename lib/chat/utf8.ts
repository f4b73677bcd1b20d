/**
 * Byte encodings of JavaScript strings for the tokenizer. WTF-8 (UTF-8 that also encodes lone
 * surrogates as 3-byte sequences) makes every JavaScript string, even a malformed one, map to
 * bytes and back exactly.
 * @module
 */

/** Encodes a string as WTF-8 (identical to UTF-8 for well-formed strings). */
export function encodeWtf8(text: string): Uint8Array {
  const out = new Uint8Array(text.length * 3);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      }
    }
    if (c < 0x80) {
      out[n++] = c;
    } else if (c < 0x800) {
      out[n++] = 0xc0 | (c >> 6);
      out[n++] = 0x80 | (c & 0x3f);
    } else if (c < 0x10000) {
      out[n++] = 0xe0 | (c >> 12);
      out[n++] = 0x80 | ((c >> 6) & 0x3f);
      out[n++] = 0x80 | (c & 0x3f);
    } else {
      out[n++] = 0xf0 | (c >> 18);
      out[n++] = 0x80 | ((c >> 12) & 0x3f);
      out[n++] = 0x80 | ((c >> 6) & 0x3f);
      out[n++] = 0x80 | (c & 0x3f);
    }
  }
  return out.slice(0, n);
}

/**
 * Length of the well-formed sequence starting at `bytes[i]` (1 to 4), or 0 when the bytes there
 * are not one. With `surrogates`, 3-byte encodings of surrogate code points count as
 * well-formed (WTF-8); without, only strict UTF-8 does.
 */
export function sequenceLength(bytes: Uint8Array, i: number, surrogates: boolean): number {
  const b0 = bytes[i];
  const cont = (k: number, lo = 0x80, hi = 0xbf): boolean =>
    i + k < bytes.length && bytes[i + k] >= lo && bytes[i + k] <= hi;
  if (b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) return cont(1) ? 2 : 0;
  if (b0 === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if (b0 === 0xed) return cont(1, 0x80, surrogates ? 0xbf : 0x9f) && cont(2) ? 3 : 0;
  if (b0 >= 0xe1 && b0 <= 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (b0 === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (b0 >= 0xf1 && b0 <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/**
 * Decodes WTF-8: surrogate code points become lone UTF-16 surrogates, every byte that starts
 * no well-formed sequence becomes U+FFFD. Inverse of {@link encodeWtf8}.
 */
export function decodeWtf8(bytes: Uint8Array): string {
  const units: number[] = [];
  let out = '';
  for (let i = 0; i < bytes.length;) {
    const len = sequenceLength(bytes, i, true);
    let c: number;
    if (len === 0) {
      c = 0xfffd;
      i += 1;
    } else {
      const b0 = bytes[i];
      if (len === 1) c = b0;
      else if (len === 2) c = ((b0 & 0x1f) << 6) | (bytes[i + 1] & 0x3f);
      else if (len === 3) c = ((b0 & 0x0f) << 12) | ((bytes[i + 1] & 0x3f) << 6) | (bytes[i + 2] & 0x3f);
      else
        c = ((b0 & 0x07) << 18) | ((bytes[i + 1] & 0x3f) << 12) | ((bytes[i + 2] & 0x3f) << 6) | (bytes[i + 3] & 0x3f);
      i += len;
    }
    if (c >= 0x10000) {
      c -= 0x10000;
      units.push(0xd800 + (c >> 10), 0xdc00 + (c & 0x3ff));
    } else {
      units.push(c);
    }
    if (units.length >= 8192) {
      out += String.fromCharCode(...units);
      units.length = 0;
    }
  }
  return out + String.fromCharCode(...units);
}
