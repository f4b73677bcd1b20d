import { attentionAddon, type NativeHandle, type NativeShape } from './native.js';
import type { AttentionShape, MaskSpec } from './types.js';

/** State of a (query block, key block) pair. */
export type BlockState = 'empty' | 'partial' | 'full';

const STATE_NAMES: readonly BlockState[] = ['empty', 'partial', 'full'];

/** The addon's view of a shape (only the fields it reads). */
export function nativeShape(shape: AttentionShape): NativeShape {
  if (typeof shape !== 'object' || shape === null) throw new TypeError('shape must be an object');
  return shape;
}

/**
 * A mask classified block by block for one shape (FlexAttention's BlockMask): every
 * (query block, key block) pair is empty (skipped), partial (masked per element) or full (no
 * per-element mask). Build it once with {@link createBlockMask} and pass it as
 * `opts.blockMask` to forward and backward calls of the same sizes.
 */
export class BlockMask {
  /** The mask it was built from (`undefined` = causal). */
  readonly mask: MaskSpec | undefined;
  /** The sizes it was built for (heads and headDim do not matter). */
  readonly shape: Readonly<AttentionShape>;
  /** Rows per block on both sides. */
  readonly blockSize: number;
  /** Batch entries stored: `shape.batch` when the mask uses documents, else 1 (shared). */
  readonly batch: number;
  /** Query blocks: `ceil(seqLen / blockSize)`. */
  readonly qBlocks: number;
  /** Key blocks: `ceil(kvLen / blockSize)`. */
  readonly kvBlocks: number;
  /** Number of pairs in each state over the stored batch entries. */
  readonly counts: Readonly<{ empty: number; partial: number; full: number }>;
  /** `[batch][qBlocks][kvBlocks]` states: 0 empty, 1 partial, 2 full. */
  readonly states: Uint8Array;
  /** The canonical form of the mask the native side compares when both `mask` and `blockMask` are given. */
  readonly signature: string;
  /** @internal The native block mask. */
  readonly handle: NativeHandle;

  /** @internal Use {@link createBlockMask}. */
  constructor(mask: MaskSpec | undefined, shape: AttentionShape, blockSize: number | undefined) {
    const n = attentionAddon().attentionBlockMask(mask, nativeShape(shape), blockSize);
    this.mask = mask;
    this.shape = Object.freeze({ ...shape });
    this.blockSize = n.blockSize;
    this.batch = n.batch;
    this.qBlocks = n.qBlocks;
    this.kvBlocks = n.kvBlocks;
    this.counts = Object.freeze({ ...n.counts });
    this.states = n.states;
    this.signature = n.signature;
    this.handle = n.handle;
  }

  /** The state of (query block `qBlock`, key block `kvBlock`) for batch entry `batchIndex`. */
  state(qBlock: number, kvBlock: number, batchIndex = 0): BlockState {
    const b = this.batch === 1 ? 0 : batchIndex;
    if (!Number.isInteger(qBlock) || qBlock < 0 || qBlock >= this.qBlocks)
      throw new RangeError(`qBlock must be in [0, ${this.qBlocks})`);
    if (!Number.isInteger(kvBlock) || kvBlock < 0 || kvBlock >= this.kvBlocks)
      throw new RangeError(`kvBlock must be in [0, ${this.kvBlocks})`);
    if (!Number.isInteger(b) || b < 0 || b >= this.batch)
      throw new RangeError(`batchIndex must be in [0, ${this.shape.batch})`);
    return STATE_NAMES[this.states[(b * this.qBlocks + qBlock) * this.kvBlocks + kvBlock]!]!;
  }

  /** Fraction of pairs that are empty (skipped work). */
  get sparsity(): number {
    return this.counts.empty / this.states.length;
  }

  /** e.g. `BlockMask(64: 16x16, 120 empty, 16 partial, 120 full)`. */
  toString(): string {
    const c = this.counts;
    return (
      `BlockMask(${this.blockSize}: ${this.qBlocks}x${this.kvBlocks}${this.batch > 1 ? `x${this.batch}` : ''}, ` +
      `${c.empty} empty, ${c.partial} partial, ${c.full} full)`
    );
  }
}

/**
 * Classifies every (query block, key block) pair of `mask` for `shape` once (natively, exact:
 * interval analysis refined per element where needed). `blockSize` (default 64, a multiple of
 * 16 in [16, 256]) is also the fused kernels' tile size.
 */
export function createBlockMask(mask: MaskSpec | undefined, shape: AttentionShape, blockSize?: number): BlockMask {
  return new BlockMask(mask, shape, blockSize);
}

/** A dense mask: `data[(b * seqLen + i) * kvLen + j]` is 1 when key `j` is visible to query `i`. */
export interface DenseMask {
  /** Batch entries: `shape.batch` when the mask uses documents, else 1. */
  batch: number;
  /** Query rows. */
  seqLen: number;
  /** Key rows. */
  kvLen: number;
  /** `[batch][seqLen][kvLen]`, 1 = visible. */
  data: Uint8Array;
  /** Is key `j` visible to query row `i` of sequence `b`? */
  at(b: number, i: number, j: number): boolean;
}

/** Evaluates `mask` for every (query, key) pair of `shape` (FlexAttention's `create_mask`). */
export function createMask(mask: MaskSpec | undefined, shape: AttentionShape): DenseMask {
  const data = attentionAddon().attentionDenseMask(mask, nativeShape(shape));
  const kvLen = shape.kvLen ?? shape.seqLen;
  const batch = data.length / (shape.seqLen * kvLen);
  return {
    batch,
    seqLen: shape.seqLen,
    kvLen,
    data,
    at: (b, i, j) => data[((batch === 1 ? 0 : b) * shape.seqLen + i) * kvLen + j] === 1,
  };
}
