// Reference: docs/design.md, "The built-in model — semantics" (the MoE layer, moe.h); checked
//   against the CPU MoeForward/MoeBackward and the float64 reference
//   test/model/fixtures/moe-reference.ts.
// Tests: test/model/cuda-moe.test.ts, transformer-cuda-architectures.test.ts (on a GPU, or on the
//   CUDA emulator without one).
// The MoE layer on CUDA (moe_device.h). Forward: router logits (GEMM + bias rows), top-k and the
// softmax over the chosen k (a thread per token), the grouping plan on the host (a counting sort
// of the chosen experts: offsets, the token of every assignment row, the row of every (token,
// slot)), gathered rows, grouped GEMMs (cuda_gemm.cuh: one launch per stage over the row tiles
// of the experts that have tokens) for gate_up (+ bias rows) and down (+ bias rows), SwiGLU over
// all rows, and the weighted sum of each token's k expert outputs in slot order. Backward: the
// weight gradients dw[t, s] = dout[t] . y[t, s] (double, fixed tree), the router's through the
// softmax over the chosen k, dx of the router, then per expert (grouped) the down and gate_up
// weight gradients (GEMMs over the expert's rows), the bias gradients (rows summed in order),
// dx of the experts, and dx summed in slot order. Weights may be bfloat16 bits (frozen: no weight
// gradient), widened exactly inside the GEMMs. Every reduction has a fixed order: deterministic.
// Registered with RegisterCudaMoe at load; compiled only by the CUDA build.
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <vector>

#include "../core/allocator.h"
#include "../core/cuda_check.cuh"
#include "../core/cuda_reduce.cuh"
#include "../core/device_buffer.h"
#include "../core/errors.h"
#include "cuda_gemm.cuh"
#include "moe_device.h"
#include "ops_table.h"

namespace sinkflex::model::cuda {
namespace {

using cuda_reduce::BlockSum;

constexpr int kThreads = 256;
constexpr int kDotThreads = 128;

void Require(bool ok, const std::string& msg) {
  if (!ok) throw ArgumentError(msg);
}

int CurrentDevice() {
  int d = 0;
  SFX_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

unsigned Blocks(long long n, int threads) { return static_cast<unsigned>(CeilDiv<long long>(n, threads)); }

/** Runs the launches of one step on a stream of its own and waits for them. */
struct Op {
  CudaStream stream;
  void Done() { stream.Synchronize(); }
};

// ---- kernels ------------------------------------------------------------------------------------

/** y[r, c] = b[c]. */
__global__ void FillRowsKernel(const float* b, float* y, long long rows, long long cols) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) y[i] = b[i % cols];
}

/** y[r, c] = b[expert[r], c] (the bias rows of each assignment row's expert). */
__global__ void FillExpertRowsKernel(const float* b, const std::int32_t* expert, float* y, long long rows,
                                     long long cols) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) y[i] = b[static_cast<long long>(expert[i / cols]) * cols + i % cols];
}

/** acc[c] += sum_r src[r, c], rows in order. */
__global__ void AddColumnsKernel(const float* src, long long rows, long long cols, float* acc) {
  const long long c = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float a = acc[c];
  for (long long r = 0; r < rows; ++r) a += src[r * cols + c];
  acc[c] = a;
}

/** An expert that has assignment rows [r0, r0 + n). */
struct ExpertRows {
  long long e, r0, n;
};

/** acc[e, c] += sum of src rows [r0, r0 + n) of column c, rows in order, for each listed expert (blockIdx.y). */
__global__ void AddExpertColumnsKernel(const ExpertRows* experts, const float* src, long long cols, float* acc) {
  const ExpertRows g = experts[blockIdx.y];
  const long long c = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float a = acc[g.e * cols + c];
  for (long long r = g.r0; r < g.r0 + g.n; ++r) a += src[r * cols + c];
  acc[g.e * cols + c] = a;
}

