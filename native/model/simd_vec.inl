// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/reference.ts.
// Tests: test/model/linear-rmsnorm.test.ts, rope-swiglu.test.ts, embedding-softmax.test.ts,
//   mlp-block.test.ts, adamw-param-store.test.ts, isa-avx2.test.ts, isa-generic.test.ts,
//   determinism.test.ts, bindings.test.ts.
// A small vector type for one instruction set, chosen by SINKFLEX_ISA before inclusion:
// 1 = portable (8 floats in an array; the compiler maps it to whatever the baseline has),
// 2 = AVX2 + FMA (__m256), 3 = AVX-512F (__m512). Included by kernels_<isa>.cc inside the
// target pragma region; everything is in an anonymous namespace so the three copies never
// meet at link time. Do not use standard-library templates in here (their instantiations
// would carry the target attribute into shared COMDAT symbols).
//
// Semantics shared by all three: Max(a, b) = a > b ? a : b and Min(a, b) = a < b ? a : b
// (so Max(limit, x) / Min(limit, x) return x when x is NaN: NaN propagates through clamps).

#ifndef SINKFLEX_ISA
#error "define SINKFLEX_ISA before including simd_vec.inl"
#endif

namespace sinkflex::model {
namespace {

#if SINKFLEX_ISA == 3  // ------------------------------------------------------------ AVX-512

struct Vec {
  static constexpr int kWidth = 16;
  __m512 r;
  static Vec Load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec Set1(float x) { return {_mm512_set1_ps(x)}; }
  static Vec Zero() { return {_mm512_setzero_ps()}; }
  /** The first n (< kWidth) lanes from p, the others `fill`. */
  static Vec LoadPartial(const float* p, int n, float fill) {
    return {_mm512_mask_loadu_ps(_mm512_set1_ps(fill), static_cast<__mmask16>((1u << n) - 1u), p)};
  }
  /** kWidth bfloat16 values (bits) widened exactly. */
  static Vec LoadBf16(const std::uint16_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
  }
  void Store(float* p) const { _mm512_storeu_ps(p, r); }
  void StorePartial(float* p, int n) const { _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), r); }
  float Sum() const { return _mm512_reduce_add_ps(r); }
  float MaxLane() const { return _mm512_reduce_max_ps(r); }
};
inline Vec operator+(Vec a, Vec b) { return {_mm512_add_ps(a.r, b.r)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm512_sub_ps(a.r, b.r)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm512_mul_ps(a.r, b.r)}; }
inline Vec operator/(Vec a, Vec b) { return {_mm512_div_ps(a.r, b.r)}; }
/** a * b + c, fused. */
inline Vec Fma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.r, b.r, c.r)}; }
inline Vec Max(Vec a, Vec b) { return {_mm512_max_ps(a.r, b.r)}; }
inline Vec Min(Vec a, Vec b) { return {_mm512_min_ps(a.r, b.r)}; }
inline Vec Sqrt(Vec a) { return {_mm512_sqrt_ps(a.r)}; }
/** 1.0 where a >= b, else 0.0 (0.0 when either is NaN). */
inline Vec Ge(Vec a, Vec b) {
  return {_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a.r, b.r, _CMP_GE_OQ), _mm512_set1_ps(1.0f))};
}
/** 2^n for integer-valued n in [-126, 127]. */
inline Vec Pow2i(Vec n) {
  const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n.r), _mm512_set1_epi32(127));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(e, 23))};
}

#elif SINKFLEX_ISA == 2  // ---------------------------------------------------------- AVX2+FMA

struct Vec {
  static constexpr int kWidth = 8;
  __m256 r;
  static __m256i Mask(int n) {
    alignas(32) static const std::int32_t kBits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 8 - n));
  }
  static Vec Load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static Vec Set1(float x) { return {_mm256_set1_ps(x)}; }
  static Vec Zero() { return {_mm256_setzero_ps()}; }
  static Vec LoadPartial(const float* p, int n, float fill) {
    const __m256i m = Mask(n);
    return {_mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m))};
  }
  static Vec LoadBf16(const std::uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
  }
  void Store(float* p) const { _mm256_storeu_ps(p, r); }
  void StorePartial(float* p, int n) const { _mm256_maskstore_ps(p, Mask(n), r); }
  float Sum() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  float MaxLane() const {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
};
inline Vec operator+(Vec a, Vec b) { return {_mm256_add_ps(a.r, b.r)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm256_sub_ps(a.r, b.r)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm256_mul_ps(a.r, b.r)}; }
inline Vec operator/(Vec a, Vec b) { return {_mm256_div_ps(a.r, b.r)}; }
inline Vec Fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.r, b.r, c.r)}; }
inline Vec Max(Vec a, Vec b) { return {_mm256_max_ps(a.r, b.r)}; }
inline Vec Min(Vec a, Vec b) { return {_mm256_min_ps(a.r, b.r)}; }
inline Vec Sqrt(Vec a) { return {_mm256_sqrt_ps(a.r)}; }
inline Vec Ge(Vec a, Vec b) { return {_mm256_and_ps(_mm256_cmp_ps(a.r, b.r, _CMP_GE_OQ), _mm256_set1_ps(1.0f))}; }
inline Vec Pow2i(Vec n) {
  const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n.r), _mm256_set1_epi32(127));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(e, 23))};
}

