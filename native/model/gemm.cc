// The GEMM driver (gemm.h): blocking, packing, threading, and the FMA peak probe.
// Reference: the float64 refGemm in test/model/fixtures/reference.ts.
// Tests: test/model/gemm.test.ts (and every op test that goes through the GEMM).
#include "gemm.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/allocator.h"
#include "../core/errors.h"
#include "../core/thread_pool.h"
#include "bf16.h"
#include "kernel_table.h"
#include "mxfp4.h"

namespace sinkflex::model {
namespace {

constexpr std::int64_t kKc = kGemmDepthBlock;   // depth of one packed block (A and B panels stay in L1/L2)
constexpr std::int64_t kSerialFlops = 1 << 21;  // below this, no threads
constexpr std::int64_t kSmallM =
    kGemmSmallRows;  // M up to this: the small-M path (B packed a panel at a time, read once)

inline float Elem(const float* p) { return *p; }
inline float Elem(const std::uint16_t* p) { return Bf16ToFloat(*p); }

void CheckArgs(bool transA, bool transB, std::int64_t M, std::int64_t N, std::int64_t K, const void* A,
               std::int64_t lda, const void* B, std::int64_t ldb, const float* C, std::int64_t ldc) {
  if (M < 0 || N < 0 || K < 0) {
    throw ArgumentError("gemm: M, N, K must be non-negative, got " + std::to_string(M) + ", " + std::to_string(N) +
                        ", " + std::to_string(K));
  }
  const std::int64_t minLda = std::max<std::int64_t>(1, transA ? M : K);
  const std::int64_t minLdb = std::max<std::int64_t>(1, transB ? K : N);
  if (lda < minLda) throw ArgumentError("gemm: lda " + std::to_string(lda) + " < " + std::to_string(minLda));
  if (ldb < minLdb) throw ArgumentError("gemm: ldb " + std::to_string(ldb) + " < " + std::to_string(minLdb));
  if (ldc < std::max<std::int64_t>(1, N)) throw ArgumentError("gemm: ldc " + std::to_string(ldc) + " < N");
  if (M > 0 && N > 0 && C == nullptr) throw ArgumentError("gemm: C is null");
  if (M > 0 && N > 0 && K > 0 && (A == nullptr || B == nullptr)) throw ArgumentError("gemm: A or B is null");
}

/** C = beta * C (beta == 0 writes zeros without reading). */
void ScaleC(std::int64_t M, std::int64_t N, float beta, float* C, std::int64_t ldc) {
  for (std::int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.0f)
      std::fill(c, c + N, 0.0f);
    else if (beta != 1.0f)
      for (std::int64_t j = 0; j < N; ++j) c[j] *= beta;
  }
}

/** Packs rows [r0, r0 + mr) x depth [k0, k0 + kc) of op(A) as dst[p * mr + i], zero-padded past M. */
template <typename T>
void PackA(bool transA, const T* A, std::int64_t lda, std::int64_t M, std::int64_t r0, std::int64_t k0, std::int64_t kc,
           int mr, float* dst) {
  const std::int64_t rows = std::min<std::int64_t>(mr, M - r0);
  if (!transA) {
    for (std::int64_t i = 0; i < rows; ++i) {
      const T* src = A + (r0 + i) * lda + k0;
      for (std::int64_t p = 0; p < kc; ++p) dst[p * mr + i] = Elem(src + p);
    }
  } else {
    for (std::int64_t p = 0; p < kc; ++p) {
      const T* src = A + (k0 + p) * lda + r0;
      for (std::int64_t i = 0; i < rows; ++i) dst[p * mr + i] = Elem(src + i);
    }
  }
  if (rows < mr) {
    for (std::int64_t p = 0; p < kc; ++p)
      for (std::int64_t i = rows; i < mr; ++i) dst[p * mr + i] = 0.0f;
  }
}

/** Packs depth [k0, k0 + kc) x columns [c0, c0 + nr) of op(B) as dst[p * nr + j], zero-padded past N. */
template <typename T>
void PackB(bool transB, const T* B, std::int64_t ldb, std::int64_t N, std::int64_t c0, std::int64_t k0, std::int64_t kc,
           int nr, float* dst) {
  const std::int64_t cols = std::min<std::int64_t>(nr, N - c0);
  if (!transB) {
    for (std::int64_t p = 0; p < kc; ++p) {
      const T* src = B + (k0 + p) * ldb + c0;
      float* d = dst + p * nr;
      for (std::int64_t j = 0; j < cols; ++j) d[j] = Elem(src + j);
      for (std::int64_t j = cols; j < nr; ++j) d[j] = 0.0f;
    }
  } else {
    for (std::int64_t j = 0; j < cols; ++j) {
      const T* src = B + (c0 + j) * ldb + k0;
      for (std::int64_t p = 0; p < kc; ++p) dst[p * nr + j] = Elem(src + p);
    }
    for (std::int64_t p = 0; p < kc; ++p)
      for (std::int64_t j = cols; j < nr; ++j) dst[p * nr + j] = 0.0f;
  }
}

/**
 * PackB for an MXFP4 B (decoded exactly, element by element, to the float32 values its bfloat16
 * dequantization widens to: the same packed panel as the bfloat16 path gets).
 */
void PackB(bool transB, Mxfp4Ptr B, std::int64_t ldb, std::int64_t N, std::int64_t c0, std::int64_t k0, std::int64_t kc,
           int nr, float* dst) {
  const float* table = Mxfp4Table();
  const std::int64_t cols = std::min<std::int64_t>(nr, N - c0);
  if (!transB) {
    for (std::int64_t p = 0; p < kc; ++p) {
      const Mxfp4Ptr src = B + ((k0 + p) * ldb + c0);
      float* d = dst + p * nr;
      for (std::int64_t j = 0; j < cols; ++j) d[j] = (src + j).Value(table);
      for (std::int64_t j = cols; j < nr; ++j) d[j] = 0.0f;
    }
  } else {
    for (std::int64_t j = 0; j < cols; ++j) {
      const Mxfp4Ptr src = B + ((c0 + j) * ldb + k0);
      for (std::int64_t p = 0; p < kc; ++p) dst[p * nr + j] = (src + p).Value(table);
    }
    for (std::int64_t p = 0; p < kc; ++p)
      for (std::int64_t j = cols; j < nr; ++j) dst[p * nr + j] = 0.0f;
  }
}

/** Runs fn(task) for tasks in [0, n): on the pool when `parallel`, else inline. */
template <typename Fn>
void Run(bool parallel, std::int64_t n, Fn&& fn) {
  if (parallel && n > 1) {
    ThreadPool::Global().ParallelFor(n, [&](std::int64_t task, int) { fn(task); });
  } else {
    for (std::int64_t t = 0; t < n; ++t) fn(t);
  }
}

void GemmSmallM(const KernelTable& kt, bool transB, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                const float* A, std::int64_t lda, const void* B, bool bBf16, std::int64_t ldb, float beta, float* C,
                std::int64_t ldc, bool parallel) {
  // Tasks of whole 2W-column panels: up to 4 each, fewer when that leaves threads idle.
  const std::int64_t panel = kt.gemmNr, panels = (N + panel - 1) / panel;
  const std::int64_t threads = parallel ? ThreadPool::Global().size() : 1;
  const std::int64_t chunk = panel * std::clamp<std::int64_t>(panels / (4 * threads), 1, 4);
  const std::int64_t tasks = (N + chunk - 1) / chunk;
  const float* bf = static_cast<const float*>(B);
  const std::uint16_t* bh = static_cast<const std::uint16_t*>(B);
  Run(parallel, tasks, [&](std::int64_t t) {
    const std::int64_t n0 = t * chunk, n1 = std::min(N, n0 + chunk);
    if (bBf16) {
      if (transB)
        kt.gemmSmallTransBBf16(M, n0, n1, K, alpha, A, lda, bh, ldb, beta, C, ldc);
      else
        kt.gemmSmallNoTransBf16(M, n0, n1, K, alpha, A, lda, bh, ldb, beta, C, ldc);
    } else {
      if (transB)
        kt.gemmSmallTransB(M, n0, n1, K, alpha, A, lda, bf, ldb, beta, C, ldc);
      else
        kt.gemmSmallNoTrans(M, n0, n1, K, alpha, A, lda, bf, ldb, beta, C, ldc);
    }
  });
}

/** B is a pointer to float32 or bfloat16 elements, or an Mxfp4Ptr (PackB decodes each kind). */
template <typename TA, typename PB>
void GemmPacked(const KernelTable& kt, bool transA, bool transB, std::int64_t M, std::int64_t N, std::int64_t K,
                float alpha, const TA* A, std::int64_t lda, PB B, std::int64_t ldb, float beta, float* C,
                std::int64_t ldc, bool parallel) {
  constexpr bool kPlainA = std::is_same_v<TA, float>;
  const int mr = kt.gemmMr, nr = kt.gemmNr;
  const std::int64_t mPanels = (M + mr - 1) / mr, nPanels = (N + nr - 1) / nr;
  const std::int64_t kcMax = std::min(K, kKc);
  // A untransposed (float32) is read in place by the micro-kernel (only a ragged last panel is
  // packed); a transposed or bfloat16 A is packed. B is always packed, one k-block at a time.
  const std::int64_t firstPackedA = transA || !kPlainA ? 0 : M / mr;
  const std::int64_t packA = mPanels - firstPackedA;
  HostBuffer<float> ap(static_cast<std::size_t>(packA * mr * kcMax), "gemm packed A");
  HostBuffer<float> bp(static_cast<std::size_t>(nPanels * nr * kcMax), "gemm packed B");

  // Tiles of C handed to tasks: start at 4 x 16 micro-panels (48 x 512 on AVX-512: the B block
  // stays in L2 while A micro-panels stream through L1), shrink until there are enough
  // tasks to keep every thread busy.
  const std::int64_t threads = parallel ? ThreadPool::Global().size() : 1;
  std::int64_t mcP = std::min<std::int64_t>(4, mPanels), ncP = std::min<std::int64_t>(16, nPanels);
  auto tiles = [&] { return ((mPanels + mcP - 1) / mcP) * ((nPanels + ncP - 1) / ncP); };
  while (tiles() < 4 * threads && (mcP > 1 || ncP > 1)) {
    if (mcP >= ncP && mcP > 1)
      mcP = (mcP + 1) / 2;
    else
      ncP = (ncP + 1) / 2;
  }
  const std::int64_t mTiles = (mPanels + mcP - 1) / mcP, nTiles = (nPanels + ncP - 1) / ncP;

  const std::int64_t packTasks = packA + nPanels;

  for (std::int64_t k0 = 0; k0 < K; k0 += kKc) {
    const std::int64_t kc = std::min(kKc, K - k0);
    Run(parallel && packTasks * kc > 16384, packTasks, [&](std::int64_t t) {
      if (t < packA) {
        const std::int64_t ip = firstPackedA + t;
        PackA(transA, A, lda, M, ip * mr, k0, kc, mr, ap.data() + t * mr * kc);
      } else {
        PackB(transB, B, ldb, N, (t - packA) * nr, k0, kc, nr, bp.data() + (t - packA) * nr * kc);
      }
    });
    const float blockBeta = k0 == 0 ? beta : 1.0f;
    Run(parallel, mTiles * nTiles, [&](std::int64_t t) {
      const std::int64_t ti = t / nTiles, tj = t % nTiles;
      const std::int64_t ip1 = std::min(mPanels, (ti + 1) * mcP), jp1 = std::min(nPanels, (tj + 1) * ncP);
      for (std::int64_t ip = ti * mcP; ip < ip1; ++ip) {
        const int m = static_cast<int>(std::min<std::int64_t>(mr, M - ip * mr));
        float* crow = C + ip * mr * ldc;
        for (std::int64_t jp = tj * ncP; jp < jp1; ++jp) {
          const int n = static_cast<int>(std::min<std::int64_t>(nr, N - jp * nr));
          const float* bpan = bp.data() + jp * nr * kc;
          if (ip < firstPackedA) {
            if constexpr (kPlainA) {
              kt.gemmMicroDirectA(kc, A + ip * mr * lda + k0, lda, bpan, crow + jp * nr, ldc, alpha, blockBeta, n);
            }
          } else {
            kt.gemmMicro(kc, ap.data() + (ip - firstPackedA) * mr * kc, bpan, crow + jp * nr, ldc, alpha, blockBeta, m,
                         n);
          }
        }
      }
    });
  }
}

/**
 * The small-M path with an MXFP4 B: each task decodes the part of B it streams (16 rows of a
 * transposed B, or a strip of columns of every row) to bfloat16 bits and runs the bfloat16
 * kernel on it, so every element of C is summed exactly as the bfloat16 path sums it.
 */
void GemmSmallMMxfp4(const KernelTable& kt, bool transB, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                     const float* A, std::int64_t lda, Mxfp4Ptr B, std::int64_t ldb, float beta, float* C,
                     std::int64_t ldc, bool parallel) {
  const std::int64_t chunk = transB ? 16 : 4 * kt.vectorWidth;
  const std::int64_t tasks = (N + chunk - 1) / chunk;
  Run(parallel, tasks, [&](std::int64_t t) {
    const std::int64_t n0 = t * chunk, n1 = std::min(N, n0 + chunk), w = n1 - n0;
    HostBuffer<std::uint16_t> part(static_cast<std::size_t>(w * K), "gemm decoded MXFP4 strip");
    if (transB) {
      for (std::int64_t r = 0; r < w; ++r) Mxfp4DecodeBf16(B + (n0 + r) * ldb, K, part.data() + r * K);
      kt.gemmSmallTransBBf16(M, 0, w, K, alpha, A, lda, part.data(), K, beta, C + n0, ldc);
    } else {
      for (std::int64_t k = 0; k < K; ++k) Mxfp4DecodeBf16(B + (k * ldb + n0), w, part.data() + k * w);
      kt.gemmSmallNoTransBf16(M, 0, w, K, alpha, A, lda, part.data(), w, beta, C + n0, ldc);
    }
  });
}

}  // namespace

