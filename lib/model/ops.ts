/**
 * The model ops as typed functions over Float32Arrays (row-major). Each forward returns its
 * outputs, allocating any that are not passed in; each backward returns its gradients.
 * Convention for gradient outputs: `undefined` allocates a zero-filled array, `null` skips
 * that gradient, an array is used as given. Parameter gradients (`dweight`, `dbias`,
 * `dtable`) are accumulated (`+=`); activation gradients are written, or accumulated with
 * `accumulate: true`. Bad arguments throw TypeError/RangeError naming the argument.
 * @module
 */
import { resolveDevice, type DeviceRequest } from '../native/device.js';
import { DeviceUnavailableError } from '../native/errors.js';
import type { RopeScaling } from './config.js';
import {
  type GemmArgs,
  type GemmInfo,
  type Mxfp4Data,
  type NativeMoeArgs,
  type NativeMoeState,
  modelAddon,
} from './native.js';

/**
 * Where an op runs: `device` of its options. Unlike the attention and GRPO functions the ops
 * default to `'cpu'` (they are the building blocks of CPU code over host arrays); `'cuda'` runs
 * the CUDA kernels (the arrays are copied to the GPU and the outputs back: for tests and single
 * calls; the transformer keeps its tensors on the device) and `'auto'` picks CUDA when this build
 * has the CUDA model kernels and a GPU is usable.
 */
export interface OpDevice {
  /** Default `'cpu'`. */
  device?: DeviceRequest;
}

/**
 * The concrete device of a model op: `'cuda'` only when requested (or `'auto'`) and this build
 * has CUDA model kernels and a usable GPU; an explicit `'cuda'` without them throws
 * {@link DeviceUnavailableError}.
 */
export function modelOpsDevice(request: DeviceRequest = 'cpu'): 'cpu' | 'cuda' {
  if (request === 'cpu') return 'cpu';
  const device = resolveDevice(request);
  if (device === 'cuda' && !modelAddon().modelOpsDevices().includes('cuda')) {
    if (request === 'cuda') throw new DeviceUnavailableError('cuda', 'this build has no CUDA model kernels');
    return 'cpu';
  }
  return device;
}

/** Float32Array of n zeros. */
function zeros(n: number): Float32Array {
  return new Float32Array(n);
}

/** `given` when an array, a new zeroed array of `n` when undefined, null when null. */
function grad(given: Float32Array | null | undefined, n: number): Float32Array | null {
  return given === undefined ? zeros(n) : given;
}

// ---- GEMM -------------------------------------------------------------------------------------

/** `c = alpha * op(a) * op(b) + beta * c` in place (see {@link GemmArgs}); blocked, vectorised, multi-threaded. */
export function gemm(args: GemmArgs & OpDevice): void {
  modelAddon().gemm(isObject(args) ? { ...args, device: modelOpsDevice(args.device) } : args);
}

/** Options objects get a resolved `device`; anything else reaches the addon as is (its TypeError). */
function isObject(x: unknown): x is object {
  return typeof x === 'object' && x !== null;
}

/** Like {@link gemm}, off the main thread; resolves when `c` is written, rejects on bad arguments. */
export async function gemmAsync(args: GemmArgs): Promise<void> {
  await modelAddon().gemmAsync(isObject(args) ? { ...args, device: undefined } : args);
}

/** The same contract computed by a plain scalar triple loop (benchmark baseline). */
export function gemmNaive(args: GemmArgs): void {
  modelAddon().gemmNaive(isObject(args) ? { ...args, device: undefined } : args);
}

/** Options of {@link matmul}. */
export interface MatmulOptions {
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
  beta?: number;
  /** m x n output (accumulated into with beta != 0); allocated when absent. */
  out?: Float32Array;
  /** Default `'cpu'` (see {@link OpDevice}). */
  device?: DeviceRequest;
}

