// Reference: docs/design.md, "The built-in model — semantics"; checked against the CPU ops and the
//   float64 reference test/model/fixtures/reference.ts.
// Tests: test/model/cuda-ops.test.ts (on a GPU, or on the CUDA emulator without one).
// The model ops on CUDA (ops_table.h): a tiled GEMM (cuda_gemm.cuh: 64 x 64 output tiles, 16-deep
// k slices in shared memory, 4 x 4 outputs per thread, fp32 accumulation; no cuBLAS, so the
// addon keeps needing no CUDA library at run time; either operand may be bfloat16 bits, widened
// exactly as it is loaded), linear layers over it (float32 or bfloat16 weights), RMSNorm, RoPE,
// (clamped) SwiGLU, embedding forward (float32 or bfloat16 table) and backward, log-softmax with
// entropy, cross-entropy and AdamW.
// Same semantics as the CPU kernels (ops.h), argument checks included; every reduction has a
// fixed shape (rows per block, columns summed in row order), so results are deterministic.
// Registered with RegisterCudaOps at load; compiled only by the CUDA build.
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <vector>

#include "../core/cuda_check.cuh"
#include "../core/cuda_reduce.cuh"
#include "../core/device_buffer.h"
#include "../core/errors.h"
#include "cuda_gemm.cuh"
#include "cuda_rope.cuh"
#include "ops_table.h"

