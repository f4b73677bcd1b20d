// Plain float64 reference of sink attention, written straight from DESIGN.md ("Sink attention
// — semantics") with no code shared with the library: mask predicates, forward (out, lse) and
// the backward equations. Plus seeded random inputs and tolerance checks for the tests.
import type { Test } from 'tap';

/** Seeded generator (mulberry32) with normal samples (Box-Muller). */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  uniform(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  normal(): number {
    const u = Math.max(this.uniform(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.uniform());
  }
  /** n normal samples times `scale` (never all zeros). */
  floats(n: number, scale = 1): Float32Array {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = this.normal() * scale;
    return a;
  }
  int(n: number): number {
    return Math.floor(this.uniform() * n);
  }
}

export interface Shape {
  batch: number;
  seqLen: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
  kvLen?: number;
  queryOffset?: number;
}

/** The reference's own mask description (mirrors the public MaskSpec data, interpreted here). */
export type RefMask =
  | { kind: 'all' }
  | { kind: 'causal' }
  | { kind: 'slidingWindow'; window: number }
  | { kind: 'prefix'; length: number }
  | { kind: 'documents'; ids: Int32Array }
  | { kind: 'and' | 'or'; masks: readonly RefMaskSpec[] }
  | { kind: 'not'; mask: RefMaskSpec };
export type RefMaskSpec = RefMask | { causal?: boolean; window?: number; prefix?: number; documentIds?: Int32Array };

/** allowed(b, i, j) for absolute query position i and key position j, per DESIGN.md. */
export function maskFn(spec: RefMaskSpec | undefined, kvLen: number): (b: number, i: number, j: number) => boolean {
  if (spec === undefined) return (_b, i, j) => j <= i;
  if (!('kind' in spec)) {
    const causalOn = spec.causal ?? true;
    const W = spec.window ?? 0;
    const P = spec.prefix ?? 0;
    const ids = spec.documentIds;
    return (b, i, j) => {
      if (causalOn && j > i) return false;
      if (W > 0 && !(Math.abs(i - j) <= W - 1 || j < P)) return false;
      if (ids && ids[b * kvLen + i] !== ids[b * kvLen + j]) return false;
      return true;
    };
  }
  switch (spec.kind) {
    case 'all':
      return () => true;
    case 'causal':
      return (_b, i, j) => j <= i;
    case 'slidingWindow':
      return (_b, i, j) => Math.abs(i - j) <= spec.window - 1;
    case 'prefix':
      return (_b, _i, j) => j < spec.length;
    case 'documents':
      return (b, i, j) => spec.ids[b * kvLen + i] === spec.ids[b * kvLen + j];
    case 'not': {
      const f = maskFn(spec.mask, kvLen);
      return (b, i, j) => !f(b, i, j);
    }
    default: {
      const fs = spec.masks.map((m) => maskFn(m, kvLen));
      return spec.kind === 'and' ? (b, i, j) => fs.every((f) => f(b, i, j)) : (b, i, j) => fs.some((f) => f(b, i, j));
    }
  }
}

export interface RefOptions {
  mask?: RefMaskSpec;
  scale?: number;
  softcap?: number;
}

interface Row {
  keys: number[];
  z: number[];
  t: number[]; // tanh values (softcap) for the backward
  L: number;
  P: number[];
  o: Float64Array;
}

function rows(q: ArrayLike<number>, k: ArrayLike<number>, v: ArrayLike<number>, sinks: ArrayLike<number> | null,
  s: Shape, o: RefOptions, visit: (b: number, h: number, i: number, kvh: number, row: Row) => void): void {
  const { batch: B, seqLen: T, qHeads: Hq, kvHeads: Hkv, headDim: D } = s;
  const Tk = s.kvLen ?? T;
  const off = s.queryOffset ?? 0;
  const c = o.scale ?? 1 / Math.sqrt(D);
  const C = o.softcap ?? 0;
  const allowed = maskFn(o.mask, Tk);
  const qIdx = (b: number, i: number, h: number) => ((b * T + i) * Hq + h) * D;
  const kIdx = (b: number, j: number, h: number) => ((b * Tk + j) * Hkv + h) * D;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const kvh = Math.floor(h / (Hq / Hkv));
      for (let i = 0; i < T; i++) {
        const keys: number[] = [];
        const z: number[] = [];
        const t: number[] = [];
        for (let j = 0; j < Tk; j++) {
          if (!allowed(b, off + i, j)) continue;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q[qIdx(b, i, h) + d]! * k[kIdx(b, j, kvh) + d]!;
          let zz = c * dot;
          if (C > 0) {
            const th = Math.tanh(zz / C);
            t.push(th);
            zz = C * th;
          }
          keys.push(j);
          z.push(zz);
        }
        const sink = sinks ? sinks[h]! : -Infinity;
        let m = sink;
        for (const x of z) m = Math.max(m, x);
        let L = -Infinity;
        if (m > -Infinity) {
          let sum = Math.exp(sink - m);
          for (const x of z) sum += Math.exp(x - m);
          L = m + Math.log(sum);
        }
        const P = z.map((x) => (L === -Infinity ? 0 : Math.exp(x - L)));
        const out = new Float64Array(D);
        keys.forEach((j, n) => {
          for (let d = 0; d < D; d++) out[d] += P[n]! * v[kIdx(b, j, kvh) + d]!;
        });
        visit(b, h, i, kvh, { keys, z, t, L, P, o: out });
      }
    }
  }
}

