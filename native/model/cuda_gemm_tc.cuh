// Reference: the float64 refGemm in test/model/fixtures/reference.ts on bfloat16-rounded operands;
//   PTX ISA mma.m16n8k16 / ldmatrix (native/core/cuda_mma.cuh).
// Tests: test/model/cuda-gemm-tc.test.ts (GEMM, linear layers, the MoE layer with float32,
//   bfloat16 and packed MXFP4 experts and a whole transformer with matmulPrecision 'medium', on a
//   GPU or on the CUDA emulator in both thread orders); scripts/check-tensor-core-ptx.mjs (the kernels' sm_90 PTX holds
//   mma).
// The tensor-core GEMM of the CUDA model ops: C = alpha op(A) op(B) + beta C with bfloat16 (or
// float16) operands and float32 accumulation (mma.sync m16n8k16), used instead of the float32 GEMM
// of cuda_gemm.cuh when the matmul precision is 'medium' (matmul_precision.h; its operand type
// picks the kernel instantiation). A block of 256
// threads (8 warps, 2 x 4) computes a 128 x 128 tile of C, 64 x 32 per warp (4 x 4 mma tiles);
// k advances 32 at a time through two shared-memory stages. Operands are staged through
// registers: each thread reads its share of the next k slice from global memory (coalesced:
// consecutive threads read consecutive addresses of whichever layout the operand has) while the
// warps multiply the current one, then converts it to 16-bit bits and stores it into the other
// stage, laid out [row][k] for A and [column][k] for B with rows padded to 40 elements (80 bytes:
// ldmatrix reads 8 rows of 16 bytes without bank conflicts). The conversion is the operand
// decoder: float32 is rounded to nearest even, bfloat16 bits pass as they are, packed MXFP4
// (cuda_mxfp4_operand.cuh: a 4-bit code times its block's power of two) is decoded exactly to
// float32 and then to bfloat16, which leaves it unchanged (it is a bfloat16 number), so packed
// experts give the bits of their bfloat16 dequantization; with float16 operands every format is
// widened to float32 and rounded to float16 (F16Operand). The tile code takes operands as
// pointer-like types (`p + n`, OperandBits<Op>(p)): another weight format is one more
// Bf16Operand/F16Operand overload. Included by .cu files only (an anonymous namespace: each file
// its own copy).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../core/cuda_check.cuh"
#include "../core/cuda_device.h"
#include "../core/cuda_mma.cuh"
#include "../core/device_buffer.h"
#include "../core/errors.h"
#include "cuda_mxfp4_operand.cuh"
#include "matmul_precision.h"

