import t from 'tap';

import {
  Box,
  Dict,
  Discrete,
  Message,
  MultiBinary,
  MultiDiscrete,
  Sequence,
  Text,
  Tuple,
  batchSpace,
  concatenate,
  iterate,
  spaceFromJSON,
  RandomGenerator,
  type ChatMessage,
  type JsonSchema,
} from '../../lib/gym/index.js';
import { createEmptyArray, deepCopy } from '../../lib/gym/spaces/batch.js';
import { sampleJson, validateJson } from '../../lib/gym/spaces/json-schema.js';

const tools = [
  {
    name: 'get_order',
    description: 'Look up an order',
    parameters: {
      type: 'object',
      properties: { order_id: { type: 'string', minLength: 2 } },
      required: ['order_id'],
      additionalProperties: false,
    } as JsonSchema,
  },
  {
    type: 'function' as const,
    function: {
      name: 'refund',
      parameters: {
        type: 'object',
        properties: {
          amount: { type: 'number', minimum: 0, maximum: 100 },
          items: { type: 'array', items: { type: 'integer' }, maxItems: 2 },
        },
        required: ['amount'],
      } as JsonSchema,
    },
  },
];

t.test('Message: contains follows the OpenAI chat format', async (t) => {
  const space = new Message({ tools, maxContentLength: 20 });
  const call = (name: string, args: unknown, id = 'call_1') => ({
    id,
    type: 'function' as const,
    function: { name, arguments: JSON.stringify(args) },
  });
  t.ok(space.contains({ role: 'user', content: 'hello' }));
  t.ok(
    space.contains({ role: 'assistant', content: null, tool_calls: [call('get_order', { order_id: '#W1' })] }),
    'assistant tool call with null content',
  );
  t.ok(
    space.contains({
      role: 'assistant',
      content: 'let me check',
      tool_calls: [call('refund', { amount: 5, items: [1] })],
    }),
  );
  t.ok(space.contains({ role: 'tool', content: '{"status":"ok"}', tool_call_id: 'call_1' }));
  t.ok(space.contains({ role: 'system', content: 'policy', name: 'sys', extra: 1 }), 'unknown keys are ignored');
  const bad: Array<[unknown, RegExp]> = [
    [null, /not an object/],
    [{ role: 'robot', content: 'x' }, /role must be one of/],
    [{ role: 'user', content: '' }, /shorter than 1/],
    [{ role: 'user', content: 'x'.repeat(21) }, /longer than 20/],
    [{ role: 'user', content: null }, /content must be a string/],
    [{ role: 'user', content: 5 }, /string or null/],
    [{ role: 'user', content: 'x', tool_calls: [call('refund', { amount: 1 })] }, /only assistant/],
    [{ role: 'assistant', content: null, tool_calls: [call('delete_all', {})] }, /unknown tool "delete_all"/],
    [{ role: 'assistant', content: null, tool_calls: [call('refund', { amount: 500 })] }, /maximum 100/],
    [{ role: 'assistant', content: null, tool_calls: [call('refund', {})] }, /missing required property "amount"/],
    [
      { role: 'assistant', content: null, tool_calls: [call('get_order', { order_id: 'W1', x: 1 })] },
      /unexpected property "x"/,
    ],
    [
      { role: 'assistant', content: null, tool_calls: [call('refund', { amount: 1, items: [1.5] })] },
      /expected integer/,
    ],
    [
      { role: 'assistant', content: null, tool_calls: [call('refund', { amount: 1 }), call('refund', { amount: 2 })] },
      /not unique/,
    ],
    [
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c', type: 'function', function: { name: 'refund', arguments: '{bad' } }],
      },
      /not valid JSON/,
    ],
    [
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c', type: 'function', function: { name: 'refund', arguments: '[1]' } }],
      },
      /encode an object/,
    ],
    [
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c', type: 'fn', function: { name: 'refund', arguments: '{}' } }],
      },
      /type must be "function"/,
    ],
    [
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: '', type: 'function', function: { name: 'refund', arguments: '{}' } }],
      },
      /id must be a non-empty string/,
    ],
    [{ role: 'assistant', content: null, tool_calls: 'x' }, /must be an array/],
    [{ role: 'assistant', content: null, tool_calls: [] }, /null only with tool calls/],
    [{ role: 'tool', content: 'x' }, /tool_call_id/],
    [{ role: 'user', content: 'x', name: 3 }, /name must be a string/],
  ];
  for (const [msg, why] of bad) {
    t.notOk(space.contains(msg), `rejects ${JSON.stringify(msg)?.slice(0, 60)}`);
    t.match(space.explain(msg), why);
  }
  const limited = new Message({ maxToolCalls: 1 });
  t.ok(
    limited.contains({ role: 'assistant', content: null, tool_calls: [call('anything', {})] }),
    'without tools any name is accepted',
  );
  t.notOk(
    limited.contains({ role: 'assistant', content: null, tool_calls: [call('a', {}, 'c1'), call('b', {}, 'c2')] }),
    'maxToolCalls',
  );
  t.notOk(new Message({ roles: ['assistant'] }).contains({ role: 'user', content: 'hi' }), 'roles restrict');
});

