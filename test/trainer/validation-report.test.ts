/**
 * Validation transcripts and the report's per-kind sections: which episodes are kept per kind,
 * the turn a limit cut off, the validation/step-<k>.jsonl files (round trip, bad lines, the
 * validations a report shows, resume clean-up), and the report: per-kind charts, readable
 * transcripts with the reward's reasons, everything HTML-escaped, the caps.
 */
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { ChatTemplate, trainChatTokenizer, type ChatMessage } from '../../lib/chat/index.js';
import type { EpisodeRecord, TaskEvaluation } from '../../lib/rollout/index.js';
import type { RewardInfo } from '../../lib/tau/index.js';
import { REPORT_TRANSCRIPT_CAPS, type MetricsRow } from '../../lib/trainer/index.js';
import { removeStaleTemporaries } from '../../lib/trainer/checkpoint.js';
import { kindGains, renderReport, validationKinds } from '../../lib/trainer/report.js';
import {
  cutTurnText,
  listValidationSteps,
  readReportValidations,
  readValidationLog,
  removeValidationLogsAfter,
  selectValidationTranscripts,
  writeValidationLog,
  type ValidationTranscript,
} from '../../lib/trainer/validation-log.js';

const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-valrep-'));

function episode(
  groupIndex: number,
  sampleIndex: number,
  taskId: string,
  extra: Partial<EpisodeRecord> = {},
): EpisodeRecord {
  return {
    uid: `u${groupIndex}`,
    taskId,
    groupIndex,
    sampleIndex,
    seed: 100 * groupIndex + sampleIndex,
    promptIds: [],
    responseIds: [],
    responseMask: [],
    logProbs: [],
    hasLogProbs: false,
    reward: 1,
    numTurns: 2,
    termination: 'user_stop',
    truncated: false,
    aborted: false,
    error: null,
    parseErrors: 0,
    tokenization: 'disabled',
    messages: [
      { role: 'system', content: 'the policy' },
      { role: 'user', content: `help with ${taskId}` },
    ],
    tools: [],
    rewardInfo: null,
    ms: 1,
    ...extra,
  };
}

t.test(
  'a few episodes per kind: the first tasks of each kind, first trial; more trials when a kind has few tasks',
  async (t) => {
    const kinds = ['a', 'b', 'a', null, 'a', 'b'];
    const perTask = kinds.map((kind, g): TaskEvaluation => ({
      taskId: `t${g}`,
      kind,
      rewards: [1, 1],
      successes: 2,
      trials: 2,
      terminations: ['user_stop', 'user_stop'],
    }));
    const episodes = kinds.flatMap((_, g) =>
      [0, 1].map((i) =>
        episode(g, i, `t${g}`, g === 4 && i === 0 ? { aborted: true, reward: Number.NaN, error: 'boom' } : {}),
      ),
    );
    const picked = selectValidationTranscripts({ episodes, perTask }, 7, { perKind: 2 });
    t.same(
      picked.map((p) => [p.kind, p.task_id, p.trial]),
      [
        ['a', 't0', 0],
        ['a', 't2', 0],
        ['b', 't1', 0],
        ['b', 't5', 0],
        [null, 't3', 0],
        [null, 't3', 1],
      ],
    );
    t.ok(
      picked.every((p) => p.step === 7 && p.messages.every((m) => m.role !== 'system')),
      'step set, system message left out',
    );
    t.equal(picked[0].cut_turn, null, 'no format: no cut turn');
    const three = selectValidationTranscripts({ episodes, perTask }, 7);
    t.same(
      three.filter((p) => p.kind === 'a').map((p) => [p.task_id, p.trial]),
      [
        ['t0', 0],
        ['t2', 0],
        ['t4', 0],
      ],
      'three per kind by default',
    );
    const aborted = three.find((p) => p.task_id === 't4');
    t.equal(aborted?.reward, 0, 'an aborted episode scores 0');
    t.equal(aborted?.error, 'boom');
    t.throws(() => selectValidationTranscripts({ episodes, perTask }, 0, { perKind: -1 }), RangeError);
  },
);

