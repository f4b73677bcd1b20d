// The sm_90 PTX of the fused sink-attention kernels holds tensor-core instructions: every kernel
// entry of native/attention/cuda_fused_tc_fwd.cu and cuda_fused_tc_bwd.cu (forward, dk/dv, dq;
// headDim 64 and 128) contains mma.sync.aligned.m16n8k16 with bf16 operands and fp32
// accumulators (fragments loaded with ldmatrix), and the sm_75 build of the same files still compiles (the instruction needs
// sm_80; the host never launches these kernels there). Compiles with nvcc (--ptx, no GPU needed);
// skipped with a visible reason where nvcc is not installed.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';

const root = process.cwd();
const nvcc = process.env.NVCC || 'nvcc';
const noNvcc = (() => {
  try {
    execFileSync(nvcc, ['--version'], { stdio: 'ignore' });
    return false;
  } catch {
    return `no ${nvcc} on PATH: the PTX check needs the CUDA compiler`;
  }
})();

const MMA = 'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32';

/** The PTX of `src` for `arch` (compute_XX), split into its kernel entries: name -> body. */
function entries(src: string, arch: string, dir: string): Map<string, string> {
  const require = createRequire(join(root, 'package.json'));
  const napi = (require('node-api-headers') as { include_dir: string }).include_dir;
  const out = join(dir, `${src.replace(/\W/g, '_')}.${arch}.ptx`);
  execFileSync(nvcc, ['-std=c++17', `-arch=${arch}`, '--ptx', '-DSINKFLEX_WITH_CUDA', `-I${napi}`, join(root, src), '-o', out],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  const ptx = readFileSync(out, 'utf8');
  const map = new Map<string, string>();
  const parts = ptx.split(/\n\s*(?:\.visible\s+)?\.entry /).slice(1);
  for (const part of parts) map.set(part.slice(0, part.indexOf('(')), part);
  return map;
}

t.test('the tensor-core attention kernels compile to mma instructions (sm_90 PTX)', { skip: noNvcc }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sfx-ptx-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const want: Record<string, string[]> = {
    'native/attention/cuda_fused_tc_fwd.cu': ['TcForwardKernelILi64E', 'TcForwardKernelILi128E'],
    'native/attention/cuda_fused_tc_bwd.cu': ['TcKeyGradKernelILi64E', 'TcKeyGradKernelILi128E', 'TcQueryGradKernelILi64E',
      'TcQueryGradKernelILi128E'],
  };
  for (const [src, kernels] of Object.entries(want)) {
    const ptx = entries(src, 'sm_90', dir);
    for (const k of kernels) {
      const name = [...ptx.keys()].find((n) => n.includes(k));
      t.ok(name, `${src}: kernel ${k} is in the PTX`);
      const body = name === undefined ? '' : ptx.get(name)!;
      const count = body.split(MMA).length - 1;
      t.ok(count >= 8, `${k}: ${count} bf16 mma.m16n8k16 instructions`);
      t.ok(body.includes('ldmatrix.sync.aligned.m8n8.x4'), `${k}: fragments loaded with ldmatrix`);
    }
    t.doesNotThrow(() => entries(src, 'sm_75', dir), `${src} compiles for sm_75 too`);
  }
});
