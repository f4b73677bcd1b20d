/**
 * The safetensors file format, written and read here without dependencies: an 8-byte
 * little-endian header length N, N bytes of JSON (`{name: {dtype, shape, data_offsets:
 * [begin, end]}, "__metadata__": {string: string}}`, padded with spaces to a multiple of 8),
 * then the raw little-endian tensor bytes, contiguous, with offsets relative to the data start.
 * Reading validates everything (header size, JSON, dtypes, shapes against byte counts,
 * offsets covering the data exactly, no holes or overlaps) and fails with a
 * {@link SafetensorsError} saying what is wrong.
 * @module
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, basename, join } from 'node:path';
import { endianness } from 'node:os';

/** Element types supported here. */
export type SafetensorsDType = 'F32' | 'F64' | 'I32' | 'U8';

/** Typed array of each dtype. */
export type SafetensorsArray = Float32Array | Float64Array | Int32Array | Uint8Array;

/** One tensor. */
export interface SafeTensor {
  dtype: SafetensorsDType;
  shape: number[];
  data: SafetensorsArray;
}

/** Contents of a file. */
export interface SafetensorsContents {
  tensors: Map<string, SafeTensor>;
  metadata: Record<string, string>;
  /** The raw data section (a view into the file's bytes), e.g. for checksums. */
  data: Uint8Array;
}

/** A malformed, truncated or inconsistent safetensors file. */
export class SafetensorsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SafetensorsError';
  }
}

const ITEM_SIZE: Record<SafetensorsDType, number> = { F32: 4, F64: 8, I32: 4, U8: 1 };
const MAX_HEADER = 100 * 1024 * 1024;
const LITTLE_ENDIAN = endianness() === 'LE';

function dtypeOf(data: SafetensorsArray): SafetensorsDType {
  if (data instanceof Float32Array) return 'F32';
  if (data instanceof Float64Array) return 'F64';
  if (data instanceof Int32Array) return 'I32';
  return 'U8';
}

/** Little-endian bytes of a typed array (a view when the host is little-endian). */
function bytesOf(data: SafetensorsArray): Uint8Array {
  const view = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (LITTLE_ENDIAN || data.BYTES_PER_ELEMENT === 1) return view;
  const out = new Uint8Array(view);
  const size = data.BYTES_PER_ELEMENT;
  for (let i = 0; i < out.length; i += size) out.subarray(i, i + size).reverse();
  return out;
}

/**
 * Encodes tensors and string metadata as safetensors; returns the file's pieces (header, then
 * each tensor's bytes, without copying them on little-endian hosts).
 */
export function encodeSafetensors(tensors: Iterable<[string, SafeTensor]>, metadata: Record<string, string> = {}): Uint8Array[] {
  const header: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(metadata)) {
    if (typeof v !== 'string') throw new SafetensorsError(`metadata value of '${k}' must be a string`);
  }
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  const pieces: Uint8Array[] = [];
  let offset = 0;
  for (const [name, t] of tensors) {
    if (name === '__metadata__' || name.length === 0) throw new SafetensorsError(`invalid tensor name '${name}'`);
    if (name in header) throw new SafetensorsError(`duplicate tensor '${name}'`);
    const dtype = dtypeOf(t.data);
    if (t.dtype !== dtype) throw new SafetensorsError(`tensor '${name}' is declared ${t.dtype} but holds ${dtype} data`);
    const numel = t.shape.reduce((a, b) => a * b, 1);
    if (!t.shape.every((d) => Number.isInteger(d) && d >= 0) || numel !== t.data.length) {
      throw new SafetensorsError(`tensor '${name}' has shape [${t.shape.join(', ')}] but ${t.data.length} elements`);
    }
    const bytes = bytesOf(t.data);
    header[name] = { dtype, shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    offset += bytes.length;
    pieces.push(bytes);
  }
  let json = JSON.stringify(header);
  const raw = new TextEncoder().encode(json);
  json += ' '.repeat((8 - ((8 + raw.length) % 8)) % 8);
  const headerBytes = new TextEncoder().encode(json);
  const prefix = new Uint8Array(8 + headerBytes.length);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  prefix.set(headerBytes, 8);
  return [prefix, ...pieces];
}