/** Returns `op(a) . op(b)` (m x n); shapes as in {@link GemmArgs}. */
export function matmul(
  a: Float32Array,
  b: Float32Array,
  m: number,
  n: number,
  k: number,
  options: MatmulOptions = {},
): Float32Array {
  const c = options.out ?? zeros(m * n);
  modelAddon().gemm({
    a,
    b,
    c,
    m,
    n,
    k,
    transA: options.transA,
    transB: options.transB,
    alpha: options.alpha,
    beta: options.beta,
    device: modelOpsDevice(options.device),
  });
  return c;
}

/** The GEMM micro-kernel selected for this CPU. */
export function gemmInfo(): GemmInfo {
  return modelAddon().gemmInfo();
}

/**
 * The operand precision of the CUDA GEMMs (linear layers forward and backward, LoRA, the MoE
 * experts and router), like PyTorch's `torch.set_float32_matmul_precision`:
 * - `'highest'` (the default): float32 arithmetic on float32 operands (bfloat16 weights widened
 *   exactly): the CUDA results equal the CPU kernels' up to summation order.
 * - `'medium'`: the tensor cores: both operands rounded to bfloat16 (bfloat16 weights as they
 *   are) — or to float16, see {@link MatmulOperandDtype} — products summed in float32; each output
 *   within 2^-12 of the sum of its terms' magnitudes of the float64 product of the rounded
 *   operands. What transformers' bfloat16 forward computes, at tensor-core speed.
 * The CPU kernels are float32 either way. docs/cuda.md, "Numerics of the GEMMs".
 */
export type MatmulPrecision = 'highest' | 'medium';

/**
 * The tensor cores' operand type under {@link MatmulPrecision} `'medium'`, like the dtype of
 * PyTorch's autocast: `'bfloat16'` (the default: float32's range, 8 significant bits) or
 * `'float16'` (11 significant bits, finite only up to 65504: a larger operand becomes infinity,
 * as in PyTorch's float16 autocast, so it suits activations known to stay in range). bfloat16
 * weights and packed MXFP4 experts are widened and rounded to float16 — exact within its normal
 * range.
 */
export type MatmulOperandDtype = 'bfloat16' | 'float16';

/** Options of {@link setMatmulPrecision}. */
export interface MatmulPrecisionOptions {
  /** The tensor cores' operand type (with `'medium'` only; default `'bfloat16'`). */
  dtype?: MatmulOperandDtype;
}

/** The current {@link MatmulPrecision} of the CUDA GEMMs (process-wide). */
export function matmulPrecision(): MatmulPrecision {
  return modelAddon().matmulPrecision();
}

/** The current {@link MatmulOperandDtype} (`'bfloat16'` unless set with `'medium'`). */
export function matmulOperandDtype(): MatmulOperandDtype {
  return modelAddon().matmulOperandDtype();
}

/**
 * Sets the {@link MatmulPrecision} of the CUDA GEMMs, and with `'medium'` the tensor cores'
 * operand type (`options.dtype`, default `'bfloat16'`), for the whole process (GEMMs launched
 * after the call); a RangeError names any other value, or a dtype given with `'highest'`.
 * @example setMatmulPrecision('medium', { dtype: 'float16' })
 */
export function setMatmulPrecision(precision: MatmulPrecision, options: MatmulPrecisionOptions = {}): void {
  modelAddon().setMatmulPrecision(precision, options.dtype);
}

/** The instruction set of the model ops: `'avx512'`, `'avx2'` or `'generic'` (SINKFLEX_CPU_FEATURES can force a lower one). */
export function opsIsa(): string {
  return modelAddon().opsIsa();
}

/** Measures the FMA throughput of all kernel threads for about `seconds`: the machine's peak estimate in GFLOP/s. */
export function fmaPeakGflops(seconds = 0.25): number {
  return modelAddon().fmaPeakGflops(seconds);
}

// ---- linear -----------------------------------------------------------------------------------