namespace sinkflex::model::cuda {
namespace {

namespace tc {

constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 32, kThreads = 256;
constexpr int kRowPad = kBlockK + 8;                      // elements per shared row: 80 bytes, 16-byte aligned
constexpr int kPerThread = kBlockM * kBlockK / kThreads;  // operand elements each thread stages (16)

/** An operand element as bfloat16 bits: float32 rounded to nearest even. */
__device__ __forceinline__ std::uint16_t Bf16Operand(const float* p) { return mma::Bf16Bits(*p); }
/** An operand element as bfloat16 bits: bfloat16 bits as they are. */
__device__ __forceinline__ std::uint16_t Bf16Operand(const std::uint16_t* p) { return *p; }
/**
 * An operand element as bfloat16 bits: an MXFP4 element decoded exactly to float32 (Mxfp4Value),
 * then rounded to bfloat16 — which changes nothing, every value (finite, infinity, the canonical
 * NaN 0x7FC00000 -> 0x7FC0) being a bfloat16 number: the bits of its bfloat16 dequantization.
 */
__device__ __forceinline__ std::uint16_t Bf16Operand(const Mxfp4Operand& p) { return mma::Bf16Bits(Mxfp4Value(p)); }

/** An operand element as float16 bits: float32 rounded to nearest even (past 65504: infinity). */
__device__ __forceinline__ std::uint16_t F16Operand(const float* p) { return mma::F16Bits(*p); }
/**
 * An operand element as float16 bits: bfloat16 widened, then rounded — exact for the bfloat16
 * numbers in float16's range (8 significant bits fit in 11); below 2^-14 the float16 subnormals
 * round, past 65504 it is infinity.
 */
__device__ __forceinline__ std::uint16_t F16Operand(const std::uint16_t* p) { return mma::F16Bits(mma::Bf16Float(*p)); }
/**
 * An operand element as float16 bits: an MXFP4 element decoded exactly to float32, then rounded
 * (exact while the block scale keeps it within float16's normal range, 2^-14 to 65504).
 */
__device__ __forceinline__ std::uint16_t F16Operand(const Mxfp4Operand& p) { return mma::F16Bits(Mxfp4Value(p)); }

/** An operand element as the 16-bit bits of the mma's operand type `Op`. */
template <mma::Operand Op, typename P>
__device__ __forceinline__ std::uint16_t OperandBits(const P& p) {
  if constexpr (Op == mma::Operand::kF16)
    return F16Operand(p);
  else
    return Bf16Operand(p);
}

/**
 * Reads this thread's share of a rows x kBlockK slice of an operand (rows of the slice: A's rows
 * or B's columns) as bfloat16 bits, two to a register: element (i, kk) of the slice is
 * X[(r0 + i) * ld + k0 + kk] when `kContiguous`, else X[(k0 + kk) * ld + r0 + i]; outside
 * (rows, K) it is 0. With k contiguous a thread reads column kk = tid % 32 of rows tid / 32 + 8 s,
 * else row i = tid % 128 at kk = tid / 128 + 2 s (s = 0..15): a warp reads 32 consecutive
 * elements either way.
 */
template <mma::Operand Op, typename P>
__device__ __forceinline__ void LoadSlice(P X, long long ld, bool kContiguous, long long rows, long long K,
                                          long long r0, long long k0, unsigned regs[kPerThread / 2]) {
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int s = 0; s < kPerThread / 2; ++s) regs[s] = 0u;
  if (kContiguous) {
    const long long p = k0 + tid % kBlockK, r = r0 + tid / kBlockK;
    if (p >= K) return;
    const P base = X + p;
#pragma unroll
    for (int s = 0; s < kPerThread; ++s) {
      if (r + 8 * s < rows)
        regs[s / 2] |= static_cast<unsigned>(OperandBits<Op>(base + (r + 8 * s) * ld)) << (16 * (s % 2));
    }
  } else {
    const long long r = r0 + tid % kBlockM, p = k0 + tid / kBlockM;
    if (r >= rows) return;
    const P base = X + r;
#pragma unroll
    for (int s = 0; s < kPerThread; ++s) {
      if (p + 2 * s < K)
        regs[s / 2] |= static_cast<unsigned>(OperandBits<Op>(base + (p + 2 * s) * ld)) << (16 * (s % 2));
    }
  }
}

/** Stores what LoadSlice read into a shared stage laid out [row][k] (rows of kRowPad elements). */
__device__ __forceinline__ void StoreSlice(bool kContiguous, const unsigned regs[kPerThread / 2],
                                           std::uint16_t* stage) {
  const int tid = static_cast<int>(threadIdx.x);
  const int i = kContiguous ? tid / kBlockK : tid % kBlockM, kk = kContiguous ? tid % kBlockK : tid / kBlockM;
#pragma unroll
  for (int s = 0; s < kPerThread; ++s) {
    const std::uint16_t v = static_cast<std::uint16_t>(regs[s / 2] >> (16 * (s % 2)));
    if (kContiguous)
      stage[(i + 8 * s) * kRowPad + kk] = v;
    else
      stage[i * kRowPad + kk + 2 * s] = v;
  }
}

/**
 * One 128 x 128 tile, at (row0, col0), of C = alpha op(A) op(B) + beta C (row-major, leading
 * dimensions; beta == 0 writes C without reading it), computed by the 256 threads of a block.
 */
template <mma::Operand Op, typename PA, typename PB>
__device__ __forceinline__ void GemmTileTc(int transA, int transB, long long M, long long N, long long K, float alpha,
                                           PA A, long long lda, PB B, long long ldb, float beta, float* C,
                                           long long ldc, long long row0, long long col0) {
  alignas(16) __shared__ std::uint16_t As[2][kBlockM * kRowPad];
  alignas(16) __shared__ std::uint16_t Bs[2][kBlockN * kRowPad];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int warpM = warp / 4, warpN = warp % 4;
  // op(A) is M x K: A stored [M][K] (k contiguous) unless transposed; op(B) is K x N: B stored
  // [N][K] (k contiguous) when transposed.
  const bool aK = transA == 0, bK = transB != 0;
  float acc[4][4][4];
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mi][ni][i] = 0.0f;
  unsigned ra[kPerThread / 2], rb[kPerThread / 2];
  const long long tiles = (K + kBlockK - 1) / kBlockK;
  if (tiles > 0) {
    LoadSlice<Op>(A, lda, aK, M, K, row0, 0, ra);
    LoadSlice<Op>(B, ldb, bK, N, K, col0, 0, rb);
    StoreSlice(aK, ra, As[0]);
    StoreSlice(bK, rb, Bs[0]);
  }
  __syncthreads();
  // ldmatrix row addresses of this lane (matrix j = lane / 8, its row lane % 8): A's 16 x 16
  // fragment as matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15,
  // k 8-15) = a[0..3]; two n8 tiles of B as (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
  // (n 8-15, k 8-15) = b[0], b[1] of the first, b[0], b[1] of the second.
  const int j = lane / 8, r = lane % 8;
  const int aRow = warpM * 64 + r + 8 * (j & 1), aCol = 8 * (j >> 1);
  const int bRow = warpN * 32 + r + 8 * (j >> 1), bCol = 8 * (j & 1);
  for (long long t = 0; t < tiles; ++t) {
    const int cur = static_cast<int>(t & 1);
    const bool more = t + 1 < tiles;
    if (more) {
      LoadSlice<Op>(A, lda, aK, M, K, row0, (t + 1) * kBlockK, ra);
      LoadSlice<Op>(B, ldb, bK, N, K, col0, (t + 1) * kBlockK, rb);
    }
#pragma unroll
    for (int ks = 0; ks < kBlockK; ks += 16) {
      unsigned af[4][4], bf[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) mma::LdMatrixX4<false>(af[mi], As[cur] + (aRow + 16 * mi) * kRowPad + ks + aCol);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        unsigned q[4];
        mma::LdMatrixX4<false>(q, Bs[cur] + (bRow + 16 * np) * kRowPad + ks + bCol);
        bf[2 * np][0] = q[0];
        bf[2 * np][1] = q[1];
        bf[2 * np + 1][0] = q[2];
        bf[2 * np + 1][1] = q[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma::MmaM16N8K16<Op>(acc[mi][ni], af[mi], bf[ni]);
    }
    if (more) {
      StoreSlice(aK, ra, As[cur ^ 1]);
      StoreSlice(bK, rb, Bs[cur ^ 1]);
    }
    __syncthreads();
  }
  const int g = lane / 4, q = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const long long row = row0 + warpM * 64 + mi * 16 + g + 8 * (i / 2);
        const long long col = col0 + warpN * 32 + ni * 8 + 2 * q + (i % 2);
        if (row >= M || col >= N) continue;
        float* out = C + row * ldc + col;
        *out = beta == 0.0f ? alpha * acc[mi][ni][i] : alpha * acc[mi][ni][i] + beta * *out;
      }
    }
  }
}

