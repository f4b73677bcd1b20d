// The public surface of the package, pinned: the names the root exports (`sinkflex-rl`) and the
// subpath exports (`sinkflex-rl/<layer>`) package.json declares. A change to either is deliberate:
// edit the index file and this list together. Also checked: every index file lists its exports
// (no `export *`), its runtime exports are exactly its non-type names, every root name comes from
// its layer's subpath, and the imports in the docs' code examples name exported things.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

import t from 'tap';
import ts from 'typescript';

const root = process.cwd();

/** The subpath exports besides `.` and `./package.json`: one per layer, `lib/<layer>/index.ts`. */
const SUBPATHS = ['native', 'attention', 'tau', 'gym', 'rollout', 'model', 'grpo', 'openai', 'trainer'];

/** The root's exports, sorted by name; `type ` marks a type-only export. */
const ROOT = [
  'type AdvantageOptions', 'AgentLoop', 'type AgentLoopOptions', 'type AnyEnv', 'AsyncTauEnv',
  'type AttentionOptions', 'type AttentionShape', 'type Backend', 'type ChatFormat', 'type ChatMessage',
  'type ChatModel', 'type ChatPolicy', 'type ChatServer', 'type ChatServerOptions', 'ChatTemplate',
  'ChatTokenPolicy', 'CheckpointError', 'ConfigError', 'DataProto', 'type Device', 'DeviceError',
  'type DeviceRequest', 'type DeviceTensor', 'DeviceUnavailableError', 'type EpisodeRecord',
  'type EvaluatePolicyOptions', 'type EvaluationResult', 'ExpertAirlineAgent', 'ExpertChatPolicy', 'ExpertRetailAgent',
  'ExpertTelecomAgent', 'ExpertTokenPolicy', 'type GenerativeModel', 'HfConfigError', 'HfTokenizer',
  'LlmUserSimulator', 'type LoadPretrainedOptions', 'type LoadedPolicy', 'type LoraConfig', 'type MaskSpec', 'type MemoryStats',
  'type Message', 'type ModelConfig', 'ModelConfigError', 'type ModelConfigInput', 'type ModelHandle',
  'type ModelSession', 'type NativeBuildInfo', 'NativeLoadError', 'OpenAIChatClient', 'OpenAIChatPolicy',
  'type OpenAIClientOptions', 'OpenAIError', 'type OpenAIPolicyOptions', 'type OpenModelOptions', 'OutOfMemoryError', 'ParamStore',
  'PeftAdapterError', 'type PolicyLossInputs', 'type PolicyLossOptions', 'type PolicyLossResult',
  'type PresetName', 'PretrainedModel', 'RandomAgent', 'type RewardInfo', 'RunFolderError', 'ScriptedRetailUser',
  'ScriptedTelecomUser', 'type SimulationRun', 'SinkAttention', 'type TauAgent', 'type TauDomain', 'TauEnv',
  'type TauEnvOptions', 'TauEpisode', 'TauEvaluator', 'type TauTask', 'type TauTaskSource', 'TauWorld',
  'TemplateChatModel', 'type TokenPolicy', 'type TokenSession', 'Tokenizer', 'type ToolSchema',
  'type TrainConfig', 'type TrainEvent', 'type TrainOptions', 'type TrainResult', 'type TrainablePolicy',
  'Transformer', 'TransformerPolicy', 'type UserSimulator', 'addLora', 'applyPeftAdapter', 'attentionInfo',
  'backends', 'balanceBatch', 'broadcastAdvantages', 'buildInfo', 'buildWorld', 'computeAdvantages',
  'computeAdvantagesAsync', 'createAirlineDomain', 'createRetailDomain', 'createTauEnv', 'createTelecomDomain', 'cudaAvailable',
  'episodesToDataProto', 'evaluatePolicy', 'generateRetailDb', 'generateRetailTasks', 'generateTelecomDb',
  'generateTelecomTasks', 'generateWithDynamicSampling', 'groupIds', 'isDeviceError', 'isDeviceTensor',
  'isOutOfMemoryError', 'loadChatFormat', 'loadCheckpoint', 'loadHfCheckpoint', 'loadPolicy', 'loadPretrained',
  'loadTau2Airline', 'loadTau2Retail', 'loadTau2Telecom', 'loadTauWorld', 'memory', 'mergeLora', 'mixSeed', 'modelConfig',
  'openModel', 'packMicroBatches', 'packSequences', 'parseHfConfig', 'passHatK', 'policyLoss', 'policyLossAsync',
  'readConfigFile', 'readPeftAdapter', 'resolveConfig', 'runEpisode', 'runEpisodeSync', 'saveCheckpoint',
  'saveHf', 'savePeftAdapter', 'sinkAttentionBackward', 'sinkAttentionBackwardAsync', 'sinkAttentionForward',
  'sinkAttentionForwardAsync', 'startChatServer', 'taskKind', 'toDevice', 'train', 'trainChatTokenizer',
  'trainEnvFactory', 'trajectoriesToJsonl', 'version', 'writeTrajectories',
];

interface Exported {
  name: string;
  type: boolean;
  /** The module it is re-exported from (`./tau/index.js`), or null when declared in the file. */
  from: string | null;
}

