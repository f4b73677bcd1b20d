// Reference: docs/design.md, "Sink attention — semantics"; checked against the CPU kernels and the
//   float64 reference test/attention/fixtures/reference.ts.
// Tests: test/attention/cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// Eager sink attention on CUDA: the baseline a user of a plain tensor framework writes, one
// kernel per framework op over materialised [batch, qHeads, qLen, kvLen + 1] fp32 tensors in
// tracked device memory (sink column last), the same steps as eager_cpu.cc:
//   forward   mask = dense bool mask; S = c Q K^T; (softcap); S[~mask] = -inf; S[.., kvLen] = sink;
//             P = softmax(S) (kept for the backward when asked); out = P[.., :kvLen] V
//   backward  dP = dO V^T (sink column 0); D = rowsum(P * dP) - dLse; dS = P (dP - D);
//             dsink = sum dS[.., kvLen]; (softcap: dS *= 1 - tanh^2 of the recomputed scores);
//             dS *= c; dq = dS K; dk = sum over the group of dS^T Q; dv = sum of P^T dO
// bf16 and fp16 inputs are first converted to fp32 copies (as `x.float()` would); outputs are
// converted back. Peak memory: mask + 2 tensors forward, 3 tensors backward (P, dP, dS).
#include <cmath>

#include "cuda_common.cuh"
#include "kernels.h"

namespace sinkflex::attention::cuda {
namespace {

constexpr int kThreads = 256;

// ---- a strided, batched fp32 matrix product -------------------------------------------------

// Operand element (row, col) of batch z = (outer, head) in [outer * H + head]:
//   p + outer * sb + ((head * hmul + hadd) / hdiv) * sh + row * rs + col * cs
struct Operand {
  const float* p;
  long long rs, cs, sb, sh;
  long long hmul, hadd, hdiv;
};
struct GemmParams {
  long long M, N, K, Z, H;
  float alpha, beta;  // C = alpha A B + beta C (beta 0: C is not read)
  Operand a, b;       // A: M x K, B: K x N
  float* c;
  long long crs, csb, csh;  // C element (m, n) of z: c + outer * csb + head * csh + m * crs + n
};

__device__ __forceinline__ long long Offset(const Operand& o, long long z, long long H) {
  const long long outer = z / H, head = z % H;
  return outer * o.sb + ((head * o.hmul + o.hadd) / o.hdiv) * o.sh;
}

// 64 x 64 tile of C per block, 16-deep slices of A and B in shared memory, 4 x 4 per thread.
__global__ void __launch_bounds__(kThreads) GemmKernel(GemmParams g) {
  __shared__ float As[16][65];
  __shared__ float Bs[16][65];
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const long long m0 = static_cast<long long>(blockIdx.y) * 64, n0 = static_cast<long long>(blockIdx.x) * 64;
  const bool aKFast = g.a.cs == 1, bNFast = g.b.cs == 1;
  for (long long z = blockIdx.z; z < g.Z; z += gridDim.z) {
    const float* A = g.a.p + Offset(g.a, z, g.H);
    const float* B = g.b.p + Offset(g.b, z, g.H);
    float acc[4][4] = {};
    for (long long k0 = 0; k0 < g.K; k0 += 16) {
      for (int e = threadIdx.x; e < 1024; e += kThreads) {
        const int m = aKFast ? e / 16 : e % 64, kk = aKFast ? e % 16 : e / 64;
        const long long gm = m0 + m, gk = k0 + kk;
        As[kk][m] = gm < g.M && gk < g.K ? A[gm * g.a.rs + gk * g.a.cs] : 0.0f;
        const int n = bNFast ? e % 64 : e / 16, kb = bNFast ? e / 64 : e % 16;
        const long long gn = n0 + n, gkb = k0 + kb;
        Bs[kb][n] = gn < g.N && gkb < g.K ? B[gkb * g.b.rs + gn * g.b.cs] : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < 16; ++kk) {
        float a[4], b[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) a[r] = As[kk][ty + 16 * r];
#pragma unroll
        for (int c = 0; c < 4; ++c) b[c] = Bs[kk][tx + 16 * c];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
      }
      __syncthreads();
    }
    float* C = g.c + (z / g.H) * g.csb + (z % g.H) * g.csh;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const long long m = m0 + ty + 16 * r;
      if (m >= g.M) continue;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const long long n = n0 + tx + 16 * c;
        if (n >= g.N) continue;
        float* dst = C + m * g.crs + n;
        *dst = g.beta != 0.0f ? g.alpha * acc[r][c] + g.beta * *dst : g.alpha * acc[r][c];
      }
    }
  }
}