namespace sinkflex::model::cuda {
namespace {

using cuda_reduce::BlockMax;
using cuda_reduce::BlockSum;

constexpr int kRowThreads = 256;

void Require(bool ok, const std::string& msg) {
  if (!ok) throw ArgumentError(msg);
}

int CurrentDevice() {
  int d = 0;
  SFX_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void UseDevice(int index) { SFX_CUDA_CHECK(cudaSetDevice(index)); }

/** Runs the launches of one op on a stream of its own and waits for them. */
struct Op {
  CudaStream stream;
  void Done() { stream.Synchronize(); }
};

unsigned Blocks(long long n, int threads) { return static_cast<unsigned>(CeilDiv<long long>(n, threads)); }

// ---- GEMM -----------------------------------------------------------------------------------------

void LaunchGemm(cudaStream_t s, bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                std::int64_t ldc) {
  LaunchGemmT(s, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Gemm(bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  Require(m >= 0 && n >= 0 && k >= 0, "gemm sizes must be non-negative");
  Require(ldc >= std::max<std::int64_t>(1, n), "gemm: ldc is smaller than n");
  Op op;
  LaunchGemm(op.stream, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  op.Done();
}

/** Gemm with either operand as bfloat16 bits (widened exactly as the tiles are loaded). */
void GemmMixed(bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const void* a,
               bool aBf16, std::int64_t lda, const void* b, bool bBf16, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc) {
  Require(m >= 0 && n >= 0 && k >= 0, "gemm sizes must be non-negative");
  Require(ldc >= std::max<std::int64_t>(1, n), "gemm: ldc is smaller than n");
  using U16 = std::uint16_t;
  Op op;
  if (aBf16 && bBf16) {
    LaunchGemmT(op.stream, transA, transB, m, n, k, alpha, static_cast<const U16*>(a), lda, static_cast<const U16*>(b),
                ldb, beta, c, ldc);
  } else if (aBf16) {
    LaunchGemmT(op.stream, transA, transB, m, n, k, alpha, static_cast<const U16*>(a), lda,
                static_cast<const float*>(b), ldb, beta, c, ldc);
  } else if (bBf16) {
    LaunchGemmT(op.stream, transA, transB, m, n, k, alpha, static_cast<const float*>(a), lda,
                static_cast<const U16*>(b), ldb, beta, c, ldc);
  } else {
    LaunchGemm(op.stream, transA, transB, m, n, k, alpha, static_cast<const float*>(a), lda,
               static_cast<const float*>(b), ldb, beta, c, ldc);
  }
  op.Done();
}

// ---- linear -----------------------------------------------------------------------------------

__global__ void FillRowsKernel(const float* b, float* y, long long rows, long long cols) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) y[i] = b[i % cols];
}

/** acc[c] += sum_r src[r * cols + c], rows in order (deterministic). */
__global__ void AddColumnsKernel(const float* src, long long rows, long long cols, float* acc) {
  const long long c = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float a = acc[c];
  for (long long r = 0; r < rows; ++r) a += src[r * cols + c];
  acc[c] = a;
}

void LinearForward(const float* x, const float* w, const float* b, float* y, std::int64_t T, std::int64_t in,
                   std::int64_t out) {
  Require(T >= 0 && in >= 0 && out >= 0, "linear sizes must be non-negative");
  if (T == 0 || out == 0) return;
  Op op;
  float beta = 0.0f;
  if (b) {
    SFX_LAUNCH(FillRowsKernel, Blocks(T * out, 256), dim3(256), 0, op.stream)(b, y, T, out);
    SFX_CUDA_LAUNCH_CHECK("FillRowsKernel");
    beta = 1.0f;
  }
  const std::int64_t ld = std::max<std::int64_t>(1, in);
  LaunchGemm(op.stream, false, true, T, out, in, 1.0f, x, ld, w, ld, beta, y, out);
  op.Done();
}

void LinearBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db, std::int64_t T,
                    std::int64_t in, std::int64_t out, bool accumulateDx) {
  Require(T >= 0 && in >= 0 && out >= 0, "linear sizes must be non-negative");
  if (T == 0 && !dx) return;
  const std::int64_t ldIn = std::max<std::int64_t>(1, in), ldOut = std::max<std::int64_t>(1, out);
  Op op;
  if (dx)
    LaunchGemm(op.stream, false, false, T, in, out, 1.0f, dy, ldOut, w, ldIn, accumulateDx ? 1.0f : 0.0f, dx, ldIn);
  if (dw) LaunchGemm(op.stream, true, false, out, in, T, 1.0f, dy, ldOut, x, ldIn, 1.0f, dw, ldIn);
  if (db && T > 0 && out > 0) {
    SFX_LAUNCH(AddColumnsKernel, Blocks(out, 128), dim3(128), 0, op.stream)(dy, T, out, db);
    SFX_CUDA_LAUNCH_CHECK("AddColumnsKernel");
  }
  op.Done();
}

void LinearForwardBf16(const float* x, const std::uint16_t* w, const float* b, float* y, std::int64_t T,
                       std::int64_t in, std::int64_t out) {
  Require(T >= 0 && in >= 0 && out >= 0, "linear sizes must be non-negative");
  if (T == 0 || out == 0) return;
  Op op;
  float beta = 0.0f;
  if (b) {
    SFX_LAUNCH(FillRowsKernel, Blocks(T * out, 256), dim3(256), 0, op.stream)(b, y, T, out);
    SFX_CUDA_LAUNCH_CHECK("FillRowsKernel");
    beta = 1.0f;
  }
  const std::int64_t ld = std::max<std::int64_t>(1, in);
  LaunchGemmT(op.stream, false, true, T, out, in, 1.0f, x, ld, w, ld, beta, y, out);
  op.Done();
}

void LinearBackwardBf16(const std::uint16_t* w, const float* dy, float* dx, float* db, std::int64_t T, std::int64_t in,
                        std::int64_t out, bool accumulateDx) {
  Require(T >= 0 && in >= 0 && out >= 0, "linear sizes must be non-negative");
  if (T == 0 && !dx) return;
  const std::int64_t ldIn = std::max<std::int64_t>(1, in), ldOut = std::max<std::int64_t>(1, out);
  Op op;
  if (dx)
    LaunchGemmT(op.stream, false, false, T, in, out, 1.0f, dy, ldOut, w, ldIn, accumulateDx ? 1.0f : 0.0f, dx, ldIn);
  if (db && T > 0 && out > 0) {
    SFX_LAUNCH(AddColumnsKernel, Blocks(out, 128), dim3(128), 0, op.stream)(dy, T, out, db);
    SFX_CUDA_LAUNCH_CHECK("AddColumnsKernel");
  }
  op.Done();
}

// ---- RMSNorm ----------------------------------------------------------------------------------

__global__ void __launch_bounds__(kRowThreads)
    RmsNormForwardKernel(const float* x, const float* g, float* y, float* rstd, long long D, float eps) {
  __shared__ double sh[kRowThreads];
  const long long r = blockIdx.x;
  const float* xr = x + r * D;
  float s = 0;
  for (long long i = threadIdx.x; i < D; i += kRowThreads) s = fmaf(xr[i], xr[i], s);
  const double ms = BlockSum(s, sh, kRowThreads) / static_cast<double>(D);
  const float rs = static_cast<float>(1.0 / sqrt(ms + static_cast<double>(eps)));
  if (threadIdx.x == 0) rstd[r] = rs;
  for (long long i = threadIdx.x; i < D; i += kRowThreads) y[r * D + i] = xr[i] * rs * g[i];
}

__global__ void __launch_bounds__(kRowThreads)
    RmsNormBackwardKernel(const float* x, const float* g, const float* rstd, const float* dy, float* dx, long long D,
                          int accumulate) {
  __shared__ double sh[kRowThreads];
  const long long r = blockIdx.x;
  const float* xr = x + r * D;
  const float* dyr = dy + r * D;
  float s = 0;
  for (long long i = threadIdx.x; i < D; i += kRowThreads) s = fmaf(dyr[i] * g[i], xr[i], s);
  const double sum = BlockSum(s, sh, kRowThreads);
  const float rs = rstd[r];
  const float coef = static_cast<float>(static_cast<double>(rs) * rs * rs * sum / static_cast<double>(D));
  for (long long i = threadIdx.x; i < D; i += kRowThreads) {
    float d = rs * dyr[i] * g[i] - coef * xr[i];
    if (accumulate) d += dx[r * D + i];
    dx[r * D + i] = d;
  }
}

/** dg[d] += sum_r dy[r, d] x[r, d] rstd[r], rows in order. */
__global__ void RmsNormWeightGradKernel(const float* x, const float* rstd, const float* dy, float* dg, long long T,
                                        long long D) {
  const long long d = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= D) return;
  float a = dg[d];
  for (long long r = 0; r < T; ++r) a += dy[r * D + d] * x[r * D + d] * rstd[r];
  dg[d] = a;
}

constexpr long long kNormChunkRows = 256;  // rows per partial sum of the gain gradient (many rows: q/k norm over heads)

/** partial[c, d] = sum over rows [c rows, (c + 1) rows) of dy[r, d] x[r, d] rstd[r], rows in order. */
__global__ void RmsNormWeightPartialKernel(const float* x, const float* rstd, const float* dy, float* partial,
                                           long long T, long long D, long long rows) {
  const long long d = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= D) return;
  const long long r0 = static_cast<long long>(blockIdx.y) * rows, r1 = r0 + rows < T ? r0 + rows : T;
  float a = 0.0f;
  for (long long r = r0; r < r1; ++r) a += dy[r * D + d] * x[r * D + d] * rstd[r];
  partial[static_cast<long long>(blockIdx.y) * D + d] = a;
}

/** dg[d] += sum_c partial[c, d], chunks in order. */
__global__ void AddPartialsKernel(const float* partial, long long chunks, long long D, float* dg) {
  const long long d = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= D) return;
  float a = dg[d];
  for (long long c = 0; c < chunks; ++c) a += partial[c * D + d];
  dg[d] = a;
}

