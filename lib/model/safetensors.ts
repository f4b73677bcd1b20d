/**
 * The safetensors file format, written and read here without dependencies: an 8-byte
 * little-endian header length N, N bytes of JSON (`{name: {dtype, shape, data_offsets:
 * [begin, end]}, "__metadata__": {string: string}}`, padded with spaces to a multiple of 8),
 * then the raw little-endian tensor bytes, contiguous, with offsets relative to the data start.
 * Reading validates everything (header size, JSON, dtypes, shapes against byte counts,
 * offsets covering the data exactly, no holes or overlaps) and fails with a
 * {@link SafetensorsError} saying what is wrong. Element types: F32, F64, I32, U8, and BF16 / F16
 * held as their 16-bit patterns (Uint16Array). For files too large for memory see
 * safetensors-stream.ts (reads tensors at their offsets, writes tensor by tensor).
 * @module
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, basename, join } from 'node:path';
import { endianness } from 'node:os';

/** Element types supported here (BF16 and F16 hold their raw 16-bit patterns in a Uint16Array). */
export type SafetensorsDType = 'F32' | 'F64' | 'I32' | 'U8' | 'BF16' | 'F16';

/** Typed array of each dtype: Float32Array, Float64Array, Int32Array, Uint8Array, Uint16Array (BF16, F16). */
export type SafetensorsArray = Float32Array | Float64Array | Int32Array | Uint8Array | Uint16Array;

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

const ITEM_SIZE: Record<SafetensorsDType, number> = { F32: 4, F64: 8, I32: 4, U8: 1, BF16: 2, F16: 2 };
const MAX_HEADER = 100 * 1024 * 1024;
const LITTLE_ENDIAN = endianness() === 'LE';

/** Bytes per element of a dtype. */
export function safetensorsItemSize(dtype: SafetensorsDType): number {
  return ITEM_SIZE[dtype];
}

/** True when `dtype` is one this module reads and writes. */
export function isSafetensorsDType(dtype: unknown): dtype is SafetensorsDType {
  return typeof dtype === 'string' && Object.prototype.hasOwnProperty.call(ITEM_SIZE, dtype);
}

/** The dtypes a typed array can hold (a Uint16Array holds BF16 or F16 bits). */
function dtypesOf(data: SafetensorsArray): SafetensorsDType[] {
  if (data instanceof Float32Array) return ['F32'];
  if (data instanceof Float64Array) return ['F64'];
  if (data instanceof Int32Array) return ['I32'];
  if (data instanceof Uint16Array) return ['BF16', 'F16'];
  return ['U8'];
}

/** Name, dtype and shape of a tensor, without its data. */
export interface SafetensorsSpec {
  name: string;
  dtype: SafetensorsDType;
  shape: number[];
}

/** A tensor's entry in a file's header: offsets are relative to the data section. */
export interface SafetensorsEntry extends SafetensorsSpec {
  begin: number;
  end: number;
}

/** Bytes of a tensor of this dtype and shape. */
export function safetensorsByteLength(dtype: SafetensorsDType, shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1) * ITEM_SIZE[dtype];
}

/**
 * The 8-byte length prefix and the JSON header (padded with spaces to a multiple of 8) of a file
 * holding `specs` in this order, contiguous from offset 0.
 */
