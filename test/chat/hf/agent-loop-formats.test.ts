// A tau retail episode through the agent loop with Qwen3's Jinja format and with harmony: a
// scripted token policy writes a tool call, a malformed call and a message to the user. The
// sampled tokens stay verbatim (mask 1), every appended token is the format's rendering of the
// new messages (mask 0), the malformed call comes back as the environment's Error tool message.
import t, { type Test } from 'tap';

import type { ChatFormat } from '../../../lib/chat/chat-format.js';
import type { ChatMessage } from '../../../lib/chat/messages.js';
import { HarmonyChatFormat } from '../../../lib/chat/hf/harmony-format.js';
import { JinjaChatFormat } from '../../../lib/chat/hf/jinja-format.js';
import type { HfTokenizer } from '../../../lib/chat/hf/tokenizer.js';
import {
  AgentLoop,
  type TokenPolicy,
  type SampleOptions,
  type TokenSampleResult,
  type TokenSession,
} from '../../../lib/rollout/index.js';
import { envFactory, retailWorld } from '../../rollout/fixtures/world.js';
import { gptOssTokenizer, qwen3Tokenizer } from './fixtures/tokenizers.js';

/** Writes the given turns in order, whatever the context; keeps each session's context. */
class ScriptedPolicy implements TokenPolicy {
  readonly contexts: number[][] = [];
  constructor(private readonly turns: number[][]) {}
  createSession(): TokenSession {
    const ctx: number[] = [];
    this.contexts.push(ctx);
    let k = 0;
    const turns = this.turns;
    return {
      append: (tokens: ArrayLike<number>) => void ctx.push(...Array.from(tokens)),
      get length() {
        return ctx.length;
      },
      dispose: () => undefined,
      async sample(params: SampleOptions): Promise<TokenSampleResult> {
        const tokens = turns[k++ % turns.length].slice(0, params.maxTokens);
        ctx.push(...tokens);
        return { tokens, logProbs: tokens.map(() => -0.5), finishReason: 'stop' };
      },
    };
  }
}

/** Runs of equal mask values as [start, end, value]. */
function runs(mask: readonly number[]): [number, number, number][] {
  const out: [number, number, number][] = [];
  mask.forEach((v, i) => {
    const last = out[out.length - 1];
    if (last && last[2] === v) last[1] = i + 1;
    else out.push([i, i + 1, v]);
  });
  return out;
}

const world = retailWorld();

async function episode(
  t: Test,
  tok: HfTokenizer,
  format: ChatFormat,
  completions: string[],
  firstAppend: RegExp,
): Promise<void> {
  const turns = completions.map((c) => tok.encode(c));
  const policy = new ScriptedPolicy(turns);
  const loop = new AgentLoop({
    policy,
    chat: format,
    env: envFactory(world),
    limits: { maxTurns: 3 },
    concurrency: 1,
  });
  t.teardown(() => loop.dispose());
  const [rec] = await loop.rollout({ taskIds: [world.taskIds[0]], seed: 3 });
  t.equal(rec.aborted, false, `not aborted (${rec.error ?? ''})`);
  t.equal(rec.termination, 'max_turns');
  t.equal(rec.parseErrors, 1, 'one malformed turn');
  t.same(policy.contexts[0], [...rec.promptIds, ...rec.responseIds], "the policy's context is the record's tokens");
  const parts = runs(rec.responseMask);
  const sampled = parts.filter((p) => p[2] === 1).map(([s, e]) => rec.responseIds.slice(s, e));
  t.same(sampled, turns, 'sampled tokens verbatim, mask 1');
  const appended = parts.filter((p) => p[2] === 0).map(([s, e]) => rec.responseIds.slice(s, e));
  t.equal(appended.length, 2, 'two environment turns appended');
  t.match(tok.decode(appended[0]), firstAppend);

  const msgs = rec.messages as ChatMessage[];
  // The first observation holds the greeting (an assistant message); the model's turns are the last three.
  const assistants = msgs
    .map((m, i) => [m, i] as const)
    .filter(([m]) => m.role === 'assistant')
    .slice(-3);
  t.equal(assistants[0][1] > 1, true);
  const [first, broken] = assistants;
  t.match(first[0], { tool_calls: [{ function: { name: 'find_user_id_by_email' } }] }, 'the call is parsed');
  t.equal(
    (broken[0] as { tool_calls?: unknown }).tool_calls,
    undefined,
    'the malformed turn is recorded as its raw text',
  );
  t.match(broken[0].content, /<tool_call>/);
  const reply = msgs[broken[1] + 1];
  t.equal(reply.role, 'tool');
  t.match(reply.content, /^Error: could not parse a <tool_call> block as JSON/, "the environment's Error tool message");
  // What was appended after each sampled turn is the format's rendering of the new messages.
  t.same(
    appended[0],
    format.renderAppend(msgs.slice(0, first[1] + 1), msgs.slice(first[1] + 1, broken[1]), { tools: rec.tools }),
  );
  t.same(
    appended[1],
    format.renderAppend(msgs.slice(0, broken[1] + 1), msgs.slice(broken[1] + 1, assistants[2][1]), {
      tools: rec.tools,
    }),
  );
  t.ok(tok.decode(appended[1]).includes('Error: could not parse'), 'the error reaches the model');
}

t.test('Qwen3 (Jinja template)', async (t) => {
  const tok = await qwen3Tokenizer();
  const format = new JinjaChatFormat(tok, tok.config.chat_template as string);
  await episode(
    t,
    tok,
    format,
    [
      '<think>\nFind the user.\n</think>\n\n<tool_call>\n{"name": "find_user_id_by_email", "arguments": {"email": "nobody@example.com"}}\n</tool_call><|im_end|>',
      '<think>\nNow the order.\n</think>\n\n<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": }\n</tool_call><|im_end|>',
      '<think>\nAsk.\n</think>\n\nCould you give me your order id?<|im_end|>',
    ],
    /^\n<\|im_start\|>user\n<tool_response>\n[\s\S]*\n<\/tool_response><\|im_end\|>\n<\|im_start\|>assistant\n$/,
  );
});

t.test('gpt-oss (harmony)', async (t) => {
  const tok = await gptOssTokenizer();
  const format = new HarmonyChatFormat(tok);
  await episode(
    t,
    tok,
    format,
    [
      '<|channel|>analysis<|message|>Find the user.<|end|><|start|>assistant<|channel|>commentary to=functions.find_user_id_by_email <|constrain|>json<|message|>{"email": "nobody@example.com"}<|call|>',
      '<|channel|>commentary to=functions.get_order_details <|constrain|>json<|message|>{"order_id": <|call|>',
      '<|channel|>final<|message|>Could you give me your order id?<|return|>',
    ],
    /^<\|start\|>functions\.find_user_id_by_email to=assistant<\|channel\|>commentary<\|message\|>[\s\S]*<\|end\|><\|start\|>assistant$/,
  );
});