void RmsNormForward(const float* x, const float* g, float* y, float* rstd, std::int64_t T, std::int64_t D, float eps) {
  Require(T >= 0, "T must be non-negative");
  Require(D > 0, "D must be positive");
  Require(eps > 0.0f && std::isfinite(eps), "eps must be a positive finite number");
  if (T == 0) return;
  Op op;
  SFX_LAUNCH(RmsNormForwardKernel, static_cast<unsigned>(T), dim3(kRowThreads), 0, op.stream)(x, g, y, rstd, D, eps);
  SFX_CUDA_LAUNCH_CHECK("RmsNormForwardKernel");
  op.Done();
}

void RmsNormBackward(const float* x, const float* g, const float* rstd, const float* dy, float* dx, float* dg,
                     std::int64_t T, std::int64_t D, bool accumulateDx) {
  Require(T >= 0 && D >= 0, "sizes must be non-negative");
  if (T == 0 || D == 0) return;
  DeviceBuffer<float> partial;  // (declared before the stream: freed after the stream is waited for)
  Op op;
  // The weight gradient first: dx may be dy itself. A frozen gain (dg null) gets none. Many
  // rows (the q/k norm runs over rows x heads) are summed in chunks of rows side by side, then
  // the chunks in order: a fixed order, so deterministic.
  if (dg) {
    const long long rows = std::max<long long>(kNormChunkRows, CeilDiv<long long>(T, 65535));
    const long long chunks = CeilDiv<long long>(T, rows);
    if (chunks == 1) {
      SFX_LAUNCH(RmsNormWeightGradKernel, Blocks(D, 128), dim3(128), 0, op.stream)(x, rstd, dy, dg, T, D);
      SFX_CUDA_LAUNCH_CHECK("RmsNormWeightGradKernel");
    } else {
      partial = DeviceBuffer<float>(CurrentDevice(), static_cast<std::size_t>(chunks * D),
                                    "rmsnorm gain partial sums (cuda)");
      SFX_LAUNCH(RmsNormWeightPartialKernel, dim3(Blocks(D, 128), static_cast<unsigned>(chunks)), dim3(128), 0,
                 op.stream)
      (x, rstd, dy, partial.data(), T, D, rows);
      SFX_CUDA_LAUNCH_CHECK("RmsNormWeightPartialKernel");
      SFX_LAUNCH(AddPartialsKernel, Blocks(D, 128), dim3(128), 0, op.stream)(partial.data(), chunks, D, dg);
      SFX_CUDA_LAUNCH_CHECK("AddPartialsKernel");
    }
  }
  SFX_LAUNCH(RmsNormBackwardKernel, static_cast<unsigned>(T), dim3(kRowThreads), 0, op.stream)
  (x, g, rstd, dy, dx, D, accumulateDx ? 1 : 0);
  SFX_CUDA_LAUNCH_CHECK("RmsNormBackwardKernel");
  op.Done();
}

