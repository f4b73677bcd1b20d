// Reference: docs/design.md, "The built-in model — semantics"; checked against the CPU transformer
//   (itself checked against test/model/fixtures/transformer-reference.ts).
// Tests: test/model/transformer-cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// The CUDA device kernels of the transformer (device_kernels.h): fill, add, bias rows, RoPE
// over device-resident tables, row gathers and decode attention against per-session caches.
// Each entry point validates its sizes, runs on a stream of its own and waits for it; every
// reduction has a fixed order (deterministic). Registered with RegisterCudaDeviceKernels at
// load; compiled only by the CUDA build.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "../core/cuda_check.cuh"
#include "../core/cuda_reduce.cuh"
#include "../core/device_buffer.h"
#include "../core/errors.h"
#include "cuda_rope.cuh"
#include "device_kernels.h"

namespace sinkflex::model::cuda {
namespace {

using cuda_reduce::BlockMax;
using cuda_reduce::BlockSum;

constexpr int kThreads = 256;
constexpr int kDecodeThreads = 128;

void Require(bool ok, const std::string& msg) {
  if (!ok) throw ArgumentError(msg);
}

unsigned Blocks(long long n, int threads) { return static_cast<unsigned>(CeilDiv<long long>(n, threads)); }

__global__ void FillKernel(float* x, long long n, float value) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

__global__ void AddKernel(float* y, const float* x, long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void AddRowsKernel(float* y, const float* b, long long rows, long long cols) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) y[i] += b[i % cols];
}

__global__ void GatherRowsKernel(const float* x, const std::int32_t* rows, float* out, long long R, long long cols) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < R * cols) out[e] = x[static_cast<long long>(rows[e / cols]) * cols + e % cols];
}

// One block per (query row, head): keys in chunks of kDecodeThreads (one score per thread), an
// online softmax seeded by the sink (m = sink, l = 1), outputs accumulated in shared memory.
__global__ void __launch_bounds__(kDecodeThreads)
    DecodeAttentionKernel(const DecodeRow* rows, const float* q, const float* sinks, float* out, long long H,
                          long long KV, long long Dh, float scale) {
  SFX_DYNAMIC_SHARED(float, sh);
  float* qs = sh;
  float* acc = qs + Dh;
  float* p = acc + Dh;
  float* red = p + kDecodeThreads;
  const DecodeRow row = rows[blockIdx.x];
  const long long r = row.index, h = blockIdx.y;
  const int tid = threadIdx.x;
  const long long g = h / (H / KV), stride = KV * Dh;
  for (long long d = tid; d < Dh; d += kDecodeThreads) {
    qs[d] = q[(r * H + h) * Dh + d];
    acc[d] = 0.0f;
  }
  __syncthreads();
  const float sink = sinks ? sinks[h] : -INFINITY;
  float m = sink, l = sink > -INFINITY ? 1.0f : 0.0f;
  for (long long c0 = 0; c0 < row.count; c0 += kDecodeThreads) {
    const long long j = c0 + tid;
    float z = -INFINITY;
    if (j < row.count) {
      const float* kj = row.k + (row.lo + j) * stride + g * Dh;
      float s = 0.0f;
      for (long long d = 0; d < Dh; ++d) s = fmaf(qs[d], kj[d], s);
      z = s * scale;
    }
    const float mNew = fmaxf(m, BlockMax(z, red, kDecodeThreads));
    const float alpha = expf(m - mNew);
    const float e = j < row.count ? expf(z - mNew) : 0.0f;
    p[tid] = e;
    l = l * alpha + BlockSum(e, red, kDecodeThreads);
    const long long n = row.count - c0 < kDecodeThreads ? row.count - c0 : kDecodeThreads;
    const float* vc = row.v + (row.lo + c0) * stride + g * Dh;
    for (long long d = tid; d < Dh; d += kDecodeThreads) {
      float a = acc[d] * alpha;
      for (long long jj = 0; jj < n; ++jj) a = fmaf(p[jj], vc[jj * stride + d], a);
      acc[d] = a;
    }
    m = mNew;
    __syncthreads();  // p is rewritten by the next chunk
  }
  for (long long d = tid; d < Dh; d += kDecodeThreads) out[(r * H + h) * Dh + d] = l > 0.0f ? acc[d] / l : 0.0f;
}

/** Runs the launches of one call on a stream of its own and waits for them. */
struct Op {
  CudaStream stream;
  void Done() { stream.Synchronize(); }
};