export function encodeSafetensorsHeader(
  specs: Iterable<SafetensorsSpec>,
  metadata: Record<string, string> = {},
): Uint8Array {
  const header: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(metadata)) {
    if (typeof v !== 'string') throw new SafetensorsError(`metadata value of '${k}' must be a string`);
  }
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const { name, dtype, shape } of specs) {
    if (name === '__metadata__' || name.length === 0) throw new SafetensorsError(`invalid tensor name '${name}'`);
    if (name in header) throw new SafetensorsError(`duplicate tensor '${name}'`);
    if (!isSafetensorsDType(dtype))
      throw new SafetensorsError(`tensor '${name}' has unsupported dtype ${JSON.stringify(dtype)}`);
    if (!shape.every((d) => Number.isSafeInteger(d) && d >= 0))
      throw new SafetensorsError(`tensor '${name}' has an invalid shape [${shape.join(', ')}]`);
    const bytes = safetensorsByteLength(dtype, shape);
    header[name] = { dtype, shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  const raw = new TextEncoder().encode(json);
  json += ' '.repeat((8 - ((8 + raw.length) % 8)) % 8);
  const headerBytes = new TextEncoder().encode(json);
  const prefix = new Uint8Array(8 + headerBytes.length);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  prefix.set(headerBytes, 8);
  return prefix;
}

/** Little-endian bytes of a typed array (a view when the host is little-endian, else a swapped copy). */
export function littleEndianBytes(data: SafetensorsArray): Uint8Array {
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
export function encodeSafetensors(
  tensors: Iterable<[string, SafeTensor]>,
  metadata: Record<string, string> = {},
): Uint8Array[] {
  const specs: SafetensorsSpec[] = [];
  const pieces: Uint8Array[] = [];
  for (const [name, t] of tensors) {
    if (!dtypesOf(t.data).includes(t.dtype))
      throw new SafetensorsError(
        `tensor '${name}' is declared ${t.dtype} but holds ${dtypesOf(t.data).join('/')} data`,
      );
    const numel = t.shape.reduce((a, b) => a * b, 1);
    if (!t.shape.every((d) => Number.isInteger(d) && d >= 0) || numel !== t.data.length) {
      throw new SafetensorsError(`tensor '${name}' has shape [${t.shape.join(', ')}] but ${t.data.length} elements`);
    }
    specs.push({ name, dtype: t.dtype, shape: t.shape });
    pieces.push(littleEndianBytes(t.data));
  }
  return [encodeSafetensorsHeader(specs, metadata), ...pieces];
}

/**
 * Parses and validates a header (the JSON bytes after the length prefix) against the size of the
 * data section that follows it: dtypes, shapes against byte counts, offsets covering the data
 * exactly, without holes or overlaps.
 */
export function parseSafetensorsHeader(
  json: Uint8Array,
  dataLength: number,
): { entries: SafetensorsEntry[]; metadata: Record<string, string> } {
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(json));
  } catch (e) {
    throw new SafetensorsError(`header is not valid UTF-8 JSON: ${(e as Error).message}`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header))
    throw new SafetensorsError('header is not a JSON object');
  const metadata: Record<string, string> = {};
  const entries: SafetensorsEntry[] = [];
  for (const [name, v] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof v !== 'object' || v === null || Array.isArray(v))
        throw new SafetensorsError('__metadata__ must be an object');
      for (const [k, s] of Object.entries(v)) {
        if (typeof s !== 'string') throw new SafetensorsError(`__metadata__.${k} must be a string`);
        metadata[k] = s;
      }
      continue;
    }
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof v !== 'object' || v === null) throw new SafetensorsError(`entry '${name}' is not an object`);
    if (!isSafetensorsDType(e.dtype))
      throw new SafetensorsError(`tensor '${name}' has unsupported dtype ${JSON.stringify(e.dtype)}`);
    const dtype = e.dtype;
    if (!Array.isArray(e.shape) || !e.shape.every((d) => Number.isSafeInteger(d) && d >= 0))
      throw new SafetensorsError(`tensor '${name}' has an invalid shape`);
    const offs = e.data_offsets;
    if (
      !Array.isArray(offs) ||
      offs.length !== 2 ||
      !offs.every((o) => Number.isSafeInteger(o) && o >= 0) ||
      offs[0] > offs[1]
    ) {
      throw new SafetensorsError(`tensor '${name}' has invalid data_offsets`);
    }
    const shape = e.shape as number[];
    const bytes = safetensorsByteLength(dtype, shape);
    if (offs[1] - offs[0] !== bytes) {
      throw new SafetensorsError(
        `tensor '${name}' (${dtype} [${shape.join(', ')}]) needs ${bytes} bytes but its offsets span ${offs[1] - offs[0]}`,
      );
    }
    if (offs[1] > dataLength)
      throw new SafetensorsError(
        `file is truncated: tensor '${name}' ends at byte ${offs[1]} of data, only ${dataLength} present`,
      );
    entries.push({ name, dtype, shape, begin: offs[0], end: offs[1] });
  }
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = 0;
  for (const e of sorted) {
    if (e.begin !== at)
      throw new SafetensorsError(
        e.begin < at ? `tensor '${e.name}' overlaps another tensor` : `data has a hole before tensor '${e.name}'`,
      );
    at = e.end;
  }
  if (at !== dataLength)
    throw new SafetensorsError(`data section has ${dataLength - at} trailing bytes not covered by any tensor`);
  return { entries, metadata };
}

