// Reference: the float64 refGemm in test/model/fixtures/reference.ts; checked against the CPU
//   GEMM (gemm.h Gemm / GemmMixed).
// Tests: test/model/cuda-ops.test.ts (gemm, linear and embedding with float32 and bfloat16
//   weights, on a GPU or on the CUDA emulator), cuda-moe.test.ts (the grouped GEMM of the experts).
// The tiled GEMM of the CUDA model ops (64 x 64 output tiles, 16-deep k slices in shared memory,
// 4 x 4 outputs per thread of 256, fp32 accumulation with fmaf in k order) over operands stored
// as float32 or as bfloat16 bits: a bfloat16 element is widened exactly to float32 as it is
// loaded into shared memory, so the result is the float32 GEMM of the widened matrix bit for
// bit; an MXFP4 B (the experts kept packed) is decoded exactly as it is loaded, so the result is the
// GEMM of its bfloat16 dequantization bit for bit. Besides the plain launch, a grouped launch runs many independent
// GEMMs with the same transposes and leading dimensions (the experts of an MoE layer: each group its own row range and
// weight matrix) as one grid over a list of (group, row tile) entries, so only the tiles that exist are launched.
// Shared by cuda_ops.cu and cuda_moe.cu (an anonymous namespace: each file its own copy). With the matmul precision
// 'medium' (matmul_precision.h) both launches run the bfloat16 tensor-core GEMM of cuda_gemm_tc.cuh instead. Included
// by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../core/cuda_check.cuh"
#include "../core/device_buffer.h"
#include "../core/errors.h"
#include "cuda_gemm_tc.cuh"

