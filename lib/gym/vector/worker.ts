/**
 * The worker-thread entry of {@link AsyncVectorEnv}: it builds one environment from its
 * {@link ResolvedEnvSource} (always as an AsyncEnv; a synchronous one is adapted), reports the
 * spaces, then serves commands one at a time. Errors of a command are caught and sent back; the
 * worker stays alive. Autoreset follows Gymnasium's async worker: NEXT_STEP resets on the step
 * after an episode's end, SAME_STEP resets at once and reports `final_obs`/`final_info` in the
 * info, DISABLED refuses to step an ended episode.
 * @module
 */
import { parentPort, workerData } from 'node:worker_threads';

import { AsyncEnv, toAsyncEnv } from '../async-core.js';
import { EnvBase } from '../core.js';
import '../envs/builtin.js';
import { GymError } from '../errors.js';
import { importEntryPoint, makeAsync } from '../registration.js';
import type { AnySpace } from '../spaces/composite.js';
import { AutoresetMode, type EnvMetadata, type Info, type StepResult } from '../types.js';
import { serializeError, type WorkerInit, type WorkerMessage, type WorkerRequest } from './protocol.js';
import { resolveAttrOwner } from './vector-env.js';

const port = parentPort;
if (!port) throw new Error('the AsyncVectorEnv worker must run in a worker thread');
const init = workerData as WorkerInit;

function send(message: WorkerMessage): void {
  try {
    port!.postMessage(message);
  } catch (e) {
    if (message.type === 'reply' && message.ok) {
      port!.postMessage({
        type: 'reply',
        seq: message.seq,
        ok: false,
        error: {
          name: 'DataCloneError',
          message: `the result cannot be sent between threads: ${(e as Error).message}`,
        },
      } satisfies WorkerMessage);
    } else {
      throw e;
    }
  }
}

async function createEnv(): Promise<AsyncEnv> {
  const source = init.source;
  for (const spec of source.imports) await import(spec);
  if (source.kind === 'id') return makeAsync(source.id, source.kwargs, source.makeOptions);
  const creator = await importEntryPoint<unknown>(`${source.url}#${source.exportName}`);
  if (typeof creator !== 'function')
    throw new TypeError(`export \`${source.exportName}\` of ${source.url} is not a class or a function`);
  const isClass =
    (creator as { prototype?: unknown }).prototype instanceof EnvBase ||
    /^class[\s{]/.test(Function.prototype.toString.call(creator));
  const env = isClass
    ? new (creator as new (k: unknown) => unknown)(source.kwargs)
    : (creator as (k: unknown) => unknown)(source.kwargs);
  if (!(env instanceof EnvBase))
    throw new TypeError(`export \`${source.exportName}\` of ${source.url} did not create an Env or AsyncEnv`);
  return toAsyncEnv(env as AsyncEnv);
}

let env: AsyncEnv;
let autoreset = false;

async function step(action: unknown): Promise<StepResult<unknown>> {
  const mode = init.autoresetMode;
  if (mode === AutoresetMode.NEXT_STEP && autoreset) {
    const [obs, info] = await env.reset();
    autoreset = false;
    return [obs, 0, false, false, info];
  }
  if (mode === AutoresetMode.DISABLED && autoreset) {
    throw new GymError(
      `Sub-environment ${init.index} has ended its episode and the autoreset mode is DISABLED: reset it with reset({ options: { reset_mask } }) before stepping it`,
    );
  }
  const [obs, reward, terminated, truncated, info] = await env.step(action);
  if (mode === AutoresetMode.SAME_STEP && (terminated || truncated)) {
    const [resetObs, resetInfo] = await env.reset();
    const merged: Info = { final_obs: obs, final_info: info, ...resetInfo };
    return [resetObs, reward, terminated, truncated, merged];
  }
  autoreset = terminated || truncated;
  return [obs, reward, terminated, truncated, info];
}

async function handle(req: WorkerRequest): Promise<unknown> {
  switch (req.cmd) {
    case 'reset': {
      const result = await env.reset({ seed: req.seed, options: req.options });
      autoreset = false;
      return result;
    }
    case 'step':
      return step(req.action);
    case 'call': {
      const owner = resolveAttrOwner(env, req.name) as Record<string, unknown>;
      const value = owner[req.name];
      return typeof value === 'function' ? await (value as (...a: unknown[]) => unknown).apply(owner, req.args) : value;
    }
    case 'setAttr':
      env.setWrapperAttr(req.name, req.value);
      return null;
    case 'render':
      return env.render();
    case 'close':
      await env.close();
      return null;
  }
}

let queue: Promise<void> = Promise.resolve();

try {
  env = await createEnv();
  send({
    type: 'ready',
    observationSpace: (env.observationSpace as AnySpace).toJSON(),
    actionSpace: (env.actionSpace as AnySpace).toJSON(),
    metadata: JSON.parse(JSON.stringify(env.metadata)) as EnvMetadata,
    renderMode: env.renderMode,
  });
  port.on('message', (req: WorkerRequest) => {
    queue = queue.then(async () => {
      try {
        const value = await handle(req);
        send({ type: 'reply', seq: req.seq, ok: true, value });
      } catch (e) {
        send({ type: 'reply', seq: req.seq, ok: false, error: serializeError(e) });
      }
      if (req.cmd === 'close') port.close();
    });
  });
} catch (e) {
  send({ type: 'init-error', error: serializeError(e) });
  port.close();
}
