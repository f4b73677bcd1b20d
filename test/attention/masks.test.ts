// Mask predicates and block masks: the native evaluation (createMask) against the reference's
// own interpretation of docs/design.md ("Masks"), exact block classification, reuse of block
// masks in forward and backward, and the builders' checks.
import t from 'tap';

import {
  BlockMask,
  allKeys,
  and,
  causal,
  createBlockMask,
  createMask,
  describeMask,
  documents,
  maskFromOptions,
  not,
  or,
  prefix,
  sinkAttentionBackward,
  sinkAttentionForward,
  slidingWindow,
  type MaskSpec,
} from '../../lib/attention/index.js';
import { isMaskPredicate } from '../../lib/attention/masks.js';
import { Rng, maskFn, packedIds, type RefMaskSpec, type Shape } from './fixtures/reference.js';

const rng = new Rng(21);
const B = 3;
const T = 77;
const ids = packedIds(rng, B, T, 4);
const scattered = Int32Array.from({ length: B * T }, () => rng.int(3)); // non-contiguous documents

const MASKS: [string, MaskSpec | undefined][] = [
  ['default (causal)', undefined],
  ['{}', {}],
  ['causal: false', { causal: false }],
  ['window 5', { window: 5 }],
  ['window 1 (only the diagonal)', { window: 1 }],
  ['window 5, prefix 3', { window: 5, prefix: 3 }],
  ['non-causal window 4, prefix 2', { causal: false, window: 4, prefix: 2 }],
  ['prefix 3 without window', { prefix: 3 }],
  ['documents', { documentIds: ids }],
  ['window 16 + prefix 4 + documents', { window: 16, prefix: 4, documentIds: ids }],
  ['scattered document ids, non-causal', { causal: false, documentIds: scattered }],
  ['allKeys', allKeys()],
  ['causal()', causal()],
  ['slidingWindow(7)', slidingWindow(7)],
  ['prefix(10)', prefix(10)],
  ['prefix(0)', prefix(0)],
  ['documents(ids)', documents(ids)],
  ['not(causal)', not(causal())],
  ['and(causal, not(window 3))', and(causal(), not(slidingWindow(3)))],
  ['or(prefix 5, and(causal, window 9))', or(prefix(5), and(causal(), slidingWindow(9)))],
  ['or(not(documents), window 2)', or(not(documents(scattered)), slidingWindow(2))],
  ['and with a shorthand child', and({ window: 6 }, documents(ids))],
  ['and(causal, causal, not(not(causal)))', and(causal(), causal(), not(not(causal())))],
];

t.test('createMask agrees with the reference interpretation of every mask', async (t) => {
  for (const [name, mask] of MASKS) {
    const shape = { batch: B, seqLen: T, qHeads: 1, kvHeads: 1, headDim: 1 };
    const dense = createMask(mask, shape);
    const f = maskFn(mask as RefMaskSpec | undefined, T);
    let wrong = 0;
    for (let b = 0; b < B; b++) {
      for (let i = 0; i < T; i++) {
        for (let j = 0; j < T; j++) if (dense.at(b, i, j) !== f(b, i, j)) wrong++;
      }
    }
    t.equal(wrong, 0, `${name}: every pair matches`);
    const usesDocs = describeMask(mask).includes('documents');
    t.equal(dense.batch, usesDocs ? B : 1, `${name}: batch entries`);
  }
});

t.test('docs/design.md window convention: W keys including the current one', async (t) => {
  const dense = createMask({ window: 128 }, { batch: 1, seqLen: 300, qHeads: 1, kvHeads: 1, headDim: 1 });
  for (const i of [0, 1, 126, 127, 128, 299]) {
    let n = 0;
    let first = -1;
    for (let j = 0; j < 300; j++) {
      if (dense.at(0, i, j)) {
        n++;
        if (first < 0) first = j;
      }
    }
    t.equal(n, Math.min(i + 1, 128), `row ${i} sees ${Math.min(i + 1, 128)} keys`);
    t.equal(first, Math.max(0, i - 127), `row ${i} starts at ${Math.max(0, i - 127)}`);
  }
  // prefix keys stay visible regardless of the window, but not to earlier queries (causal)
  const p = createMask({ window: 4, prefix: 3 }, { batch: 1, seqLen: 20, qHeads: 1, kvHeads: 1, headDim: 1 });
  t.ok(p.at(0, 19, 0) && p.at(0, 19, 2) && !p.at(0, 19, 3) && p.at(0, 19, 16), 'row 19: prefix 0..2 and window 16..19');
  t.notOk(p.at(0, 1, 2), 'prefix keys remain causal');
});

