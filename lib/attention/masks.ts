/**
 * Mask predicates that compose like FlexAttention's mask_mods. They are plain data (so they
 * can be logged and compared) and are evaluated natively; docs/design.md ("Masks") gives their
 * semantics.
 */
import type { AttentionMask, MaskPredicate, MaskSpec } from './types.js';

function requireInteger(value: unknown, name: string, min: number): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be an integer, got ${typeof value}`);
  if (!Number.isInteger(value) || value < min)
    throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  return value;
}

function requireMasks(masks: readonly MaskSpec[], name: string): readonly MaskSpec[] {
  if (masks.length === 0) throw new RangeError(`${name} needs at least one mask`);
  masks.forEach((m, i) => {
    if (typeof m !== 'object' || m === null) throw new TypeError(`${name} argument ${i} must be a mask`);
  });
  return Object.freeze([...masks]);
}

/** Every key is visible (FlexAttention's `noop_mask`). */
export function allKeys(): MaskPredicate {
  return { kind: 'all' };
}

/** Key `j` is visible to query `i` when `j <= i`. */
export function causal(): MaskPredicate {
  return { kind: 'causal' };
}

/**
 * `|i - j| <= window - 1`: `window` keys including the current one when combined with
 * {@link causal} (the gpt-oss / HF / vLLM convention; gpt-oss uses 128).
 */
export function slidingWindow(window: number): MaskPredicate {
  return { kind: 'slidingWindow', window: requireInteger(window, 'slidingWindow(window)', 1) };
}

/** Keys `j < length`: leading attention-sink tokens (StreamingLLM style). */
export function prefix(length: number): MaskPredicate {
  return { kind: 'prefix', length: requireInteger(length, 'prefix(length)', 0) };
}

/** Packed sequences: `ids[b, i] == ids[b, j]`; `ids` is `[batch * kvLen]`. */
export function documents(ids: Int32Array): MaskPredicate {
  if (!(ids instanceof Int32Array)) throw new TypeError('documents(ids) must be an Int32Array');
  return { kind: 'documents', ids };
}

/** Visible when every mask allows the key (FlexAttention's `and_masks`). */
export function and(...masks: MaskSpec[]): MaskPredicate {
  return { kind: 'and', masks: requireMasks(masks, 'and()') };
}

/** Visible when any mask allows the key (FlexAttention's `or_masks`). */
export function or(...masks: MaskSpec[]): MaskPredicate {
  return { kind: 'or', masks: requireMasks(masks, 'or()') };
}

/** Visible when `mask` hides the key. */
export function not(mask: MaskSpec): MaskPredicate {
  if (typeof mask !== 'object' || mask === null) throw new TypeError('not() needs a mask');
  return { kind: 'not', mask };
}

/** True when `m` is a predicate tree node rather than the shorthand. */
export function isMaskPredicate(m: MaskSpec): m is MaskPredicate {
  return typeof (m as { kind?: unknown }).kind === 'string';
}

/**
 * The predicate tree of the shorthand: `causal AND (window OR prefix) AND documents`, each
 * part only when set (no part at all: {@link allKeys}). The prefix only matters with a window.
 */
export function maskFromOptions(mask: AttentionMask = {}): MaskPredicate {
  const parts: MaskPredicate[] = [];
  if (mask.causal ?? true) parts.push(causal());
  const window = requireInteger(mask.window ?? 0, 'mask.window', 0);
  const pre = requireInteger(mask.prefix ?? 0, 'mask.prefix', 0);
  if (window !== 0) {
    const w = slidingWindow(window);
    parts.push(pre !== 0 ? or(w, prefix(pre)) : w);
  }
  if (mask.documentIds !== undefined) parts.push(documents(mask.documentIds));
  if (parts.length === 0) return allKeys();
  return parts.length === 1 ? parts[0]! : and(...parts);
}

/** A short human-readable form, e.g. `and(causal, or(slidingWindow(128), prefix(4)))`. */
export function describeMask(mask: MaskSpec | undefined): string {
  const m = mask === undefined ? causal() : isMaskPredicate(mask) ? mask : maskFromOptions(mask);
  switch (m.kind) {
    case 'all':
    case 'causal':
      return m.kind;
    case 'slidingWindow':
      return `slidingWindow(${m.window})`;
    case 'prefix':
      return `prefix(${m.length})`;
    case 'documents':
      return `documents(${m.ids.length} ids)`;
    case 'not':
      return `not(${describeMask(m.mask)})`;
    default:
      return `${m.kind}(${m.masks.map((x) => describeMask(x)).join(', ')})`;
  }
}