t.test('Message: sample, seed, mask, JSON', async (t) => {
  const space = new Message({ tools, seed: 5 });
  const roles = new Set<string>();
  let withCalls = 0;
  for (let i = 0; i < 400; i++) {
    const m = space.sample();
    roles.add(m.role);
    if (m.tool_calls) withCalls++;
    if (!space.contains(m)) t.fail(`sample not contained: ${space.explain(m)}`);
  }
  t.same([...roles].sort(), ['assistant', 'system', 'tool', 'user'], 'every role is sampled');
  t.ok(withCalls > 20, 'assistant samples make tool calls');
  const forced = space.sample({ toolCalls: true });
  t.equal(forced.role, 'assistant');
  t.ok(forced.tool_calls && forced.tool_calls.length >= 1 && forced.content === null);
  const userOnly = space.sample({ roles: ['user'] });
  t.equal(userOnly.role, 'user');
  t.notOk(space.sample({ roles: ['assistant'], toolCalls: false }).tool_calls, 'toolCalls false');
  t.throws(() => new Message().sample({ toolCalls: true }), /tool calls were asked/);
  t.throws(() => space.sample({ roles: [] }), /no role/);
  t.throws(() => space.sample(null, 1 as never), TypeError);
  const a = new Message({ tools, seed: 11 });
  const b = new Message({ tools, seed: 11 });
  t.same(
    Array.from({ length: 10 }, () => a.sample()),
    Array.from({ length: 10 }, () => b.sample()),
    'same seed, same messages',
  );
  const json = JSON.stringify(space.toJSON());
  const back = spaceFromJSON(json) as Message;
  t.ok(back.equals(space), 'JSON round trip with tool schemas');
  t.ok(back.contains(forced));
  const msgs: ChatMessage[] = [space.sample(), space.sample()];
  t.same(space.fromJsonable(JSON.parse(JSON.stringify(space.toJsonable(msgs)))), msgs);
  t.throws(() => space.fromJsonable([{ role: 'x' }]), TypeError);
  t.throws(() => space.fromJsonable('x'), TypeError);
  t.throws(() => new Message({ roles: [] }), RangeError);
  t.throws(() => new Message({ maxContentLength: -1 }), RangeError);
  t.throws(() => new Message({ minContentLength: 5, maxContentLength: 2 }), RangeError);
  t.throws(() => new Message({ tools: [{ name: '' }] }), TypeError);
  t.throws(() => new Message({ tools: [{ name: 'a' }, { name: 'a' }] }), RangeError);
  t.match(space.toString(), /Message\(roles=\[system, user, assistant, tool\], tools=\[get_order, refund\]/);
});

t.test('JSON Schema subset', async (t) => {
  const schema: JsonSchema = {
    type: 'object',
    properties: {
      s: { type: 'string', maxLength: 3 },
      n: { type: ['integer', 'null'] },
      e: { enum: ['a', 'b'] },
      o: { type: 'object', additionalProperties: { type: 'boolean' } },
      l: { type: 'array', minItems: 1 },
    },
    required: ['s'],
  };
  t.equal(validateJson({ s: 'ab', n: null, e: 'a', o: { x: true }, l: [1] }, schema), null);
  t.match(validateJson({ s: 'abcd' }, schema), /longer than 3/);
  t.match(validateJson({ s: 'a', n: 1.5 }, schema), /expected integer \| null/);
  t.match(validateJson({ s: 'a', e: 'c' }, schema), /not one of/);
  t.match(validateJson({ s: 'a', o: { x: 1 } }, schema), /\$\.o\.x: expected boolean/);
  t.match(validateJson({ s: 'a', l: [] }, schema), /fewer than 1/);
  t.match(
    validateJson(
      { s: 'a', l: [1, 2] },
      { ...schema, properties: { ...schema.properties, l: { type: 'array', maxItems: 1 } } },
    ),
    /more than 1/,
  );
  t.match(validateJson({ s: '' }, { properties: { s: { minLength: 1 } } }), /shorter than 1/);
  t.match(validateJson(5, { minimum: 6 }), /< minimum/);
  t.match(
    validateJson(() => 1, {}),
    /not a JSON value/,
  );
  const rng = new RandomGenerator(1);
  for (let i = 0; i < 200; i++) {
    const v = sampleJson(schema, rng);
    const err = validateJson(v, schema);
    if (err) t.fail(`sampled value violates the schema: ${err}`);
  }
  t.equal(typeof sampleJson({ type: 'boolean' }, rng), 'boolean');
  t.equal(sampleJson({ type: 'null' }, rng), null);
  t.equal(sampleJson({ type: 'integer', minimum: 3, maximum: 3 }, rng), 3);
  // zod's bounds of an integer (the safe integers): a range wider than 2^53, sampled inside it
  const safe = { type: 'integer' as const, minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER };
  const wide = Array.from({ length: 200 }, () => sampleJson(safe, rng) as number);
  t.ok(
    wide.every((v) => Number.isSafeInteger(v)),
    'safe-integer bounds: integers within them',
  );
  t.ok(new Set(wide).size > 190, 'spread over the range');
  t.ok(
    Array.from({ length: 50 }, () => sampleJson({ type: 'integer', minimum: 2 ** 53 - 10 }, rng) as number).every(
      (v) => v >= 2 ** 53 - 10,
    ),
    'a lower bound above 2^52 is kept',
  );
  t.equal(sampleJson({ type: 'number', minimum: 2, maximum: 2 }, rng), 2);
  t.equal(typeof sampleJson({}, rng), 'string');
});

t.test('batchSpace follows Gymnasium', async (t) => {
  const box = batchSpace(new Box(0, 1, [2, 3]), 4) as Box;
  t.ok(box instanceof Box && box.shape.join() === '4,2,3' && box.dtype === 'float32');
  const unb = batchSpace(new Box(-Infinity, Infinity, [1], 'int16'), 2) as Box<'int16'>;
  t.notOk(unb.isBounded(), 'unbounded elements stay unbounded');
  const disc = batchSpace(new Discrete(3, { start: 1 }), 2) as MultiDiscrete;
  t.ok(disc instanceof MultiDiscrete);
  t.same(Array.from(disc.nvec), [3, 3]);
  t.same(Array.from(disc.start), [1, 1]);
  t.ok(disc.sample() instanceof Int32Array);
  t.ok(
    (batchSpace(new Discrete(3, { start: 2 ** 31 }), 2) as MultiDiscrete<'uint32'>).sample() instanceof Uint32Array,
    'large values use uint32',
  );
  t.throws(() => batchSpace(new Discrete(3, { start: 2 ** 40 }), 2), RangeError);
  const md = batchSpace(new MultiDiscrete([2, 5], { start: [0, 1] }), 3) as Box<'int32'>;
  t.ok(md instanceof Box && md.shape.join() === '3,2');
  t.same(Array.from(md.high), [1, 5, 1, 5, 1, 5]);
  const mb = batchSpace(new MultiBinary(4), 2) as Box<'int8'>;
  t.ok(mb instanceof Box && mb.dtype === 'int8' && mb.shape.join() === '2,4');
  const dict = batchSpace(
    new Dict([
      ['b', new Discrete(2)],
      ['a', new Box(0, 1, [1])],
    ]),
    3,
  ) as Dict;
  t.same(dict.keys, ['b', 'a'], 'key order kept');
  const tu = batchSpace(new Tuple([new Discrete(2), new Text(3)]), 2) as Tuple;
  t.ok(tu.at(1) instanceof Tuple && (tu.at(1) as Tuple).length === 2, 'Text batches as a Tuple of copies');
  const seq = batchSpace(new Sequence(new Discrete(2)), 2) as Tuple;
  t.ok(seq.at(0) instanceof Sequence);
  t.throws(() => batchSpace(new Discrete(2), 0), RangeError);
  const msg = batchSpace(new Message(), 2) as Tuple;
  t.ok(
    msg.contains([
      { role: 'user', content: 'a' },
      { role: 'user', content: 'b' },
    ]),
  );
});

t.test('createEmptyArray / concatenate / iterate round-trip', async (t) => {
  const space = new Dict(
    {
      img: new Box(0, 255, [2, 2], 'uint8'),
      id: new Discrete(5),
      txt: new Text(4),
      pair: new Tuple([new MultiBinary(2), new MultiDiscrete([3])]),
    },
    { seed: 1 },
  );
  const items = [space.sample(), space.sample(), space.sample()];
  const empty = createEmptyArray(space, 3) as Record<string, unknown>;
  t.ok(empty.img instanceof Uint8Array && (empty.img as Uint8Array).length === 12);
  t.ok(empty.id instanceof Int32Array);
  t.same(empty.txt, [null, null, null]);
  const batch = concatenate(space, items, empty) as Record<string, unknown>;
  t.equal(batch, empty, 'written into out');
  t.ok(batchSpace(space, 3).contains(batch), 'the batch is in the batched space');
  const back = iterate(space, batch, 3);
  t.same(back, items, 'iterate inverts concatenate');
  t.same(iterate(new Discrete(4), [1, 2], 2), [1, 2], 'arrays of items are accepted');
  t.same(
    iterate(new Box(0, 1, [2]), [[0, 1], Float32Array.of(1, 0)], 2).map((x) => Array.from(x as Float32Array)),
    [
      [0, 1],
      [1, 0],
    ],
  );
  t.throws(() => iterate(new Box(0, 1, [2]), new Float32Array(3), 2), RangeError);
  t.throws(() => iterate(new Tuple([new Discrete(2)]), [], 2), RangeError);
  t.throws(() => iterate(new Dict({ a: new Discrete(2) }), 5, 2), RangeError);
  t.throws(() => iterate(new Text(2), ['a'], 2), RangeError);
  t.throws(() => concatenate(new Box(0, 1, [2]), [5]), RangeError);
  t.throws(() => concatenate(new Box(0, 1, [2]), [[1]]), RangeError);
  t.same(Array.from(concatenate(new Discrete(3), [2, 1]) as Int32Array), [2, 1], 'out created when absent');
  const copy = deepCopy(batch);
  t.not(copy.img, batch.img);
  t.same(copy, batch);
  class Opaque {}
  const o = new Opaque();
  t.equal(deepCopy({ o }).o, o, 'class instances are shared');
});
