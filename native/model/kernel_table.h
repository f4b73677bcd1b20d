// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/reference.ts.
// Tests: test/model/linear-rmsnorm.test.ts, rope-swiglu.test.ts, embedding-softmax.test.ts,
//   mlp-block.test.ts, adamw-param-store.test.ts, isa-avx2.test.ts, isa-generic.test.ts,
//   determinism.test.ts, bindings.test.ts.
// Per-ISA kernel table of the model ops. The same kernel sources (simd_vec.inl,
// ops_kernels.inl, gemm_micro.inl) are compiled three times, for a portable baseline, AVX2+FMA
// and AVX-512F, each under its own `#pragma GCC target`; ActiveKernels() picks one at run time
// from GetCpuFeatures() (SINKFLEX_CPU_FEATURES=generic|avx2 forces a lower path, for tests).
// Kernels here are single-threaded over a range of rows/elements; ops.cc and gemm.cc split the
// work over the thread pool and call them.
#pragma once

#include <cstdint>

#include "swiglu_params.h"
#include "gemm.h"

namespace sinkflex::model {

/**
 * Depth of one block of the GEMM (packed path and small-M kernels alike): each element of C is
 * the block sums added in order, each block summed over its depth in order, so the result of a
 * row does not depend on M or on the path taken.
 */
constexpr std::int64_t kGemmKc = kGemmDepthBlock;

/** Scalars of one AdamW update (bias corrections precomputed). */
struct AdamWScalars {
  float beta1, beta2;  // moment decay rates
  float eps;           // denominator epsilon
  float decayFactor;   // 1 - lr * weightDecay (1 for parameters without decay)
  float gradScale;     // multiplies the gradient first (global-norm clipping), 1 for none
  float stepSize;      // lr / (1 - beta1^t)
  float invSqrtBc2;    // 1 / sqrt(1 - beta2^t)
};

struct KernelTable {
  const char* name;  // "generic", "avx2", "avx512"
  int vectorWidth;   // floats per vector register

  // ---- GEMM --------------------------------------------------------------------------
  int gemmMr, gemmNr;  // micro-tile of the packed kernel
  /**
   * C[m x n] = alpha * sum_p a[p*mr + i] b[p*nr + j] + beta * C (beta == 0: C is not read);
   * a and b are packed panels of kc steps; m <= mr, n <= nr select the valid part.
   */
  void (*gemmMicro)(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc, float alpha,
                    float beta, int m, int n);
  /** The same for a full-height tile reading A unpacked from row-major storage: a[i * lda + p]. */
  void (*gemmMicroDirectA)(std::int64_t kc, const float* a, std::int64_t lda, const float* b, float* c,
                           std::int64_t ldc, float alpha, float beta, int n);
  /**
   * Columns [n0, n1) of C[M x N] = alpha * A[M x K] . B^T + beta C with B stored [N x K]; small M
   * (B read once whatever M; each element computed as gemmMicro computes it).
   */
  void (*gemmSmallTransB)(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
                          std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc);
  /** Columns [n0, n1) of C = alpha * A[M x K] . B[K x N] + beta C; small M. */
  void (*gemmSmallNoTrans)(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha,
                           const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                           std::int64_t ldc);
  /** gemmSmallTransB with B stored as bfloat16 bits (widened exactly as it streams). */
  void (*gemmSmallTransBBf16)(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha,
                              const float* A, std::int64_t lda, const std::uint16_t* B, std::int64_t ldb, float beta,
                              float* C, std::int64_t ldc);
  /** gemmSmallNoTrans with B stored as bfloat16 bits. */
  void (*gemmSmallNoTransBf16)(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha,
                               const float* A, std::int64_t lda, const std::uint16_t* B, std::int64_t ldb, float beta,
                               float* C, std::int64_t ldc);
  /** Runs `iters` rounds of independent FMA chains; returns the flops done (peak estimate). */
  double (*fmaBurn)(std::int64_t iters, float* sink);

  // ---- elementwise / row kernels -----------------------------------------------------------
  void (*rmsNormForward)(const float* x, const float* g, float* y, float* rstd, std::int64_t rows, std::int64_t D,
                         float eps);
  /** dx (= or +=), and dgAcc[D] += sum over the rows of dy * x * rstd. */
  void (*rmsNormBackward)(const float* x, const float* g, const float* rstd, const float* dy, float* dx, float* dgAcc,
                          std::int64_t rows, std::int64_t D, bool accumulate);
  /**
   * Rotate-half RoPE of rows [T x H x Dh] with cos/sin tables [*, Dh/2] indexed by pos;
   * sign = +1 forward, -1 the inverse rotation (backward). out may alias x.
   */
  void (*rope)(const float* x, float* out, const std::int32_t* pos, std::int64_t rows, std::int64_t H, std::int64_t Dh,
               const float* cosT, const float* sinT, float sign);
  /** out[r, f] from h[r, 0:F] (gate) and h[r, F:2F] (up). */
  void (*swiGluForward)(const float* h, float* out, std::int64_t rows, std::int64_t F, SwiGluParams p);
  /** dh[r, 0:2F] (= or +=) from dout[r, 0:F]. */
  void (*swiGluBackward)(const float* h, const float* dout, float* dh, std::int64_t rows, std::int64_t F,
                         SwiGluParams p, bool accumulate);
  /**
   * Per row of z = scale * logits [rows x V]: lse, logp of the target (0 when target < 0),
   * entropy (any output may be null).
   */
  void (*logSoftmaxForward)(const float* logits, const std::int32_t* targets, std::int64_t rows, std::int64_t V,
                            float scale, float* logp, float* entropy, float* lse);
  /**
   * dlogits (= or +=; may alias logits when not accumulating) from dlogp (may be null) and
   * dentropy (may be null; then entropy may be null too).
   */
  void (*logSoftmaxBackward)(const float* logits, const std::int32_t* targets, const float* lse, const float* entropy,
                             const float* dlogp, const float* dentropy, float* dlogits, std::int64_t rows,
                             std::int64_t V, float scale, bool accumulate);
  void (*adamw)(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s);
  /** Sum of squares (float lanes, double result). */
  double (*sumSquares)(const float* x, std::int64_t n);
  /** acc[c] += sum_r src[r * ld + c] for c < cols. */
  void (*addRows)(const float* src, std::int64_t rows, std::int64_t cols, std::int64_t ld, float* acc);
  /** y[i] += x[i]. */
  void (*add)(float* y, const float* x, std::int64_t n);
  /** dst[i] = the float32 value of the bfloat16 bits src[i] (exact). */
  void (*widenBf16)(const std::uint16_t* src, float* dst, std::int64_t n);
};

extern const KernelTable kGenericKernels;
#if defined(__x86_64__) && defined(__GNUC__)
#define SINKFLEX_HAVE_X86_KERNELS 1
extern const KernelTable kAvx2Kernels;
extern const KernelTable kAvx512Kernels;
#endif

/** The table for this CPU (chosen once). */
const KernelTable& ActiveKernels();

}  // namespace sinkflex::model