t.test('queries after a cache: masks use absolute positions', async (t) => {
  const shape = { batch: 2, seqLen: 10, qHeads: 1, kvHeads: 1, headDim: 1, kvLen: 40, queryOffset: 30 };
  const docIds = packedIds(rng, 2, 40, 3);
  for (const mask of [undefined, { window: 8 }, { window: 8, prefix: 2, documentIds: docIds }, not(causal())]) {
    const dense = createMask(mask, shape);
    const f = maskFn(mask as RefMaskSpec | undefined, 40);
    let wrong = 0;
    for (let b = 0; b < 2; b++)
      for (let i = 0; i < 10; i++) for (let j = 0; j < 40; j++) if (dense.at(b, i, j) !== f(b, 30 + i, j)) wrong++;
    t.equal(wrong, 0, describeMask(mask));
  }
});

t.test('block masks classify every block pair exactly', async (t) => {
  const shapes: Shape[] = [
    { batch: B, seqLen: T, qHeads: 1, kvHeads: 1, headDim: 1 },
    { batch: 2, seqLen: 50, qHeads: 1, kvHeads: 1, headDim: 1, kvLen: 90, queryOffset: 40 },
  ];
  for (const shape of shapes) {
    const kvLen = shape.kvLen ?? shape.seqLen;
    const off = shape.queryOffset ?? 0;
    for (const [name, m] of MASKS) {
      let mask = m;
      if (kvLen !== T && describeMask(m).includes('documents'))
        mask = { window: 16, documentIds: packedIds(rng, 2, kvLen, 3) };
      for (const bs of [16, 32, 64]) {
        const bm = createBlockMask(mask, shape, bs);
        t.ok(bm instanceof BlockMask);
        const f = maskFn(mask as RefMaskSpec | undefined, kvLen);
        const nq = Math.ceil(shape.seqLen / bs);
        const nk = Math.ceil(kvLen / bs);
        t.equal(bm.qBlocks, nq);
        t.equal(bm.kvBlocks, nk);
        let wrong = 0;
        const counts = { empty: 0, partial: 0, full: 0 };
        for (let b = 0; b < bm.batch; b++) {
          for (let qb = 0; qb < nq; qb++) {
            for (let kb = 0; kb < nk; kb++) {
              let n = 0;
              let total = 0;
              for (let i = qb * bs; i < Math.min((qb + 1) * bs, shape.seqLen); i++) {
                for (let j = kb * bs; j < Math.min((kb + 1) * bs, kvLen); j++) {
                  total++;
                  if (f(b, off + i, j)) n++;
                }
              }
              const expected = n === 0 ? 'empty' : n === total ? 'full' : 'partial';
              counts[expected]++;
              if (bm.state(qb, kb, b) !== expected) wrong++;
            }
          }
        }
        t.equal(wrong, 0, `${name}, block ${bs}, ${shape.seqLen}x${kvLen}: states`);
        t.same(bm.counts, counts, `${name}, block ${bs}: counts`);
      }
    }
  }
});

t.test('block mask accessors', async (t) => {
  const shape = { batch: 2, seqLen: 256, qHeads: 4, kvHeads: 1, headDim: 8 };
  const bm = createBlockMask({ window: 128 }, shape);
  t.equal(bm.blockSize, 64, 'default block size 64');
  t.equal(bm.batch, 1, 'no documents: one entry shared by the batch');
  t.same(bm.counts, { empty: 7, partial: 6, full: 3 });
  t.equal(bm.state(3, 3), 'partial');
  t.equal(bm.state(3, 2), 'full');
  t.equal(bm.state(3, 0), 'empty');
  t.equal(bm.state(0, 3), 'empty');
  t.equal(bm.sparsity, 7 / 16);
  t.match(bm.toString(), /BlockMask\(64: 4x4, 7 empty, 6 partial, 3 full\)/);
  t.throws(() => bm.state(4, 0), RangeError);
  t.throws(() => bm.state(0, -1), RangeError);
  const docs = createBlockMask({ documentIds: packedIds(rng, 2, 256, 3) }, shape, 128);
  t.equal(docs.batch, 2, 'documents: one entry per sequence');
  t.match(docs.toString(), /x2,/);
  t.throws(() => docs.state(0, 0, 2), RangeError);
  t.equal(bm.shape.seqLen, 256);
  t.same(bm.mask, { window: 128 });
});