// ---- RoPE -------------------------------------------------------------------------------------

void RopeApply(const RopeTable& table, const float* x, float* out, const std::int32_t* pos, std::int64_t T,
               std::int64_t H, float sign) {
  Require(T >= 0 && H >= 0, "sizes must be non-negative");
  if (T == 0 || H == 0) return;
  const int dev = CurrentDevice();
  const auto n = static_cast<std::size_t>(table.maxPositions() * (table.headDim() / 2));
  DeviceBuffer<float> c(dev, n, "rope cos table (cuda)"), s(dev, n, "rope sin table (cuda)");
  c.Upload(table.cos());
  s.Upload(table.sin());
  Op op;
  const long long work = T * H * (table.headDim() / 2);
  SFX_LAUNCH(RopeKernel, Blocks(work, 256), dim3(256), 0, op.stream)
  (x, out, pos, T, H, table.headDim(), c.data(), s.data(), sign);
  SFX_CUDA_LAUNCH_CHECK("RopeKernel");
  op.Done();
}

void RopeForward(const RopeTable& t, const float* x, float* out, const std::int32_t* pos, std::int64_t T,
                 std::int64_t H) {
  RopeApply(t, x, out, pos, T, H, 1.0f);
}
void RopeBackward(const RopeTable& t, const float* dy, float* dx, const std::int32_t* pos, std::int64_t T,
                  std::int64_t H) {
  RopeApply(t, dy, dx, pos, T, H, -1.0f);
}

// ---- SwiGLU -----------------------------------------------------------------------------------

