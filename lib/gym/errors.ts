/**
 * Error classes of the Gymnasium port, named after `gymnasium.error`.
 * @module
 */

/** Base class of every error raised by the gym layer. */
export class GymError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An id or spec could not be registered (malformed id, version conflicts). */
export class RegistrationError extends GymError {}

/** No environment with this id is registered (and no close match explains it). */
export class UnregisteredEnv extends GymError {}

/** The namespace of an id does not exist in the registry. */
export class NamespaceNotFound extends UnregisteredEnv {}

/** The name of an id does not exist (in its namespace). */
export class NameNotFound extends UnregisteredEnv {}

/** The requested version of an environment does not exist (it is newer than the latest). */
export class VersionNotFound extends UnregisteredEnv {}

/** The requested version exists no more: a newer version (or only an unversioned one) is registered. */
export class DeprecatedEnv extends GymError {}

/** `step()` or `render()` was called before `reset()` (see {@link OrderEnforcing}). */
export class ResetNeeded extends GymError {}

/** An operation was attempted on an environment (or vector environment) that is closed. */
export class ClosedEnvironmentError extends GymError {}

/** A method was called that the environment (or space) does not implement. */
export class NotImplementedError extends GymError {}

/** A second asynchronous call was started while one is pending (AsyncVectorEnv). */
export class AlreadyPendingCallError extends GymError {
  /** The name of the pending call. */
  readonly pending: string;
  constructor(message: string, pending: string) {
    super(message);
    this.pending = pending;
  }
}

/** A `*Wait` method was called without a matching `*Async` call (AsyncVectorEnv). */
export class NoAsyncCallError extends GymError {
  /** The name of the expected call. */
  readonly expected: string;
  constructor(message: string, expected: string) {
    super(message);
    this.expected = expected;
  }
}

/** One failure of one sub-environment of a vector environment. */
export interface SubEnvFailure {
  /** Index of the sub-environment (worker). */
  index: number;
  /** The error the sub-environment raised, rebuilt on this thread. */
  error: Error;
}

/**
 * One or more sub-environments of a vector environment failed during a command. `failures`
 * lists each failing index with its error (the first one is also the `cause`).
 */
export class VectorEnvError extends GymError {
  /** The command that failed (`reset`, `step`, `call`, ...). */
  readonly command: string;
  /** Every failing sub-environment with its error, by increasing index. */
  readonly failures: SubEnvFailure[];
  constructor(command: string, failures: SubEnvFailure[]) {
    const list = failures.map((f) => `#${f.index}: ${f.error.name}: ${f.error.message}`).join('; ');
    super(`${command} failed in ${failures.length} sub-environment(s): ${list}`, { cause: failures[0]?.error });
    this.command = command;
    this.failures = failures;
  }
  /** Indices of the failing sub-environments. */
  get indices(): number[] {
    return this.failures.map((f) => f.index);
  }
}

/** A worker of an AsyncVectorEnv did not answer in time; it has been terminated. */
export class WorkerTimeoutError extends GymError {
  /** Index of the worker. */
  readonly index: number;
  /** The command it did not answer. */
  readonly command: string;
  /** The timeout that elapsed, in milliseconds. */
  readonly timeoutMs: number;
  constructor(index: number, command: string, timeoutMs: number) {
    super(`worker ${index} did not answer \`${command}\` within ${timeoutMs} ms; it was terminated`);
    this.index = index;
    this.command = command;
    this.timeoutMs = timeoutMs;
  }
}

/** A worker of an AsyncVectorEnv exited or crashed outside of a command. */
export class WorkerExitedError extends GymError {
  /** Index of the worker. */
  readonly index: number;
  constructor(index: number, message: string, options?: { cause?: unknown }) {
    super(`worker ${index} is gone: ${message}`, options);
    this.index = index;
  }
}

/** An environment breaks the API contract (raised by `checkEnv` and `PassiveEnvChecker`; Gymnasium's assertions). */
export class EnvCheckError extends GymError {}
