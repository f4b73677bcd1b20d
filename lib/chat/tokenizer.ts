/**
 * The tokenizer of the built-in policy: byte-level BPE trained on the domain's text, with
 * special tokens (for the chat template) that plain text can never produce. Every JavaScript
 * string round-trips exactly (WTF-8 bytes, so even lone surrogates do), and so does every byte
 * sequence (`encodeBytes`/`decodeBytes`): all 256 bytes are tokens. Serialisable to JSON.
 *
 * Ids: `[0, S)` special tokens, `[S, S + 256)` the bytes, then one id per merge in order.
 * @module
 */
import { learnMerges, mergePair, pairKey } from './bpe.js';
import { decodeWtf8, encodeWtf8, sequenceLength } from './utf8.js';
import { optionKeys, refuseUnknownOptions } from '../util/options.js';

/** GPT-2's pre-tokenisation: contractions, letters, numbers, other symbols, whitespace runs. */
const PRETOKENIZE = /'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/**
 * The pre-tokenisation with numbers cut into groups of at most `digitGroup` digits, left to
 * right, never joined to a space (LLaMA-style digit splitting): `#W5664227` and `"5664227"`
 * give the same digit tokens, so a model copies ids token by token from a small, frequent set.
 */
function pretokenizer(digitGroup: number): RegExp {
  if (digitGroup === 0) return PRETOKENIZE;
  return new RegExp(
    `'(?:[sdmt]|ll|ve|re)| ?\\p{L}+|\\p{N}{1,${digitGroup}}| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`,
    'gu',
  );
}

/** The serialised form of a {@link Tokenizer}. */
export interface TokenizerJSON {
  type: 'sinkflex-byte-bpe';
  version: 1;
  /** Special tokens, ids 0..S-1. */
  specialTokens: string[];
  /** Merge r joins tokens [a, b] into id S + 256 + r. */
  merges: [number, number][];
  /** Most digits in one pre-token (absent or 0: a whole number, GPT-2's rule). */
  digitGroup?: number;
}

/** Options of {@link Tokenizer.train}. */
export interface TokenizerTrainOptions {
  /** Upper bound on the vocabulary (specials + 256 bytes + merges). */
  vocabSize: number;
  /** Special tokens (e.g. the chat template's), each a non-empty unique string. */
  specialTokens?: string[];
  /** A pair must occur at least this often to be merged (default 2). */
  minFrequency?: number;
  /**
   * Cut numbers into pre-tokens of at most this many digits, apart from any space (0, the
   * default: GPT-2's rule, a space and a whole number form one pre-token).
   */
  digitGroup?: number;
}

/** The keys of {@link TokenizerTrainOptions}. */
export const TOKENIZER_TRAIN_KEYS = optionKeys<TokenizerTrainOptions>({
  vocabSize: true,
  specialTokens: true,
  minFrequency: true,
  digitGroup: true,
});

/** Thrown for an invalid tokenizer definition or serialisation. */
export class TokenizerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokenizerError';
  }
}

/** Options of {@link Tokenizer.decode}. */
export interface DecodeOptions {
  /** Leave special tokens out of the text (default false: they appear as their names). */
  skipSpecial?: boolean;
  /** The same under Hugging Face's name (what a chat format's tokenizer is asked with). */
  skipSpecialTokens?: boolean;
}

/** Byte-level BPE tokenizer with special tokens. */
export class Tokenizer {
  private readonly specialIds = new Map<string, number>();
  private readonly ranks = new Map<number, number>();
  private readonly bytesOf: Uint8Array[] = [];
  private readonly cache = new Map<string, number[]>();
  private readonly pattern: RegExp;
  private maxBytes = 0;