__device__ __forceinline__ float Sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

__global__ void SwiGluForwardKernel(const float* h, float* out, long long T, long long F, SwiGluParams p) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= T * F) return;
  const long long r = e / F, i = e % F;
  float g = h[r * 2 * F + i], u = h[r * 2 * F + F + i];
  if (p.limit > 0.0f) {
    g = fminf(p.limit, g);
    u = fminf(p.limit, fmaxf(-p.limit, u));
  }
  out[e] = g * Sigmoid(p.alpha * g) * (u + p.upBias);
}

__global__ void SwiGluBackwardKernel(const float* h, const float* dout, float* dh, long long T, long long F,
                                     SwiGluParams p, int accumulate) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= T * F) return;
  const long long r = e / F, i = e % F;
  const float g0 = h[r * 2 * F + i], u0 = h[r * 2 * F + F + i], d = dout[e];
  float g = g0, u = u0, gpass = 1.0f, upass = 1.0f;
  if (p.limit > 0.0f) {
    g = fminf(p.limit, g0);
    u = fminf(p.limit, fmaxf(-p.limit, u0));
    gpass = p.limit >= g0 ? 1.0f : 0.0f;
    upass = (u0 >= -p.limit && p.limit >= u0) ? 1.0f : 0.0f;
  }
  const float sig = Sigmoid(p.alpha * g);
  float dg = d * (u + p.upBias) * fmaf(p.alpha * g * sig, 1.0f - sig, sig) * gpass;
  float du = d * g * sig * upass;
  float* dgp = dh + r * 2 * F + i;
  float* dup = dgp + F;
  if (accumulate) {
    dg += *dgp;
    du += *dup;
  }
  *dgp = dg;
  *dup = du;
}

void SwiGluForward(const float* h, float* out, std::int64_t T, std::int64_t F, SwiGluParams p) {
  Require(T >= 0 && F >= 0, "sizes must be non-negative");
  CheckSwiGluParams(p);
  if (T == 0 || F == 0) return;
  Op op;
  SFX_LAUNCH(SwiGluForwardKernel, Blocks(T * F, 256), dim3(256), 0, op.stream)(h, out, T, F, p);
  SFX_CUDA_LAUNCH_CHECK("SwiGluForwardKernel");
  op.Done();
}

void SwiGluBackward(const float* h, const float* dout, float* dh, std::int64_t T, std::int64_t F, SwiGluParams p,
                    bool accumulate) {
  Require(T >= 0 && F >= 0, "sizes must be non-negative");
  CheckSwiGluParams(p);
  if (T == 0 || F == 0) return;
  Op op;
  SFX_LAUNCH(SwiGluBackwardKernel, Blocks(T * F, 256), dim3(256), 0, op.stream)
  (h, dout, dh, T, F, p, accumulate ? 1 : 0);
  SFX_CUDA_LAUNCH_CHECK("SwiGluBackwardKernel");
  op.Done();
}

// ---- embedding --------------------------------------------------------------------------------

__global__ void EmbeddingForwardKernel(const float* table, const std::int32_t* ids, float* out, long long T,
                                       long long D) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= T * D) return;
  out[e] = table[static_cast<long long>(ids[e / D]) * D + e % D];
}

__global__ void EmbeddingForwardBf16Kernel(const std::uint16_t* table, const std::int32_t* ids, float* out, long long T,
                                           long long D) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= T * D) return;
  out[e] = LoadElement(table + static_cast<long long>(ids[e / D]) * D + e % D);
}

/** dtable[ids[t], d] += dout[t, d], tokens in order per column (deterministic, no atomics). */
__global__ void EmbeddingBackwardKernel(const std::int32_t* ids, const float* dout, float* dtable, long long T,
                                        long long D) {
  const long long d = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= D) return;
  for (long long t = 0; t < T; ++t) dtable[static_cast<long long>(ids[t]) * D + d] += dout[t * D + d];
}

