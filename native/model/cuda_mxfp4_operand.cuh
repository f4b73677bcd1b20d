// Reference: the MXFP4 decoder of the loader (lib/model/hf/mxfp4.ts, transformers' semantics) and
//   the CPU's (mxfp4.h): value = FP4_E2M1[code] * 2^(scale - 127).
// Tests: test/model/cuda-moe.test.ts (float32 kernel) and cuda-gemm-tc.test.ts (tensor-core
//   kernel): the MoE op over packed experts gives the bits of its bfloat16 dequantization.
// A packed MXFP4 GEMM operand addressed like a pointer to its elements, and its exact decode to
// float32, shared by the float32 GEMM (cuda_gemm.cuh) and the bfloat16 tensor-core GEMM
// (cuda_gemm_tc.cuh). No lookup table: the E2M1 magnitude is computed from the code's bits, so
// the same function serves host and device. Included by .cu files only (an anonymous namespace).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace sinkflex::model::cuda {
namespace {

/**
 * An MXFP4 operand (mxfp4.h: 4-bit E2M1 codes two to a byte, low nibble first, one E8M0 scale
 * byte per 32 elements; rows of whole blocks) addressed like a pointer to its elements.
 */
struct Mxfp4Operand {
  const std::uint8_t* blocks;
  const std::uint8_t* scales;
  long long offset;
  __host__ __device__ Mxfp4Operand operator+(long long n) const { return Mxfp4Operand{blocks, scales, offset + n}; }
};

/**
 * The element an Mxfp4Operand points at as float32: FP4[code] * float32(2^(scale - 127)) —
 * exact (the E2M1 magnitudes have at most two significant bits; scale 0 gives the subnormal
 * 2^-127, so the smallest nonzero value is 2^-128, still a float32 and a bfloat16 subnormal;
 * a product past float32's range is infinity, scale 255 gives infinity, and a NaN (0 x infinity)
 * is the canonical 0x7FC00000 the CPU decoder writes). Every finite result has at most two
 * significant bits within float32's exponent range, so it is also a bfloat16 number: rounding it
 * to bfloat16 returns it unchanged, its bfloat16 dequantization.
 */
__host__ __device__ __forceinline__ float Mxfp4Value(const Mxfp4Operand& p) {
  const unsigned byte = p.blocks[p.offset >> 1];
  const unsigned code = (p.offset & 1) ? (byte >> 4) : (byte & 15u);
  const unsigned scale = p.scales[p.offset >> 5];
  const unsigned e = (code >> 1) & 3u, m = code & 1u;
  const float mag =
      e == 0 ? 0.5f * static_cast<float>(m) : (1.0f + 0.5f * static_cast<float>(m)) * static_cast<float>(1u << (e - 1));
  const unsigned powerBits = scale == 0 ? 0x00400000u : scale << 23;  // 2^(scale - 127); 255 -> infinity
  float power;
  memcpy(&power, &powerBits, sizeof(power));
  float v = mag * power;
  if (code & 8u) v = -v;
  if (v != v) {
    const unsigned nan = 0x7fc00000u;
    memcpy(&v, &nan, sizeof(v));
  }
  return v;
}

}  // namespace
}  // namespace sinkflex::model::cuda