template <mma::Operand Op, typename PA, typename PB>
__global__ void __launch_bounds__(kThreads)
    GemmTcKernel(int transA, int transB, long long M, long long N, long long K, float alpha, PA A, long long lda, PB B,
                 long long ldb, float beta, float* C, long long ldc) {
  GemmTileTc<Op, PA, PB>(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                         static_cast<long long>(blockIdx.y) * kBlockM, static_cast<long long>(blockIdx.x) * kBlockN);
}

/** A row tile of one group of a grouped launch (what a block row of the grouped grid computes). */
struct GroupTile {
  long long m, n, k, a, b, c, row0;
};

template <mma::Operand Op, typename PA, typename PB>
__global__ void __launch_bounds__(kThreads)
    GroupedGemmTcKernel(const GroupTile* tiles, int transA, int transB, float alpha, PA A, long long lda, PB B,
                        long long ldb, float beta, float* C, long long ldc) {
  const GroupTile t = tiles[blockIdx.y];
  const long long col0 = static_cast<long long>(blockIdx.x) * kBlockN;
  if (col0 >= t.n) return;  // the whole block leaves: a narrower group than the grid
  GemmTileTc<Op, PA, PB>(transA, transB, t.m, t.n, t.k, alpha, A + t.a, lda, B + t.b, ldb, beta, C + t.c, ldc, t.row0,
                         col0);
}

}  // namespace tc

/**
 * Whether this GEMM runs on the tensor cores: the matmul precision is 'medium' and the current
 * device has them (compute capability 8.0 or newer; otherwise the float32 kernel runs and
 * NoteMatmulFallback says so once).
 */
