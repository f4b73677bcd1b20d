/**
 * Token-budget micro-batches without padding (VERL's `use_remove_padding` +
 * `use_dynamic_bsz`): the real tokens of several rows are packed into one sequence, with
 * document ids (for the attention kernel's document mask) and positions restarting at 0 in
 * each document (RoPE), and the rows are grouped into the fewest balanced micro-batches that
 * fit the budget. Per-token columns travel along; results computed on the packed tokens (log-
 * probs, entropies) are scattered back to the padded layout with {@link unpackColumn}.
 *
 * Column alignment: in the padded batch, `input_ids` is `[B, L]` with `L = P + R`
 * (left-padded prompt ‖ right-padded response). A column of row shape `[k]` (k ≤ L) is
 * aligned to the last k positions: `[L]` columns (attention-sized) cover every token, `[R]`
 * columns (`response_mask`, `rollout_log_probs`, advantages) cover the response; scalar
 * columns (row shape `[]`) are broadcast over the row's tokens. Packed values are token-
 * aligned (the value at packed index t belongs to packed token t); positions outside a
 * column's span (the prompt, for response columns) get 0.
 * @module
 */
import { DataProto, DataProtoError, type TensorData } from './data-proto.js';
import { partitionByBudget, type PartitionMethod } from './partition.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

const PACK_KEYS = optionKeys<PackOptions>({
  maxTokens: true,
  columns: true,
  method: true,
  inputIdsKey: true,
  attentionMaskKey: true,
});

/** Options of {@link packMicroBatches}. */
export interface PackOptions {
  /** Token budget of one micro-batch (every row must fit). */
  maxTokens: number;
  /** Tensor columns to carry along (see the module description for alignment). Default none. */
  columns?: readonly string[];
  /** How rows are grouped: balanced (`karmarkar-karp`, default; `greedy`) or in order (`sequential`: first fit). */
  method?: PartitionMethod | 'sequential';
  /** The token column. Default `input_ids`. */
  inputIdsKey?: string;
  /** The mask of real tokens. Default `attention_mask`. */
  attentionMaskKey?: string;
}

/** One packed micro-batch. */
export interface PackedMicroBatch {
  /** The batch row of each document, in packing order. */
  rows: Int32Array;
  /** Document boundaries (`cu_seqlens`): document d is tokens `[cuSeqlens[d], cuSeqlens[d + 1])`. */
  cuSeqlens: Int32Array;
  /** The packed tokens. */
  inputIds: Int32Array;
  /** Position of each token within its document (0, 1, …). */
  positionIds: Int32Array;
  /** Document index (0 … rows.length - 1) of each token. */
  documentIds: Int32Array;
  /** The carried columns, token-aligned. */
  columns: Record<string, TensorData>;
  /** Number of tokens (`inputIds.length`). */
  numTokens: number;
}

interface Span {
  start: number;
  length: number;
}

function realSpans(batch: DataProto, maskKey: string, L: number): Span[] {
  const mask = batch.get(maskKey);
  const spans: Span[] = [];
  for (let b = 0; b < batch.batchSize; b++) {
    let start = -1;
    let end = -1;
    for (let j = 0; j < L; j++) {
      if (mask[b * L + j] === 0) continue;
      if (mask[b * L + j] !== 1) throw new DataProtoError(`${maskKey}[${b}, ${j}] is ${mask[b * L + j]}, not 0 or 1`);
      if (start < 0) start = j;
      else if (end !== j)
        throw new DataProtoError(
          `row ${b} of ${maskKey} is not one contiguous run of 1s (packing needs left/right padding only)`,
        );
      end = j + 1;
    }
    spans.push(start < 0 ? { start: 0, length: 0 } : { start, length: end - start });
  }
  return spans;
}

function columnWidth(batch: DataProto, name: string, L: number): number {
  const shape = batch.tensor(name).shape;
  if (shape.length === 0) return 0;
  if (shape.length !== 1 || shape[0] > L)
    throw new DataProtoError(
      `column '${name}' has row shape [${shape.join(', ')}]: packing needs [] or [k] with k <= ${L}`,
    );
  return shape[0];
}

function sequentialGroups(lengths: readonly number[], maxTokens: number): number[][] {
  const groups: number[][] = [];
  let cur: number[] = [];
  let used = 0;
  lengths.forEach((l, i) => {
    if (l > maxTokens)
      throw new RangeError(`sequence ${i} has ${l} tokens, more than the micro-batch budget of ${maxTokens} tokens`);
    if (used + l > maxTokens && cur.length > 0) {
      groups.push(cur);
      cur = [];
      used = 0;
    }
    cur.push(i);
    used += l;
  });
  if (cur.length > 0) groups.push(cur);
  return groups;
}

/**
 * Groups the rows of a padded batch into micro-batches of at most `maxTokens` real tokens and
 * packs each (see the module description). Rows without real tokens are left out.
 */
