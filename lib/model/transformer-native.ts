/**
 * Typed declarations of the native transformer (native/addon/transformer_binding.cc). The
 * classes in transformer.ts and transformer-policy.ts are the public API.
 * @module
 */
import { loadAddon } from '../native/loader.js';
import type { NativeModelConfig, NativeParamStore } from './native.js';

/** An opaque handle to the activations a training forward kept for its backward. */
export type NativeTrainState = object & { readonly __sinkflexTrainState?: never };

/** A packed batch as the addon reads it (every array has the same length T >= 1). */
export interface NativeBatch {
  tokens: Int32Array;
  positions: Int32Array;
  targets?: Int32Array | null;
  documentIds?: Int32Array | null;
}

/** Options of a native training forward. */
export interface NativeForwardOptions {
  impl?: 'fused' | 'eager';
  temperature?: number;
  save?: boolean;
  /** `'layers'`: keep only each layer's input and recompute the layer in the backward (default `'none'`). */
  checkpoint?: 'none' | 'layers';
  /** Rows of logits per LM-head chunk (default 0: automatic, at most 256 MiB of logits per chunk). */
  headChunk?: number;
}

/** What a native training forward returns. */
export interface NativeForwardResult {
  logProbs: Float32Array;
  entropy: Float32Array;
  state: NativeTrainState | null;
}

/** A job given to a session in a run. */
export type NativeJob =
  | {
      kind: 'sample';
      maxTokens: number;
      temperature?: number;
      topP?: number;
      topK?: number;
      minP?: number;
      repetitionPenalty?: number;
      presencePenalty?: number;
      frequencyPenalty?: number;
      logprobsMode?: 'tempered' | 'raw' | 'processed';
      stop?: Int32Array;
    }
  | { kind: 'prefill' };

/** One session's progress in a run. */
export interface NativeRunResult {
  /** Tokens sampled in this run. */
  tokens: Int32Array;
  logProbs: Float32Array;
  /** The session's job has ended. */
  done: boolean;
  /** `'stop' | 'length' | 'context'` for a finished sampling job, `''` otherwise. */
  finishReason: string;
  /** Tokens in the session's context after the run. */
  length: number;
}

/** The native session handle. */
export interface NativeSession {
  append(tokens: Int32Array): number;
  length(): number;
  processed(): number;
  logits(): Float32Array | null;
  bytes(): number;
  busy(): boolean;
  dispose(): void;
  isDisposed(): boolean;
}

/** The native transformer handle. */
export interface NativeTransformer {
  forward(batch: NativeBatch, options?: NativeForwardOptions): NativeForwardResult;
  forwardAsync(batch: NativeBatch, options?: NativeForwardOptions): Promise<NativeForwardResult>;
  backward(state: NativeTrainState, grads: { dLogProbs?: Float32Array | null; dEntropy?: Float32Array | null }): void;
  backwardAsync(
    state: NativeTrainState,
    grads: { dLogProbs?: Float32Array | null; dEntropy?: Float32Array | null },
  ): Promise<void>;
  releaseState(state: NativeTrainState): void;
  stateBytes(state: NativeTrainState): number;
  runAsync(
    items: { session: NativeSession; job?: NativeJob }[],
    options?: { maxForwards?: number; prefillChunk?: number },
  ): Promise<NativeRunResult[]>;
  dispose(): void;
}

/** The addon's transformer classes. */
export interface TransformerAddon {
  Transformer: new (options: { config: NativeModelConfig; store: NativeParamStore }) => NativeTransformer;
  TransformerSession: new (options: {
    model?: NativeTransformer;
    forkOf?: NativeSession;
    seed: number;
  }) => NativeSession;
}

/** The addon typed with the transformer classes. */
export function transformerAddon(): TransformerAddon {
  return loadAddon<TransformerAddon>();
}
