/**
 * Structural equality of observations, actions and infos (Gymnasium's `data_equivalence`).
 * @module
 */
import { structuralEqual, type StructuralEqualOptions } from '../../util/structural-equal.js';

/** Gymnasium's tolerances for non-exact array comparison (NumPy `allclose(rtol=1e-5, atol=1e-5)`). */
const CLOSE: StructuralEqualOptions = { nanEqual: false, tolerance: { rtol: 1e-5, atol: 1e-5 }, objects: 'sameClass' };
const EXACT: StructuralEqualOptions = { nanEqual: false, tolerance: null, objects: 'sameClass' };

/**
 * True when `a` and `b` have the same structure and values: same types, same keys of objects
 * of the same class, same lengths of arrays, typed arrays of the same dtype with equal values,
 * Dates, Maps and Sets by content, and `===` for everything else (numbers included). As in
 * Gymnasium, typed-array values are compared with NumPy `allclose`'s tolerance
 * (|a − b| ≤ 1e-5 + 1e-5·|b|) unless `exact` is true. Unlike NumPy, NaN in a typed array equals NaN.
 */
export function dataEquivalence(a: unknown, b: unknown, exact = false): boolean {
  return structuralEqual(a, b, exact ? EXACT : CLOSE);
}
