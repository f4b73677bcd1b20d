#!/usr/bin/env node
// Checks that the tensor-core kernels really use the tensor cores: compiles the .cu files below
// to PTX for one architecture (default sm_90, or $SINKFLEX_CI_CUDA_ARCH) with nvcc and requires,
// for each listed kernel, at least one .entry whose mangled name contains the kernel's name, and
// that every such entry's body holds a matrix instruction (mma.sync / wgmma). `Kernel<Type>` asks
// for an instantiation: the entries of Kernel whose mangled name also contains Type (the packed
// MXFP4 expert GEMM: GroupedGemmTcKernel<Mxfp4Operand>). Every kernel here (BOTH_OPERANDS) must
// also have entries with a bfloat16 and with a float16 mma. Without nvcc it says so and exits 0.
// Run by .ci/run after the CUDA compile check: `node scripts/check-tensor-core-ptx.mjs`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** [source, kernel names that must hold matrix instructions]. */
export const KERNELS = [
  ['native/model/cuda_ops.cu', ['GemmTcKernel']],
  ['native/model/cuda_moe.cu', ['GemmTcKernel', 'GroupedGemmTcKernel', 'GroupedGemmTcKernel<Mxfp4Operand>']],
  ['native/attention/cuda_fused_tc_fwd.cu', ['TcForwardKernel']],
  ['native/attention/cuda_fused_tc_bwd.cu', ['TcKeyGradKernel', 'TcQueryGradKernel']],
];

/** Kernels instantiated for both operand types (bfloat16 and float16): some entry must hold each mma (all of them). */
export const BOTH_OPERANDS = new Set([
  'GemmTcKernel',
  'GroupedGemmTcKernel',
  'GroupedGemmTcKernel<Mxfp4Operand>',
  'TcForwardKernel',
  'TcKeyGradKernel',
  'TcQueryGradKernel',
]);

const root = fileURLToPath(new URL('..', import.meta.url));
const arch = process.env.SINKFLEX_CI_CUDA_ARCH || '90';
try {
  execFileSync('nvcc', ['--version'], { stdio: 'ignore' });
} catch {
  console.log('tensor-core PTX check: nvcc not found, skipped');
  process.exit(0);
}
const MATRIX = /\b(mma\.sync\.aligned\.m16n8k16|wgmma\.mma_async)\b/;
const dir = mkdtempSync(join(tmpdir(), 'sfx-ptx-'));
let failed = 0;
try {
  for (const [src, kernels] of KERNELS) {
    const ptx = join(dir, src.replace(/[\\/]/g, '_') + '.ptx');
    execFileSync('nvcc', ['-std=c++17', `-arch=sm_${arch}`, '--ptx', join(root, src), '-o', ptx], {
      cwd: root,
      stdio: 'inherit',
    });
    // Split into entries: each `.entry name(` up to the next `.entry` (or the end).
    const text = readFileSync(ptx, 'utf8');
    const entries = text
      .split(/^(?=\.(?:visible\s+)?\.?entry\s)/m)
      .filter((e) => /^\.(?:visible\s+)?\.?entry\s/.test(e));
    for (const kernel of kernels) {
      const [name, type] = kernel.replace(/>$/, '').split('<');
      const mine = entries.filter((e) => {
        const mangled = e.slice(0, e.indexOf('('));
        return (
          new RegExp(`\\d${name}I`).test(mangled) && (type === undefined || new RegExp(`\\d${type}`).test(mangled))
        );
      });
      const withMma = mine.filter((e) => MATRIX.test(e));
      const missing = BOTH_OPERANDS.has(kernel)
        ? ['bf16', 'f16'].filter((t) => !mine.some((e) => e.includes(`.f32.${t}.${t}.f32`)))
        : [];
      if (missing.length > 0) {
        failed++;
        console.error(
          `tensor-core PTX check: ${src}: ${kernel}: no entry with a ${missing.join(' or ')} mma (sm_${arch})`,
        );
      }
      if (mine.length === 0 || withMma.length !== mine.length) {
        failed++;
        console.error(
          `tensor-core PTX check: ${src}: ${kernel}: ${mine.length} entries, ${withMma.length} with mma/wgmma (sm_${arch})`,
        );
      } else {
        console.log(
          `tensor-core PTX check: ${src}: ${kernel}: ${mine.length} entries, all with mma/wgmma (sm_${arch})`,
        );
      }
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
