/**
 * A JavaScript handle on natively owned model parameters: values, gradients and AdamW moments
 * (float32, tracked allocator), a seeded initialisation, an optimiser step with global
 * gradient-norm clipping, an RNG state, copy-in/copy-out and aliasing views. A store lives on
 * the CPU (default) or in a GPU's memory (`device: 'cuda'`): then it is initialised exactly like
 * a CPU store of the same seed, its optimiser runs on the GPU, and read/write copy (no views).
 * @module
 */
import type { DeviceRequest } from '../native/device.js';
import { type ModelConfig, validateModelConfig } from './config.js';
import { type AdamWStepOptions, type AdamWStepResult, type NativeParamStore, type ParamBufferName, type ParamInfo, type ParamSpec, modelAddon } from './native.js';
import { modelOpsDevice } from './ops.js';

export type { AdamWStepOptions, AdamWStepResult, ParamBufferName, ParamInfo, ParamSpec } from './native.js';

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
  static fromConfig(config: ModelConfig, seed: number, options: ParamStoreOptions = {}): ParamStore {
    const Native = modelAddon().ParamStore;
    return new ParamStore(new Native({ config: validateModelConfig(config), seed, device: nativeDevice(options.device) }));
  }

  /** A store of arbitrary parameters initialised from `seed`. */
  static fromSpecs(specs: ParamSpec[], seed: number, options: ParamStoreOptions = {}): ParamStore {
    const Native = modelAddon().ParamStore;
    return new ParamStore(new Native({ specs, seed, device: nativeDevice(options.device) }));
  }

  /** Where the buffers live: `'cpu'` or `'cuda:<k>'`. */
  get device(): StoreDevice {
    return this.native.device() as StoreDevice;
  }

  /** Parameter names in layout order. */
  names(): string[] {
    return this.native.names();
  }

  /** Name, shape, element count, initialisation and weight decay of every parameter. */
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

  /** A copy of one buffer of a parameter (default its value). */
  read(name: string, which: ParamBufferName = 'value'): Float32Array {
    return this.native.read(name, which);
  }

  /** Copies `data` (exactly numel elements) into one buffer of a parameter. */
  write(name: string, data: Float32Array, which: ParamBufferName = 'value'): void {
    this.native.write(name, data, which);
  }

  /**
   * A Float32Array aliasing the native buffer (no copy): kernels can read and write it in
   * place. After {@link dispose} every view is detached (length 0). CPU stores only (a GPU
   * store throws: use {@link read} and {@link write}).
   */
  view(name: string, which: ParamBufferName = 'value'): Float32Array {
    return this.native.view(name, which);
  }

  /** Sets every gradient to zero. */
  zeroGrad(): void {
    this.native.zeroGrad();
  }

  /** Global L2 norm of the gradients. */
  gradNorm(): number {
    return this.native.gradNorm();
  }

  /**
   * One AdamW step over all parameters: global-norm clipping (`maxGradNorm`), a skip when the
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
