// Reference: the float64 refGemm in test/model/fixtures/reference.ts.
// Tests: test/model/gemm.test.ts (and every op test that goes through the GEMM).
// GEMM inner kernels over `Vec` (simd_vec.inl), compiled per instruction set by
// kernels_<isa>.cc: the register-tiled micro-kernel of the packed path, small-M kernels that
// stream B without packing (decode-time matrix-vector work), and an FMA burn loop used to
// estimate the machine's peak.

namespace sinkflex::model {
namespace {

/**
 * MR x (NV * W) register tile: for each of kc steps, NV vector loads of the packed B row,
 * MR broadcasts of the A column (packed: a[p * MR + i]; direct: a[i * lda + p], read from
 * the row-major source without packing), MR * NV fused multiply-adds into accumulators.
 */
template <int MR, int NV, bool kDirectA = false>
void GemmMicroT(std::int64_t kc, const float* a, std::int64_t lda, const float* b, float* c, std::int64_t ldc,
                float alpha, float beta, int m, int n) {
  constexpr int NR = NV * W;
  Vec acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = Vec::Zero();
  }
  for (std::int64_t p = 0; p < kc; ++p) {
    Vec bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) bv[j] = Vec::Load(b + j * W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const Vec av = Vec::Set1(kDirectA ? a[i * lda] : a[i]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = Fma(av, bv[j], acc[i][j]);
    }
    a += kDirectA ? 1 : MR;
    b += NR;
  }
  const Vec alphaV = Vec::Set1(alpha), betaV = Vec::Set1(beta);
  if (m == MR && n == NR) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      float* cr = c + i * ldc;
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        Vec r = acc[i][j] * alphaV;
        if (beta != 0.0f) r = Fma(Vec::Load(cr + j * W), betaV, r);
        r.Store(cr + j * W);
      }
    }
    return;
  }
  for (int i = 0; i < m; ++i) {
    float* cr = c + i * ldc;
    for (int j = 0; j < NV; ++j) {
      const int cols = n - j * W;
      if (cols <= 0) break;
      Vec r = acc[i][j] * alphaV;
      if (beta != 0.0f) r = Fma(LoadN(cr + j * W, cols), betaV, r);
      StoreN(r, cr + j * W, cols);
    }
  }
}

/**
 * C[0:M, n0:n1] with B stored [N x K] (C = A B^T): MM rows share each streamed row of B. B holds
 * float32 or bfloat16 bits (TB = std::uint16_t: widened exactly as it is loaded).
 */
template <int MM, typename TB = float>
void GemmSmallTransBT(std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
                      std::int64_t lda, const TB* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  for (std::int64_t nn = n0; nn < n1; ++nn) {
    const TB* brow = B + nn * ldb;
    Vec acc[MM];
#pragma GCC unroll 8
    for (int i = 0; i < MM; ++i) acc[i] = Vec::Zero();
    for (std::int64_t k = 0; k < K; k += W) {
      const std::int64_t cnt = K - k;
      const Vec bv = LoadN(brow + k, cnt);
#pragma GCC unroll 8
      for (int i = 0; i < MM; ++i) acc[i] = Fma(LoadN(A + i * lda + k, cnt), bv, acc[i]);
    }
    for (int i = 0; i < MM; ++i) {
      float* cp = C + i * ldc + nn;
      const float v = alpha * acc[i].Sum();
      *cp = beta != 0.0f ? v + beta * *cp : v;
    }
  }
}

/** C[0:M, n0:n1] with B stored [K x N] (float32 or bfloat16 bits): rank-1 updates of 2W-column strips. */
template <int MM, typename TB = float>
void GemmSmallNoTransT(std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
                       std::int64_t lda, const TB* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  const Vec alphaV = Vec::Set1(alpha), betaV = Vec::Set1(beta);
  for (std::int64_t c0 = n0; c0 < n1; c0 += 2 * W) {
    const std::int64_t cnt0 = n1 - c0, cnt1 = n1 - c0 - W;
    Vec acc0[MM], acc1[MM];
#pragma GCC unroll 8
    for (int i = 0; i < MM; ++i) acc0[i] = acc1[i] = Vec::Zero();
    for (std::int64_t k = 0; k < K; ++k) {
      const TB* brow = B + k * ldb + c0;
      const Vec b0 = LoadN(brow, cnt0);
      const Vec b1 = cnt1 > 0 ? LoadN(brow + W, cnt1) : Vec::Zero();
#pragma GCC unroll 8
      for (int i = 0; i < MM; ++i) {
        const Vec av = Vec::Set1(A[i * lda + k]);
        acc0[i] = Fma(av, b0, acc0[i]);
        acc1[i] = Fma(av, b1, acc1[i]);
      }
    }
    for (int i = 0; i < MM; ++i) {
      float* cr = C + i * ldc + c0;
      Vec r0 = acc0[i] * alphaV;
      if (beta != 0.0f) r0 = Fma(LoadN(cr, cnt0), betaV, r0);
      StoreN(r0, cr, cnt0);
      if (cnt1 > 0) {
        Vec r1 = acc1[i] * alphaV;
        if (beta != 0.0f) r1 = Fma(LoadN(cr + W, cnt1), betaV, r1);
        StoreN(r1, cr + W, cnt1);
      }
    }
  }
}

