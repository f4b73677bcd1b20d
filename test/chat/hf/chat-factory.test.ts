// The chat format of a model folder: harmony for gpt-oss, else the Jinja template
// (chat_template.jinja over tokenizer_config.json's chat_template, named lists too).
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { ChatTemplateError } from '../../../lib/chat/chat-template.js';
import { configTemplates, createChatFormat, isGptOss, loadChatFormat } from '../../../lib/chat/hf/factory.js';
import { HarmonyChatFormat } from '../../../lib/chat/hf/harmony-format.js';
import { JinjaChatFormat } from '../../../lib/chat/hf/jinja-format.js';
import { gptOssTokenizer, lenmlModelDir, qwen3Tokenizer } from './fixtures/tokenizers.js';

/** A model folder holding links to a tokenizer's files and the given extra files. */
function folder(t: Test, tokenizer: 'qwen3' | 'gptoss', files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'hf-chat-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    symlinkSync(join(lenmlModelDir(tokenizer), f), join(dir, f));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

t.test('by model folder', async (t) => {
  const qwenTok = await qwen3Tokenizer();
  const ossTok = await gptOssTokenizer();
  const qwen = await loadChatFormat(
    folder(t, 'qwen3', { 'config.json': JSON.stringify({ model_type: 'qwen3', architectures: ['Qwen3ForCausalLM'] }) }),
    { tokenizer: qwenTok },
  );
  t.ok(qwen instanceof JinjaChatFormat, 'Qwen3: its tokenizer_config chat_template');
  t.match(
    qwen.render([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true }).text,
    '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
  );
  const file = await loadChatFormat(folder(t, 'qwen3', { 'chat_template.jinja': 'FILE {{ messages | length }}' }), {
    tokenizer: qwenTok,
  });
  t.equal((file as JinjaChatFormat).renderText([{ role: 'user', content: 'x' }]), 'FILE 1', 'chat_template.jinja wins');
  const oss = await loadChatFormat(folder(t, 'gptoss', { 'config.json': JSON.stringify({ model_type: 'gpt_oss' }) }), {
    tokenizer: ossTok,
    harmony: { reasoningEffort: 'high' },
  });
  t.ok(oss instanceof HarmonyChatFormat, 'gpt-oss: harmony');
  t.match(oss.render([]).text, /Reasoning: high/, 'with its options');
  await t.rejects(
    loadChatFormat(folder(t, 'gptoss', {}), { tokenizer: ossTok }),
    ChatTemplateError,
    'no template, not gpt-oss: a clear error',
  );
  t.ok(
    (await loadChatFormat(folder(t, 'gptoss', {}), { tokenizer: ossTok, format: 'harmony' })) instanceof
      HarmonyChatFormat,
    'format forced',
  );
  await t.rejects(
    loadChatFormat(folder(t, 'qwen3', { 'config.json': '{ bad' }), { tokenizer: qwenTok }),
    /config.json is not valid JSON/,
  );
  t.ok((await loadChatFormat(lenmlModelDir('qwen3'))) instanceof JinjaChatFormat, 'loads the tokenizer itself');
});

t.test('helpers', async (t) => {
  t.ok(isGptOss({ architectures: ['GptOssForCausalLM'] }));
  t.notOk(isGptOss({ model_type: 'qwen3' }));
  t.notOk(isGptOss(null));
  t.same(
    configTemplates([
      { name: 'default', template: 'a' },
      { name: 'tool_use', template: 'b' },
    ]),
    { default: 'a', tool_use: 'b' },
  );
  t.equal(configTemplates(null), null);
  t.throws(() => configTemplates([{ name: 1 }]), /chat_template\[0\]/);
  t.throws(() => configTemplates(3), /must be a string or a list/);
  const tok = await qwen3Tokenizer();
  t.ok(
    createChatFormat({ tokenizer: tok, config: { model_type: 'gpt_oss' } }, { format: 'jinja' }) instanceof
      JinjaChatFormat,
    'format jinja forced',
  );
  const named = createChatFormat(
    { tokenizer: tok, chatTemplateFile: null, config: null },
    { jinja: { kwargs: { enable_thinking: false } } },
  );
  t.match(
    (named as JinjaChatFormat).renderText([{ role: 'user', content: 'x' }], { addGenerationPrompt: true }),
    /<think>\n\n<\/think>\n\n$/,
  );
});
