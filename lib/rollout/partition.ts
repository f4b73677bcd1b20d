/**
 * Balanced partitions of weighted items (sequence lengths): the Karmarkar–Karp largest
 * differencing method for k-way partitioning (as VERL's `seqlen_balancing.karmarkar_karp`,
 * optionally with equal-size parts) and the greedy largest-first method; `balanceBatch`
 * (VERL's `balance_batch`: reorder a batch so that its equal chunks carry equal work) and
 * `partitionByBudget` (token-budget micro-batches: the fewest balanced parts under a budget).
 * @module
 */
import { DataProto, DataProtoError } from './data-proto.js';

/** A partitioning method. */
export type PartitionMethod = 'karmarkar-karp' | 'greedy';

interface Part {
  sum: number;
  items: number[];
  /** Smallest item index (Infinity when empty): the tie-break of equal sums. */
  first: number;
}

interface State {
  parts: Part[];
  spread: number;
  id: number;
}

function byWeightAsc(weights: readonly number[]): number[] {
  return weights.map((_, i) => i).sort((a, b) => weights[a] - weights[b] || a - b);
}

function sortParts(parts: Part[]): void {
  parts.sort((a, b) => b.sum - a.sum || (a.first === b.first ? 0 : a.first < b.first ? -1 : 1));
}

function checkArgs(weights: readonly number[], k: number, equalSize: boolean): void {
  if (!Array.isArray(weights)) throw new TypeError('weights must be an array of numbers');
  weights.forEach((w, i) => {
    if (typeof w !== 'number' || !Number.isFinite(w) || w < 0)
      throw new RangeError(`weights[${i}] must be a finite number >= 0, got ${String(w)}`);
  });
  if (!Number.isInteger(k) || k < 1)
    throw new RangeError(`the number of parts must be a positive integer, got ${String(k)}`);
  if (equalSize && weights.length % k !== 0)
    throw new RangeError(
      `equal-size partitioning needs the item count (${weights.length}) to be a multiple of the number of parts (${k})`,
    );
}

class MaxHeap {
  private readonly a: State[] = [];
  get size(): number {
    return this.a.length;
  }
  private before(x: State, y: State): boolean {
    return x.spread > y.spread || (x.spread === y.spread && x.id < y.id);
  }
  push(s: State): void {
    const a = this.a;
    a.push(s);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.before(a[i], a[p])) break;
      [a[i], a[p]] = [a[p], a[i]];
      i = p;
    }
  }
  pop(): State {
    const a = this.a;
    const top = a[0];
    const last = a.pop() as State;
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.before(a[l], a[m])) m = l;
        if (r < a.length && this.before(a[r], a[m])) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m], a[i]];
        i = m;
      }
    }
    return top;
  }
}

function finish(parts: Part[]): number[][] {
  return parts.map((p) => p.items.slice().sort((a, b) => a - b));
}

/**
 * Karmarkar–Karp k-way partitioning: every item starts as its own state (or, with
 * `equalSize`, each run of k consecutive items in weight order forms a state of k one-item
 * parts); the two states with the largest spread are merged, pairing the heaviest parts of one
 * with the lightest of the other, until one state is left. Returns k lists of item indices
 * (each sorted), parts ordered by decreasing sum.
 */
export function karmarkarKarp(
  weights: readonly number[],
  k: number,
  options: { equalSize?: boolean } = {},
): number[][] {
  const equalSize = options.equalSize ?? false;
  checkArgs(weights, k, equalSize);
  if (weights.length === 0) return Array.from({ length: k }, () => []);
  const order = byWeightAsc(weights);
  const heap = new MaxHeap();
  let id = 0;
  const push = (parts: Part[]): void => {
    sortParts(parts);
    heap.push({ parts, spread: parts[0].sum - parts[parts.length - 1].sum, id: id++ });
  };
  if (equalSize) {
    for (let off = 0; off < order.length; off += k)
      push(order.slice(off, off + k).map((i) => ({ sum: weights[i], items: [i], first: i })));
  } else {
    for (const i of order)
      push([
        { sum: weights[i], items: [i], first: i },
        ...Array.from({ length: k - 1 }, () => ({ sum: 0, items: [] as number[], first: Infinity })),
      ]);
  }
  while (heap.size > 1) {
    const a = heap.pop();
    const b = heap.pop();
    push(
      a.parts.map((p, i) => {
        const q = b.parts[k - 1 - i];
        return { sum: p.sum + q.sum, items: [...p.items, ...q.items], first: Math.min(p.first, q.first) };
      }),
    );
  }
  return finish(heap.pop().parts);
}

/**
 * Greedy largest-first partitioning: items in decreasing weight go to the lightest part (with
 * `equalSize`, among the parts that are not full). Returns k lists of item indices (each sorted).
 */
export function greedyPartition(
  weights: readonly number[],
  k: number,
  options: { equalSize?: boolean } = {},
): number[][] {
  const equalSize = options.equalSize ?? false;
  checkArgs(weights, k, equalSize);
  const cap = equalSize ? weights.length / k : Infinity;
  const parts: Part[] = Array.from({ length: k }, () => ({ sum: 0, items: [], first: Infinity }));
  for (const i of byWeightAsc(weights).reverse()) {
    let best = -1;
    for (let p = 0; p < k; p++) {
      if (parts[p].items.length >= cap) continue;
      if (best < 0 || parts[p].sum < parts[best].sum) best = p;
    }
    parts[best].items.push(i);
    parts[best].sum += weights[i];
  }
  return finish(parts);
}

