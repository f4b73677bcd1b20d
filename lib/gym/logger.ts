/**
 * Warnings of the gym layer (Gymnasium's `gymnasium.logger`). Checkers and wrappers report
 * problems that do not stop an environment (an observation outside its space, an infinite
 * reward) as warnings. By default a warning is printed once per distinct message through
 * `process.emitWarning` (type `GymnasiumWarning`); {@link setWarningHandler} replaces that, and
 * {@link captureWarnings} collects the warnings emitted while a function runs.
 * @module
 */

/** A warning category: `warn` (API misuse) or `deprecation` (outdated API use). */
export type WarningKind = 'warn' | 'deprecation';

/** Receives every warning. */
export type WarningHandler = (message: string, kind: WarningKind) => void;

const printed = new Set<string>();

/** The default handler: `process.emitWarning` once per distinct message. */
export const defaultWarningHandler: WarningHandler = (message, kind) => {
  const key = `${kind}:${message}`;
  if (printed.has(key)) return;
  printed.add(key);
  process.emitWarning(message, { type: kind === 'deprecation' ? 'GymnasiumDeprecationWarning' : 'GymnasiumWarning' });
};

let handler: WarningHandler = defaultWarningHandler;
const captureStack: Array<Array<{ message: string; kind: WarningKind }>> = [];

/** Replaces the warning handler; returns the previous one. */
export function setWarningHandler(next: WarningHandler): WarningHandler {
  const previous = handler;
  handler = next;
  return previous;
}

function emit(message: string, kind: WarningKind): void {
  const top = captureStack[captureStack.length - 1];
  if (top) top.push({ message, kind });
  else handler(message, kind);
}

/** The gym logger: `warn` and `deprecation` like Gymnasium's. */
export const logger = {
  /** Reports a misuse that does not stop the environment. */
  warn(message: string): void {
    emit(message, 'warn');
  },
  /** Reports the use of an outdated API. */
  deprecation(message: string): void {
    emit(message, 'deprecation');
  },
};

/**
 * Runs `fn` and returns its result with every warning emitted meanwhile (not passed to the
 * handler). Nested captures see only their own warnings. For async functions use
 * {@link captureWarningsAsync}.
 */
export function captureWarnings<T>(fn: () => T): { result: T; warnings: string[] } {
  const bucket: Array<{ message: string; kind: WarningKind }> = [];
  captureStack.push(bucket);
  try {
    const result = fn();
    return { result, warnings: bucket.map((w) => w.message) };
  } finally {
    captureStack.splice(captureStack.lastIndexOf(bucket), 1);
  }
}

/**
 * Like {@link captureWarnings} for an async function. Warnings emitted by other tasks that run
 * while `fn` awaits are captured too (the capture is by time, not by call chain).
 */
export async function captureWarningsAsync<T>(fn: () => Promise<T>): Promise<{ result: T; warnings: string[] }> {
  const bucket: Array<{ message: string; kind: WarningKind }> = [];
  captureStack.push(bucket);
  try {
    const result = await fn();
    return { result, warnings: bucket.map((w) => w.message) };
  } finally {
    captureStack.splice(captureStack.lastIndexOf(bucket), 1);
  }
}