/**
 * Per token: the K largest logits (descending; strictly greater wins, so ties go to the lower
 * expert index; a NaN never wins over a number), then w = softmax over the chosen logits (double).
 */
__global__ void RouteKernel(const float* logits, long long T, long long E, long long K, std::int32_t* index,
                            float* weight) {
  const long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const float* z = logits + t * E;
  std::int32_t* idx = index + t * K;
  for (long long s = 0; s < K; ++s) {
    long long best = -1;
    for (long long e = 0; e < E; ++e) {
      bool taken = false;
      for (long long j = 0; j < s; ++j) taken = taken || idx[j] == e;
      if (taken) continue;
      if (best < 0 || z[e] > z[best] || (isnan(z[best]) && !isnan(z[e]))) best = e;
    }
    idx[s] = static_cast<std::int32_t>(best);
  }
  const double m = z[idx[0]];
  double sum = 0.0;
  for (long long s = 0; s < K; ++s) sum += exp(static_cast<double>(z[idx[s]]) - m);
  for (long long s = 0; s < K; ++s)
    weight[t * K + s] = static_cast<float>(exp(static_cast<double>(z[idx[s]]) - m) / sum);
}

/** out[r] = x[rows[r]] for rows of `cols` floats. */
__global__ void GatherKernel(const float* x, const std::int32_t* rows, float* out, long long R, long long cols) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < R * cols) out[e] = x[static_cast<long long>(rows[e / cols]) * cols + e % cols];
}

/** out[t, d] = sum_s w[t, s] y[rowOf[t, s], d], slots in order. */
__global__ void CombineKernel(const float* y, const float* w, const std::int32_t* rowOf, float* out, long long T,
                              long long K, long long D) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= T * D) return;
  const long long t = e / D, d = e % D;
  float o = 0.0f;
  for (long long s = 0; s < K; ++s) {
    const float v = w[t * K + s] * y[static_cast<long long>(rowOf[t * K + s]) * D + d];
    o = s == 0 ? v : o + v;
  }
  out[e] = o;
}

/**
 * Block (t, s): dw[t, s] = dout[t] . y[rowOf[t, s]] (double partials, a fixed tree), and the
 * expert's output gradient dy[rowOf[t, s]] = w[t, s] dout[t].
 */
__global__ void __launch_bounds__(kDotThreads)
    SlotGradKernel(const float* dout, const float* y, const float* w, const std::int32_t* rowOf, long long K,
                   long long D, double* dw, float* dy) {
  __shared__ double sh[kDotThreads];
  const long long t = blockIdx.x, s = blockIdx.y;
  const long long row = rowOf[t * K + s];
  const float* go = dout + t * D;
  const float* yr = y + row * D;
  const float wt = w[t * K + s];
  double acc = 0.0;
  for (long long d = threadIdx.x; d < D; d += kDotThreads) {
    acc += static_cast<double>(go[d]) * yr[d];
    dy[row * D + d] = wt * go[d];
  }
  const double total = BlockSum(acc, sh, kDotThreads);
  if (threadIdx.x == 0) dw[t * K + s] = total;
}

/** The router logit gradients of a token: zero, except w_s (dw_s - sum_j w_j dw_j) at the chosen experts. */
__global__ void RouterGradKernel(const double* dw, const float* w, const std::int32_t* index, long long T, long long E,
                                 long long K, float* dlogits) {
  const long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  double mix = 0.0;
  for (long long s = 0; s < K; ++s) mix += static_cast<double>(w[t * K + s]) * dw[t * K + s];
  float* dz = dlogits + t * E;
  for (long long e = 0; e < E; ++e) dz[e] = 0.0f;
  for (long long s = 0; s < K; ++s) {
    dz[index[t * K + s]] = static_cast<float>(static_cast<double>(w[t * K + s]) * (dw[t * K + s] - mix));
  }
}