void Gemm(const GemmParams& g, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((g.N + 63) / 64), static_cast<unsigned>((g.M + 63) / 64),
                  static_cast<unsigned>(g.Z < 65535 ? g.Z : 65535));
  if ((g.M + 63) / 64 > 65535) throw ArgumentError("the eager attention takes at most 4194240 query rows");
  SFX_LAUNCH(GemmKernel, grid, kThreads, 0, stream)(g);
  SFX_CUDA_LAUNCH_CHECK("GemmKernel");
}

// Operands over the attention layouts. z enumerates (batch, head) with H heads per batch.
Operand QLike(const float* x, const AttnParams& p, bool transpose, long long hmul = 1, long long hadd = 0) {
  // [B, T, Hq, D]: (i, d) or, transposed, (d, i)
  const long long rs = p.Hq * p.D;
  return Operand{x, transpose ? 1 : rs, transpose ? rs : 1, p.T * p.Hq * p.D, p.D, hmul, hadd, 1};
}
Operand KvLike(const float* x, const AttnParams& p, bool transpose) {
  // [B, Tk, Hkv, D] read by query head h through kv head h / G: (j, d) or (d, j)
  const long long rs = p.Hkv * p.D;
  return Operand{x, transpose ? 1 : rs, transpose ? rs : 1, p.Tk * p.Hkv * p.D, p.D, 1, 0, p.G};
}
Operand Scores(const float* x, const AttnParams& p, bool transpose, long long hmul = 1, long long hadd = 0) {
  // [B, Hq, T, Tk + 1]: (i, j) or (j, i)
  const long long Tk1 = p.Tk + 1;
  return Operand{x, transpose ? 1 : Tk1, transpose ? Tk1 : 1, p.Hq * p.T * Tk1, p.T * Tk1, hmul, hadd, 1};
}

// ---- row kernels (one block per row of a [B, Hq, T, Tk + 1] tensor) ---------------------------

__device__ float BlockReduce(float v, bool isMax, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      const float o = scratch[threadIdx.x + w];
      scratch[threadIdx.x] = isMax ? fmaxf(scratch[threadIdx.x], o) : scratch[threadIdx.x] + o;
    }
    __syncthreads();
  }
  const float r = scratch[0];
  __syncthreads();
  return r;
}

__global__ void DenseMaskKernel(AttnParams p, std::uint8_t* mask) {  // row = (mask batch, i)
  const long long row = blockIdx.x, b = row / p.T, i = row % p.T;
  for (long long j = threadIdx.x; j < p.Tk; j += kThreads)
    mask[row * p.Tk + j] = MaskAllowed(p.mask, b, p.qOffset + i, j);
}

__global__ void PrepareScoresKernel(AttnParams p, float* S, const std::uint8_t* mask, bool maskPerBatch,
                                    const float* sinks) {
  const long long row = blockIdx.x, i = row % p.T, h = (row / p.T) % p.Hq, b = row / (p.T * p.Hq);
  float* x = S + row * (p.Tk + 1);
  const std::uint8_t* m = mask + ((maskPerBatch ? b : 0) * p.T + i) * p.Tk;
  const float cap = p.softcap;
  for (long long j = threadIdx.x; j < p.Tk; j += kThreads) {
    float z = x[j];
    if (cap > 0.0f) z = cap * tanhf(z / cap);
    x[j] = m[j] ? z : -INFINITY;
  }
  if (threadIdx.x == 0) x[p.Tk] = sinks != nullptr ? sinks[h] : -INFINITY;
}