  private constructor(
    private readonly specials: readonly string[],
    private readonly merges: readonly (readonly [number, number])[],
    private readonly digits: number = 0,
  ) {
    if (!Number.isInteger(digits) || digits < 0 || digits > 16)
      throw new TokenizerError(`digitGroup must be an integer in [0, 16], got ${String(digits)}`);
    this.pattern = pretokenizer(digits);
    const seen = new Set<string>();
    specials.forEach((s, i) => {
      if (typeof s !== 'string' || s.length === 0)
        throw new TokenizerError(`special token ${i} must be a non-empty string`);
      if (seen.has(s)) throw new TokenizerError(`duplicate special token '${s}'`);
      seen.add(s);
      this.specialIds.set(s, i);
      this.bytesOf.push(encodeWtf8(s));
    });
    for (let b = 0; b < 256; b++) this.bytesOf.push(Uint8Array.of(b));
    const first = this.byteBase + 256;
    merges.forEach((pair, r) => {
      const id = first + r;
      if (!Array.isArray(pair) || pair.length !== 2) throw new TokenizerError(`merge ${r} must be a pair of token ids`);
      const [a, b] = pair;
      for (const t of [a, b]) {
        if (!Number.isInteger(t) || t < this.byteBase || t >= id) {
          throw new TokenizerError(`merge ${r} refers to token ${String(t)}, which is not a byte or an earlier merge`);
        }
      }
      const key = pairKey(a, b);
      if (this.ranks.has(key)) throw new TokenizerError(`merge ${r} repeats the pair [${a}, ${b}]`);
      this.ranks.set(key, r);
      const joined = new Uint8Array(this.bytesOf[a].length + this.bytesOf[b].length);
      joined.set(this.bytesOf[a]);
      joined.set(this.bytesOf[b], this.bytesOf[a].length);
      this.bytesOf.push(joined);
    });
  }

  /**
   * Learns merges from `corpus` (text or texts; specials are not recognised in it) until the
   * vocabulary reaches `vocabSize` or no pair is frequent enough. Deterministic.
   */
  static train(corpus: string | readonly string[], options: TokenizerTrainOptions): Tokenizer {
    if (options === null || typeof options !== 'object')
      throw new TypeError('Tokenizer.train: options must be an object with vocabSize');
    refuseUnknownOptions(options, TOKENIZER_TRAIN_KEYS, 'Tokenizer.train');
    const specials = options.specialTokens ?? [];
    const minFrequency = options.minFrequency ?? 2;
    const room = options.vocabSize - specials.length - 256;
    if (!Number.isInteger(options.vocabSize) || room < 0) {
      throw new RangeError(
        `vocabSize must be an integer >= ${specials.length + 256} (specials + 256 bytes), got ${options.vocabSize}`,
      );
    }
    if (!Number.isInteger(minFrequency) || minFrequency < 1)
      throw new RangeError(`minFrequency must be an integer >= 1, got ${minFrequency}`);
    const digitGroup = options.digitGroup ?? 0;
    if (!Number.isInteger(digitGroup) || digitGroup < 0 || digitGroup > 16)
      throw new RangeError(`digitGroup must be an integer in [0, 16], got ${String(digitGroup)}`);
    const pattern = pretokenizer(digitGroup);
    const counts = new Map<string, number>();
    for (const text of typeof corpus === 'string' ? [corpus] : corpus) {
      for (const m of text.matchAll(pattern)) counts.set(m[0], (counts.get(m[0]) ?? 0) + 1);
    }
    const base = specials.length;
    const words = [...counts].map(([piece, count]) => ({ ids: Array.from(encodeWtf8(piece), (b) => base + b), count }));
    return new Tokenizer([...specials], learnMerges(words, base + 256, room, minFrequency), digitGroup);
  }

  /** Rebuilds a tokenizer from {@link toJSON}'s output (an object or its JSON text), validating it. */
  static fromJSON(json: TokenizerJSON | string): Tokenizer {
    let o: unknown;
    try {
      o = typeof json === 'string' ? JSON.parse(json) : json;
    } catch (e) {
      throw new TokenizerError(`tokenizer JSON does not parse: ${(e as Error).message}`);
    }
    const t = o as Partial<TokenizerJSON>;
    if (typeof o !== 'object' || o === null || t.type !== 'sinkflex-byte-bpe' || t.version !== 1) {
      throw new TokenizerError("not a tokenizer definition (expected type 'sinkflex-byte-bpe', version 1)");
    }
    if (!Array.isArray(t.specialTokens) || !Array.isArray(t.merges))
      throw new TokenizerError('tokenizer JSON needs specialTokens and merges arrays');
    return new Tokenizer(t.specialTokens, t.merges, t.digitGroup ?? 0); // the constructor checks digitGroup
  }

  /** The serialisable definition. */
  toJSON(): TokenizerJSON {
    return {
      type: 'sinkflex-byte-bpe',
      version: 1,
      specialTokens: [...this.specials],
      merges: this.merges.map(([a, b]) => [a, b]),
      ...(this.digits > 0 ? { digitGroup: this.digits } : {}),
    };
  }

  /** Most digits in one pre-token (0: whole numbers, GPT-2's rule). */
  get digitGroup(): number {
    return this.digits;
  }

  /** Number of token ids. */
  get vocabSize(): number {
    return this.bytesOf.length;
  }

