/**
 * Safetensors files too large to hold in memory: {@link SafetensorsFile} reads the header once
 * and then single tensors (or byte ranges of one) from disk at their offsets;
 * {@link writeSafetensorsStream} writes a file tensor by tensor, asking for each tensor's bytes
 * only when it is its turn. Both validate like {@link decodeSafetensors}.
 * @module
 */
import { type FileHandle, open } from 'node:fs/promises';

import {
  SafetensorsError,
  type SafetensorsArray,
  type SafetensorsEntry,
  type SafetensorsSpec,
  encodeSafetensorsHeader,
  parseSafetensorsHeader,
  safetensorsByteLength,
  safetensorsHeaderLength,
  safetensorsItemSize,
  typedFromLittleEndian,
} from './safetensors.js';

/** Largest single read (bytes): Node's fs reads take at most 2 GiB at once. */
const READ_CHUNK = 1 << 30;

/** An open safetensors file whose tensors are read on demand. Call {@link SafetensorsFile.dispose}. */
export class SafetensorsFile {
  private constructor(
    /** The file's path. */
    readonly path: string,
    private handle: FileHandle | null,
    private readonly dataStart: number,
    /** Every tensor's entry, by name. */
    readonly entries: ReadonlyMap<string, SafetensorsEntry>,
    /** The `__metadata__` strings. */
    readonly metadata: Readonly<Record<string, string>>,
  ) {}

  /**
   * Opens `path` and validates its header against the file size. Throws a
   * {@link SafetensorsError} naming the file for a malformed file; the file is closed again then.
   */
  static async open(path: string): Promise<SafetensorsFile> {
    const handle = await open(path, 'r');
    try {
      const size = (await handle.stat()).size;
      const prefix = new Uint8Array(8);
      await readFully(handle, prefix, 0);
      const headerLen = safetensorsHeaderLength(prefix, size);
      const json = new Uint8Array(headerLen);
      await readFully(handle, json, 8);
      const { entries, metadata } = parseSafetensorsHeader(json, size - 8 - headerLen);
      return new SafetensorsFile(path, handle, 8 + headerLen, new Map(entries.map((e) => [e.name, e])), metadata);
    } catch (e) {
      await handle.close();
      if (e instanceof SafetensorsError) throw new SafetensorsError(`${path}: ${e.message}`);
      throw e;
    }
  }

  /** The entry of `name`; a {@link SafetensorsError} naming the tensor and the file when absent. */
  entry(name: string): SafetensorsEntry {
    const e = this.entries.get(name);
    if (e === undefined) throw new SafetensorsError(`${this.path}: tensor '${name}' is not in the file`);
    return e;
  }

  /**
   * The little-endian bytes of tensor `name`, or of its elements `[from, to)` (element indices of
   * the flattened tensor), in a fresh, aligned buffer.
   */
  async readBytes(name: string, from = 0, to?: number): Promise<Uint8Array> {
    const e = this.entry(name);
    const size = safetensorsItemSize(e.dtype);
    const numel = (e.end - e.begin) / size;
    const end = to ?? numel;
    if (!Number.isSafeInteger(from) || !Number.isSafeInteger(end) || from < 0 || end < from || end > numel) {
      throw new RangeError(`elements [${from}, ${end}) are outside tensor '${name}' of ${numel} elements`);
    }
    const out = new Uint8Array((end - from) * size);
    await readFully(this.requireOpen(), out, this.dataStart + e.begin + from * size);
    return out;
  }

  /** Tensor `name` (or its elements `[from, to)`) as a typed array of its dtype (BF16/F16: Uint16Array bits). */
  async read(name: string, from = 0, to?: number): Promise<SafetensorsArray> {
    return typedFromLittleEndian(this.entry(name).dtype, await this.readBytes(name, from, to));
  }

  /** Closes the file (idempotent). */
  async dispose(): Promise<void> {
    const h = this.handle;
    this.handle = null;
    if (h !== null) await h.close();
  }

  /** {@link dispose} (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose();
  }

  private requireOpen(): FileHandle {
    if (this.handle === null) throw new Error(`${this.path}: the file is closed`);
    return this.handle;
  }
}

async function readFully(handle: FileHandle, into: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < into.length) {
    const len = Math.min(READ_CHUNK, into.length - done);
    const { bytesRead } = await handle.read(into, done, len, position + done);
    if (bytesRead === 0)
      throw new SafetensorsError(`file is truncated: expected ${into.length} bytes at offset ${position}`);
    done += bytesRead;
  }
}

/** One tensor to write: its name, dtype and shape, and a function giving its little-endian bytes when needed. */
export interface SafetensorsStreamEntry extends SafetensorsSpec {
  bytes: () => Uint8Array | Promise<Uint8Array>;
}

/**
 * Writes a safetensors file at `path` (created or truncated) holding `entries` in order; each
 * entry's bytes are requested only when written, so at most one tensor is in memory at a time.
 * The header is written first from the specs; a tensor whose bytes do not have its declared
 * size fails with a {@link SafetensorsError} naming it. Not atomic by itself: write into a
 * temporary folder or file and rename.
 */
export async function writeSafetensorsStream(
  path: string,
  entries: readonly SafetensorsStreamEntry[],
  metadata: Record<string, string> = {},
): Promise<number> {
  const header = encodeSafetensorsHeader(entries, metadata);
  const handle = await open(path, 'w', 0o644);
  try {
    let position = 0;
    const write = async (bytes: Uint8Array): Promise<void> => {
      let done = 0;
      while (done < bytes.length) {
        const { bytesWritten } = await handle.write(
          bytes,
          done,
          Math.min(READ_CHUNK, bytes.length - done),
          position + done,
        );
        done += bytesWritten;
      }
      position += bytes.length;
    };
    await write(header);
    for (const e of entries) {
      const bytes = await e.bytes();
      const want = safetensorsByteLength(e.dtype, e.shape);
      if (bytes.length !== want)
        throw new SafetensorsError(
          `tensor '${e.name}' (${e.dtype} [${e.shape.join(', ')}]) needs ${want} bytes, got ${bytes.length}`,
        );
      await write(bytes);
    }
    await handle.sync();
    return position;
  } finally {
    await handle.close();
  }
}
