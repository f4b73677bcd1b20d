/**
 * The one check that an options object holds only the keys its function knows: a misspelt
 * option (`adaptor` for `adapter`) or one the function does not take is refused by name instead
 * of being ignored.
 *
 * This folder sits below every layer (tau → gym → rollout → trainer): it imports nothing.
 * @module
 */

/**
 * The keys of an options type, listed once: the compiler checks that the list names every key
 * of `T` and no other, so it cannot drift from the interface.
 * @example const KEYS = optionKeys<MakeOptions>({ maxEpisodeSteps: true, disableEnvChecker: true, recordEpisodeStatistics: true });
 */
export function optionKeys<T extends object>(keys: { readonly [K in keyof Required<T>]: true }): readonly string[] {
  return Object.freeze(Object.keys(keys));
}

/**
 * Throws `RangeError("<name>.<key> is not an option of <fn> (known: …)")` for the first own
 * key of `options` outside `known`, and a TypeError when `options` is given but is not an
 * object. `undefined` passes (the defaults).
 */
export function refuseUnknownOptions(
  options: unknown,
  known: readonly string[] | ReadonlySet<string>,
  fn: string,
  name = 'options',
): void {
  if (options === undefined) return;
  if (typeof options !== 'object' || options === null || Array.isArray(options))
    throw new TypeError(
      `${fn}: ${name} must be an object, got ${options === null ? 'null' : Array.isArray(options) ? 'an array' : typeof options}`,
    );
  const has =
    known instanceof Set ? (k: string) => known.has(k) : (k: string) => (known as readonly string[]).includes(k);
  for (const key of Object.keys(options)) {
    if (!has(key)) throw new RangeError(`${name}.${key} is not an option of ${fn} (known: ${[...known].join(', ')})`);
  }
}