/** dx[t, d] (+)= r[t, d], then += part[rowOf[t, s], d] for the slots in order. */
__global__ void CombineDxKernel(const float* r, const float* part, const std::int32_t* rowOf, float* dx, long long T,
                                long long K, long long D, int accumulate) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= T * D) return;
  const long long t = e / D, d = e % D;
  float o = accumulate ? dx[e] + r[e] : r[e];
  for (long long s = 0; s < K; ++s) o += part[static_cast<long long>(rowOf[t * K + s]) * D + d];
  dx[e] = o;
}

// ---- host helpers -------------------------------------------------------------------------------

/** The experts with assignment rows, in expert order. */
std::vector<ExpertRows> Active(const std::vector<std::int64_t>& offsets) {
  std::vector<ExpertRows> a;
  for (std::size_t e = 0; e + 1 < offsets.size(); ++e) {
    if (offsets[e + 1] > offsets[e]) {
      a.push_back({static_cast<long long>(e), offsets[e], offsets[e + 1] - offsets[e]});
    }
  }
  return a;
}

/**
 * GroupedGemm over the active experts with B a [E, ...] weight tensor of float32 or bfloat16 bits or
 * MXFP4 (decoded exactly as the tiles load it):
 * `group(e, r0, n)` gives each expert's GemmGroup (offsets into A, B and C).
 */
template <typename Fn>
void ExpertGemm(int device, const std::vector<ExpertRows>& active, Fn&& group, bool transA, bool transB, const float* a,
                std::int64_t lda, const WeightData& b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  std::vector<GemmGroup> groups;
  groups.reserve(active.size());
  for (const ExpertRows& x : active) groups.push_back(group(x.e, x.r0, x.n));
  if (b.mxfp4()) {
    const Mxfp4Operand w{static_cast<const std::uint8_t*>(b.data), b.scales, 0};
    GroupedGemm(device, groups, transA, transB, 1.0f, a, lda, w, ldb, beta, c, ldc);
  } else if (b.bf16) {
    GroupedGemm(device, groups, transA, transB, 1.0f, a, lda, static_cast<const std::uint16_t*>(b.data), ldb, beta, c,
                ldc);
  } else {
    GroupedGemm(device, groups, transA, transB, 1.0f, a, lda, static_cast<const float*>(b.data), ldb, beta, c, ldc);
  }
}

/**
 * GroupedGemm over the active experts with float32 operands and a factor alpha (the expert LoRA
 * terms, moe.h MoeLora): `group(e, r0, n)` gives each expert's GemmGroup.
 */
template <typename Fn>
void ExpertGemmF32(int device, const std::vector<ExpertRows>& active, Fn&& group, bool transA, bool transB, float alpha,
                   const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                   std::int64_t ldc) {
  std::vector<GemmGroup> groups;
  groups.reserve(active.size());
  for (const ExpertRows& x : active) groups.push_back(group(x.e, x.r0, x.n));
  GroupedGemm(device, groups, transA, transB, alpha, a, lda, b, ldb, beta, c, ldc);
}

/** Per active expert e over its rows v [n, in]: t = v A_e^T [n, R], then y [n, out] += scale t B_e^T (A [E, R, in], B
 * [E, out, R]). */
void LoraExpertsForward(int device, const std::vector<ExpertRows>& active, const float* v, std::int64_t in,
                        const float* A, const float* B, std::int64_t out, std::int64_t R, float scale, float* t,
                        float* y) {
  ExpertGemmF32(
      device, active,
      [&](long long e, long long r0, long long n) { return GemmGroup{n, R, in, r0 * in, e * R * in, r0 * R}; }, false,
      true, 1.0f, v, in, A, in, 0.0f, t, R);
  ExpertGemmF32(
      device, active,
      [&](long long e, long long r0, long long n) { return GemmGroup{n, out, R, r0 * R, e * out * R, r0 * out}; },
      false, true, scale, t, R, B, R, 1.0f, y, out);
}

