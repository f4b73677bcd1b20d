// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// Body of the vectorised attention kernels, compiled once per instruction set. No include
// guard: kernels_{avx512,avx2,generic}.cc include it inside an anonymous namespace after
// defining
//   SFX_VBYTES      vector width in bytes (64, 32, 16)
//   SFX_NV          vectors per micro-kernel row (register blocking)
//   SFX_FMA(a,b,c)  a * b + c on vectors
//   SFX_MAXV(a,b)   lane-wise max, SFX_MINV(a,b) lane-wise min
// and after including <cstdint>, <cstring>, <math.h>, "kernels.h". It uses no std templates
// (their instantiations could be shared with other translation units compiled for another ISA).
// fused_impl.h (the fused tiles and the kernel table) follows it.

typedef float vf __attribute__((vector_size(SFX_VBYTES)));
typedef float vfu __attribute__((vector_size(SFX_VBYTES), aligned(4), may_alias));
typedef std::int32_t vi __attribute__((vector_size(SFX_VBYTES)));
constexpr int W = SFX_VBYTES / 4;
#ifndef SFX_ROWS
#define SFX_ROWS 4
#endif
constexpr int kRows = SFX_ROWS;  // micro-kernel rows
constexpr int kNv = SFX_NV;
constexpr float kInf = __builtin_inff();

inline vf Load(const float* p) { return *reinterpret_cast<const vfu*>(p); }
inline void Store(float* p, vf v) { *reinterpret_cast<vfu*>(p) = v; }
inline vf Splat(float s) { return vf{} + s; }
inline std::int64_t MinI(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline float MaxF(float a, float b) { return a > b ? a : b; }

inline float HSum(vf v) {
  float s = 0.0f;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
}

inline float HMax(vf v) {
  float m = v[0];
  for (int i = 1; i < W; ++i) m = MaxF(m, v[i]);
  return m;
}

// exp(x) for every lane: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, a degree-6
// polynomial (Cephes expf, ~1 ulp), 2^n through the exponent bits. exp(x < -86) = 0 (also for
// -inf and NaN), x > 88 saturates at exp(88).
inline vf Exp(vf x) {
  const vi keep = (vi)(x >= Splat(-86.0f));
  x = SFX_MINV(x, Splat(88.0f));
  x = SFX_MAXV(x, Splat(-86.0f));
  const vf magic = Splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const vf t = SFX_FMA(x, Splat(1.44269504088896341f), magic);
  const vi n = (vi)t - (vi)magic;
  const vf nf = t - magic;
  vf r = SFX_FMA(nf, Splat(-0.693359375f), x);
  r = SFX_FMA(nf, Splat(2.12194440e-4f), r);
  vf p = Splat(1.9875691500e-4f);
  p = SFX_FMA(p, r, Splat(1.3981999507e-3f));
  p = SFX_FMA(p, r, Splat(8.3334519073e-3f));
  p = SFX_FMA(p, r, Splat(4.1665795894e-2f));
  p = SFX_FMA(p, r, Splat(1.6666665459e-1f));
  p = SFX_FMA(p, r, Splat(5.0000001201e-1f));
  const vf y = SFX_FMA(p, r * r, r) + Splat(1.0f);
  const vi bits = (vi)y + (n << 23);
  return (vf)(bits & keep);
}

// ---- GEMM ---------------------------------------------------------------------------------

// C[R x NV*W] (+)= A[R x K] B[K x NV*W], accumulators in registers.
template <int R, int NV>
inline void Micro(std::int64_t K, const float* A, std::int64_t sAm, std::int64_t sAk, const float* B, std::int64_t ldb,
                  float* C, std::int64_t ldc, bool accumulate) {
  vf c[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) c[r][v] = accumulate ? Load(C + r * ldc + v * W) : vf{};
  }
  for (std::int64_t k = 0; k < K; ++k) {
    const float* bp = B + k * ldb;
    vf b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = Load(bp + v * W);
    const float* ap = A + k * sAk;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const vf a = Splat(ap[r * sAm]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) c[r][v] = SFX_FMA(a, b[v], c[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) Store(C + r * ldc + v * W, c[r][v]);
  }
}

template <int R>
inline void MicroNv(int nv, std::int64_t K, const float* A, std::int64_t sAm, std::int64_t sAk, const float* B,
                    std::int64_t ldb, float* C, std::int64_t ldc, bool acc) {
  if constexpr (kNv >= 4) {
    if (nv == 4) return Micro<R, 4>(K, A, sAm, sAk, B, ldb, C, ldc, acc);
    if (nv == 3) return Micro<R, 3>(K, A, sAm, sAk, B, ldb, C, ldc, acc);
  }
  if (nv == 2) return Micro<R, 2>(K, A, sAm, sAk, B, ldb, C, ldc, acc);
  Micro<R, 1>(K, A, sAm, sAk, B, ldb, C, ldc, acc);
}

void Gemm(const GemmArgs& g) {
  constexpr std::int64_t kKc = 256;  // K blocking keeps the B panel in cache for long K
  const std::int64_t nVec = g.N / W * W;
  if (g.K == 0) {
    if (!g.accumulate) {
      for (std::int64_t m = 0; m < g.M; ++m) std::memset(g.C + m * g.ldc, 0, static_cast<std::size_t>(g.N) * 4);
    }
    return;
  }
  for (std::int64_t k0 = 0; k0 < g.K; k0 += kKc) {
    const std::int64_t kc = MinI(kKc, g.K - k0);
    const bool acc = g.accumulate || k0 > 0;
    const float* A = g.A + k0 * g.sAk;
    const float* B = g.B + k0 * g.ldb;
    for (std::int64_t n0 = 0; n0 < nVec; n0 += kNv * W) {
      const int nv = static_cast<int>(MinI(kNv, (nVec - n0) / W));
      std::int64_t m0 = 0;
      for (; m0 + kRows <= g.M; m0 += kRows) {
        MicroNv<kRows>(nv, kc, A + m0 * g.sAm, g.sAm, g.sAk, B + n0, g.ldb, g.C + m0 * g.ldc + n0, g.ldc, acc);
      }
      const float* Am = A + m0 * g.sAm;
      float* Cm = g.C + m0 * g.ldc + n0;
      switch (g.M - m0) {
#if SFX_ROWS > 7
        case 7:
          MicroNv<7>(nv, kc, Am, g.sAm, g.sAk, B + n0, g.ldb, Cm, g.ldc, acc);
          break;
        case 6:
          MicroNv<6>(nv, kc, Am, g.sAm, g.sAk, B + n0, g.ldb, Cm, g.ldc, acc);
          break;
#endif
#if SFX_ROWS > 5
        case 5:
          MicroNv<5>(nv, kc, Am, g.sAm, g.sAk, B + n0, g.ldb, Cm, g.ldc, acc);
          break;
        case 4:
          MicroNv<4>(nv, kc, Am, g.sAm, g.sAk, B + n0, g.ldb, Cm, g.ldc, acc);
          break;
#endif
        case 3:
          MicroNv<3>(nv, kc, Am, g.sAm, g.sAk, B + n0, g.ldb, Cm, g.ldc, acc);
          break;
        case 2:
          MicroNv<2>(nv, kc, Am, g.sAm, g.sAk, B + n0, g.ldb, Cm, g.ldc, acc);
          break;
        case 1:
          MicroNv<1>(nv, kc, Am, g.sAm, g.sAk, B + n0, g.ldb, Cm, g.ldc, acc);
          break;
        default:
          break;
      }
    }
    for (std::int64_t n = nVec; n < g.N; ++n) {  // columns that do not fill a vector
      for (std::int64_t m = 0; m < g.M; ++m) {
        float s = acc ? g.C[m * g.ldc + n] : 0.0f;
        for (std::int64_t k = 0; k < kc; ++k) s += A[m * g.sAm + k * g.sAk] * B[k * g.ldb + n];
        g.C[m * g.ldc + n] = s;
      }
    }
  }
}

// ---- row operations -------------------------------------------------------------------------

float RowMax(const float* x, std::int64_t n) {
  vf m = Splat(-kInf);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) m = SFX_MAXV(m, Load(x + i));
  float r = HMax(m);
  for (; i < n; ++i) r = MaxF(r, x[i]);
  return r;
}

