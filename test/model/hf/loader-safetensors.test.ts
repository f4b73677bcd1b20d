// Safetensors BF16/F16 tensors, reading single tensors and element ranges from disk at their
// offsets, and the streaming writer; files built by hand from the format description.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import {
  SafetensorsError,
  decodeSafetensors,
  encodeSafetensors,
  encodeSafetensorsHeader,
} from '../../../lib/model/safetensors.js';
import { SafetensorsFile, writeSafetensorsStream } from '../../../lib/model/safetensors-stream.js';
import { tempDir } from './fixtures/loader/checkpoint.js';

const dir = tempDir('hf-st-');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** u64 LE header length, JSON header, data. */
function handMade(header: Record<string, unknown>, data: Uint8Array): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const out = Buffer.alloc(8 + json.length + data.length);
  out.writeBigUInt64LE(BigInt(json.length), 0);
  json.copy(out, 8);
  Buffer.from(data).copy(out, 8 + json.length);
  return out;
}

const data = Buffer.alloc(4 * 2 + 3 * 2 + 4);
data.writeUInt16LE(0x3f80, 0); // bf16 1.0
data.writeUInt16LE(0xc040, 2); // bf16 -3.0
data.writeUInt16LE(0x0001, 4);
data.writeUInt16LE(0x7f80, 6); // +inf
data.writeUInt16LE(0x3c00, 8); // f16 1.0
data.writeUInt16LE(0xbc00, 10); // f16 -1.0
data.writeUInt16LE(0x7bff, 12); // f16 65504
data.set([1, 2, 3, 250], 14);
const header = {
  __metadata__: { format: 'pt' },
  w: { dtype: 'BF16', shape: [2, 2], data_offsets: [0, 8] },
  h: { dtype: 'F16', shape: [3], data_offsets: [8, 14] },
  b: { dtype: 'U8', shape: [4], data_offsets: [14, 18] },
};

t.test('BF16 and F16 tensors decode to their bit patterns and encode back', async (t) => {
  const file = new Uint8Array(handMade(header, data));
  const { tensors } = decodeSafetensors(file);
  t.same(tensors.get('w'), { dtype: 'BF16', shape: [2, 2], data: new Uint16Array([0x3f80, 0xc040, 0x0001, 0x7f80]) });
  t.same(tensors.get('h'), { dtype: 'F16', shape: [3], data: new Uint16Array([0x3c00, 0xbc00, 0x7bff]) });
  const again = decodeSafetensors(Buffer.concat(encodeSafetensors(tensors)));
  t.same(again.tensors, tensors);
  t.throws(() => encodeSafetensors([['x', { dtype: 'F32', shape: [1], data: new Uint16Array(1) }]]), {
    message: /declared F32 but holds BF16\/F16 data/,
  });
  t.throws(
    () => encodeSafetensors([['x', { dtype: 'BF16', shape: [1], data: new Float32Array(1) }]]),
    SafetensorsError,
  );
  t.throws(() => encodeSafetensorsHeader([{ name: 'x', dtype: 'Q4' as 'F32', shape: [1] }]), /unsupported dtype/);
  t.throws(() => encodeSafetensorsHeader([{ name: 'x', dtype: 'F32', shape: [1.5] }]), /invalid shape/);
});

t.test('SafetensorsFile reads tensors and element ranges at their offsets', async (t) => {
  const path = join(dir, 'a.safetensors');
  writeFileSync(path, handMade(header, data));
  const f = await SafetensorsFile.open(path);
  try {
    t.same(f.metadata, { format: 'pt' });
    t.same([...f.entries.keys()].sort(), ['b', 'h', 'w']);
    t.same(await f.read('w'), new Uint16Array([0x3f80, 0xc040, 0x0001, 0x7f80]));
    t.same(await f.read('w', 1, 3), new Uint16Array([0xc040, 0x0001]));
    t.same(await f.read('b', 2), new Uint8Array([3, 250]));
    t.same(await f.readBytes('h', 2, 3), new Uint8Array([0xff, 0x7b]));
    t.same(await f.read('h', 3, 3), new Uint16Array(0));
    await t.rejects(f.read('w', 3, 5), RangeError);
    await t.rejects(f.read('w', -1), RangeError);
    t.throws(() => f.entry('missing'), { message: /tensor 'missing' is not in the file/ });
  } finally {
    await f.dispose();
  }
  await t.rejects(f.read('w'), /closed/);
  await f.dispose();
});