/** Shapes of a linear layer applied to `rows` tokens. */
export interface LinearShape {
  rows: number;
  inFeatures: number;
  outFeatures: number;
}

/**
 * A weight matrix: float32 values, or bfloat16 bits (a Uint16Array), which the kernels (CPU and
 * CUDA) widen exactly inside the GEMM (the result equals that of the widened float32 matrix).
 */
export type WeightArray = Float32Array | Uint16Array;

/** `y[rows, out] = x[rows, in] . weight[out, in]^T + bias[out]` (PyTorch weight layout; `weight` may be bfloat16 bits). */
export function linearForward(
  o: OpDevice & LinearShape & { x: Float32Array; weight: WeightArray; bias?: Float32Array | null; out?: Float32Array },
): Float32Array {
  const out = o.out ?? zeros(o.rows * o.outFeatures);
  modelAddon().linearForward({ ...o, out, device: modelOpsDevice(o.device) });
  return out;
}

/**
 * Gradients of a linear layer: `dx = dy . weight`, `dweight += dy^T . x`, `dbias += sum(dy)`.
 * A bfloat16 `weight` (Uint16Array) is frozen: no `dweight` (null unless given, which throws).
 */
export function linearBackward(
  o: OpDevice &
    LinearShape & {
      x: Float32Array;
      weight: WeightArray;
      dy: Float32Array;
      dx?: Float32Array | null;
      dweight?: Float32Array | null;
      dbias?: Float32Array | null;
      accumulate?: boolean;
    },
): { dx: Float32Array | null; dweight: Float32Array | null; dbias: Float32Array | null } {
  const dx = grad(o.dx, o.rows * o.inFeatures);
  const dweight =
    o.weight instanceof Uint16Array && o.dweight === undefined ? null : grad(o.dweight, o.outFeatures * o.inFeatures);
  const dbias = grad(o.dbias, o.outFeatures);
  modelAddon().linearBackward({ ...o, dx, dweight, dbias, device: modelOpsDevice(o.device) });
  return { dx, dweight, dbias };
}

// ---- RMSNorm ----------------------------------------------------------------------------------

/** `out = x / sqrt(mean(x^2) + eps) * weight` per row of `x[rows, dim]`; `rstd` is kept for the backward. */
export function rmsnormForward(
  o: OpDevice & {
    x: Float32Array;
    weight: Float32Array;
    rows: number;
    dim: number;
    eps?: number;
    out?: Float32Array;
    rstd?: Float32Array;
  },
): {
  out: Float32Array;
  rstd: Float32Array;
} {
  const out = o.out ?? zeros(o.rows * o.dim);
  const rstd = o.rstd ?? zeros(o.rows);
  modelAddon().rmsnormForward({ ...o, out, rstd, device: modelOpsDevice(o.device) });
  return { out, rstd };
}

/** Gradients of RMSNorm: `dx` and `dweight +=`. */
export function rmsnormBackward(
  o: OpDevice & {
    x: Float32Array;
    weight: Float32Array;
    rstd: Float32Array;
    dy: Float32Array;
    rows: number;
    dim: number;
    dx?: Float32Array;
    dweight?: Float32Array;
    accumulate?: boolean;
  },
): { dx: Float32Array; dweight: Float32Array } {
  const dx = o.dx ?? zeros(o.rows * o.dim);
  const dweight = o.dweight ?? zeros(o.dim);
  modelAddon().rmsnormBackward({ ...o, dx, dweight, device: modelOpsDevice(o.device) });
  return { dx, dweight };
}

// ---- RoPE -------------------------------------------------------------------------------------

/** Shapes of a RoPE call on `x[rows, heads, headDim]` with one position per row. */
export interface RopeShape {
  positions: Int32Array;
  rows: number;
  heads: number;
  /** Even. */
  headDim: number;
  /** Base of the frequencies (default 10000). */
  theta?: number;
  /** Frequency scaling and attention factor (default none), as a model config's `ropeScaling`. */
  scaling?: RopeScaling | null;
}