__global__ void SoftmaxKernel(AttnParams p, const float* S, float* P, float* lse) {
  __shared__ float scratch[kThreads];
  const long long row = blockIdx.x, n = p.Tk + 1;
  const float* x = S + row * n;
  float* y = P + row * n;
  float mx = -INFINITY;
  for (long long j = threadIdx.x; j < n; j += kThreads) mx = fmaxf(mx, x[j]);
  mx = BlockReduce(mx, true, scratch);
  if (mx == -INFINITY) {  // nothing visible and no sink
    for (long long j = threadIdx.x; j < n; j += kThreads) y[j] = 0.0f;
    if (threadIdx.x == 0 && lse != nullptr) lse[row] = -INFINITY;
    return;
  }
  float sum = 0.0f;
  for (long long j = threadIdx.x; j < n; j += kThreads) sum += expf(x[j] - mx);
  sum = BlockReduce(sum, false, scratch);
  const float inv = 1.0f / sum;
  for (long long j = threadIdx.x; j < n; j += kThreads) y[j] = expf(x[j] - mx) * inv;
  if (threadIdx.x == 0 && lse != nullptr) lse[row] = mx + logf(sum);
}

// dP[.., Tk] = 0; D = rowsum(P * dP) - dLse; dS = P (dP - D) over all Tk + 1 columns.
__global__ void SoftmaxGradKernel(AttnParams p, const float* P, float* dP, const float* dLse, float* dS) {
  __shared__ float scratch[kThreads];
  const long long row = blockIdx.x, n = p.Tk + 1;
  const float* pr = P + row * n;
  float* dp = dP + row * n;
  if (threadIdx.x == 0) dp[p.Tk] = 0.0f;  // the sink's value vector is zero
  __syncthreads();
  float d = 0.0f;
  for (long long j = threadIdx.x; j < n; j += kThreads) d = fmaf(pr[j], dp[j], d);
  d = BlockReduce(d, false, scratch);
  if (dLse != nullptr) d -= dLse[row];
  float* ds = dS + row * n;
  for (long long j = threadIdx.x; j < n; j += kThreads) ds[j] = pr[j] * (dp[j] - d);
}

// dsink_h = sum_{b, i} dS[b, h, i, Tk] (one block per head, in double).
__global__ void SinkColumnKernel(AttnParams p, const float* dS, float* dSinks) {
  __shared__ double part[kThreads];
  const long long h = blockIdx.x, n = p.Tk + 1;
  double s = 0.0;
  for (long long x = threadIdx.x; x < p.B * p.T; x += kThreads) {
    const long long b = x / p.T, i = x % p.T;
    s += dS[((b * p.Hq + h) * p.T + i) * n + p.Tk];
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) dSinks[h] = static_cast<float>(part[0]);
}

// dS *= c (times 1 - tanh^2(c raw / C) under softcap, raw = the recomputed q.k) over :Tk.
__global__ void ScaleGradKernel(AttnParams p, float* dS, const float* raw) {
  const long long row = blockIdx.x, n = p.Tk + 1;
  float* ds = dS + row * n;
  for (long long j = threadIdx.x; j < p.Tk; j += kThreads) {
    float g = ds[j];
    if (raw != nullptr) {
      const float t = tanhf(raw[row * n + j] * p.scale / p.softcap);
      g *= 1.0f - t * t;
    }
    ds[j] = g * p.scale;
  }
}

