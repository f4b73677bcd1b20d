/**
 * Byte-level BPE training: counts adjacent token pairs over the pre-tokenised words of a corpus
 * and repeatedly merges the most frequent pair (ties: the pair with the smaller ids), updating
 * only the words that contain it. Deterministic for a given corpus.
 * @module
 */

/** Pair key of two token ids (< 2^21 each). */
export function pairKey(a: number, b: number): number {
  return a * 2097152 + b;
}

/** A max-heap of [count, key] ordered by count, then by smaller key; entries may be stale. */
class PairHeap {
  private readonly counts: number[] = [];
  private readonly keys: number[] = [];

  get size(): number {
    return this.counts.length;
  }

  private above(i: number, j: number): boolean {
    return this.counts[i] > this.counts[j] || (this.counts[i] === this.counts[j] && this.keys[i] < this.keys[j]);
  }

  private swap(i: number, j: number): void {
    [this.counts[i], this.counts[j]] = [this.counts[j], this.counts[i]];
    [this.keys[i], this.keys[j]] = [this.keys[j], this.keys[i]];
  }

  push(count: number, key: number): void {
    this.counts.push(count);
    this.keys.push(key);
    let i = this.counts.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.above(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }

  pop(): [number, number] {
    const top: [number, number] = [this.counts[0], this.keys[0]];
    const lastC = this.counts.pop() as number;
    const lastK = this.keys.pop() as number;
    if (this.counts.length > 0) {
      this.counts[0] = lastC;
      this.keys[0] = lastK;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < this.counts.length && this.above(l, m)) m = l;
        if (r < this.counts.length && this.above(r, m)) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return top;
  }
}

/** Replaces every non-overlapping (a, b), left to right, by `id`. */
export function mergePair(word: readonly number[], a: number, b: number, id: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < word.length;) {
    if (i + 1 < word.length && word[i] === a && word[i + 1] === b) {
      out.push(id);
      i += 2;
    } else {
      out.push(word[i]);
      i++;
    }
  }
  return out;
}

/**
 * Learns up to `maxMerges` merges over `words` (token-id sequences with their counts); merge
 * `r` creates token `firstId + r`. Stops early when the best pair occurs fewer than
 * `minFrequency` times.
 */
export function learnMerges(
  words: { ids: number[]; count: number }[],
  firstId: number,
  maxMerges: number,
  minFrequency: number,
): [number, number][] {
  const pairCounts = new Map<number, number>();
  const where = new Map<number, Set<number>>();
  const heap = new PairHeap();
  const add = (key: number, delta: number, w: number): void => {
    const next = (pairCounts.get(key) ?? 0) + delta;
    if (next <= 0) pairCounts.delete(key);
    else pairCounts.set(key, next);
    if (delta > 0) {
      let s = where.get(key);
      if (!s) where.set(key, (s = new Set()));
      s.add(w);
    }
    if (next > 0) heap.push(next, key); // older entries of this key become stale
  };
  words.forEach((word, w) => {
    for (let i = 0; i + 1 < word.ids.length; i++) add(pairKey(word.ids[i], word.ids[i + 1]), word.count, w);
  });
  const merges: [number, number][] = [];
  while (merges.length < maxMerges && heap.size > 0) {
    const [count, key] = heap.pop();
    if (pairCounts.get(key) !== count) continue; // stale entry
    if (count < minFrequency) break;
    const a = Math.floor(key / 2097152);
    const b = key % 2097152;
    const id = firstId + merges.length;
    merges.push([a, b]);
    for (const w of where.get(key) ?? []) {
      const word = words[w];
      let has = false;
      for (let i = 0; i + 1 < word.ids.length; i++) if (word.ids[i] === a && word.ids[i + 1] === b) has = true;
      if (!has) continue;
      for (let i = 0; i + 1 < word.ids.length; i++) add(pairKey(word.ids[i], word.ids[i + 1]), -word.count, w);
      word.ids = mergePair(word.ids, a, b, id);
      for (let i = 0; i + 1 < word.ids.length; i++) add(pairKey(word.ids[i], word.ids[i + 1]), word.count, w);
    }
    where.delete(key);
  }
  return merges;
}
