/**
 * Typed declarations of the native model functions (native/addon/model_binding.cc and
 * model_store_binding.cc). The wrappers in ops.ts and param-store.ts are the public API.
 * @module
 */
import { loadAddon } from '../native/loader.js';

/** Arguments of a GEMM: `c = alpha * op(a) * op(b) + beta * c`, row-major, `op(a)` is m x k, `op(b)` is k x n. */
export interface GemmArgs {
  /** Float32, or bfloat16 bits (Uint16Array): widened exactly as it is packed (CPU) or loaded into shared memory (CUDA). */
  a: Float32Array | Uint16Array;
  /** Float32, or bfloat16 bits (Uint16Array). */
  b: Float32Array | Uint16Array;
  c: Float32Array;
  m: number;
  n: number;
  k: number;
  /** `a` is stored k x m and used transposed. */
  transA?: boolean;
  /** `b` is stored n x k and used transposed. */
  transB?: boolean;
  /** Default 1. */
  alpha?: number;
  /** Default 0 (then `c` is only written). */
  beta?: number;
  /** `'cpu'` (default) or `'cuda'` as the addon takes it (ops.ts resolves requests). */
  device?: string;
}

/** Which micro-kernel the GEMM uses on this machine. */
export interface GemmInfo {
  /** e.g. `'avx512 12x32'`. */
  kernel: string;
  /** `'avx512'`, `'avx2'` or `'generic'`. */
  isa: string;
  /** Rows of the register tile. */
  mr: number;
  /** Columns of the register tile. */
  nr: number;
  /** Floats per vector register. */
  vectorWidth: number;
}

/** Initialisation of a parameter: normal(0, std), uniform with standard deviation std (U(-b, b), b = std·√3), ones or zeros. */
export type ParamInit = 'normal' | 'uniform' | 'ones' | 'zeros';

/** Description of one parameter of a store. */
export interface ParamSpec {
  /** Unique, non-empty. */
  name: string;
  /** 1 to 4 dimensions, each >= 1. */
  shape: number[];
  /** Default `'normal'`. */
  init?: ParamInit;
  /** Standard deviation of `'normal'` and `'uniform'` (default 0.02). */
  std?: number;
  /** AdamW weight decay applies (default: true for 2+ dimensions). */
  decay?: boolean;
  /**
   * Storage of the values (default `'float32'`). `'bfloat16'` keeps the values as bf16 bits
   * (half the memory; the kernels widen them exactly) and requires `trainable: false`.
   * `'mxfp4'` keeps them packed as MXFP4 (4-bit E2M1 codes plus one E8M0 scale byte per 32
   * elements of the last dimension, which must be a multiple of 32: 4.25 bits an element); it
   * requires `trainable: false` and init `'zeros'` or `'ones'` (then write its blocks and scales
   * with `writeMxfp4`); only the MoE experts' matrices of a model may be MXFP4.
   */
  dtype?: ParamDtype;
  /**
   * Gets a gradient and AdamW moments (default: true for float32, false for bfloat16). A frozen
   * parameter still passes gradients through to the activations but accumulates none itself.
   */
  trainable?: boolean;
}

/** Storage dtype of a parameter's values. */
export type ParamDtype = 'float32' | 'bfloat16' | 'mxfp4';

/** One parameter of a model's layout ({@link parameterLayout}): a spec with every field but the store's dtype and trainability. */
export type LayoutParamSpec = Required<Pick<ParamSpec, 'name' | 'shape' | 'init' | 'std' | 'decay'>>;

/** A parameter as the store reports it. */
export interface ParamInfo {
  name: string;
  shape: number[];
  numel: number;
  init: ParamInit;
  std: number;
  decay: boolean;
  dtype: ParamDtype;
  trainable: boolean;
}

/** The buffers of a parameter: its value, its gradient, AdamW's first and second moments. */
export type ParamBufferName = 'value' | 'grad' | 'm' | 'v';

