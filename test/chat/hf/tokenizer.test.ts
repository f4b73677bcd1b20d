// HfTokenizer over the real tokenizer files of Qwen3 and gpt-oss. Expected ids are justified from
// the vocabularies (byte-level BPE writes a leading space as 'Ġ'; Qwen splits numbers into single
// digits, o200k into groups of up to three) or from the harmony repository's tests (o200k_harmony:
// "hello world" is [24912, 2375]; "<|start|>" as plain text is [27, 91, 5236, 91, 29]).
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { HfTokenizer, HfTokenizerError } from '../../../lib/chat/hf/tokenizer.js';
import { mulberry32 } from '../../../lib/util/random.js';
import { gptOssTokenizer, lenmlModelDir, qwen3Tokenizer } from './fixtures/tokenizers.js';

const qwen = await qwen3Tokenizer();
const oss = await gptOssTokenizer();

t.test('known encodings', async (t) => {
  for (const [name, tok] of [
    ['qwen3', qwen],
    ['gpt-oss', oss],
  ] as const) {
    const id = (s: string): number => {
      const v = tok.tokenToId(s);
      if (v === undefined) throw new Error(`${name}: no token ${s}`);
      return v;
    };
    t.same(tok.encode('hello world'), [id('hello'), id('Ġworld')], `${name}: hello world = hello + Ġworld`);
    t.equal(tok.idToToken(id('Ġworld')), 'Ġworld');
  }
  t.same(oss.encode('hello world'), [24912, 2375], 'o200k_harmony ids of "hello world"');
  t.same(
    qwen.encode('12345'),
    ['1', '2', '3', '4', '5'].map((d) => qwen.tokenToId(d)),
    'Qwen: one token per digit',
  );
  t.same(oss.encode('12345'), [oss.tokenToId('123'), oss.tokenToId('45')], 'o200k: digits in groups of three');
  t.same(oss.encode('<|start|>'), [200006], 'an added token written in the text is its id');
  t.same(oss.encodeOrdinary('<|start|>'), [27, 91, 5236, 91, 29], 'read as plain text it is characters');
  t.same(
    qwen.encode('<|im_start|>user\nhi<|im_end|>').filter((i) => i >= 151643),
    [151644, 151645],
    'special tokens kept whole',
  );
  t.equal(qwen.encode('x', { addSpecialTokens: true }).length, 1, 'Qwen adds nothing around a text');
});

t.test('round trips', async (t) => {
  const samples = [
    'Hello, world!',
    'naïve café — ½ ≠ 0.5',
    '😀👍🏽🇫🇷 family: 👨‍👩‍👧',
    '中文 日本語 한국어',
    '  leading and trailing  ',
    'tabs\tand\nnew\n\n\nlines\r\n',
    '3.14159 -42 1e10 0x1F 12,345,678',
    '{"order_id": "#W1234567", "price": 12.5}',
    '',
  ];
  const next = mulberry32(11);
  const pool = [...'abcXYZ019 \n\t.,!?{}[]"\'é中😀🇫🇷‍'];
  for (let i = 0; i < 20; i++) {
    let s = '';
    for (let j = 0; j < 30; j++) s += pool[Math.floor(next() * pool.length)];
    samples.push(s);
  }
  for (const tok of [qwen, oss]) {
    for (const s of samples) {
      t.equal(tok.decode(tok.encode(s)), s, `encode/decode ${JSON.stringify(s).slice(0, 30)}`);
      t.same(tok.encodeOrdinary(s), tok.encode(s), 'plain text without added tokens: ordinary = encode');
      t.equal(
        tok.decode(tok.encodeOrdinary(`${s}<|end|><|im_end|>`)),
        `${s}<|end|><|im_end|>`,
        'added-token names as text round-trip too',
      );
    }
  }
});

t.test('special tokens, eos, pad, decode options', async (t) => {
  t.same(qwen.eosIds, [151645], 'Qwen3 without generation_config: eos_token <|im_end|>');
  t.equal(qwen.padId, 151643, 'pad <|endoftext|>');
  t.equal(qwen.bosId, null, 'no bos');
  t.equal(qwen.vocabSize, 151669, 'base vocabulary + 26 added tokens');
  t.same(oss.eosIds, [200002], 'gpt-oss tokenizer_config: eos <|return|>');
  t.equal(oss.bosId, 199998);
  t.equal(oss.padId, 199999);
  t.equal(oss.vocabSize, 200019);
  t.same(oss.specialTokensMap, { bos_token: '<|startoftext|>', eos_token: '<|return|>', pad_token: '<|endoftext|>' });
  t.ok(qwen.isSpecial(151644) && !qwen.isSpecial(151657), '<|im_start|> is special, <tool_call> is not');
  const ids = qwen.encode('<|im_start|>user\nhi<|im_end|>');
  t.equal(qwen.decode(ids), '<|im_start|>user\nhi<|im_end|>');
  t.equal(qwen.decode(ids, { skipSpecialTokens: true }), 'user\nhi');
  t.equal(
    qwen.decode([...ids, 10 ** 7, -1, 1.5]),
    '<|im_start|>user\nhi<|im_end|>',
    'ids that name no token are skipped',
  );
  t.equal(qwen.decode([]), '');
  t.ok(oss.specialIdList.includes(200006));
  t.equal(oss.requireId('<|call|>'), 200012);
  t.throws(() => oss.requireId('<|nope|>'), HfTokenizerError);
});

t.test('folders and their errors', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hf-tok-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    symlinkSync(join(lenmlModelDir('qwen3'), f), join(dir, f));
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [151645, 151643] }));
  const tok = await HfTokenizer.fromDir(dir);
  t.same(tok.eosIds, [151645, 151643], 'generation_config eos_token_id (a list) wins');
  const wide = await HfTokenizer.fromDir(dir, { vocabSize: 151936 });
  t.same([wide.vocabSize, wide.tokenCount], [151936, 151669], "the model's larger vocabulary");
  t.equal(wide.decode([14990, 151900]), 'hello', 'ids past the tokenizer decode to nothing');
  t.equal(wide.idToToken(151900), undefined);
  await t.rejects(HfTokenizer.fromDir(dir, { vocabSize: 0 }), RangeError);
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: 151643 }));
  t.same((await HfTokenizer.fromDir(dir)).eosIds, [151643], 'or a number');
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: ['x'] }));
  await t.rejects(HfTokenizer.fromDir(dir), /generation_config.json: eos_token_id\[0\] must be a non-negative integer/);
  writeFileSync(join(dir, 'generation_config.json'), '{ not json');
  await t.rejects(HfTokenizer.fromDir(dir), /generation_config.json is not valid JSON/);
  await t.rejects(HfTokenizer.fromDir(join(dir, 'missing')), /cannot read .*tokenizer.json/);
  t.throws(() => new HfTokenizer({ tokenizer: {} }), /"model" is missing/);
  t.throws(() => new HfTokenizer({ tokenizer: { model: {}, added_tokens: 3 } }), /added_tokens/);
  t.throws(() => qwen.encode(3 as unknown as string), TypeError);
});
