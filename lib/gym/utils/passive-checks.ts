/**
 * Passive checks of environments (Gymnasium's `utils.passive_env_checker`): they inspect the
 * spaces and what `reset`, `step` and `render` return, warn about suspicious values through the
 * gym logger and throw {@link EnvCheckError} where Gymnasium asserts.
 * @module
 */
import { EnvCheckError } from '../errors.js';
import { logger } from '../logger.js';
import { Box } from '../spaces/box.js';
import { Dict, Tuple, type AnySpace } from '../spaces/composite.js';
import { Discrete } from '../spaces/discrete.js';
import { MultiBinary } from '../spaces/multi-binary.js';
import { MultiDiscrete } from '../spaces/multi-discrete.js';
import { Space, dtypeOf, formatShape } from '../spaces/space.js';
import type { EnvMetadata } from '../types.js';

/** A short type name for messages: `number`, `string`, `Float32Array`, `array`, `null`, `object`... */
export function typeName(x: unknown): string {
  if (x === null) return 'null';
  if (Array.isArray(x)) return 'array';
  if (typeof x === 'object') return (x as object).constructor?.name ?? 'object';
  return typeof x;
}

function isPlainObject(x: unknown): x is Record<string, unknown> {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return false;
  const proto = Object.getPrototypeOf(x) as unknown;
  return proto === Object.prototype || proto === null;
}

function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new EnvCheckError(message);
}

/** Checks a space: it must be a Space; Discrete n > 0; MultiDiscrete nvec > 0; no empty Tuple or Dict; Box bounds sensible. */
export function checkSpace(space: unknown, spaceType: 'observation' | 'action'): void {
  if (!(space instanceof Space))
    throw new TypeError(`${spaceType} space does not inherit from \`Space\`, actual type: ${typeName(space)}`);
  if (space instanceof Box) {
    assert(
      space.low.length === space.size,
      `The Box ${spaceType} space shape and low shape have different shapes, low size: ${space.low.length}, box shape: ${formatShape(space.shape)}`,
    );
    assert(
      space.high.length === space.size,
      `The Box ${spaceType} space shape and high shape have different shapes, high size: ${space.high.length}, box shape: ${formatShape(space.shape)}`,
    );
    let equal = false;
    for (let i = 0; i < space.size; i++) equal ||= space.low[i] === space.high[i];
    if (equal) logger.warn(`A Box ${spaceType} space maximum and minimum values are equal.`);
  } else if (space instanceof Discrete) {
    assert(
      space.n > 0,
      `Discrete ${spaceType} space's number of elements must be positive, actual number of elements: ${space.n}`,
    );
  } else if (space instanceof MultiDiscrete) {
    assert(
      Array.from(space.nvec as ArrayLike<number>).every((n) => n > 0),
      `Multi-discrete ${spaceType} space's all nvec elements must be greater than 0, actual nvec: ${Array.from(space.nvec as ArrayLike<number>).join(', ')}`,
    );
  } else if (space instanceof MultiBinary) {
    assert(
      space.shape.every((d) => d > 0),
      `Multi-binary ${spaceType} space's all shape elements must be greater than 0, actual shape: ${formatShape(space.shape)}`,
    );
  } else if (space instanceof Tuple) {
    assert(space.length > 0, `An empty Tuple ${spaceType} space is not allowed.`);
    for (const s of space.spaces as AnySpace[]) checkSpace(s, spaceType);
  } else if (space instanceof Dict) {
    assert(space.keys.length > 0, `An empty Dict ${spaceType} space is not allowed.`);
    for (const k of space.keys) checkSpace(space.spaces[k], spaceType);
  }
}

/** Checks that an observation matches its space's type (warnings) and is within it (warning). */
export function checkObs(obs: unknown, space: AnySpace, methodName: string): void {
  const pre = `The obs returned by the \`${methodName}()\` method`;
  if (space instanceof Discrete) {
    if (typeof obs !== 'number' || !Number.isInteger(obs))
      logger.warn(`${pre} should be an integer number, actual type: ${typeName(obs)}`);
  } else if (space instanceof Box) {
    if (space.shape.length > 0) {
      const dt = dtypeOf(obs);
      if (dt === null) logger.warn(`${pre} was expecting a typed array, actual type: ${typeName(obs)}`);
      else if (dt !== space.dtype)
        logger.warn(`${pre} was expecting typed array dtype to be ${space.dtype}, actual type: ${dt}`);
    }
  } else if (space instanceof MultiBinary || space instanceof MultiDiscrete) {
    if (dtypeOf(obs) === null) logger.warn(`${pre} was expecting a typed array, actual type: ${typeName(obs)}`);
  } else if (space instanceof Tuple) {
    if (!Array.isArray(obs)) logger.warn(`${pre} was expecting an array (tuple), actual type: ${typeName(obs)}`);
    const list = obs as unknown[];
    assert(
      list !== null && list !== undefined && list.length === space.length,
      `${pre} length is not same as the observation space length, obs length: ${list?.length}, space length: ${space.length}`,
    );
    (space.spaces as AnySpace[]).forEach((s, i) => checkObs(list[i], s, methodName));
  } else if (space instanceof Dict) {
    assert(isPlainObject(obs), `${pre} must be a dict (plain object), actual type: ${typeName(obs)}`);
    const keys = Object.keys(obs);
    assert(
      keys.length === space.keys.length && space.keys.every((k) => k in obs),
      `${pre} observation keys is not same as the observation space keys, obs keys: [${keys.join(', ')}], space keys: [${space.keys.join(', ')}]`,
    );
    for (const k of space.keys) checkObs(obs[k], space.spaces[k], methodName);
  }
  try {
    if (!space.contains(obs)) logger.warn(`${pre} is not within the observation space.`);
  } catch (e) {
    logger.warn(`${pre} is not within the observation space with exception: ${(e as Error).message}`);
  }
}