/** Options of one AdamW step of a store. */
export interface AdamWStepOptions {
  /** Learning rate (default 1e-3). */
  lr?: number;
  /** Default 0.9. */
  beta1?: number;
  /** Default 0.999. */
  beta2?: number;
  /** Default 1e-8. */
  eps?: number;
  /** Decoupled weight decay, applied to parameters with `decay` (default 0). */
  weightDecay?: number;
  /** Clip the global gradient L2 norm to this value (0 or absent: no clipping). */
  maxGradNorm?: number;
  /** Skip the update when the gradient norm is NaN or infinite (default true). */
  skipNonFinite?: boolean;
}

/** What one AdamW step did. */
export interface AdamWStepResult {
  /** Global L2 norm of the gradients before clipping (NaN/Infinity when not finite). */
  gradNorm: number;
  /** Factor the gradients were multiplied by (1 when not clipped). */
  clipScale: number;
  /** `gradNorm` is finite. */
  finite: boolean;
  /** The update ran (false when skipped for a non-finite norm). */
  applied: boolean;
  /** Optimiser steps taken so far. */
  step: number;
}

/**
 * An MXFP4 tensor's packed form: `blocks` holds two 4-bit E2M1 codes a byte (the low nibble is
 * the even element), numel / 2 bytes; `scales` one E8M0 scale byte (2^(s − 127)) per 32
 * consecutive elements, numel / 32 bytes — the layout of Hugging Face's `*_blocks` / `*_scales`.
 */
export interface Mxfp4Data {
  blocks: Uint8Array;
  scales: Uint8Array;
}

/** The native ParamStore handle. */
export interface NativeParamStore {
  names(): string[];
  info(): ParamInfo[];
  read(name: string, which?: ParamBufferName): Float32Array;
  write(name: string, data: Float32Array | Uint16Array, which?: ParamBufferName): void;
  readBf16(name: string): Uint16Array;
  readMxfp4(name: string): Mxfp4Data;
  writeMxfp4(name: string, blocks: Uint8Array, scales: Uint8Array): void;
  bytes(): number;
  trainableNumel(): number;
  view(name: string, which?: ParamBufferName): Float32Array;
  zeroGrad(): void;
  gradNorm(): number;
  adamwStep(options: AdamWStepOptions): AdamWStepResult;
  getStep(): number;
  setStep(step: number): void;
  rngState(): string;
  setRngState(state: string): void;
  numel(): number;
  seed(): number;
  /** `'cpu'` or `'cuda:<k>'`. */
  device(): string;
  append(specs: ParamSpec[]): void;
  truncate(count: number): void;
  freeze(names: string[]): void;
  layoutVersion(): number;
  mergeLora(options: { weight: string; rowOffset: number; loraA: string; loraB: string; scale: number }): void;
  dispose(): void;
  isDisposed(): boolean;
}

/** The model config as the addon reads it (see config.ts for the documented type). */
export interface NativeModelConfig {
  layers: number;
  width: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  window: number;
  vocab: number;
  context: number;
  ffn: number;
  ropeTheta?: number;
  normEps?: number;
  initStd?: number;
  swiglu?: 'standard' | 'clamped';
  bias?: boolean;
  qkvBias?: boolean;
  oBias?: boolean;
  mlpBias?: boolean;
  sinks?: boolean;
  qkNorm?: boolean;
  tieEmbeddings?: boolean;
  layerTypes?: ('sliding' | 'full')[] | null;
  experts?: number;
  expertsPerToken?: number;
  ropeScaling?: NativeRopeScaling | null;
  lora?: { rank: number; alpha: number; targets: string[]; rslora?: boolean } | null;
  tokenShift?: boolean;
}

/** RoPE scaling as the addon reads it (config.ts documents the fields). */
export interface NativeRopeScaling {
  type: 'linear' | 'llama3' | 'yarn';
  factor: number;
  originalContext?: number;
  lowFreqFactor?: number;
  highFreqFactor?: number;
  betaFast?: number;
  betaSlow?: number;
  truncate?: boolean;
  attentionFactor?: number | null;
  mscale?: number;
  mscaleAllDim?: number;
}