/** What a RoPE table uses: the inverse frequency of each of the headDim / 2 pairs and the factor on cos and sin. */
export interface RopeParameters {
  inverseFrequencies: Float64Array;
  attentionFactor: number;
}

/**
 * The inverse frequencies and attention factor of the native RoPE table (double precision, as
 * transformers' modeling_rope_utils defines them for its default, linear, llama3 and yarn types).
 */
export function ropeParameters(headDim: number, theta = 10000, scaling: RopeScaling | null = null): RopeParameters {
  return modelAddon().ropeParameters({ headDim, theta, scaling });
}

/** Rotate-half rotary embedding (Llama/gpt-oss convention), scaled by the attention factor of `scaling`; `out` may be `x` (in place). */
export function ropeForward(o: OpDevice & RopeShape & { x: Float32Array; out?: Float32Array }): Float32Array {
  const out = o.out ?? zeros(o.rows * o.heads * o.headDim);
  modelAddon().ropeForward({ ...o, out, device: modelOpsDevice(o.device) });
  return out;
}

/** The backward of {@link ropeForward} (the inverse rotation); `dx` may be `dy`. */
export function ropeBackward(o: OpDevice & RopeShape & { dy: Float32Array; dx?: Float32Array }): Float32Array {
  const dx = o.dx ?? zeros(o.rows * o.heads * o.headDim);
  modelAddon().ropeBackward({ ...o, dx, device: modelOpsDevice(o.device) });
  return dx;
}

// ---- SwiGLU -----------------------------------------------------------------------------------

/** Parameters of the gated unit `g * sigmoid(alpha g) * (u + upBias)` with optional clamping (`limit > 0`). */
export interface SwiGluParams {
  alpha: number;
  /** 0: no clamping; else the gate is clamped to (-inf, limit] and up to [-limit, limit]. */
  limit: number;
  upBias: number;
}

/**
 * `'standard'`: `silu(g) * u` (Llama). `'clamped'`: gpt-oss's variant, alpha 1.702, limit 7,
 * `(u + 1)`.
 */
export type SwiGluVariant = 'standard' | 'clamped';

/** The parameters of a variant. */
export function swigluParams(variant: SwiGluVariant | SwiGluParams = 'standard'): SwiGluParams {
  if (typeof variant === 'object') return variant;
  if (variant === 'standard') return { alpha: 1, limit: 0, upBias: 0 };
  if (variant === 'clamped') return { alpha: 1.702, limit: 7, upBias: 1 };
  throw new RangeError(`variant must be 'standard' or 'clamped', got '${String(variant)}'`);
}

/** `out[rows, ffn]` from `h[rows, 2 ffn]` holding `[gate | up]` per row. */
export function swigluForward(
  o: OpDevice & {
    h: Float32Array;
    rows: number;
    ffn: number;
    variant?: SwiGluVariant | SwiGluParams;
    out?: Float32Array;
  },
): Float32Array {
  const out = o.out ?? zeros(o.rows * o.ffn);
  modelAddon().swigluForward({
    h: o.h,
    out,
    rows: o.rows,
    ffn: o.ffn,
    ...swigluParams(o.variant),
    device: modelOpsDevice(o.device),
  });
  return out;
}

/** `dh[rows, 2 ffn]` from `dout[rows, ffn]`. */
export function swigluBackward(
  o: OpDevice & {
    h: Float32Array;
    dout: Float32Array;
    rows: number;
    ffn: number;
    variant?: SwiGluVariant | SwiGluParams;
    dh?: Float32Array;
    accumulate?: boolean;
  },
): Float32Array {
  const dh = o.dh ?? zeros(o.rows * 2 * o.ffn);
  modelAddon().swigluBackward({
    h: o.h,
    dout: o.dout,
    dh,
    rows: o.rows,
    ffn: o.ffn,
    accumulate: o.accumulate,
    ...swigluParams(o.variant),
    device: modelOpsDevice(o.device),
  });
  return dh;
}

