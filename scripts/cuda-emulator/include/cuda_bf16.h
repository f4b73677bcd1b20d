// Stand-in for <cuda_bf16.h> in the CUDA emulator build: the bf16 type and its two conversions.
#pragma once

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
  std::uint16_t bits;
};

inline float __bfloat162float(__nv_bfloat16 h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{static_cast<std::uint16_t>(u >> 16)};
}
