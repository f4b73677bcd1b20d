// Tests: test/model/cuda-gemm-tc.test.ts (one small timing on a CUDA device or the emulator).
// The GEMM timer of gemm_bench.h: random operands in device memory (uploaded once), one warm-up
// launch, then `iterations` launches on one stream timed on the host around a final
// synchronisation; the matmul precision is set for the run ('medium' for the tensor-core kernel,
// with bfloat16 or float16 operands) and restored after. Registered at load; compiled only by the CUDA build.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../core/cuda_check.cuh"
#include "../core/device_buffer.h"
#include "cuda_gemm.cuh"
#include "gemm_bench.h"
#include "matmul_precision.h"

namespace sinkflex::model::cuda {
namespace {

/** Random bfloat16 bits of numbers in [-1, 1) (xorshift from `seed`). */
std::vector<std::uint16_t> RandomBf16(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    const float f = static_cast<float>(seed >> 40) / 8388608.0f - 1.0f;
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    x = static_cast<std::uint16_t>(u >> 16);
  }
  return v;
}

std::vector<float> Widen(const std::vector<std::uint16_t>& b) {
  std::vector<float> f(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(b[i]) << 16;
    std::memcpy(&f[i], &u, 4);
  }
  return f;
}

template <typename TA, typename TB>
void Launch(cudaStream_t s, const GemmTimingArgs& g, const TA* a, const TB* b, float* c) {
  const std::int64_t lda = g.transA ? g.m : g.k, ldb = g.transB ? g.k : g.n;
  LaunchGemmT(s, g.transA, g.transB, g.m, g.n, g.k, 1.0f, a, lda > 0 ? lda : 1, b, ldb > 0 ? ldb : 1, 0.0f, c, g.n);
}

/** An operand in device memory: float32 or bfloat16 bits. */
struct Operand {
  DeviceBuffer<float> f32;
  DeviceBuffer<std::uint16_t> bf16;
  Operand(int device, std::size_t n, bool isBf16, std::uint64_t seed)
      : f32(device, isBf16 ? 0 : n, "gemm timing operand (cuda)"),
        bf16(device, isBf16 ? n : 0, "gemm timing operand (cuda)") {
    const std::vector<std::uint16_t> bits = RandomBf16(n, seed);
    if (isBf16)
      bf16.Upload(bits.data());
    else
      f32.Upload(Widen(bits).data());
  }
};

double TimeGemm(const GemmTimingArgs& g) {
  DeviceGuard guard(g.device);
  Operand a(g.device, static_cast<std::size_t>(g.m * g.k), g.aBf16, 0x1234567ull);
  Operand b(g.device, static_cast<std::size_t>(g.k * g.n), g.bBf16, 0x7654321ull);
  DeviceBuffer<float> c(g.device, static_cast<std::size_t>(g.m * g.n), "gemm timing output (cuda)");
  const MatmulPrecision previous = GetMatmulPrecision();
  const MatmulOperand previousOperand = GetMatmulOperand();
  SetMatmulPrecision(g.tensorCores ? MatmulPrecision::kMedium : MatmulPrecision::kHighest,
                     g.f16Operands ? MatmulOperand::kF16 : MatmulOperand::kBf16);
  CudaStream stream;
  auto once = [&] {
    if (g.aBf16 && g.bBf16)
      Launch(stream, g, a.bf16.data(), b.bf16.data(), c.data());
    else if (g.aBf16)
      Launch(stream, g, a.bf16.data(), b.f32.data(), c.data());
    else if (g.bBf16)
      Launch(stream, g, a.f32.data(), b.bf16.data(), c.data());
    else
      Launch(stream, g, a.f32.data(), b.f32.data(), c.data());
  };
  double seconds = 0.0;
  try {
    once();
    stream.Synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < g.iterations; ++i) once();
    stream.Synchronize();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / g.iterations;
  } catch (...) {
    SetMatmulPrecision(previous, previousOperand);
    throw;
  }
  SetMatmulPrecision(previous, previousOperand);
  return seconds;
}

[[maybe_unused]] const bool kRegistered = (RegisterGemmTimer(&TimeGemm), true);

}  // namespace
}  // namespace sinkflex::model::cuda