void EmbeddingForward(const float* table, const std::int32_t* ids, float* out, std::int64_t T, std::int64_t,
                      std::int64_t D) {
  if (T == 0 || D == 0) return;
  Op op;
  SFX_LAUNCH(EmbeddingForwardKernel, Blocks(T * D, 256), dim3(256), 0, op.stream)(table, ids, out, T, D);
  SFX_CUDA_LAUNCH_CHECK("EmbeddingForwardKernel");
  op.Done();
}

void EmbeddingForwardBf16(const std::uint16_t* table, const std::int32_t* ids, float* out, std::int64_t T, std::int64_t,
                          std::int64_t D) {
  if (T == 0 || D == 0) return;
  Op op;
  SFX_LAUNCH(EmbeddingForwardBf16Kernel, Blocks(T * D, 256), dim3(256), 0, op.stream)(table, ids, out, T, D);
  SFX_CUDA_LAUNCH_CHECK("EmbeddingForwardBf16Kernel");
  op.Done();
}

void EmbeddingBackward(const std::int32_t* ids, const float* dout, float* dtable, std::int64_t T, std::int64_t,
                       std::int64_t D) {
  if (T == 0 || D == 0) return;
  Op op;
  SFX_LAUNCH(EmbeddingBackwardKernel, Blocks(D, 128), dim3(128), 0, op.stream)(ids, dout, dtable, T, D);
  SFX_CUDA_LAUNCH_CHECK("EmbeddingBackwardKernel");
  op.Done();
}

// ---- log-softmax / cross-entropy ---------------------------------------------------------------

__global__ void __launch_bounds__(kRowThreads)
    LogSoftmaxForwardKernel(const float* logits, const std::int32_t* targets, long long V, float scale, float* logp,
                            float* entropy, float* lse) {
  __shared__ double shd[kRowThreads];
  __shared__ float shf[kRowThreads];
  const long long r = blockIdx.x;
  const float* z = logits + r * V;
  float mx = -INFINITY;
  for (long long i = threadIdx.x; i < V; i += kRowThreads) mx = fmaxf(mx, z[i] * scale);
  const float m = BlockMax(mx, shf, kRowThreads);
  float s = 0, sz = 0;
  for (long long i = threadIdx.x; i < V; i += kRowThreads) {
    const float zs = z[i] * scale - m;
    const float e = expf(zs);
    s += e;
    sz = fmaf(e, fmaxf(-1e4f, zs), sz);
  }
  const double sum = BlockSum(s, shd, kRowThreads);
  const double szSum = BlockSum(sz, shd, kRowThreads);
  if (threadIdx.x != 0) return;
  const double l = static_cast<double>(m) + log(sum);
  lse[r] = static_cast<float>(l);
  if (entropy) entropy[r] = static_cast<float>(log(sum) - szSum / sum);
  if (logp) {
    const std::int32_t t = targets ? targets[r] : -1;
    logp[r] = t >= 0 ? static_cast<float>(static_cast<double>(z[t]) * scale - l) : 0.0f;
  }
}

__global__ void LogSoftmaxBackwardKernel(const float* logits, const std::int32_t* targets, const float* lse,
                                         const float* entropy, const float* dlogp, const float* dentropy,
                                         float* dlogits, long long V, float scale, int accumulate) {
  const long long r = blockIdx.y;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= V) return;
  const std::int32_t t = targets ? targets[r] : -1;
  const float gl = (dlogp && t >= 0) ? dlogp[r] : 0.0f;
  const float gh = dentropy ? dentropy[r] : 0.0f;
  const float ent = dentropy ? entropy[r] : 0.0f;
  const float lp = logits[r * V + i] * scale - lse[r];
  const float p = expf(lp);
  float d = p * fmaf(-gh * scale, fmaxf(-1e4f, lp) + ent, -gl * scale);
  if (accumulate) d += dlogits[r * V + i];
  if (i == t) d += gl * scale;
  dlogits[r * V + i] = d;
}