t.test('the turn a limit cut off is decoded; a finished turn is not', async (t) => {
  const tpl = new ChatTemplate(trainChatTokenizer(['hello there get_order_details'], { vocabSize: 300 }));
  const obs = tpl.tokenizer.encode('the user says hi');
  const cut = tpl.tokenizer.encode('I will look up get_order');
  const e = {
    termination: 'turn_token_limit',
    responseIds: [...obs, ...cut],
    responseMask: [...obs.map(() => 0), ...cut.map(() => 1)],
  };
  t.equal(cutTurnText(e, tpl), 'I will look up get_order');
  t.equal(cutTurnText({ ...e, termination: 'context_limit' }, tpl), 'I will look up get_order');
  t.equal(cutTurnText({ ...e, termination: 'user_stop' }, tpl), null, 'not cut');
  const done = [...cut, tpl.stopTokens[0]];
  t.equal(
    cutTurnText(
      {
        termination: 'context_limit',
        responseIds: [...obs, ...done],
        responseMask: [...obs.map(() => 0), ...done.map(() => 1)],
      },
      tpl,
    ),
    null,
    'a complete turn is in the messages',
  );
  t.equal(
    cutTurnText({ termination: 'turn_token_limit', responseIds: obs, responseMask: obs.map(() => 0) }, tpl),
    null,
  );
  const picked = selectValidationTranscripts(
    {
      episodes: [episode(0, 0, 't0', { ...e, termination: 'turn_token_limit' })],
      perTask: [{ taskId: 't0', kind: 'a', rewards: [0], successes: 0, trials: 1, terminations: [] }],
    },
    1,
    { format: tpl },
  );
  t.equal(picked[0].cut_turn, 'I will look up get_order');
});

function transcript(over: Partial<ValidationTranscript> = {}): ValidationTranscript {
  return {
    step: 0,
    kind: 'a',
    task_id: 't0',
    trial: 0,
    seed: 1,
    reward: 1,
    termination: 'user_stop',
    aborted: false,
    truncated: false,
    num_turns: 1,
    error: null,
    messages: [{ role: 'user', content: 'hi' }],
    cut_turn: null,
    reward_info: null,
    ...over,
  };
}

t.test('validation files: round trip, bad lines named, the validations a report shows, resume clean-up', async (t) => {
  const out = join(tmp, 'run');
  for (const s of [0, 2, 4, 6, 8])
    writeValidationLog(out, s, [transcript({ step: s, task_id: `t${s}` }), transcript({ step: s, kind: null })]);
  t.same(listValidationSteps(out), [0, 2, 4, 6, 8]);
  const log = readValidationLog(out, 4);
  t.same(log, { step: 4, transcripts: [transcript({ step: 4, task_id: 't4' }), transcript({ step: 4, kind: null })] });
  const shown = readReportValidations(out, 3);
  t.same(
    shown.logs.map((l) => l.step),
    [0, 6, 8],
    'the first and the newest',
  );
  t.equal(shown.omitted, 2);
  t.equal(readReportValidations(out, 8).omitted, 0);
  t.throws(() => readReportValidations(out, 0), RangeError);
  removeValidationLogsAfter(out, 4);
  t.same(listValidationSteps(out), [0, 2, 4]);
  writeFileSync(join(out, 'validation', 'step-4.jsonl.tmp-4242'), 'partial');
  t.same(
    removeStaleTemporaries(out),
    [join('validation', 'step-4.jsonl.tmp-4242')],
    'an interrupted write is a stale temporary',
  );
  t.same(readdirSync(join(out, 'validation')).sort(), ['step-0.jsonl', 'step-2.jsonl', 'step-4.jsonl']);
  writeFileSync(join(out, 'validation', 'step-2.jsonl'), `${JSON.stringify(transcript())}\n{oops\n`);
  t.throws(() => readValidationLog(out, 2), { name: 'RunFolderError', message: /step-2\.jsonl:2: not a JSON line/ });
  writeFileSync(join(out, 'validation', 'step-2.jsonl'), '{"step":2}\n');
  t.throws(() => readValidationLog(out, 2), {
    name: 'RunFolderError',
    message: /step-2\.jsonl:1: not a validation transcript/,
  });
  removeValidationLogsAfter(out, -1);
  t.same(listValidationSteps(out), []);
  mkdirSync(join(tmp, 'empty'));
  t.same(readReportValidations(join(tmp, 'empty'), 8), { logs: [], omitted: 0 });
});

