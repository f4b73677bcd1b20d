// Options objects refuse keys their function does not know, naming the key, the function and
// the keys it does know: for each public function that takes one, a typo of one of its real
// keys is refused before any work is done (lib/util/options.ts is the one check).
import t from 'tap';

import { computeAdvantages } from '../../lib/grpo/index.js';
import * as gym from '../../lib/gym/index.js';
import { TauEnv } from '../../lib/gym/index.js';
import { createChatFormat } from '../../lib/chat/hf/factory.js';
import { ChatTemplate, loadChatFormat, Tokenizer, trainChatTokenizer } from '../../lib/chat/index.js';
import { loadCheckpoint, loadPretrained, saveCheckpoint } from '../../lib/model/index.js';
import { OpenAIChatClient, OpenAIChatPolicy, startChatServer } from '../../lib/openai/index.js';
import {
  AgentLoop,
  evaluatePolicy,
  packMicroBatches,
  trajectoriesToJsonl,
  writeTrajectories,
} from '../../lib/rollout/index.js';
import { generateRetailDb, generateRetailTasks, generateTelecomDb, generateTelecomTasks } from '../../lib/tau/index.js';
import { optionKeys, refuseUnknownOptions } from '../../lib/util/options.js';

/** The message for `typo` in place of `real`, as a pattern. */
function refusal(typo: string, fn: string, real: string, name = 'options'): RegExp {
  const esc = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(
    `^${esc(name)}\\.${esc(typo)} is not an option of ${esc(fn)} \\(known: (.*, )?${esc(real)}(, .*)?\\)$`,
  );
}

t.test('the shared check: unknown keys refused by name, known and absent ones pass', async (t) => {
  t.doesNotThrow(() => refuseUnknownOptions({ a: 1, b: undefined }, ['a', 'b'], 'f'));
  t.doesNotThrow(() => refuseUnknownOptions(undefined, ['a'], 'f'), 'no options: the defaults');
  t.doesNotThrow(() => refuseUnknownOptions({}, new Set(['a']), 'f'), 'a Set of keys');
  t.throws(() => refuseUnknownOptions({ a: 1, c: 2 }, ['a', 'b'], 'f'), {
    name: 'RangeError',
    message: 'options.c is not an option of f (known: a, b)',
  });
  t.throws(() => refuseUnknownOptions({ x: 1 }, new Set(['a']), 'g', 'opts'), {
    name: 'RangeError',
    message: 'opts.x is not an option of g (known: a)',
  });
  t.throws(() => refuseUnknownOptions('fast', ['a'], 'f'), {
    name: 'TypeError',
    message: 'f: options must be an object, got string',
  });
  t.throws(() => refuseUnknownOptions(null, ['a'], 'f'), { name: 'TypeError', message: /got null/ });
  t.throws(() => refuseUnknownOptions([1], ['a'], 'f'), { name: 'TypeError', message: /got an array/ });
  t.same(optionKeys<{ a?: number; b: string }>({ a: true, b: true }), ['a', 'b']);
  t.ok(Object.isFrozen(optionKeys<{ a?: number }>({ a: true })), 'the key list is frozen');
});

