// openModel: every source kind — a run folder, a checkpoint folder, a .safetensors file, a folder
// holding one, a Hugging Face model folder with and without a PEFT adapter — opens as one
// ModelHandle whose members work the same way for both implementations; bad sources and options
// are refused naming them.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { loadPretrained } from '../../lib/model/index.js';
import { saveRunCheckpoint } from '../../lib/trainer/checkpoint.js';
import { resolveConfig } from '../../lib/trainer/config.js';
import { openModel } from '../../lib/trainer/index.js';
import type { ModelHandle } from '../../lib/trainer/model-handle.js';
import { writeTinyCheckpoint } from '../model/hf/fixtures/tiny-checkpoint.js';
import { tinyPolicy } from '../openai/fixtures/setup.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-open-model-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

const state = { step: 2, sftDone: true, skippedSteps: 0, abortedEpisodes: 0, elapsedS: 1 };
const prompt = [{ role: 'user' as const, content: 'where is my order #W0000001?' }];

/** A built-in run folder with one checkpoint (step 2) and a bare .safetensors file of the same weights. */
const builtinRun = join(tmp, 'run');
const builtinFile = join(tmp, 'files', 'policy.safetensors');
const policy = tinyPolicy(5);
const config = resolveConfig({ preset: 'smoke', patches: [{ prompt: { renderTools: false } }] });
const checkpoint = saveRunCheckpoint(builtinRun, policy, config, state, 1);
writeFileSync(join(builtinRun, 'config.json'), JSON.stringify(config));
mkdirSync(join(tmp, 'files'));
policy.save(builtinFile, { optimizer: false });
const expectedIds = Array.from(policy.tokenizer?.encode('order #W0000001') ?? []);
policy.dispose();

/** A tiny Qwen3-shaped Hugging Face folder with the real tokenizer, and a PEFT adapter for it. */
const hfDir = join(tmp, 'qwen3-tiny');
writeTinyCheckpoint(hfDir, { family: 'qwen3', tokenizer: 'qwen3' });
const adapterDir = join(tmp, 'adapter');
{
  const m = await loadPretrained(hfDir, { lora: { rank: 2, alpha: 4, targets: ['q_proj', 'v_proj'] } });
  await m.saveAdapter(adapterDir);
  m.dispose();
}

async function withModel<T>(m: ModelHandle, fn: (m: ModelHandle) => Promise<T> | T): Promise<T> {
  try {
    return await fn(m);
  } finally {
    m.dispose();
  }
}

t.test(
  'built-in sources: a run folder, its checkpoint folder, a .safetensors file, a folder holding one',
  async (t) => {
    for (const [source, expectRun] of [
      [builtinRun, true],
      [checkpoint, true],
      [builtinFile, false],
      [join(tmp, 'files'), false],
    ] as const) {
      await withModel(await openModel(source), async (m) => {
        t.equal(m.kind, 'builtin', `${source}: built-in`);
        t.same(Array.from(m.tokenizer.encode('order #W0000001')), expectedIds, 'its own tokenizer');
        t.equal(m.tokenizer, m.chat.tokenizer, 'the chat format’s tokenizer');
        t.ok(m.chat.renderTokens(prompt, { addGenerationPrompt: true }).length > 0, 'the chat format renders');
        t.equal(m.pretrained, null);
        t.equal(m.adapters, null);
        t.equal(m.adapterHost(), null, 'no runtime adapters');
        t.ok(m.weightsHost(), 'full-weight reloads');
        if (expectRun) {
          t.equal(m.source, checkpoint, 'a run opens its newest checkpoint');
          t.equal(m.run?.step, 2);
          t.equal(m.run?.prompt.renderTools, false, 'the run’s prompt format');
          t.match(m.description, /^builtin .* \(step 2\)$/);
        } else {
          t.equal(m.run, null, 'a bare file has no run');
          t.equal(m.source, builtinFile);
        }
      });
    }
  },
);

