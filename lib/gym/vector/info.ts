/**
 * Vector infos (Gymnasium's `VectorEnv._add_info`): the info of sub-environment `i` is merged
 * into one dictionary where every key holds an array over the sub-environments and `_key` a
 * boolean mask of the sub-environments that reported it. Numbers go to a `Float64Array`
 * (0 where absent), booleans to a `boolean[]` (false), typed arrays of one length and dtype to
 * one stacked typed array (`numEnvs × length`, zeros where absent), plain objects recursively to
 * nested vector infos, and anything else to an array (null where absent). When sub-environments
 * report different kinds of values for one key, the key falls back to a plain array of the
 * values. As in Gymnasium, `final_obs` (same-step autoreset) is never batched: it is an array
 * with each sub-environment's own last observation and null where no episode ended.
 * @module
 */
import { TYPED_ARRAYS, dtypeOf, type TypedArray } from '../spaces/space.js';
import type { Info } from '../types.js';

function isPlainObject(x: unknown): x is Record<string, unknown> {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return false;
  const proto = Object.getPrototypeOf(x) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Converts a column to a plain array of the values at the masked positions (null elsewhere). */
function toPlain(column: unknown, mask: readonly boolean[], numEnvs: number): unknown[] {
  if (Array.isArray(column)) return column;
  const out = new Array<unknown>(numEnvs).fill(null);
  const dt = dtypeOf(column);
  if (dt !== null) {
    const arr = column as TypedArray;
    const stride = arr.length / numEnvs;
    for (let i = 0; i < numEnvs; i++) {
      if (!mask[i]) continue;
      out[i] = column instanceof Float64Array && stride === 1 ? arr[i] : arr.slice(i * stride, (i + 1) * stride);
    }
  }
  return out;
}

function kindOf(value: unknown): 'number' | 'boolean' | 'typed' | 'other' {
  if (typeof value === 'number') return 'number';
  if (typeof value === 'boolean') return 'boolean';
  if (dtypeOf(value) !== null) return 'typed';
  return 'other';
}

/** Merges the info of sub-environment `index` into the vector info `infos` (mutated and returned). */
export function addInfo(infos: Info, envInfo: Info, index: number, numEnvs: number): Info {
  for (const [key, value] of Object.entries(envInfo)) {
    const maskKey = `_${key}`;
    const mask = (infos[maskKey] as boolean[] | undefined) ?? new Array<boolean>(numEnvs).fill(false);
    if (key === 'final_obs') {
      const existing = infos[key];
      const column = Array.isArray(existing) ? existing : new Array<unknown>(numEnvs).fill(null);
      column[index] = value;
      infos[key] = column;
    } else if (isPlainObject(value)) {
      const existing = infos[key];
      infos[key] = addInfo(isPlainObject(existing) ? existing : {}, value, index, numEnvs);
    } else {
      let column = infos[key];
      const kind = kindOf(value);
      if (column === undefined) {
        if (kind === 'number') column = new Float64Array(numEnvs);
        else if (kind === 'boolean') column = new Array<boolean>(numEnvs).fill(false);
        else if (kind === 'typed') column = new TYPED_ARRAYS[dtypeOf(value)!]((value as TypedArray).length * numEnvs);
        else column = new Array<unknown>(numEnvs).fill(null);
      }
      if (kind === 'number' && column instanceof Float64Array && column.length === numEnvs) {
        column[index] = value as number;
      } else if (
        kind === 'typed' &&
        dtypeOf(column) === dtypeOf(value) &&
        (column as TypedArray).length === (value as TypedArray).length * numEnvs
      ) {
        (column as TypedArray).set(value as TypedArray, index * (value as TypedArray).length);
      } else if (Array.isArray(column)) {
        const allBoolean = column.every((v) => typeof v === 'boolean');
        if (kind !== 'boolean' && allBoolean) column = column.map((v, i) => (mask[i] ? v : null));
        (column as unknown[])[index] = value;
      } else {
        column = toPlain(column, mask, numEnvs);
        (column as unknown[])[index] = value;
      }
      infos[key] = column;
    }
    mask[index] = true;
    infos[maskKey] = mask;
  }
  return infos;
}