// ---- embedding --------------------------------------------------------------------------------

/** `out[t] = table[ids[t]]` for `table[vocab, dim]` (float32, or bfloat16 bits widened exactly). */
export function embeddingForward(
  o: OpDevice & { table: WeightArray; ids: Int32Array; vocab: number; dim: number; out?: Float32Array },
): Float32Array {
  const out = o.out ?? zeros(o.ids.length * o.dim);
  modelAddon().embeddingForward({ ...o, out, rows: o.ids.length, device: modelOpsDevice(o.device) });
  return out;
}

/** `dtable[ids[t]] += dout[t]`. */
export function embeddingBackward(
  o: OpDevice & { ids: Int32Array; dout: Float32Array; vocab: number; dim: number; dtable?: Float32Array },
): Float32Array {
  const dtable = o.dtable ?? zeros(o.vocab * o.dim);
  modelAddon().embeddingBackward({ ...o, dtable, rows: o.ids.length, device: modelOpsDevice(o.device) });
  return dtable;
}

// ---- log-softmax / cross-entropy --------------------------------------------------------------

/** Logits `[rows, vocab]` and optional targets (`-1` or any negative: no target). */
export interface LogitsInput {
  logits: Float32Array;
  rows: number;
  vocab: number;
  targets?: Int32Array | null;
  /** Logits are divided by it (sampling temperature), default 1. */
  temperature?: number;
}

function scaleOf(temperature: number | undefined): number {
  const t = temperature ?? 1;
  if (!(t > 0) || !Number.isFinite(t)) throw new RangeError(`temperature must be a positive finite number, got ${t}`);
  return 1 / t;
}

/** Per row: `logp` of the target (0 without one), `entropy` of the softmax, `lse` (log-sum-exp). */
export function logSoftmaxForward(
  o: OpDevice & LogitsInput & { logp?: Float32Array; entropy?: Float32Array; lse?: Float32Array },
): {
  logp: Float32Array | null;
  entropy: Float32Array;
  lse: Float32Array;
} {
  const logp = o.targets ? (o.logp ?? zeros(o.rows)) : null;
  const entropy = o.entropy ?? zeros(o.rows);
  const lse = o.lse ?? zeros(o.rows);
  modelAddon().logSoftmaxForward({
    logits: o.logits,
    targets: o.targets ?? null,
    rows: o.rows,
    vocab: o.vocab,
    scale: scaleOf(o.temperature),
    logp,
    entropy,
    lse,
    device: modelOpsDevice(o.device),
  });
  return { logp, entropy, lse };
}

/**
 * Gradient of the logits given upstream gradients of `logp` and/or `entropy` (either may be
 * absent); `dlogits` may be `logits` itself (in place) when not accumulating.
 */
export function logSoftmaxBackward(
  o: OpDevice &
    LogitsInput & {
      lse: Float32Array;
      entropy?: Float32Array | null;
      dlogp?: Float32Array | null;
      dentropy?: Float32Array | null;
      dlogits?: Float32Array;
      accumulate?: boolean;
    },
): Float32Array {
  const dlogits = o.dlogits ?? zeros(o.rows * o.vocab);
  modelAddon().logSoftmaxBackward({
    logits: o.logits,
    targets: o.targets ?? null,
    lse: o.lse,
    entropy: o.entropy ?? null,
    dlogp: o.dlogp ?? null,
    dentropy: o.dentropy ?? null,
    dlogits,
    rows: o.rows,
    vocab: o.vocab,
    scale: scaleOf(o.temperature),
    accumulate: o.accumulate,
    device: modelOpsDevice(o.device),
  });
  return dlogits;
}

