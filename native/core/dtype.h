// Element types of tensors that live on a device (native/core/tensor_storage.h) and of the
// CUDA kernels: fp32, bfloat16 and IEEE half (float16), the 16-bit ones stored as their bits.
// Host-side conversions round to nearest even, like the CUDA intrinsics __float2bfloat16_rn and
// __float2half_rn (and PyTorch's .to(torch.bfloat16 / torch.float16)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sinkflex {

enum class DType : std::uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2 };

/** "float32", "bfloat16" or "float16". */
inline const char* DTypeName(DType t) {
  return t == DType::kBF16 ? "bfloat16" : t == DType::kF16 ? "float16" : "float32";
}
/** Bytes of one element. */
inline std::size_t DTypeSize(DType t) { return t == DType::kF32 ? 4 : 2; }

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

/**
 * fp32 -> IEEE half bits, round to nearest even: subnormals (units of 2^-24) kept, magnitudes
 * from 65520 on become infinity, NaN stays a (quiet) NaN.
 */
inline std::uint16_t FloatToF16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504: infinity
  if (a < 0x38800000u) {                                // below 2^-14: a subnormal (unit 2^-24) or zero
    const std::uint32_t e = a >> 23, shift = 126u - e;  // value = mant 2^(e - 150) = (mant >> shift) units
    if (e == 0u || shift > 24u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t mant = (a & 0x7fffffu) | 0x800000u, rem = mant & ((1u << shift) - 1u),
                        half = 1u << (shift - 1u);
    std::uint32_t r = mant >> shift;
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t h = (a - 0x38000000u) >> 13;  // exponent rebiased (127 -> 15), 10 significand bits
  const std::uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent, as it should
  return static_cast<std::uint16_t>(sign | h);
}

/** IEEE half bits -> fp32 (exact). */
inline float F16ToFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  std::uint32_t bits;
  if (e == 0x1fu) {
    bits = sign | 0x7f800000u | (m << 13);  // infinity or NaN
  } else if (e != 0u) {
    bits = sign | ((e + 112u) << 23) | (m << 13);
  } else {  // zero or subnormal: m 2^-24, exact in fp32
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/** dst[i] = the 16-bit bits of src[i] as `t` (kBF16 or kF16) for i < n. */
inline void FloatsTo16(DType t, const float* src, std::uint16_t* dst, std::size_t n) {
  if (t == DType::kF16) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = FloatToF16(src[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = FloatToBf16(src[i]);
  }
}
/** dst[i] = float(src[i]) for 16-bit elements of type `t` (kBF16 or kF16), i < n. */
inline void Floats16To(DType t, const std::uint16_t* src, float* dst, std::size_t n) {
  if (t == DType::kF16) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = F16ToFloat(src[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(src[i]);
  }
}

}  // namespace sinkflex
