/**
 * The safetensors files of a Hugging Face model folder: `model.safetensors`, or the shards that
 * `model.safetensors.index.json` lists in its `weight_map` (tensor name → shard file). Every
 * listed shard must exist, hold the tensors mapped to it and no others; a tensor may live in one
 * shard only. Files are opened (headers read and validated) but no tensor data is read.
 * @module
 */
import { access, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';

import { SafetensorsError } from '../safetensors.js';
import { SafetensorsFile } from '../safetensors-stream.js';
import { HfTensorError } from './errors.js';

/** File names of a Hugging Face checkpoint's weights. */
export const SINGLE_FILE = 'model.safetensors';
/** The shard index. */
export const INDEX_FILE = 'model.safetensors.index.json';

const exists = async (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

/** The open weight files of a folder, by tensor name. Call {@link CheckpointFiles.dispose}. */
export class CheckpointFiles {
  private constructor(
    private readonly files: SafetensorsFile[],
    private readonly byTensor: Map<string, SafetensorsFile>,
  ) {}

  /**
   * Opens the weights of `dir`. Fails with an {@link HfTensorError} naming the file or tensor
   * (no weights, a bad index, a missing shard, a tensor missing from its shard or not listed)
   * and leaves no file open.
   */
  static async open(dir: string): Promise<CheckpointFiles> {
    const files: SafetensorsFile[] = [];
    const byTensor = new Map<string, SafetensorsFile>();
    const openFile = async (name: string): Promise<SafetensorsFile> => {
      try {
        const f = await SafetensorsFile.open(join(dir, name));
        files.push(f);
        return f;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT')
          throw new HfTensorError(name, `the weight file is missing from ${dir}`);
        if (e instanceof SafetensorsError) throw new HfTensorError(name, e.message);
        throw e;
      }
    };
    try {
      if (await exists(join(dir, INDEX_FILE))) {
        const weightMap = await readIndex(dir);
        const shards = new Map<string, SafetensorsFile>();
        for (const shard of new Set(weightMap.values())) shards.set(shard, await openFile(shard));
        for (const [tensor, shard] of weightMap) {
          const f = shards.get(shard)!;
          if (!f.entries.has(tensor))
            throw new HfTensorError(tensor, `${INDEX_FILE} maps it to ${shard}, which does not hold it`);
          byTensor.set(tensor, f);
        }
        for (const [shard, f] of shards) {
          for (const tensor of f.entries.keys()) {
            if (weightMap.get(tensor) !== shard)
              throw new HfTensorError(
                tensor,
                `is in ${shard} but ${INDEX_FILE} ${weightMap.has(tensor) ? `maps it to ${weightMap.get(tensor)}` : 'does not list it'}`,
              );
          }
        }
      } else if (await exists(join(dir, SINGLE_FILE))) {
        const f = await openFile(SINGLE_FILE);
        for (const tensor of f.entries.keys()) byTensor.set(tensor, f);
      } else {
        throw new HfTensorError(SINGLE_FILE, `${dir} has neither ${SINGLE_FILE} nor ${INDEX_FILE}`);
      }
      return new CheckpointFiles(files, byTensor);
    } catch (e) {
      await Promise.all(files.map((f) => f.dispose()));
      throw e;
    }
  }

  /** Names of all tensors. */
  names(): IterableIterator<string> {
    return this.byTensor.keys();
  }

  /** True when the checkpoint has `name`. */
  has(name: string): boolean {
    return this.byTensor.has(name);
  }

  /** The file holding `name`. */
  file(name: string): SafetensorsFile {
    const f = this.byTensor.get(name);
    if (f === undefined) throw new HfTensorError(name, 'is missing from the checkpoint');
    return f;
  }

  /** Closes every file (idempotent). */
  async dispose(): Promise<void> {
    await Promise.all(this.files.map((f) => f.dispose()));
  }

  /** {@link dispose} (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose();
  }
}

/** The index's weight_map, validated (file names are plain names inside the folder). */
async function readIndex(dir: string): Promise<Map<string, string>> {
  let json: unknown;
  try {
    json = JSON.parse(await readFile(join(dir, INDEX_FILE), 'utf8'));
  } catch (e) {
    throw new HfTensorError(INDEX_FILE, `is not valid JSON: ${(e as Error).message}`);
  }
  const map = (json as { weight_map?: unknown } | null)?.weight_map;
  if (typeof map !== 'object' || map === null || Array.isArray(map))
    throw new HfTensorError(INDEX_FILE, 'has no weight_map object');
  const out = new Map<string, string>();
  for (const [tensor, file] of Object.entries(map)) {
    if (typeof file !== 'string' || file.length === 0 || basename(file) !== file || file === '.' || file === '..') {
      throw new HfTensorError(
        tensor,
        `${INDEX_FILE} maps it to ${JSON.stringify(file)}, not a file name in the folder`,
      );
    }
    out.set(tensor, file);
  }
  if (out.size === 0) throw new HfTensorError(INDEX_FILE, 'weight_map is empty');
  return out;
}
