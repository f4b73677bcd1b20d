// Reference: the float64 refGemm in test/model/fixtures/reference.ts.
// Tests: test/model/gemm.test.ts (and every op test that goes through the GEMM).
// GEMM inner kernels over `Vec` (simd_vec.inl), compiled per instruction set by
// kernels_<isa>.cc: the register-tiled micro-kernel of the packed path, small-M kernels that
// pack one B panel at a time and run the same micro-kernel (decode-time work: a row's result
// is bit for bit the packed path's, whatever M), and an FMA burn loop used to estimate the
// machine's peak.

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

/** Bits of one B element widened to float32 (exact for bfloat16). */
inline float WidenOne(float x) { return x; }
inline float WidenOne(std::uint16_t x) {
  const std::uint32_t bits = static_cast<std::uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/**
 * Columns [n0, n1) of C[M x N] = alpha * A[M x K] . op(B) + beta * C for small M, computed
 * element by element exactly as the packed path computes it (so a row's result does not depend
 * on how many other rows share the call, nor on which path the call takes): B is packed into a
 * 2W-column panel per depth block of kGemmKc (widened exactly when bfloat16), the rows run
 * through the packed path's micro-kernel (read in place, up to 8 at a time), each block's sum
 * is scaled by alpha and added to C (beta for the first block, 1 after) as the packed path does.
 * B is stored [N x K] (transB) or [K x N]; it is read once whatever M.
 */
template <typename TB>
void GemmSmallKT(bool transB, std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha,
                 const float* A, std::int64_t lda, const TB* B, std::int64_t ldb, float beta, float* C,
                 std::int64_t ldc) {
  constexpr int NR = 2 * W;
  using RowsFn =
      void (*)(std::int64_t, const float*, std::int64_t, const float*, float*, std::int64_t, float, float, int, int);
  static const RowsFn kRows[8] = {GemmMicroT<1, 2, true>, GemmMicroT<2, 2, true>, GemmMicroT<3, 2, true>,
                                  GemmMicroT<4, 2, true>, GemmMicroT<5, 2, true>, GemmMicroT<6, 2, true>,
                                  GemmMicroT<7, 2, true>, GemmMicroT<8, 2, true>};
  alignas(64) float panel[kGemmKc * NR];
  for (std::int64_t c0 = n0; c0 < n1; c0 += NR) {
    const int cols = static_cast<int>(n1 - c0 < NR ? n1 - c0 : NR);
    for (std::int64_t k0 = 0; k0 < K; k0 += kGemmKc) {
      const std::int64_t kc = K - k0 < kGemmKc ? K - k0 : kGemmKc;
      if (transB) {
        // panel rows written whole (the 48 KB panel would thrash L1 column by column); the
        // cols source rows (cols x kc elements) stay in L1 meanwhile
        const TB* src = B + c0 * ldb + k0;
        for (std::int64_t p = 0; p < kc; ++p) {
          float* d = panel + p * NR;
          for (int j = 0; j < cols; ++j) d[j] = WidenOne(src[j * ldb + p]);
        }
      } else {
        for (std::int64_t p = 0; p < kc; ++p) {
          const TB* src = B + (k0 + p) * ldb + c0;
          for (int j = 0; j < cols; ++j) panel[p * NR + j] = WidenOne(src[j]);
        }
      }
      if (cols < NR) {
        for (std::int64_t p = 0; p < kc; ++p)
          for (int j = cols; j < NR; ++j) panel[p * NR + j] = 0.0f;
      }
      const float blockBeta = k0 == 0 ? beta : 1.0f;
      for (std::int64_t i0 = 0; i0 < M; i0 += 8) {
        const int mm = static_cast<int>(M - i0 < 8 ? M - i0 : 8);
        kRows[mm - 1](kc, A + i0 * lda + k0, lda, panel, C + i0 * ldc + c0, ldc, alpha, blockBeta, mm, cols);
      }
    }
  }
}

void GemmSmallTransBK(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
                      std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  GemmSmallKT<float>(true, M, n0, n1, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void GemmSmallNoTransK(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
                       std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  GemmSmallKT<float>(false, M, n0, n1, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void GemmSmallTransBBf16K(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
                          std::int64_t lda, const std::uint16_t* B, std::int64_t ldb, float beta, float* C,
                          std::int64_t ldc) {
  GemmSmallKT<std::uint16_t>(true, M, n0, n1, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void GemmSmallNoTransBf16K(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha,
                           const float* A, std::int64_t lda, const std::uint16_t* B, std::int64_t ldb, float beta,
                           float* C, std::int64_t ldc) {
  GemmSmallKT<std::uint16_t>(false, M, n0, n1, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
