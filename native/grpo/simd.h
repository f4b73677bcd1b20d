// Eight-lane float/int vectors for the GRPO token loops, written with GCC/Clang vector
// extensions (SSE/AVX/AVX-512 on x86, NEON on ARM, chosen by the compiler and by the ISA
// clones below) and a plain-array fallback for other compilers. Includes a single-precision
// exp for clamped arguments; the libm call cannot be vectorised.
#pragma once

#include <cstdint>
#include <cstring>

// GCC on x86-64 Linux: one clone per ISA level, picked at load time through an ifunc
// (shipped binaries have no -march=native).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SINKFLEX_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SINKFLEX_ISA_CLONES
#endif

#if defined(__GNUC__)
#define SINKFLEX_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define SINKFLEX_ALWAYS_INLINE inline
#endif

namespace sinkflex::grpo {

constexpr int kVec = 8;

#if (defined(__GNUC__) || defined(__clang__)) && !defined(SINKFLEX_NO_VECTOR_EXT)
#if defined(__GNUC__) && !defined(__clang__)
// Every function taking or returning these types is inlined: no ABI is involved.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float F8 __attribute__((vector_size(32)));
typedef std::int32_t I8 __attribute__((vector_size(32)));
SINKFLEX_ALWAYS_INLINE F8 AsF(const I8& v) { return (F8)v; }  // vector casts are bit casts
SINKFLEX_ALWAYS_INLINE I8 AsI(const F8& v) { return (I8)v; }
SINKFLEX_ALWAYS_INLINE I8 ToInt(const F8& v) { return __builtin_convertvector(v, I8); }
SINKFLEX_ALWAYS_INLINE F8 Splat(float x) { return F8{x, x, x, x, x, x, x, x}; }
SINKFLEX_ALWAYS_INLINE I8 SplatI(std::int32_t x) { return I8{x, x, x, x, x, x, x, x}; }
#else
// Fallback: element-wise structs with the operators the kernels use. Comparisons give
// -1 (true) or 0 per lane, as the vector extensions do.
template <typename T>
struct V8 {
  T v[kVec];
  T& operator[](int i) { return v[i]; }
  T operator[](int i) const { return v[i]; }
};
using F8 = V8<float>;
using I8 = V8<std::int32_t>;
#define SINKFLEX_V8_BINOP(R, A, op)                             \
  inline R operator op(const A& a, const A& b) {                \
    R r;                                                        \
    for (int i = 0; i < kVec; ++i) r.v[i] = a.v[i] op b.v[i];   \
    return r;                                                   \
  }
#define SINKFLEX_V8_CMP(A, op)                                          \
  inline I8 operator op(const A& a, const A& b) {                       \
    I8 r;                                                               \
    for (int i = 0; i < kVec; ++i) r.v[i] = a.v[i] op b.v[i] ? -1 : 0;  \
    return r;                                                           \
  }
SINKFLEX_V8_BINOP(F8, F8, +) SINKFLEX_V8_BINOP(F8, F8, -) SINKFLEX_V8_BINOP(F8, F8, *)
SINKFLEX_V8_BINOP(I8, I8, +) SINKFLEX_V8_BINOP(I8, I8, -) SINKFLEX_V8_BINOP(I8, I8, &)
SINKFLEX_V8_BINOP(I8, I8, |)
SINKFLEX_V8_CMP(F8, >) SINKFLEX_V8_CMP(F8, <) SINKFLEX_V8_CMP(F8, >=) SINKFLEX_V8_CMP(F8, <=)
SINKFLEX_V8_CMP(F8, ==) SINKFLEX_V8_CMP(F8, !=)
#undef SINKFLEX_V8_BINOP
#undef SINKFLEX_V8_CMP
inline F8 operator-(const F8& a) {
  F8 r;
  for (int i = 0; i < kVec; ++i) r.v[i] = -a.v[i];
  return r;
}
inline I8 operator~(const I8& a) {
  I8 r;
  for (int i = 0; i < kVec; ++i) r.v[i] = ~a.v[i];
  return r;
}
inline I8 operator<<(const I8& a, int s) {
  I8 r;
  for (int i = 0; i < kVec; ++i) r.v[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(a.v[i]) << s);
  return r;
}
inline F8 AsF(const I8& v) {
  F8 r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}
inline I8 AsI(const F8& v) {
  I8 r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}
inline I8 ToInt(const F8& v) {
  I8 r;
  for (int i = 0; i < kVec; ++i) r.v[i] = static_cast<std::int32_t>(v.v[i]);
  return r;
}
inline F8 Splat(float x) {
  F8 r;
  for (int i = 0; i < kVec; ++i) r.v[i] = x;
  return r;
}
inline I8 SplatI(std::int32_t x) {
  I8 r;
  for (int i = 0; i < kVec; ++i) r.v[i] = x;
  return r;
}
#endif

SINKFLEX_ALWAYS_INLINE F8 Load(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
SINKFLEX_ALWAYS_INLINE void Store(float* p, const F8& v) { std::memcpy(p, &v, sizeof v); }

/** Per lane: m (-1 or 0) ? a : b. */
SINKFLEX_ALWAYS_INLINE F8 Select(const I8& m, const F8& a, const F8& b) { return AsF((m & AsI(a)) | (~m & AsI(b))); }

/** min(max(x, lo), hi) as torch.clamp; a NaN lane gives lo (only reachable with invalid input). */
SINKFLEX_ALWAYS_INLINE F8 Clamp(const F8& x, const F8& lo, const F8& hi) {
  const F8 a = Select(x > lo, x, lo);
  return Select(a < hi, a, hi);
}

/** |x|. */
SINKFLEX_ALWAYS_INLINE F8 Abs(const F8& x) { return AsF(AsI(x) & SplatI(0x7fffffff)); }

/** -1 where the lane is finite, else 0. */
SINKFLEX_ALWAYS_INLINE I8 Finite(const F8& x) { return Abs(x) <= Splat(3.40282347e+38f); }

/**
 * e^x for lanes in [-20, 20] (callers clamp first), about 2 ulp: x = k ln2 + r with
 * |r| <= ln2/2 (Cody–Waite split of ln2), e^r by its Taylor polynomial of degree 7
 * (truncation < 6e-9 relative), 2^k assembled in the exponent bits (k in [-29, 29]).
 */
SINKFLEX_ALWAYS_INLINE F8 ExpClamped(const F8& x) {
  const F8 kRound = Splat(12582912.0f);  // 1.5 * 2^23: (t + kRound) - kRound rounds t to an integer
  const F8 k = (x * Splat(1.44269504088896341f) + kRound) - kRound;
  const F8 r = (x - k * Splat(0.693359375f)) - k * Splat(-2.12194440e-4f);  // 0.693359375: k * it is exact
  F8 p = Splat(1.0f / 5040.0f);
  p = p * r + Splat(1.0f / 720.0f);
  p = p * r + Splat(1.0f / 120.0f);
  p = p * r + Splat(1.0f / 24.0f);
  p = p * r + Splat(1.0f / 6.0f);
  p = p * r + Splat(0.5f);
  p = p * r + Splat(1.0f);
  p = p * r + Splat(1.0f);
  return p * AsF((ToInt(k) + SplatI(127)) << 23);
}

}  // namespace sinkflex::grpo
