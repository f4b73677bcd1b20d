/**
 * Copy-on-write maps for world state.
 *
 * A {@link CowMap} is a frozen base record (shared by every copy, never mutated) plus a small
 * per-copy overlay of replaced entries. `fork()` costs O(overlay), so resetting an episode or
 * replaying a trajectory during grading never deep-clones the database; entities themselves are
 * frozen plain objects that tools replace rather than mutate.
 * @module
 */
import { compareCodePoints, pyJsonString } from './pyjson.js';

/** Recursively freezes a JSON-like value in place and returns it. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}

/** A string-keyed map with a shared frozen base and a private overlay of replaced values. */
export class CowMap<V> {
  /** The shared base: frozen and never written. */
  readonly base: Readonly<Record<string, V>>;
  private readonly overlay: Map<string, V>;
  private readonly baseKeys: readonly string[];

  /**
   * @param base - the shared entries (frozen by the caller or here).
   * @param overlay - replaced or added entries private to this map (copied, not shared).
   */
  constructor(base: Readonly<Record<string, V>>, overlay?: ReadonlyMap<string, V>, baseKeys?: readonly string[]) {
    this.base = Object.isFrozen(base) ? base : Object.freeze(base);
    this.overlay = new Map(overlay ?? []);
    this.baseKeys = baseKeys ?? Object.keys(this.base);
  }

  /** The value stored under `key`, or `undefined`. */
  get(key: string): V | undefined {
    const o = this.overlay.get(key);
    if (o !== undefined) return o;
    return Object.prototype.hasOwnProperty.call(this.base, key) ? this.base[key] : undefined;
  }

  /** Whether `key` is present. */
  has(key: string): boolean {
    return this.overlay.has(key) || Object.prototype.hasOwnProperty.call(this.base, key);
  }

  /** Replaces (or adds) the value under `key` in this map only. */
  set(key: string, value: V): void {
    this.overlay.set(key, value);
  }

  /** A copy that shares the base and copies the overlay: O(number of replaced entries). */
  fork(): CowMap<V> {
    return new CowMap(this.base, this.overlay, this.baseKeys);
  }

  /** Number of entries. */
  get size(): number {
    let extra = 0;
    for (const k of this.overlay.keys()) if (!Object.prototype.hasOwnProperty.call(this.base, k)) extra++;
    return this.baseKeys.length + extra;
  }

  /** Keys in insertion order (base order first, then added keys). */
  keys(): string[] {
    const out = this.baseKeys.slice();
    for (const k of this.overlay.keys()) if (!Object.prototype.hasOwnProperty.call(this.base, k)) out.push(k);
    return out;
  }

  /** Iterates `[key, value]` pairs in {@link keys} order. */
  *entries(): IterableIterator<[string, V]> {
    for (const k of this.keys()) yield [k, this.get(k) as V];
  }

  /** Iterates values in {@link keys} order. */
  *values(): IterableIterator<V> {
    for (const k of this.keys()) yield this.get(k) as V;
  }

  /** Keys whose value differs (by reference) from the base: the entries this copy replaced or added. */
  changedKeys(): string[] {
    return [...this.overlay.keys()];
  }

  /** A plain object with every entry (values shared, not copied). */
  toObject(): Record<string, V> {
    const out: Record<string, V> = {};
    for (const [k, v] of this.entries()) out[k] = v;
    return out;
  }
}

/**
 * A per-object cache of an entity's canonical JSON (entities are frozen, so the text never goes
 * stale): `serialize` runs once per entity object.
 */
export function canonicalCache<V extends object>(serialize: (entity: V) => string): (entity: V) => string {
  const cache = new WeakMap<V, string>();
  return (entity) => {
    let s = cache.get(entity);
    if (s === undefined) {
      s = serialize(entity);
      cache.set(entity, s);
    }
    return s;
  };
}

/**
 * One table of a `json.dumps(..., sort_keys=True)` dump: `{"id": <entity>, ...}` with ids in
 * code-point order and each entity's canonical JSON from `entityJSON`.
 */
export function sortedTableJSON<V>(map: CowMap<V>, entityJSON: (entity: V) => string): string {
  const keys = map.keys().sort(compareCodePoints);
  return `{${keys.map((k) => `${pyJsonString(k)}: ${entityJSON(map.get(k) as V)}`).join(', ')}}`;
}

/**
 * Whether two copies of the same base table hold the same entities, comparing only the entries
 * either replaced (by reference first, then by canonical JSON). `undefined` when the tables
 * do not share a base (the caller compares whole dumps then).
 */
export function cowMapsEqual<V>(a: CowMap<V>, b: CowMap<V>, entityJSON: (entity: V) => string): boolean | undefined {
  if (a.base !== b.base) return undefined;
  if (a.size !== b.size) return false;
  for (const k of new Set([...a.changedKeys(), ...b.changedKeys()])) {
    const x = a.get(k);
    const y = b.get(k);
    if (x === y) continue;
    if (x === undefined || y === undefined || entityJSON(x) !== entityJSON(y)) return false;
  }
  return true;
}