const missed: RewardInfo = {
  reward: 0,
  rewardBasis: ['DB', 'ACTION'],
  rewardBreakdown: { DB: 0, ACTION: 0 },
  notEvaluated: [],
  dbCheck: { dbMatch: false, dbReward: 0, goldHash: 'g', predictedHash: 'p' },
  envAssertions: [],
  actionChecks: [
    {
      action: { action_id: 'x', name: 'cancel_pending_order', arguments: { order_id: '#W<1>' } },
      actionMatch: false,
      actionReward: 0,
    },
  ],
  communicateChecks: [{ info: 'a&b', met: false, justification: '' }],
  nlAssertions: null,
  info: {},
};

t.test('the report: per-kind charts, readable transcripts with the reward and why, all escaped', async (t) => {
  const rows: MetricsRow[] = [0, 5].map((step) => ({
    step,
    phase: 'val',
    'val-core/tau-retail/reward/mean@1': step / 10,
    'val-core/tau-retail/cancel/reward/mean@1': step / 20,
    'val-aux/tau-retail/cancel/episodes': 8,
    'val-core/tau-retail/refuse/reward/mean@1': 0.25,
  }));
  rows.push({ step: 5, phase: 'grpo', 'critic/score/mean': 0.4 });
  t.same(validationKinds(rows, 'tau-retail'), ['cancel', 'refuse'], 'the kinds, not the overall metric');
  const mid: MetricsRow = {
    step: 3,
    phase: 'val',
    'val-core/tau-retail/cancel/reward/mean@1': 0.5,
    'val-core/tau-retail/refuse/reward/mean@1': 0.125,
  };
  t.same(
    kindGains([rows[0], mid, ...rows.slice(1)], 'tau-retail'),
    [
      { kind: 'cancel', first: 0, best: 0.5, last: 0.25 },
      { kind: 'refuse', first: 0.25, best: 0.25, last: 0.25 },
    ],
    'each kind: after SFT, best and last validation',
  );
  const evil = '<script>alert("x")</script>';
  const messages: ChatMessage[] = [
    { role: 'assistant', content: 'Hi! How can I help you today?' },
    { role: 'user', content: `Cancel ${evil} please` },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: 'c0',
          type: 'function',
          function: { name: 'get_order_details', arguments: '{"order_id":"#W<img src=x onerror=alert(1)>"}' },
        },
      ],
    },
    { role: 'tool', content: '{"status":"pending & <b>paid</b>"}', tool_call_id: 'c0', name: 'get_order_details' },
    { role: 'assistant', content: "It's 'done' & cancelled." },
  ];
  const logs = [0, 5].map((step) => ({
    step,
    transcripts: [
      transcript({
        step,
        kind: 'cancel',
        task_id: 'gen_<3>',
        reward: 0,
        termination: 'user_give_up',
        messages,
        reward_info: missed,
      }),
      transcript({
        step,
        kind: 'refuse',
        task_id: 'gen_4',
        cut_turn: 'I will <look>',
        termination: 'turn_token_limit',
        reward: 0,
      }),
    ],
  }));
  const html = renderReport(rows, { title: 'run', source: 'tau-retail', validations: logs, validationsOmitted: 3 });
  t.match(html, /<title>cancel: validation mean@1<\/title>/, 'a chart per kind');
  t.match(html, /<title>refuse: validation mean@1<\/title>/);
  t.match(
    html,
    /<h2>Validation by task kind<\/h2><table><tr><th>kind<\/th><th>after SFT<\/th><th>last<\/th><th>gain<\/th><th>best<\/th><\/tr><tr><th>cancel<\/th><td>0\.000<\/td><td>0\.250<\/td><td>\+0\.250<\/td><td>0\.250<\/td><\/tr>/,
    'the before/after table per kind',
  );
  t.match(html, /<h2>Validation conversations<\/h2>/);
  t.notOk(html.includes('<script>'), 'no raw script tag');
  t.notOk(html.includes('<img'), 'no raw img tag');
  t.notOk(html.includes('<b>paid'), 'tool results escaped');
  t.match(html, /Cancel &lt;script&gt;alert\(&quot;x&quot;\)&lt;\/script&gt; please/, 'the user message, escaped');
  t.match(
    html,
    /<span class="who">tool call<\/span><div class="txt"><b>get_order_details<\/b>\(\{&quot;order_id&quot;:&quot;#W&lt;img src=x onerror=alert\(1\)&gt;&quot;\}\)/,
    'the tool call with its arguments',
  );
  t.match(
    html,
    /<span class="who">tool result \(get_order_details\)<\/span><div class="txt">\{&quot;status&quot;:&quot;pending &amp; &lt;b&gt;paid&lt;\/b&gt;&quot;\}/,
    'the tool result',
  );
  t.match(html, /It&#39;s &#39;done&#39; &amp; cancelled\./);
  t.match(
    html,
    /<span class="rw bad">reward 0<\/span> · gen_&lt;3&gt; \(trial 0\) · user_give_up/,
    'the reward in the summary line',
  );
  t.match(html, /<li class="note">reward 0 = DB 0 × ACTION 0 \(basis DB, ACTION\)<\/li>/, 'why: the product');
  t.match(
    html,
    /<li class="bad">gold action missed: cancel_pending_order\(\{&quot;order_id&quot;:&quot;#W&lt;1&gt;&quot;\}\)<\/li>/,
    'why: the missed gold action',
  );
  t.match(html, /fact not communicated: &#39;a&amp;b&#39; \(diagnostic, not in the basis\)/, 'why: the fact');
  t.match(
    html,
    /assistant \(cut off\)<\/span><div class="txt">I will &lt;look&gt;<br><i>— cut off by turn_token_limit/,
  );
  t.match(html, /<h4>cancel — mean@1 0\.250 over 8 episodes<\/h4>/, 'the kind with its mean@1 at that validation');
  t.equal((html.match(/<details class="val"/g) ?? []).length, 2, 'one collapsible block per validation');
  t.match(html, /<details class="val" open><summary>step 5 — mean@1 0\.500<\/summary>/, 'the newest open');
  t.match(html, /<details class="val"><summary>step 0 — mean@1 0\.000<\/summary>/);
  t.match(html, /3 other validations not shown/);
  t.notMatch(
    renderReport(rows, { title: 'run', source: 'tau-retail' }),
    /Validation conversations/,
    'no transcripts without validations',
  );
});

t.test('the caps: per kind, message length, messages per transcript, total size', async (t) => {
  const caps = { ...REPORT_TRANSCRIPT_CAPS, perKind: 2, messages: 8, messageChars: 50 };
  const long = 'x'.repeat(5000);
  const many: ChatMessage[] = Array.from(
    { length: 30 },
    (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i}` }) as ChatMessage,
  );
  const log = {
    step: 1,
    transcripts: [
      transcript({ task_id: 'A1', messages: [{ role: 'user', content: long }] }),
      transcript({ task_id: 'A2', messages: many }),
      transcript({ task_id: 'A3' }),
    ],
  };
  const html = renderReport([], { title: 'r', source: 'tau-retail', validations: [log], transcriptCaps: caps });
  t.match(html, new RegExp(`x{50}… \\(4950 more characters\\)`), 'a long message clipped, saying how much');
  t.notOk(html.includes('x'.repeat(51)));
  t.match(html, /message 5<\/div>/, 'the first three quarters');
  t.notOk(html.includes('message 6<'), 'the middle elided');
  t.match(html, /… 22 messages elided …/);
  t.match(html, /message 28<\/div>/);
  t.match(html, /message 29<\/div>/, 'and the last quarter');
  t.notOk(html.includes('A3'), `at most ${caps.perKind} per kind`);
  const small = renderReport([], {
    title: 'r',
    source: 'tau-retail',
    validations: [log],
    transcriptCaps: { ...caps, totalChars: 800 },
  });
  t.match(small, /more transcripts? of this validation in validation\/step-1\.jsonl \(report size cap\)/);

  // a worst case under the default caps: 8 validations × 11 kinds × 3 transcripts of 60 long messages
  const big = (step: number) => ({
    step,
    transcripts: Array.from({ length: 33 }, (_, i) =>
      transcript({
        step,
        kind: `k${i % 11}`,
        task_id: `t${i}`,
        messages: Array.from({ length: 60 }, () => ({ role: 'user', content: long }) as ChatMessage),
      }),
    ),
  });
  const page = renderReport([], { title: 'r', source: 'tau-retail', validations: [0, 1, 2, 3, 4, 5, 6, 7].map(big) });
  t.ok(
    page.length < REPORT_TRANSCRIPT_CAPS.totalChars + 50_000,
    `the page stays near the cap (${page.length} characters)`,
  );
});