/** Mean cross-entropy over rows with a target (`targets[t] >= 0`). */
export function crossEntropyForward(
  o: OpDevice & {
    logits: Float32Array;
    targets: Int32Array;
    rows: number;
    vocab: number;
    losses?: Float32Array;
    lse?: Float32Array;
  },
): {
  loss: number;
  count: number;
  losses: Float32Array;
  lse: Float32Array;
} {
  const losses = o.losses ?? zeros(o.rows);
  const lse = o.lse ?? zeros(o.rows);
  const r = modelAddon().crossEntropyForward({ ...o, losses, lse, device: modelOpsDevice(o.device) });
  return { ...r, losses, lse };
}

/** `dlogits = gradScale (softmax - onehot)` on rows with a target; gradScale defaults to 1/count (the mean). */
export function crossEntropyBackward(
  o: OpDevice & {
    logits: Float32Array;
    targets: Int32Array;
    lse: Float32Array;
    rows: number;
    vocab: number;
    gradScale?: number;
    dlogits?: Float32Array;
    accumulate?: boolean;
  },
): Float32Array {
  const dlogits = o.dlogits ?? zeros(o.rows * o.vocab);
  let gradScale = o.gradScale;
  if (gradScale === undefined) {
    let count = 0;
    for (const t of o.targets) if (t >= 0) count++;
    gradScale = count > 0 ? 1 / count : 0;
  }
  modelAddon().crossEntropyBackward({ ...o, dlogits, gradScale, device: modelOpsDevice(o.device) });
  return dlogits;
}

// ---- optimiser --------------------------------------------------------------------------------

/** One AdamW update of one tensor, in place (PyTorch's algorithm; `step` is 1-based). */
export function adamwUpdate(
  o: OpDevice & {
    param: Float32Array;
    grad: Float32Array;
    m: Float32Array;
    v: Float32Array;
    step: number;
    lr?: number;
    beta1?: number;
    beta2?: number;
    eps?: number;
    weightDecay?: number;
    /** Multiplies the gradient first (global-norm clipping). */
    gradScale?: number;
    /** Apply the weight decay (default true). */
    decay?: boolean;
  },
): void {
  modelAddon().adamwUpdate({ ...o, device: modelOpsDevice(o.device) });
}

/** Sum of squares of `x` in double precision (deterministic); `device` as in {@link OpDevice}. */
export function sumSquares(x: Float32Array, device?: DeviceRequest): number {
  return modelAddon().sumSquares(x, modelOpsDevice(device));
}

// ---- mixture of experts -------------------------------------------------------------------------

/** Shapes of an MoE layer applied to `rows` tokens. */
export interface MoeShape {
  rows: number;
  /** Model width D. */
  width: number;
  /** Hidden size F of each expert. */
  ffn: number;
  /** Experts E. */
  experts: number;
  /** Experts per token k, in [1, E]. */
  topK: number;
  /** The experts' gate (default `'standard'`; gpt-oss: `'clamped'`). */
  variant?: SwiGluVariant | SwiGluParams;
}

/**
 * The weights of an MoE layer (float32, or bfloat16 bits, frozen, widened exactly in the GEMMs;
 * the experts' matrices may also be MXFP4 blocks and scales, frozen, decoded exactly in the
 * GEMMs: the same results as their bfloat16 dequantization, bit for bit).
 */
export interface MoeWeights {
  /** [E, D]. */
  router: WeightArray;
  /** [E] or absent. */
  routerBias?: Float32Array | null;
  /** [E, 2F, D]: per expert F gate rows, then F up rows (MXFP4: D a multiple of 32). */
  gateUp: WeightArray | Mxfp4Data;
  /** [E, 2F] or absent. */
  gateUpBias?: Float32Array | null;
  /** [E, D, F] (MXFP4: F a multiple of 32). */
  down: WeightArray | Mxfp4Data;
  /** [E, D] or absent. */
  downBias?: Float32Array | null;
  /** Per-expert LoRA adapters on gateUp and / or down (absent or null: none). */
  lora?: MoeExpertLora | null;
}

