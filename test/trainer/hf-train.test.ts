// Issue 19, "The trainer on pretrained models": the smoke preset on a tiny random Qwen3-shaped
// checkpoint (hidden 48, 2 layers, the real Qwen3 tokenizer and chat template) with LoRA — the
// expert's demonstrations in the model's format, SFT, GRPO steps, validation; checkpoints hold
// the adapter and its optimizer state (never the base); a resume equals the uninterrupted run; a
// changed base is refused; the adapter of each update can be published; `sinkflex eval` and
// `sinkflex serve` load the run (base + adapter, the run's prompt format) and reproduce its
// validation; full fine-tuning (model.lora null) runs and resumes too.
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { runEval } from '../../lib/cli/commands/eval.js';
import { serve } from '../../lib/cli/commands/serve.js';
import { type ChatMessage } from '../../lib/chat/index.js';
import { loadOptimizerState, loadPretrained } from '../../lib/model/index.js';
import {
  loadPolicy,
  resolveConfig,
  train,
  type MetricsRow,
  type TrainConfig,
  type TrainEvent,
} from '../../lib/trainer/index.js';
import { listCheckpoints } from '../../lib/trainer/checkpoint.js';
import { OPTIMIZER_FILE, readRunBase } from '../../lib/trainer/hf-run.js';
import { type PolicyUpdate } from '../../lib/trainer/trainer.js';
import { cutTurnText, listValidationSteps, readValidationLog } from '../../lib/trainer/validation-log.js';
import { writeTinyCheckpoint } from '../model/hf/fixtures/tiny-checkpoint.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-hf-train-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

const base = join(tmp, 'qwen3-tiny');
writeTinyCheckpoint(base, { family: 'qwen3', tokenizer: 'qwen3' });

function readRows(out: string): MetricsRow[] {
  return readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as MetricsRow);
}

/** Rows without wall-clock fields. */
function untimed(rows: readonly MetricsRow[]): MetricsRow[] {
  return rows.map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !k.startsWith('timing_s/'))));
}

/** The smoke preset on the tiny checkpoint; short sequences keep the 151,936-entry LM head cheap. */
function hfConfig(patch: Record<string, unknown> = {}): TrainConfig {
  return resolveConfig({
    preset: 'smoke',
    patches: [
      {
        model: {
          source: `hf:${base}`,
          context: 512,
          lora: { rank: 8, alpha: 16, targets: 'all-linear', rslora: false },
        },
        rollout: { maxContextTokens: 512 },
        sft: { tokensPerStep: 512, lr: 1e-2 },
        grpo: { microBatchTokens: 512 },
      },
      patch,
    ],
  });
}

const config = hfConfig();
const a = join(tmp, 'a');

