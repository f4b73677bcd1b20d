// Reference: PTX ISA, "Warp-level matrix multiply-accumulate instructions": mma.sync.aligned
//   .m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 and its fragment layouts ("Matrix
//   fragments for mma.m16n8k16 with floating point type"), and ldmatrix.sync.aligned.m8n8.{x1,x2,x4}
//   [.trans].shared.b16 ("Warp-level matrix load instruction: ldmatrix").
// Tests: test/cuda-emulator/mma.test.ts (the emulator's warp-collective versions against a
//   float64 product on the documented layouts, both thread orders); on a GPU the GEMM and
//   attention tests that use them.
// The tensor-core instructions the CUDA kernels use, as small device functions: inline PTX under
// nvcc (device code, sm_80 and newer), and in the CUDA emulator build (scripts/cuda-emulator) the
// emulator's warp-collective implementation of the same operation over the 32 lanes' fragments,
// laid out as the PTX ISA documents them. Every lane of the warp must call them together (as on
// the GPU: .sync.aligned), with the same arguments where the PTX requires it.
//
// Fragments of mma.m16n8k16 (groupID g = lane / 4, t = lane % 4; a .b32 register holds two 16-bit
// elements, the lower column/row index in the lower half):
//   A (16 x 16, row major): a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..2t+1],
//                           a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9]
//   B (16 x 8, "col": k down): b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]
//   C, D (16 x 8 float32):  d[0..1] = D[g][2t..2t+1], d[2..3] = D[g+8][2t..2t+1]
// ldmatrix.m8n8 (x1, x2, x4 matrices of 8 x 8 16-bit elements): lane 8j + r gives the address
// of row r of matrix j (16-byte aligned, shared memory); lane l receives in register j the
// elements (l / 4, 2(l % 4)) and (l / 4, 2(l % 4) + 1) of matrix j, or with .trans the elements
// (2(l % 4), l / 4) and (2(l % 4) + 1, l / 4).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "dtype.h"

namespace sinkflex::mma {

/** The 16-bit element types of the tensor-core operands. */
enum class Operand { kBf16 = 0, kF16 = 1 };

/** d += A B for one m16n8k16 tile with bfloat16 operands and float32 accumulation (fragments above). */
__device__ __forceinline__ void MmaBf16(float d[4], const unsigned a[4], const unsigned b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
  __trap();  // below sm_80: the launches check the device first (TensorCoreArch) and never get here
#elif defined(SINKFLEX_CUDA_EMULATOR)
  ::emu::MmaM16N8K16(0, d, a, b);
#endif
}

/** d += A B for one m16n8k16 tile with float16 operands and float32 accumulation (fragments above). */
__device__ __forceinline__ void MmaF16(float d[4], const unsigned a[4], const unsigned b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
  __trap();  // below sm_80: the launches check the device first (TensorCoreArch) and never get here
#elif defined(SINKFLEX_CUDA_EMULATOR)
  ::emu::MmaM16N8K16(1, d, a, b);
#endif
}

/** d += A B with operands of type `Op` (MmaBf16 or MmaF16). */
template <Operand Op>
__device__ __forceinline__ void MmaM16N8K16(float d[4], const unsigned a[4], const unsigned b[2]) {
  if constexpr (Op == Operand::kF16)
    MmaF16(d, a, b);
  else
    MmaBf16(d, a, b);
}

/** ldmatrix.m8n8.x4 (.trans when `Trans`): `row` is this lane's row address in shared memory. */
template <bool Trans>
__device__ __forceinline__ void LdMatrixX4(unsigned r[4], const void* row) {
#if defined(__CUDA_ARCH__)
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if (Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
#elif defined(SINKFLEX_CUDA_EMULATOR)
  ::emu::LdMatrix(4, Trans, row, r);
#endif
}

/** ldmatrix.m8n8.x2 (.trans when `Trans`): lanes 0..15 give the row addresses (the others' are ignored). */
template <bool Trans>
__device__ __forceinline__ void LdMatrixX2(unsigned r[2], const void* row) {
#if defined(__CUDA_ARCH__)
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if (Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
  }
#elif defined(SINKFLEX_CUDA_EMULATOR)
  ::emu::LdMatrix(2, Trans, row, r);
#endif
}

/** Whether a device of compute capability `major`.x has the bfloat16/float16 mma.m16n8k16 used here. */
inline bool TensorCoreArch(int major) { return major >= 8; }

/** float32 -> bfloat16 bits, round to nearest even (NaN stays NaN). */
__device__ __forceinline__ unsigned short Bf16Bits(float f) {
  unsigned u;
  memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}

/** bfloat16 bits -> float32 (exact). */
__device__ __forceinline__ float Bf16Float(unsigned short bits) {
  const unsigned u = static_cast<unsigned>(bits) << 16;
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

/**
 * float32 -> float16 bits, round to nearest even (as cvt.rn.f16.f32 and PyTorch's
 * `.to(torch.float16)`): subnormals kept, magnitudes from 65520 on become infinity, NaN stays a
 * NaN (quiet). One instruction on the GPU; the same arithmetic in plain C++ on the emulator.
 */
__device__ __forceinline__ unsigned short F16Bits(float f) {
#if defined(__CUDA_ARCH__)
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(f));
  return h;
#else
  return ::sinkflex::FloatToF16(f);  // the same rounding in plain C++ (the emulator)
#endif
}

/** float16 bits -> float32 (exact). */
__device__ __forceinline__ float F16Float(unsigned short h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
  return f;
#else
  return ::sinkflex::F16ToFloat(h);
#endif
}

/** float32 -> the bits of the 16-bit operand type `Op` (round to nearest even). */
template <Operand Op>
__device__ __forceinline__ unsigned short Bits16(float f) {
  if constexpr (Op == Operand::kF16)
    return F16Bits(f);
  else
    return Bf16Bits(f);
}

/** Two 16-bit elements in one .b32 register: `lo` in the lower half (the lower index). */
__device__ __forceinline__ unsigned Pack2(unsigned short lo, unsigned short hi) {
  return static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16);
}

}  // namespace sinkflex::mma
