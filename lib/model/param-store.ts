/**
 * A JavaScript handle on natively owned model parameters: values, gradients and AdamW moments
 * (float32, tracked allocator; a frozen parameter has neither gradient nor moments, and its
 * values may be stored as bfloat16), a seeded initialisation, an optimiser step with global
 * gradient-norm clipping, an RNG state, copy-in/copy-out and aliasing views. A store lives on
 * the CPU (default) or in a GPU's memory (`device: 'cuda'`): then it is initialised exactly like
 * a CPU store of the same seed, its optimiser runs on the GPU, and read/write copy (no views).
 * @module
 */
import type { DeviceRequest } from '../native/device.js';
import { type ModelConfigInput, validateModelConfig } from './config.js';
import {
  type AdamWStepOptions,
  type AdamWStepResult,
  type Mxfp4Data,
  type NativeParamStore,
  type ParamBufferName,
  type ParamInfo,
  type ParamSpec,
  modelAddon,
} from './native.js';
import { modelOpsDevice } from './ops.js';

export type {
  AdamWStepOptions,
  AdamWStepResult,
  LayoutParamSpec,
  ParamBufferName,
  ParamDtype,
  ParamInfo,
  ParamSpec,
} from './native.js';

/** Where a store's buffers live: `'cpu'` or a CUDA device `'cuda:<k>'`. */
export type StoreDevice = 'cpu' | `cuda:${number}`;

/** Options of {@link ParamStore.fromConfig} and {@link ParamStore.fromSpecs}. */
export interface ParamStoreOptions {
  /**
   * `'cpu'` (default), `'cuda'` (the first GPU; {@link DeviceUnavailableError} without a CUDA
   * build and a usable GPU) or `'auto'` (CUDA when usable, else the CPU).
   */
  device?: DeviceRequest;
}

/** The addon's device string for a request (`undefined` for the CPU). */
function nativeDevice(request: DeviceRequest | undefined): string | undefined {
  return modelOpsDevice(request ?? 'cpu') === 'cuda' ? 'cuda' : undefined;
}

/** Parameters of a model with their optimiser state. Call {@link ParamStore.dispose} to free the memory at once. */
export class ParamStore {
  private constructor(private readonly native: NativeParamStore) {}

  /** The parameters of `config` ({@link parameterLayout}) initialised from `seed`. */
  static fromConfig(config: ModelConfigInput, seed: number, options: ParamStoreOptions = {}): ParamStore {
    const Native = modelAddon().ParamStore;
    return new ParamStore(
      new Native({ config: validateModelConfig(config), seed, device: nativeDevice(options.device) }),
    );
  }

  /**
   * A store of arbitrary parameters initialised from `seed`; each spec may choose its storage
   * (`dtype: 'bfloat16'`, frozen) and whether it trains (`trainable: false`: no gradient and no
   * AdamW moments). A model's parameters are `parameterLayout(config)` with these fields added.
   * Stores on a GPU hold float32 trainable parameters only (others throw naming the parameter).
   */
  static fromSpecs(specs: ParamSpec[], seed: number, options: ParamStoreOptions = {}): ParamStore {
    const Native = modelAddon().ParamStore;
    return new ParamStore(new Native({ specs, seed, device: nativeDevice(options.device) }));
  }

  /**
   * Adds parameters after the existing ones, initialised from the store's seed exactly as if the
   * store had been made with all of them (e.g. LoRA adapters added to a loaded model). Models
   * over this store made before stop working (their operations throw): make a new one
   * (`Transformer.reconfigure`). Throws, adding nothing, on a bad or duplicate spec, a GPU
   * store with frozen/bf16 specs, or while a forward, backward or generation is running.
   */
  append(specs: ParamSpec[]): void {
    this.native.append(specs);
  }

  /**
   * Removes every parameter from index `count` on (with its gradient and moments); views of
   * them are detached. Models made before stop working, as for {@link append}.
   */
  truncate(count: number): void {
    this.native.truncate(count);
  }

  /**
   * Makes the named parameters non-trainable and frees their gradients and AdamW moments
   * (views of those are detached); frozen ones stay frozen. CPU and GPU stores. Throws, changing
   * nothing, for an unknown name or while a forward, backward or generation is running.
   */
  freeze(names: string[]): void {
    this.native.freeze(names);
  }

  /** Changes each time {@link append} or {@link truncate} changes the parameter list. */
  get layoutVersion(): number {
    return this.native.layoutVersion();
  }