template <typename From, typename To>
__global__ void ConvertKernel(const From* src, To* dst, long long n) {
  for (long long x = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; x < n;
       x += static_cast<long long>(gridDim.x) * kThreads) {
    dst[x] = FromF<To>(ToF(src[x]));
  }
}

template <typename From, typename To>
void Convert(const From* src, To* dst, long long n, cudaStream_t stream) {
  if (n == 0) return;
  const long long blocks = (n + kThreads - 1) / kThreads;
  auto kernel = ConvertKernel<From, To>;
  SFX_LAUNCH(kernel, static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream)(src, dst, n);
  SFX_CUDA_LAUNCH_CHECK("ConvertKernel");
}

unsigned Rows(const AttnParams& p) {
  const long long rows = p.B * p.Hq * p.T;
  if (rows > 2147483647LL) throw ArgumentError("too many rows for the eager attention");
  return static_cast<unsigned>(rows);
}

std::size_t TensorElems(const AttnParams& p) { return static_cast<std::size_t>(p.B * p.Hq * p.T * (p.Tk + 1)); }

/** fp32 view of an input: the pointer itself (fp32) or a converted copy (bf16, fp16). */
const float* AsF32(int device, DType dtype, const void* x, long long n, DeviceBuffer<float>* copy, const char* what,
                   cudaStream_t stream) {
  if (dtype == DType::kF32) return static_cast<const float*>(x);
  *copy = DeviceBuffer<float>(device, static_cast<std::size_t>(n), what);
  if (dtype == DType::kF16)
    Convert(AsF16(x), copy->data(), n, stream);
  else
    Convert(AsBf16(x), copy->data(), n, stream);
  return copy->data();
}

/** An fp32 output: the destination itself (fp32) or a scratch buffer converted into it by Finish. */
struct OutF32 {
  float* ptr;
  DeviceBuffer<float> scratch;
  DType dtype;
  void* dst;
  long long n;
  OutF32(int device, DType t, void* d, long long count, const char* what) : dtype(t), dst(d), n(count) {
    if (dtype == DType::kF32) {
      ptr = static_cast<float*>(d);
    } else {
      scratch = DeviceBuffer<float>(device, static_cast<std::size_t>(count), what);
      ptr = scratch.data();
    }
  }
  void Finish(cudaStream_t stream) {
    if (scratch.data() == nullptr) return;
    if (dtype == DType::kF16)
      Convert(scratch.data(), AsF16(dst), n, stream);
    else
      Convert(scratch.data(), AsBf16(dst), n, stream);
  }
};

class EagerDeviceSaved : public DeviceSaved {
 public:
  EagerDeviceSaved(const Shape& s, DeviceBuffer<float>&& probs) : shape_(s), probs_(std::move(probs)) {}
  const Shape& shape() const override { return shape_; }
  std::size_t bytes() const override { return probs_.bytes(); }
  const float* probs() const { return probs_.data(); }
  int device() const { return probs_.device(); }

 private:
  Shape shape_;
  DeviceBuffer<float> probs_;
};

