/**
 * A small subset of JSON Schema, enough for the `parameters` of OpenAI-style function tools:
 * `type` (one or a list of `object`, `string`, `number`, `integer`, `boolean`, `array`, `null`),
 * `properties`, `required`, `additionalProperties` (boolean), `items`, `enum`, `minimum`,
 * `maximum`, `minLength`, `maxLength`, `minItems`, `maxItems`. Other keywords are ignored.
 * @module
 */
import { structuralEqual } from '../../util/structural-equal.js';
import type { RandomGenerator } from '../random.js';

/** The JSON Schema subset understood by {@link validateJson} and {@link sampleJson}. */
export interface JsonSchema {
  type?: JsonType | JsonType[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  description?: string;
  [keyword: string]: unknown;
}

/** JSON value types. */
export type JsonType = 'object' | 'string' | 'number' | 'integer' | 'boolean' | 'array' | 'null';

function typeOf(value: unknown): JsonType | null {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  switch (typeof value) {
    case 'string':
      return 'string';
    case 'boolean':
      return 'boolean';
    case 'number':
      return Number.isFinite(value) ? (Number.isInteger(value) ? 'integer' : 'number') : null;
    case 'object':
      return 'object';
    default:
      return null;
  }
}

/** JSON Schema's equality of instances: by structure, object keys in any order. */
function sameJson(a: unknown, b: unknown): boolean {
  return structuralEqual(a, b, { nanEqual: false });
}

/** Returns the first violation of `schema` by `value` as a message with its path, or null when it conforms. */
export function validateJson(value: unknown, schema: JsonSchema, path = '$'): string | null {
  const actual = typeOf(value);
  if (actual === null) return `${path}: not a JSON value`;
  if (schema.type !== undefined) {
    const allowed = Array.isArray(schema.type) ? schema.type : [schema.type];
    const ok = allowed.some((t) => t === actual || (t === 'number' && actual === 'integer'));
    if (!ok) return `${path}: expected ${allowed.join(' | ')}, got ${actual}`;
  }
  if (schema.enum !== undefined && !schema.enum.some((e) => sameJson(e, value)))
    return `${path}: not one of ${JSON.stringify(schema.enum)}`;
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) return `${path}: ${value} < minimum ${schema.minimum}`;
    if (schema.maximum !== undefined && value > schema.maximum) return `${path}: ${value} > maximum ${schema.maximum}`;
  }
  if (typeof value === 'string') {
    const len = Array.from(value).length;
    if (schema.minLength !== undefined && len < schema.minLength) return `${path}: shorter than ${schema.minLength}`;
    if (schema.maxLength !== undefined && len > schema.maxLength) return `${path}: longer than ${schema.maxLength}`;
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems)
      return `${path}: fewer than ${schema.minItems} items`;
    if (schema.maxItems !== undefined && value.length > schema.maxItems)
      return `${path}: more than ${schema.maxItems} items`;
    if (schema.items) {
      for (let i = 0; i < value.length; i++) {
        const err = validateJson(value[i], schema.items, `${path}[${i}]`);
        if (err) return err;
      }
    }
  }
  if (actual === 'object') {
    const obj = value as Record<string, unknown>;
    for (const key of schema.required ?? []) if (!(key in obj)) return `${path}: missing required property "${key}"`;
    const props = schema.properties ?? {};
    for (const [key, v] of Object.entries(obj)) {
      if (key in props) {
        const err = validateJson(v, props[key], `${path}.${key}`);
        if (err) return err;
      } else if (schema.additionalProperties === false) {
        return `${path}: unexpected property "${key}"`;
      } else if (typeof schema.additionalProperties === 'object') {
        const err = validateJson(v, schema.additionalProperties, `${path}.${key}`);
        if (err) return err;
      }
    }
  }
  return null;
}

const WORD = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** A random value conforming to `schema` (required properties always, optional ones with probability 1/2). */
export function sampleJson(schema: JsonSchema, rng: RandomGenerator, depth = 0): unknown {
  if (schema.enum !== undefined && schema.enum.length > 0) return structuredClone(rng.choice(schema.enum));
  const types =
    schema.type === undefined
      ? schema.properties
        ? ['object']
        : ['string']
      : Array.isArray(schema.type)
        ? schema.type
        : [schema.type];
  const type = rng.choice(types as JsonType[]);
  switch (type) {
    case 'null':
      return null;
    case 'boolean':
      return rng.integers(2) === 1;
    case 'integer': {
      // a range wider than the generator draws (2^53: e.g. zod's safe-integer bounds) is
      // sampled within ±2^52, still inside the schema's bounds
      const min = Math.ceil(schema.minimum ?? -100);
      const lo = Math.max(min, -(2 ** 52));
      const hi = Math.min(Math.floor(schema.maximum ?? 100), 2 ** 52 - 1);
      return lo > hi ? min : rng.integers(lo, hi + 1);
    }
    case 'number': {
      const lo = schema.minimum ?? -100;
      const hi = schema.maximum ?? 100;
      return lo >= hi ? lo : rng.uniform(lo, hi);
    }
    case 'string': {
      const lo = schema.minLength ?? 1;
      const hi = Math.max(lo, schema.maxLength ?? Math.max(lo, 12));
      const n = rng.integers(lo, hi + 1);
      let s = '';
      for (let i = 0; i < n; i++) s += WORD[rng.integers(WORD.length)];
      return s;
    }
    case 'array': {
      const lo = schema.minItems ?? 0;
      const hi = Math.max(lo, Math.min(schema.maxItems ?? 3, lo + 3));
      const n = depth > 3 ? lo : rng.integers(lo, hi + 1);
      return Array.from({ length: n }, () => sampleJson(schema.items ?? { type: 'string' }, rng, depth + 1));
    }
    default: {
      const out: Record<string, unknown> = {};
      const required = new Set(schema.required ?? []);
      for (const [key, sub] of Object.entries(schema.properties ?? {})) {
        if (required.has(key) || (depth <= 3 && rng.integers(2) === 1)) out[key] = sampleJson(sub, rng, depth + 1);
      }
      for (const key of required) if (!(key in out)) out[key] = sampleJson({ type: 'string' }, rng, depth + 1);
      return out;
    }
  }
}
