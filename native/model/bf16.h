// bfloat16 <-> float32 conversions (bf16 = the upper 16 bits of an IEEE float32). Widening is
// exact; narrowing rounds to nearest, ties to even, and keeps NaN a (quiet) NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace sinkflex::model {

/** The float32 value of bfloat16 bits (exact). */
inline float Bf16ToFloat(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/** The bfloat16 nearest to f (ties to even); NaN stays NaN, infinities stay infinite. */
inline std::uint16_t FloatToBf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace sinkflex::model
