import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { ConfigError, parseOverride, readConfigFile, resolveConfig } from '../../lib/trainer/index.js';
import { DEFAULT_CONFIG, deepMerge, PRESETS, validateConfig, validateSavedConfig } from '../../lib/trainer/config.js';
import { runModelConfig } from '../../lib/trainer/trainer.js';

t.test('defaults and presets validate; patches apply in order', async (t) => {
  const d = resolveConfig();
  t.same(d, DEFAULT_CONFIG);
  const s = resolveConfig({ preset: 'smoke' });
  t.equal(s.preset, 'smoke');
  t.equal(s.grpo.steps, PRESETS.smoke.grpo?.steps);
  t.equal(s.grpo.lr, DEFAULT_CONFIG.grpo.lr, 'fields the preset leaves alone keep the defaults');
  const p = resolveConfig({ preset: 'smoke', patches: [{ grpo: { lr: 1e-3 } }, { grpo: { lr: 2e-3 }, seed: 9 }] });
  t.equal(p.grpo.lr, 2e-3, 'later patches win');
  t.equal(p.seed, 9);
  t.not(DEFAULT_CONFIG.grpo.lr, 2e-3, 'merging never mutates the defaults');
});

t.test('errors name the field', async (t) => {
  t.throws(() => resolveConfig({ patches: [{ grpo: { lr: -1 } }] }), { name: 'ConfigError', message: /grpo\.lr/ });
  t.throws(() => resolveConfig({ patches: [{ rollout: { n: 1.5 } }] }), /rollout\.n/);
  t.throws(() => resolveConfig({ patches: [{ grpo: { typo: 1 } }] }), /grpo.*typo|typo/);
  t.throws(() => resolveConfig({ patches: [{ env: 'CartPole-v1' }] }), /env/);
  t.throws(
    () => resolveConfig({ patches: [{ rollout: { maxContextTokens: 4096 } }] }),
    /rollout\.maxContextTokens.*model\.context/,
  );
  t.throws(
    () => resolveConfig({ patches: [{ grpo: { estimator: 'grpo_passk' } }, { rollout: { n: 1 } }] }),
    /grpo_passk/,
  );
  t.throws(() => resolveConfig({ preset: 'nope' as never }), /preset/);
  t.throws(() => validateConfig(42), ConfigError);
});

t.test('model.device: cpu by default and for runs saved without it, cuda/auto on request', async (t) => {
  t.equal(DEFAULT_CONFIG.model.device, 'cpu');
  t.equal(resolveConfig({ patches: [parseOverride('model.device=cuda')] }).model.device, 'cuda');
  t.equal(resolveConfig({ patches: [{ model: { device: 'auto' } }] }).model.device, 'auto');
  const saved = structuredClone(DEFAULT_CONFIG) as { model: Partial<typeof DEFAULT_CONFIG.model> };
  delete saved.model.device;
  t.equal(validateSavedConfig(saved).model.device, 'cpu', 'a config.json from before the knob reads as cpu');
  t.throws(() => resolveConfig({ patches: [{ model: { device: 'tpu' } }] }), {
    name: 'ConfigError',
    message: /model\.device/,
  });
});

t.test('--set overrides parse JSON values, else strings', async (t) => {
  t.same(parseOverride('grpo.lr=3e-4'), { grpo: { lr: 3e-4 } });
  t.same(parseOverride('prompt.renderTools=true'), { prompt: { renderTools: true } });
  t.same(parseOverride('prompt.system=Be brief.'), { prompt: { system: 'Be brief.' } });
  t.same(parseOverride('world.kinds={"cancel":2}'), { world: { kinds: { cancel: 2 } } });
  t.throws(() => parseOverride('novalue'), ConfigError);
  t.throws(() => parseOverride('a..b=1'), ConfigError);
  t.same(deepMerge({ a: { b: 1, c: 2 } }, { a: { b: 3 } }), { a: { b: 3, c: 2 } });
});

t.test('config files: JSON and TOML', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-cfg-'));
  writeFileSync(join(dir, 'a.json'), JSON.stringify({ grpo: { steps: 7 } }));
  writeFileSync(join(dir, 'b.toml'), '[grpo]\nsteps = 9\nlr = 0.001\n[world]\nkinds = { cancel = 3 }\n');
  writeFileSync(join(dir, 'bad.json'), '{nope');
  writeFileSync(join(dir, 'arr.json'), '[1]');
  writeFileSync(join(dir, 'c.yaml'), 'a: 1');
  t.equal(resolveConfig({ patches: [readConfigFile(join(dir, 'a.json'))] }).grpo.steps, 7);
  const b = resolveConfig({ patches: [readConfigFile(join(dir, 'b.toml'))] });
  t.equal(b.grpo.steps, 9);
  t.equal(b.grpo.lr, 0.001);
  t.equal(b.world.kinds.cancel, 3);
  t.equal(b.world.kinds.lookup_tracking, DEFAULT_CONFIG.world.kinds.lookup_tracking, 'records merge key by key');
  t.throws(() => readConfigFile(join(dir, 'bad.json')), /not valid JSON/);
  t.throws(() => readConfigFile(join(dir, 'arr.json')), /must hold an object/);
  t.throws(() => readConfigFile(join(dir, 'c.yaml')), /\.json or \.toml/);
  t.throws(() => readConfigFile(join(dir, 'missing.json')), /cannot read/);
});