#else  // ----------------------------------------------------------------------------- portable

struct Vec {
  static constexpr int kWidth = 8;
  float r[8];
  static Vec Load(const float* p) {
    Vec v;
    for (int i = 0; i < 8; ++i) v.r[i] = p[i];
    return v;
  }
  static Vec Set1(float x) {
    Vec v;
    for (int i = 0; i < 8; ++i) v.r[i] = x;
    return v;
  }
  static Vec Zero() { return Set1(0.0f); }
  static Vec LoadPartial(const float* p, int n, float fill) {
    Vec v;
    for (int i = 0; i < 8; ++i) v.r[i] = i < n ? p[i] : fill;
    return v;
  }
  static Vec LoadBf16(const std::uint16_t* p) {
    Vec v;
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t bits = static_cast<std::uint32_t>(p[i]) << 16;
      std::memcpy(&v.r[i], &bits, sizeof(float));
    }
    return v;
  }
  void Store(float* p) const {
    for (int i = 0; i < 8; ++i) p[i] = r[i];
  }
  void StorePartial(float* p, int n) const {
    for (int i = 0; i < n; ++i) p[i] = r[i];
  }
  float Sum() const {
    float a = (r[0] + r[4]) + (r[2] + r[6]);
    float b = (r[1] + r[5]) + (r[3] + r[7]);
    return a + b;
  }
  float MaxLane() const {
    float m = r[0];
    for (int i = 1; i < 8; ++i) m = r[i] > m ? r[i] : m;
    return m;
  }
};
#define SINKFLEX_VEC_BINOP(op)                             \
  inline Vec operator op(Vec a, Vec b) {                   \
    Vec v;                                                 \
    for (int i = 0; i < 8; ++i) v.r[i] = a.r[i] op b.r[i]; \
    return v;                                              \
  }
SINKFLEX_VEC_BINOP(+)
SINKFLEX_VEC_BINOP(-)
SINKFLEX_VEC_BINOP(*)
SINKFLEX_VEC_BINOP(/)
#undef SINKFLEX_VEC_BINOP
inline Vec Fma(Vec a, Vec b, Vec c) {
  Vec v;
  for (int i = 0; i < 8; ++i) v.r[i] = a.r[i] * b.r[i] + c.r[i];
  return v;
}
inline Vec Max(Vec a, Vec b) {
  Vec v;
  for (int i = 0; i < 8; ++i) v.r[i] = a.r[i] > b.r[i] ? a.r[i] : b.r[i];
  return v;
}
inline Vec Min(Vec a, Vec b) {
  Vec v;
  for (int i = 0; i < 8; ++i) v.r[i] = a.r[i] < b.r[i] ? a.r[i] : b.r[i];
  return v;
}
inline Vec Sqrt(Vec a) {
  Vec v;
  for (int i = 0; i < 8; ++i) v.r[i] = std::sqrt(a.r[i]);
  return v;
}
inline Vec Ge(Vec a, Vec b) {
  Vec v;
  for (int i = 0; i < 8; ++i) v.r[i] = a.r[i] >= b.r[i] ? 1.0f : 0.0f;
  return v;
}
inline Vec Pow2i(Vec n) {
  Vec v;
  for (int i = 0; i < 8; ++i) {
    const std::int32_t bits = (static_cast<std::int32_t>(n.r[i]) + 127) << 23;
    std::memcpy(&v.r[i], &bits, sizeof(float));
  }
  return v;
}

#endif

// ---- shared math on Vec -----------------------------------------------------------------------

/**
 * exp(x) to about 1 ulp (Cephes expf polynomial after a Cody-Waite reduction by ln 2):
 * x < -87 gives 0, x > 88 is clamped to exp(88), NaN stays NaN.
 */
inline Vec Exp(Vec x) {
  const Vec lo = Vec::Set1(-87.0f), hi = Vec::Set1(88.0f);
  const Vec xc = Min(hi, Max(lo, x));
  const Vec magic = Vec::Set1(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const Vec n = Fma(xc, Vec::Set1(1.44269504088896341f), magic) - magic;
  Vec r = Fma(n, Vec::Set1(-0.693359375f), xc);
  r = Fma(n, Vec::Set1(2.12194440e-4f), r);
  Vec p = Vec::Set1(1.9875691500e-4f);
  p = Fma(p, r, Vec::Set1(1.3981999507e-3f));
  p = Fma(p, r, Vec::Set1(8.3334519073e-3f));
  p = Fma(p, r, Vec::Set1(4.1665795894e-2f));
  p = Fma(p, r, Vec::Set1(1.6666665459e-1f));
  p = Fma(p, r, Vec::Set1(5.0000001201e-1f));
  const Vec y = Fma(p, r * r, r + Vec::Set1(1.0f));
  return y * Pow2i(n) * Ge(x, lo);
}

/** 1 / (1 + exp(-x)). */
inline Vec Sigmoid(Vec x) {
  const Vec one = Vec::Set1(1.0f);
  return one / (one + Exp(Vec::Zero() - x));
}

}  // namespace
}  // namespace sinkflex::model
