/**
 * From episode records to a VERL-layout {@link DataProto}, and the rollout metrics.
 * @module
 */
import { DataProto } from './data-proto.js';
import type { EpisodeRecord } from './episode-record.js';

/** Options of {@link episodesToDataProto}. */
export interface EpisodesToDataProtoOptions {
  /** The padding token id (the template's `<|pad|>`). */
  padTokenId: number;
  /** Keep aborted episodes (default false: dropped, but counted in the metrics). */
  keepAborted?: boolean;
  /** Wall time of the generation in seconds (reported as `timing_s/gen`). */
  timingS?: number;
  /** More meta entries. */
  meta?: Record<string, unknown>;
}

function stats(values: readonly number[], name: string, out: Record<string, number>): void {
  if (values.length === 0) return;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    sum += v;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  out[`${name}/mean`] = sum / values.length;
  out[`${name}/max`] = max;
  out[`${name}/min`] = min;
}

/**
 * Rollout metrics over all records (aborted ones included in the counts): `rollout/episodes`,
 * `rollout/truncated`, `rollout/aborted`, `rollout/policy_errors`, `rollout/user_errors`,
 * `rollout/env_errors`, `rollout/parse_errors` (turns), `rollout/tokenization_mismatches`,
 * `rollout/termination/<reason>` counts, `response/aborted_ratio`, and over the kept
 * episodes `rollout/reward/{mean,max,min}`, `response_length/{mean,max,min,clip_ratio}`
 * (clip ratio: the fraction truncated by a token limit), `prompt_length/*`, `num_turns/*`,
 * `perf/total_num_tokens`, `timing_s/gen`.
 */
export function rolloutMetrics(
  records: readonly EpisodeRecord[],
  kept: readonly EpisodeRecord[],
  timingS?: number,
): Record<string, number> {
  const m: Record<string, number> = {};
  const count = (pred: (r: EpisodeRecord) => boolean): number => records.reduce((s, r) => s + (pred(r) ? 1 : 0), 0);
  m['rollout/episodes'] = records.length;
  m['rollout/truncated'] = count((r) => r.truncated);
  m['rollout/aborted'] = count((r) => r.aborted);
  m['rollout/policy_errors'] = count((r) => r.termination === 'policy_error');
  m['rollout/user_errors'] = count((r) => r.termination === 'user_error');
  m['rollout/env_errors'] = count((r) => r.termination === 'env_error');
  m['rollout/parse_errors'] = records.reduce((s, r) => s + r.parseErrors, 0);
  m['rollout/tokenization_mismatches'] = count((r) => r.tokenization === 'mismatch');
  for (const r of records)
    m[`rollout/termination/${r.termination}`] = (m[`rollout/termination/${r.termination}`] ?? 0) + 1;
  m['response/aborted_ratio'] = records.length > 0 ? m['rollout/aborted'] / records.length : 0;
  stats(
    kept.map((r) => r.reward),
    'rollout/reward',
    m,
  );
  stats(
    kept.map((r) => r.responseIds.length),
    'response_length',
    m,
  );
  if (kept.length > 0)
    m['response_length/clip_ratio'] =
      kept.filter((r) => r.termination === 'turn_token_limit' || r.termination === 'context_limit').length /
      kept.length;
  stats(
    kept.map((r) => r.promptIds.length),
    'prompt_length',
    m,
  );
  stats(
    kept.map((r) => r.numTurns),
    'num_turns',
    m,
  );
  m['perf/total_num_tokens'] = kept.reduce((s, r) => s + r.promptIds.length + r.responseIds.length, 0);
  if (timingS !== undefined) m['timing_s/gen'] = timingS;
  return m;
}

/**
 * The batch of a rollout, in VERL's layout (B rows, P = longest prompt, R = longest response):
 *
 * | column | dtype, row shape | content |
 * | --- | --- | --- |
 * | `prompts` | int32 [P] | prompt tokens, left-padded with `padTokenId` |
 * | `responses` | int32 [R] | response tokens, right-padded |
 * | `input_ids` | int32 [P+R] | `prompts ‖ responses` |
 * | `attention_mask` | int32 [P+R] | 1 on real tokens (prompt, model and environment tokens) |
 * | `position_ids` | int32 [P+R] | 0, 1, … over the real tokens (0 on padding) |
 * | `response_mask` | float32 [R] | 1 exactly on the model's sampled tokens |
 * | `rollout_log_probs` | float32 [R] | the policy's log-probs of its tokens (0 elsewhere) |
 * | `token_level_scores` | float32 [R] | the reward on the last model token, 0 elsewhere |
 * | `rewards` | float32 [] | the episode's reward |
 * | `num_turns` | int32 [] | assistant turns |
 *
 * Non-tensor columns: `uid`, `task_id`, `sample_index`, `seed`, `termination_reason`,
 * `truncated`, `aborted`, `error`, `parse_errors`, `tokenization_check`, `messages` (the
 * conversation in OpenAI chat format, for export), `tools`, `reward_info`. Meta:
 * `metrics` ({@link rolloutMetrics}), `pad_token_id`, `has_rollout_log_probs` (every kept
 * episode's turns came with log-probs). Aborted episodes are dropped unless `keepAborted`.
 */