t.test('a configuration saved before a field existed loads with the value that reproduces it', async (t) => {
  const saved = structuredClone(DEFAULT_CONFIG) as unknown as {
    tokenizer: Record<string, unknown>;
    sft: Record<string, unknown>;
    world: Record<string, unknown>;
  };
  delete saved.tokenizer.digitGroup;
  delete saved.sft.demoWorlds;
  delete saved.world.fresh;
  delete saved.sft.copyWeight;
  t.throws(() => validateConfig(saved), /tokenizer\.digitGroup/, 'a new configuration must be complete');
  const c = validateSavedConfig(saved);
  t.equal(c.tokenizer.digitGroup, 0, 'whole-number tokenizer, as before');
  t.equal(c.sft.demoWorlds, 0, 'demonstrations over the training tasks only, as before');
  t.equal(c.world.fresh, false, 'GRPO on the training tasks of the run world, as before');
  t.equal(c.sft.copyWeight, 1, 'no extra weight on copies, as before');
  t.same(validateSavedConfig(DEFAULT_CONFIG), DEFAULT_CONFIG, 'a current configuration is unchanged');
  t.throws(() => validateSavedConfig({ ...DEFAULT_CONFIG, seed: -1 }), /seed/);
  const before = structuredClone(DEFAULT_CONFIG) as unknown as { model: Record<string, unknown> };
  delete before.model.source;
  delete before.model.lora;
  delete before.model.dtype;
  t.throws(() => validateConfig(before), /model\.source/);
  t.same(
    validateSavedConfig(before).model,
    DEFAULT_CONFIG.model,
    'a run saved before pretrained sources reads as the built-in model',
  );
  t.equal(DEFAULT_CONFIG.model.source, 'builtin');
  t.same(
    DEFAULT_CONFIG.model.lora,
    { rank: 16, alpha: 32, targets: 'all-linear', rslora: false },
    'the default LoRA settings (for hf sources)',
  );
  const noShift = structuredClone(DEFAULT_CONFIG) as unknown as { model: Record<string, unknown> };
  delete noShift.model.tokenShift;
  t.throws(() => validateConfig(noShift), /model\.tokenShift/);
  t.equal(validateSavedConfig(noShift).model.tokenShift, false, 'no token shift, as before');
});

t.test(
  'model.tokenShift: on by default (off in smoke), passed on to the built-in model, not applied to hf sources',
  async (t) => {
    t.equal(DEFAULT_CONFIG.model.tokenShift, true);
    t.equal(resolveConfig({ preset: 'smoke' }).model.tokenShift, false, 'smoke: off');
    const on = resolveConfig({ patches: [parseOverride('model.tokenShift=true')] });
    t.equal(on.model.tokenShift, true, '--set model.tokenShift=true');
    t.equal(runModelConfig(on, 300).tokenShift, true, 'the run model has the shift');
    t.equal(runModelConfig(DEFAULT_CONFIG, 300).tokenShift, true, 'the default run model has it');
    t.equal(runModelConfig(resolveConfig({ preset: 'smoke' }), 300).tokenShift, false, 'the smoke run model has none');
    t.throws(() => validateConfig({ ...on, model: { ...on.model, tokenShift: 'yes' } }), /model\.tokenShift/);
    t.equal(
      validateConfig({ ...on, model: { ...on.model, source: 'hf:/models/x' } }).model.source,
      'hf:/models/x',
      'an hf source with the default tokenShift validates (it does not apply)',
    );
  },
);

t.test('model.activationCheckpointing: none by default and for runs saved without it, layers on request', async (t) => {
  t.equal(DEFAULT_CONFIG.model.activationCheckpointing, 'none');
  t.equal(
    resolveConfig({ patches: [parseOverride('model.activationCheckpointing=layers')] }).model.activationCheckpointing,
    'layers',
  );
  const saved = structuredClone(DEFAULT_CONFIG) as { model: Partial<typeof DEFAULT_CONFIG.model> };
  delete saved.model.activationCheckpointing;
  t.equal(
    validateSavedConfig(saved).model.activationCheckpointing,
    'none',
    'a config.json from before the knob reads as none',
  );
  t.throws(() => resolveConfig({ patches: [{ model: { activationCheckpointing: 'all' as never } }] }), {
    name: 'ConfigError',
    message: /model\.activationCheckpointing/,
  });
});