/** Decodes a whole safetensors file held in memory (tensor data is copied out). */
export function decodeSafetensors(file: Uint8Array): SafetensorsContents {
  if (file.length < 8) throw new SafetensorsError(`file is truncated: ${file.length} bytes, the 8-byte header length is missing`);
  const n = new DataView(file.buffer, file.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER)) throw new SafetensorsError(`header length ${n} exceeds the ${MAX_HEADER}-byte limit (corrupt file?)`);
  const headerLen = Number(n);
  if (8 + headerLen > file.length) throw new SafetensorsError(`file is truncated: header needs ${headerLen} bytes, ${file.length - 8} present`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(file.subarray(8, 8 + headerLen)));
  } catch (e) {
    throw new SafetensorsError(`header is not valid UTF-8 JSON: ${(e as Error).message}`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) throw new SafetensorsError('header is not a JSON object');
  const data = file.subarray(8 + headerLen);
  const metadata: Record<string, string> = {};
  const entries: { name: string; dtype: SafetensorsDType; shape: number[]; begin: number; end: number }[] = [];
  for (const [name, v] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new SafetensorsError('__metadata__ must be an object');
      for (const [k, s] of Object.entries(v)) {
        if (typeof s !== 'string') throw new SafetensorsError(`__metadata__.${k} must be a string`);
        metadata[k] = s;
      }
      continue;
    }
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof v !== 'object' || v === null) throw new SafetensorsError(`entry '${name}' is not an object`);
    if (typeof e.dtype !== 'string' || !(e.dtype in ITEM_SIZE)) throw new SafetensorsError(`tensor '${name}' has unsupported dtype ${JSON.stringify(e.dtype)}`);
    const dtype = e.dtype as SafetensorsDType;
    if (!Array.isArray(e.shape) || !e.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw new SafetensorsError(`tensor '${name}' has an invalid shape`);
    const offs = e.data_offsets;
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isSafeInteger(o) && o >= 0) || offs[0] > offs[1]) {
      throw new SafetensorsError(`tensor '${name}' has invalid data_offsets`);
    }
    const shape = e.shape as number[];
    const bytes = shape.reduce((a, b) => a * b, 1) * ITEM_SIZE[dtype];
    if (offs[1] - offs[0] !== bytes) {
      throw new SafetensorsError(`tensor '${name}' (${dtype} [${shape.join(', ')}]) needs ${bytes} bytes but its offsets span ${offs[1] - offs[0]}`);
    }
    if (offs[1] > data.length) throw new SafetensorsError(`file is truncated: tensor '${name}' ends at byte ${offs[1]} of data, only ${data.length} present`);
    entries.push({ name, dtype, shape, begin: offs[0], end: offs[1] });
  }
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = 0;
  for (const e of sorted) {
    if (e.begin !== at) throw new SafetensorsError(e.begin < at ? `tensor '${e.name}' overlaps another tensor` : `data has a hole before tensor '${e.name}'`);
    at = e.end;
  }
  if (at !== data.length) throw new SafetensorsError(`data section has ${data.length - at} trailing bytes not covered by any tensor`);
  const tensors = new Map<string, SafeTensor>();
  for (const e of entries) {
    const size = ITEM_SIZE[e.dtype];
    const bytes = new Uint8Array(data.subarray(e.begin, e.end)); // a copy (Buffer#slice would be a view): aligned, owned
    if (!LITTLE_ENDIAN && size > 1) for (let i = 0; i < bytes.length; i += size) bytes.subarray(i, i + size).reverse();
    const n = bytes.length / size;
    const arr =
      e.dtype === 'F32' ? new Float32Array(bytes.buffer, 0, n) : e.dtype === 'F64' ? new Float64Array(bytes.buffer, 0, n) : e.dtype === 'I32' ? new Int32Array(bytes.buffer, 0, n) : bytes;
    tensors.set(e.name, { dtype: e.dtype, shape: e.shape, data: arr });
  }
  return { tensors, metadata, data };
}

/**
 * Writes `pieces` to `path` atomically: a temporary file in the same folder, fsync, rename over
 * the target, fsync of the folder. A crash leaves either the old file or the new one.
 */
export function writeFileAtomic(path: string, pieces: readonly Uint8Array[]): void {
  const tmp = join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`);
  let fd = openSync(tmp, 'w', 0o644);
  try {
    for (const p of pieces) {
      for (let off = 0; off < p.length; ) off += writeSync(fd, p, off, p.length - off);
    }
    fsyncSync(fd);
    closeSync(fd);
    fd = -1;
    renameSync(tmp, path);
  } catch (e) {
    if (fd >= 0) closeSync(fd);
    try {
      unlinkSync(tmp);
    } catch {
      // already gone
    }
    throw e;
  }
  try {
    const dir = openSync(dirname(path), 'r');
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
  } catch {
    // some platforms cannot fsync a directory; the rename itself is atomic
  }
}

/** Writes a safetensors file atomically (see {@link writeFileAtomic}). */
export function writeSafetensorsFile(path: string, tensors: Iterable<[string, SafeTensor]>, metadata: Record<string, string> = {}): void {
  writeFileAtomic(path, encodeSafetensors(tensors, metadata));
}

/** Reads and validates a safetensors file. */
export function readSafetensorsFile(path: string): SafetensorsContents {
  return decodeSafetensors(readFileSync(path));
}
