/**
 * Reading one of our parameters from a checkpoint: each source tensor is read from disk (expert
 * tensors one expert at a time), its elements converted to the target dtype (float32 values or
 * bfloat16 bits, or MXFP4 experts kept packed: their blocks and scales rows moved as they are),
 * then moved into our layout (see tensor-plan.ts).
 * @module
 */
import type { SafetensorsArray } from '../safetensors.js';
import { HfTensorError } from './errors.js';
import { type ElementArray, deinterleaveMap, permuteRowsInto, transposeInto } from './layout.js';
import { decodeMxfp4Rows } from './mxfp4.js';
import { bf16ToF32, f16ToBf16, f16ToF32, f32ToBf16 } from './numeric.js';
import type { CheckpointFiles } from './shards.js';
import type { HfSource, PlannedTensor } from './tensor-plan.js';
import type { Mxfp4Data } from '../native.js';

/** Element type of a loaded tensor. */
export type TensorDtype = 'float32' | 'bfloat16';

/** A loaded tensor in our layout: float32 values or bfloat16 bits. */
export interface HfTensor {
  dtype: TensorDtype;
  shape: number[];
  data: Float32Array | Uint16Array;
}

/** An MXFP4 expert tensor kept packed, in our layout (rows de-interleaved; see mxfp4.ts). */
export interface HfMxfp4Tensor {
  dtype: 'mxfp4';
  /** The logical shape ([E, 2F, D] or [E, D, F]). */
  shape: number[];
  data: Mxfp4Data;
}

/** What the checkpoint reader delivers: a float tensor, or (asked with `mxfp4: 'packed'`) a packed MXFP4 one. */
export type HfLoadedTensor = HfTensor | HfMxfp4Tensor;

/** Float dtypes a checkpoint may store weights in. */
export type HfFileDtype = 'F32' | 'BF16' | 'F16';

/** Converts a source's elements (as read, of dtype `from`) to `to`. */
export function convertElements(data: SafetensorsArray, from: HfFileDtype, to: TensorDtype): ElementArray {
  if (to === 'float32') {
    if (from === 'F32') return data as Float32Array;
    return from === 'BF16' ? bf16ToF32(data as Uint16Array) : f16ToF32(data as Uint16Array);
  }
  if (from === 'BF16') return data as Uint16Array;
  return from === 'F32' ? f32ToBf16(data as Float32Array) : f16ToBf16(data as Uint16Array);
}

const numel = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

function allocate(dtype: TensorDtype, n: number): ElementArray {
  return dtype === 'float32' ? new Float32Array(n) : new Uint16Array(n);
}

/** Reads elements [from, to) of a float source, converted to `dtype`. */
async function readFloat(
  files: CheckpointFiles,
  s: HfSource,
  dtype: TensorDtype,
  from?: number,
  to?: number,
): Promise<ElementArray> {
  const f = files.file(s.hf);
  return convertElements(await f.read(s.hf, from, to), f.entry(s.hf).dtype as HfFileDtype, dtype);
}

/**
 * Reads an MXFP4 recipe's blocks and scales (one expert at a time) into our row order: row r of
 * an expert goes to row rowMap[r] (the gate/up de-interleave), blocks and scales alike.
 */
