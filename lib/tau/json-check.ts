/**
 * Readers that validate JSON loaded from a domain's database file and name the bad field
 * (`retail db: users.x.name: expected a string`), shared by the domain schemas.
 * @module
 */

/** Validating readers bound to one error prefix (see {@link jsonReaders}). */
export interface JsonReaders {
  /** Throws a TypeError `<prefix>: <where>: <what>`. */
  fail(where: string, what: string): never;
  /** A string. */
  str(v: unknown, where: string): string;
  /** A finite number. */
  num(v: unknown, where: string): number;
  /** An integer (a Python `int` field: pydantic accepts `3.0` as 3, rejects `3.5`). */
  int(v: unknown, where: string): number;
  /** A plain object. */
  obj(v: unknown, where: string): Record<string, unknown>;
  /** An array. */
  arr(v: unknown, where: string): unknown[];
  /** An object of strings. */
  strMap(v: unknown, where: string): Record<string, string>;
  /** An array of strings. */
  strList(v: unknown, where: string): string[];
  /** An array of strings, or null when null or absent. */
  optStrList(v: unknown, where: string): string[] | null;
  /** A string, or null when null or absent. */
  optStr(v: unknown, where: string): string | null;
  /** One of `values`. */
  oneOf<T extends string>(v: unknown, values: readonly T[], where: string): T;
}

/** Validating readers whose errors start with `prefix` (e.g. `retail db`). */
export function jsonReaders(prefix: string): JsonReaders {
  const fail = (where: string, what: string): never => {
    throw new TypeError(`${prefix}: ${where}: ${what}`);
  };
  const str = (v: unknown, where: string): string => (typeof v === 'string' ? v : fail(where, 'expected a string'));
  const num = (v: unknown, where: string): number =>
    typeof v === 'number' && Number.isFinite(v) ? v : fail(where, 'expected a number');
  const obj = (v: unknown, where: string): Record<string, unknown> =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : fail(where, 'expected an object');
  const arr = (v: unknown, where: string): unknown[] => (Array.isArray(v) ? v : fail(where, 'expected an array'));
  const strList = (v: unknown, where: string): string[] => arr(v, where).map((x, i) => str(x, `${where}[${i}]`));
  return {
    fail,
    str,
    num,
    int: (v, where) => (Number.isInteger(v) ? (v as number) : fail(where, 'expected an integer')),
    obj,
    arr,
    strMap(v, where) {
      const out: Record<string, string> = {};
      for (const [k, x] of Object.entries(obj(v, where))) out[k] = str(x, `${where}.${k}`);
      return out;
    },
    strList,
    optStrList: (v, where) => (v === null || v === undefined ? null : strList(v, where)),
    optStr: (v, where) => (v === null || v === undefined ? null : str(v, where)),
    oneOf<T extends string>(v: unknown, values: readonly T[], where: string): T {
      return values.includes(v as T)
        ? (v as T)
        : fail(where, `expected one of ${values.map((x) => JSON.stringify(x)).join(', ')}, got ${JSON.stringify(v)}`);
    },
  };
}
