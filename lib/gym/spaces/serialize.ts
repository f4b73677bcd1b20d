/**
 * JSON (de)serialisation of spaces: `space.toJSON()` describes a space, {@link spaceFromJSON}
 * rebuilds it (without its generator state). Infinite Box bounds are written as `"inf"` /
 * `"-inf"`. Custom spaces join with {@link registerSpaceType}. (Samples are serialised with
 * `space.toJsonable(samples)` / `space.fromJsonable(json)`.)
 * @module
 */
import { Box } from './box.js';
import { Dict, Tuple, type AnySpace } from './composite.js';
import { Discrete } from './discrete.js';
import { Message, type ChatRole, type ToolSpec } from './message.js';
import { MultiBinary } from './multi-binary.js';
import { MultiDiscrete, type IntDType } from './multi-discrete.js';
import type { NestedNumbers } from './nested.js';
import { Sequence } from './sequence.js';
import type { DType, SpaceJSON } from './space.js';
import { Text } from './text.js';

/** Rebuilds a space from its JSON description. */
export type SpaceReviver = (json: SpaceJSON, revive: (json: SpaceJSON) => AnySpace) => AnySpace;

function decodeBound(value: unknown): NestedNumbers {
  if (value === 'inf') return Infinity;
  if (value === '-inf') return -Infinity;
  if (Array.isArray(value)) return value.map(decodeBound);
  if (typeof value === 'number') return value;
  throw new TypeError(`spaceFromJSON: invalid Box bound ${JSON.stringify(value)}`);
}

const revivers = new Map<string, SpaceReviver>([
  ['Discrete', (j) => new Discrete(j.n as number, { start: j.start as number })],
  ['Box', (j) => new Box(decodeBound(j.low), decodeBound(j.high), j.shape as number[], j.dtype as DType)],
  [
    'MultiDiscrete',
    (j) => new MultiDiscrete(j.nvec as NestedNumbers, { start: j.start as NestedNumbers, dtype: j.dtype as IntDType }),
  ],
  ['MultiBinary', (j) => new MultiBinary(j.n as number | number[])],
  ['Text', (j) => new Text(j.maxLength as number, { minLength: j.minLength as number, charset: j.charset as string })],
  ['Dict', (j, revive) => new Dict((j.spaces as Array<[string, SpaceJSON]>).map(([k, s]) => [k, revive(s)] as const))],
  ['Tuple', (j, revive) => new Tuple((j.spaces as SpaceJSON[]).map((s) => revive(s)))],
  ['Sequence', (j, revive) => new Sequence(revive(j.space as SpaceJSON), { stack: j.stack === true })],
  [
    'Message',
    (j) =>
      new Message({
        roles: j.roles as ChatRole[],
        tools: j.tools as ToolSpec[],
        maxContentLength: j.maxContentLength as number,
        minContentLength: j.minContentLength as number,
        maxToolCalls: j.maxToolCalls as number,
      }),
  ],
]);

/** Registers the reviver of a custom space type (the `type` its `toJSON()` writes). */
export function registerSpaceType(type: string, reviver: SpaceReviver): void {
  if (typeof type !== 'string' || type.length === 0)
    throw new TypeError('registerSpaceType: type must be a non-empty string');
  revivers.set(type, reviver);
}

/** Rebuilds a space from `space.toJSON()` (a string is parsed first). */
export function spaceFromJSON(json: SpaceJSON | string): AnySpace {
  const obj = (typeof json === 'string' ? JSON.parse(json) : json) as SpaceJSON;
  if (typeof obj !== 'object' || obj === null || typeof obj.type !== 'string')
    throw new TypeError('spaceFromJSON: expected an object with a "type"');
  const reviver = revivers.get(obj.type);
  if (!reviver)
    throw new TypeError(`spaceFromJSON: unknown space type "${obj.type}" (register it with registerSpaceType)`);
  return reviver(obj, spaceFromJSON);
}
