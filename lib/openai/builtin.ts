/**
 * Loading the built-in policy for serving and evaluation: a checkpoint file, or a run folder
 * (its newest `.safetensors` checkpoint), with the chat template over the checkpoint's tokenizer.
 * @module
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

import { ChatTemplate } from '../model/chat-template.js';
import { TransformerPolicy } from '../model/transformer-policy.js';

/** The newest `.safetensors` file at `path` (a file, or a folder searched two levels deep). */
export function findCheckpointFile(path: string): string {
  let st;
  try {
    st = statSync(path);
  } catch {
    throw new Error(`no checkpoint at ${path}`);
  }
  if (st.isFile()) return path;
  const found: { file: string; mtime: number }[] = [];
  const walk = (dir: string, depth: number): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory() && depth > 0) walk(p, depth - 1);
      else if (e.isFile() && e.name.endsWith('.safetensors')) found.push({ file: p, mtime: statSync(p).mtimeMs });
    }
  };
  walk(path, 2);
  if (found.length === 0) throw new Error(`no .safetensors checkpoint in ${path}`);
  found.sort((a, b) => b.mtime - a.mtime || b.file.localeCompare(a.file));
  return found[0].file;
}

/** A loaded built-in policy and its chat template. */
export interface BuiltinPolicy {
  /** The policy (dispose it when done). */
  policy: TransformerPolicy;
  /** The chat template over its tokenizer. */
  template: ChatTemplate;
  /** The checkpoint file loaded. */
  checkpoint: string;
}

/** Loads a checkpoint (file or run folder); it must hold a tokenizer. */
export function loadBuiltinPolicy(path: string): BuiltinPolicy {
  const checkpoint = findCheckpointFile(path);
  const policy = TransformerPolicy.load(checkpoint);
  if (!policy.tokenizer) {
    policy.dispose();
    throw new Error(`the checkpoint ${checkpoint} has no tokenizer (the chat template needs one)`);
  }
  return { policy, template: new ChatTemplate(policy.tokenizer), checkpoint };
}
