/**
 * Structural equality of observations, actions and infos (Gymnasium's `data_equivalence`).
 * @module
 */
import { dtypeOf } from '../spaces/space.js';

/**
 * True when `a` and `b` have the same structure and values: same types, same keys of plain
 * objects, same lengths of arrays, typed arrays of the same dtype with equal values (NaN equals
 * NaN), and `===` for everything else.
 */
export function dataEquivalence(a: unknown, b: unknown): boolean {
  const da = dtypeOf(a);
  if (da !== null) {
    if (dtypeOf(b) !== da) return false;
    const x = a as ArrayLike<number>;
    const y = b as ArrayLike<number>;
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i] && !(Number.isNaN(x[i]) && Number.isNaN(y[i]))) return false;
    return true;
  }
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((v, i) => dataEquivalence(v, b[i]));
  if (typeof a === 'object' && a !== null) {
    if (typeof b !== 'object' || b === null || Array.isArray(b) || dtypeOf(b) !== null) return false;
    if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    if (ka.length !== kb.length) return false;
    return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && dataEquivalence((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
  }
  return a === b;
}