  /** The special tokens in id order. */
  get specialTokens(): readonly string[] {
    return this.specials;
  }

  /**
   * Most bytes one non-special token stands for. Text of `n` UTF-16 code units is at least `n`
   * bytes, so it encodes to at least `ceil(n / maxTokenBytes)` tokens: a bound that needs no
   * tokenizing (e.g. to refuse a prompt that cannot fit a context before encoding it).
   */
  get maxTokenBytes(): number {
    if (this.maxBytes === 0) {
      let m = 1;
      for (let id = this.byteBase; id < this.bytesOf.length; id++)
        if (this.bytesOf[id].length > m) m = this.bytesOf[id].length;
      this.maxBytes = m;
    }
    return this.maxBytes;
  }

  /** Id of the first byte token (= number of special tokens). */
  get byteBase(): number {
    return this.specials.length;
  }

  /** Id of a special token; throws TokenizerError when it is not defined. */
  specialId(name: string): number {
    const id = this.specialIds.get(name);
    if (id === undefined) throw new TokenizerError(`the tokenizer has no special token '${name}'`);
    return id;
  }

  /** True for the ids of special tokens. */
  isSpecial(id: number): boolean {
    return id >= 0 && id < this.specials.length;
  }

  /** Encodes text; special-token names in it are ordinary text. Exact inverse: {@link decode}. */
  encode(text: string): number[] {
    const out: number[] = [];
    for (const m of text.matchAll(this.pattern)) this.encodePiece(m[0], out);
    return out;
  }

  /**
   * Encodes arbitrary bytes: well-formed UTF-8 runs as text, every other byte as its byte token.
   * Exact inverse: {@link decodeBytes}.
   */
  encodeBytes(bytes: Uint8Array): number[] {
    const out: number[] = [];
    const decoder = new TextDecoder('utf-8', { fatal: true });
    for (let i = 0; i < bytes.length;) {
      let j = i;
      for (let len; j < bytes.length && (len = sequenceLength(bytes, j, false)) > 0;) j += len;
      if (j > i) {
        for (const m of decoder.decode(bytes.subarray(i, j)).matchAll(this.pattern)) this.encodePiece(m[0], out);
        i = j;
      } else {
        out.push(this.byteBase + bytes[i]);
        i++;
      }
    }
    return out;
  }

  /** The bytes of a sequence of tokens (special tokens as their names unless skipped). */
  decodeBytes(ids: ArrayLike<number>, options: DecodeOptions = {}): Uint8Array {
    const parts: Uint8Array[] = [];
    let n = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (!Number.isInteger(id) || id < 0 || id >= this.bytesOf.length) {
        throw new RangeError(`token id ${id} at index ${i} is out of range [0, ${this.bytesOf.length})`);
      }
      if ((options.skipSpecial || options.skipSpecialTokens) && this.isSpecial(id)) continue;
      parts.push(this.bytesOf[id]);
      n += this.bytesOf[id].length;
    }
    const out = new Uint8Array(n);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  /** The text of a sequence of tokens (bytes that form no character become U+FFFD). */
  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    return decodeWtf8(this.decodeBytes(ids, options));
  }

  /** The bytes of one token. */
  tokenBytes(id: number): Uint8Array {
    if (!Number.isInteger(id) || id < 0 || id >= this.bytesOf.length)
      throw new RangeError(`token id ${id} is out of range`);
    return this.bytesOf[id].slice();
  }

  private encodePiece(piece: string, out: number[]): void {
    let ids = this.cache.get(piece);
    if (ids === undefined) {
      ids = this.bpe(encodeWtf8(piece));
      if (this.cache.size >= 65536) this.cache.clear();
      this.cache.set(piece, ids);
    }
    for (const id of ids) out.push(id);
  }

  /** Applies the merges to one pre-token: always the lowest-ranked adjacent pair first. */
  private bpe(bytes: Uint8Array): number[] {
    let ids = Array.from(bytes, (b) => this.byteBase + b);
    const first = this.byteBase + 256;
    while (ids.length > 1) {
      let best = Infinity;
      let at = -1;
      for (let i = 0; i + 1 < ids.length; i++) {
        const r = this.ranks.get(pairKey(ids[i], ids[i + 1]));
        if (r !== undefined && r < best) {
          best = r;
          at = i;
        }
      }
      if (at < 0) break;
      ids = mergePair(ids, ids[at], ids[at + 1], first + best);
    }
    return ids;
  }
}