/** An opaque handle to what an MoE forward keeps for its backward. */
export type NativeMoeState = object & { readonly __sinkflexMoeState?: never };

/** Shapes, SwiGLU parameters and weights of a native MoE call. */
export interface NativeMoeArgs {
  rows: number;
  width: number;
  ffn: number;
  experts: number;
  topK: number;
  alpha?: number;
  limit?: number;
  upBias?: number;
  router: Float32Array | Uint16Array;
  routerBias?: Float32Array | null;
  /** Float32, bfloat16 bits, or MXFP4 blocks (Uint8Array) with `gateUpScales`. */
  gateUp: Float32Array | Uint16Array | Uint8Array;
  gateUpScales?: Uint8Array;
  gateUpBias?: Float32Array | null;
  /** Float32, bfloat16 bits, or MXFP4 blocks (Uint8Array) with `downScales`. */
  down: Float32Array | Uint16Array | Uint8Array;
  downScales?: Uint8Array;
  downBias?: Float32Array | null;
  /** Expert LoRA (moe.h MoeLora): the rank and scale, then A [E, r, D] / B [E, 2F, r] and A [E, r, F] / B [E, D, r]. */
  loraRank?: number;
  loraScale?: number;
  gateUpLoraA?: Float32Array | null;
  gateUpLoraB?: Float32Array | null;
  downLoraA?: Float32Array | null;
  downLoraB?: Float32Array | null;
}

/** `device` of a native op call: `'cpu'` (default) or `'cuda'`/`'cuda:<k>'` (ops.ts resolves requests). */
export interface NativeOpDevice {
  device?: string;
}

