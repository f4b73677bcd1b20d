/**
 * Helpers for multi-dimensional values: array-valued samples are flat, row-major typed arrays
 * (shape on the space); users may also pass nested number arrays, which these helpers flatten.
 * @module
 */
import { dtypeOf } from './space.js';

/** A number or nested arrays of numbers (any depth). */
export type NestedNumbers = number | readonly NestedNumbers[];

/**
 * Flattens nested arrays (or a typed array, or a number) to a shape and row-major values; null
 * when the nesting is ragged or holds non-numbers.
 */
export function flattenNested(value: unknown): { shape: number[]; data: number[] } | null {
  if (typeof value === 'number') return { shape: [], data: [value] };
  if (dtypeOf(value) !== null) {
    const arr = value as ArrayLike<number>;
    return { shape: [arr.length], data: Array.from(arr) };
  }
  if (!Array.isArray(value)) return null;
  if (value.length === 0) return { shape: [0], data: [] };
  const parts = value.map((v) => flattenNested(v));
  if (parts.some((p) => p === null)) return null;
  const first = parts[0]!;
  for (const p of parts) {
    if (p!.shape.length !== first.shape.length || p!.shape.some((d, i) => d !== first.shape[i])) return null;
  }
  return { shape: [value.length, ...first.shape], data: parts.flatMap((p) => p!.data) };
}

/** Rebuilds nested arrays of `shape` from row-major values (a number for the scalar shape). */
export function toNested(data: ArrayLike<number>, shape: readonly number[], offset = 0): NestedNumbers {
  if (shape.length === 0) return data[offset];
  const [head, ...rest] = shape;
  let inner = 1;
  for (const d of rest) inner *= d;
  const out: NestedNumbers[] = [];
  for (let i = 0; i < head; i++) out.push(toNested(data, rest, offset + i * inner));
  return out;
}

/** Formats row-major values as NumPy prints an array, e.g. `[1. 2.]` or `[[0 1] [2 3]]`. */
export function formatArray(data: ArrayLike<number>, shape: readonly number[], float: boolean): string {
  const fmt = (v: number): string => {
    if (!float) return String(v);
    if (v === Infinity) return 'inf';
    if (v === -Infinity) return '-inf';
    if (Number.isNaN(v)) return 'nan';
    return Number.isInteger(v) ? `${v}.` : String(v);
  };
  const rec = (s: readonly number[], off: number): string => {
    if (s.length === 0) return fmt(data[off]);
    const [head, ...rest] = s;
    let inner = 1;
    for (const d of rest) inner *= d;
    const items: string[] = [];
    for (let i = 0; i < head; i++) items.push(rec(rest, off + i * inner));
    return `[${items.join(' ')}]`;
  };
  return rec(shape, 0);
}