/** Checks what `reset()` returned: `[obs, info]` with obs in the space and info a plain object. */
export function checkResetResult(result: unknown, observationSpace: AnySpace): void {
  if (!Array.isArray(result)) {
    logger.warn(
      `The result returned by \`env.reset()\` was not a tuple of the form \`[obs, info]\`, where \`obs\` is a observation and \`info\` is a dictionary containing additional information. Actual type: \`${typeName(result)}\``,
    );
  } else if (result.length !== 2) {
    logger.warn(
      'The result returned by `env.reset()` should be `[obs, info]` by default, where `obs` is a observation and `info` is a dictionary containing additional information.',
    );
  } else {
    checkObs(result[0], observationSpace, 'reset');
    assert(
      isPlainObject(result[1]),
      `The second element returned by \`env.reset()\` was not a dictionary, actual type: ${typeName(result[1])}`,
    );
  }
}

/** Checks what `step()` returned: five elements, boolean flags, a finite number reward, a plain-object info. */
export function checkStepResult(result: unknown, observationSpace: AnySpace): void {
  assert(Array.isArray(result), `Expects step result to be an array (tuple), actual type: ${typeName(result)}`);
  assert(
    result.length === 5,
    `Expected \`Env.step\` to return a five element tuple, actual number of elements returned: ${result.length}.`,
  );
  const [obs, reward, terminated, truncated, info] = result as unknown[];
  if (typeof terminated !== 'boolean')
    logger.warn(`Expects \`terminated\` signal to be a boolean, actual type: ${typeName(terminated)}`);
  if (typeof truncated !== 'boolean')
    logger.warn(`Expects \`truncated\` signal to be a boolean, actual type: ${typeName(truncated)}`);
  checkObs(obs, observationSpace, 'step');
  if (typeof reward !== 'number') {
    logger.warn(`The reward returned by \`step()\` must be a number, actual type: ${typeName(reward)}`);
  } else {
    if (Number.isNaN(reward)) logger.warn('The reward is a NaN value.');
    if (reward === Infinity || reward === -Infinity) logger.warn('The reward is an inf value.');
  }
  assert(
    isPlainObject(info),
    `The \`info\` returned by \`step()\` must be a dictionary (plain object), actual type: ${typeName(info)}`,
  );
}

/** Checks the declared render modes and fps (before rendering). */
export function checkRenderMetadata(metadata: EnvMetadata, renderMode: string | null): void {
  const modes = metadata.renderModes;
  if (modes === undefined || modes === null) {
    logger.warn(
      'No render modes was declared in the environment (env.metadata.renderModes is null or not defined), you may have trouble when calling `.render()`.',
    );
    return;
  }
  if (!Array.isArray(modes)) {
    logger.warn(`Expects the renderModes to be an array, actual type: ${typeName(modes)}`);
    return;
  }
  if (!modes.every((m) => typeof m === 'string'))
    logger.warn(`Expects all render modes to be strings, actual types: ${modes.map(typeName).join(', ')}`);
  if (modes.length > 0) {
    const fps = metadata.renderFps;
    if (fps === undefined || fps === null) {
      logger.warn(
        'No render fps was declared in the environment (env.metadata.renderFps is null or not defined), rendering may occur at inconsistent fps.',
      );
    } else if (typeof fps !== 'number') {
      logger.warn(`Expects the \`env.metadata.renderFps\` to be a number, actual type: ${typeName(fps)}`);
    } else {
      assert(fps > 0, `Expects the \`env.metadata.renderFps\` to be greater than zero, actual value: ${fps}`);
    }
  }
  if (renderMode !== null) {
    assert(
      modes.includes(renderMode),
      `The environment was initialized successfully however with an unsupported render mode. Render mode: ${renderMode}, modes: [${modes.join(', ')}]`,
    );
  }
}

/** Checks what `render()` returned for `renderMode`. */
export function checkRenderResult(renderMode: string | null, frame: unknown): void {
  if (renderMode === null) return;
  if (renderMode === 'human') {
    if (frame !== null && frame !== undefined)
      logger.warn(`Human rendering should return \`null\`, got ${typeName(frame)}`);
  } else if (renderMode === 'rgb_array') {
    const f = frame as { data?: unknown; shape?: unknown } | null;
    if (typeof f !== 'object' || f === null || !(f.data instanceof Uint8Array) || !Array.isArray(f.shape)) {
      logger.warn(
        `RGB-array rendering should return { data: Uint8Array, shape: [height, width, 3] }, got ${typeName(frame)}`,
      );
    } else if (
      f.shape.length !== 3 ||
      f.shape[2] !== 3 ||
      f.data.length !== (f.shape as number[]).reduce((a, b) => a * b, 1)
    ) {
      logger.warn(
        `RGB-array rendering should return an image of shape [height, width, 3] matching its data, got shape [${f.shape.join(', ')}] with ${f.data.length} bytes`,
      );
    }
  } else if (renderMode === 'ansi' || renderMode === 'ascii') {
    if (typeof frame !== 'string') logger.warn(`ANSI/ASCII rendering should produce a string, got ${typeName(frame)}`);
  } else if (renderMode.endsWith('_list')) {
    if (!Array.isArray(frame))
      logger.warn(`Render mode \`${renderMode}\` should produce a list, got ${typeName(frame)}`);
    else for (const item of frame) checkRenderResult(renderMode.slice(0, -5), item);
  }
}
