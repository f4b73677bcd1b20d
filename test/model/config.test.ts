import t from 'tap';

import { MODEL_PRESETS, parameterCount } from '../../lib/model/config.js';
import { planTensors } from '../../lib/model/hf/tensor-plan.js';
import {
  ModelConfigError,
  isSlidingLayer,
  modelConfig,
  parameterLayout,
  validateModelConfig,
} from '../../lib/model/index.js';
import { modelAddon } from '../../lib/model/native.js';

t.test('presets are valid and sized as documented', async (t) => {
  const tiny = modelConfig('tiny');
  const small = modelConfig('small');
  t.same(tiny, MODEL_PRESETS.tiny);
  t.equal(tiny.heads % tiny.kvHeads, 0);
  // tiny: embedding + head 2 * 1024 * 128, per layer q/k/v/o + gate_up + down + norms + sinks
  const perLayer = 128 * 128 + 2 * 64 * 128 + 128 * 128 + 2 * 384 * 128 + 128 * 384 + 128 + 128 + 4;
  t.equal(parameterCount(tiny), 2 * 1024 * 128 + 2 * perLayer + 128);
  t.ok(parameterCount(small) > 30e6 && parameterCount(small) < 40e6, `small has ${parameterCount(small)} parameters`);
  t.same(modelConfig('tiny', { layers: 4 }).layers, 4);
  t.throws(() => modelConfig('huge' as 'tiny'), { name: 'RangeError', message: /unknown model preset 'huge'/ });
});

t.test('the parameter layout follows the gpt-oss naming with shapes from the config', async (t) => {
  const c = modelConfig('tiny', { bias: true });
  const layout = parameterLayout(c);
  const byName = new Map(layout.map((p) => [p.name, p]));
  t.equal(layout[0].name, 'embed.weight');
  t.equal(layout[layout.length - 1].name, 'lm_head.weight');
  t.same(byName.get('embed.weight')?.shape, [c.vocab, c.width]);
  t.same(byName.get('layers.0.attn.q.weight')?.shape, [c.heads * c.headDim, c.width]);
  t.same(byName.get('layers.1.attn.k.weight')?.shape, [c.kvHeads * c.headDim, c.width]);
  t.same(byName.get('layers.1.attn.v.bias')?.shape, [c.kvHeads * c.headDim]);
  t.same(byName.get('layers.0.attn.o.weight')?.shape, [c.width, c.heads * c.headDim]);
  t.same(byName.get('layers.0.attn.sinks')?.shape, [c.heads]);
  t.same(byName.get('layers.0.mlp.gate_up.weight')?.shape, [2 * c.ffn, c.width]);
  t.same(byName.get('layers.1.mlp.down.weight')?.shape, [c.width, c.ffn]);
  t.same(byName.get('norm.weight'), { name: 'norm.weight', shape: [c.width], init: 'ones', std: 0, decay: false });
  t.equal(byName.get('layers.0.attn.q.bias')?.init, 'zeros');
  t.notOk(
    parameterLayout(modelConfig('tiny')).some((p) => p.name.endsWith('.bias')),
    'no biases unless asked',
  );
  t.same(
    [0, 1, 2, 3].map((l) => isSlidingLayer(c, l)),
    [true, false, true, false],
    'even layers slide',
  );
  t.notOk(isSlidingLayer(modelConfig('tiny', { window: 0 }), 0), 'window 0: all full');
  const plain = parameterLayout(modelConfig('tiny'));
  const shifted = parameterLayout(modelConfig('tiny', { tokenShift: true }));
  t.same(
    shifted[1],
    { name: 'token_shift.weight', shape: [c.width, c.width], init: 'normal', std: c.initStd, decay: true },
    'token shift: a [width, width] matrix after the embedding',
  );
  t.same(
    shifted.filter((p) => p.name !== 'token_shift.weight'),
    plain,
    'the other parameters as without it',
  );
  t.equal(modelConfig('tiny').tokenShift, false, 'off by default');
  t.same(
    parameterLayout(modelConfig('tiny', { tokenShift: false })),
    plain,
    'tokenShift false: the same layout as a config without the field',
  );
  t.notOk(
    plain.some((p) => p.name === 'token_shift.weight'),
    'none without it',
  );
});

