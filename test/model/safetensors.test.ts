import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { SafetensorsError } from '../../lib/model/index.js';
import {
  decodeSafetensors,
  encodeSafetensors,
  readSafetensorsFile,
  writeFileAtomic,
  writeSafetensorsFile,
} from '../../lib/model/safetensors.js';
import { randn } from './fixtures/reference.js';

const concat = (pieces: Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};

/** A file built by hand from the format description: u64 LE header size, JSON header, LE data. */
function handMade(header: Record<string, unknown>, data: Uint8Array, pad = 0): Uint8Array {
  const json = Buffer.from(JSON.stringify(header) + ' '.repeat(pad), 'utf8');
  const out = Buffer.alloc(8 + json.length + data.length);
  out.writeBigUInt64LE(BigInt(json.length), 0);
  json.copy(out, 8);
  Buffer.from(data).copy(out, 8 + json.length);
  return new Uint8Array(out);
}

t.test('reads a file written by hand from the specification', async (t) => {
  const data = Buffer.alloc(16 + 8 + 3);
  [1.5, -2, 0.25, 3].forEach((v, i) => data.writeFloatLE(v, 4 * i));
  data.writeInt32LE(-7, 16);
  data.writeInt32LE(123456, 20);
  data.set([1, 2, 255], 24);
  const file = handMade(
    {
      __metadata__: { format: 'pt' },
      weight: { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] },
      ids: { dtype: 'I32', shape: [2], data_offsets: [16, 24] },
      bytes: { dtype: 'U8', shape: [3], data_offsets: [24, 27] },
    },
    data,
    3,
  );
  const { tensors, metadata } = decodeSafetensors(file);
  t.same(metadata, { format: 'pt' });
  t.same(tensors.get('weight'), { dtype: 'F32', shape: [2, 2], data: new Float32Array([1.5, -2, 0.25, 3]) });
  t.same(Array.from(tensors.get('ids')!.data), [-7, 123456]);
  t.same(Array.from(tensors.get('bytes')!.data), [1, 2, 255]);
  const scalar = decodeSafetensors(
    handMade(
      { s: { dtype: 'F64', shape: [], data_offsets: [0, 8] } },
      new Uint8Array(new Float64Array([Math.PI]).buffer),
    ),
  );
  t.same(scalar.tensors.get('s')?.shape, []);
  t.equal(scalar.tensors.get('s')?.data[0], Math.PI);
});

t.test('writes files that follow the specification and round-trip', async (t) => {
  const w = randn(3 * 5, 1);
  const tensors: [
    string,
    {
      dtype: 'F32' | 'I32' | 'U8' | 'F64';
      shape: number[];
      data: Float32Array | Int32Array | Uint8Array | Float64Array;
    },
  ][] = [
    ['layer.weight', { dtype: 'F32', shape: [3, 5], data: w }],
    ['ids', { dtype: 'I32', shape: [4], data: Int32Array.from([1, -2, 3, 2 ** 30]) }],
    ['empty', { dtype: 'F32', shape: [0, 4], data: new Float32Array(0) }],
    ['odd', { dtype: 'U8', shape: [3], data: Uint8Array.from([9, 8, 7]) }],
    ['f64', { dtype: 'F64', shape: [1], data: Float64Array.from([1e-300]) }],
  ];
  const file = concat(encodeSafetensors(tensors, { note: 'hi', unicode: 'é😀' }));
  const buf = Buffer.from(file);
  const n = Number(buf.readBigUInt64LE(0));
  t.equal((8 + n) % 8, 0, 'data starts 8-byte aligned');
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  t.same(header['layer.weight'], { dtype: 'F32', shape: [3, 5], data_offsets: [0, 60] });
  t.same(header.ids.data_offsets, [60, 76]);
  t.equal(buf.readFloatLE(8 + n + 4 * 7), w[7], 'raw little-endian data at its offset');
  t.equal(buf.readInt32LE(8 + n + 60 + 12), 2 ** 30);
  t.equal(file.length, 8 + n + 60 + 16 + 0 + 3 + 8, 'no holes, nothing after the data');
  const back = decodeSafetensors(file);
  t.same(
    [...back.tensors.keys()],
    tensors.map(([k]) => k),
  );
  for (const [k, v] of tensors) t.same(back.tensors.get(k), v, k);
  t.same(back.metadata, { note: 'hi', unicode: 'é😀' });
  t.throws(() => encodeSafetensors([['a', { dtype: 'F32', shape: [2], data: new Float32Array(3) }]]), {
    name: 'SafetensorsError',
    message: /shape \[2\] but 3 elements/,
  });
  t.throws(() => encodeSafetensors([['a', { dtype: 'I32', shape: [2], data: new Float32Array(2) }]]), {
    message: /declared I32 but holds F32/,
  });
  t.throws(() => encodeSafetensors([['__metadata__', { dtype: 'F32', shape: [1], data: new Float32Array(1) }]]), {
    message: /invalid tensor name/,
  });
  t.throws(() => encodeSafetensors([], { a: 1 as unknown as string }), { message: /must be a string/ });
  t.throws(
    () =>
      encodeSafetensors([
        ['a', { dtype: 'F32', shape: [1], data: new Float32Array(1) }],
        ['a', { dtype: 'F32', shape: [1], data: new Float32Array(1) }],
      ]),
    { message: /duplicate tensor 'a'/ },
  );
});

