// Tests: test/model/cuda-gemm-tc.test.ts (argument checks, and one small timing on a CUDA device
//   or the emulator); used by bench/gemm-gpu.ts.
// Timing of the CUDA GEMM kernels on device-resident operands, for the GPU benchmark
// (bench/gpu-check.sh): the JS gemm() copies its arrays on every call, which would hide the
// kernel. The CUDA build registers the timer at load (cuda_gemm_bench.cu); without it
// GetGemmTimer() is null.
#pragma once

#include <cstdint>

namespace sinkflex::model {

/** One GEMM shape to time: C[m, n] = op(A) op(B), A and B float32 or bfloat16 bits. */
struct GemmTimingArgs {
  std::int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  bool aBf16 = false, bBf16 = false;
  bool tensorCores = false;  // the 'medium' (bfloat16 tensor-core) kernel, else the float32 one
  bool f16Operands = false;  // with tensorCores: float16 operands instead of bfloat16
  int iterations = 1;
  int device = 0;
};

/** Seconds per GEMM (mean over `iterations` launches after one warm-up) on random operands. */
using GemmTimer = double (*)(const GemmTimingArgs& args);

void RegisterGemmTimer(GemmTimer timer);
/** The registered timer, or null (a build without CUDA). */
GemmTimer GetGemmTimer();

}  // namespace sinkflex::model