/** Native op argument objects (sizes explicit; every array's length is checked against them). */
export interface NativeOps {
  linearForward(
    o: NativeOpDevice & {
      x: Float32Array;
      weight: Float32Array | Uint16Array;
      bias?: Float32Array | null;
      out: Float32Array;
      rows: number;
      inFeatures: number;
      outFeatures: number;
    },
  ): void;
  linearBackward(
    o: NativeOpDevice & {
      x?: Float32Array | null;
      weight?: Float32Array | Uint16Array | null;
      dy: Float32Array;
      dx?: Float32Array | null;
      dweight?: Float32Array | null;
      dbias?: Float32Array | null;
      rows: number;
      inFeatures: number;
      outFeatures: number;
      accumulate?: boolean;
    },
  ): void;
  rmsnormForward(
    o: NativeOpDevice & {
      x: Float32Array;
      weight: Float32Array;
      out: Float32Array;
      rstd: Float32Array;
      rows: number;
      dim: number;
      eps?: number;
    },
  ): void;
  rmsnormBackward(
    o: NativeOpDevice & {
      x: Float32Array;
      weight: Float32Array;
      rstd: Float32Array;
      dy: Float32Array;
      dx: Float32Array;
      dweight: Float32Array;
      rows: number;
      dim: number;
      accumulate?: boolean;
    },
  ): void;
  ropeForward(
    o: NativeOpDevice & {
      x: Float32Array;
      out: Float32Array;
      positions: Int32Array;
      rows: number;
      heads: number;
      headDim: number;
      theta?: number;
      scaling?: NativeRopeScaling | null;
    },
  ): void;
  ropeBackward(
    o: NativeOpDevice & {
      dy: Float32Array;
      dx: Float32Array;
      positions: Int32Array;
      rows: number;
      heads: number;
      headDim: number;
      theta?: number;
      scaling?: NativeRopeScaling | null;
    },
  ): void;
  ropeParameters(o: { headDim: number; theta?: number; scaling?: NativeRopeScaling | null }): {
    inverseFrequencies: Float64Array;
    attentionFactor: number;
  };
  swigluForward(
    o: NativeOpDevice & {
      h: Float32Array;
      out: Float32Array;
      rows: number;
      ffn: number;
      alpha?: number;
      limit?: number;
      upBias?: number;
    },
  ): void;
  swigluBackward(
    o: NativeOpDevice & {
      h: Float32Array;
      dout: Float32Array;
      dh: Float32Array;
      rows: number;
      ffn: number;
      alpha?: number;
      limit?: number;
      upBias?: number;
      accumulate?: boolean;
    },
  ): void;
  embeddingForward(
    o: NativeOpDevice & {
      table: Float32Array | Uint16Array;
      ids: Int32Array;
      out: Float32Array;
      rows: number;
      vocab: number;
      dim: number;
    },
  ): void;
  embeddingBackward(
    o: NativeOpDevice & {
      ids: Int32Array;
      dout: Float32Array;
      dtable: Float32Array;
      rows: number;
      vocab: number;
      dim: number;
    },
  ): void;
  logSoftmaxForward(
    o: NativeOpDevice & {
      logits: Float32Array;
      targets?: Int32Array | null;
      rows: number;
      vocab: number;
      scale?: number;
      logp?: Float32Array | null;
      entropy?: Float32Array | null;
      lse: Float32Array;
    },
  ): void;
  logSoftmaxBackward(
    o: NativeOpDevice & {
      logits: Float32Array;
      targets?: Int32Array | null;
      lse: Float32Array;
      entropy?: Float32Array | null;
      dlogp?: Float32Array | null;
      dentropy?: Float32Array | null;
      dlogits: Float32Array;
      rows: number;
      vocab: number;
      scale?: number;
      accumulate?: boolean;
    },
  ): void;
  crossEntropyForward(
    o: NativeOpDevice & {
      logits: Float32Array;
      targets: Int32Array;
      rows: number;
      vocab: number;
      losses?: Float32Array | null;
      lse: Float32Array;
    },
  ): {
    loss: number;
    count: number;
  };
  crossEntropyBackward(
    o: NativeOpDevice & {
      logits: Float32Array;
      targets: Int32Array;
      lse: Float32Array;
      dlogits: Float32Array;
      rows: number;
      vocab: number;
      gradScale?: number;
      accumulate?: boolean;
    },
  ): void;
  adamwUpdate(
    o: NativeOpDevice & {
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
      gradScale?: number;
      decay?: boolean;
    },
  ): void;
  sumSquares(x: Float32Array, device?: string): number;
  moeForward(o: NativeMoeArgs & NativeOpDevice & { x: Float32Array; out: Float32Array; logits: Float32Array }): {
    experts: Int32Array;
    weights: Float32Array;
    state: NativeMoeState;
  };
  moeBackward(
    o: NativeMoeArgs &
      NativeOpDevice & {
        x: Float32Array;
        dout: Float32Array;
        state: NativeMoeState;
        dx: Float32Array;
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
        accumulate?: boolean;
      },
  ): void;
  /** Devices with model-op kernels here: `['cpu']`, plus `'cuda'` with CUDA kernels and a usable GPU. */
  modelOpsDevices(): string[];
}

/** Everything native/model exports. */
export interface ModelAddon extends NativeOps {
  gemm(args: GemmArgs): void;
  gemmNaive(args: GemmArgs): void;
  gemmAsync(args: GemmArgs): Promise<void>;
  gemmInfo(): GemmInfo;
  matmulPrecision(): 'highest' | 'medium';
  setMatmulPrecision(precision: string, dtype?: string): void;
  matmulOperandDtype(): 'bfloat16' | 'float16';
  fmaPeakGflops(seconds: number): number;
  opsIsa(): string;
  modelParamLayout(config: NativeModelConfig): LayoutParamSpec[];
  ParamStore: new (options: {
    specs?: ParamSpec[];
    config?: NativeModelConfig;
    seed: number;
    device?: string;
  }) => NativeParamStore;
}

/** The addon typed with the model functions. */
export function modelAddon(): ModelAddon {
  return loadAddon<ModelAddon>();
}