template <int MR, int NV>
void GemmMicroPacked(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc, float alpha,
                     float beta, int m, int n) {
  GemmMicroT<MR, NV, false>(kc, a, MR, b, c, ldc, alpha, beta, m, n);
}

template <int MR, int NV>
void GemmMicroDirect(std::int64_t kc, const float* a, std::int64_t lda, const float* b, float* c, std::int64_t ldc,
                     float alpha, float beta, int n) {
  GemmMicroT<MR, NV, true>(kc, a, lda, b, c, ldc, alpha, beta, MR, n);
}

template <typename TB>
using SmallGemmFnT = void (*)(std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t, const TB*,
                              std::int64_t, float, float*, std::int64_t);

template <typename TB>
void GemmSmallTransBKT(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
                       std::int64_t lda, const TB* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  static const SmallGemmFnT<TB> kFns[8] = {GemmSmallTransBT<1, TB>, GemmSmallTransBT<2, TB>, GemmSmallTransBT<3, TB>,
                                           GemmSmallTransBT<4, TB>, GemmSmallTransBT<5, TB>, GemmSmallTransBT<6, TB>,
                                           GemmSmallTransBT<7, TB>, GemmSmallTransBT<8, TB>};
  for (std::int64_t i0 = 0; i0 < M; i0 += 8) {
    const std::int64_t mm = M - i0 < 8 ? M - i0 : 8;
    kFns[mm - 1](n0, n1, K, alpha, A + i0 * lda, lda, B, ldb, beta, C + i0 * ldc, ldc);
  }
}

template <typename TB>
void GemmSmallNoTransKT(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
                        std::int64_t lda, const TB* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  static const SmallGemmFnT<TB> kFns[8] = {GemmSmallNoTransT<1, TB>, GemmSmallNoTransT<2, TB>, GemmSmallNoTransT<3, TB>,
                                           GemmSmallNoTransT<4, TB>, GemmSmallNoTransT<5, TB>, GemmSmallNoTransT<6, TB>,
                                           GemmSmallNoTransT<7, TB>, GemmSmallNoTransT<8, TB>};
  for (std::int64_t i0 = 0; i0 < M; i0 += 8) {
    const std::int64_t mm = M - i0 < 8 ? M - i0 : 8;
    kFns[mm - 1](n0, n1, K, alpha, A + i0 * lda, lda, B, ldb, beta, C + i0 * ldc, ldc);
  }
}

void GemmSmallTransBK(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
                      std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  GemmSmallTransBKT<float>(M, n0, n1, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void GemmSmallNoTransK(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
                       std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  GemmSmallNoTransKT<float>(M, n0, n1, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void GemmSmallTransBBf16K(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha,
                          const float* A, std::int64_t lda, const std::uint16_t* B, std::int64_t ldb, float beta,
                          float* C, std::int64_t ldc) {
  GemmSmallTransBKT<std::uint16_t>(M, n0, n1, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void GemmSmallNoTransBf16K(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha,
                           const float* A, std::int64_t lda, const std::uint16_t* B, std::int64_t ldb, float beta,
                           float* C, std::int64_t ldc) {
  GemmSmallNoTransKT<std::uint16_t>(M, n0, n1, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/** 12 independent FMA chains per iteration (enough to cover FMA latency on two ports). */
double FmaBurnK(std::int64_t iters, float* sink) {
  Vec a[12];
  const Vec x = Vec::Set1(0.999999f), y = Vec::Set1(1e-7f);
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) a[i] = Vec::Set1(static_cast<float>(i));
  for (std::int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = Fma(a[i], x, y);
  }
  Vec s = Vec::Zero();
  for (int i = 0; i < 12; ++i) s = s + a[i];
  *sink = s.Sum();
  return static_cast<double>(iters) * 12.0 * W * 2.0;
}

}  // namespace
}  // namespace sinkflex::model