void LogSoftmaxForward(const float* logits, const std::int32_t* targets, std::int64_t T, std::int64_t V, float scale,
                       float* logp, float* entropy, float* lse) {
  Require(T >= 0, "T must be non-negative");
  Require(V > 0, "V must be positive");
  Require(scale > 0.0f && std::isfinite(scale), "scale must be a positive finite number");
  if (T == 0) return;
  Op op;
  SFX_LAUNCH(LogSoftmaxForwardKernel, static_cast<unsigned>(T), dim3(kRowThreads), 0, op.stream)
  (logits, targets, V, scale, logp, entropy, lse);
  SFX_CUDA_LAUNCH_CHECK("LogSoftmaxForwardKernel");
  op.Done();
}

void LogSoftmaxBackward(const float* logits, const std::int32_t* targets, const float* lse, const float* entropy,
                        const float* dlogp, const float* dentropy, float* dlogits, std::int64_t T, std::int64_t V,
                        float scale, bool accumulate) {
  Require(T >= 0, "T must be non-negative");
  Require(V > 0, "V must be positive");
  Require(scale > 0.0f && std::isfinite(scale), "scale must be a positive finite number");
  Require(!(accumulate && dlogits == logits), "dlogits may alias logits only when not accumulating");
  if (T == 0) return;
  Require(T < 65536, "the CUDA log-softmax backward takes fewer than 65536 rows per call");
  Op op;
  SFX_LAUNCH(LogSoftmaxBackwardKernel, dim3(Blocks(V, 256), static_cast<unsigned>(T)), dim3(256), 0, op.stream)
  (logits, targets, lse, entropy, dlogp, dentropy, dlogits, V, scale, accumulate ? 1 : 0);
  SFX_CUDA_LAUNCH_CHECK("LogSoftmaxBackwardKernel");
  op.Done();
}

CrossEntropyResult CrossEntropyForward(const float* logits, const std::int32_t* targets, std::int64_t T, std::int64_t V,
                                       float* losses, float* lse) {
  Require(T >= 0 && V >= 0, "sizes must be non-negative");
  const int dev = CurrentDevice();
  DeviceBuffer<float> own;
  if (!losses) {
    own = DeviceBuffer<float>(dev, static_cast<std::size_t>(T), "cross-entropy losses (cuda)");
    losses = own.data();
  }
  LogSoftmaxForward(logits, targets, T, V, 1.0f, losses, nullptr, lse);
  std::vector<float> l(static_cast<std::size_t>(T));
  std::vector<std::int32_t> tg(static_cast<std::size_t>(T));
  if (T > 0) {
    CopyToHost(dev, l.data(), losses, l.size() * sizeof(float));
    CopyToHost(dev, tg.data(), targets, tg.size() * sizeof(std::int32_t));
  }
  CrossEntropyResult r{0.0, 0};
  double sum = 0.0;
  for (std::int64_t t = 0; t < T; ++t) {
    l[t] = tg[t] >= 0 ? -l[t] : 0.0f;
    if (tg[t] >= 0) {
      sum += l[t];
      ++r.count;
    }
  }
  if (T > 0) CopyToDevice(dev, losses, l.data(), l.size() * sizeof(float));
  r.loss = r.count > 0 ? sum / static_cast<double>(r.count) : 0.0;
  return r;
}

void CrossEntropyBackward(const float* logits, const std::int32_t* targets, const float* lse, float* dlogits,
                          std::int64_t T, std::int64_t V, float gradScale, bool accumulate) {
  Require(T >= 0 && V >= 0, "sizes must be non-negative");
  Require(std::isfinite(gradScale), "gradScale must be finite");
  if (T == 0) return;
  const int dev = CurrentDevice();
  std::vector<float> g(static_cast<std::size_t>(T), -gradScale);
  DeviceBuffer<float> dlogp(dev, g.size(), "cross-entropy dlogp (cuda)");
  dlogp.Upload(g.data());
  LogSoftmaxBackward(logits, targets, lse, nullptr, dlogp.data(), nullptr, dlogits, T, V, 1.0f, accumulate);
}

// ---- optimiser ----------------------------------------------------------------------------------