/** Reads the header length of a file from its first 8 bytes; checks it against the limit and the file size. */
export function safetensorsHeaderLength(prefix: Uint8Array, fileLength: number): number {
  if (fileLength < 8 || prefix.length < 8)
    throw new SafetensorsError(`file is truncated: ${fileLength} bytes, the 8-byte header length is missing`);
  const n = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER))
    throw new SafetensorsError(`header length ${n} exceeds the ${MAX_HEADER}-byte limit (corrupt file?)`);
  const headerLen = Number(n);
  if (8 + headerLen > fileLength)
    throw new SafetensorsError(`file is truncated: header needs ${headerLen} bytes, ${fileLength - 8} present`);
  return headerLen;
}

/**
 * A typed array of `dtype` over little-endian `bytes` that the caller owns (aligned, not shared):
 * byte-swapped in place on big-endian hosts.
 */
export function typedFromLittleEndian(dtype: SafetensorsDType, bytes: Uint8Array): SafetensorsArray {
  const size = ITEM_SIZE[dtype];
  if (bytes.byteOffset % size !== 0)
    throw new SafetensorsError(`internal: ${dtype} bytes are not ${size}-byte aligned`);
  if (!LITTLE_ENDIAN && size > 1) for (let i = 0; i < bytes.length; i += size) bytes.subarray(i, i + size).reverse();
  const n = bytes.length / size;
  switch (dtype) {
    case 'F32':
      return new Float32Array(bytes.buffer, bytes.byteOffset, n);
    case 'F64':
      return new Float64Array(bytes.buffer, bytes.byteOffset, n);
    case 'I32':
      return new Int32Array(bytes.buffer, bytes.byteOffset, n);
    case 'BF16':
    case 'F16':
      return new Uint16Array(bytes.buffer, bytes.byteOffset, n);
    default:
      return bytes;
  }
}

/** Decodes a whole safetensors file held in memory (tensor data is copied out). */
export function decodeSafetensors(file: Uint8Array): SafetensorsContents {
  const headerLen = safetensorsHeaderLength(file, file.length);
  const data = file.subarray(8 + headerLen);
  const { entries, metadata } = parseSafetensorsHeader(file.subarray(8, 8 + headerLen), data.length);
  const tensors = new Map<string, SafeTensor>();
  for (const e of entries) {
    const bytes = new Uint8Array(data.subarray(e.begin, e.end)); // a copy (Buffer#slice would be a view): aligned, owned
    tensors.set(e.name, { dtype: e.dtype, shape: e.shape, data: typedFromLittleEndian(e.dtype, bytes) });
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
      for (let off = 0; off < p.length;) off += writeSync(fd, p, off, p.length - off);
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
export function writeSafetensorsFile(
  path: string,
  tensors: Iterable<[string, SafeTensor]>,
  metadata: Record<string, string> = {},
): void {
  writeFileAtomic(path, encodeSafetensors(tensors, metadata));
}

/** Reads and validates a safetensors file. */
export function readSafetensorsFile(path: string): SafetensorsContents {
  return decodeSafetensors(readFileSync(path));
}