/**
 * The backward of LoraExpertsForward for the output gradient dy [A, out]: t = v A_e^T recomputed,
 * dB_e += scale dy^T t, dt = scale dy B_e, dA_e += dt^T v, dv += dt A_e (dA, dB may be null).
 */
void LoraExpertsBackward(int device, const std::vector<ExpertRows>& active, const float* v, std::int64_t in,
                         const float* A, const float* B, std::int64_t out, std::int64_t R, float scale, const float* dy,
                         float* dv, float* dA, float* dB, float* t, float* dt) {
  ExpertGemmF32(
      device, active,
      [&](long long e, long long r0, long long n) { return GemmGroup{n, R, in, r0 * in, e * R * in, r0 * R}; }, false,
      true, 1.0f, v, in, A, in, 0.0f, t, R);
  if (dB) {
    ExpertGemmF32(
        device, active,
        [&](long long e, long long r0, long long n) { return GemmGroup{out, R, n, r0 * out, r0 * R, e * out * R}; },
        true, false, scale, dy, out, t, R, 1.0f, dB, R);
  }
  ExpertGemmF32(
      device, active,
      [&](long long e, long long r0, long long n) { return GemmGroup{n, R, out, r0 * out, e * out * R, r0 * R}; },
      false, false, scale, dy, out, B, R, 0.0f, dt, R);
  if (dA) {
    ExpertGemmF32(
        device, active,
        [&](long long e, long long r0, long long n) { return GemmGroup{R, in, n, r0 * R, r0 * in, e * R * in}; }, true,
        false, 1.0f, dt, R, v, in, 1.0f, dA, in);
  }
  ExpertGemmF32(
      device, active,
      [&](long long e, long long r0, long long n) { return GemmGroup{n, in, R, r0 * R, e * R * in, r0 * in}; }, false,
      false, 1.0f, dt, R, A, in, 1.0f, dv, in);
}

/** C = op(A) op(B) + beta C with B float32 or bfloat16 bits (one plain GEMM). */
void WeightGemm(cudaStream_t s, bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k,
                const float* a, std::int64_t lda, const WeightData& b, std::int64_t ldb, float beta, float* c,
                std::int64_t ldc) {
  if (b.bf16)
    LaunchGemmT(s, transA, transB, m, n, k, 1.0f, a, lda, static_cast<const std::uint16_t*>(b.data), ldb, beta, c, ldc);
  else
    LaunchGemmT(s, transA, transB, m, n, k, 1.0f, a, lda, static_cast<const float*>(b.data), ldb, beta, c, ldc);
}

/** Sums of rows per expert into acc[E, cols] (+=), for the active experts. */
void AddExpertColumns(int device, const std::vector<ExpertRows>& active, const float* src, std::int64_t cols,
                      float* acc) {
  if (active.empty() || cols == 0) return;
  Require(active.size() < 65536, "moe: too many active experts for one launch");
  DeviceBuffer<ExpertRows> list(device, active.size(), "moe active experts (cuda)");
  list.Upload(active.data());
  Op op;
  SFX_LAUNCH(AddExpertColumnsKernel, dim3(Blocks(cols, 128), static_cast<unsigned>(active.size())), dim3(128), 0,
             op.stream)
  (list.data(), src, cols, acc);
  SFX_CUDA_LAUNCH_CHECK("AddExpertColumnsKernel");
  op.Done();
}

/**
 * The grouping plan from the chosen experts (downloaded): offsets, and per assignment row its
 * token and expert, per (token, slot) its row — exactly the CPU's (moe.cc) counting sort.
 */
