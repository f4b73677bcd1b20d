// Reference: docs/design.md, "GRPO — semantics" (policy loss, KL term, aggregation, gradient,
//   metrics); float64 reference: test/grpo/fixtures/reference.ts.
// Tests: test/grpo/policy-loss.test.ts, policy-loss-errors.test.ts, determinism.test.ts.
// Float/int vectors of SINKFLEX_LANES lanes (8 = 256-bit for AVX2/AVX-512 code, 4 = 128-bit
// for SSE2/NEON) for the GRPO token loops, written with GCC/Clang vector extensions and a
// plain-array fallback for other compilers. Each translation unit defines SINKFLEX_LANES
// before including this header; everything lives in a namespace named after the lane count,
// so the 4- and 8-lane builds of the same kernel coexist in one binary. Includes a
// single-precision exp for clamped arguments (the libm call cannot be vectorised).
#pragma once

#include <cstdint>
#include <cstring>

#ifndef SINKFLEX_LANES
#error "define SINKFLEX_LANES (4 or 8) before including simd.h"
#endif
#if SINKFLEX_LANES == 8
#define SINKFLEX_SIMD_NS lanes8
#elif SINKFLEX_LANES == 4
#define SINKFLEX_SIMD_NS lanes4
#else
#error "SINKFLEX_LANES must be 4 or 8"
#endif

#if defined(__GNUC__)
#define SINKFLEX_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define SINKFLEX_ALWAYS_INLINE inline
#endif