t.test(
  'the smoke preset with LoRA on a tiny Qwen3 checkpoint: SFT, GRPO, validation; resume equals the uninterrupted run',
  async (t) => {
    const events: TrainEvent[] = [];
    const updates: PolicyUpdate[] = [];
    const published: string[] = [];
    const t0 = performance.now();
    const ra = await train(config, {
      out: a,
      onEvent: (e) => events.push(e),
      onPolicyUpdate: async (u) => {
        updates.push(u);
        if (u.saveAdapter) published.push(await u.saveAdapter());
      },
    });
    t.comment(`the run: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    t.equal(ra.step, config.grpo.steps);
    const phases = events.filter((e) => e.kind === 'phase').map((e) => (e as { phase: string }).phase);
    t.notOk(phases.includes('tokenizer'), 'no tokenizer is trained');
    for (const p of ['model', 'demonstrations', 'sft', 'validation', 'grpo', 'done'])
      t.ok(phases.includes(p), `phase ${p}`);

    // the configuration: the base by absolute path; base.json with its fingerprint
    const saved = JSON.parse(readFileSync(join(a, 'config.json'), 'utf8')) as TrainConfig;
    t.equal(saved.model.source, `hf:${base}`);
    t.same(saved.model.lora, config.model.lora);
    const rb = readRunBase(a);
    t.equal(rb.dir, base);
    t.same(
      rb.fingerprint.files.map((f) => f.name),
      ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'],
    );

    // SFT on demonstrations in the model's format: the loss falls
    const rows = readRows(a);
    const summary = rows.find((r) => r.phase === 'sft-summary') as MetricsRow;
    t.ok(
      (summary['sft/demonstrations'] as number) >= 2,
      `SFT on ${summary['sft/demonstrations']} demonstrations (${summary['sft/demonstrations_dropped']} dropped: longer than rollout.maxContextTokens)`,
    );
    const sft = events.filter((e): e is Extract<TrainEvent, { kind: 'sft' }> => e.kind === 'sft').map((e) => e.loss);
    t.comment(`SFT losses ${sft.map((l) => l.toFixed(3)).join(' ')}`);
    t.equal(sft.length, config.sft.steps);
    t.ok(sft[sft.length - 1] < sft[0] - 0.5, 'the SFT loss falls');
    t.notOk(
      rows.some((r) => r.phase === 'induction-summary'),
      'no induction warm-up for a pretrained model',
    );

    // GRPO as for the built-in model: metrics of every step, old log-probs matching the sampler's, the KL reference
    const grpo = rows.filter((r) => r.phase === 'grpo');
    t.equal(grpo.length, config.grpo.steps);
    for (const k of [
      'actor/pg_loss',
      'actor/ppo_kl',
      'actor/kl_loss',
      'actor/entropy',
      'actor/grad_norm',
      'critic/score/mean',
      'response_length/mean',
      'timing_s/ref',
      'timing_s/update_actor',
    ]) {
      t.ok(
        grpo.every((r) => typeof r[k] === 'number' && Number.isFinite(r[k] as number)),
        `metric ${k}`,
      );
    }
    t.ok(
      grpo.every((r) => (r['rollout/logprob_abs_diff'] as number) < 1e-4),
      'old log-probs recomputed at the rollout temperature match the sampler’s',
    );
    t.ok(
      grpo.some((r) => (r['actor/kl_loss'] as number) > 0),
      'the policy moves away from the reference (KL > 0)',
    );
    t.ok(
      grpo.every((r) => r['rollout/aborted'] === 0),
      'no episode aborted',
    );
    t.same(
      rows.filter((r) => r.phase === 'val').map((r) => r.step),
      [0, 2, 3],
      'validation after SFT, every val.every steps and at the end',
    );
    t.same(listValidationSteps(a), [0, 2, 3]);

    // what the checkpoints hold: the adapter (PEFT files) and its optimizer state, not the base
    t.same(listCheckpoints(a), [2, 3]);
    const ck = join(a, 'checkpoints', 'step-3');
    t.same(readdirSync(ck).sort(), ['adapter', 'base.json', 'config.json', 'optimizer.safetensors', 'trainer.json']);
    t.same(readdirSync(join(ck, 'adapter')).sort(), ['adapter_config.json', 'adapter_model.safetensors']);
    const adapterConfig = JSON.parse(readFileSync(join(ck, 'adapter', 'adapter_config.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    t.match(adapterConfig, {
      peft_type: 'LORA',
      r: 8,
      lora_alpha: 16,
      base_model_name_or_path: base,
      target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
    });
    const ckBytes = readdirSync(ck, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .reduce((n, e) => n + readFileSync(join(e.parentPath, e.name)).length, 0);
    const baseBytes = readFileSync(join(base, 'model.safetensors')).length;
    t.comment(`checkpoint ${ckBytes} bytes, base weights ${baseBytes} bytes`);
    t.ok(ckBytes < baseBytes / 10, 'a checkpoint is a small fraction of the base');
    t.ok(
      existsSync(join(a, 'reference-adapter', 'adapter_model.safetensors')),
      'the KL reference: the adapter after SFT',
    );

    // the adapter of each update, published as PEFT folders
    t.same(
      updates.map((u) => u.step),
      [0, 1, 2, 3],
      'an update after SFT and after each GRPO step',
    );
    t.same(
      published,
      [0, 1, 2, 3].map((k) => join(a, 'adapters', `step-${k}`)),
    );
    t.same(
      readFileSync(join(published[3], 'adapter_model.safetensors')),
      readFileSync(join(ck, 'adapter', 'adapter_model.safetensors')),
      'the last published adapter is the checkpoint’s',
    );
    t.notSame(
      readFileSync(join(published[0], 'adapter_model.safetensors')),
      readFileSync(join(published[3], 'adapter_model.safetensors')),
      'GRPO changed the adapter',
    );

    // stop after step 1, resume (also from a torn metrics line), compare
    const b = join(tmp, 'b');
    const rb1 = await train(config, { out: b, stopAfter: 1 });
    t.equal(rb1.step, 1);
    t.same(listCheckpoints(b), [0, 1]);
    appendFileSync(join(b, 'metrics.jsonl'), '{"step":2,"phase":"grpo","actor/pg_l');
    const t1 = performance.now();
    const resumedUpdates: number[] = [];
    const rb2 = await train(resolveConfig(), {
      out: b,
      resume: true,
      onPolicyUpdate: (u) => void resumedUpdates.push(u.step),
    });
    t.same(resumedUpdates, [1, 2, 3], "a resumed run announces its checkpoint's weights, then each update");
    t.comment(`resume: ${((performance.now() - t1) / 1000).toFixed(1)} s`);
    t.equal(rb2.step, config.grpo.steps);
    t.same(
      untimed(readRows(b)),
      untimed(readRows(a)),
      'metrics.jsonl identical to the uninterrupted run (timing aside)',
    );
    t.same(
      listValidationSteps(b).map((s) => readValidationLog(b, s)),
      listValidationSteps(a).map((s) => readValidationLog(a, s)),
      'validation transcripts identical too',
    );
    t.same(
      readFileSync(join(b, 'checkpoints', 'step-3', 'adapter', 'adapter_model.safetensors')),
      readFileSync(join(ck, 'adapter', 'adapter_model.safetensors')),
      'the same adapter',
    );
    const [sa, sb] = [
      loadOptimizerState(join(ck, OPTIMIZER_FILE)),
      loadOptimizerState(join(b, 'checkpoints', 'step-3', OPTIMIZER_FILE)),
    ];
    t.equal(sb.step, sa.step, 'the same optimizer step');
    t.ok(sa.step > 0 && sa.tensors.size === 2 * sa.params.length, `moments of ${sa.params.length} adapter parameters`);
    t.ok(
      [...sa.tensors].every(([k, v]) =>
        Buffer.from(v.data.buffer, v.data.byteOffset, v.data.byteLength).equals(
          Buffer.from(
            sb.tensors.get(k)?.data.buffer ?? new ArrayBuffer(0),
            sb.tensors.get(k)?.data.byteOffset,
            sb.tensors.get(k)?.data.byteLength,
          ),
        ),
      ),
      'the same AdamW moments',
    );

    // a changed base folder is refused (resume, eval)
    const c = join(tmp, 'c');
    cpSync(b, c, { recursive: true });
    const cfgPath = join(base, 'config.json');
    const original = readFileSync(cfgPath, 'utf8');
    writeFileSync(cfgPath, JSON.stringify({ ...JSON.parse(original), initializer_range: 0.03 }));
    try {
      await t.rejects(
        train(resolveConfig(), { out: c, resume: true, steps: 4 }),
        /the base model folder .* changed since the run started \(config\.json changed size/,
      );
      await t.rejects(loadPolicy(c), /changed since the run started/);
    } finally {
      writeFileSync(cfgPath, original);
    }
    t.same(listCheckpoints(c), [2, 3], 'the refused resume changed nothing');

    // the base folder moved: --model-dir names its new place; the fingerprint must be the run's
    const moved = join(tmp, 'moved-base');
    cpSync(base, moved, { recursive: true });
    const viaMoved = await loadPolicy(c, { modelDir: moved });
    t.equal(viaMoved.pretrained?.dir, moved, 'loaded over the moved folder');
    viaMoved.dispose();
    const other = join(tmp, 'other-base');
    cpSync(base, other, { recursive: true });
    writeFileSync(join(other, 'config.json'), JSON.stringify({ ...JSON.parse(original), initializer_range: 0.03 }));
    await t.rejects(
      loadPolicy(c, { modelDir: other }),
      /changed since the run started/,
      'another model at the new place is refused',
    );
    await t.rejects(train(resolveConfig(), { out: c, resume: true, modelDir: other }), /changed since the run started/);
    await train(resolveConfig(), { out: c, resume: true, modelDir: moved });
    t.equal(
      JSON.parse(readFileSync(join(c, 'config.json'), 'utf8')).model.source,
      `hf:${moved}`,
      'the run now names the new place',
    );
    await t.rejects(
      train(resolveConfig(), { out: join(tmp, 'new-run'), modelDir: moved }),
      /modelDir applies to a resumed run/,
    );
  },
);

t.test(
  'sinkflex eval and serve load the run: base + adapter, its prompt format; eval reproduces the last validation',
  async (t) => {
    const loaded = await loadPolicy(a);
    t.teardown(() => loaded.dispose());
    t.equal(loaded.checkpoint, join(a, 'checkpoints', 'step-3'));
    t.equal(loaded.run?.step, 3);
    t.equal(loaded.pretrained?.lora?.rank, 8, 'the adapter is applied');
    const direct = await loadPretrained(base, { adapter: join(loaded.checkpoint, 'adapter') });
    t.teardown(() => direct.dispose());
    const ids = [
      direct.chat.renderTokens([{ role: 'user', content: 'Cancel my order, please.' }], { addGenerationPrompt: true }),
    ];
    t.same(
      await loaded.pretrained?.logProbs(ids),
      await direct.logProbs(ids),
      'the log-probs of base + the checkpoint’s adapter',
    );
    const plain = await loadPretrained(base);
    t.teardown(() => plain.dispose());
    t.notSame(await plain.logProbs(ids), await direct.logProbs(ids), 'which differ from the base’s');

    // eval: the run's validation tasks, seed, limits, temperature and prompt: the last validation again
    const rows = readRows(a);
    const lastVal = rows.filter((r) => r.phase === 'val').pop() as MetricsRow;
    const report = await runEval({
      policy: 'builtin',
      checkpoint: a,
      episodeRetries: 0,
      concurrency: config.rollout.concurrency,
    });
    t.match(report.policy, /^pretrained Qwen3ForCausalLM .* \+ adapter .*step-3 \(step 3\)$/);
    t.equal(report.problem, null);
    t.equal(report.episodes.length, config.world.valTasks * config.val.trials);
    t.equal(report.meanReward, lastVal['val-core/tau-retail/reward/mean@1'], 'the same mean@1 as the trainer measured');
    const log = readValidationLog(a, 3).transcripts;
    t.ok(log.length > 0 && log.every((x) => x.cut_turn !== null), 'transcripts with cut turns');
    for (const x of log) {
      const e = report.episodes.find((r) => r.taskId === x.task_id && r.sampleIndex === x.trial);
      t.equal(
        e && cutTurnText(e, loaded.chat),
        x.cut_turn,
        `${x.task_id} trial ${x.trial}: the same tokens as in the validation`,
      );
    }

    // serve: the run's chat format and prompt format (no tools section: the run trained without)
    const server = await serve({ checkpoint: a, port: 0, modelName: 'tiny-run' });
    t.teardown(() => server.dispose());
    t.equal(server.renderTools, false);
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You are a retail agent.' },
      { role: 'user', content: 'Where is my order?' },
    ];
    const tools = [
      {
        type: 'function',
        function: {
          name: 'get_order_details',
          description: 'An order.',
          parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
        },
      },
    ];
    const res = await fetch(`${server.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'tiny-run',
        messages,
        tools,
        max_tokens: 5,
        seed: 1,
        logprobs: true,
        return_token_ids: true,
      }),
    });
    const text = await res.text();
    t.equal(res.status, 200, text.slice(0, 300));
    const json = JSON.parse(text) as { prompt_token_ids: number[]; choices: { token_ids: number[] }[] };
    t.same(
      json.prompt_token_ids,
      direct.chat.renderTokens(messages, { addGenerationPrompt: true }),
      "the prompt: the model's Qwen3 rendering, without the tools section",
    );
    t.equal(json.choices[0].token_ids.length, 5);
  },
);

