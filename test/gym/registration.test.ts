import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import t from 'tap';

import {
  AsyncEnv,
  AsyncOrderEnforcing,
  AsyncPassiveEnvChecker,
  AsyncRecordEpisodeStatistics,
  AsyncTimeLimit,
  CartPoleEnv,
  DeprecatedEnv,
  EnvSpec,
  GymError,
  NameNotFound,
  NamespaceNotFound,
  OrderEnforcing,
  PassiveEnvChecker,
  RecordEpisodeStatistics,
  RegistrationError,
  SyncToAsyncEnv,
  TimeLimit,
  UnregisteredEnv,
  VersionNotFound,
  Wrapper,
  captureWarnings,
  captureWarningsAsync,
  loadEntryPoint,
  make,
  makeAsync,
  namespace,
  pprintRegistry,
  register,
  registry,
  spec,
  type Env,
} from '../../lib/gym/index.js';
import {
  findHighestVersion,
  getEnvId,
  importEntryPoint,
  parseEnvId,
  resolveModuleSpecifier,
} from '../../lib/gym/registration.js';
import { AsyncCountingEnv, CountingEnv, type CountingOptions } from './fixtures/envs.js';

const fixtureUrl = new URL('./fixtures/envs.js', import.meta.url).href;
const counting = (kwargs: Record<string, unknown>): CountingEnv => new CountingEnv(kwargs as CountingOptions);

function cleanup(prefix: string): void {
  for (const id of [...registry.keys()]) if (id.startsWith(prefix)) registry.delete(id);
}

t.test('ids: [namespace/]Name[-vN]', async (t) => {
  t.same(parseEnvId('CartPole-v1'), { namespace: null, name: 'CartPole', version: 1 });
  t.same(parseEnvId('sinkflex/CartPole-v1'), { namespace: 'sinkflex', name: 'CartPole', version: 1 });
  t.same(parseEnvId('ns/Name'), { namespace: 'ns', name: 'Name', version: null });
  t.same(parseEnvId('My.Env-x-v10'), { namespace: null, name: 'My.Env-x', version: 10 });
  t.same(
    parseEnvId('Name-v'),
    { namespace: null, name: 'Name-v', version: null },
    'a missing number is part of the name',
  );
  t.throws(() => parseEnvId('a/b/c-v0'), /Malformed environment ID/);
  t.throws(() => parseEnvId('bad id'), GymError);
  t.equal(getEnvId('ns', 'Name', 3), 'ns/Name-v3');
  t.equal(getEnvId(null, 'Name', null), 'Name');
});

t.test('version rules on register', async (t) => {
  register({ id: 'vr/Plain', entryPoint: counting });
  t.throws(
    () => register({ id: 'vr/Plain-v0', entryPoint: counting }),
    RegistrationError,
    'versioned after unversioned',
  );
  t.throws(
    () => register({ id: 'vr/Plain-v0', entryPoint: counting }),
    /Can't register the versioned environment `vr\/Plain-v0` when the unversioned environment `vr\/Plain`/,
  );
  register({ id: 'vr/Versioned-v1', entryPoint: counting });
  t.throws(
    () => register({ id: 'vr/Versioned', entryPoint: counting }),
    /Can't register the unversioned environment `vr\/Versioned` when the versioned environment `vr\/Versioned-v1`/,
  );
  t.match(
    captureWarnings(() => register({ id: 'vr/Versioned-v1', entryPoint: counting })).warnings.join(),
    /Overriding environment vr\/Versioned-v1 already in registry/,
  );
  t.throws(() => register({ id: 'vr/NoEntry-v0' }), /Either `entryPoint` or `vectorEntryPoint`/);
  t.ok(register({ id: 'vr/VecOnly-v0', vectorEntryPoint: 'x#y' }));
  t.throws(() => make('vr/VecOnly-v0'), /entryPoint is not specified/);
  const inner = namespace('vrns', () => register({ id: 'other/Inside-v0', entryPoint: counting }));
  t.equal(inner.id, 'vrns/Inside-v0', 'namespace() overrides the id namespace');
  t.equal(registry.has('vrns/Inside-v0'), true);
  t.throws(
    () =>
      namespace('vrns', () => {
        throw new Error('inner');
      }),
    /inner/,
  );
  t.equal(register({ id: 'Outside-v0', entryPoint: counting }).namespace, null, 'namespace is restored after an error');
  cleanup('vr');
  registry.delete('Outside-v0');
});