void Plan(int device, std::int64_t T, std::int64_t E, std::int64_t K, DeviceMoeSaved& s) {
  const std::int64_t A = T * K;
  HostBuffer<std::int32_t> index(static_cast<std::size_t>(A), "moe expert index (from the device)");
  s.index.Download(index.data());
  s.offsets.assign(static_cast<std::size_t>(E + 1), 0);
  for (std::int64_t a = 0; a < A; ++a) ++s.offsets[static_cast<std::size_t>(index[a]) + 1];
  for (std::int64_t e = 0; e < E; ++e) s.offsets[e + 1] += s.offsets[e];
  HostBuffer<std::int32_t> token(static_cast<std::size_t>(A), "moe assignment tokens");
  HostBuffer<std::int32_t> rowOf(static_cast<std::size_t>(A), "moe assignment rows");
  HostBuffer<std::int32_t> rowExpert(static_cast<std::size_t>(A), "moe assignment experts");
  std::vector<std::int64_t> cursor(s.offsets.begin(), s.offsets.end() - 1);
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int32_t e = index[t * K + k];
      const std::int64_t row = cursor[static_cast<std::size_t>(e)]++;
      token[row] = static_cast<std::int32_t>(t);
      rowExpert[row] = e;
      rowOf[t * K + k] = static_cast<std::int32_t>(row);
    }
  }
  s.token = DeviceBuffer<std::int32_t>(device, static_cast<std::size_t>(A), "moe assignment tokens (cuda)");
  s.rowOf = DeviceBuffer<std::int32_t>(device, static_cast<std::size_t>(A), "moe assignment rows (cuda)");
  s.rowExpert = DeviceBuffer<std::int32_t>(device, static_cast<std::size_t>(A), "moe assignment experts (cuda)");
  s.token.Upload(token.data());
  s.rowOf.Upload(rowOf.data());
  s.rowExpert.Upload(rowExpert.data());
}

DeviceBuffer<float> Floats(int device, std::int64_t n, const char* what) {
  return DeviceBuffer<float>(device, static_cast<std::size_t>(n), what);
}

/** xg[r] = x[token[r]] for the A assignment rows. */
DeviceBuffer<float> GatherRows(int device, const float* x, const DeviceMoeSaved& s, std::int64_t A, std::int64_t D) {
  DeviceBuffer<float> xg = Floats(device, A * D, "moe gathered rows (cuda)");
  Op op;
  SFX_LAUNCH(GatherKernel, Blocks(A * D, kThreads), dim3(kThreads), 0, op.stream)(x, s.token.data(), xg.data(), A, D);
  SFX_CUDA_LAUNCH_CHECK("GatherKernel");
  op.Done();
  return xg;
}

void CheckSizes(const MoeParams& p, std::int64_t T) {
  CheckMoeParams(p);
  Require(T >= 0, "T must be non-negative, got " + std::to_string(T));
  Require(T * p.topK < (std::int64_t{1} << 31), "moe: rows x topK must be below 2^31 on CUDA");
  Require(T < 65536 * std::int64_t{32768}, "moe: too many rows for one CUDA call");
}

// ---- forward / backward -------------------------------------------------------------------------