/**
 * LoRA adapters of every expert (PEFT's `target_parameters` on the experts): expert e's gate_up
 * output gains `scale (x A_gu[e]^T) B_gu[e]^T` and its down output `scale (act A_d[e]^T) B_d[e]^T`.
 * Float32; give a pair for gate_up, for down, or both.
 */
export interface MoeExpertLora {
  /** r, the rank of every expert's pair. */
  rank: number;
  /** The factor on the product (alpha / r, or alpha / √r with rsLoRA). */
  scale: number;
  /** [E, r, D]. */
  gateUpA?: Float32Array | null;
  /** [E, 2F, r]: gate rows, then up rows (as gateUp's). */
  gateUpB?: Float32Array | null;
  /** [E, r, F]. */
  downA?: Float32Array | null;
  /** [E, D, r]. */
  downB?: Float32Array | null;
}

/** What {@link moeForward} keeps for {@link moeBackward} (native memory, freed with the object). */
export type MoeState = NativeMoeState;

/** The result of {@link moeForward}. */
export interface MoeForwardResult {
  /** [rows, D]. */
  out: Float32Array;
  /** Router logits [rows, E]. */
  logits: Float32Array;
  /** The chosen experts [rows, k], by descending logit (ties: lower expert index first). */
  experts: Int32Array;
  /** Their weights [rows, k]: a softmax over the chosen logits. */
  weights: Float32Array;
  /** For {@link moeBackward}. */
  state: MoeState;
}

/** The native arguments of an MoE call: an MXFP4 weight passes its blocks as the weight and its scales beside. */
function moeArgs(o: MoeShape & MoeWeights): NativeMoeArgs {
  const { variant, gateUp, down, lora, ...rest } = o;
  const l = lora ?? null;
  return {
    ...rest,
    ...(l === null
      ? {}
      : {
          loraRank: l.rank,
          loraScale: l.scale,
          gateUpLoraA: l.gateUpA ?? null,
          gateUpLoraB: l.gateUpB ?? null,
          downLoraA: l.downA ?? null,
          downLoraB: l.downB ?? null,
        }),
    ...(isMxfp4(gateUp) ? { gateUp: gateUp.blocks, gateUpScales: gateUp.scales } : { gateUp }),
    ...(isMxfp4(down) ? { down: down.blocks, downScales: down.scales } : { down }),
    ...swigluParams(variant),
  };
}

function isMxfp4(w: WeightArray | Mxfp4Data): w is Mxfp4Data {
  return !(w instanceof Float32Array) && !(w instanceof Uint16Array);
}

/**
 * A mixture-of-experts MLP (gpt-oss semantics): per token the top-k router logits (`x
 * router^T + routerBias`), weights = softmax over those k, `out = sum_s w_s expert_s(x)` with
 * expert `e`: `h = x gateUp[e]^T + gateUpBias[e]`, SwiGLU over `[gate | up]`, `y = act down[e]^T
 * + downBias[e]`. Tokens are grouped by expert (one GEMM per expert that has tokens; on CUDA one
 * grouped launch per stage over those experts). `device: 'cuda'` runs it on the GPU (the arrays
 * are copied there and the results back; the state stays in device memory for
 * {@link moeBackward}, which must then run on the same device).
 */
export function moeForward(
  o: OpDevice & MoeShape & MoeWeights & { x: Float32Array; out?: Float32Array },
): MoeForwardResult {
  const out = o.out ?? zeros(o.rows * o.width);
  const logits = zeros(o.rows * o.experts);
  const { out: _out, device, ...rest } = o;
  const r = modelAddon().moeForward({ ...moeArgs(rest), x: o.x, out, logits, device: modelOpsDevice(device) });
  return { out, logits, experts: r.experts, weights: r.weights, state: r.state };
}

