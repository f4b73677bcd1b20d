/**
 * Loads the built-in policy named on the command line: a training run folder or one of its
 * checkpoint folders (then with the run's prompt format, environment, world and limits, so that
 * `eval` and `serve` use the policy exactly as it was trained), or a bare `.safetensors` file.
 * @module
 */
import { loadBuiltinPolicy } from '../openai/builtin.js';
import type { ChatTemplate } from '../model/chat-template.js';
import type { TransformerPolicy } from '../model/transformer-policy.js';
import { loadRunPolicy, resolveCheckpoint, type LoadedRunPolicy } from '../trainer/checkpoint.js';

/** A loaded built-in policy. */
export interface CliPolicy {
  /** The policy (dispose it when done). */
  policy: TransformerPolicy;
  /** The chat template over its tokenizer. */
  template: ChatTemplate;
  /** The checkpoint loaded (folder or file). */
  checkpoint: string;
  /** The training run it comes from, when it is a run or checkpoint folder. */
  run: LoadedRunPolicy | null;
}

function isRunPath(path: string): boolean {
  try {
    resolveCheckpoint(path);
    return true;
  } catch {
    return false;
  }
}

/** Loads `path`: a run folder (its newest checkpoint), a checkpoint folder, or a `.safetensors` file. */
export function loadCliPolicy(path: string): CliPolicy {
  if (isRunPath(path)) {
    const run = loadRunPolicy(path);
    return { policy: run.policy, template: run.template, checkpoint: run.checkpoint, run };
  }
  const b = loadBuiltinPolicy(path);
  return { policy: b.policy, template: b.template, checkpoint: b.checkpoint, run: null };
}