void Forward(const MoeParams& p, const float* x, float* out, std::int64_t T, DeviceMoeSaved* saved, float* logitsOut) {
  CheckSizes(p, T);
  if (T == 0) return;
  Require(x != nullptr && out != nullptr, "x and out are required");
  const ModelOps& ops = *GetCudaOps();
  const int dev = CurrentDevice();
  const std::int64_t D = p.width, F = p.ffn, E = p.experts, K = p.topK, A = T * K;
  DeviceMoeSaved local;
  DeviceMoeSaved& s = saved ? *saved : local;
  s = DeviceMoeSaved();
  s.T = T;

  // router logits, the top-k and their weights
  DeviceBuffer<float> ownLogits;
  float* logits = logitsOut;
  if (logits == nullptr) {
    ownLogits = Floats(dev, T * E, "moe router logits (cuda)");
    logits = ownLogits.data();
  }
  s.index = DeviceBuffer<std::int32_t>(dev, static_cast<std::size_t>(A), "moe expert index (cuda)");
  s.weight = Floats(dev, A, "moe expert weights (cuda)");
  {
    Op op;
    if (p.routerBias) {
      SFX_LAUNCH(FillRowsKernel, Blocks(T * E, kThreads), dim3(kThreads), 0, op.stream)(p.routerBias, logits, T, E);
      SFX_CUDA_LAUNCH_CHECK("FillRowsKernel");
    }
    WeightGemm(op.stream, false, true, T, E, D, x, D, p.router, D, p.routerBias ? 1.0f : 0.0f, logits, E);
    SFX_LAUNCH(RouteKernel, Blocks(T, 128), dim3(128), 0, op.stream)(logits, T, E, K, s.index.data(), s.weight.data());
    SFX_CUDA_LAUNCH_CHECK("RouteKernel");
    op.Done();
  }
  Plan(dev, T, E, K, s);
  const std::vector<ExpertRows> active = Active(s.offsets);

  // experts: gathered rows, gate_up (+ bias), SwiGLU, down (+ bias)
  DeviceBuffer<float> xg = GatherRows(dev, x, s, A, D);
  s.h = Floats(dev, A * 2 * F, "moe gate_up (cuda)");
  s.act = Floats(dev, A * F, "moe activation (cuda)");
  s.y = Floats(dev, A * D, "moe expert outputs (cuda)");
  if (p.gateUpBias) {
    Op op;
    SFX_LAUNCH(FillExpertRowsKernel, Blocks(A * 2 * F, kThreads), dim3(kThreads), 0, op.stream)
    (p.gateUpBias, s.rowExpert.data(), s.h.data(), A, 2 * F);
    SFX_CUDA_LAUNCH_CHECK("FillExpertRowsKernel");
    op.Done();
  }
  ExpertGemm(
      dev, active,
      [&](long long e, long long r0, long long n) { return GemmGroup{n, 2 * F, D, r0 * D, e * 2 * F * D, r0 * 2 * F}; },
      false, true, xg.data(), D, p.gateUp, D, p.gateUpBias ? 1.0f : 0.0f, s.h.data(), 2 * F);
  const MoeLora& l = p.lora;
  const std::int64_t R = l.rank;
  DeviceBuffer<float> loraT =
      (l.gateUp() || l.down()) ? Floats(dev, A * R, "moe expert lora x A^T (cuda)") : DeviceBuffer<float>();
  if (l.gateUp())
    LoraExpertsForward(dev, active, xg.data(), D, l.gateUpA, l.gateUpB, 2 * F, R, l.scale, loraT.data(), s.h.data());
  xg.reset();
  ops.swiGluForward(s.h.data(), s.act.data(), A, F, p.swiglu);
  if (p.downBias) {
    Op op;
    SFX_LAUNCH(FillExpertRowsKernel, Blocks(A * D, kThreads), dim3(kThreads), 0, op.stream)
    (p.downBias, s.rowExpert.data(), s.y.data(), A, D);
    SFX_CUDA_LAUNCH_CHECK("FillExpertRowsKernel");
    op.Done();
  }
  ExpertGemm(
      dev, active,
      [&](long long e, long long r0, long long n) { return GemmGroup{n, D, F, r0 * F, e * D * F, r0 * D}; }, false,
      true, s.act.data(), F, p.down, F, p.downBias ? 1.0f : 0.0f, s.y.data(), D);
  if (l.down())
    LoraExpertsForward(dev, active, s.act.data(), F, l.downA, l.downB, D, R, l.scale, loraT.data(), s.y.data());
  loraT.reset();

  // out[t] = sum over slots, in slot order
  Op op;
  SFX_LAUNCH(CombineKernel, Blocks(T * D, kThreads), dim3(kThreads), 0, op.stream)
  (s.y.data(), s.weight.data(), s.rowOf.data(), out, T, K, D);
  SFX_CUDA_LAUNCH_CHECK("CombineKernel");
  op.Done();
}