async function readPackedMxfp4(files: CheckpointFiles, t: PlannedTensor): Promise<HfMxfp4Tensor> {
  const r = t.recipe;
  if (r.op !== 'mxfp4GateUp' && r.op !== 'mxfp4Down')
    throw new HfTensorError(t.name, `internal: recipe ${r.op} is not MXFP4`);
  const [E, rows, groups] = r.scales.shape;
  const rowBytes = groups * 16;
  const blocks = new Uint8Array(E * rows * rowBytes);
  const scales = new Uint8Array(E * rows * groups);
  const rowMap = r.op === 'mxfp4GateUp' ? deinterleaveMap(rows) : undefined;
  const bf = files.file(r.blocks.hf);
  const sf = files.file(r.scales.hf);
  for (let e = 0; e < E; e++) {
    const b = await bf.readBytes(r.blocks.hf, e * rows * rowBytes, (e + 1) * rows * rowBytes);
    const s = await sf.readBytes(r.scales.hf, e * rows * groups, (e + 1) * rows * groups);
    if (rowMap === undefined) {
      blocks.set(b, e * rows * rowBytes);
      scales.set(s, e * rows * groups);
      continue;
    }
    for (let row = 0; row < rows; row++) {
      const to = e * rows + rowMap[row];
      blocks.set(b.subarray(row * rowBytes, (row + 1) * rowBytes), to * rowBytes);
      scales.set(s.subarray(row * groups, (row + 1) * groups), to * groups);
    }
  }
  return { dtype: 'mxfp4', shape: [...t.shape], data: { blocks, scales } };
}

/**
 * Builds tensor `t` (validated beforehand: names, shapes, dtypes) as `dtype`; `'mxfp4'` (MXFP4
 * recipes only) keeps the experts packed.
 */
export async function readPlanned(
  files: CheckpointFiles,
  t: PlannedTensor,
  dtype: TensorDtype | 'mxfp4',
): Promise<HfLoadedTensor> {
  if (dtype === 'mxfp4') return readPackedMxfp4(files, t);
  const r = t.recipe;
  const out = (data: ElementArray): HfTensor => ({ dtype, shape: [...t.shape], data });
  switch (r.op) {
    case 'copy':
      return out(await readFloat(files, r.src, dtype));
    case 'concat': {
      const dst = allocate(dtype, numel(t.shape));
      let at = 0;
      for (const s of r.srcs) {
        const part = await readFloat(files, s, dtype);
        dst.set(part, at);
        at += part.length;
      }
      return out(dst);
    }
    case 'expertsGateUpBias': {
      const [E, twoF] = r.src.shape;
      const dst = allocate(dtype, E * twoF);
      permuteRowsInto(await readFloat(files, r.src, dtype), dst, E, twoF, deinterleaveMap(twoF));
      return out(dst);
    }
    case 'expertsGateUp':
    case 'expertsDown': {
      const [E, rows, cols] = r.src.shape; // gate_up: [E, D, 2F]; down: [E, F, D]
      const dst = allocate(dtype, E * rows * cols);
      const colMap = r.op === 'expertsGateUp' ? deinterleaveMap(cols) : undefined;
      const per = rows * cols;
      for (let e = 0; e < E; e++) {
        const part = await readFloat(files, r.src, dtype, e * per, (e + 1) * per);
        transposeInto(part, dst.subarray(e * per, (e + 1) * per), 1, rows, cols, undefined, colMap);
      }
      return out(dst);
    }
    case 'mxfp4GateUp':
    case 'mxfp4Down': {
      const [E, rows, groups] = r.scales.shape; // rows: 2F (gate_up, interleaved) or D (down)
      const cols = groups * 32;
      const bf16 = new Uint16Array(E * rows * cols);
      const rowMap = r.op === 'mxfp4GateUp' ? deinterleaveMap(rows) : undefined;
      const bf = files.file(r.blocks.hf);
      const sf = files.file(r.scales.hf);
      for (let e = 0; e < E; e++) {
        const blocks = await bf.readBytes(r.blocks.hf, e * rows * groups * 16, (e + 1) * rows * groups * 16);
        const scales = await sf.readBytes(r.scales.hf, e * rows * groups, (e + 1) * rows * groups);
        const target = bf16.subarray(e * rows * cols, (e + 1) * rows * cols);
        decodeMxfp4Rows(blocks, scales, rows, cols, target, rowMap === undefined ? undefined : (row) => rowMap[row]);
      }
      return out(dtype === 'bfloat16' ? bf16 : bf16ToF32(bf16));
    }
    default:
      throw new HfTensorError(t.name, `internal: unknown recipe ${(r as { op: string }).op}`);
  }
}
