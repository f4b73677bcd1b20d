// The CUDA emulator's warp-level matrix instructions (scripts/cuda-emulator/emulator.cc, used through
// native/core/cuda_mma.cuh) against their definition in the PTX ISA: mma.sync m16n8k16 with bf16
// and f16 operands and float32 accumulation, on fragments built by the ISA's layout tables, equal
// to the float64 product D = A B + C within one float32 rounding (the emulator sums the exact
// products in float64 and rounds once; a GPU's tensor cores round differently, which the GEMM
// tests' bound covers); ldmatrix x4/x2, plain and .trans, equal to the documented element
// placement; an mma that only half a warp executes is reported, not answered. The driver
// (mma_check.cc) is compiled with g++ against the emulator and run in both thread orders.
// Skipped without g++ on Linux x86-64 (the emulator's platform).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';

const root = process.cwd();
const cxx = process.env.CXX || 'g++';
const canBuild = (() => {
  if (process.platform !== 'linux' || process.arch !== 'x64') return false;
  try {
    execFileSync(cxx, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

interface MmaCase {
  kind: number;
  a: number[];
  b: number[];
  c: number[];
  d: number[];
}
interface Result {
  mma: MmaCase[];
  ldmatrix: { rows: number[]; out: number[] };
  partialWarpError: string;
}

/** A bfloat16 (kind 0) or float16 (kind 1) bit pattern as a number. */
const decode = (bits: number, kind: number): number => {
  const sign = bits & 0x8000 ? -1 : 1;
  if (kind === 0) {
    const e = (bits >> 7) & 0xff,
      m = bits & 0x7f;
    if (e === 0) return sign * m * 2 ** -133;
    return sign * (1 + m / 128) * 2 ** (e - 127);
  }
  const e = (bits >> 10) & 0x1f,
    m = bits & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
};

t.test(
  'warp-level mma and ldmatrix in the CUDA emulator',
  { skip: canBuild ? false : 'needs g++ on Linux x86-64' },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'sfx-mma-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const exe = join(dir, 'mma_check');
    execFileSync(cxx, [
      '-std=c++17',
      '-O1',
      '-pthread',
      '-DSINKFLEX_CUDA_EMULATOR',
      `-I${join(root, 'scripts', 'cuda-emulator', 'include')}`,
      '-x',
      'c++',
      join(root, 'test', 'cuda-emulator', 'mma_check.cc'),
      join(root, 'scripts', 'cuda-emulator', 'emulator.cc'),
      '-o',
      exe,
    ]);
    for (const order of ['index', 'reverse']) {
      const r = JSON.parse(execFileSync(exe, { env: { ...process.env, SFX_EMU_ORDER: order } }).toString()) as Result;
      t.test(`${order} thread order`, async (t) => {
        t.equal(r.mma.length, 6, 'three random cases each of bf16 and f16');
        for (const [i, m] of r.mma.entries()) {
          let worst = 0;
          for (let w = 0; w < 2; ++w) {
            for (let row = 0; row < 16; ++row) {
              for (let col = 0; col < 8; ++col) {
                let ref = m.c[w * 128 + row * 8 + col],
                  scale = Math.abs(ref);
                for (let k = 0; k < 16; ++k) {
                  const p = decode(m.a[w * 256 + row * 16 + k], m.kind) * decode(m.b[w * 128 + k * 8 + col], m.kind);
                  ref += p;
                  scale += Math.abs(p);
                }
                worst = Math.max(worst, Math.abs(m.d[w * 128 + row * 8 + col] - ref) / scale);
              }
            }
          }
          t.ok(
            worst <= 2 ** -23,
            `mma ${m.kind === 0 ? 'bf16' : 'f16'} case ${i}: D = A B + C within 2^-23 of sum |terms| (worst ${worst.toExponential(2)})`,
          );
        }
        // ldmatrix: rows[w][i][e] (8 elements a row); lane l gave row (5 l + 3) % 32 of its warp.
        const { rows, out } = r.ldmatrix;
        const at = (w: number, matrix: number, i: number, e: number): number => {
          const lane = 8 * matrix + i;
          return rows[w * 256 + ((5 * lane + 3) % 32) * 8 + e];
        };
        let bad = 0;
        for (let w = 0; w < 2; ++w) {
          for (let lane = 0; lane < 32; ++lane) {
            const g = lane >> 2,
              q = lane & 3;
            for (let variant = 0; variant < 4; ++variant) {
              const count = variant < 2 ? 4 : 2,
                trans = variant % 2 === 1;
              for (let j = 0; j < count; ++j) {
                const lo = trans ? at(w, j, 2 * q, g) : at(w, j, g, 2 * q);
                const hi = trans ? at(w, j, 2 * q + 1, g) : at(w, j, g, 2 * q + 1);
                const got = out[((w * 4 + variant) * 32 + lane) * 4 + j];
                if (got !== (lo | (hi << 16)) >>> 0) bad++;
              }
            }
          }
        }
        t.equal(bad, 0, 'ldmatrix x4, x4.trans, x2, x2.trans place every element as documented');
        t.match(r.partialWarpError, /not executed by all 32 lanes/, 'an mma executed by half a warp is an error');
      });
    }
  },
);
