/**
 * `AsyncVectorEnv`: one sub-environment per worker thread (Gymnasium's `AsyncVectorEnv`, with
 * threads instead of processes). Workers build their environment from an {@link EnvSource} (a
 * registered id or a module export — functions cannot cross threads) and run it in parallel; the
 * main thread batches observations and infos exactly as {@link SyncVectorEnv} does, with the
 * same autoreset modes, so the same seeds give the same trajectories.
 *
 * The API is asynchronous (the main thread never blocks): `await envs.reset()`,
 * `await envs.step(actions)`, or the split `stepAsync(actions)` / `await stepWait()` (likewise
 * `resetAsync`/`resetWait`, `callAsync`/`callWait`).
 *
 * Failures never hang and never kill the vector environment:
 * - an error thrown by a sub-environment is caught in its worker and reported as a
 *   {@link VectorEnvError} listing each failing index with its error (the other sub-environments
 *   have completed the command); the worker stays alive;
 * - a worker that does not answer within the timeout is terminated ({@link WorkerTimeoutError});
 *   a worker that crashes or exits is reported as {@link WorkerExitedError}; in both cases the
 *   next `reset` covering that index starts a fresh worker;
 * - `close()` always returns: it waits for a pending call and the workers' `close` up to a
 *   timeout, then terminates the threads.
 *
 * By default (`daemon: true`) idle workers do not keep the process alive.
 * @module
 */
import { Worker, type WorkerOptions } from 'node:worker_threads';

import {
  AlreadyPendingCallError,
  GymError,
  NoAsyncCallError,
  VectorEnvError,
  WorkerExitedError,
  WorkerTimeoutError,
  type SubEnvFailure,
} from '../errors.js';
import { concatenate, createEmptyArray, deepCopy, iterate } from '../spaces/batch.js';
import type { AnySpace } from '../spaces/composite.js';
import { spaceFromJSON } from '../spaces/serialize.js';
import type { EnvMetadata, Info, RenderFrame, ResetResult, StepResult } from '../types.js';
import { addInfo } from './info.js';
import {
  deserializeError,
  resolveEnvSource,
  type EnvSource,
  type ResolvedEnvSource,
  type WorkerCommand,
  type WorkerInit,
  type WorkerMessage,
} from './protocol.js';
import {
  VectorEnvBase,
  expandSeeds,
  parseAutoresetMode,
  splitResetMask,
  type VectorEnvOptions,
  type VectorResetArgs,
  type VectorResetResult,
  type VectorStepResult,
} from './vector-env.js';

/** Options of {@link AsyncVectorEnv}. */
export interface AsyncVectorEnvOptions extends VectorEnvOptions {
  /** Default time a command may take before its worker is terminated, in ms (default 120000; null: no limit). */
  timeoutMs?: number | null;
  /** Time a worker may take to start and build its environment, in ms (default 60000). */
  startTimeoutMs?: number;
  /** Idle workers do not keep the process alive (default true). */
  daemon?: boolean;
  /**
   * The worker entry module (default {@link WORKER_URL}, next to this module). An alternative
   * entry must speak the same protocol, e.g. the same file compiled elsewhere.
   */
  workerUrl?: URL | string;
  /** Extra `Worker` options (`execArgv` defaults to the parent's, so its loaders apply). */
  workerOptions?: Pick<WorkerOptions, 'execArgv' | 'resourceLimits' | 'env' | 'stdout' | 'stderr'>;
  /** The single observation space, when the workers' spaces cannot be rebuilt from JSON. */
  observationSpace?: AnySpace;
  /** The single action space, likewise. */
  actionSpace?: AnySpace;
}

/** Options of the `*Wait` methods. */
export interface WaitOptions {
  /** Overrides the default command timeout (ms; null: no limit). */
  timeoutMs?: number | null;
}

type ReadyMessage = Extract<WorkerMessage, { type: 'ready' }>;

/** The worker entry next to this module: `.ts` under a TypeScript loader (tests), `.js` in dist. */
export const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './worker.ts' : './worker.js', import.meta.url);