void Backward(const MoeParams& p, const float* x, const float* dout, DeviceMoeSaved& s, float* dx, const MoeGrads& g,
              bool accumulateDx, SavedUse use) {
  CheckSizes(p, s.T);
  const std::int64_t T = s.T, D = p.width, F = p.ffn, E = p.experts, K = p.topK, A = T * K;
  if (T == 0) return;
  Require(x != nullptr && dout != nullptr && dx != nullptr, "x, dout and dx are required");
  Require(s.index.size() == static_cast<std::size_t>(A) && s.y.size() == static_cast<std::size_t>(A * D) &&
              s.offsets.size() == static_cast<std::size_t>(E + 1),
          "the saved MoE state does not match these shapes (or the forward did not save it)");
  Require(!((p.router.frozen() && g.router) || (p.gateUp.frozen() && g.gateUp) || (p.down.frozen() && g.down)),
          "a bfloat16 or MXFP4 MoE weight is frozen: its gradient must be null");
  Require(K < 65536, "moe: topK must be below 65536 on CUDA");
  const MoeLora& l = p.lora;
  Require(!((!l.gateUp() && (g.gateUpLoraA || g.gateUpLoraB)) || (!l.down() && (g.downLoraA || g.downLoraB))),
          "an expert adapter gradient is set, but the adapter is not (lora.gateUpA / lora.downA is null)");
  const ModelOps& ops = *GetCudaOps();
  const int dev = CurrentDevice();
  const std::vector<ExpertRows> active = Active(s.offsets);
  const std::int64_t R = l.rank;
  const bool consume = use == SavedUse::kConsume;
  DeviceBuffer<float> loraT =
      (l.gateUp() || l.down()) ? Floats(dev, A * R, "moe expert lora x A^T (cuda)") : DeviceBuffer<float>();
  DeviceBuffer<float> loraDt =
      (l.gateUp() || l.down()) ? Floats(dev, A * R, "moe expert lora dt (cuda)") : DeviceBuffer<float>();

  // router: dw[t, s] = dout[t] . y[t, s]; softmax over the chosen k; logit gradients; router weights and dx
  DeviceBuffer<float> dlogits = Floats(dev, T * E, "moe router logit gradients (cuda)");
  // consumed: each expert output row becomes its gradient (SlotGradKernel: each thread reads its
  // element of y before it writes the same element of dy)
  DeviceBuffer<float> ownDy =
      consume ? DeviceBuffer<float>() : Floats(dev, A * D, "moe expert output gradients (cuda)");
  float* dYa = consume ? s.y.data() : ownDy.data();
  DeviceBuffer<float> dxRouter = Floats(dev, T * D, "moe router input gradients (cuda)");
  {
    DeviceBuffer<double> dw(dev, static_cast<std::size_t>(A), "moe slot weight gradients (cuda)");
    Op op;
    SFX_LAUNCH(SlotGradKernel, dim3(static_cast<unsigned>(T), static_cast<unsigned>(K)), dim3(kDotThreads), 0,
               op.stream)
    (dout, s.y.data(), s.weight.data(), s.rowOf.data(), K, D, dw.data(), dYa);
    SFX_CUDA_LAUNCH_CHECK("SlotGradKernel");
    SFX_LAUNCH(RouterGradKernel, Blocks(T, 128), dim3(128), 0, op.stream)
    (dw.data(), s.weight.data(), s.index.data(), T, E, K, dlogits.data());
    SFX_CUDA_LAUNCH_CHECK("RouterGradKernel");
    if (g.router) LaunchGemmT(op.stream, true, false, E, D, T, 1.0f, dlogits.data(), E, x, D, 1.0f, g.router, D);
    if (g.routerBias) {
      SFX_LAUNCH(AddColumnsKernel, Blocks(E, 128), dim3(128), 0, op.stream)(dlogits.data(), T, E, g.routerBias);
      SFX_CUDA_LAUNCH_CHECK("AddColumnsKernel");
    }
    WeightGemm(op.stream, false, false, T, D, E, dlogits.data(), E, p.router, D, 0.0f, dxRouter.data(), D);
    op.Done();
  }
  dlogits.reset();

  // experts, grouped as in the forward; the gathered inputs only when a gate_up gradient needs them
  DeviceBuffer<float> xg = (g.gateUp != nullptr || l.gateUp()) ? GatherRows(dev, x, s, A, D) : DeviceBuffer<float>();
  // consumed: the SwiGLU outputs become their gradient unless a down adapter reads them after the
  // down product; the gate_up outputs become theirs (the elementwise SwiGLU backward, in place)
  const bool dactInAct = consume && !l.down();
  DeviceBuffer<float> ownDact =
      dactInAct ? DeviceBuffer<float>() : Floats(dev, A * F, "moe activation gradients (cuda)");
  DeviceBuffer<float> ownDh = consume ? DeviceBuffer<float>() : Floats(dev, A * 2 * F, "moe gate_up gradients (cuda)");
  float* dact = dactInAct ? s.act.data() : ownDact.data();
  float* dh = consume ? s.h.data() : ownDh.data();
  DeviceBuffer<float> dXa = Floats(dev, A * D, "moe expert input gradients (cuda)");
  if (g.downBias) AddExpertColumns(dev, active, dYa, D, g.downBias);
  if (g.down) {
    ExpertGemm(
        dev, active,
        [&](long long e, long long r0, long long n) { return GemmGroup{D, F, n, r0 * D, r0 * F, e * D * F}; }, true,
        false, dYa, D, WeightData{s.act.data(), false}, F, 1.0f, g.down, F);
  }
  ExpertGemm(
      dev, active,
      [&](long long e, long long r0, long long n) { return GemmGroup{n, F, D, r0 * D, e * D * F, r0 * F}; }, false,
      false, dYa, D, p.down, F, 0.0f, dact, F);
  if (l.down()) {
    LoraExpertsBackward(dev, active, s.act.data(), F, l.downA, l.downB, D, R, l.scale, dYa, dact, g.downLoraA,
                        g.downLoraB, loraT.data(), loraDt.data());
  }
  ownDy.reset();
  ops.swiGluBackward(s.h.data(), dact, dh, A, F, p.swiglu, false);
  ownDact.reset();
  if (g.gateUpBias) AddExpertColumns(dev, active, dh, 2 * F, g.gateUpBias);
  if (g.gateUp) {
    ExpertGemm(
        dev, active,
        [&](long long e, long long r0, long long n) {
          return GemmGroup{2 * F, D, n, r0 * 2 * F, r0 * D, e * 2 * F * D};
        },
        true, false, dh, 2 * F, WeightData{xg.data(), false}, D, 1.0f, g.gateUp, D);
  }
  ExpertGemm(
      dev, active,
      [&](long long e, long long r0, long long n) { return GemmGroup{n, D, 2 * F, r0 * 2 * F, e * 2 * F * D, r0 * D}; },
      false, false, dh, 2 * F, p.gateUp, D, 0.0f, dXa.data(), D);
  if (l.gateUp()) {
    LoraExpertsBackward(dev, active, xg.data(), D, l.gateUpA, l.gateUpB, 2 * F, R, l.scale, dh, dXa.data(),
                        g.gateUpLoraA, g.gateUpLoraB, loraT.data(), loraDt.data());
  }

  // dx[t] (+)= router part + the experts' parts in slot order
  Op op;
  SFX_LAUNCH(CombineDxKernel, Blocks(T * D, kThreads), dim3(kThreads), 0, op.stream)
  (dxRouter.data(), dXa.data(), s.rowOf.data(), dx, T, K, D, accumulateDx ? 1 : 0);
  SFX_CUDA_LAUNCH_CHECK("CombineDxKernel");
  op.Done();
  if (consume) s = DeviceMoeSaved();  // its buffers now hold gradients: no second backward
}

const DeviceMoe kMoe = {Forward, Backward};

[[maybe_unused]] const bool kRegistered = (RegisterCudaMoe(&kMoe), true);

}  // namespace
}  // namespace sinkflex::model::cuda