// P (and lse when not nullptr) from fp32 q and k.
DeviceBuffer<float> Probabilities(int device, const AttnParams& p, const MaskProgram& maskProgram, const float* q,
                                  const float* k, const float* sinks, float* lse, cudaStream_t stream) {
  const bool perBatch = maskProgram.UsesDocuments();
  const long long maskRows = (perBatch ? p.B : 1) * p.T;
  DeviceBuffer<std::uint8_t> mask(device, static_cast<std::size_t>(maskRows * p.Tk), "eager attention mask");
  SFX_LAUNCH(DenseMaskKernel, static_cast<unsigned>(maskRows), kThreads, 0, stream)(p, mask.data());
  SFX_CUDA_LAUNCH_CHECK("DenseMaskKernel");
  DeviceBuffer<float> scores(device, TensorElems(p), "eager attention scores");
  Gemm(GemmParams{p.T, p.Tk, p.D, p.B * p.Hq, p.Hq, p.scale, 0.0f, QLike(q, p, false), KvLike(k, p, true),
                  scores.data(), p.Tk + 1, p.Hq * p.T * (p.Tk + 1), p.T * (p.Tk + 1)},
       stream);
  SFX_LAUNCH(PrepareScoresKernel, Rows(p), kThreads, 0, stream)(p, scores.data(), mask.data(), perBatch, sinks);
  SFX_CUDA_LAUNCH_CHECK("PrepareScoresKernel");
  SFX_CUDA_CHECK(cudaStreamSynchronize(stream));
  mask.reset();
  DeviceBuffer<float> probs(device, TensorElems(p), "eager attention probabilities");
  SFX_LAUNCH(SoftmaxKernel, Rows(p), kThreads, 0, stream)(p, scores.data(), probs.data(), lse);
  SFX_CUDA_LAUNCH_CHECK("SoftmaxKernel");
  SFX_CUDA_CHECK(cudaStreamSynchronize(stream));
  return probs;
}

// C[b, kvh] = sum over the group's heads g of A[b, kvh G + g]^T B[b, kvh G + g] (dk, dv).
void KeyGrad(const AttnParams& p, const float* A, const float* B, float* C, cudaStream_t stream) {
  for (long long g = 0; g < p.G; ++g) {
    Gemm(GemmParams{p.Tk, p.D, p.T, p.B * p.Hkv, p.Hkv, 1.0f, g > 0 ? 1.0f : 0.0f, Scores(A, p, true, p.G, g),
                    QLike(B, p, false, p.G, g), C, p.Hkv * p.D, p.Tk * p.Hkv * p.D, p.D},
         stream);
  }
}

}  // namespace

void RunEagerForward(int device, const Shape& s, const Options& opts, const DeviceForwardArgs& a,
                     std::unique_ptr<DeviceSaved>* save) {
  CudaStream stream;
  const DevicePlan plan(device, s, opts, false);
  const AttnParams& p = plan.params();
  const Resolved r = Resolve(s, opts);
  DeviceBuffer<float> qc, kc, vc;
  const float* q = AsF32(device, a.dtype, a.q, s.qElems(), &qc, "eager attention q (fp32)", stream);
  const float* k = AsF32(device, a.dtype, a.k, s.kvElems(), &kc, "eager attention k (fp32)", stream);
  const float* v = AsF32(device, a.dtype, a.v, s.kvElems(), &vc, "eager attention v (fp32)", stream);
  DeviceBuffer<float> probs = Probabilities(device, p, *r.mask, q, k, a.sinks, a.lse, stream);
  OutF32 out(device, a.dtype, a.out, s.qElems(), "eager attention out (fp32)");
  Gemm(GemmParams{p.T, p.D, p.Tk, p.B * p.Hq, p.Hq, 1.0f, 0.0f, Scores(probs.data(), p, false), KvLike(v, p, false),
                  out.ptr, p.Hq * p.D, p.T * p.Hq * p.D, p.D},
       stream);
  out.Finish(stream);
  stream.Synchronize();
  if (save != nullptr) *save = std::make_unique<EagerDeviceSaved>(s, std::move(probs));
}

