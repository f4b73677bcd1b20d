/**
 * {@link HfTokenizer}: a Hugging Face tokenizer (`tokenizer.json`, run by
 * `@huggingface/tokenizers`) with what `tokenizer_config.json` and `generation_config.json` add:
 * the special tokens (bos, eos, pad, unk, additional), and the ids that end a generation.
 * @module
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { Tokenizer as HfCoreTokenizer } from '@huggingface/tokenizers';

/** Thrown for a tokenizer folder or file that cannot be used; the message names the file and field. */
export class HfTokenizerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HfTokenizerError';
  }
}

/** A JSON object as read from a file. */
export type JsonObject = Record<string, unknown>;

/** The files of a tokenizer, parsed. */
export interface HfTokenizerFiles {
  /** `tokenizer.json`. */
  tokenizer: JsonObject;
  /** `tokenizer_config.json` (absent: no special-token names beyond tokenizer.json's). */
  tokenizerConfig?: JsonObject | null;
  /** `generation_config.json` (its `eos_token_id` wins over the config's `eos_token`). */
  generationConfig?: JsonObject | null;
}

/** Options of {@link HfTokenizer}. */
export interface HfTokenizerOptions {
  /**
   * The model's vocabulary size when it is larger than the tokenizer's (config.json's
   * `vocab_size`: Qwen3 151936 for 151669 tokens, gpt-oss 201088 for 200019): ids up to it
   * count as valid (a policy may sample them); they name no token and decode to nothing.
   */
  vocabSize?: number;
}

/** Options of {@link HfTokenizer.encode}. */
export interface HfEncodeOptions {
  /**
   * Add what the tokenizer's post-processor adds around a text (e.g. Llama's BOS). Default
   * false (as the built-in tokenizer; transformers' default is true).
   */
  addSpecialTokens?: boolean;
}

/** Options of {@link HfTokenizer.decode}. */
export interface HfDecodeOptions {
  /** Leave special tokens out of the text. Default false. */
  skipSpecialTokens?: boolean;
}

/** The named special tokens of `tokenizer_config.json` (the ones that are set). */
export interface HfSpecialTokens {
  bos_token?: string;
  eos_token?: string;
  unk_token?: string;
  pad_token?: string;
  sep_token?: string;
  cls_token?: string;
  mask_token?: string;
  additional_special_tokens?: string[];
}

const NAMED_SPECIALS = [
  'bos_token',
  'eos_token',
  'unk_token',
  'pad_token',
  'sep_token',
  'cls_token',
  'mask_token',
] as const;

/** A special-token entry of tokenizer_config.json: a string, an AddedToken object, or null. */
function tokenText(v: unknown, field: string): string | undefined {
  if (v === null || v === undefined) return undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string')
    return (v as { content: string }).content;
  throw new HfTokenizerError(`tokenizer_config.json: ${field} must be a string, an object with "content", or null`);
}