float ExpSubSum(const float* x, float* y, std::int64_t n, float mx) {
  const vf mv = Splat(mx);
  vf s = vf{};
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
    const vf e = Exp(Load(x + i) - mv);
    Store(y + i, e);
    s += e;
  }
  float total = HSum(s);
  if (i < n) {
    float tmp[W];
    for (int l = 0; l < W; ++l) tmp[l] = i + l < n ? x[i + l] : -kInf;
    const vf e = Exp(Load(tmp) - mv);
    for (std::int64_t l = 0; i + l < n; ++l) {
      y[i + l] = e[l];
      total += e[l];
    }
  }
  return total;
}

void ScaleRow(float* x, std::int64_t n, float a) {
  const vf av = Splat(a);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) Store(x + i, Load(x + i) * av);
  for (; i < n; ++i) x[i] *= a;
}

float Dot(const float* x, const float* y, std::int64_t n) {
  vf s = vf{};
  std::int64_t i = 0;
  for (; i + W <= n; i += W) s = SFX_FMA(Load(x + i), Load(y + i), s);
  float r = HSum(s);
  for (; i < n; ++i) r += x[i] * y[i];
  return r;
}

void SoftmaxGrad(const float* p, const float* dp, float* ds, std::int64_t n, float d) {
  const vf dv = Splat(d);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) Store(ds + i, Load(p + i) * (Load(dp + i) - dv));
  for (; i < n; ++i) ds[i] = p[i] * (dp[i] - d);
}
