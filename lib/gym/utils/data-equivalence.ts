/**
 * Structural equality of observations, actions and infos (Gymnasium's `data_equivalence`).
 * @module
 */
import { dtypeOf } from '../spaces/space.js';

/** Gymnasium's tolerances for non-exact array comparison (NumPy `allclose(rtol=1e-5, atol=1e-5)`). */
const RTOL = 1e-5;
const ATOL = 1e-5;

function close(x: number, y: number, exact: boolean): boolean {
  if (x === y || (Number.isNaN(x) && Number.isNaN(y))) return true;
  if (exact || !Number.isFinite(x) || !Number.isFinite(y)) return false;
  return Math.abs(x - y) <= ATOL + RTOL * Math.abs(y);
}

/**
 * True when `a` and `b` have the same structure and values: same types, same keys of plain
 * objects, same lengths of arrays, typed arrays of the same dtype with equal values, and `===`
 * for everything else (numbers included). As in Gymnasium, typed-array values are compared
 * with NumPy `allclose`'s tolerance (|a − b| ≤ 1e-5 + 1e-5·|b|) unless `exact` is true. Unlike
 * NumPy, NaN in a typed array equals NaN.
 */
export function dataEquivalence(a: unknown, b: unknown, exact = false): boolean {
  const da = dtypeOf(a);
  if (da !== null) {
    if (dtypeOf(b) !== da) return false;
    const x = a as ArrayLike<number>;
    const y = b as ArrayLike<number>;
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (!close(x[i], y[i], exact)) return false;
    return true;
  }
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((v, i) => dataEquivalence(v, b[i], exact));
  if (typeof a === 'object' && a !== null) {
    if (typeof b !== 'object' || b === null || Array.isArray(b) || dtypeOf(b) !== null) return false;
    if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    if (ka.length !== kb.length) return false;
    return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && dataEquivalence((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], exact));
  }
  return a === b;
}
