// Element types of tensors that live on a device (native/core/tensor_storage.h) and of the
// CUDA kernels: fp32 and bfloat16 (stored as its 16 bits). Host-side conversions round to
// nearest even, like the CUDA intrinsic __float2bfloat16_rn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sinkflex {

enum class DType : std::uint8_t { kF32 = 0, kBF16 = 1 };

/** "float32" or "bfloat16". */
inline const char* DTypeName(DType t) { return t == DType::kBF16 ? "bfloat16" : "float32"; }
/** Bytes of one element. */
inline std::size_t DTypeSize(DType t) { return t == DType::kBF16 ? 2 : 4; }

/** fp32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN. */
inline std::uint16_t FloatToBf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

/** bf16 bits -> fp32 (exact). */
inline float Bf16ToFloat(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/** dst[i] = bf16(src[i]) for i < n. */
inline void FloatsToBf16(const float* src, std::uint16_t* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = FloatToBf16(src[i]);
}
/** dst[i] = float(src[i]) for i < n. */
inline void Bf16ToFloats(const std::uint16_t* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(src[i]);
}

}  // namespace sinkflex
