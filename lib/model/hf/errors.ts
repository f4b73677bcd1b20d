/**
 * Errors of the Hugging Face loader: each names the config field or the tensor concerned.
 * @module
 */

/** A config.json that cannot be loaded: an unknown architecture, a missing or invalid field, an unsupported feature. */
export class HfConfigError extends Error {
  constructor(
    /** The field, as a path into config.json (e.g. `'rope_scaling.factor'`, `'architectures'`). */
    readonly field: string,
    message: string,
    /** The config file. */
    readonly path = 'config.json',
  ) {
    super(`${path}: ${field}: ${message}`);
    this.name = 'HfConfigError';
  }
}

/** A checkpoint's tensors that do not fit its config: missing, unexpected, of a wrong shape or an unsupported dtype, or a bad shard index. */
export class HfTensorError extends Error {
  constructor(
    /** The tensor (its Hugging Face name) or the file concerned. */
    readonly tensor: string,
    message: string,
  ) {
    super(`${tensor}: ${message}`);
    this.name = 'HfTensorError';
  }
}