t.test('full fine-tuning (model.lora null): float32 policy checkpoints, exact resume, eval', async (t) => {
  const full = hfConfig({
    model: { lora: null },
    grpo: { steps: 2 },
    val: { every: 0, trials: 1 },
    sft: { steps: 2 },
    world: { valTasks: 2 },
  });
  const f = join(tmp, 'full');
  const t0 = performance.now();
  await train(full, { out: f });
  t.comment(`full fine-tuning run: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  t.same(readdirSync(join(f, 'checkpoints', 'step-2')).sort(), [
    'base.json',
    'config.json',
    'policy.safetensors',
    'trainer.json',
  ]);
  t.ok(existsSync(join(f, 'reference.safetensors')));
  const g = join(tmp, 'full-resumed');
  await train(full, { out: g, stopAfter: 1 });
  await train(resolveConfig(), { out: g, resume: true });
  t.same(untimed(readRows(g)), untimed(readRows(f)), 'resume equals the uninterrupted run');
  const loaded = await loadPolicy(f);
  t.teardown(() => loaded.dispose());
  t.equal(loaded.pretrained?.lora, null);
  t.ok(
    loaded.pretrained?.params.info().every((p) => p.dtype === 'float32'),
    'float32 weights',
  );
  const report = await runEval({ policy: 'builtin', checkpoint: f, limitTasks: 1, trials: 1, episodeRetries: 0 });
  t.equal(report.problem, null);
  t.match(report.policy, /^pretrained Qwen3ForCausalLM .*step-2 \(step 2\)$/);
});

t.test('bad configurations of a pretrained source name the field and write nothing', async (t) => {
  t.throws(
    () => resolveConfig({ patches: [{ model: { source: 'hf:' } }] }),
    /model\.source: must be 'builtin' or 'hf:<model folder>'/,
  );
  t.throws(
    () => resolveConfig({ patches: [{ model: { source: 'huggingface' } }] }),
    /model\.source: must be 'builtin'/,
  );
  t.throws(
    () => resolveConfig({ patches: [{ model: { lora: { rank: 4 } } }] }),
    /model\.lora: the built-in model trains all its parameters; LoRA applies to hf sources/,
  );
  t.throws(
    () => resolveConfig({ patches: [{ model: { dtype: 'bfloat16' } }] }),
    /model\.dtype: the built-in model trains in float32/,
  );
  t.throws(() => hfConfig({ model: { lora: { rank: 0 } } }), /model\.lora\.rank: /);
  t.throws(
    () => hfConfig({ model: { lora: { targets: ['q_proj', 'embed_tokens'] } } }),
    /model\.lora\.targets: must be 'all-linear' or a non-empty list of module names among q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj/,
  );
  t.throws(() => hfConfig({ model: { lora: { targets: [] } } }), /model\.lora\.targets: Too small/);
  t.throws(() => hfConfig({ model: { lora: { targets: 'all' } } }), /model\.lora\.targets: must be/);
  t.throws(
    () => hfConfig({ model: { lora: null, dtype: 'bfloat16' } }),
    /model\.dtype bfloat16: full fine-tuning \(model\.lora null\) trains float32 parameters/,
  );
  t.equal(hfConfig({ model: { device: 'cuda' } }).model.device, 'cuda', 'LoRA on a GPU validates');
  t.equal(hfConfig({ model: { lora: null } }).model.lora, null, 'null: full fine-tuning');
  t.throws(
    () => hfConfig({ sft: { tokensPerStep: 256 } }),
    /sft\.tokensPerStep \(256\) is less than rollout\.maxContextTokens \(512\)/,
  );
  t.throws(
    () => hfConfig({ grpo: { microBatchTokens: 256 } }),
    /grpo\.microBatchTokens \(256\) is less than rollout\.maxContextTokens \(512\)/,
  );

  const out = join(tmp, 'bad');
  const missing = join(tmp, 'no-such-model');
  await t.rejects(
    train(hfConfig({ model: { source: `hf:${missing}` } }), { out }),
    new RegExp(`model\\.source hf:${missing}: `),
  );
  const oss = join(tmp, 'oss-tiny');
  writeTinyCheckpoint(oss, { family: 'gpt_oss', layers: 2 });
  await t.rejects(
    train(hfConfig({ model: { source: `hf:${oss}`, lora: { targets: ['q_proj', 'gate_proj'] } } }), { out }),
    /model\.lora\.targets\[1\] 'gate_proj' is an MLP projection, but the MLP is a mixture of experts/,
  );
  const noChat = join(tmp, 'qwen3-no-tokenizer');
  writeTinyCheckpoint(noChat, { family: 'qwen3' });
  await t.rejects(train(hfConfig({ model: { source: `hf:${noChat}` } }), { out }), /has no chat format/);
  t.notOk(existsSync(out), 'nothing written');

  // a start that fails after writing (here: during the demonstrations) removes what it wrote
  await t.rejects(
    train(config, {
      out,
      onEvent: (e) => {
        if (e.kind === 'phase' && e.phase === 'demonstrations') throw new Error('interrupted');
      },
    }),
    /interrupted/,
  );
  t.notOk(existsSync(out), 'a failed start leaves nothing behind (config.json, base.json)');
});