function isObject(v: unknown): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Reads and parses a JSON file; `optional` files that do not exist give null. */
export async function readJsonFile(path: string, optional: boolean): Promise<JsonObject | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if (optional && (e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new HfTokenizerError(`cannot read ${path}: ${(e as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new HfTokenizerError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
  if (!isObject(parsed)) throw new HfTokenizerError(`${path} must hold a JSON object`);
  return parsed;
}

/** A Hugging Face tokenizer (see the module description). */
export class HfTokenizer {
  /** The named special tokens from tokenizer_config.json. */
  readonly specialTokensMap: Readonly<HfSpecialTokens>;
  /** Ids of the tokens that end a generation (generation_config `eos_token_id`, else `eos_token`). */
  readonly eosIds: readonly number[];
  /** BOS id, or null when the tokenizer has none. */
  readonly bosId: number | null;
  /** Padding id: `pad_token`, else the first eos id, else 0. */
  readonly padId: number;
  /** The number of valid ids: the tokenizer's size (added tokens included), or the model's when given and larger. */
  readonly vocabSize: number;
  /** One more than the largest id that names a token. */
  readonly tokenCount: number;
  /** The raw tokenizer_config.json (e.g. for `chat_template`). */
  readonly config: Readonly<JsonObject>;
  private readonly core: HfCoreTokenizer;
  private readonly specialIds: ReadonlySet<number>;
  private readonly addedContents: readonly string[];
  private readonly addedById: ReadonlyMap<number, string>;
  private readonly decoderTypes: ReadonlySet<string>;
  private longest: { model: number; all: number } | null = null;

  /** @param files - the parsed files (see {@link HfTokenizer.fromDir}). @param options - the model's vocabulary size. */
  constructor(files: HfTokenizerFiles, options: HfTokenizerOptions = {}) {
    if (!files || !isObject(files.tokenizer)) throw new HfTokenizerError('tokenizer.json must be a JSON object');
    const tj = files.tokenizer;
    if (!isObject(tj.model)) throw new HfTokenizerError('tokenizer.json: "model" is missing');
    const added = tj.added_tokens ?? [];
    if (!Array.isArray(added)) throw new HfTokenizerError('tokenizer.json: "added_tokens" must be an array');
    const config = files.tokenizerConfig ?? {};
    if (!isObject(config)) throw new HfTokenizerError('tokenizer_config.json must be a JSON object');
    this.config = config;
    try {
      this.core = new HfCoreTokenizer(tj, config);
    } catch (e) {
      throw new HfTokenizerError(`tokenizer.json cannot be loaded: ${(e as Error).message}`);
    }
    const map: HfSpecialTokens = {};
    for (const k of NAMED_SPECIALS) {
      const v = tokenText(config[k], k);
      if (v !== undefined) map[k] = v;
    }
    const extra = config.additional_special_tokens;
    if (extra !== undefined && extra !== null) {
      if (!Array.isArray(extra))
        throw new HfTokenizerError('tokenizer_config.json: additional_special_tokens must be an array');
      map.additional_special_tokens = extra.map((v, i) => tokenText(v, `additional_special_tokens[${i}]`) ?? '');
    }
    this.specialTokensMap = Object.freeze(map);
    this.tokenCount = this.core.model?.vocab.length ?? 0;
    if (this.tokenCount === 0) throw new HfTokenizerError('tokenizer.json: the vocabulary is empty');
    const v = options.vocabSize;
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 1))
      throw new RangeError(`options.vocabSize must be a positive integer, got ${String(v)}`);
    this.vocabSize = Math.max(this.tokenCount, v ?? 0);

    const specials = new Set<number>();
    const contents: string[] = [];
    const addedById = new Map<number, string>();
    added.forEach((a, i) => {
      if (!isObject(a) || typeof a.content !== 'string' || !Number.isInteger(a.id))
        throw new HfTokenizerError(`tokenizer.json: added_tokens[${i}] needs "id" and "content"`);
      contents.push(a.content);
      addedById.set(a.id as number, a.content);
      if (a.special === true) specials.add(a.id as number);
    });
    const named = [...NAMED_SPECIALS.map((k) => map[k]), ...(map.additional_special_tokens ?? [])];
    for (const s of named) {
      if (s === undefined) continue;
      const id = this.core.token_to_id(s);
      if (id !== undefined) specials.add(id);
    }
    this.specialIds = specials;
    this.addedContents = contents;
    this.addedById = addedById;
    this.decoderTypes = decoderTypes(tj.decoder);

    const idOf = (text: string, field: string): number => {
      const id = this.core.token_to_id(text);
      if (id === undefined)
        throw new HfTokenizerError(
          `tokenizer_config.json: ${field} ${JSON.stringify(text)} is not a token of tokenizer.json`,
        );
      return id;
    };
    this.bosId = map.bos_token !== undefined ? idOf(map.bos_token, 'bos_token') : null;
    const gen = files.generationConfig ?? null;
    const genEos = gen?.eos_token_id;
    let eos: number[];
    if (genEos !== undefined && genEos !== null) {
      eos = Array.isArray(genEos) ? genEos : [genEos as number];
      eos.forEach((id, i) => {
        if (!Number.isInteger(id) || id < 0)
          throw new HfTokenizerError(
            `generation_config.json: eos_token_id${Array.isArray(genEos) ? `[${i}]` : ''} must be a non-negative integer, got ${JSON.stringify(id)}`,
          );
      });
    } else eos = map.eos_token !== undefined ? [idOf(map.eos_token, 'eos_token')] : [];
    this.eosIds = Object.freeze([...new Set(eos)]);
    this.padId = map.pad_token !== undefined ? idOf(map.pad_token, 'pad_token') : (this.eosIds[0] ?? 0);
  }

  /** Loads `tokenizer.json`, `tokenizer_config.json` and `generation_config.json` (both optional) from a folder. */
  static async fromDir(dir: string, options: HfTokenizerOptions = {}): Promise<HfTokenizer> {
    const [tokenizer, tokenizerConfig, generationConfig] = await Promise.all([
      readJsonFile(join(dir, 'tokenizer.json'), false),
      readJsonFile(join(dir, 'tokenizer_config.json'), true),
      readJsonFile(join(dir, 'generation_config.json'), true),
    ]);
    return new HfTokenizer({ tokenizer: tokenizer as JsonObject, tokenizerConfig, generationConfig }, options);
  }

  /** Token ids of a text; added tokens written in it (e.g. `<|im_start|>`) become their ids. */
  encode(text: string, options: HfEncodeOptions = {}): number[] {
    if (typeof text !== 'string') throw new TypeError('encode: text must be a string');
    return this.core.encode(text, { add_special_tokens: options.addSpecialTokens ?? false }).ids;
  }

  /**
   * Token ids of a text read as plain text only: the names of added tokens in it are ordinary
   * characters (what harmony's renderer and the built-in tokenizer do with message contents).
   */
  encodeOrdinary(text: string): number[] {
    if (typeof text !== 'string') throw new TypeError('encodeOrdinary: text must be a string');
    if (text.length === 0) return [];
    if (!this.addedContents.some((c) => text.includes(c))) return this.encode(text);
    const model = this.core.model;
    if (!model) throw new HfTokenizerError('tokenizer.json has no model');
    const normalized = this.core.normalizer ? this.core.normalizer(text) : text;
    const pieces = this.core.pre_tokenizer ? this.core.pre_tokenizer(normalized, { section_index: 0 }) : [normalized];
    const toks: string[] = model(pieces);
    return toks.map((t) => {
      const id = model.tokens_to_ids.get(t) ?? model.unk_token_id;
      if (id === undefined)
        throw new HfTokenizerError(`the model produced token ${JSON.stringify(t)}, which has no id`);
      return id;
    });
  }

  /** The text of token ids. Ids that name no token are skipped (as Hugging Face tokenizers do). */
  decode(ids: ArrayLike<number>, options: HfDecodeOptions = {}): string {
    const known: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (Number.isInteger(id) && id >= 0 && id < this.tokenCount && this.core.id_to_token(id) !== undefined)
        known.push(id);
    }
    if (options.skipSpecialTokens) {
      const kept = known.filter((id) => !this.specialIds.has(id));
      return kept.length === 0 ? '' : this.core.decode(kept, { skip_special_tokens: false });
    }
    return known.length === 0 ? '' : this.core.decode(known, { skip_special_tokens: false });
  }

  /**
   * The bytes a token stands for (as OpenAI's `logprobs[].bytes` gives them): an added token's
   * UTF-8 text; with a byte-level decoder (GPT-2 style: Qwen, Llama 3, gpt-oss) the token's
   * exact bytes, also when they are part of a UTF-8 sequence; a byte-fallback token `<0xHH>`
   * its byte; otherwise the UTF-8 of the token decoded on its own. Ids that name no token give
   * no bytes.
   */
  tokenBytes(id: number): Uint8Array {
    const added = this.addedById.get(id);
    if (added !== undefined) return new TextEncoder().encode(added);
    const token = this.idToToken(id);
    if (token === undefined) return new Uint8Array(0);
    if (this.decoderTypes.has('ByteLevel')) {
      const out = new Uint8Array(token.length);
      for (let i = 0; i < token.length; i++) {
        const b = BYTE_OF_CHAR.get(token.charCodeAt(i));
        if (b === undefined) return new TextEncoder().encode(this.decode([id]));
        out[i] = b;
      }
      return out;
    }
    const fallback = /^<0x([0-9A-Fa-f]{2})>$/.exec(token);
    if (fallback && this.decoderTypes.has('ByteFallback')) return Uint8Array.of(parseInt(fallback[1], 16));
    return new TextEncoder().encode(this.decode([id]));
  }

  /**
   * The longest text one token can stand for, in UTF-16 code units: the longest vocabulary
   * entry and (unless `modelOnly`) the longest added token. A vocabulary entry of a byte-level
   * tokenizer has one character per byte, and a text never has more UTF-16 units than UTF-8
   * bytes, so no token covers more of a text than this (the basis of {@link minTokens}).
   */
  longestToken(modelOnly = false): number {
    if (this.longest === null) {
      let model = 1;
      const vocab = this.core.model?.vocab ?? [];
      for (const t of vocab) if (typeof t === 'string' && t.length > model) model = t.length;
      let all = model;
      for (const c of this.addedContents) if (c.length > all) all = c.length;
      this.longest = { model, all };
    }
    return modelOnly ? this.longest.model : this.longest.all;
  }

  /** A text's length in UTF-16 code units after the tokenizer's normalizer (e.g. Qwen's NFC). */
  normalizedLength(text: string): number {
    if (typeof text !== 'string') throw new TypeError('normalizedLength: text must be a string');
    const norm = this.core.normalizer;
    return norm ? norm(text).length : text.length;
  }

  /**
   * A lower bound on the tokens of a text without tokenizing it: its normalized length over
   * {@link longestToken} (`plain`: read as plain text, as {@link encodeOrdinary} does, so only
   * vocabulary entries count), rounded up; 0 for an empty text.
   */
  minTokens(text: string, plain = false): number {
    const n = this.normalizedLength(text);
    return n === 0 ? 0 : Math.ceil(n / this.longestToken(plain));
  }

  /** The id of a token (its string form in the vocabulary), or undefined. */
  tokenToId(token: string): number | undefined {
    return this.core.token_to_id(token);
  }

  /** The string form of a token id, or undefined. */
  idToToken(id: number): string | undefined {
    return Number.isInteger(id) && id >= 0 && id < this.tokenCount ? this.core.id_to_token(id) : undefined;
  }

  /** Whether an id is a special token (an added token marked special, or a named special token). */
  isSpecial(id: number): boolean {
    return this.specialIds.has(id);
  }

  /** Ids of all special tokens, ascending. */
  get specialIdList(): number[] {
    return [...this.specialIds].sort((a, b) => a - b);
  }

  /** The id of a token that must exist (throws {@link HfTokenizerError} naming it otherwise). */
  requireId(token: string): number {
    const id = this.core.token_to_id(token);
    if (id === undefined) throw new HfTokenizerError(`the tokenizer has no token ${JSON.stringify(token)}`);
    return id;
  }
}

/** The decoder types of tokenizer.json's `decoder` (a Sequence's members included). */
function decoderTypes(decoder: unknown): Set<string> {
  const out = new Set<string>();
  const walk = (d: unknown): void => {
    if (!isObject(d)) return;
    if (typeof d.type === 'string') out.add(d.type);
    if (Array.isArray(d.decoders)) d.decoders.forEach(walk);
  };
  walk(decoder);
  return out;
}

/**
 * GPT-2's byte-level alphabet inverted: the character code each byte is written as in a
 * byte-level vocabulary → the byte. Printable Latin-1 bytes (33–126, 161–172, 174–255) stand for
 * themselves; the other 68 bytes take the codes 256, 257, … in byte order.
 */
const BYTE_OF_CHAR: ReadonlyMap<number, number> = (() => {
  const map = new Map<number, number>();
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    map.set(printable ? b : next++, b);
  }
  return map;
})();