void Fill(float* x, std::int64_t n, float value) {
  Require(n >= 0, "fill: n must be non-negative");
  if (n == 0) return;
  Op op;
  SFX_LAUNCH(FillKernel, Blocks(n, kThreads), dim3(kThreads), 0, op.stream)(x, n, value);
  SFX_CUDA_LAUNCH_CHECK("FillKernel");
  op.Done();
}

void Add(float* y, const float* x, std::int64_t n) {
  Require(n >= 0, "add: n must be non-negative");
  if (n == 0) return;
  Op op;
  SFX_LAUNCH(AddKernel, Blocks(n, kThreads), dim3(kThreads), 0, op.stream)(y, x, n);
  SFX_CUDA_LAUNCH_CHECK("AddKernel");
  op.Done();
}

void AddRows(float* y, const float* b, std::int64_t rows, std::int64_t cols) {
  Require(rows >= 0 && cols >= 0, "addRows: sizes must be non-negative");
  if (rows == 0 || cols == 0) return;
  Op op;
  SFX_LAUNCH(AddRowsKernel, Blocks(rows * cols, kThreads), dim3(kThreads), 0, op.stream)(y, b, rows, cols);
  SFX_CUDA_LAUNCH_CHECK("AddRowsKernel");
  op.Done();
}

void Rope(const float* cosT, const float* sinT, std::int64_t headDim, const float* x, float* out,
          const std::int32_t* pos, std::int64_t T, std::int64_t H, bool inverse) {
  Require(T >= 0 && H >= 0, "rope: sizes must be non-negative");
  Require(headDim > 0 && headDim % 2 == 0, "rope: headDim must be positive and even");
  if (T == 0 || H == 0) return;
  Op op;
  const long long work = T * H * (headDim / 2);
  SFX_LAUNCH(RopeKernel, Blocks(work, kThreads), dim3(kThreads), 0, op.stream)
  (x, out, pos, T, H, headDim, cosT, sinT, inverse ? -1.0f : 1.0f);
  SFX_CUDA_LAUNCH_CHECK("RopeKernel");
  op.Done();
}

void GatherRows(const float* x, const std::int32_t* rows, float* out, std::int64_t R, std::int64_t cols) {
  Require(R >= 0 && cols >= 0, "gatherRows: sizes must be non-negative");
  if (R == 0 || cols == 0) return;
  Op op;
  SFX_LAUNCH(GatherRowsKernel, Blocks(R * cols, kThreads), dim3(kThreads), 0, op.stream)(x, rows, out, R, cols);
  SFX_CUDA_LAUNCH_CHECK("GatherRowsKernel");
  op.Done();
}

void DecodeAttention(const DecodeRow* rows, std::int64_t R, const float* q, const float* sinks, float* out,
                     std::int64_t H, std::int64_t KV, std::int64_t Dh) {
  Require(R >= 0, "decodeAttention: R must be non-negative");
  Require(H > 0 && KV > 0 && H % KV == 0 && H < 65536, "decodeAttention: heads must be a positive multiple of kvHeads");
  Require(Dh > 0 && Dh <= 4096, "decodeAttention: headDim must be in [1, 4096]");
  if (R == 0) return;
  for (std::int64_t r = 0; r < R; ++r) {
    Require(rows[r].index >= 0 && rows[r].count >= 1 && rows[r].lo >= 0 && rows[r].k && rows[r].v,
            "decodeAttention: every row needs an index and keys");
  }
  int device = 0;
  SFX_CUDA_CHECK(cudaGetDevice(&device));
  DeviceBuffer<DecodeRow> dev(device, static_cast<std::size_t>(R), "decode attention rows (cuda)");
  dev.Upload(rows);
  const std::size_t shared = static_cast<std::size_t>(2 * Dh + 2 * kDecodeThreads) * sizeof(float);
  if (shared > 48 * 1024) {
    SFX_CUDA_CHECK(cudaFuncSetAttribute(DecodeAttentionKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared)));
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  Op op;
  SFX_LAUNCH(DecodeAttentionKernel, dim3(static_cast<unsigned>(R), static_cast<unsigned>(H)), dim3(kDecodeThreads),
             shared, op.stream)
  (dev.data(), q, sinks, out, H, KV, Dh, scale);
  SFX_CUDA_LAUNCH_CHECK("DecodeAttentionKernel");
  op.Done();
}

const DeviceKernels kKernels = {Fill, Add, AddRows, Rope, GatherRows, DecodeAttention};

[[maybe_unused]] const bool kRegistered = (RegisterCudaDeviceKernels(&kKernels), true);

}  // namespace
}  // namespace sinkflex::model::cuda
