// Reference: the PTX ISA, "Matrix fragments for mma.m16n8k16 with floating point type" (the
//   A/B/C fragment layouts used below); docs/design.md, "Sink attention — semantics".
// Tests: test/attention/cuda-tensor-cores.test.ts (on a GPU, or on the CUDA emulator without one).
// Pieces of the tensor-core sink-attention kernels (cuda_fused_tc_fwd.cu, cuda_fused_tc_bwd.cu):
// bf16 (or fp16) bits in shared memory (row-major tiles, rows padded by 8 elements: 16-byte aligned for
// ldmatrix, conflict-free), fragments loaded with ldmatrix (.trans where the mma wants the tile's
// other orientation), the warp-level m16n8k16 mma (bf16 or fp16 operands, the kernels' template
// parameter Op) with fp32 accumulators, and the tile loader from the [batch, row, heads, headDim]
// tensors (it copies 16-bit bits, whichever type they are).
//
// Fragments of one warp (lane = 4 g + t, g = lane / 4, t = lane % 4; PTX ISA layouts):
//   A (16 x 16, row-major): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16 x 8, k x n):      b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g)
//   C (16 x 8, fp32):       c0, c1 = (g, 2t..2t+1), c2, c3 = (g+8, 2t..2t+1)
// Each 32-bit register holds two 16-bit elements, the lower column/k index in the low half. The C
// fragments of two neighbouring n-tiles are exactly the A fragment of one 16-wide k-step
// (FlashAttention-2's register reuse of P).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "../core/cuda_mma.cuh"
#include "cuda_common.cuh"

namespace sinkflex::attention::cuda {

/** Largest headDim of the tensor-core kernels (bf16 or fp16 inputs; headDim is padded to 64 or 128). */
constexpr std::int64_t kMaxTensorCoreHeadDim = 128;

/** 16 aligned bytes: the element type of the tensor-core kernels' dynamic shared memory. */
struct alignas(16) TcChunk {
  std::uint32_t w[4];
};

using ::sinkflex::mma::Operand;

/** op(lo) in the low half, op(hi) in the high half: 16-bit elements of type Op (round to nearest even). */
template <Operand Op>
__device__ __forceinline__ std::uint32_t Pack16(float lo, float hi) {
  return ::sinkflex::mma::Pack2(::sinkflex::mma::Bits16<Op>(lo), ::sinkflex::mma::Bits16<Op>(hi));
}

/** The A fragment of rows r0..r0+15, columns k0..k0+15 of a row-major 16-bit tile (row stride SP) (ldmatrix.x4). */
template <int SP>
__device__ __forceinline__ void LoadA(std::uint32_t (&a)[4], const std::uint16_t* S, int r0, int k0) {
  const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
  ::sinkflex::mma::LdMatrixX4<false>(a, S + (r0 + r + 8 * (j & 1)) * SP + k0 + 8 * (j >> 1));
}

/**
 * The B fragments (k0..k0+15 x n0..n0+7 and x n0+8..n0+15) of B[k][n] = S[n * SP + k], a tile
 * stored with n as its row (K for Q Kᵀ, Q and dO for K Qᵀ and V dOᵀ, V for dO Vᵀ) (ldmatrix.x4).
 */
template <int SP>
__device__ __forceinline__ void LoadB2(std::uint32_t (&b)[2][2], const std::uint16_t* S, int n0, int k0) {
  const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
  std::uint32_t x[4];
  ::sinkflex::mma::LdMatrixX4<false>(x, S + (n0 + r + 8 * (j >> 1)) * SP + k0 + 8 * (j & 1));
  b[0][0] = x[0];
  b[0][1] = x[1];
  b[1][0] = x[2];
  b[1][1] = x[3];
}

/**
 * The B fragments (k0..k0+15 x n0..n0+7 and x n0+8..n0+15) of B[k][n] = S[k * SP + n], a tile
 * stored with k as its row (V for P V, dO and Q for Pᵀ dO and dSᵀ Q, K for dS K)
 * (ldmatrix.x4.trans).
 */
template <int SP>
__device__ __forceinline__ void LoadBT2(std::uint32_t (&b)[2][2], const std::uint16_t* S, int k0, int n0) {
  const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
  std::uint32_t x[4];
  ::sinkflex::mma::LdMatrixX4<true>(x, S + (k0 + r + 8 * (j & 1)) * SP + n0 + 8 * (j >> 1));
  b[0][0] = x[0];
  b[0][1] = x[1];
  b[1][0] = x[2];
  b[1][1] = x[3];
}

/** The A fragment of 16 rows x 16 columns from the C fragments of two neighbouring 8-column tiles, rounded to Op. */
template <Operand Op>
__device__ __forceinline__ void CToA(std::uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = Pack16<Op>(c0[0], c0[1]);
  a[1] = Pack16<Op>(c0[2], c0[3]);
  a[2] = Pack16<Op>(c1[0], c1[1]);
  a[3] = Pack16<Op>(c1[2], c1[3]);
}

/** d += a b on the tensor cores (m16n8k16, bf16 or fp16 in per Op, fp32 accumulate). */
template <Operand Op>
__device__ __forceinline__ void Mma(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // no bf16/fp16 m16n8k16 mma before sm_80; the host never launches these kernels there
#else
  ::sinkflex::mma::MmaM16N8K16<Op>(d, a, b);
#endif
}

/**
 * Copies ROWS rows of a 16-bit (bf16 or fp16) tensor [.., row, heads, D] starting at `base` (row stride `stride`
 * elements) into shared memory S[r * SP + d], DB columns, zeros past `valid` rows and past D.
 * 16-byte loads and stores when D is a multiple of 8 (rows are then 16-byte aligned), element
 * loads otherwise.
 */
template <int DB, int ROWS, int SP, int THREADS>
__device__ __forceinline__ void LoadTile16(std::uint16_t* S, const std::uint16_t* base, long long stride,
                                           long long valid, long long D) {
  if (D % 8 == 0) {
    constexpr int C8 = DB / 8;
    for (int e = threadIdx.x; e < ROWS * C8; e += THREADS) {
      const int r = e / C8, d0 = (e % C8) * 8;
      TcChunk x{{0u, 0u, 0u, 0u}};
      if (r < valid && d0 < D) {
#ifdef SINKFLEX_CUDA_EMULATOR
        std::memcpy(&x, base + r * stride + d0, 16);
#else
        const uint4 u = *reinterpret_cast<const uint4*>(base + r * stride + d0);
        x = TcChunk{{u.x, u.y, u.z, u.w}};
#endif
      }
#ifdef SINKFLEX_CUDA_EMULATOR
      std::memcpy(S + r * SP + d0, &x, 16);
#else
      *reinterpret_cast<uint4*>(S + r * SP + d0) = make_uint4(x.w[0], x.w[1], x.w[2], x.w[3]);
#endif
    }
  } else {
    for (int e = threadIdx.x; e < ROWS * DB; e += THREADS) {
      const int r = e / DB, d = e % DB;
      const std::uint16_t x = r < valid && d < D ? base[r * stride + d] : std::uint16_t{0};
      S[r * SP + d] = x;
    }
  }
}

/** Whether CUDA device `device` has bf16 and fp16 tensor cores (compute capability 8.0 or later). */
bool DeviceHasBf16TensorCores(int device);
/** The number of multiprocessors of CUDA device `device` (at least 1). */
int MultiProcessors(int device);

}  // namespace sinkflex::attention::cuda