namespace sinkflex::model::cuda {
namespace {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16;

/** An operand element as float32: float32 as is. */
__device__ __forceinline__ float LoadElement(const float* p) { return *p; }
/** An operand element as float32: bfloat16 bits widened exactly (the upper half of a float32). */
__device__ __forceinline__ float LoadElement(const std::uint16_t* p) {
  const unsigned u = static_cast<unsigned>(*p) << 16;
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

/** An MXFP4 element (cuda_mxfp4_operand.cuh) as float32: decoded exactly. */
__device__ __forceinline__ float LoadElement(const Mxfp4Operand& p) { return Mxfp4Value(p); }

/**
 * One 64 x 64 tile, at (row0, col0), of C = alpha op(A) op(B) + beta C (row-major, leading
 * dimensions; beta == 0 writes C without reading it), computed by the 256 threads of a block.
 * A and B are pointers to float32 or bfloat16 bits, or (B) an Mxfp4Operand.
 */
template <typename PA, typename PB>
__device__ __forceinline__ void GemmTile(int transA, int transB, long long M, long long N, long long K, float alpha,
                                         PA A, long long lda, PB B, long long ldb, float beta, float* C, long long ldc,
                                         long long row0, long long col0) {
  __shared__ float As[kTileK][kTileM + 1];
  __shared__ float Bs[kTileK][kTileN + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (long long k0 = 0; k0 < K; k0 += kTileK) {
    for (int e = threadIdx.x; e < kTileK * kTileM; e += 256) {
      const int kk = e % kTileK, i = e / kTileK;
      const long long r = row0 + i, p = k0 + kk;
      As[kk][i] = (r < M && p < K) ? LoadElement(transA ? A + p * lda + r : A + r * lda + p) : 0.0f;
    }
    for (int e = threadIdx.x; e < kTileK * kTileN; e += 256) {
      const int j = e % kTileN, kk = e / kTileN;
      const long long c = col0 + j, p = k0 + kk;
      Bs[kk][j] = (c < N && p < K) ? LoadElement(transB ? B + c * ldb + p : B + p * ldb + c) : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], b[4];
      for (int u = 0; u < 4; ++u) a[u] = As[kk][ty + 16 * u];
      for (int v = 0; v < 4; ++v) b[v] = Bs[kk][tx + 16 * v];
      for (int u = 0; u < 4; ++u)
        for (int v = 0; v < 4; ++v) acc[u][v] = fmaf(a[u], b[v], acc[u][v]);
    }
    __syncthreads();
  }
  for (int u = 0; u < 4; ++u) {
    const long long r = row0 + ty + 16 * u;
    if (r >= M) continue;
    for (int v = 0; v < 4; ++v) {
      const long long c = col0 + tx + 16 * v;
      if (c >= N) continue;
      float* out = C + r * ldc + c;
      *out = beta == 0.0f ? alpha * acc[u][v] : alpha * acc[u][v] + beta * *out;
    }
  }
}

template <typename TA, typename TB>
__global__ void __launch_bounds__(256)
    GemmKernel(int transA, int transB, long long M, long long N, long long K, float alpha, const TA* A, long long lda,
               const TB* B, long long ldb, float beta, float* C, long long ldc) {
  GemmTile(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, static_cast<long long>(blockIdx.y) * kTileM,
           static_cast<long long>(blockIdx.x) * kTileN);
}

/** C = alpha op(A) op(B) + beta C on `s` (A and B float32 or bfloat16 bits). */
template <typename TA, typename TB>
void LaunchGemmT(cudaStream_t s, bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                 const TA* a, std::int64_t lda, const TB* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (UseTensorCoreGemm()) {  // matmul precision 'medium': bfloat16 tensor cores (cuda_gemm_tc.cuh)
    LaunchGemmTc(s, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (CeilDiv<std::int64_t>(m, kTileM) >= 65536)
    throw ArgumentError("gemm: m is too large for the CUDA kernel (>= 4194304 rows)");
  const dim3 grid(static_cast<unsigned>(CeilDiv<std::int64_t>(n, kTileN)),
                  static_cast<unsigned>(CeilDiv<std::int64_t>(m, kTileM)));
  auto* kernel = GemmKernel<TA, TB>;  // (a template-id with a comma cannot be a macro argument)
  SFX_LAUNCH(kernel, grid, dim3(256), 0, s)
  (transA ? 1 : 0, transB ? 1 : 0, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  SFX_CUDA_LAUNCH_CHECK("GemmKernel");
}

/** One GEMM of a grouped launch: its sizes and the element offsets of its A, B and C. */
struct GemmGroup {
  long long m = 0, n = 0, k = 0;
  long long a = 0, b = 0, c = 0;
};

/** A row tile of one group (what a block row of the grouped grid computes). */
struct GemmGroupTile {
  long long m, n, k, a, b, c, row0;
};

/** PA, PB: pointers to float32 or bfloat16 bits, or (PB) an Mxfp4Operand. */
template <typename PA, typename PB>
__global__ void __launch_bounds__(256)
    GroupedGemmKernel(const GemmGroupTile* tiles, int transA, int transB, float alpha, PA A, long long lda, PB B,
                      long long ldb, float beta, float* C, long long ldc) {
  const GemmGroupTile t = tiles[blockIdx.y];
  const long long col0 = static_cast<long long>(blockIdx.x) * kTileN;
  if (col0 >= t.n) return;  // the whole block leaves: a narrower group than the grid
  GemmTile(transA, transB, t.m, t.n, t.k, alpha, A + t.a, lda, B + t.b, ldb, beta, C + t.c, ldc, t.row0, col0);
}

/**
 * For every group g: C_g = alpha op(A_g) op(B_g) + beta C_g, where X_g starts at X + group.x
 * (the same transposes and leading dimensions for all); groups with m or n = 0 are skipped
 * (k = 0 gives beta C). Synchronous (the tile list lives in device memory until the kernels end).
 * a and b are pointers to float32 or bfloat16 bits, or (b) an Mxfp4Operand (offsets in elements).
 */
template <typename PA, typename PB>
void GroupedGemm(int device, const std::vector<GemmGroup>& groups, bool transA, bool transB, float alpha, PA a,
                 std::int64_t lda, PB b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  // matmul precision 'medium': bfloat16 tensor cores (cuda_gemm_tc.cuh) for every operand kind
  // (float32 rounded, bfloat16 bits as they are, packed MXFP4 decoded exactly to bfloat16).
  if (UseTensorCoreGemm()) {
    GroupedGemmTc(device, groups, transA, transB, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  std::vector<GemmGroupTile> tiles;
  long long maxN = 0;
  for (const GemmGroup& g : groups) {
    if (g.m <= 0 || g.n <= 0) continue;
    maxN = g.n > maxN ? g.n : maxN;
    for (long long r0 = 0; r0 < g.m; r0 += kTileM) tiles.push_back({g.m, g.n, g.k, g.a, g.b, g.c, r0});
  }
  if (tiles.empty()) return;
  DeviceBuffer<GemmGroupTile> list(device, tiles.size(), "grouped gemm tiles (cuda)");
  list.Upload(tiles.data());
  CudaStream stream;
  constexpr std::size_t kMaxRows = 65535;  // grid.y limit
  for (std::size_t t0 = 0; t0 < tiles.size(); t0 += kMaxRows) {
    const std::size_t count = tiles.size() - t0 < kMaxRows ? tiles.size() - t0 : kMaxRows;
    const dim3 grid(static_cast<unsigned>(CeilDiv<long long>(maxN, kTileN)), static_cast<unsigned>(count));
    auto* kernel = GroupedGemmKernel<PA, PB>;
    SFX_LAUNCH(kernel, grid, dim3(256), 0, stream)
    (list.data() + t0, transA ? 1 : 0, transB ? 1 : 0, alpha, a, lda, b, ldb, beta, c, ldc);
    SFX_CUDA_LAUNCH_CHECK("GroupedGemmKernel");
  }
  stream.Synchronize();
}

}  // namespace
}  // namespace sinkflex::model::cuda