void GemmMxfp4B(bool transB, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                std::int64_t lda, Mxfp4Ptr B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  CheckArgs(false, transB, M, N, K, A, lda, B.blocks, ldb, C, ldc);
  if (M > 0 && N > 0 && K > 0 && B.scales == nullptr) throw ArgumentError("gemm: the MXFP4 scales of B are null");
  if (ldb % kMxfp4Block != 0) {
    throw ArgumentError("gemm: an MXFP4 B needs rows of whole 32-element blocks (ldb " + std::to_string(ldb) + ")");
  }
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) {
    ScaleC(M, N, beta, C, ldc);
    return;
  }
  const KernelTable& kt = ActiveKernels();
  const bool parallel = 2 * M * N * K >= kSerialFlops;
  if (M <= kSmallM) {
    GemmSmallMMxfp4(kt, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, parallel);
    return;
  }
  GemmPacked(kt, false, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, parallel);
}

void GemmMixed(bool transA, bool transB, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const void* A,
               bool aBf16, std::int64_t lda, const void* B, bool bBf16, std::int64_t ldb, float beta, float* C,
               std::int64_t ldc) {
  CheckArgs(transA, transB, M, N, K, A, lda, B, ldb, C, ldc);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) {
    ScaleC(M, N, beta, C, ldc);
    return;
  }
  const KernelTable& kt = ActiveKernels();
  const bool parallel = 2 * M * N * K >= kSerialFlops;
  if (M <= kSmallM && !transA) {
    if (aBf16) {  // a few rows: widen them (small) and stream B as for float32 rows
      HostBuffer<float> rows(static_cast<std::size_t>(M * K), "gemm widened A rows");
      for (std::int64_t i = 0; i < M; ++i)
        kt.widenBf16(static_cast<const std::uint16_t*>(A) + i * lda, rows.data() + i * K, K);
      GemmSmallM(kt, transB, M, N, K, alpha, rows.data(), K, B, bBf16, ldb, beta, C, ldc, parallel);
      return;
    }
    GemmSmallM(kt, transB, M, N, K, alpha, static_cast<const float*>(A), lda, B, bBf16, ldb, beta, C, ldc, parallel);
    return;
  }
  using H = std::uint16_t;
  if (!aBf16 && !bBf16) {
    GemmPacked(kt, transA, transB, M, N, K, alpha, static_cast<const float*>(A), lda, static_cast<const float*>(B), ldb,
               beta, C, ldc, parallel);
  } else if (!aBf16) {
    GemmPacked(kt, transA, transB, M, N, K, alpha, static_cast<const float*>(A), lda, static_cast<const H*>(B), ldb,
               beta, C, ldc, parallel);
  } else if (!bBf16) {
    GemmPacked(kt, transA, transB, M, N, K, alpha, static_cast<const H*>(A), lda, static_cast<const float*>(B), ldb,
               beta, C, ldc, parallel);
  } else {
    GemmPacked(kt, transA, transB, M, N, K, alpha, static_cast<const H*>(A), lda, static_cast<const H*>(B), ldb, beta,
               C, ldc, parallel);
  }
}

