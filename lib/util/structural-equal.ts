/**
 * Structural equality of plain JavaScript values, the one implementation behind the layers'
 * comparisons: `jsonEqual` (tau: tool arguments and results), `dataEquivalence` (gym:
 * observations and infos, Gymnasium's `data_equivalence`), `deepEqual` (rollout: `DataProto`
 * columns and meta), the JSON-schema `enum` check and the tensor columns of `DataProto.union`.
 * The callers differ in three places, each an option: NaN outside typed arrays, the tolerance
 * of typed-array elements, and which objects compare by content.
 *
 * This folder sits below every layer (tau → gym → rollout → trainer): it imports nothing.
 * @module
 */

/** Options of {@link structuralEqual} (the defaults are `deepEqual`'s semantics). */
export interface StructuralEqualOptions {
  /** Whether NaN equals NaN outside typed arrays (default true; inside typed arrays it always does). */
  nanEqual?: boolean;
  /**
   * Typed-array elements count as equal when `|a − b| ≤ atol + rtol·|b|` (NumPy's `allclose`);
   * NaN equals NaN, infinities only themselves. Default: exact.
   */
  tolerance?: { rtol: number; atol: number } | null;
  /**
   * Which other objects compare by content: `plain` (default) plain objects (prototype
   * `Object.prototype` or null) by their own enumerable keys; any other object equals only
   * itself. `sameClass`: any two objects with the same prototype, by their own enumerable keys.
   * Arrays, typed arrays (same type), Dates, Maps and Sets always compare by content.
   */
  objects?: 'plain' | 'sameClass';
}

interface Resolved {
  nanEqual: boolean;
  rtol: number;
  atol: number;
  exact: boolean;
  sameClass: boolean;
}

const DEFAULTS: Resolved = { nanEqual: true, rtol: 0, atol: 0, exact: true, sameClass: false };

function resolve(o: StructuralEqualOptions | undefined): Resolved {
  if (o === undefined) return DEFAULTS;
  const tol = o.tolerance ?? null;
  return {
    nanEqual: o.nanEqual ?? true,
    rtol: tol?.rtol ?? 0,
    atol: tol?.atol ?? 0,
    exact: tol === null,
    sameClass: o.objects === 'sameClass',
  };
}

function isPlainObject(x: object): boolean {
  const p = Object.getPrototypeOf(x) as unknown;
  return p === Object.prototype || p === null;
}

function typedArraysEqual(x: ArrayLike<number>, y: ArrayLike<number>, o: Resolved): boolean {
  if (x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) {
    const a = x[i];
    const b = y[i];
    if (a === b || (a !== a && b !== b)) continue; // equal, or both NaN
    if (o.exact || !Number.isFinite(a) || !Number.isFinite(b) || Math.abs(a - b) > o.atol + o.rtol * Math.abs(b))
      return false;
  }
  return true;
}

function equal(a: unknown, b: unknown, o: Resolved): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'number') return o.nanEqual && Number.isNaN(a) && Number.isNaN(b);
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!equal(a[i], b[i], o)) return false;
    return true;
  }
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) {
    if (!ArrayBuffer.isView(a) || !ArrayBuffer.isView(b) || Object.getPrototypeOf(a) !== Object.getPrototypeOf(b))
      return false;
    return typedArraysEqual(a as unknown as ArrayLike<number>, b as unknown as ArrayLike<number>, o);
  }
  if (a instanceof Date) return b instanceof Date && a.getTime() === b.getTime();
  if (a instanceof Map) {
    if (!(b instanceof Map) || a.size !== b.size) return false;
    for (const [k, v] of a) if (!b.has(k) || !equal(v, b.get(k), o)) return false;
    return true;
  }
  if (a instanceof Set) {
    if (!(b instanceof Set) || a.size !== b.size) return false;
    for (const v of a) if (!b.has(v)) return false;
    return true;
  }
  if (o.sameClass ? Object.getPrototypeOf(a) !== Object.getPrototypeOf(b) : !isPlainObject(a) || !isPlainObject(b))
    return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) {
    if (!Object.prototype.hasOwnProperty.call(b, k)) return false;
    if (!equal((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], o)) return false;
  }
  return true;
}

/**
 * Whether `a` and `b` are structurally equal: primitives by `===` (and NaN as `nanEqual` says),
 * arrays element by element, typed arrays of the same type element by element (within
 * `tolerance`), Dates by time, Maps by keys and values, Sets by membership, and objects as
 * `objects` says (see {@link StructuralEqualOptions}).
 */
export function structuralEqual(a: unknown, b: unknown, options?: StructuralEqualOptions): boolean {
  return equal(a, b, resolve(options));
}