inline bool UseTensorCoreGemm() {
  if (GetMatmulPrecision() != MatmulPrecision::kMedium) return false;
  int d = 0;
  SFX_CUDA_CHECK(cudaGetDevice(&d));
  const std::vector<CudaDeviceInfo>& devices = CudaDevices();
  if (d >= 0 && d < static_cast<int>(devices.size()) && mma::TensorCoreArch(devices[d].major)) return true;
  const std::string cc = d >= 0 && d < static_cast<int>(devices.size())
                             ? std::to_string(devices[d].major) + "." + std::to_string(devices[d].minor)
                             : std::string("unknown");
  NoteMatmulFallback("cuda:" + std::to_string(d) + " has compute capability " + cc +
                     ", the bfloat16 tensor-core GEMM needs 8.0 or newer");
  return false;
}

/**
 * C = alpha op(A) op(B) + beta C on `s` on the tensor cores (A and B float32 or bfloat16 bits,
 * rounded to the matmul operand type: bfloat16, or float16 when GetMatmulOperand() says so).
 */
template <typename TA, typename TB>
void LaunchGemmTc(cudaStream_t s, bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                  const TA* a, std::int64_t lda, const TB* b, std::int64_t ldb, float beta, float* c,
                  std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (CeilDiv<std::int64_t>(m, tc::kBlockM) >= 65536)
    throw ArgumentError("gemm: m is too large for the CUDA kernel (>= 8388608 rows)");
  const dim3 grid(static_cast<unsigned>(CeilDiv<std::int64_t>(n, tc::kBlockN)),
                  static_cast<unsigned>(CeilDiv<std::int64_t>(m, tc::kBlockM)));
  // (a template-id with a comma cannot be a macro argument)
  auto* kernel = GetMatmulOperand() == MatmulOperand::kF16
                     ? tc::GemmTcKernel<mma::Operand::kF16, const TA*, const TB*>
                     : tc::GemmTcKernel<mma::Operand::kBf16, const TA*, const TB*>;
  SFX_LAUNCH(kernel, grid, dim3(tc::kThreads), 0, s)
  (transA ? 1 : 0, transB ? 1 : 0, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  SFX_CUDA_LAUNCH_CHECK("GemmTcKernel");
}

/**
 * The grouped GEMM (cuda_gemm.cuh GroupedGemm: for every group g, C_g = alpha op(A_g) op(B_g) +
 * beta C_g, X_g starting at X + group.x) on the tensor cores. `Group` has m, n, k, a, b, c; PA and
 * PB are pointers to float32 or bfloat16 bits, or Mxfp4Operand (offsets in elements).
 * Synchronous (the tile list lives in device memory until the kernels end).
 */
template <typename Group, typename PA, typename PB>
void GroupedGemmTc(int device, const std::vector<Group>& groups, bool transA, bool transB, float alpha, PA a,
                   std::int64_t lda, PB b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  std::vector<tc::GroupTile> tiles;
  long long maxN = 0;
  for (const Group& g : groups) {
    if (g.m <= 0 || g.n <= 0) continue;
    maxN = g.n > maxN ? g.n : maxN;
    for (long long r0 = 0; r0 < g.m; r0 += tc::kBlockM) tiles.push_back({g.m, g.n, g.k, g.a, g.b, g.c, r0});
  }
  if (tiles.empty()) return;
  DeviceBuffer<tc::GroupTile> list(device, tiles.size(), "grouped gemm tiles (cuda, tensor cores)");
  list.Upload(tiles.data());
  const bool f16 = GetMatmulOperand() == MatmulOperand::kF16;
  CudaStream stream;
  constexpr std::size_t kMaxRows = 65535;  // grid.y limit
  for (std::size_t t0 = 0; t0 < tiles.size(); t0 += kMaxRows) {
    const std::size_t count = tiles.size() - t0 < kMaxRows ? tiles.size() - t0 : kMaxRows;
    const dim3 grid(static_cast<unsigned>(CeilDiv<long long>(maxN, tc::kBlockN)), static_cast<unsigned>(count));
    auto* kernel = f16 ? tc::GroupedGemmTcKernel<mma::Operand::kF16, PA, PB>
                       : tc::GroupedGemmTcKernel<mma::Operand::kBf16, PA, PB>;
    SFX_LAUNCH(kernel, grid, dim3(tc::kThreads), 0, stream)
    (list.data() + t0, transA ? 1 : 0, transB ? 1 : 0, alpha, a, lda, b, ldb, beta, c, ldc);
    SFX_CUDA_LAUNCH_CHECK("GroupedGemmTcKernel");
  }
  stream.Synchronize();
}

}  // namespace
}  // namespace sinkflex::model::cuda