void Gemm(bool transA, bool transB, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
          std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  GemmMixed(transA, transB, M, N, K, alpha, A, false, lda, B, false, ldb, beta, C, ldc);
}

void GemmNaive(bool transA, bool transB, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
               std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  CheckArgs(transA, transB, M, N, K, A, lda, B, ldb, C, ldc);
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      float acc = 0.0f;
      for (std::int64_t p = 0; p < K; ++p) {
        const float a = transA ? A[p * lda + i] : A[i * lda + p];
        const float b = transB ? B[j * ldb + p] : B[p * ldb + j];
        acc += a * b;
      }
      float& c = C[i * ldc + j];
      c = beta == 0.0f ? alpha * acc : alpha * acc + beta * c;
    }
  }
}

std::string GemmKernelName() {
  const KernelTable& kt = ActiveKernels();
  return std::string(kt.name) + " " + std::to_string(kt.gemmMr) + "x" + std::to_string(kt.gemmNr);
}

double MeasureFmaPeakGflops(double seconds) {
  const KernelTable& kt = ActiveKernels();
  float sink = 0.0f;
  // Calibrate the iteration count on one thread, then run every thread for ~seconds.
  std::int64_t iters = 1 << 16;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    kt.fmaBurn(iters, &sink);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dt > 0.02 || iters > (std::int64_t{1} << 40)) {
      iters = static_cast<std::int64_t>(static_cast<double>(iters) * std::max(0.01, seconds) / dt) + 1;
      break;
    }
    iters *= 4;
  }
  ThreadPool& pool = ThreadPool::Global();
  const int threads = pool.size();
  std::vector<double> flops(threads, 0.0);
  std::vector<float> sinks(threads, 0.0f);
  const auto t0 = std::chrono::steady_clock::now();
  pool.ParallelFor(threads, [&](std::int64_t task, int) { flops[task] = kt.fmaBurn(iters, &sinks[task]); });
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double total = 0.0;
  for (double f : flops) total += f;
  return total / dt * 1e-9;
}

}  // namespace sinkflex::model
