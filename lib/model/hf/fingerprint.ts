/**
 * {@link hfFolderFingerprint}: what identifies a Hugging Face model folder without reading its
 * weights' data — every small file that defines the model and its prompt format
 * (`config.json`, `generation_config.json`, the shard index, the tokenizer and chat-template
 * files) hashed whole, and every `*.safetensors` file by its size and a hash of its header (the
 * tensor names, dtypes, shapes and offsets). A run that trains adapters over a base folder keeps
 * the fingerprint and refuses to resume or load over a base whose fingerprint changed. A
 * checkpoint rewritten with the same shapes, names and byte size (only the values changed) keeps
 * its fingerprint: hashing the data of a multi-gigabyte checkpoint on every resume is left out on
 * purpose.
 * @module
 */
import { createHash } from 'node:crypto';
import { open, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

import { TOKENIZER_FILES } from './save.js';
import { INDEX_FILE } from './shards.js';

/** One file of a {@link HfFolderFingerprint}. */
export interface HfFingerprintFile {
  /** The file name inside the folder. */
  name: string;
  /** Its size in bytes. */
  bytes: number;
  /** SHA-256 (hex) of the whole file, or of a `.safetensors` file's header (its first 8 + n bytes). */
  sha256: string;
  /** What `sha256` covers. */
  hashed: 'file' | 'header';
}

/** The fingerprint of a model folder (see the module description). */
export interface HfFolderFingerprint {
  /** The files, sorted by name. */
  files: HfFingerprintFile[];
  /** SHA-256 (hex) over every file's name, size and hash. */
  digest: string;
}

/** Small files hashed whole when present. */
const DEFINING_FILES: readonly string[] = ['config.json', 'generation_config.json', INDEX_FILE, ...TOKENIZER_FILES];

async function headerHash(path: string): Promise<string> {
  const fh = await open(path, 'r');
  try {
    const len = Buffer.alloc(8);
    const { bytesRead } = await fh.read(len, 0, 8, 0);
    const hash = createHash('sha256').update(len.subarray(0, bytesRead));
    if (bytesRead === 8) {
      const n = Number(len.readBigUInt64LE(0));
      const size = (await fh.stat()).size;
      const header = Buffer.alloc(Math.max(0, Math.min(n, size - 8)));
      await fh.read(header, 0, header.length, 8);
      hash.update(header);
    }
    return hash.digest('hex');
  } finally {
    await fh.close();
  }
}

/**
 * The fingerprint of the model folder `dir` (see the module description). Throws when the
 * folder cannot be read or has no `config.json`.
 */
export async function hfFolderFingerprint(dir: string): Promise<HfFolderFingerprint> {
  const names = new Set(await readdir(dir));
  if (!names.has('config.json')) throw new Error(`${dir} is not a Hugging Face model folder (no config.json)`);
  const files: HfFingerprintFile[] = [];
  for (const name of [...names].sort()) {
    const isWeights = name.endsWith('.safetensors');
    if (!isWeights && !DEFINING_FILES.includes(name)) continue;
    const path = join(dir, name);
    const st = await stat(path);
    if (!st.isFile()) continue;
    const sha256 = isWeights
      ? await headerHash(path)
      : createHash('sha256')
          .update(await readFile(path))
          .digest('hex');
    files.push({ name, bytes: st.size, sha256, hashed: isWeights ? 'header' : 'file' });
  }
  const digest = createHash('sha256');
  for (const f of files) digest.update(`${f.name}\0${f.bytes}\0${f.sha256}\n`);
  return { files, digest: digest.digest('hex') };
}

/**
 * What differs between two fingerprints, as a short text naming the files (`config.json
 * changed, model.safetensors changed size (123 → 456 bytes)`), or null when they are equal.
 */
export function fingerprintDifference(was: HfFolderFingerprint, now: HfFolderFingerprint): string | null {
  if (was.digest === now.digest) return null;
  const before = new Map(was.files.map((f) => [f.name, f]));
  const after = new Map(now.files.map((f) => [f.name, f]));
  const out: string[] = [];
  for (const [name, f] of before) {
    const g = after.get(name);
    if (!g) out.push(`${name} is gone`);
    else if (g.bytes !== f.bytes) out.push(`${name} changed size (${f.bytes} → ${g.bytes} bytes)`);
    else if (g.sha256 !== f.sha256) out.push(`${name} changed${f.hashed === 'header' ? ' (its tensor header)' : ''}`);
  }
  for (const name of after.keys()) if (!before.has(name)) out.push(`${name} is new`);
  return out.length > 0 ? out.join(', ') : 'the fingerprint differs';
}
