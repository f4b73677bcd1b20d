/**
 * Abort helpers of the server's engines.
 * @module
 */

/** `p`, or a rejection with the signal's reason as soon as it aborts. */
export function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const abort = (): void => reject(signal.reason);
    signal.addEventListener('abort', abort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', abort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', abort);
        reject(e);
      },
    );
  });
}

/** Why a generation stopped early: the client went away (answered as 499 in the log). */
export class ClientGone extends Error {
  constructor() {
    super('the client closed the connection');
    this.name = 'ClientGone';
  }
}