t.test('version rules on make and spec', async (t) => {
  register({ id: 'mk/Env-v1', entryPoint: counting });
  register({ id: 'mk/Env-v3', entryPoint: counting });
  register({ id: 'mk/Only', entryPoint: counting });
  t.equal(findHighestVersion('mk', 'Env'), 3);
  t.equal(findHighestVersion('mk', 'Only'), null);
  const latest = captureWarnings(() => make('mk/Env'));
  t.equal(latest.result.spec?.id, 'mk/Env-v3', 'unversioned id picks the latest version');
  t.match(
    latest.warnings.join(),
    /Using the latest versioned environment `mk\/Env-v3` instead of the unversioned environment `mk\/Env`/,
  );
  const old = captureWarnings(() => make('mk/Env-v1'));
  t.equal(old.result.spec?.id, 'mk/Env-v1');
  t.match(
    old.warnings.join(),
    /The environment mk\/Env-v1 is out of date. You should consider upgrading to version `v3`/,
  );
  captureWarnings(() => {
    t.throws(() => make('mk/Env-v2'), DeprecatedEnv, 'an unregistered older version is deprecated');
    t.throws(
      () => make('mk/Env-v2'),
      /Environment version v2 for `mk\/Env` is deprecated. Please use `mk\/Env-v3` instead/,
    );
  });
  t.throws(() => make('mk/Env-v7'), VersionNotFound);
  t.throws(() => make('mk/Env-v7'), /It provides versioned environments: \[ `v1`, `v3` \]/);
  t.throws(() => make('mk/Only-v0'), DeprecatedEnv, 'only an unversioned env');
  t.throws(() => make('mk/Only-v0'), /It provides the default version `mk\/Only`/);
  t.throws(() => make('mk/Evn-v1'), NameNotFound);
  t.throws(() => make('mk/Evn-v1'), /Environment `Evn` doesn't exist in namespace mk. Did you mean: `Env`\?/);
  t.throws(() => make('km/Env-v1'), NamespaceNotFound);
  t.throws(() => make('mkk/Env-v1'), /Namespace mkk not found. Did you mean: `mk`\?/);
  t.throws(() => make('zzzzzz/Env-v1'), /Have you installed \(imported\) the package that registers zzzzzz/);
  t.throws(() => make('NoSuchThingAtAll-v0'), NameNotFound);
  t.equal(spec('mk/Env-v1').id, 'mk/Env-v1');
  t.throws(() => spec('mk/Env'), UnregisteredEnv, 'spec() does not resolve versions');
  t.throws(() => spec('mk/Env-v9'), VersionNotFound);
  cleanup('mk/');
});

t.test('make applies PassiveEnvChecker, OrderEnforcing, TimeLimit in Gymnasium order', async (t) => {
  register({ id: 'wo/Counting-v0', entryPoint: counting, maxEpisodeSteps: 4, kwargs: { length: 100, label: 'spec' } });
  const env = make('wo/Counting-v0', { label: 'made' });
  t.equal(env.toString(), '<TimeLimit<OrderEnforcing<PassiveEnvChecker<CountingEnv<wo/Counting-v0>>>>>');
  t.ok(env instanceof TimeLimit);
  const oe = (env as TimeLimit<unknown, unknown>).env;
  t.ok(oe instanceof OrderEnforcing);
  t.ok((oe as Wrapper).env instanceof PassiveEnvChecker);
  const base = env.unwrapped as CountingEnv;
  t.equal(base.label, 'made', 'make kwargs override spec kwargs');
  t.equal(base.length, 100, 'spec kwargs are used');
  t.same(base.spec?.kwargs, { length: 100, label: 'made' }, 'the unwrapped spec records the merged kwargs');
  t.equal(base.spec?.maxEpisodeSteps, null, 'the unwrapped spec has no wrappers');
  t.equal(env.spec?.maxEpisodeSteps, 4, 'the outer spec recovers the registered one');
  t.equal(env.spec?.orderEnforce, true);
  t.equal(env.spec?.disableEnvChecker, false);
  env.reset();
  for (let i = 0; i < 3; i++) t.equal(env.step(0)[3], false);
  t.equal(env.step(0)[3], true, 'TimeLimit from the spec');
  t.equal(make('wo/Counting-v0', {}, { maxEpisodeSteps: 2 }).spec?.maxEpisodeSteps, 2, 'maxEpisodeSteps overrides');
  const bare = make('wo/Counting-v0', {}, { disableEnvChecker: true });
  t.equal(bare.toString(), '<TimeLimit<OrderEnforcing<CountingEnv<wo/Counting-v0>>>>');
  register({ id: 'wo/Raw-v0', entryPoint: counting, orderEnforce: false, disableEnvChecker: true });
  t.equal(make('wo/Raw-v0').toString(), '<CountingEnv<wo/Raw-v0>>', 'no wrappers when the spec asks for none');
  t.equal(
    make('wo/Raw-v0', {}, { disableEnvChecker: false }).toString(),
    '<PassiveEnvChecker<CountingEnv<wo/Raw-v0>>>',
  );
  const stats = make('wo/Counting-v0', {}, { recordEpisodeStatistics: { statsKey: 'ep' } });
  t.ok(stats instanceof RecordEpisodeStatistics, 'RecordEpisodeStatistics is outermost');
  t.equal((stats as Wrapper).env.constructor, TimeLimit);
  stats.reset();
  let info: Record<string, unknown> = {};
  for (let i = 0; i < 4; i++) info = stats.step(0)[4];
  t.same((info.ep as { l: number }).l, 4, 'it sees the truncation');
  t.ok(make('wo/Counting-v0', {}, { recordEpisodeStatistics: true }) instanceof RecordEpisodeStatistics);
  // additional wrappers
  class Tag extends Wrapper {
    constructor(
      env: Env,
      readonly kwargs: Record<string, unknown>,
    ) {
      super(env);
    }
  }
  register({
    id: 'wo/Extra-v0',
    entryPoint: CountingEnv as never,
    additionalWrappers: [{ name: 'Tag', entryPoint: Tag as never, kwargs: { a: 1 } }],
  });
  const extra = make('wo/Extra-v0');
  t.ok(extra instanceof Tag && (extra as Tag).kwargs.a === 1, 'additional wrappers after the standard ones');
  t.ok((extra as Tag).env instanceof OrderEnforcing);
  t.ok(extra.unwrapped instanceof CountingEnv, 'a class entry point is constructed with new');
  // entry point errors
  register({
    id: 'wo/Throws-v0',
    entryPoint: () => {
      throw new TypeError('bad kwarg');
    },
  });
  t.throws(
    () => make('wo/Throws-v0', { x: 1 }),
    /bad kwarg was raised from the environment creator for wo\/Throws-v0 with kwargs \(x\)/,
  );
  register({ id: 'wo/NotEnv-v0', entryPoint: (() => ({})) as never });
  t.throws(() => make('wo/NotEnv-v0'), /did not return an Env/);
  register({ id: 'wo/Async-v0', entryPoint: (k) => new AsyncCountingEnv(k as CountingOptions) });
  t.throws(() => make('wo/Async-v0'), /creates an AsyncEnv: use makeAsync/);
  t.throws(() => make(5 as never), TypeError);
  register({ id: 'wo/Class-v0', entryPoint: CountingEnv as never });
  t.match(
    captureWarnings(() => make('wo/Class-v0', { renderMode: 'rgb_array' })).warnings.join(),
    /renderMode="rgb_array" that is not in the possible renderModes \(\[ansi\]\)/,
  );
  cleanup('wo/');
});

t.test('makeAsync wraps AsyncEnvs with the async wrappers', async (t) => {
  register({
    id: 'ma/Async-v0',
    entryPoint: (k) => new AsyncCountingEnv(k as CountingOptions),
    maxEpisodeSteps: 2,
    kwargs: { length: 10 },
  });
  const env = await makeAsync('ma/Async-v0', {}, { recordEpisodeStatistics: true });
  t.ok(env instanceof AsyncRecordEpisodeStatistics);
  t.equal(
    env.toString(),
    '<AsyncRecordEpisodeStatistics<AsyncTimeLimit<AsyncOrderEnforcing<AsyncPassiveEnvChecker<AsyncCountingEnv<ma/Async-v0>>>>>>',
  );
  t.ok(env instanceof AsyncEnv);
  await env.reset({ seed: 0 });
  await env.step(0);
  const [, , , truncated, info] = await env.step(0);
  t.equal(truncated, true);
  t.same((info.episode as { l: number }).l, 2);
  const bare = await makeAsync('ma/Async-v0', {}, { disableEnvChecker: true, maxEpisodeSteps: 5 });
  t.ok(bare instanceof AsyncTimeLimit && (bare as AsyncTimeLimit<unknown, unknown>).env instanceof AsyncOrderEnforcing);
  t.notOk(
    ((bare as AsyncTimeLimit<unknown, unknown>).env as AsyncOrderEnforcing<unknown, unknown>).env instanceof
      AsyncPassiveEnvChecker,
  );
  const sync = await makeAsync('sinkflex/CartPole-v1');
  t.ok(sync instanceof SyncToAsyncEnv, 'a synchronous env gets the sync wrappers, then an adapter');
  t.equal(
    sync.toString(),
    '<SyncToAsyncEnv<TimeLimit<OrderEnforcing<PassiveEnvChecker<CartPoleEnv<sinkflex/CartPole-v1>>>>>>',
  );
  register({
    id: 'ma/Raw-v0',
    entryPoint: (k) => new AsyncCountingEnv(k as CountingOptions),
    orderEnforce: false,
    disableEnvChecker: true,
  });
  t.equal((await makeAsync('ma/Raw-v0')).toString(), '<AsyncCountingEnv<ma/Raw-v0>>');
  cleanup('ma/');
});

t.test('string entry points ("path#export")', async (t) => {
  const rel = relative(process.cwd(), fileURLToPath(fixtureUrl));
  t.same(
    resolveModuleSpecifier(`./${rel}#CountingEnv`),
    { url: fixtureUrl, exportName: 'CountingEnv' },
    'relative paths resolve against the cwd',
  );
  t.equal(resolveModuleSpecifier('some-package').exportName, 'default');
  t.equal(resolveModuleSpecifier('some-package').url, 'some-package', 'package specifiers are kept');
  t.throws(() => resolveModuleSpecifier('#x'), TypeError);
  register({ id: 'se/Counting-v0', entryPoint: `./${rel}#CountingEnv`, kwargs: { length: 2 } });
  register({ id: 'se/Factory-v0', entryPoint: `${fixtureUrl}#makeCounting` });
  register({ id: 'se/Missing-v0', entryPoint: `${fixtureUrl}#NoSuchExport` });
  t.throws(() => make('se/Factory-v0'), /is not loaded yet: call `await loadEntryPoint\('se\/Factory-v0'\)`/);
  await loadEntryPoint('se/Counting-v0');
  const env = make('se/Counting-v0');
  t.ok(env.unwrapped instanceof CountingEnv && (env.unwrapped as CountingEnv).length === 2);
  const viaAsync = await makeAsync('se/Factory-v0');
  t.equal((viaAsync.unwrapped as CountingEnv).label, 'factory', 'factory functions are called');
  await t.rejects(makeAsync('se/Missing-v0'), /has no export `NoSuchExport`/);
  t.equal(await importEntryPoint(`${fixtureUrl}#CountingEnv`), CountingEnv, 'cached import');
  const json = JSON.stringify(spec('se/Counting-v0'));
  const back = EnvSpec.fromJSON(json);
  t.same(back.toInit(), spec('se/Counting-v0').toInit(), 'a spec with string entry points round-trips through JSON');
  t.throws(() => JSON.stringify(new EnvSpec({ id: 'F-v0', entryPoint: counting })), /its entry point is a function/);
  t.equal(EnvSpec.fromJSON(back.toJSON()).id, 'se/Counting-v0');
  cleanup('se/');
});

t.test('spec helpers and the registry listing', async (t) => {
  const s = spec('sinkflex/CartPole-v1');
  t.equal(s.maxEpisodeSteps, 500);
  t.equal(s.rewardThreshold, 475);
  t.equal(s.pprint(), 'id=sinkflex/CartPole-v1\nrewardThreshold=475\nmaxEpisodeSteps=500');
  t.match(
    s.pprint({ printAll: true }),
    /entryPoint=.*cartpole\.(js|ts)#CartPoleEnv[\s\S]*orderEnforce=true[\s\S]*additionalWrappers=\[\]/,
  );
  t.match(
    new EnvSpec({
      id: 'F-v0',
      entryPoint: counting,
      nondeterministic: true,
      orderEnforce: false,
      disableEnvChecker: true,
    }).pprint({ includeEntryPoints: true }),
    /entryPoint=counting\nnondeterministic=true\norderEnforce=false\ndisableEnvChecker=true/,
  );
  const copy = s.copyWith({ maxEpisodeSteps: 10 });
  t.equal(copy.maxEpisodeSteps, 10);
  t.equal(s.maxEpisodeSteps, 500, 'copyWith does not mutate');
  const listing = pprintRegistry();
  t.match(listing, /===== sinkflex =====\nsinkflex\/CartPole-v0\s+sinkflex\/CartPole-v1/);
  t.notMatch(pprintRegistry({ excludeNamespaces: ['sinkflex'] }), /CartPole/);
  t.ok(s.make() instanceof TimeLimit, 'spec.make()');
  t.ok(make(s).unwrapped instanceof CartPoleEnv, 'make accepts a spec');
  const warnings = (await captureWarningsAsync(async () => make('sinkflex/CartPole'))).warnings;
  t.match(warnings.join(), /Using the latest versioned environment `sinkflex\/CartPole-v1`/);
});