  /**
   * Merges a LoRA adapter into its weight: rows [rowOffset, rowOffset + out) of `weight` gain
   * `scale · B A` (B = `loraB` [out, r], A = `loraA` [r, in]), the product computed in float32;
   * a bfloat16 weight is widened, added to in float32 and rounded to nearest even. CPU stores.
   */
  mergeLora(options: { weight: string; rowOffset: number; loraA: string; loraB: string; scale: number }): void {
    this.native.mergeLora(options);
  }

  /** Where the buffers live: `'cpu'` or `'cuda:<k>'`. */
  get device(): StoreDevice {
    return this.native.device() as StoreDevice;
  }

  /** Parameter names in layout order. */
  names(): string[] {
    return this.native.names();
  }

  /** Name, shape, element count, initialisation, weight decay, dtype and trainability of every parameter. */
  info(): ParamInfo[] {
    return this.native.info();
  }

  /** Total number of parameter elements. */
  get numel(): number {
    return this.native.numel();
  }

  /** The seed the values were initialised from. */
  get seed(): number {
    return this.native.seed();
  }

  /**
   * A copy of one buffer of a parameter (default its value; a bfloat16 value widened exactly).
   * A frozen parameter has no `'grad'`, `'m'` or `'v'` (RangeError).
   */
  read(name: string, which: ParamBufferName = 'value'): Float32Array {
    return this.native.read(name, which);
  }

  /**
   * Copies `data` (exactly numel elements) into one buffer of a parameter. Float32 data going
   * into a bfloat16 value is rounded to nearest even; a Uint16Array (bfloat16 bits, e.g. from a
   * checkpoint) is copied as is, for the value of a bfloat16 parameter only.
   */
  write(name: string, data: Float32Array | Uint16Array, which: ParamBufferName = 'value'): void {
    this.native.write(name, data, which);
  }

  /**
   * The raw bits of a bfloat16 parameter's values, or an MXFP4 parameter's exact bfloat16
   * dequantization (TypeError for a float32 one): lossless export.
   */
  readBf16(name: string): Uint16Array {
    return this.native.readBf16(name);
  }

  /** A copy of an MXFP4 parameter's blocks and scales (TypeError for another dtype). */
  readMxfp4(name: string): Mxfp4Data {
    return this.native.readMxfp4(name);
  }

  /**
   * Sets an MXFP4 parameter's blocks (numel / 2 bytes) and scales (numel / 32 bytes), copied as
   * they are (TypeError for another dtype, RangeError for a wrong length).
   */
  writeMxfp4(name: string, data: Mxfp4Data): void {
    this.native.writeMxfp4(name, data.blocks, data.scales);
  }

  /** Bytes the store holds natively: values (4, 2 or 17/32 (MXFP4) per element) plus gradient and moments (12 per trainable element). */
  get bytes(): number {
    return this.native.bytes();
  }

  /** Elements of the trainable parameters. */
  get trainableNumel(): number {
    return this.native.trainableNumel();
  }

  /**
   * A Float32Array aliasing the native buffer (no copy): kernels can read and write it in
   * place. After {@link dispose} every view is detached (length 0). CPU stores only (a GPU
   * store throws: use {@link read} and {@link write}), float32 buffers only (the value of a
   * bfloat16 parameter and the gradient of a frozen one throw).
   */
  view(name: string, which: ParamBufferName = 'value'): Float32Array {
    return this.native.view(name, which);
  }

  /** Sets every gradient (of the trainable parameters) to zero. */
  zeroGrad(): void {
    this.native.zeroGrad();
  }

  /** Global L2 norm of the gradients of the trainable parameters. */
  gradNorm(): number {
    return this.native.gradNorm();
  }

  /**
   * One AdamW step over the trainable parameters: global-norm clipping (`maxGradNorm`), a skip when the
   * norm is not finite, bias-corrected moments, decoupled weight decay on `decay` parameters.
   */
  adamwStep(options: AdamWStepOptions): AdamWStepResult {
    return this.native.adamwStep(options);
  }

  /** Optimiser steps taken (restored from checkpoints). */
  get step(): number {
    return this.native.getStep();
  }

  set step(value: number) {
    this.native.setStep(value);
  }

  /** The store's RNG state as 64 hex digits (xoshiro256**). */
  rngState(): string {
    return this.native.rngState();
  }

  /** Restores a state from {@link rngState}. */
  setRngState(state: string): void {
    this.native.setRngState(state);
  }

  /**
   * Frees the native memory (at once, or, when views were taken, once those views — detached
   * to length 0 here — are garbage collected); later calls throw. Idempotent.
   */
  dispose(): void {
    this.native.dispose();
  }

  /** {@link dispose} (for `using`). */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** True after {@link dispose}. */
  get disposed(): boolean {
    return this.native.isDisposed();
  }

  /** The native handle, for native kernels that take a store. */
  get handle(): NativeParamStore {
    return this.native;
  }
}