/** Forward: out [B,T,Hq,D] and lse [B,Hq,T] in float64. */
export function refForward(q: ArrayLike<number>, k: ArrayLike<number>, v: ArrayLike<number>,
  sinks: ArrayLike<number> | null, s: Shape, o: RefOptions = {}): { out: Float64Array; lse: Float64Array } {
  const out = new Float64Array(s.batch * s.seqLen * s.qHeads * s.headDim);
  const lse = new Float64Array(s.batch * s.qHeads * s.seqLen);
  rows(q, k, v, sinks, s, o, (b, h, i, _kvh, r) => {
    out.set(r.o, ((b * s.seqLen + i) * s.qHeads + h) * s.headDim);
    lse[(b * s.qHeads + h) * s.seqLen + i] = r.L;
  });
  return { out, lse };
}

/** Backward from the equations of DESIGN.md (optional dLse adds the gradient of the lse output). */
export function refBackward(q: ArrayLike<number>, k: ArrayLike<number>, v: ArrayLike<number>,
  sinks: ArrayLike<number> | null, dOut: ArrayLike<number>, s: Shape, o: RefOptions = {}, dLse?: ArrayLike<number>):
  { dq: Float64Array; dk: Float64Array; dv: Float64Array; dSinks: Float64Array | null } {
  const { seqLen: T, qHeads: Hq, kvHeads: Hkv, headDim: D } = s;
  const Tk = s.kvLen ?? T;
  const c = o.scale ?? 1 / Math.sqrt(D);
  const dq = new Float64Array(s.batch * T * Hq * D);
  const dk = new Float64Array(s.batch * Tk * Hkv * D);
  const dv = new Float64Array(s.batch * Tk * Hkv * D);
  const dSinks = sinks ? new Float64Array(Hq) : null;
  rows(q, k, v, sinks, s, o, (b, h, i, kvh, r) => {
    const qo = ((b * T + i) * Hq + h) * D;
    let Di = 0;
    for (let d = 0; d < D; d++) Di += dOut[qo + d]! * r.o[d]!;
    if (dLse) Di -= dLse[(b * Hq + h) * T + i]!;
    r.keys.forEach((j, n) => {
      const ko = ((b * Tk + j) * Hkv + kvh) * D;
      let dP = 0;
      for (let d = 0; d < D; d++) dP += dOut[qo + d]! * v[ko + d]!;
      let dZ = r.P[n]! * (dP - Di);
      if ((o.softcap ?? 0) > 0) dZ *= 1 - r.t[n]! * r.t[n]!;
      for (let d = 0; d < D; d++) {
        dq[qo + d] += c * dZ * k[ko + d]!;
        dk[ko + d] += c * dZ * q[qo + d]!;
        dv[ko + d] += r.P[n]! * dOut[qo + d]!;
      }
    });
    if (dSinks && sinks && r.L > -Infinity) dSinks[h] -= Math.exp(sinks[h]! - r.L) * Di;
  });
  return { dq, dk, dv, dSinks };
}

/**
 * Checks |a - e| <= rtol * (|e| + max|e|) elementwise (relative error with an absolute floor
 * scaled by the tensor's magnitude); infinities must match exactly; NaN fails.
 */
export function expectClose(t: Test, actual: ArrayLike<number>, expected: ArrayLike<number>, name: string,
  rtol = 1e-5): void {
  if (actual.length !== expected.length) {
    t.fail(`${name}: length ${actual.length} != ${expected.length}`);
    return;
  }
  let scale = 0;
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i]!;
    if (Number.isFinite(e)) scale = Math.max(scale, Math.abs(e));
  }
  let worst = 0;
  let at = -1;
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    let r: number;
    if (!Number.isFinite(e) || !Number.isFinite(a)) r = Object.is(a, e) || a === e ? 0 : Infinity;
    else r = Math.abs(a - e) / (rtol * (Math.abs(e) + scale) + 1e-30);
    if (r > worst || Number.isNaN(r)) {
      worst = Number.isNaN(r) ? Infinity : r;
      at = i;
    }
  }
  if (worst <= 1) t.pass(`${name} within ${rtol} (worst ${(worst * rtol).toExponential(2)})`);
  else t.fail(`${name}: element ${at} is ${actual[at]}, expected ${expected[at]} (error ${(worst * rtol).toExponential(2)} > ${rtol})`);
}

/** Random document ids [batch * len]: sorted runs (packed sequences) with a few lengths. */
export function packedIds(rng: Rng, batch: number, len: number, docs: number): Int32Array {
  const ids = new Int32Array(batch * len);
  for (let b = 0; b < batch; b++) {
    const cuts = new Set<number>();
    while (cuts.size < Math.min(docs - 1, len - 1)) cuts.add(1 + rng.int(len - 1));
    let id = 0;
    for (let i = 0; i < len; i++) {
      if (cuts.has(i)) id++;
      ids[b * len + i] = id + 10 * b;
    }
  }
  return ids;
}