export function packMicroBatches(batch: DataProto, options: PackOptions): PackedMicroBatch[] {
  refuseUnknownOptions(options, PACK_KEYS, 'packMicroBatches');
  const idsKey = options.inputIdsKey ?? 'input_ids';
  const maskKey = options.attentionMaskKey ?? 'attention_mask';
  const ids = batch.get(idsKey);
  const shape = batch.tensor(idsKey).shape;
  if (shape.length !== 1) throw new DataProtoError(`'${idsKey}' must have row shape [L], got [${shape.join(', ')}]`);
  const L = shape[0];
  if (batch.tensor(maskKey).shape.length !== 1 || batch.tensor(maskKey).shape[0] !== L)
    throw new DataProtoError(`'${maskKey}' must have row shape [${L}] like '${idsKey}'`);
  const spans = realSpans(batch, maskKey, L);
  const columns = options.columns ?? [];
  const widths = columns.map((c) => columnWidth(batch, c, L));
  const nonEmpty = spans.map((s, i) => (s.length > 0 ? i : -1)).filter((i) => i >= 0);
  const lengths = nonEmpty.map((i) => spans[i].length);
  const method = options.method ?? 'karmarkar-karp';
  if (!Number.isInteger(options.maxTokens) || options.maxTokens < 1)
    throw new RangeError(`maxTokens must be a positive integer, got ${String(options.maxTokens)}`);
  const groups =
    method === 'sequential'
      ? sequentialGroups(lengths, options.maxTokens)
      : partitionByBudget(lengths, options.maxTokens, method);
  return groups.map((g) => {
    const rows = Int32Array.from(g.map((k) => nonEmpty[k]));
    const T = g.reduce((s, k) => s + lengths[k], 0);
    const cu = new Int32Array(rows.length + 1);
    const inputIds = new Int32Array(T);
    const positionIds = new Int32Array(T);
    const documentIds = new Int32Array(T);
    const packed: Record<string, TensorData> = {};
    columns.forEach((c) => {
      packed[c] = batch.get(c) instanceof Float32Array ? new Float32Array(T) : new Int32Array(T);
    });
    let at = 0;
    rows.forEach((row, d) => {
      const { start, length } = spans[row];
      cu[d] = at;
      inputIds.set(ids.subarray(row * L + start, row * L + start + length), at);
      for (let j = 0; j < length; j++) {
        positionIds[at + j] = j;
        documentIds[at + j] = d;
      }
      columns.forEach((c, ci) => {
        const data = batch.get(c);
        const w = widths[ci];
        const out = packed[c];
        if (w === 0) {
          out.fill(data[row], at, at + length);
          return;
        }
        const offset = L - w; // column index 0 sits at input position L - w
        for (let j = 0; j < length; j++) {
          const pos = start + j - offset;
          if (pos >= 0) out[at + j] = data[row * w + pos];
        }
      });
      at += length;
    });
    cu[rows.length] = at;
    return { rows, cuSeqlens: cu, inputIds, positionIds, documentIds, columns: packed, numTokens: T };
  });
}

/**
 * Scatters token-aligned values computed on packed micro-batches (one array of `numTokens`
 * per micro-batch, in order) back into the padded layout of `batch`: a `Float32Array` of
 * `[B, width]` aligned to the last `width` positions of `input_ids` (`width` = R for response
 * columns, L for full rows; default L). Positions that are padding or outside the span are 0.
 */
export function unpackColumn(
  batch: DataProto,
  micro: readonly PackedMicroBatch[],
  values: readonly ArrayLike<number>[],
  options: { width?: number; inputIdsKey?: string; attentionMaskKey?: string } = {},
): Float32Array {
  const idsKey = options.inputIdsKey ?? 'input_ids';
  const L = batch.tensor(idsKey).shape[0];
  const width = options.width ?? L;
  if (!Number.isInteger(width) || width < 0 || width > L)
    throw new DataProtoError(`width must be an integer in [0, ${L}], got ${String(width)}`);
  if (values.length !== micro.length)
    throw new DataProtoError(`unpackColumn: ${values.length} value arrays for ${micro.length} micro-batches`);
  const spans = realSpans(batch, options.attentionMaskKey ?? 'attention_mask', L);
  const out = new Float32Array(batch.batchSize * width);
  const offset = L - width;
  micro.forEach((mb, m) => {
    const v = values[m];
    if (v.length !== mb.numTokens)
      throw new DataProtoError(`unpackColumn: micro-batch ${m} has ${mb.numTokens} tokens but ${v.length} values`);
    mb.rows.forEach((row, d) => {
      if (row < 0 || row >= batch.batchSize)
        throw new DataProtoError(`micro-batch ${m} refers to row ${row}, outside the batch of ${batch.batchSize}`);
      const { start, length } = spans[row];
      if (mb.cuSeqlens[d + 1] - mb.cuSeqlens[d] !== length)
        throw new DataProtoError(
          `micro-batch ${m}, document ${d}: ${mb.cuSeqlens[d + 1] - mb.cuSeqlens[d]} tokens, but row ${row} has ${length}`,
        );
      for (let j = 0; j < length; j++) {
        const pos = start + j - offset;
        if (pos >= 0) out[row * width + pos] = v[mb.cuSeqlens[d] + j];
      }
    });
  });
  return out;
}

/** The documents of a micro-batch as separate sequences (row, tokens, positions and carried columns). */
export function unpackDocuments(
  micro: PackedMicroBatch,
): { row: number; inputIds: Int32Array; positionIds: Int32Array; columns: Record<string, TensorData> }[] {
  return Array.from(micro.rows, (row, d) => {
    const s = micro.cuSeqlens[d];
    const e = micro.cuSeqlens[d + 1];
    const columns: Record<string, TensorData> = {};
    for (const [k, v] of Object.entries(micro.columns)) columns[k] = v.slice(s, e);
    return { row, inputIds: micro.inputIds.slice(s, e), positionIds: micro.positionIds.slice(s, e), columns };
  });
}