/** Gradients of an MoE layer (`dx` written or accumulated; parameter gradients `+=`). */
export interface MoeGradients {
  dx: Float32Array;
  drouter: Float32Array | null;
  drouterBias: Float32Array | null;
  dgateUp: Float32Array | null;
  dgateUpBias: Float32Array | null;
  ddown: Float32Array | null;
  ddownBias: Float32Array | null;
  /** The expert adapters' gradients (null without that adapter), shaped as {@link MoeExpertLora}'s. */
  dgateUpLoraA: Float32Array | null;
  dgateUpLoraB: Float32Array | null;
  ddownLoraA: Float32Array | null;
  ddownLoraB: Float32Array | null;
}

/**
 * The backward of {@link moeForward} (same shapes, weights and `x`): dx, the expert weight and
 * bias gradients, and the router's through the softmax over the chosen k (the choice itself has
 * no gradient). Gradient arrays follow the module's convention (undefined: allocated; null:
 * skipped); a bfloat16 weight has no gradient (null unless given, which throws). `device` must
 * be the forward's (its state lives there).
 */
export function moeBackward(
  o: OpDevice &
    MoeShape &
    MoeWeights & {
      x: Float32Array;
      dout: Float32Array;
      state: MoeState;
      dx?: Float32Array;
      accumulate?: boolean;
      drouter?: Float32Array | null;
      drouterBias?: Float32Array | null;
      dgateUp?: Float32Array | null;
      dgateUpBias?: Float32Array | null;
      ddown?: Float32Array | null;
      ddownBias?: Float32Array | null;
      dgateUpLoraA?: Float32Array | null;
      dgateUpLoraB?: Float32Array | null;
      ddownLoraA?: Float32Array | null;
      ddownLoraB?: Float32Array | null;
    },
): MoeGradients {
  const { width: D, ffn: F, experts: E } = o;
  const weightGrad = (
    w: WeightArray | Mxfp4Data,
    given: Float32Array | null | undefined,
    n: number,
  ): Float32Array | null => ((w instanceof Uint16Array || isMxfp4(w)) && given === undefined ? null : grad(given, n));
  const biasGrad = (
    b: Float32Array | null | undefined,
    given: Float32Array | null | undefined,
    n: number,
  ): Float32Array | null => ((b === undefined || b === null) && given === undefined ? null : grad(given, n));
  const g: MoeGradients = {
    dx: o.dx ?? zeros(o.rows * D),
    drouter: weightGrad(o.router, o.drouter, E * D),
    drouterBias: biasGrad(o.routerBias, o.drouterBias, E),
    dgateUp: weightGrad(o.gateUp, o.dgateUp, E * 2 * F * D),
    dgateUpBias: biasGrad(o.gateUpBias, o.dgateUpBias, E * 2 * F),
    ddown: weightGrad(o.down, o.ddown, E * D * F),
    ddownBias: biasGrad(o.downBias, o.ddownBias, E * D),
    dgateUpLoraA: biasGrad(o.lora?.gateUpA, o.dgateUpLoraA, o.lora ? E * o.lora.rank * D : 0),
    dgateUpLoraB: biasGrad(o.lora?.gateUpB, o.dgateUpLoraB, o.lora ? E * 2 * F * o.lora.rank : 0),
    ddownLoraA: biasGrad(o.lora?.downA, o.ddownLoraA, o.lora ? E * o.lora.rank * F : 0),
    ddownLoraB: biasGrad(o.lora?.downB, o.ddownLoraB, o.lora ? E * D * o.lora.rank : 0),
  };
  const {
    x,
    dout,
    state,
    accumulate,
    device,
    dx: _dx,
    drouter: _a,
    drouterBias: _b,
    dgateUp: _c,
    dgateUpBias: _d,
    ddown: _e,
    ddownBias: _f,
    dgateUpLoraA: _g,
    dgateUpLoraB: _h,
    ddownLoraA: _i,
    ddownLoraB: _j,
    ...shape
  } = o;
  modelAddon().moeBackward({ ...moeArgs(shape), x, dout, state, accumulate, ...g, device: modelOpsDevice(device) });
  return g;
}