/** Partitions with `method`. */
export function partition(
  weights: readonly number[],
  k: number,
  method: PartitionMethod = 'karmarkar-karp',
  equalSize = false,
): number[][] {
  if (method === 'karmarkar-karp') return karmarkarKarp(weights, k, { equalSize });
  if (method === 'greedy') return greedyPartition(weights, k, { equalSize });
  throw new RangeError(`partition method must be 'karmarkar-karp' or 'greedy', got ${JSON.stringify(method)}`);
}

/**
 * The fewest parts (starting from `ceil(total / maxTokens)`) whose balanced partition keeps
 * every part's sum within `maxTokens` (VERL's `rearrange_micro_batches`). Each length must fit
 * the budget. Empty parts are left out; parts are ordered by their first item.
 */
export function partitionByBudget(
  lengths: readonly number[],
  maxTokens: number,
  method: PartitionMethod = 'karmarkar-karp',
): number[][] {
  if (!Number.isInteger(maxTokens) || maxTokens < 1)
    throw new RangeError(`maxTokens must be a positive integer, got ${String(maxTokens)}`);
  lengths.forEach((l, i) => {
    if (!Number.isInteger(l) || l < 0)
      throw new RangeError(`lengths[${i}] must be a non-negative integer, got ${String(l)}`);
    if (l > maxTokens)
      throw new RangeError(`sequence ${i} has ${l} tokens, more than the micro-batch budget of ${maxTokens} tokens`);
  });
  const n = lengths.length;
  if (n === 0) return [];
  const total = lengths.reduce((s, l) => s + l, 0);
  for (let k = Math.max(1, Math.ceil(total / maxTokens)); k < n; k++) {
    const parts = partition(lengths, k, method).filter((p) => p.length > 0);
    if (parts.every((p) => p.reduce((s, i) => s + lengths[i], 0) <= maxTokens))
      return parts.sort((a, b) => a[0] - b[0]);
  }
  return lengths.map((_, i) => [i]);
}

/** Options of {@link balanceBatch}. */
export interface BalanceOptions {
  /** Method. Default `karmarkar-karp`. */
  method?: PartitionMethod;
  /** Equal numbers of rows per part (default true, as VERL: the batch size must divide). */
  equalSize?: boolean;
  /** Work of a row from its token count. Default: the token count. */
  workload?: (tokens: number) => number;
  /** The attention-mask column that counts tokens. Default `attention_mask`. */
  attentionMaskKey?: string;
}

/** Result of {@link balanceBatch}. */
export interface BalanceResult {
  /** The reordered batch: part p is rows `[p * size, (p + 1) * size)` (equal size), i.e. `batch.chunk(parts)`. */
  batch: DataProto;
  /** The original row indices of each part. */
  partitions: number[][];
  /** The work of each part. */
  workloads: number[];
  /** Metrics: `global_seqlen/{min,max,minmax_diff,balanced_min,balanced_max,mean}` (tokens per part before and after). */
  metrics: Record<string, number>;
}

/** The real-token count of each row (sum of the attention mask). */
export function rowTokenCounts(batch: DataProto, attentionMaskKey = 'attention_mask'): number[] {
  const mask = batch.get(attentionMaskKey);
  const L = batch.tensor(attentionMaskKey).shape.reduce((a, b) => a * b, 1);
  const out: number[] = [];
  for (let b = 0; b < batch.batchSize; b++) {
    let s = 0;
    for (let j = 0; j < L; j++) s += mask[b * L + j] !== 0 ? 1 : 0;
    out.push(s);
  }
  return out;
}

/**
 * Reorders a batch so that splitting it into `parts` equal chunks (data-parallel ranks)
 * balances the work (VERL's `balance_batch`).
 */
export function balanceBatch(batch: DataProto, parts: number, options: BalanceOptions = {}): BalanceResult {
  if (!Number.isInteger(parts) || parts < 1)
    throw new DataProtoError(`parts must be a positive integer, got ${String(parts)}`);
  const tokens = rowTokenCounts(batch, options.attentionMaskKey);
  const work = options.workload ? tokens.map(options.workload) : tokens;
  const equal = options.equalSize ?? true;
  const partitions = partition(work, parts, options.method ?? 'karmarkar-karp', equal).sort(
    (a, b) => (a[0] ?? Infinity) - (b[0] ?? Infinity),
  );
  const workloads = partitions.map((p) => p.reduce((s, i) => s + work[i], 0));
  const before: number[] = [];
  if (batch.batchSize % parts === 0) {
    const size = batch.batchSize / parts;
    for (let p = 0; p < parts; p++) before.push(tokens.slice(p * size, (p + 1) * size).reduce((s, t) => s + t, 0));
  }
  const after = partitions.map((p) => p.reduce((s, i) => s + tokens[i], 0));
  const metrics: Record<string, number> = {
    'global_seqlen/balanced_min': Math.min(...after),
    'global_seqlen/balanced_max': Math.max(...after),
    'global_seqlen/mean': after.reduce((s, t) => s + t, 0) / parts,
  };
  if (before.length > 0) {
    metrics['global_seqlen/min'] = Math.min(...before);
    metrics['global_seqlen/max'] = Math.max(...before);
    metrics['global_seqlen/minmax_diff'] = metrics['global_seqlen/max'] - metrics['global_seqlen/min'];
  }
  return { batch: batch.reorder(partitions.flat()), partitions, workloads, metrics };
}
