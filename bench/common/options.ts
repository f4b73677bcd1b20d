/**
 * Option checking of the benchmarks: named attention shapes, zod schemas shared by the memory
 * and speed benchmarks, and parsers of command-line strings. Nonsense (negative or zero sizes,
 * a zero limit, unknown shapes or models, …) is refused with a {@link BenchOptionError} whose
 * message names the option.
 */
import { z } from 'zod';

import { BENCH_MODELS } from './train-step.js';

/** Thrown for an invalid benchmark option; the message names the option. */
export class BenchOptionError extends RangeError {
  constructor(message: string) {
    super(message);
    this.name = 'BenchOptionError';
  }
}

/** An attention layer shape: heads, head size and the sliding window of the windowed layers. */
export interface AttentionLayerShape {
  qHeads: number;
  kvHeads: number;
  headDim: number;
  window: number;
}

/** Attention shapes by name (`gpt-oss-20b` is the default of the benchmarks). */
export const ATTENTION_SHAPES: Readonly<Record<string, Readonly<AttentionLayerShape>>> = Object.freeze({
  'gpt-oss-20b': Object.freeze({ qHeads: 64, kvHeads: 8, headDim: 64, window: 128 }),
  'gpt-oss-120b': Object.freeze({ qHeads: 64, kvHeads: 8, headDim: 64, window: 128 }),
  small: Object.freeze({ qHeads: 8, kvHeads: 2, headDim: 64, window: 128 }),
  tiny: Object.freeze({ qHeads: 4, kvHeads: 2, headDim: 32, window: 64 }),
});

/** The shape called `name`; throws naming the known ones. */
export function attentionShape(name: string): AttentionLayerShape {
  const s = Object.hasOwn(ATTENTION_SHAPES, name) ? ATTENTION_SHAPES[name] : undefined;
  if (!s)
    throw new BenchOptionError(`--shape: unknown shape '${name}' (known: ${Object.keys(ATTENTION_SHAPES).join(', ')})`);
  return { ...s };
}

const posInt = z.number().int().positive();
const seqLen = posInt.max(2 ** 22);

/** Schema of an attention layer shape. */
export const shapeSchema = z
  .object({
    qHeads: posInt.max(1024),
    kvHeads: posInt.max(1024),
    headDim: posInt.max(1024),
    window: z.number().int().nonnegative(),
  })
  .strict()
  .refine((s) => s.qHeads % s.kvHeads === 0, { message: 'kvHeads must divide qHeads', path: ['kvHeads'] });

/** Options both benchmarks share. */
export const commonSchema = z.object({
  shape: shapeSchema.optional(),
  masks: z
    .array(z.enum(['window', 'full']))
    .min(1)
    .optional(),
  repeats: posInt.max(1000).optional(),
  seed: z.number().int().optional(),
  device: z.enum(['cpu', 'cuda']).optional(),
  log: z.union([z.function(), z.null()]).optional(),
});

/** Schema of the memory benchmark's options. */
export const memorySchema = commonSchema
  .extend({
    attentionSeqLens: z.array(seqLen).optional(),
    stepSeqLens: z.array(seqLen).optional(),
    models: z.array(z.enum(BENCH_MODELS as [string, ...string[]])).optional(),
    layers: posInt.max(1024).optional(),
    limitBytes: z.number().positive().finite().optional(),
    maxGflop: z.number().positive().optional(),
  })
  .strict();

/** Schema of the speed benchmark's options. */
export const speedSchema = commonSchema
  .extend({
    attentionSeqLens: z.array(seqLen).optional(),
    stepSeqLens: z.array(seqLen).optional(),
    models: z.array(z.enum(BENCH_MODELS as [string, ...string[]])).optional(),
    layers: posInt.max(1024).optional(),
    peakSeconds: z.number().positive().max(60).optional(),
  })
  .strict();

/** Checks `value` against `schema`; the error lists each problem as `option: message`. */
export function validateOptions<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const problems = r.error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'options'}: ${i.message}`);
  throw new BenchOptionError(`invalid ${what} options: ${problems.join('; ')}`);
}

/** Parses `1024,2048` (or `none` / empty: no points) into positive integers. */
export function parseIntList(option: string, text: string): number[] {
  if (text.trim() === '' || text.trim() === 'none') return [];
  return text.split(',').map((part) => parsePositiveInt(option, part));
}

/** Parses a positive integer. */
export function parsePositiveInt(option: string, text: string): number {
  const t = text.trim();
  if (!/^\d+$/.test(t) || Number(t) <= 0 || !Number.isSafeInteger(Number(t)))
    throw new BenchOptionError(`${option}: '${text}' is not a positive integer`);
  return Number(t);
}

/** Parses a positive number of GiB into bytes (`0`, negatives and garbage are refused). */
export function parseGiB(option: string, text: string): number {
  const v = Number(text);
  if (text.trim() === '' || !Number.isFinite(v) || v <= 0)
    throw new BenchOptionError(`${option}: '${text}' is not a positive number of GiB`);
  return Math.round(v * 2 ** 30);
}

/** Parses a positive number. */
export function parsePositive(option: string, text: string): number {
  const v = Number(text);
  if (text.trim() === '' || !Number.isFinite(v) || v <= 0)
    throw new BenchOptionError(`${option}: '${text}' is not a positive number`);
  return v;
}

/** Parses a comma list of names from `allowed`. */
export function parseNames<T extends string>(option: string, text: string, allowed: readonly T[]): T[] {
  const names = text.split(',').map((s) => s.trim());
  for (const n of names)
    if (!(allowed as readonly string[]).includes(n))
      throw new BenchOptionError(`${option}: unknown value '${n}' (expected ${allowed.join(', ')})`);
  return names as T[];
}