namespace sinkflex::grpo::SINKFLEX_SIMD_NS {

constexpr int kVec = SINKFLEX_LANES;

#if (defined(__GNUC__) || defined(__clang__)) && !defined(SINKFLEX_NO_VECTOR_EXT)
#if defined(__GNUC__) && !defined(__clang__)
// Every function taking or returning these types is inlined: no ABI is involved.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float FV __attribute__((vector_size(4 * SINKFLEX_LANES)));
typedef std::int32_t IV __attribute__((vector_size(4 * SINKFLEX_LANES)));
SINKFLEX_ALWAYS_INLINE FV AsF(const IV& v) { return (FV)v; }  // vector casts are bit casts
SINKFLEX_ALWAYS_INLINE IV AsI(const FV& v) { return (IV)v; }
SINKFLEX_ALWAYS_INLINE IV ToInt(const FV& v) { return __builtin_convertvector(v, IV); }
#if SINKFLEX_LANES == 8
SINKFLEX_ALWAYS_INLINE FV Splat(float x) { return FV{x, x, x, x, x, x, x, x}; }
SINKFLEX_ALWAYS_INLINE IV SplatI(std::int32_t x) { return IV{x, x, x, x, x, x, x, x}; }
#else
SINKFLEX_ALWAYS_INLINE FV Splat(float x) { return FV{x, x, x, x}; }
SINKFLEX_ALWAYS_INLINE IV SplatI(std::int32_t x) { return IV{x, x, x, x}; }
#endif
#else
// Fallback: element-wise structs with the operators the kernels use. Comparisons give
// -1 (true) or 0 per lane, as the vector extensions do.
template <typename T>
struct VN {
  T v[kVec];
  T& operator[](int i) { return v[i]; }
  T operator[](int i) const { return v[i]; }
};
using FV = VN<float>;
using IV = VN<std::int32_t>;
#define SINKFLEX_VN_BINOP(R, A, op)                           \
  inline R operator op(const A& a, const A& b) {              \
    R r;                                                      \
    for (int i = 0; i < kVec; ++i) r.v[i] = a.v[i] op b.v[i]; \
    return r;                                                 \
  }
#define SINKFLEX_VN_CMP(A, op)                                         \
  inline IV operator op(const A& a, const A& b) {                      \
    IV r;                                                              \
    for (int i = 0; i < kVec; ++i) r.v[i] = a.v[i] op b.v[i] ? -1 : 0; \
    return r;                                                          \
  }
// The operators, one macro invocation each (no semicolons, so clang-format leaves them alone).
// clang-format off
SINKFLEX_VN_BINOP(FV, FV, +) SINKFLEX_VN_BINOP(FV, FV, -) SINKFLEX_VN_BINOP(FV, FV, *)
SINKFLEX_VN_BINOP(IV, IV, +) SINKFLEX_VN_BINOP(IV, IV, -) SINKFLEX_VN_BINOP(IV, IV, &)
SINKFLEX_VN_BINOP(IV, IV, |)
SINKFLEX_VN_CMP(FV, >) SINKFLEX_VN_CMP(FV, <) SINKFLEX_VN_CMP(FV, >=) SINKFLEX_VN_CMP(FV, <=)
SINKFLEX_VN_CMP(FV, ==) SINKFLEX_VN_CMP(FV, !=)
#undef SINKFLEX_VN_BINOP
#undef SINKFLEX_VN_CMP
inline FV operator-(const FV& a) {
  FV r;
  for (int i = 0; i < kVec; ++i) r.v[i] = -a.v[i];
  return r;
}
// clang-format on
inline IV operator~(const IV& a) {
  IV r;
  for (int i = 0; i < kVec; ++i) r.v[i] = ~a.v[i];
  return r;
}
inline IV operator<<(const IV& a, int s) {
  IV r;
  for (int i = 0; i < kVec; ++i) r.v[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(a.v[i]) << s);
  return r;
}
inline FV AsF(const IV& v) {
  FV r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}
inline IV AsI(const FV& v) {
  IV r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}
inline IV ToInt(const FV& v) {
  IV r;
  for (int i = 0; i < kVec; ++i) r.v[i] = static_cast<std::int32_t>(v.v[i]);
  return r;
}
inline FV Splat(float x) {
  FV r;
  for (int i = 0; i < kVec; ++i) r.v[i] = x;
  return r;
}
inline IV SplatI(std::int32_t x) {
  IV r;
  for (int i = 0; i < kVec; ++i) r.v[i] = x;
  return r;
}
#endif

SINKFLEX_ALWAYS_INLINE FV Load(const float* p) {
  FV v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
SINKFLEX_ALWAYS_INLINE void Store(float* p, const FV& v) { std::memcpy(p, &v, sizeof v); }

/** Per lane: m (-1 or 0) ? a : b. */
SINKFLEX_ALWAYS_INLINE FV Select(const IV& m, const FV& a, const FV& b) {
#if defined(__GNUC__) && !defined(__clang__) && !defined(SINKFLEX_NO_VECTOR_EXT)
  return m ? a : b;  // GCC's vector conditional: one blend instruction
#else
  return AsF((m & AsI(a)) | (~m & AsI(b)));
#endif
}

/** min(max(x, lo), hi) as torch.clamp; a NaN lane gives lo (only reachable with invalid input). */
SINKFLEX_ALWAYS_INLINE FV Clamp(const FV& x, const FV& lo, const FV& hi) {
  const FV a = Select(x > lo, x, lo);  // the exact semantics of x86 max/min: one instruction each
  return Select(a < hi, a, hi);
}

/** |x|. */
SINKFLEX_ALWAYS_INLINE FV Abs(const FV& x) { return AsF(AsI(x) & SplatI(0x7fffffff)); }

/** -1 where the lane is finite, else 0. */
SINKFLEX_ALWAYS_INLINE IV Finite(const FV& x) { return Abs(x) <= Splat(3.40282347e+38f); }

/**
 * e^x for lanes in [-20, 20] (callers clamp first), about 2 ulp: x = k ln2 + r with
 * |r| <= ln2/2 (Cody–Waite split of ln2), e^r = 1 + r (1 + r h) by its Taylor polynomial of
 * degree 7 (truncation < 6e-9 relative), 2^k assembled in the exponent bits (k in [-29, 29]).
 * Also returns k and h = (e^r - 1 - r) / r^2 = 1/2 + r/6 + ..., from which callers get
 * e^x - 1 - x without cancellation where k = 0 (then r = x exactly).
 */
SINKFLEX_ALWAYS_INLINE FV ExpParts(const FV& x, FV* kOut, FV* hOut) {
  const FV kRound = Splat(12582912.0f);  // 1.5 * 2^23: (t + kRound) - kRound rounds t to an integer
  const FV k = (x * Splat(1.44269504088896341f) + kRound) - kRound;
  const FV r = (x - k * Splat(0.693359375f)) - k * Splat(-2.12194440e-4f);  // 0.693359375: k * it is exact
  FV h = Splat(1.0f / 5040.0f);
  h = h * r + Splat(1.0f / 720.0f);
  h = h * r + Splat(1.0f / 120.0f);
  h = h * r + Splat(1.0f / 24.0f);
  h = h * r + Splat(1.0f / 6.0f);
  h = h * r + Splat(0.5f);
  const FV p = (h * r + Splat(1.0f)) * r + Splat(1.0f);
  *kOut = k;
  *hOut = h;
  return p * AsF((ToInt(k) + SplatI(127)) << 23);
}

/** e^x for lanes in [-20, 20] (see ExpParts). */
SINKFLEX_ALWAYS_INLINE FV ExpClamped(const FV& x) {
  FV k, h;
  return ExpParts(x, &k, &h);
}

}  // namespace sinkflex::grpo::SINKFLEX_SIMD_NS