t.test('built-in: save, checkpoint files and the KL reference round-trip the weights', async (t) => {
  await withModel(await openModel(builtinFile), async (m) => {
    const batch = { tokens: Int32Array.from(expectedIds), targets: Int32Array.from([...expectedIds.slice(1), -1]) };
    const want = await m.policy.logProbs(batch);
    const saved = await m.save(join(tmp, 'saved.safetensors'));
    await withModel(await openModel(saved), async (r) =>
      t.same(await r.policy.logProbs(batch), want, 'save → openModel'),
    );
    const ck = join(tmp, 'ck');
    mkdirSync(ck);
    await m.writeCheckpoint(ck, state);
    t.ok(existsSync(join(ck, 'policy.safetensors')) && existsSync(join(ck, 'tokenizer.json')), 'a checkpoint’s files');
    const out = join(tmp, 'ref-run');
    mkdirSync(out);
    await m.saveReference(out);
    t.same(m.runFiles, ['reference.safetensors']);
    const ref = await m.openReference(out);
    t.same(await ref.logProbs(batch), want, 'the reference gives the policy’s log-probs');
    ref.dispose();
  });
});

t.test('a Hugging Face folder, with and without an adapter', async (t) => {
  await withModel(await openModel(hfDir), async (m) => {
    t.equal(m.kind, 'hf');
    t.equal(m.source, hfDir);
    t.equal(m.run, null);
    t.equal(m.adapters, null, 'no adapter');
    t.equal(m.pretrained?.dir, hfDir);
    t.equal(m.tokenizer, m.chat.tokenizer);
    t.ok(m.chat.renderTokens(prompt, { addGenerationPrompt: true }).length > 0, 'its own chat format renders');
    t.same(m.generationConfig, m.pretrained?.generationConfig);
    t.match(m.description, /^pretrained .*qwen3-tiny \(cpu\)$/);
    t.equal(m.weightsHost(), null);
    t.ok(m.adapterHost({ maxAdapters: 2 }), 'a model folder takes runtime adapters');
    t.equal(m.demonstrations.induction, false, 'no copy-task warm-up');
  });
  await withModel(await openModel(hfDir, { adapter: adapterDir }), async (m) => {
    t.equal(m.adapters?.lora.rank, 2, 'the adapter is applied');
    t.same(m.adapters?.lora.targets, ['q_proj', 'v_proj']);
    t.match(m.description, /\+ adapter/);
    const again = await m.adapters?.save(join(tmp, 'adapter-again'));
    t.equal(again, join(tmp, 'adapter-again'));
    t.ok(existsSync(join(tmp, 'adapter-again', 'adapter_config.json')), 'adapters save as a PEFT folder');
  });
});

t.test('bad sources and options are refused naming them', async (t) => {
  const missing = join(tmp, 'nothing-here');
  await t.rejects(openModel(missing), { name: 'RunFolderError', message: new RegExp(`no checkpoint at ${missing}`) });
  const empty = join(tmp, 'empty');
  mkdirSync(empty);
  await t.rejects(openModel(empty), {
    name: 'RunFolderError',
    message: /empty is neither a run folder .* nor a folder holding a \.safetensors checkpoint/,
  });
  const fresh = join(tmp, 'fresh-run');
  mkdirSync(fresh);
  writeFileSync(join(fresh, 'config.json'), JSON.stringify(config));
  await t.rejects(openModel(fresh), /run folder .*fresh-run has no checkpoint yet/);
  await t.rejects(openModel(''), TypeError);
  await t.rejects(openModel(builtinFile, { adaptor: adapterDir } as never), {
    name: 'RangeError',
    message: /options\.adaptor is not an option of openModel \(known: device, dtype, adapter, modelDir\)/,
  });
  await t.rejects(
    openModel(builtinFile, { adapter: adapterDir }),
    /adapter: .*policy\.safetensors is not a Hugging Face model folder/,
  );
  await t.rejects(
    openModel(builtinFile, { modelDir: hfDir }),
    /modelDir: .*policy\.safetensors is a checkpoint file of the built-in model/,
  );
  await t.rejects(
    openModel(builtinRun, { modelDir: hfDir }),
    /modelDir: .*run is a run of the built-in model, which has no base model folder/,
  );
  await t.rejects(
    openModel(hfDir, { modelDir: hfDir }),
    /modelDir: .*qwen3-tiny is a Hugging Face model folder, not a run's checkpoint/,
  );
  await t.rejects(openModel(hfDir, { adapter: join(tmp, 'no-adapter') }), /no-adapter/, 'a missing adapter is named');
});
