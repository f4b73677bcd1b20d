/**
 * Structural equality of plain JavaScript values (what `DataProto.union` and `concat` use for
 * non-tensor values and meta): primitives (NaN equals NaN), arrays, typed arrays (same type and
 * elements), plain objects (same keys and values), Maps, Sets (by membership), Dates; any other
 * object is equal only to itself.
 * @module
 */
import { structuralEqual } from '../util/structural-equal.js';

/** Whether `a` and `b` are structurally equal (see the module description; {@link structuralEqual} with its defaults). */
export function deepEqual(a: unknown, b: unknown): boolean {
  return structuralEqual(a, b);
}