t.test('a block mask is reused by forward and backward, and must fit', async (t) => {
  const shape = { batch: 2, seqLen: 100, qHeads: 4, kvHeads: 2, headDim: 16 };
  const r = new Rng(5);
  const q = r.floats(2 * 100 * 4 * 16),
    k = r.floats(2 * 100 * 2 * 16),
    v = r.floats(2 * 100 * 2 * 16);
  const dOut = r.floats(q.length),
    sinks = r.floats(4);
  const mask = { window: 20, prefix: 2, documentIds: packedIds(r, 2, 100, 2) };
  const blockMask = createBlockMask(mask, shape, 32);
  const a = sinkAttentionForward(q, k, v, sinks, shape, { mask, blockSize: 32 });
  const b = sinkAttentionForward(q, k, v, sinks, shape, { blockMask });
  const c = sinkAttentionForward(q, k, v, sinks, shape, { mask: { ...mask }, blockMask });
  t.same(b.out, a.out, 'blockMask alone gives the same output');
  t.same(c.out, a.out, 'an equal mask with the block mask is accepted');
  const ga = sinkAttentionBackward(q, k, v, sinks, a.out, a.lse, dOut, shape, { mask, blockSize: 32 });
  const gb = sinkAttentionBackward(q, k, v, sinks, a.out, a.lse, dOut, shape, { blockMask });
  t.same(gb.dq, ga.dq);
  t.same(gb.dk, ga.dk);
  t.same(gb.dSinks, ga.dSinks);
  t.throws(() => sinkAttentionForward(q, k, v, sinks, shape, { mask: { window: 21 }, blockMask }), {
    name: 'RangeError',
    message: /opts.blockMask was built for the mask .* but opts.mask is/,
  });
  const other = { ...shape, seqLen: 50 };
  const small = createBlockMask(undefined, other);
  t.throws(() => sinkAttentionForward(q, k, v, sinks, shape, { blockMask: small }), {
    name: 'RangeError',
    message: /blockMask was built for seqLen 50/,
  });
  t.throws(() => sinkAttentionForward(q, k, v, sinks, shape, { blockMask: {} as BlockMask }), {
    name: 'TypeError',
    message: /opts.blockMask must be a BlockMask/,
  });
});

t.test('builders check their arguments and describe themselves', async (t) => {
  t.throws(() => slidingWindow(0), { name: 'RangeError', message: /slidingWindow\(window\) must be an integer >= 1/ });
  t.throws(() => slidingWindow(2.5), RangeError);
  t.throws(() => slidingWindow('3' as unknown as number), TypeError);
  t.throws(() => prefix(-1), { name: 'RangeError', message: /prefix\(length\)/ });
  t.throws(() => documents([1, 2] as unknown as Int32Array), TypeError);
  t.throws(() => and(), { name: 'RangeError', message: /and\(\) needs at least one mask/ });
  t.throws(() => or(), RangeError);
  t.throws(() => and(null as unknown as MaskSpec), TypeError);
  t.throws(() => not(undefined as unknown as MaskSpec), TypeError);
  t.throws(() => maskFromOptions({ window: -1 }), { name: 'RangeError', message: /mask.window/ });
  t.throws(() => maskFromOptions({ prefix: 0.5 }), { name: 'RangeError', message: /mask.prefix/ });
  t.ok(isMaskPredicate(causal()));
  t.notOk(isMaskPredicate({ window: 3 }));
  t.same(maskFromOptions(), causal());
  t.same(maskFromOptions({ causal: false }), allKeys());
  t.same(maskFromOptions({ prefix: 4 }), causal(), 'a prefix alone changes nothing');
  t.same(
    maskFromOptions({ window: 8, prefix: 2, documentIds: ids }),
    and(causal(), or(slidingWindow(8), prefix(2)), documents(ids)),
  );
  t.same(maskFromOptions({ causal: false, window: 3 }), slidingWindow(3));
  t.equal(describeMask(undefined), 'causal');
  t.equal(describeMask({ window: 8, prefix: 2 }), 'and(causal, or(slidingWindow(8), prefix(2)))');
  t.equal(describeMask(not(documents(ids))), `not(documents(${ids.length} ids))`);
  t.equal(describeMask(allKeys()), 'all');
});
