// Harmony (gpt-oss) renderings and parses against the expected files of the openai/harmony
// repository (../shared/research/harmony/test-data, never copied here). Each conversation is the
// one that repository's tests (src/tests.rs, tests/test_harmony.py) build for the file. The
// descriptions of the built-in browser and python tools are opaque text the renderer copies into
// comments; they are read out of the expected file rather than written here.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import type { ChatMessage, ToolSchema } from '../../../lib/chat/messages.js';
import { HarmonyChatFormat } from '../../../lib/chat/hf/harmony-format.js';
import { parseHarmony } from '../../../lib/chat/hf/harmony-parse.js';
import type { HarmonyMessage, HarmonySystemContent } from '../../../lib/chat/hf/harmony-render.js';
import type { HarmonyTool, HarmonyToolNamespace, HarmonyJsonSchema } from '../../../lib/chat/hf/harmony-schema.js';
import { gptOssTokenizer } from './fixtures/tokenizers.js';

const candidates = [
  process.env.SINKFLEX_HARMONY_DIR,
  join(process.cwd(), '..', 'shared', 'research', 'harmony', 'test-data'),
  join(process.cwd(), '..', '..', 'shared', 'research', 'harmony', 'test-data'),
];
const DIR = candidates.find((d): d is string => d !== undefined && existsSync(join(d, 'test_simple_convo.txt')));