t.test('SafetensorsFile validates like the in-memory decoder and names the file', async (t) => {
  const cases: [string, Buffer, RegExp][] = [
    ['short', Buffer.from([1, 2, 3]), /truncated/],
    ['huge header', Buffer.from([0, 0, 0, 0, 0, 0, 0, 1]), /exceeds/],
    ['bad json', Buffer.concat([Buffer.from([2, 0, 0, 0, 0, 0, 0, 0]), Buffer.from('{x')]), /not valid UTF-8 JSON/],
    [
      'bad dtype',
      handMade({ x: { dtype: 'Q8', shape: [1], data_offsets: [0, 1] } }, new Uint8Array(1)),
      /unsupported dtype "Q8"/,
    ],
    ['short data', handMade(header, data.subarray(0, 12)), /truncated/],
    ['trailing bytes', handMade(header, Buffer.concat([data, Buffer.alloc(2)])), /trailing bytes/],
    [
      'overlap',
      handMade(
        { a: { dtype: 'U8', shape: [2], data_offsets: [0, 2] }, b: { dtype: 'U8', shape: [2], data_offsets: [1, 3] } },
        new Uint8Array(3),
      ),
      /overlaps/,
    ],
  ];
  for (const [name, bytes, message] of cases) {
    const path = join(dir, `${name.replace(/ /g, '-')}.safetensors`);
    writeFileSync(path, bytes);
    await t.rejects(
      SafetensorsFile.open(path),
      {
        name: 'SafetensorsError',
        message: new RegExp(`${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: .*${message.source}`),
      },
      name,
    );
  }
  await t.rejects(SafetensorsFile.open(join(dir, 'nope.safetensors')), { code: 'ENOENT' });
});

t.test('writeSafetensorsStream writes the format, asking for each tensor when it is its turn', async (t) => {
  const path = join(dir, 'stream.safetensors');
  const order: string[] = [];
  const bytes = await writeSafetensorsStream(
    path,
    [
      { name: 'w', dtype: 'BF16', shape: [2, 2], bytes: () => (order.push('w'), data.subarray(0, 8)) },
      { name: 'h', dtype: 'F16', shape: [3], bytes: async () => (order.push('h'), data.subarray(8, 14)) },
      { name: 'b', dtype: 'U8', shape: [4], bytes: () => (order.push('b'), data.subarray(14, 18)) },
    ],
    { format: 'pt' },
  );
  t.same(order, ['w', 'h', 'b']);
  const file = readFileSync(path);
  t.equal(bytes, file.length);
  t.equal(Number(file.readBigUInt64LE(0)) % 8, 0, 'header padded to a multiple of 8 (with the prefix)');
  const decoded = decodeSafetensors(new Uint8Array(file));
  t.same(decoded.metadata, { format: 'pt' });
  t.same(decoded.tensors.get('w')?.data, new Uint16Array([0x3f80, 0xc040, 0x0001, 0x7f80]));
  t.same(decoded.tensors.get('b')?.data, new Uint8Array([1, 2, 3, 250]));
  await t.rejects(
    writeSafetensorsStream(join(dir, 'bad.safetensors'), [
      { name: 'w', dtype: 'F32', shape: [2], bytes: () => new Uint8Array(4) },
    ]),
    { name: 'SafetensorsError', message: /tensor 'w' \(F32 \[2\]\) needs 8 bytes, got 4/ },
  );
  await t.rejects(
    writeSafetensorsStream(join(dir, 'dup.safetensors'), [
      { name: 'w', dtype: 'U8', shape: [1], bytes: () => new Uint8Array(1) },
      { name: 'w', dtype: 'U8', shape: [1], bytes: () => new Uint8Array(1) },
    ]),
    /duplicate tensor 'w'/,
  );
});
