// Issue 17's API around loadPretrained (MODEL_SPEC §7): config, tokenizer and chat format of a
// loaded model; what the store holds (dtypes, frozen, bytes); the policy's KV-cache samples
// scored again by logProbs; save → load gives equal tensors; the CUDA refusal and 'auto'
// fallback; bad input named; failed loads leave nothing allocated (the tracked allocator's count
// does not grow: it may shrink meanwhile, as the garbage collector frees arrays that earlier
// tests read out of native memory).
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { MODEL_PRESETS } from '../../../lib/model/config.js';
import {
  ParamStore,
  cudaRefusal,
  loadPretrained,
  modelOpsDevice,
  validateModelConfig,
} from '../../../lib/model/index.js';
import { DeviceUnavailableError } from '../../../lib/native/errors.js';
import { memory } from '../../../lib/native/memory.js';
import { checkpointFiles } from './fixtures/safetensors-io.js';
import { type TinySpec, writeTinyCheckpoint } from './fixtures/tiny-checkpoint.js';

function folder(t: Test, spec: TinySpec): string {
  const dir = mkdtempSync(join(tmpdir(), 'hf-api-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeTinyCheckpoint(dir, spec);
  return dir;
}

const numel = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

t.test('a Qwen3 folder: config, tokenizer, chat format, store', async (t) => {
  const dir = folder(t, { family: 'qwen3', tokenizer: 'qwen3', dtype: 'BF16' });
  const m = await loadPretrained(dir);
  t.teardown(() => m.dispose());
  t.equal(m.architecture, 'Qwen3ForCausalLM');
  t.same(m.config, JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')), 'config: the parsed config.json');
  t.match(m.modelConfig, { qkNorm: true, tieEmbeddings: true, sinks: false, vocab: 151936, layers: 2 });
  t.equal(m.device, 'cpu');
  t.equal(m.fallback, null);
  t.equal(m.tokenizer.vocabSize, 151936, "the tokenizer has the model's vocabulary size");
  const ids = m.tokenizer.encode('Hello world, <|im_start|>');
  t.equal(m.tokenizer.decode(ids), 'Hello world, <|im_start|>');
  t.equal(m.tokenizer.decode(ids, { skipSpecialTokens: true }), 'Hello world, ');

  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Weather.',
        parameters: { type: 'object', properties: { city: { type: 'string' } } },
      },
    },
  ];
  const r = m.chat.render([{ role: 'user', content: 'Hi' }], { tools, addGenerationPrompt: true });
  t.match(r.text, /<tools>\n\{"type": "function", "function": \{"name": "get_weather"/);
  t.ok(r.text.endsWith('<|im_start|>assistant\n'));
  t.same(r.ids, m.tokenizer.encode(r.text), 'ids are the tokens of the text');
  t.same(m.chat.parse('<think>\nplan\n</think>\n\nHello<|im_end|>'), {
    content: 'Hello',
    toolCalls: [],
    reasoning: 'plan',
    error: null,
  });
  const call = m.chat.parse('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>');
  t.match(call, {
    content: null,
    toolCalls: [{ function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
    error: null,
  });

  // bf16 file, dtype auto: matrices bf16 and frozen; the resident size is about the file's
  const info = m.params.info();
  t.ok(
    info.every((p) => !p.trainable),
    'every parameter frozen',
  );
  t.ok(
    info.filter((p) => p.decay).every((p) => p.dtype === 'bfloat16'),
    'matrices bfloat16',
  );
  t.ok(
    info.filter((p) => !p.decay).every((p) => p.dtype === 'float32'),
    'norm gains float32',
  );
  const expected = info.reduce((n, p) => n + numel(p.shape) * (p.dtype === 'bfloat16' ? 2 : 4), 0);
  t.equal(m.bytes, expected, 'the store holds 2 bytes per matrix element, 4 per other');
  const fileBytes = checkpointFiles(dir).reduce((n, f) => n + readFileSync(join(dir, f)).length, 0);
  t.ok(m.bytes <= fileBytes * 1.01, `store ${m.bytes} bytes vs files ${fileBytes}`);

  const f32 = await loadPretrained(dir, { dtype: 'float32' });
  t.teardown(() => f32.dispose());
  t.equal(f32.bytes, 4 * info.reduce((n, p) => n + numel(p.shape), 0), 'float32: 4 bytes per element');
  t.ok(f32.params.info().every((p) => p.dtype === 'float32' && !p.trainable));
});

t.test('KV-cache samples of the policy score the same under logProbs', async (t) => {
  for (const spec of [
    { family: 'gpt_oss', seed: 4 },
    { family: 'llama', seed: 5 },
  ] as TinySpec[]) {
    const dir = folder(t, spec);
    const m = await loadPretrained(dir, { dtype: 'float32' });
    t.teardown(() => m.dispose());
    const prompt = Array.from({ length: 19 }, (_, i) => (i * 37 + 11) % m.modelConfig.vocab);
    const [a, b] = await m.policy.generate([
      { prompt, maxTokens: 24, temperature: 0.8, seed: 9 },
      { prompt, maxTokens: 24, temperature: 0.8, seed: 9 },
    ]);
    t.same(Array.from(a.tokens), Array.from(b.tokens), `${spec.family}: same seed, same tokens`);
    const [lp] = await m.logProbs([[...prompt, ...a.tokens]], { temperature: 0.8 });
    const tail = lp.subarray(prompt.length - 1);
    const err = Math.max(...Array.from(a.logProbs, (v, i) => Math.abs(v - tail[i])));
    t.ok(err < 1e-4, `${spec.family}: sampled log-probs = forward log-probs (max |Δ| ${err.toExponential(2)})`);
    // batches under a token budget give the same numbers as one batch
    const seqs = [prompt, [...prompt, ...a.tokens], [3], prompt.slice(0, 5)];
    const one = await m.logProbs(seqs);
    const split = await m.logProbs(seqs, { maxBatchTokens: 20 });
    t.same(
      split.map((x) => x.length),
      [18, 42, 0, 4],
    );
    t.ok(
      one.every((x, i) => x.every((v, j) => Math.abs(v - split[i][j]) < 1e-5)),
      `${spec.family}: maxBatchTokens does not change the result`,
    );
  }
});

t.test('save → load gives equal tensors and the same files', async (t) => {
  for (const spec of [
    { family: 'gpt_oss', mxfp4: true, tokenizer: 'gptoss', layers: 2 },
    { family: 'qwen2', dtype: 'F16', shards: 2 },
  ] as TinySpec[]) {
    const dir = folder(t, spec);
    const m = await loadPretrained(dir);
    t.teardown(() => m.dispose());
    const out = join(mkdtempSync(join(tmpdir(), 'hf-api-save-')), 'saved');
    t.teardown(() => rmSync(join(out, '..'), { recursive: true, force: true }));
    const result = await m.save(out);
    t.ok(result.files.includes('config.json') && result.files.includes('model.safetensors'));
    if (spec.tokenizer)
      t.ok(
        existsSync(join(out, 'tokenizer.json')) && existsSync(join(out, 'tokenizer_config.json')),
        'tokenizer files copied',
      );
    const again = await loadPretrained(out);
    t.teardown(() => again.dispose());
    let bad = 0;
    for (const p of m.params.info()) {
      const x = p.dtype === 'bfloat16' ? m.params.readBf16(p.name) : m.params.read(p.name);
      const y = p.dtype === 'bfloat16' ? again.params.readBf16(p.name) : again.params.read(p.name);
      if (
        Buffer.compare(
          Buffer.from(x.buffer, x.byteOffset, x.byteLength),
          Buffer.from(y.buffer, y.byteOffset, y.byteLength),
        ) !== 0
      )
        bad++;
    }
    t.equal(bad, 0, `${spec.family}: every tensor equal after save → load`);
    const ids = [Array.from({ length: 9 }, (_, i) => (i * 5 + 1) % m.modelConfig.vocab)];
    t.same(await again.logProbs(ids), await m.logProbs(ids), `${spec.family}: same log-probs`);
  }
});

t.test(
  'devices: every family runs on CUDA where a device is usable (same log-probs as the CPU); else cuda is refused and auto runs on the CPU',
  async (t) => {
    const gpu = modelOpsDevice('auto') === 'cuda';
    const ids = [
      [3, 9, 27, 81, 5, 17, 44],
      [2, 4, 6],
    ];
    for (const spec of [{ family: 'qwen3' }, { family: 'llama' }, { family: 'gpt_oss', layers: 2 }] as TinySpec[]) {
      const dir = folder(t, spec);
      const cpu = await loadPretrained(dir, { device: 'cpu', dtype: 'float32' });
      const want = await cpu.logProbs(ids);
      cpu.dispose();
      const before = memory.currentBytes();
      if (gpu) {
        const m = await loadPretrained(dir, { device: 'cuda', dtype: 'float32' });
        t.equal(m.device, 'cuda:0', `${spec.family}: on the GPU`);
        const got = await m.logProbs(ids);
        let worst = 0;
        got.forEach((row, i) =>
          row.forEach(
            (v, j) => (worst = Math.max(worst, Math.abs(v - want[i][j]) / Math.max(1, Math.abs(want[i][j])))),
          ),
        );
        t.ok(worst <= 1e-5, `${spec.family}: GPU log-probs equal the CPU's (worst ${worst.toExponential(1)})`);
        m.dispose();
      } else {
        const err = await loadPretrained(dir, { device: 'cuda' }).then(
          (m) => (m.dispose(), null),
          (e: unknown) => e,
        );
        t.ok(
          err instanceof DeviceUnavailableError,
          `${spec.family}: no usable GPU here, cuda refused (a DeviceUnavailableError)`,
        );
        t.ok(memory.currentBytes() <= before, `${spec.family}: nothing allocated`);
      }
      const m = await loadPretrained(dir, { device: 'auto' });
      t.equal(m.device, gpu ? 'cuda:0' : 'cpu', `${spec.family}: auto picks the ${gpu ? 'GPU' : 'CPU'}`);
      t.equal(m.fallback, null, 'nothing to fall back from');
      m.dispose();
    }
    if (gpu) {
      // LoRA on the GPU: the bf16 base stays bf16 and frozen on the device, the adapters train there
      const dir = folder(t, { family: 'qwen3', dtype: 'BF16' });
      const lora = { rank: 2, alpha: 4, targets: ['q_proj', 'down_proj'] as ('q_proj' | 'down_proj')[] };
      const cpu = await loadPretrained(dir, { device: 'cpu', lora, seed: 3 });
      const m = await loadPretrained(dir, { device: 'cuda', lora, seed: 3, activationCheckpointing: 'layers' });
      t.equal(m.device, 'cuda:0', 'LoRA: on the GPU');
      const info = m.params.info();
      t.ok(
        info.filter((p) => p.decay && !/lora_[ab]$/.test(p.name)).every((p) => p.dtype === 'bfloat16' && !p.trainable),
        'LoRA: the base matrices stay bfloat16 and frozen',
      );
      t.ok(
        info.filter((p) => /lora_[ab]$/.test(p.name)).every((p) => p.dtype === 'float32' && p.trainable),
        'LoRA: the adapters are float32 and trainable',
      );
      const batch = { tokens: Int32Array.of(3, 9, 27, 81, 5, 17), targets: Int32Array.of(9, 27, 81, 5, 17, -1) };
      const loss = { kind: 'cross-entropy' as const };
      const [a, b] = [await cpu.policy.forwardBackward(batch, loss), await m.policy.forwardBackward(batch, loss)];
      t.ok(
        Math.abs(a.loss - b.loss) <= 1e-5 * Math.max(1, Math.abs(a.loss)),
        `LoRA: the GPU loss is the CPU's (${b.loss} vs ${a.loss})`,
      );
      const name = 'layers.0.mlp.down.lora_b';
      const [ga, gb] = [cpu.params.read(name, 'grad'), m.params.read(name, 'grad')];
      const worst = ga.reduce((w, v, i) => Math.max(w, Math.abs(v - gb[i])), 0) / Math.max(...ga.map(Math.abs));
      t.ok(worst <= 1e-4, `LoRA: the GPU's adapter gradient is the CPU's (${worst})`);
      cpu.dispose();
      m.dispose();
    }
    const tiny = validateModelConfig(MODEL_PRESETS.tiny);
    t.equal(cudaRefusal(tiny, 'float32'), null, 'the built-in architecture runs on CUDA');
    t.equal(cudaRefusal(tiny, 'bfloat16'), null, 'bf16 frozen matrices too');
    t.equal(
      cudaRefusal(
        validateModelConfig({ ...MODEL_PRESETS.tiny, lora: { rank: 4, alpha: 8, targets: ['q_proj'] } }),
        'float32',
      ),
      null,
      'LoRA runs on CUDA too',
    );
    await t.rejects(
      loadPretrained(folder(t, { family: 'qwen2' }), { device: 'gpu' as never }),
      /device must be 'cpu', 'cuda' or 'auto'/,
    );
  },
);

t.test('options and inputs are checked and named', async (t) => {
  const dir = folder(t, { family: 'qwen2' });
  const m = await loadPretrained(dir);
  t.teardown(() => m.dispose());
  t.equal(m.hasTokenizer, false, 'no tokenizer.json in this folder');
  t.throws(() => m.tokenizer, /has no tokenizer\.json/);
  t.throws(() => m.chat, /no chat format/);
  const V = m.modelConfig.vocab;
  await t.rejects(
    m.logProbs([
      [1, 2],
      [3, V],
    ]),
    /ids\[1\]\[1\] = 271 is not a token id in \[0, 271\)/,
  );
  await t.rejects(m.logProbs([[1, 2.5]]), /ids\[0\]\[1\]/);
  await t.rejects(m.logProbs([Array(m.modelConfig.context + 1).fill(1)]), /more than the model's context/);
  await t.rejects(m.logProbs([[1, 2]], { temperature: 0 }), /temperature/);
  await t.rejects(m.logProbs([[1, 2]], { maxBatchTokens: 1 }), /maxBatchTokens/);
  t.same(await m.logProbs([]), []);

  const capped = await loadPretrained(dir, { maxPositions: 40 });
  t.equal(capped.modelConfig.context, 40, 'maxPositions caps the context');
  capped.dispose();
  const trainable = await loadPretrained(dir, { dtype: 'float32', trainable: true });
  t.ok(trainable.params.info().every((p) => p.trainable));
  t.equal(trainable.bytes, 16 * trainable.params.numel, 'values, gradients and two moments');
  trainable.dispose();
  await t.rejects(loadPretrained(dir, { dtype: 'bfloat16', trainable: true }), /trainable needs dtype 'float32'/);
  await t.rejects(loadPretrained(dir, { dtype: 'half' as never }), /dtype must be/);
  await t.rejects(
    loadPretrained(dir, { activationCheckpointing: 'all' as never }),
    /options\.activationCheckpointing must be 'none' or 'layers'/,
  );
  await t.rejects(
    loadPretrained(dir, { checkpointing: 'layers' } as never),
    /options\.checkpointing is not an option of loadPretrained/,
  );
  // activation checkpointing: the policy's training forwards keep only each layer's input
  const ck = await loadPretrained(dir, { dtype: 'float32', trainable: true, activationCheckpointing: 'layers' });
  t.equal(ck.policy.activationCheckpointing, 'layers');
  const full = await loadPretrained(dir, { dtype: 'float32', trainable: true });
  t.equal(full.policy.activationCheckpointing, 'none', 'none by default');
  const batch = {
    tokens: Int32Array.from({ length: 40 }, (_, i) => (i * 7) % V),
    targets: Int32Array.from({ length: 40 }, (_, i) => (i * 7 + 7) % V),
  };
  const held = async (p: typeof ck): Promise<[number, Awaited<ReturnType<typeof ck.policy.forward>>]> => {
    const before = memory.currentBytes();
    const f = await p.policy.forward(batch);
    return [memory.currentBytes() - before, f];
  };
  const [bytesA, a] = await held(ck);
  const [bytesB, b] = await held(full);
  t.ok(bytesA < bytesB, `checkpointing keeps fewer bytes (${bytesA} < ${bytesB})`);
  t.same(a.logProbs, b.logProbs, 'the same log-probs');
  a.release();
  b.release();
  ck.dispose();
  full.dispose();
  m.dispose();
  await t.rejects(m.logProbs([[1, 2]]), /disposed/);
  t.doesNotThrow(() => m.dispose(), 'dispose is idempotent');
});

t.test('failed loads leave nothing allocated', async (t) => {
  const dir = folder(t, { family: 'gpt_oss', layers: 2 });
  const before = memory.currentBytes();
  // a failure while the store is written (the 5th tensor)
  const write = ParamStore.prototype.write;
  let calls = 0;
  ParamStore.prototype.write = function (this: ParamStore, ...args: Parameters<ParamStore['write']>) {
    if (++calls === 5) throw new Error('disk gone');
    return write.apply(this, args);
  };
  try {
    await t.rejects(loadPretrained(dir), /disk gone/);
  } finally {
    ParamStore.prototype.write = write;
  }
  t.equal(calls, 5);
  t.ok(memory.currentBytes() <= before, 'the store written so far is freed');
  // a tokenizer larger than the model's vocabulary
  const tok = folder(t, { family: 'qwen3', tokenizer: 'qwen3' });
  const config = JSON.parse(readFileSync(join(tok, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(tok, 'config.json'), JSON.stringify({ ...config, vocab_size: 1000 }));
  await t.rejects(loadPretrained(tok), /vocab_size|embed_tokens/);
  t.ok(memory.currentBytes() <= before, 'nothing allocated');
  // an unknown architecture, named
  writeFileSync(join(tok, 'config.json'), JSON.stringify({ ...config, architectures: ['MambaForCausalLM'] }));
  await t.rejects(loadPretrained(tok), /architecture 'MambaForCausalLM' is not supported/);
  t.ok(memory.currentBytes() <= before, 'nothing allocated');
});