/** One worker thread and its outstanding requests. */
class WorkerSlot {
  worker: Worker | null = null;
  alive = false;
  /** Resolves when the current thread has exited. */
  exited: Promise<void> = Promise.resolve();
  private seq = 0;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readyWaiter: { resolve: (m: ReadyMessage) => void; reject: (e: Error) => void } | null = null;

  constructor(
    readonly index: number,
    private readonly init: WorkerInit,
    private readonly workerOptions: AsyncVectorEnvOptions['workerOptions'],
    private readonly daemon: boolean,
    private readonly workerUrl: URL,
  ) {}

  /** Starts the thread; resolves with its ready message or rejects (init error, exit, timeout). */
  start(timeoutMs: number): Promise<ReadyMessage> {
    let worker: Worker;
    try {
      worker = new Worker(this.workerUrl, { execArgv: process.execArgv, ...this.workerOptions, workerData: this.init });
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    this.worker = worker;
    this.alive = true;
    this.exited = new Promise((resolve) => worker.once('exit', () => resolve()));
    worker.on('message', (msg: WorkerMessage) => this.onMessage(msg));
    worker.on('error', (err: Error) =>
      this.fail(new WorkerExitedError(this.index, `uncaught ${err.name}: ${err.message}`, { cause: err }), worker),
    );
    worker.on('exit', (code: number) =>
      this.fail(new WorkerExitedError(this.index, `exited with code ${code}`), worker),
    );
    return new Promise<ReadyMessage>((resolve, reject) => {
      const timer = setTimeout(() => this.terminate(new WorkerTimeoutError(this.index, 'start', timeoutMs)), timeoutMs);
      this.readyWaiter = {
        resolve: (m) => {
          clearTimeout(timer);
          this.idle();
          resolve(m);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
    });
  }

  private onMessage(msg: WorkerMessage): void {
    if (msg.type === 'ready') {
      this.readyWaiter?.resolve(msg);
      this.readyWaiter = null;
    } else if (msg.type === 'init-error') {
      const err = deserializeError(msg.error);
      this.readyWaiter?.reject(err);
      this.readyWaiter = null;
    } else {
      const entry = this.pending.get(msg.seq);
      if (!entry) return;
      this.pending.delete(msg.seq);
      if (msg.ok) entry.resolve(msg.value);
      else entry.reject(deserializeError(msg.error));
      this.idle();
    }
  }

  /** Marks the worker dead and rejects everything outstanding (ignored for a stale worker). */
  private fail(error: Error, worker: Worker): void {
    if (worker !== this.worker) return;
    this.alive = false;
    this.worker = null;
    this.readyWaiter?.reject(error);
    this.readyWaiter = null;
    for (const entry of this.pending.values()) entry.reject(error);
    this.pending.clear();
  }

  /** Terminates the thread, failing its outstanding requests with `error`. */
  terminate(error: Error): Promise<void> {
    const worker = this.worker;
    if (!worker) return Promise.resolve();
    this.fail(error, worker);
    return worker.terminate().then(() => undefined);
  }

  private idle(): void {
    if (this.daemon && this.pending.size === 0) this.worker?.unref();
  }

  /** Sends a command; resolves with the worker's reply value or rejects with its error. */
  request(command: WorkerCommand): Promise<unknown> {
    const worker = this.worker;
    if (!this.alive || !worker)
      return Promise.reject(
        new WorkerExitedError(this.index, 'it exited earlier; reset this sub-environment to start a new worker'),
      );
    const seq = ++this.seq;
    worker.ref();
    return new Promise((resolve, reject) => {
      this.pending.set(seq, { resolve, reject });
      try {
        worker.postMessage({ ...command, seq });
      } catch (e) {
        this.pending.delete(seq);
        this.idle();
        reject(
          new GymError(`cannot send \`${command.cmd}\` to worker ${this.index}: ${(e as Error).message}`, { cause: e }),
        );
      }
    });
  }
}

/**
 * The replies of one command sent to several workers. A deadline (set when the caller waits)
 * terminates the workers that have not answered by then.
 */
class Gathering {
  private deadlineMs: number | null | undefined;
  private readonly entries: Array<{ slot: WorkerSlot; settled: boolean; timer?: NodeJS.Timeout }> = [];

  constructor(private readonly name: string) {}

  /** Sets the deadline (ms from now; null: none) for the outstanding and future requests. */
  setDeadline(ms: number | null): void {
    this.deadlineMs = ms;
    for (const entry of this.entries) this.arm(entry);
  }

  private arm(entry: { slot: WorkerSlot; settled: boolean; timer?: NodeJS.Timeout }): void {
    const ms = this.deadlineMs;
    if (ms === undefined || ms === null || entry.settled || entry.timer) return;
    entry.timer = setTimeout(
      () => void entry.slot.terminate(new WorkerTimeoutError(entry.slot.index, this.name, ms)),
      ms,
    );
  }

  /** Sends `command(i)` to each slot; resolves with the values and the failures by index. */
  async run(
    slots: readonly WorkerSlot[],
    command: (i: number) => WorkerCommand,
  ): Promise<{ values: Map<number, unknown>; failures: SubEnvFailure[] }> {
    const results = await Promise.allSettled(
      slots.map((slot) => {
        const entry: { slot: WorkerSlot; settled: boolean; timer?: NodeJS.Timeout } = { slot, settled: false };
        this.entries.push(entry);
        const reply = slot.request(command(slot.index));
        this.arm(entry);
        return reply.finally(() => {
          entry.settled = true;
          clearTimeout(entry.timer);
        });
      }),
    );
    const values = new Map<number, unknown>();
    const failures: SubEnvFailure[] = [];
    results.forEach((r, k) => {
      if (r.status === 'fulfilled') values.set(slots[k].index, r.value);
      else failures.push({ index: slots[k].index, error: r.reason as Error });
    });
    return { values, failures };
  }
}

type Gathered = { values: Map<number, unknown>; failures: SubEnvFailure[] };

/** Vectorises environments over worker threads. Create it with {@link AsyncVectorEnv.create}. */
export class AsyncVectorEnv<Obs = unknown, Act = unknown> extends VectorEnvBase<Obs, Act> {
  private readonly slots: WorkerSlot[];
  private readonly timeoutMs: number | null;
  private readonly startTimeoutMs: number;
  private readonly spaceJson: string;
  private readonly envObs: unknown[];
  private observations: unknown;
  private pendingCall: { name: string; promise: Promise<Gathered>; gathering: Gathering } | null = null;

  private constructor(slots: WorkerSlot[], ready: ReadyMessage, options: AsyncVectorEnvOptions) {
    const observationSpace = options.observationSpace ?? spaceFromJSON(ready.observationSpace);
    const actionSpace = options.actionSpace ?? spaceFromJSON(ready.actionSpace);
    super(
      slots.length,
      { observationSpace, actionSpace, metadata: ready.metadata as EnvMetadata, renderMode: ready.renderMode },
      options,
    );
    this.slots = slots;
    this.timeoutMs = options.timeoutMs === undefined ? 120_000 : options.timeoutMs;
    this.startTimeoutMs = options.startTimeoutMs ?? 60_000;
    this.spaceJson = JSON.stringify([ready.observationSpace, ready.actionSpace]);
    this.envObs = new Array<unknown>(this.numEnvs).fill(null);
    this.observations = createEmptyArray(this.singleObservationSpace, this.numEnvs);
  }

  /**
   * Starts one worker per source and waits until each has built its environment. Throws a
   * {@link VectorEnvError} (all workers terminated) when one fails to start or the spaces differ.
   */
  static async create<Obs = unknown, Act = unknown>(
    sources: readonly EnvSource[],
    options: AsyncVectorEnvOptions = {},
  ): Promise<AsyncVectorEnv<Obs, Act>> {
    if (!Array.isArray(sources) || sources.length === 0)
      throw new RangeError('AsyncVectorEnv needs at least one env source');
    const mode = parseAutoresetMode(options.autoresetMode);
    const resolved: ResolvedEnvSource[] = sources.map(resolveEnvSource);
    const workerUrl = options.workerUrl === undefined ? WORKER_URL : new URL(options.workerUrl);
    const slots = resolved.map(
      (source, index) =>
        new WorkerSlot(
          index,
          { index, source, autoresetMode: mode },
          options.workerOptions,
          options.daemon ?? true,
          workerUrl,
        ),
    );
    const startTimeout = options.startTimeoutMs ?? 60_000;
    const results = await Promise.allSettled(slots.map((s) => s.start(startTimeout)));
    const failures: SubEnvFailure[] = [];
    results.forEach((r, index) => {
      if (r.status === 'rejected') failures.push({ index, error: r.reason as Error });
    });
    const readies = results.map((r) => (r.status === 'fulfilled' ? r.value : null));
    if (failures.length === 0) {
      const first = JSON.stringify([readies[0]!.observationSpace, readies[0]!.actionSpace]);
      readies.forEach((m, index) => {
        if (JSON.stringify([m!.observationSpace, m!.actionSpace]) !== first) {
          failures.push({
            index,
            error: new GymError(
              `the spaces of sub-environment ${index} differ from those of sub-environment 0; all sub-environments must have equal spaces`,
            ),
          });
        }
      });
    }
    if (failures.length > 0) {
      await Promise.all(slots.map((s) => s.terminate(new GymError('AsyncVectorEnv creation failed'))));
      throw new VectorEnvError('create', failures);
    }
    try {
      return new AsyncVectorEnv<Obs, Act>(slots, readies[0]!, options);
    } catch (e) {
      await Promise.all(slots.map((s) => s.terminate(new GymError('AsyncVectorEnv creation failed'))));
      throw e;
    }
  }

  /** Indices of the sub-environments whose worker is running. */
  get aliveWorkers(): number[] {
    return this.slots.filter((s) => s.alive).map((s) => s.index);
  }

  private all(): WorkerSlot[] {
    return this.slots;
  }

  /** Starts an asynchronous call (at most one at a time, as in Gymnasium). */
  private begin(name: string, run: (gathering: Gathering) => Promise<Gathered>): void {
    this.assertOpen(`${name}Async`);
    if (this.pendingCall) {
      throw new AlreadyPendingCallError(
        `Calling \`${name}Async\` while waiting for a pending call to \`${this.pendingCall.name}\` to complete`,
        this.pendingCall.name,
      );
    }
    const gathering = new Gathering(name);
    const promise = run(gathering);
    promise.catch(() => undefined); // observed by the matching wait
    this.pendingCall = { name, promise, gathering };
  }

  /** Waits for the pending call `name` with a deadline; returns the replies by index (failures included). */
  private async finish(name: string, options: WaitOptions): Promise<Gathered> {
    this.assertOpen(`${name}Wait`);
    if (!this.pendingCall || this.pendingCall.name !== name) {
      throw new NoAsyncCallError(`Calling \`${name}Wait\` without any prior call to \`${name}Async\`.`, name);
    }
    const { promise, gathering } = this.pendingCall;
    gathering.setDeadline(options.timeoutMs === undefined ? this.timeoutMs : options.timeoutMs);
    try {
      return await promise;
    } finally {
      this.pendingCall = null;
    }
  }

  private static check(name: string, gathered: Gathered): Map<number, unknown> {
    if (gathered.failures.length > 0) throw new VectorEnvError(name, gathered.failures);
    return gathered.values;
  }

  /** Starts a reset (see {@link AsyncVectorEnv.reset}); finish it with {@link AsyncVectorEnv.resetWait}. */
  resetAsync(args: VectorResetArgs = {}): void {
    const seeds = expandSeeds(args.seed, this.numEnvs);
    const { mask, options } = splitResetMask(args.options, this.numEnvs);
    const slots = this.slots.filter((s) => !mask || mask[s.index]);
    this.begin('reset', async (gathering) => {
      this.seedVector(args.seed);
      const restartFailures = await this.restart(slots.filter((s) => !s.alive));
      const failed = new Set(restartFailures.map((f) => f.index));
      const gathered = await gathering.run(
        slots.filter((s) => !failed.has(s.index)),
        (i) => ({ cmd: 'reset', seed: seeds[i], options }),
      );
      gathered.failures.push(...restartFailures);
      gathered.failures.sort((a, b) => a.index - b.index);
      return gathered;
    });
  }

  /** Starts fresh workers for dead slots; returns the failures. */
  private async restart(dead: readonly WorkerSlot[]): Promise<SubEnvFailure[]> {
    const results = await Promise.allSettled(dead.map((s) => s.start(this.startTimeoutMs)));
    const failures: SubEnvFailure[] = [];
    for (let k = 0; k < dead.length; k++) {
      const r = results[k];
      if (r.status === 'rejected') failures.push({ index: dead[k].index, error: r.reason as Error });
      else if (JSON.stringify([r.value.observationSpace, r.value.actionSpace]) !== this.spaceJson) {
        await dead[k].terminate(new GymError('different spaces'));
        failures.push({
          index: dead[k].index,
          error: new GymError(`the restarted sub-environment ${dead[k].index} has different spaces`),
        });
      }
    }
    return failures;
  }

  /** Waits for the reset started by {@link AsyncVectorEnv.resetAsync}. */
  async resetWait(options: WaitOptions = {}): Promise<VectorResetResult<Obs>> {
    const gathered = await this.finish('reset', options);
    const infos: Info = {};
    for (const [i, value] of [...gathered.values.entries()].sort((a, b) => a[0] - b[0])) {
      const [obs, info] = value as ResetResult<unknown>;
      this.envObs[i] = obs;
      addInfo(infos, info, i, this.numEnvs);
    }
    AsyncVectorEnv.check('reset', gathered);
    this.observations = concatenate(this.singleObservationSpace, this.envObs, this.observations);
    return [(this.copy ? deepCopy(this.observations) : this.observations) as Obs, infos];
  }

  /**
   * Resets every sub-environment (or those of `options.reset_mask`): an integer seed `s` seeds
   * sub-environment i with `s + i`. Sub-environments whose worker died are restarted first.
   */
  async reset(args: VectorResetArgs = {}, options: WaitOptions = {}): Promise<VectorResetResult<Obs>> {
    this.resetAsync(args);
    return this.resetWait(options);
  }

  /** Starts a step; finish it with {@link AsyncVectorEnv.stepWait}. */
  stepAsync(actions: Act): void {
    this.assertOpen('stepAsync');
    const items = iterate(this.singleActionSpace, actions, this.numEnvs);
    this.begin('step', (gathering) => gathering.run(this.all(), (i) => ({ cmd: 'step', action: items[i] })));
  }

  /**
   * Waits for the step started by {@link AsyncVectorEnv.stepAsync}. When sub-environments fail,
   * the others' observations are kept and a {@link VectorEnvError} is thrown.
   */
  async stepWait(options: WaitOptions = {}): Promise<VectorStepResult<Obs>> {
    const gathered = await this.finish('step', options);
    const rewards = new Float64Array(this.numEnvs);
    const terminations = new Array<boolean>(this.numEnvs).fill(false);
    const truncations = new Array<boolean>(this.numEnvs).fill(false);
    const infos: Info = {};
    for (const [i, value] of [...gathered.values.entries()].sort((a, b) => a[0] - b[0])) {
      const [obs, reward, terminated, truncated, info] = value as StepResult<unknown>;
      this.envObs[i] = obs;
      rewards[i] = reward;
      terminations[i] = terminated;
      truncations[i] = truncated;
      addInfo(infos, info, i, this.numEnvs);
    }
    AsyncVectorEnv.check('step', gathered);
    this.observations = concatenate(this.singleObservationSpace, this.envObs, this.observations);
    return [
      (this.copy ? deepCopy(this.observations) : this.observations) as Obs,
      rewards,
      terminations,
      truncations,
      infos,
    ];
  }

  /** Steps every sub-environment with its action of the batch `actions` (autoreset as {@link SyncVectorEnv}). */
  async step(actions: Act, options: WaitOptions = {}): Promise<VectorStepResult<Obs>> {
    this.stepAsync(actions);
    return this.stepWait(options);
  }

  /** Starts a call of `name` on every sub-environment; finish it with {@link AsyncVectorEnv.callWait}. */
  callAsync(name: string, ...args: unknown[]): void {
    this.begin('call', (gathering) => gathering.run(this.all(), () => ({ cmd: 'call', name, args })));
  }

  /** The results of the call started by {@link AsyncVectorEnv.callAsync}, by sub-environment. */
  async callWait(options: WaitOptions = {}): Promise<unknown[]> {
    const values = AsyncVectorEnv.check('call', await this.finish('call', options));
    return Array.from({ length: this.numEnvs }, (_, i) => values.get(i));
  }

  /** Calls the method `name` of every sub-environment with `args` (a non-function attribute is returned as is). Results must be structured-cloneable. */
  async call(name: string, ...args: unknown[]): Promise<unknown[]> {
    this.callAsync(name, ...args);
    return this.callWait();
  }

  /** The attribute `name` of every sub-environment (as Gymnasium, a method is called without arguments). */
  async getAttr(name: string): Promise<unknown[]> {
    return this.call(name);
  }

  /** Sets the attribute `name` on every sub-environment: one value each (an array of numEnvs) or the same for all. */
  async setAttr(name: string, values: unknown): Promise<void> {
    this.assertOpen('setAttr');
    const list = Array.isArray(values) ? values : new Array<unknown>(this.numEnvs).fill(values);
    if (list.length !== this.numEnvs) {
      throw new RangeError(
        `Values must be a list or tuple with length equal to the number of environments. Got \`${list.length}\` values for ${this.numEnvs} environments.`,
      );
    }
    this.begin('setAttr', (gathering) => gathering.run(this.all(), (i) => ({ cmd: 'setAttr', name, value: list[i] })));
    AsyncVectorEnv.check('setAttr', await this.finish('setAttr', {}));
  }

  /** The frames of every sub-environment. */
  async render(): Promise<Array<RenderFrame | RenderFrame[] | null>> {
    this.begin('render', (gathering) => gathering.run(this.all(), () => ({ cmd: 'render' })));
    const values = AsyncVectorEnv.check('render', await this.finish('render', {}));
    return this.slots.map((s) => values.get(s.index) as RenderFrame | null);
  }

  /**
   * Closes the sub-environments and stops the workers (idempotent; never hangs). Without
   * `terminate`, a pending call and the workers' `close` get up to `timeoutMs` (default 5000)
   * before the threads are terminated.
   */
  async close(options: { terminate?: boolean; timeoutMs?: number } = {}): Promise<void> {
    if (this.closed) return;
    const timeoutMs = options.timeoutMs ?? 5000;
    this.closed = true;
    if (!options.terminate) {
      if (this.pendingCall) {
        this.pendingCall.gathering.setDeadline(timeoutMs);
        await this.pendingCall.promise.catch(() => undefined);
      }
      const gathering = new Gathering('close');
      gathering.setDeadline(timeoutMs);
      const closing = this.slots.filter((s) => s.alive);
      await gathering.run(closing, () => ({ cmd: 'close' }));
      // after closing its env a worker exits on its own; give it the chance before terminating
      // (the threads are referenced meanwhile: an idle daemon worker would not keep us waiting)
      for (const s of closing) s.worker?.ref();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(closing.map((s) => s.exited)),
        new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      ]);
      clearTimeout(timer);
    }
    this.pendingCall = null;
    await Promise.all(this.slots.map((s) => s.terminate(new GymError('the vector environment was closed'))));
  }
}