export function episodesToDataProto(records: readonly EpisodeRecord[], options: EpisodesToDataProtoOptions): DataProto {
  const pad = options.padTokenId;
  if (!Number.isInteger(pad)) throw new RangeError(`padTokenId must be an integer, got ${String(pad)}`);
  const kept = options.keepAborted ? records.slice() : records.filter((r) => !r.aborted);
  const B = kept.length;
  let P = 0;
  let R = 0;
  for (const r of kept) {
    P = Math.max(P, r.promptIds.length);
    R = Math.max(R, r.responseIds.length);
  }
  const L = P + R;
  const prompts = new Int32Array(B * P).fill(pad);
  const responses = new Int32Array(B * R).fill(pad);
  const inputIds = new Int32Array(B * L).fill(pad);
  const attention = new Int32Array(B * L);
  const positions = new Int32Array(B * L);
  const responseMask = new Float32Array(B * R);
  const logProbs = new Float32Array(B * R);
  const scores = new Float32Array(B * R);
  const rewards = new Float32Array(B);
  const turns = new Int32Array(B);
  kept.forEach((r, b) => {
    const p = r.promptIds.length;
    const n = r.responseIds.length;
    prompts.set(r.promptIds, b * P + (P - p));
    responses.set(r.responseIds, b * R);
    inputIds.set(r.promptIds, b * L + (P - p));
    inputIds.set(r.responseIds, b * L + P);
    attention.fill(1, b * L + (P - p), b * L + P + n);
    for (let i = 0; i < p; i++) positions[b * L + (P - p) + i] = i;
    for (let j = 0; j < n; j++) positions[b * L + P + j] = p + j;
    let lastModel = -1;
    for (let j = 0; j < n; j++) {
      responseMask[b * R + j] = r.responseMask[j];
      logProbs[b * R + j] = r.logProbs[j];
      if (r.responseMask[j] === 1) lastModel = j;
    }
    if (lastModel >= 0) scores[b * R + lastModel] = r.reward;
    rewards[b] = r.reward;
    turns[b] = r.numTurns;
  });
  return DataProto.create({
    batchSize: B,
    tensors: {
      prompts: { data: prompts, shape: [P] },
      responses: { data: responses, shape: [R] },
      input_ids: { data: inputIds, shape: [L] },
      attention_mask: { data: attention, shape: [L] },
      position_ids: { data: positions, shape: [L] },
      response_mask: { data: responseMask, shape: [R] },
      rollout_log_probs: { data: logProbs, shape: [R] },
      token_level_scores: { data: scores, shape: [R] },
      rewards: { data: rewards, shape: [] },
      num_turns: { data: turns, shape: [] },
    },
    nonTensors: {
      uid: kept.map((r) => r.uid),
      task_id: kept.map((r) => r.taskId),
      sample_index: kept.map((r) => r.sampleIndex),
      seed: kept.map((r) => r.seed),
      termination_reason: kept.map((r) => r.termination),
      truncated: kept.map((r) => r.truncated),
      aborted: kept.map((r) => r.aborted),
      error: kept.map((r) => r.error),
      parse_errors: kept.map((r) => r.parseErrors),
      tokenization_check: kept.map((r) => r.tokenization),
      messages: kept.map((r) => r.messages),
      tools: kept.map((r) => r.tools),
      reward_info: kept.map((r) => r.rewardInfo),
    },
    meta: {
      ...(options.meta ?? {}),
      metrics: rolloutMetrics(records, kept, options.timingS),
      pad_token_id: pad,
      has_rollout_log_probs: kept.length > 0 && kept.every((r) => r.hasLogProbs || r.numTurns === 0),
    },
  });
}

/** Integer group ids (0, 1, … in order of first appearance) for a list of uids (what the GRPO advantage kernels take). */
export function groupIds(uids: readonly unknown[]): Int32Array {
  const ids = new Map<unknown, number>();
  const out = new Int32Array(uids.length);
  uids.forEach((u, i) => {
    let g = ids.get(u);
    if (g === undefined) {
      g = ids.size;
      ids.set(u, g);
    }
    out[i] = g;
  });
  return out;
}
