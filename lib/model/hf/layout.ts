/**
 * Layout changes between Hugging Face tensors and ours, on float32 values or bfloat16 bits alike:
 * batched transposes with row/column permutations (gpt-oss experts), and the gate/up
 * interleave permutation.
 * @module
 */

/** Element arrays the layouts move: float32 values or 16-bit patterns. */
export type ElementArray = Float32Array | Uint16Array;

const TILE = 64;

/**
 * For each of `batch` matrices `src[b]` of `rows` × `cols`, writes its transpose into `dst[b]`
 * (`cols` × `rows`): `dst[b][colMap[c]][rowMap[r]] = src[b][r][c]` (a missing map is the identity).
 * Tiled, so both sides are touched in cache-sized blocks.
 */
export function transposeInto<T extends ElementArray>(
  src: T,
  dst: T,
  batch: number,
  rows: number,
  cols: number,
  rowMap?: Int32Array,
  colMap?: Int32Array,
): void {
  const size = rows * cols;
  if (src.length !== batch * size || dst.length !== batch * size)
    throw new RangeError(`transposeInto: ${src.length} / ${dst.length} elements for ${batch} × ${rows} × ${cols}`);
  for (let b = 0; b < batch; b++) {
    const base = b * size;
    for (let r0 = 0; r0 < rows; r0 += TILE) {
      const r1 = Math.min(rows, r0 + TILE);
      for (let c0 = 0; c0 < cols; c0 += TILE) {
        const c1 = Math.min(cols, c0 + TILE);
        for (let r = r0; r < r1; r++) {
          const dr = rowMap === undefined ? r : rowMap[r];
          const s = base + r * cols;
          for (let c = c0; c < c1; c++) dst[base + (colMap === undefined ? c : colMap[c]) * rows + dr] = src[s + c];
        }
      }
    }
  }
}

/**
 * The interleave map of a gate/up axis of 2F entries: interleaved index i (gate = even, up =
 * odd) → blocked index (gate j at j, up j at F + j).
 */
export function deinterleaveMap(twoF: number): Int32Array {
  if (twoF % 2 !== 0) throw new RangeError(`a gate/up axis has an even length, got ${twoF}`);
  const f = twoF / 2;
  const m = new Int32Array(twoF);
  for (let i = 0; i < twoF; i++) m[i] = (i & 1) === 0 ? i >> 1 : f + (i >> 1);
  return m;
}

/** The inverse map: blocked index → interleaved index. */
export function interleaveMap(twoF: number): Int32Array {
  const d = deinterleaveMap(twoF);
  const m = new Int32Array(twoF);
  for (let i = 0; i < twoF; i++) m[d[i]] = i;
  return m;
}

/** For each of `batch` rows of length `n`: `dst[b][map[i]] = src[b][i]`. */
export function permuteRowsInto<T extends ElementArray>(
  src: T,
  dst: T,
  batch: number,
  n: number,
  map: Int32Array,
): void {
  if (src.length !== batch * n || dst.length !== batch * n || map.length !== n)
    throw new RangeError(`permuteRowsInto: ${src.length} / ${dst.length} elements for ${batch} × ${n}`);
  for (let b = 0; b < batch; b++) {
    const base = b * n;
    for (let i = 0; i < n; i++) dst[base + map[i]] = src[base + i];
  }
}
