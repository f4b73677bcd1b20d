/**
 * Python-compatible number formatting, rounding and JSON serialisation.
 *
 * tau2 is written in Python: its tool results are `json.dumps(model_dump())` and its database
 * hash is `sha256(json.dumps(model_dump(), sort_keys=True, default=str))`. To produce the same
 * strings (and so the same hashes) we format like CPython: separators `", "` and `": "`,
 * `ensure_ascii` escapes, and `repr(float)` for numbers (`51.0`, `1e-05`, `1e+16`).
 * @module
 */

/** Whether a JSON number should be printed as a Python `float` (`51.0`) or `int` (`51`). */
export type PyNumberStyle = 'float' | 'int';

/**
 * `repr(x)` of a Python float: shortest round-trip digits, fixed notation when the decimal
 * exponent is in [-4, 16), scientific otherwise, always with a `.0` or an exponent.
 */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  // toExponential() without an argument gives the shortest digits that round-trip.
  const [mant, expStr] = Math.abs(x).toExponential().split('e');
  const digits = mant.replace('.', '');
  const exp = Number(expStr);
  if (exp >= -4 && exp < 16) {
    if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
    const intPart = digits.length > exp + 1 ? digits.slice(0, exp + 1) : digits + '0'.repeat(exp + 1 - digits.length);
    const frac = digits.length > exp + 1 ? digits.slice(exp + 1) : '0';
    return `${sign}${intPart}.${frac}`;
  }
  const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  const e = Math.abs(exp) < 10 ? `0${Math.abs(exp)}` : String(Math.abs(exp));
  return `${sign}${m}e${exp < 0 ? '-' : '+'}${e}`;
}

/** `str(x)` of a Python number: integers print without a fraction, floats like `repr`. */
export function pyNumberStr(x: number, style: PyNumberStyle = 'float'): string {
  if (style === 'int' && Number.isInteger(x)) return String(x);
  return pyFloatRepr(x);
}

/**
 * Python's `round(x, 2)` for floats: the exact binary value is rounded to the nearest
 * hundredth, ties (only possible for exact multiples of 1/8) to even.
 */
export function pyRound2(x: number): number {
  if (!Number.isFinite(x)) return x;
  // toFixed works on the exact binary value and rounds ties away from zero; fix the ties.
  let fixed = Number(Math.abs(x).toFixed(2));
  const eighths = Math.abs(x) * 8;
  if (Number.isInteger(eighths) && eighths % 2 === 1) {
    // exact tie at the third decimal (…125, …375, …625, …875): round half to even.
    const hundredths = Math.round(Math.abs(x) * 100 - 0.5); // floor of the exact value * 100
    fixed = (hundredths % 2 === 0 ? hundredths : hundredths + 1) / 100;
  }
  const r = x < 0 ? -fixed : fixed;
  return r === 0 && x < 0 ? -0 : r;
}

const ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};

/** A JSON string literal as Python's `json.dumps` writes it with `ensure_ascii=True`. */
export function pyJsonString(s: string): string {
  let out = '"';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c < 0x7f && c !== 0x22 && c !== 0x5c) continue;
    if (i > start) out += s.slice(start, i);
    const ch = s[i];
    out += ESCAPES[ch] ?? `\\u${c.toString(16).padStart(4, '0')}`;
    start = i + 1;
  }
  return out + s.slice(start) + '"';
}

/** Options of {@link pyJsonDumps}. */
export interface PyJsonOptions {
  /** Sort object keys by code point (`sort_keys=True`). Default false: insertion order. */
  sortKeys?: boolean;
  /** How numbers print; default `'float'` (every number in tau2's retail schema is a float). */
  numbers?: PyNumberStyle;
  /**
   * Object keys whose numbers are Python `int` fields (printed without a fraction) while the
   * rest follow `numbers`, for schemas that mix both (e.g. a phone's `battery_level`).
   */
  intKeys?: ReadonlySet<string>;
}

/**
 * `json.dumps(value)` as CPython writes it (default separators, `ensure_ascii=True`).
 * `undefined` object members are skipped; `undefined` elsewhere becomes `null`.
 */
export function pyJsonDumps(value: unknown, options: PyJsonOptions = {}): string {
  const sortKeys = options.sortKeys ?? false;
  const style = options.numbers ?? 'float';
  const intKeys = options.intKeys;
  const write = (v: unknown, key?: string): string => {
    if (v === null || v === undefined) return 'null';
    switch (typeof v) {
      case 'string':
        return pyJsonString(v);
      case 'number':
        return pyNumberStr(v, intKeys && key !== undefined && intKeys.has(key) ? 'int' : style);
      case 'boolean':
        return v ? 'true' : 'false';
      case 'object': {
        if (Array.isArray(v)) return v.length === 0 ? '[]' : `[${v.map((x) => write(x)).join(', ')}]`;
        const obj = v as Record<string, unknown>;
        let keys = Object.keys(obj).filter((k) => obj[k] !== undefined);
        if (sortKeys) keys = keys.sort(compareCodePoints);
        if (keys.length === 0) return '{}';
        return `{${keys.map((k) => `${pyJsonString(k)}: ${write(obj[k], k)}`).join(', ')}}`;
      }
      default:
        return pyJsonString(String(v));
    }
  };
  return write(value);
}

/** Orders strings by Unicode code point, as Python's `sorted` does. */
export function compareCodePoints(a: string, b: string): number {
  if (a === b) return 0;
  // UTF-16 order equals code-point order unless surrogates meet BMP chars above U+D800.
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const ca = a.codePointAt(i) as number;
    const cb = b.codePointAt(i) as number;
    if (ca !== cb) return ca < cb ? -1 : 1;
    if (ca > 0xffff) i++;
  }
  return a.length < b.length ? -1 : 1;
}