t.test('corrupt, truncated and inconsistent files fail with a clear error', async (t) => {
  const good = concat(encodeSafetensors([['x', { dtype: 'F32', shape: [4], data: randn(4, 2) }]], { k: 'v' }));
  const n = Number(Buffer.from(good).readBigUInt64LE(0));
  const f32 = (count: number): Uint8Array => new Uint8Array(4 * count);
  const cases: [string, Uint8Array, RegExp][] = [
    ['empty file', new Uint8Array(0), /truncated: 0 bytes/],
    [
      'truncated data',
      good.subarray(0, good.length - 1),
      /truncated: tensor 'x' ends at byte 16 of data, only 15 present/,
    ],
    ['truncated header', good.subarray(0, 8 + n - 2), /truncated: header needs/],
    [
      'huge header length',
      (() => {
        const b = Buffer.from(good);
        b.writeBigUInt64LE(1n << 40n, 0);
        return new Uint8Array(b);
      })(),
      /exceeds the .* limit/,
    ],
    ['garbage header', handMade({}, new Uint8Array(0)).map((v, i) => (i >= 8 ? 0x7b : v)), /not valid UTF-8 JSON/],
    [
      'array header',
      (() => {
        const j = Buffer.from('[1, 2]  ');
        const b = Buffer.alloc(8 + j.length);
        b.writeBigUInt64LE(BigInt(j.length));
        j.copy(b, 8);
        return new Uint8Array(b);
      })(),
      /not a JSON object/,
    ],
    [
      'bad dtype',
      handMade({ x: { dtype: 'Q8', shape: [1], data_offsets: [0, 1] } }, new Uint8Array(1)),
      /unsupported dtype "Q8"/,
    ],
    [
      'shape mismatch',
      handMade({ x: { dtype: 'F32', shape: [3], data_offsets: [0, 16] } }, f32(4)),
      /needs 12 bytes but its offsets span 16/,
    ],
    ['negative shape', handMade({ x: { dtype: 'F32', shape: [-1], data_offsets: [0, 4] } }, f32(1)), /invalid shape/],
    [
      'bad offsets',
      handMade({ x: { dtype: 'F32', shape: [1], data_offsets: [4, 0] } }, f32(1)),
      /invalid data_offsets/,
    ],
    [
      'overlap',
      handMade(
        {
          a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
          b: { dtype: 'F32', shape: [2], data_offsets: [4, 12] },
        },
        f32(3),
      ),
      /overlaps another tensor/,
    ],
    ['hole', handMade({ a: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, f32(2)), /hole before tensor 'a'/],
    ['trailing bytes', handMade({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }, f32(2)), /4 trailing bytes/],
    ['bad metadata', handMade({ __metadata__: { a: 1 } }, new Uint8Array(0)), /__metadata__\.a must be a string/],
    ['metadata not an object', handMade({ __metadata__: 'x' }, new Uint8Array(0)), /__metadata__ must be an object/],
    ['entry not an object', handMade({ a: 5 }, new Uint8Array(0)), /entry 'a' is not an object/],
  ];
  for (const [name, file, message] of cases)
    t.throws(() => decodeSafetensors(file), { name: 'SafetensorsError', message }, name);
  t.ok(new SafetensorsError('x') instanceof Error);
});

t.test('files are written atomically and read back', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sinkflex-st-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'model.safetensors');
  writeFileSync(path, 'old contents');
  const data = randn(1000, 3);
  writeSafetensorsFile(path, [['w', { dtype: 'F32', shape: [10, 100], data }]], { a: 'b' });
  t.same(readdirSync(dir), ['model.safetensors'], 'no temporary file is left');
  const back = readSafetensorsFile(path);
  t.same(back.tensors.get('w')?.data, data);
  t.ok(readFileSync(path).length > 4000);
  // a failed write leaves the old file and no temporary file
  t.throws(() => writeFileAtomic(join(dir, 'missing', 'x.safetensors'), [new Uint8Array(4)]), { code: 'ENOENT' });
  t.same(readdirSync(dir), ['model.safetensors']);
  t.throws(() => writeFileAtomic(dir, [new Uint8Array(4)]), /EISDIR|EEXIST|ENOTEMPTY|EPERM|illegal operation/);
  t.same(readdirSync(dir), ['model.safetensors'], 'rename onto a directory fails cleanly');
});