t.test('a typo of a real key is refused by every public function that takes options', async (t) => {
  const tok = trainChatTokenizer(['hello there'], { vocabSize: 300 });
  const cases: [string, () => unknown, RegExp][] = [
    [
      'gym.make',
      () => gym.make('sinkflex/CartPole-v1', {}, { maxEpisodeStep: 5 } as never),
      refusal('maxEpisodeStep', 'make', 'maxEpisodeSteps'),
    ],
    [
      'TauEnv (gym.make kwargs)',
      () => gym.make('sinkflex/TauRetail-v0', { taks: { kind: 'generated', seed: 0, count: 2 } }),
      refusal('taks', 'the tau environment', 'tasks'),
    ],
    ['TauEnv', () => new TauEnv({ maxStep: 3 } as never), refusal('maxStep', 'the tau environment', 'maxSteps')],
    [
      'OpenAIChatClient',
      () => new OpenAIChatClient({ model: 'm', baseUrl: 'http://x/v1' } as never),
      refusal('baseUrl', 'OpenAIChatClient', 'baseURL'),
    ],
    [
      'OpenAIChatPolicy',
      () => new OpenAIChatPolicy({ client: null, temprature: 1 } as never),
      refusal('temprature', 'OpenAIChatPolicy', 'temperature'),
    ],
    [
      'packMicroBatches',
      () => packMicroBatches(null as never, { maxToken: 8 } as never),
      refusal('maxToken', 'packMicroBatches', 'maxTokens'),
    ],
    [
      'trajectoriesToJsonl',
      () => trajectoriesToJsonl([], { skipAbort: true } as never),
      refusal('skipAbort', 'trajectoryLines (trajectoriesToJsonl, writeTrajectories)', 'skipAborted'),
    ],
    [
      'writeTrajectories',
      () => writeTrajectories('/nonexistent/x.jsonl', [], { minRewards: 1 } as never),
      refusal('minRewards', 'trajectoryLines (trajectoriesToJsonl, writeTrajectories)', 'minReward'),
    ],
    ['AgentLoop', () => new AgentLoop({ concurency: 2 } as never), refusal('concurency', 'AgentLoop', 'concurrency')],
    [
      'saveCheckpoint',
      () => saveCheckpoint('/nonexistent/x.safetensors', { config: {}, stor: null } as never),
      refusal('stor', 'saveCheckpoint', 'store'),
    ],
    [
      'loadCheckpoint',
      () => loadCheckpoint('/nonexistent/x.safetensors', { expectedConfig: {} } as never),
      refusal('expectedConfig', 'loadCheckpoint', 'expectConfig'),
    ],
    [
      'Tokenizer.train',
      () => Tokenizer.train('abc', { vocabSize: 300, minFreq: 2 } as never),
      refusal('minFreq', 'Tokenizer.train', 'minFrequency'),
    ],
    [
      'trainChatTokenizer',
      () => trainChatTokenizer('abc', { vocabsize: 300 } as never),
      refusal('vocabsize', 'trainChatTokenizer', 'vocabSize'),
    ],
    [
      'ChatTemplate.render',
      () => new ChatTemplate(tok).render([], { addGenerationPromt: true } as never),
      refusal('addGenerationPromt', 'ChatTemplate.render', 'addGenerationPrompt'),
    ],
    [
      'createChatFormat',
      () => createChatFormat(null as never, { formats: 'jinja' } as never),
      refusal('formats', 'createChatFormat', 'format'),
    ],
    [
      'computeAdvantages',
      () => computeAdvantages(Float32Array.of(1, 0), Int32Array.of(0, 0), { estimater: 'grpo' } as never),
      refusal('estimater', 'computeAdvantages', 'estimator', 'opts'),
    ],
    ['generateRetailDb', () => generateRetailDb({ sed: 1 } as never), refusal('sed', 'generateRetailDb', 'seed')],
    [
      'generateRetailTasks',
      () => generateRetailTasks(null as never, { counts: 3 } as never),
      refusal('counts', 'generateRetailTasks', 'count'),
    ],
    [
      'generateTelecomDb',
      () => generateTelecomDb({ customer: 3 } as never),
      refusal('customer', 'generateTelecomDb', 'customers'),
    ],
    [
      'generateTelecomTasks',
      () => generateTelecomTasks(null as never, { maxFault: 2 } as never),
      refusal('maxFault', 'generateTelecomTasks', 'maxFaults'),
    ],
  ];
  for (const [what, call, message] of cases) t.throws(call, { name: 'RangeError', message }, what);
  const rejects: [string, () => Promise<unknown>, RegExp][] = [
    [
      'gym.makeAsync',
      () => gym.makeAsync('sinkflex/CartPole-v1', {}, { disableEnvCheker: true } as never),
      refusal('disableEnvCheker', 'makeAsync', 'disableEnvChecker'),
    ],
    [
      'startChatServer',
      () => startChatServer({ policy: null, prot: 8000 } as never),
      refusal('prot', 'startChatServer', 'port'),
    ],
    ['evaluatePolicy', () => evaluatePolicy({ trial: 2 } as never), refusal('trial', 'evaluatePolicy', 'trials')],
    [
      'loadPretrained',
      () => loadPretrained('/nonexistent', { adaptor: '/x' } as never),
      refusal('adaptor', 'loadPretrained', 'adapter'),
    ],
    [
      'loadPretrained (a key it does not take)',
      () => loadPretrained('/nonexistent', { activationCheckpoint: 'layers' } as never),
      refusal('activationCheckpoint', 'loadPretrained', 'activationCheckpointing'),
    ],
    [
      'loadChatFormat',
      () => loadChatFormat('/nonexistent', { tokeniser: null } as never),
      refusal('tokeniser', 'loadChatFormat', 'tokenizer'),
    ],
  ];
  for (const [what, call, message] of rejects) await t.rejects(call, { name: 'RangeError', message }, what);
});