struct AdamWScalarsDev {
  float beta1, beta2, eps, decayFactor, gradScale, stepSize, invSqrtBc2;
};

__global__ void AdamWKernel(float* p, const float* g, float* m, float* v, long long n, AdamWScalarsDev s) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float gv = g[i] * s.gradScale;
  const float mv = fmaf(s.beta1, m[i], (1.0f - s.beta1) * gv);
  const float vv = fmaf(s.beta2, v[i], (1.0f - s.beta2) * gv * gv);
  const float denom = fmaf(sqrtf(vv), s.invSqrtBc2, s.eps);
  m[i] = mv;
  v[i] = vv;
  p[i] = p[i] * s.decayFactor - s.stepSize * mv / denom;
}

void AdamWUpdate(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamWOptions& o, std::int64_t step,
                 float gradScale, bool decay) {
  CheckAdamWOptions(o);
  Require(n >= 0, "n must be non-negative");
  Require(step >= 1, "step must be >= 1 (1-based)");
  Require(std::isfinite(gradScale), "gradScale must be finite");
  if (n == 0) return;
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
  const AdamWScalarsDev s{static_cast<float>(o.beta1),
                          static_cast<float>(o.beta2),
                          static_cast<float>(o.eps),
                          decay ? static_cast<float>(1.0 - o.lr * o.weightDecay) : 1.0f,
                          gradScale,
                          static_cast<float>(o.lr / bc1),
                          static_cast<float>(1.0 / std::sqrt(bc2))};
  Op op;
  SFX_LAUNCH(AdamWKernel, Blocks(n, 256), dim3(256), 0, op.stream)(p, g, m, v, n, s);
  SFX_CUDA_LAUNCH_CHECK("AdamWKernel");
  op.Done();
}

constexpr long long kSumChunk = 16384;

__global__ void __launch_bounds__(kRowThreads) SumSquaresKernel(const float* x, long long n, double* partial) {
  __shared__ double sh[kRowThreads];
  const long long base = static_cast<long long>(blockIdx.x) * kSumChunk;
  const long long end = base + kSumChunk < n ? base + kSumChunk : n;
  float s = 0;
  for (long long i = base + threadIdx.x; i < end; i += kRowThreads) s = fmaf(x[i], x[i], s);
  const double t = BlockSum(s, sh, kRowThreads);
  if (threadIdx.x == 0) partial[blockIdx.x] = t;
}

double SumSquares(const float* x, std::int64_t n) {
  Require(n >= 0, "n must be non-negative");
  if (n == 0) return 0.0;
  const int dev = CurrentDevice();
  const auto blocks = static_cast<std::size_t>(CeilDiv<long long>(n, kSumChunk));
  DeviceBuffer<double> partial(dev, blocks, "sum of squares partials (cuda)");
  Op op;
  SFX_LAUNCH(SumSquaresKernel, static_cast<unsigned>(blocks), dim3(kRowThreads), 0, op.stream)(x, n, partial.data());
  SFX_CUDA_LAUNCH_CHECK("SumSquaresKernel");
  op.Done();
  std::vector<double> h(blocks);
  partial.Download(h.data());
  double s = 0.0;
  for (double v : h) s += v;
  return s;
}

const ModelOps kCudaOps = {UseDevice,           Gemm,
                           LinearForward,       LinearBackward,
                           RmsNormForward,      RmsNormBackward,
                           RopeForward,         RopeBackward,
                           SwiGluForward,       SwiGluBackward,
                           EmbeddingForward,    EmbeddingBackward,
                           LogSoftmaxForward,   LogSoftmaxBackward,
                           CrossEntropyForward, CrossEntropyBackward,
                           AdamWUpdate,         SumSquares,
                           GemmMixed,           LinearForwardBf16,
                           LinearBackwardBf16,  EmbeddingForwardBf16};

[[maybe_unused]] const bool kRegistered = (RegisterCudaOps(&kCudaOps), true);

}  // namespace
}  // namespace sinkflex::model::cuda