/** The exports an index file lists (syntax only): fails on `export *` and `export * as`. */
function listExports(file: string): Exported[] {
  const text = readFileSync(join(root, file), 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: Exported[] = [];
  for (const st of sf.statements) {
    if (ts.isExportDeclaration(st)) {
      const from = st.moduleSpecifier !== undefined && ts.isStringLiteral(st.moduleSpecifier) ? st.moduleSpecifier.text : null;
      if (st.exportClause === undefined || !ts.isNamedExports(st.exportClause)) throw new Error(`${file}: \`${st.getText(sf)}\` is not an explicit export list`);
      for (const el of st.exportClause.elements) out.push({ name: el.name.text, type: st.isTypeOnly || el.isTypeOnly, from });
      continue;
    }
    const exported = ts.canHaveModifiers(st) && (ts.getModifiers(st) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    if (!exported) continue;
    if (ts.isFunctionDeclaration(st) || ts.isClassDeclaration(st) || ts.isEnumDeclaration(st)) out.push({ name: st.name!.text, type: false, from: null });
    else if (ts.isInterfaceDeclaration(st) || ts.isTypeAliasDeclaration(st)) out.push({ name: st.name.text, type: true, from: null });
    else if (ts.isVariableStatement(st)) for (const d of st.declarationList.declarations) out.push({ name: (d.name as ts.Identifier).text, type: false, from: null });
  }
  return out;
}

const byName = (a: string, b: string): number => {
  const x = a.replace(/^type /, '');
  const y = b.replace(/^type /, '');
  return x < y ? -1 : x > y ? 1 : 0;
};
const pinned = (list: Exported[]): string[] => list.map((e) => (e.type ? `type ${e.name}` : e.name)).sort(byName);
const indexFile = (layer: string | null): string => (layer === null ? 'lib/index.ts' : `lib/${layer}/index.ts`);

t.test('package.json declares the root and one subpath per layer', async (t) => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  t.same(Object.keys(pkg.exports), ['.', ...SUBPATHS.map((l) => `./${l}`), './package.json']);
  t.same(pkg.exports['.'], { types: './dist/lib/index.d.ts', import: './dist/lib/index.js' });
  for (const l of SUBPATHS) t.same(pkg.exports[`./${l}`], { types: `./dist/lib/${l}/index.d.ts`, import: `./dist/lib/${l}/index.js` }, `./${l}`);
  t.equal(pkg.exports['./package.json'], './package.json');
});

t.test('no index file under lib/ re-exports with export *', async (t) => {
  const indexes: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      if (e.isDirectory()) walk(`${dir}/${e.name}`);
      else if (e.name === 'index.ts') indexes.push(`${dir}/${e.name}`);
    }
  };
  walk('lib');
  t.same(indexes.sort(), [null, ...SUBPATHS].map(indexFile).sort(), 'an index file per export, no other');
  for (const f of indexes) t.doesNotThrow(() => listExports(f), f);
});

t.test('the root exports exactly the pinned names, each from its layer subpath', async (t) => {
  const rootList = listExports('lib/index.ts');
  t.same(pinned(rootList), ROOT);
  const layers = new Map(SUBPATHS.map((l) => [l, listExports(indexFile(l))]));
  for (const e of rootList) {
    const layer = /^\.\/([a-z]+)\/index\.js$/.exec(e.from ?? '')?.[1];
    const sub = layer === undefined ? undefined : layers.get(layer)?.find((x) => x.name === e.name);
    t.ok(sub !== undefined && sub.type === e.type, `${e.name}: re-exported from a layer subpath (${e.from}) that exports it`);
  }
  const counts = SUBPATHS.map((l) => `sinkflex-rl/${l} ${layers.get(l)!.length}`).join(', ');
  const values = rootList.filter((e) => !e.type).length;
  t.comment(`sinkflex-rl: ${rootList.length} names (${values} values, ${rootList.length - values} types); ${counts}`);
});

t.test('each index exports at run time exactly its non-type names', async (t) => {
  for (const layer of [null, ...SUBPATHS]) {
    const file = indexFile(layer);
    const mod = (await import(pathToFileURL(join(root, file)).href)) as Record<string, unknown>;
    const values = listExports(file).filter((e) => !e.type).map((e) => e.name).sort();
    t.same(Object.keys(mod).sort(), values, `${file}: runtime exports (a missing \`type\` marks a type as a value)`);
  }
});

t.test("the docs' code examples import names their module exports", async (t) => {
  const exportsOf = new Map<string, Set<string>>([['sinkflex-rl', new Set(listExports('lib/index.ts').map((e) => e.name))]]);
  for (const l of SUBPATHS) exportsOf.set(`sinkflex-rl/${l}`, new Set(listExports(indexFile(l)).map((e) => e.name)));
  const pages = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  let checked = 0;
  for (const page of pages) {
    const text = readFileSync(join(root, page), 'utf8');
    for (const m of text.matchAll(/import\s+(type\s+)?\{([^}]*)\}\s+from\s+'(sinkflex-rl[^']*)'/g)) {
      const names = exportsOf.get(m[3]);
      if (names === undefined) {
        t.fail(`${page}: imports from '${m[3]}', which is not an export of the package`);
        continue;
      }
      for (const raw of m[2].split(',')) {
        const name = raw.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0];
        if (name === '') continue;
        checked++;
        t.ok(names.has(name), `${page}: '${m[3]}' exports ${name}`);
      }
    }
    for (const m of text.matchAll(/import\s+\*\s+as\s+\w+\s+from\s+'(sinkflex-rl[^']*)'/g)) t.ok(exportsOf.has(m[1]), `${page}: '${m[1]}' is an export of the package`);
  }
  t.ok(checked > 0, `${checked} imported names checked`);
});