void RunEagerBackward(int device, const Shape& s, const Options& opts, const DeviceBackwardArgs& a,
                      const DeviceSaved* saved) {
  CudaStream stream;
  const DevicePlan plan(device, s, opts, false);
  const AttnParams& p = plan.params();
  const Resolved r = Resolve(s, opts);
  DeviceBuffer<float> qc, kc, vc, dOc;
  const float* q = AsF32(device, a.dtype, a.q, s.qElems(), &qc, "eager attention q (fp32)", stream);
  const float* k = AsF32(device, a.dtype, a.k, s.kvElems(), &kc, "eager attention k (fp32)", stream);
  const float* v = AsF32(device, a.dtype, a.v, s.kvElems(), &vc, "eager attention v (fp32)", stream);
  const float* dOut = AsF32(device, a.dtype, a.dOut, s.qElems(), &dOc, "eager attention dOut (fp32)", stream);
  DeviceBuffer<float> own;
  const float* P = nullptr;
  if (saved != nullptr) {
    const auto* es = dynamic_cast<const EagerDeviceSaved*>(saved);
    const Shape& o = saved->shape();
    if (es == nullptr || es->probs() == nullptr || es->device() != device || o.batch != s.batch || o.qLen != s.qLen ||
        o.kvLen != s.kvLen || o.qHeads != s.qHeads || o.kvHeads != s.kvHeads || o.headDim != s.headDim ||
        o.qOffset != s.qOffset) {
      throw ArgumentError("saved eager probabilities do not match this call (released, another shape or device)");
    }
    P = es->probs();
  } else {
    own = Probabilities(device, p, *r.mask, q, k, a.sinks, nullptr, stream);
    P = own.data();
  }
  DeviceBuffer<float> dP(device, TensorElems(p), "eager attention dP");
  Gemm(GemmParams{p.T, p.Tk, p.D, p.B * p.Hq, p.Hq, 1.0f, 0.0f, QLike(dOut, p, false), KvLike(v, p, true), dP.data(),
                  p.Tk + 1, p.Hq * p.T * (p.Tk + 1), p.T * (p.Tk + 1)},
       stream);
  DeviceBuffer<float> dS(device, TensorElems(p), "eager attention dS");
  SFX_LAUNCH(SoftmaxGradKernel, Rows(p), kThreads, 0, stream)(p, P, dP.data(), a.dLse, dS.data());
  SFX_CUDA_LAUNCH_CHECK("SoftmaxGradKernel");
  if (a.sinks != nullptr && a.dSinks != nullptr) {
    SFX_LAUNCH(SinkColumnKernel, static_cast<unsigned>(p.Hq), kThreads, 0, stream)(p, dS.data(), a.dSinks);
    SFX_CUDA_LAUNCH_CHECK("SinkColumnKernel");
  }
  const float* raw = nullptr;
  if (p.softcap > 0.0f) {  // recompute the raw scores (into dP, no longer needed) for tanh'
    Gemm(GemmParams{p.T, p.Tk, p.D, p.B * p.Hq, p.Hq, 1.0f, 0.0f, QLike(q, p, false), KvLike(k, p, true), dP.data(),
                    p.Tk + 1, p.Hq * p.T * (p.Tk + 1), p.T * (p.Tk + 1)},
         stream);
    raw = dP.data();
  }
  SFX_LAUNCH(ScaleGradKernel, Rows(p), kThreads, 0, stream)(p, dS.data(), raw);
  SFX_CUDA_LAUNCH_CHECK("ScaleGradKernel");
  SFX_CUDA_CHECK(cudaStreamSynchronize(stream));
  dP.reset();
  OutF32 dq(device, a.dtype, a.dq, s.qElems(), "eager attention dq (fp32)");
  OutF32 dk(device, a.dtype, a.dk, s.kvElems(), "eager attention dk (fp32)");
  OutF32 dv(device, a.dtype, a.dv, s.kvElems(), "eager attention dv (fp32)");
  Gemm(GemmParams{p.T, p.D, p.Tk, p.B * p.Hq, p.Hq, 1.0f, 0.0f, Scores(dS.data(), p, false), KvLike(k, p, false),
                  dq.ptr, p.Hq * p.D, p.T * p.Hq * p.D, p.D},
       stream);
  KeyGrad(p, dS.data(), q, dk.ptr, stream);
  KeyGrad(p, P, dOut, dv.ptr, stream);
  dq.Finish(stream);
  dk.Finish(stream);
  dv.Finish(stream);
  stream.Synchronize();
}

}  // namespace sinkflex::attention::cuda