if (DIR === undefined) {
  t.test(
    'harmony expected renderings',
    {
      skip: 'the harmony expected renderings (../shared/research/harmony/test-data, or SINKFLEX_HARMONY_DIR) are not here',
    },
    async () => undefined,
  );
} else {
  const dir = DIR;
  /** An expected file as harmony's tests read it (trailing whitespace trimmed). */
  const expected = (name: string): string => readFileSync(join(dir, name), 'utf8').replace(/\r\n/g, '\n').trimEnd();

  /** The `// ` comment lines right above the line that starts with `marker`, as one text. */
  const commentsAbove = (text: string, marker: string): string => {
    const lines = text.split('\n');
    const at = lines.findIndex((l) => l.startsWith(marker));
    if (at < 0) throw new Error(`no line starting with ${marker}`);
    const out: string[] = [];
    for (let i = at - 1; i >= 0 && lines[i].startsWith('// '); i--) out.unshift(lines[i].slice(3));
    return out.join('\n');
  };

  const browserFile = expected('test_browser_tool_only.txt');
  const num = (d: number): HarmonyJsonSchema => ({ type: 'number', default: d });
  const browser: HarmonyToolNamespace = {
    name: 'browser',
    description: commentsAbove(browserFile, 'namespace browser {'),
    tools: [
      {
        name: 'search',
        description: commentsAbove(browserFile, 'type search'),
        parameters: {
          type: 'object',
          properties: { query: { type: 'string' }, topn: num(10), source: { type: 'string' } },
          required: ['query'],
        },
      },
      {
        name: 'open',
        description: commentsAbove(browserFile, 'type open'),
        parameters: {
          type: 'object',
          properties: {
            id: { type: ['number', 'string'], default: -1 },
            cursor: num(-1),
            loc: num(-1),
            num_lines: num(-1),
            view_source: { type: 'boolean', default: false },
            source: { type: 'string' },
          },
        },
      },
      {
        name: 'find',
        description: commentsAbove(browserFile, 'type find'),
        parameters: {
          type: 'object',
          properties: { pattern: { type: 'string' }, cursor: num(-1) },
          required: ['pattern'],
        },
      },
    ],
  };
  const pythonFile = expected('test_browser_and_python_tool.txt');
  const python: HarmonyToolNamespace = {
    name: 'python',
    description: pythonFile.slice(pythonFile.indexOf('## python\n\n') + 11, pythonFile.indexOf('\n\n# Valid channels')),
    tools: [],
  };

  const weatherFunctions: HarmonyTool[] = [
    { name: 'get_location', description: 'Gets the location of the user.', parameters: null },
    {
      name: 'get_current_weather',
      description: 'Gets the current weather in the provided location.',
      parameters: {
        type: 'object',
        properties: {
          location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
          format: { type: 'string', enum: ['celsius', 'fahrenheit'], default: 'celsius' },
        },
        required: ['location'],
      },
    },
    {
      name: 'get_multiple_weathers',
      description: 'Gets the current weather in the provided list of locations.',
      parameters: {
        type: 'object',
        properties: {
          locations: {
            type: 'array',
            items: { type: 'string' },
            description: 'List of city and state, e.g. ["San Francisco, CA", "New York, NY"]',
          },
          format: { type: 'string', enum: ['celsius', 'fahrenheit'], default: 'celsius' },
        },
        required: ['locations'],
      },
    },
    {
      name: 'kitchensink',
      description: 'A function with various complex schemas.',
      parameters: {
        description: 'params object',
        type: 'object',
        properties: {
          string: { type: 'string', title: 'STRING', description: 'A string', examples: ['hello', 'world'] },
          string_nullable: { type: 'string', nullable: true, description: 'A nullable string', default: 'the default' },
          string_enum: { type: 'string', enum: ['a', 'b', 'c'] },
          oneof_string_or_number: {
            oneOf: [
              { type: 'string', default: 'default_string_in_oneof' },
              { type: 'number', description: 'numbers can happen too' },
            ],
            description: 'a oneof',
            default: 20,
          },
        },
      },
    },
  ];
  const asOpenAi = (f: HarmonyTool): ToolSchema => ({
    type: 'function',
    function: f.parameters
      ? { name: f.name, description: f.description, parameters: f.parameters }
      : { name: f.name, description: f.description },
  });

  const sys = (c: HarmonySystemContent): HarmonyMessage => ({ role: 'system', content: { system: c } });
  const user = (content: string): HarmonyMessage => ({ role: 'user', content });
  const dev = (instructions: string | null, tools: HarmonyToolNamespace[] = []): HarmonyMessage => ({
    role: 'developer',
    content: { developer: { instructions, tools } },
  });
  const analysis = (content: string): HarmonyMessage => ({ role: 'assistant', channel: 'analysis', content });
  const final = (content: string): HarmonyMessage => ({ role: 'assistant', channel: 'final', content });
  const capital = 'What is the capital of the largest country in the world?';
  const robot = "Answer the user's questions like a robot.";

  /** Each expected rendering and its conversation. */
  const renderings: { file: string; messages: HarmonyMessage[]; dropAnalysis?: boolean; completion?: boolean }[] = [
    { file: 'test_simple_convo.txt', messages: [sys({}), user('What is 2 + 2?')] },
    ...(['low', 'medium', 'high'] as const).flatMap((effort) => [
      {
        file: `test_simple_convo_${effort}_effort.txt`,
        messages: [sys({ reasoningEffort: effort }), dev(robot), user(capital)],
      },
      {
        file: `test_simple_convo_${effort}_effort_no_instruction.txt`,
        messages: [sys({ reasoningEffort: effort }), user(capital)],
      },
    ]),
    {
      file: 'test_reasoning_system_message.txt',
      messages: [
        sys({ reasoningEffort: 'medium', channels: { valid: ['analysis', 'final'], required: true } }),
        user('What is 2 + 2?'),
      ],
    },
    {
      file: 'test_reasoning_system_message_no_instruction.txt',
      messages: [
        sys({ reasoningEffort: 'high', channels: { valid: ['analysis', 'final'], required: true } }),
        user('What is the best place to eat candy in the world?'),
      ],
    },
    {
      file: 'test_reasoning_system_message_with_dates.txt',
      messages: [
        sys({
          reasoningEffort: 'medium',
          conversationStartDate: '2021-01-01',
          knowledgeCutoff: '2021-01',
          channels: { valid: ['analysis', 'final'], required: true },
        }),
        user('What is 42 * pi?'),
      ],
    },
    {
      file: 'test_render_functions_with_parameters.txt',
      messages: [
        sys({ reasoningEffort: 'high', conversationStartDate: '2025-06-28' }),
        dev('Always respond in riddles', [{ name: 'functions', tools: weatherFunctions }]),
        user('What is the weather like in SF?'),
      ],
    },
    {
      file: 'test_browser_and_python_tool.txt',
      messages: [sys({ conversationStartDate: '2025-06-28', tools: [browser, python] })],
    },
    { file: 'test_no_tools.txt', messages: [sys({ conversationStartDate: '2025-06-28' })] },
    { file: 'test_browser_tool_only.txt', messages: [sys({ conversationStartDate: '2025-06-28', tools: [browser] })] },
    {
      file: 'test_browser_and_function_tool.txt',
      messages: [
        sys({ conversationStartDate: '2025-06-28', tools: [browser] }),
        dev(null, [
          {
            name: 'functions',
            tools: [
              {
                name: 'lookup_weather',
                description:
                  "Use this tool to lookup the weather in a given location. Call it with the parameter 'location', can be any textual description of a location.",
                parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
              },
            ],
          },
        ]),
      ],
    },
    {
      file: 'test_dropping_cot_by_default.txt',
      messages: [
        user('What is 2 + 2?'),
        analysis('User asks: “What is 2 + 2?” Simple arithmetic. Provide answer.'),
        final('2 + 2 equals 4.'),
        user('What about 9 / 2?'),
      ],
    },
    {
      file: 'test_does_not_drop_if_ongoing_analysis.txt',
      messages: [
        user('What is the weather in SF?'),
        analysis('User asks: “What is the weather in SF?” We need to use lookup_weather tool.'),
        {
          role: 'assistant',
          channel: 'commentary',
          recipient: 'functions.lookup_weather',
          contentType: '<|constrain|>json',
          content: '{"location": "San Francisco"}',
        },
        { role: 'tool', name: 'functions.lookup_weather', content: '{"temperature": 20, "description": "sunny"}' },
      ],
    },
    {
      file: 'test_preserve_cot.txt',
      messages: [
        user('What is 2 + 2?'),
        analysis('User asks a simple question: "What is 2 + 2?" The answer: 4.'),
        final('2 + 2 equals 4.'),
        user('What about 9 / 2?'),
      ],
      dropAnalysis: false,
    },
    {
      file: 'test_keep_analysis_between_finals.txt',
      messages: [
        user('What is 2 + 2?'),
        analysis('thinking 2+2'),
        final('4'),
        user('What is 3 + 5?'),
        analysis('thinking 3+5'),
        final('8'),
      ],
      completion: false,
    },
  ];

  t.test('every expected rendering, from the harmony messages of its test', async (t) => {
    const tok = await gptOssTokenizer();
    const f = new HarmonyChatFormat(tok);
    for (const r of renderings) {
      const want = expected(r.file);
      const got = f.renderHarmony(r.messages, {
        dropAnalysis: r.dropAnalysis ?? true,
        addGenerationPrompt: r.completion ?? true,
      });
      t.equal(got.text, want, `${r.file}: text`);
      t.equal(tok.decode(got.ids), want, `${r.file}: the ids decode to it`);
      t.same(got.ids, tok.encode(want), `${r.file}: the ids are the file's tokens`);
    }
    const covered = new Set(renderings.map((r) => r.file));
    t.equal(covered.size, 19, 'nineteen renderings');
  });

  t.test('the same renderings from OpenAI chat messages and tool schemas', async (t) => {
    const tok = await gptOssTokenizer();
    const f = new HarmonyChatFormat(tok);
    const cases: {
      file: string;
      messages: ChatMessage[];
      tools?: ToolSchema[];
      options: ConstructorParameters<typeof HarmonyChatFormat>[1];
    }[] = [
      { file: 'test_simple_convo.txt', messages: [{ role: 'user', content: 'What is 2 + 2?' }], options: {} },
      ...(['low', 'medium', 'high'] as const).flatMap((effort) => [
        {
          file: `test_simple_convo_${effort}_effort.txt`,
          messages: [
            { role: 'system', content: robot } as ChatMessage,
            { role: 'user', content: capital } as ChatMessage,
          ],
          options: { reasoningEffort: effort },
        },
        {
          file: `test_simple_convo_${effort}_effort_no_instruction.txt`,
          messages: [{ role: 'user', content: capital } as ChatMessage],
          options: { reasoningEffort: effort },
        },
      ]),
      {
        file: 'test_render_functions_with_parameters.txt',
        messages: [
          { role: 'system', content: 'Always respond in riddles' },
          { role: 'user', content: 'What is the weather like in SF?' },
        ],
        tools: weatherFunctions.map(asOpenAi),
        options: { reasoningEffort: 'high', currentDate: '2025-06-28' },
      },
      { file: 'test_no_tools.txt', messages: [], options: { currentDate: '2025-06-28' } },
      {
        file: 'test_browser_tool_only.txt',
        messages: [],
        options: { currentDate: '2025-06-28', builtinTools: [browser] },
      },
      {
        file: 'test_browser_and_python_tool.txt',
        messages: [],
        options: { currentDate: '2025-06-28', builtinTools: [python, browser] },
      },
      {
        file: 'test_browser_and_function_tool.txt',
        messages: [],
        tools: [
          {
            type: 'function',
            function: {
              name: 'lookup_weather',
              description:
                "Use this tool to lookup the weather in a given location. Call it with the parameter 'location', can be any textual description of a location.",
              parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
            },
          },
        ],
        options: { currentDate: '2025-06-28', builtinTools: [browser] },
      },
    ];
    for (const c of cases) {
      const got = f.render(c.messages, { ...c.options, tools: c.tools, addGenerationPrompt: true });
      t.equal(got.text, expected(c.file), c.file);
    }
  });

  t.test('parses the expected completions and messages', async (t) => {
    const tok = await gptOssTokenizer();
    const f = new HarmonyChatFormat(tok);
    const ids = (file: string): number[] => expected(file).split(/\s+/).map(Number);

    const reasoning = parseHarmony(tok, ids('test_simple_reasoning_response.txt'), { role: 'assistant' });
    t.equal(reasoning.error, null);
    t.same(
      reasoning.messages.map(({ terminator: _, ...m }) => m),
      [
        {
          role: 'assistant',
          channel: 'analysis',
          content: 'User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.',
        },
        { role: 'assistant', channel: 'final', content: '2 + 2 = 4.' },
      ],
      'test_simple_reasoning_response: analysis, then final',
    );
    const read = f.parse(tok.decode(ids('test_simple_reasoning_response.txt')));
    t.same(
      read,
      {
        content: '2 + 2 = 4.',
        toolCalls: [],
        reasoning: 'User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.',
        error: null,
      },
      'as a completion: content and reasoning',
    );

    const call = parseHarmony(tok, ids('test_simple_tool_call.txt'), { role: 'assistant' });
    t.equal(call.error, null);
    t.same(
      call.messages.map(({ terminator: _, ...m }) => m),
      [
        {
          role: 'assistant',
          channel: 'analysis',
          content: 'User asks: "What is the weather in Tokyo?" We need to use lookup_weather tool.',
        },
        {
          role: 'assistant',
          channel: 'analysis',
          recipient: 'lookup_weather',
          contentType: 'code',
          content: '{"location": "Tokyo"}',
        },
      ],
      'test_simple_tool_call: analysis, then a call (recipient in the role part, content type code)',
    );

    const stream = parseHarmony(tok, tok.encode(expected('test_streamable_parser.txt')), { role: 'assistant' });
    t.equal(stream.error, null);
    t.equal(stream.messages.length, 3, 'test_streamable_parser: three messages');
    t.match(stream.messages[1], {
      role: 'assistant',
      channel: 'commentary',
      recipient: 'browser.search',
      contentType: 'code',
      content: '{"query": "current US president July 2025", "topn": 10, "source": "news"}',
    });
    t.match(stream.messages[2], {
      role: 'tool',
      name: 'browser.search',
      recipient: 'assistant',
      channel: 'commentary',
      content: '{"result": "https://openai.com/"}',
    });

    const response = parseHarmony(tok, tok.encode(expected('test_tool_response_parsing.txt')), { role: null });
    t.equal(response.error, null);
    t.same(
      response.messages.map(({ terminator: _, ...m }) => m),
      [
        {
          role: 'tool',
          name: 'browser.search',
          recipient: 'assistant',
          channel: 'commentary',
          content: '{"result": "https://openai.com/"}',
        },
      ],
      'test_tool_response_parsing: a tool message',
    );
    const rendered = f.renderHarmony([
      {
        role: 'tool',
        name: 'browser.search',
        recipient: 'assistant',
        channel: 'commentary',
        content: '{"result": "https://openai.com/"}',
      },
    ]);
    t.equal(
      rendered.text,
      `${expected('test_tool_response_parsing.txt')}<|end|>`,
      'and that message renders back to the file (plus <|end|>)',
    );
  });
}