t.test('invalid configs are rejected naming the field (TypeScript and native checks)', async (t) => {
  const base = MODEL_PRESETS.tiny;
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ kvHeads: 3 }, /config\.kvHeads \(3\) must divide heads \(4\)/],
    [{ headDim: 7 }, /config\.headDim must be even/],
    [{ layers: 0 }, /config\.layers must be in \[1, 1024\], got 0/],
    [{ width: 1.5 }, /config\.width must be an integer/],
    [{ window: 5000 }, /config\.window \(5000\) must not exceed context/],
    [{ ropeTheta: 1 }, /config\.ropeTheta must be a number > 1/],
    [{ normEps: 0 }, /config\.normEps must be in \(0, 1\)/],
    [{ swiglu: 'gelu' }, /config\.swiglu must be 'standard' or 'clamped'/],
    [{ bias: 'yes' }, /config\.bias must be a boolean/],
    [{ tokenShift: 1 }, /config\.tokenShift must be a boolean/],
    [
      { tokenShift: true, lora: { rank: 2, alpha: 4, targets: ['q_proj'] } },
      /config\.tokenShift cannot be combined with lora/,
    ],
    [{ extra: 1 }, /config\.extra is not a model config field/],
    [{ vocab: '1024' }, /config\.vocab must be an integer/],
  ];
  for (const [override, message] of cases) {
    t.throws(
      () => validateModelConfig({ ...base, ...override }),
      { name: 'ModelConfigError', message },
      JSON.stringify(override),
    );
  }
  t.throws(() => validateModelConfig(null), { name: 'TypeError' });
  // no Hugging Face architecture has a token shift: converting such a config refuses, naming it
  t.throws(() => planTensors('LlamaForCausalLM', modelConfig('tiny', { tokenShift: true }), () => false), {
    name: 'ModelConfigError',
    message: /config\.tokenShift is true, but LlamaForCausalLM has no token shift/,
  });
  try {
    validateModelConfig({ ...base, heads: 0 });
  } catch (e) {
    t.ok(e instanceof ModelConfigError && e instanceof RangeError);
    t.equal((e as ModelConfigError).field, 'heads');
  }
  // the native layer validates on its own (it is reachable without the TypeScript checks)
  const native = modelAddon();
  t.throws(() => native.modelParamLayout({ ...base, kvHeads: 3 }), {
    name: 'RangeError',
    message: /config\.kvHeads \(3\) must divide config\.heads \(4\)/,
  });
  t.throws(() => native.modelParamLayout({ ...base, headDim: 5 }), {
    name: 'RangeError',
    message: /config\.headDim must be even/,
  });
  t.throws(() => native.modelParamLayout({ ...base, layers: undefined as unknown as number }), {
    name: 'TypeError',
    message: /config\.layers must be an integer/,
  });
  t.throws(() => native.modelParamLayout({ ...base, swiglu: 'x' as 'clamped' }), {
    name: 'RangeError',
    message: /config\.swiglu must be one of/,
  });
  t.throws(() => native.modelParamLayout({ ...base, bias: 1 as unknown as boolean }), {
    name: 'TypeError',
    message: /config\.bias must be a boolean/,
  });
  t.throws(() => native.modelParamLayout({ ...base, tokenShift: 'yes' as unknown as boolean }), {
    name: 'TypeError',
    message: /config\.tokenShift must be a boolean/,
  });
  t.throws(
    () => native.modelParamLayout({ ...base, tokenShift: true, lora: { rank: 2, alpha: 4, targets: ['q_proj'] } }),
    { name: 'RangeError', message: /config\.tokenShift cannot be combined with config\.lora/ },
  );
  t.throws(() => native.modelParamLayout({ ...base, window: 4096 }), {
    name: 'RangeError',
    message: /config\.window must be in/,
  });
  t.throws(() => native.modelParamLayout({ ...base, ropeTheta: 0.5 }), { name: 'RangeError', message: /ropeTheta/ });
  t.throws(() => native.modelParamLayout({ ...base, normEps: 2 }), { name: 'RangeError', message: /normEps/ });
  t.throws(() => native.modelParamLayout({ ...base, initStd: 0 }), { name: 'RangeError', message: /initStd/ });
});
