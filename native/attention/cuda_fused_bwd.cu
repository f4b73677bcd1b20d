// Reference: docs/design.md, "Sink attention — semantics"; checked against the CPU kernels and the
//   float64 reference test/attention/fixtures/reference.ts.
// Tests: test/attention/cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// Fused sink-attention backward on CUDA: deterministic (no atomics; every output element is
// written by exactly one thread, sums run in a fixed order), fp32 arithmetic.
//
//   1. DeltaKernel: D_i = dO_i . o_i - dLse_i (one warp per row).
//   2. SinkGradKernel: dsink_h = -sum_{b,i} exp(s_h - L_i) D_i (one block per head, in double).
//      Steps 1 and 2 are LaunchBackwardPrologue, also the first steps of the tensor-core
//      backward (cuda_fused_tc_bwd.cu).
//   3. KeyGradKernel: dk and dv of BN keys (block per key sub-tile, batch, kv head): for every
//      query head of the group and every non-empty query tile, in BM-row steps, recompute
//      P = exp(S - L) and dS = P (dO V^T - D) (times tanh' under softcap) in registers, then
//      dV += P^T dO and dK += dS^T (c Q) through one shared tile.
//   4. QueryGradKernel: dq of BM rows (block per query sub-tile, batch, head): for every
//      non-empty key tile, in BN-key steps, the same P and dS, then dQ += dS K; dq = c dQ.
// Thread layout as in the forward: tx = threadIdx % 16 (columns), ty = threadIdx / 16 (rows).
#include <cmath>

#include "cuda_common.cuh"

namespace sinkflex::attention::cuda {
namespace {

constexpr int kThreads = 256;

template <int DB, int BM, int BN>
struct BwdCfg {
  static constexpr int RM = BM / 16, CN = BN / 16, KN = BN / 16, ON = DB / 16;
  static constexpr int DP = DB + 1, PP = BN + 1;
  static constexpr std::size_t kSmem =
      (2 * std::size_t(BM) * DP + 2 * std::size_t(BN) * DP + std::size_t(BM) * PP + 2 * std::size_t(BM)) *
      sizeof(float);
};

template <typename T, int DB, int ROWS>
__device__ __forceinline__ void LoadTile(float* S, const T* base, long long stride, long long valid, long long D,
                                         float mul) {
  constexpr int DP = DB + 1;
  for (int e = threadIdx.x; e < ROWS * DB; e += kThreads) {
    const int r = e / DB, d = e % DB;
    float x = 0.0f;
    if (r < valid && d < D) x = ToF(base[r * stride + d]) * mul;
    S[r * DP + d] = x;
  }
}

// The query side of one step: BM rows of (c q), dO, L and D of head h starting at row i0.
template <typename T, int DB, int BM>
__device__ __forceinline__ void LoadQuerySide(const AttnParams& p, const T* q, const T* dOut, const float* lse,
                                              const float* delta, long long b, long long h, long long i0, float* Qs,
                                              float* dOs, float* Ls, float* Ds) {
  const long long off = ((b * p.T + i0) * p.Hq + h) * p.D;
  LoadTile<T, DB, BM>(Qs, q + off, p.Hq * p.D, p.T - i0, p.D, p.scale);
  LoadTile<T, DB, BM>(dOs, dOut + off, p.Hq * p.D, p.T - i0, p.D, 1.0f);
  for (int r = threadIdx.x; r < BM; r += kThreads) {
    const long long i = i0 + r;
    const long long at = (b * p.Hq + h) * p.T + i;
    Ls[r] = i < p.T ? lse[at] : -INFINITY;  // rows past the end get P = 0
    Ds[r] = i < p.T ? delta[at] : 0.0f;
  }
}

// P and dS of one (BM rows x BN keys) step into registers (rows ty + 16 r, keys tx + 16 c).
template <int DB, int BM, int BN>
__device__ __forceinline__ void StepGrads(const AttnParams& p, long long b, long long i0, long long j0, bool partial,
                                          const float* Qs, const float* dOs, const float* Ks, const float* Vs,
                                          const float* Ls, const float* Ds, float (&pr)[BM / 16][BN / 16],
                                          float (&ds)[BM / 16][BN / 16]) {
  constexpr int RM = BM / 16, CN = BN / 16, DP = DB + 1;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  float dp[RM][CN];
#pragma unroll
  for (int r = 0; r < RM; ++r)
#pragma unroll
    for (int c = 0; c < CN; ++c) pr[r][c] = dp[r][c] = 0.0f;
#pragma unroll 4
  for (int d = 0; d < DB; ++d) {
    float qa[RM], oa[RM], kb[CN], vb[CN];
#pragma unroll
    for (int r = 0; r < RM; ++r) {
      qa[r] = Qs[(ty + 16 * r) * DP + d];
      oa[r] = dOs[(ty + 16 * r) * DP + d];
    }
#pragma unroll
    for (int c = 0; c < CN; ++c) {
      kb[c] = Ks[(tx + 16 * c) * DP + d];
      vb[c] = Vs[(tx + 16 * c) * DP + d];
    }
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        pr[r][c] = fmaf(qa[r], kb[c], pr[r][c]);
        dp[r][c] = fmaf(oa[r], vb[c], dp[r][c]);
      }
  }
  const float cap = p.softcap, invCap = cap > 0.0f ? 1.0f / cap : 0.0f;
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const long long i = i0 + ty + 16 * r;
    const float L = Ls[ty + 16 * r], Di = Ds[ty + 16 * r];
#pragma unroll
    for (int c = 0; c < CN; ++c) {
      const long long j = j0 + tx + 16 * c;
      float z = pr[r][c], dt = 1.0f;
      if (cap > 0.0f) {
        const float th = tanhf(z * invCap);
        z = cap * th;
        dt = 1.0f - th * th;
      }
      const bool visible =
          i < p.T && j < p.Tk && L != -INFINITY && (!partial || MaskAllowed(p.mask, b, p.qOffset + i, j));
      const float P = visible ? expf(z - L) : 0.0f;
      pr[r][c] = P;
      ds[r][c] = P * (dp[r][c] - Di) * dt;
    }
  }
}

template <typename T>
__global__ void DeltaKernel(AttnParams p, const T* __restrict__ out, const T* __restrict__ dOut,
                            const float* __restrict__ dLse, float* __restrict__ delta) {
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  const long long rows = p.B * p.Hq * p.T;
  if (warp >= rows) return;
  const long long i = warp % p.T, bh = warp / p.T, h = bh % p.Hq, b = bh / p.Hq;
  const long long off = ((b * p.T + i) * p.Hq + h) * p.D;
  float s = 0.0f;
  for (long long d = lane; d < p.D; d += 32) s = fmaf(ToF(dOut[off + d]), ToF(out[off + d]), s);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) delta[warp] = s - (dLse != nullptr ? dLse[warp] : 0.0f);
}

__global__ void SinkGradKernel(AttnParams p, const float* __restrict__ sinks, const float* __restrict__ lse,
                               const float* __restrict__ delta, float* __restrict__ dSinks) {
  __shared__ double part[kThreads];
  const long long h = blockIdx.x;
  const float sink = sinks[h];
  double s = 0.0;
  if (sink > -INFINITY) {
    for (long long x = threadIdx.x; x < p.B * p.T; x += kThreads) {
      const long long b = x / p.T, i = x % p.T, at = (b * p.Hq + h) * p.T + i;
      const float L = lse[at];
      if (L > -INFINITY) s += exp(static_cast<double>(sink) - L) * delta[at];
    }
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) dSinks[h] = static_cast<float>(-part[0]);
}

template <typename T, int DB, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
    KeyGradKernel(AttnParams p, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                  const T* __restrict__ dOut, const float* __restrict__ lse, const float* __restrict__ delta,
                  T* __restrict__ dk, T* __restrict__ dv) {
  using C = BwdCfg<DB, BM, BN>;
  constexpr int RM = C::RM, CN = C::CN, KN = C::KN, ON = C::ON, DP = C::DP, PP = C::PP;
  constexpr int kSub = kTile / BN;
  SFX_DYNAMIC_SHARED(float, smem);
  float* Ks = smem;
  float* Vs = Ks + BN * DP;
  float* Qs = Vs + BN * DP;
  float* dOs = Qs + BM * DP;
  float* Ps = dOs + BM * DP;
  float* Ls = Ps + BM * PP;
  float* Ds = Ls + BM;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;

  long long t = blockIdx.x;
  const long long kvh = t % p.Hkv;
  t /= p.Hkv;
  const long long b = t % p.B;
  const long long sub = t / p.B, kt = sub / kSub, j0 = sub * BN;
  if (j0 >= p.Tk) return;
  const long long entry = p.tiles.entries == 1 ? 0 : b;
  const long long kvOff = ((b * p.Tk + j0) * p.Hkv + kvh) * p.D;
  LoadTile<T, DB, BN>(Ks, k + kvOff, p.Hkv * p.D, p.Tk - j0, p.D, 1.0f);
  LoadTile<T, DB, BN>(Vs, v + kvOff, p.Hkv * p.D, p.Tk - j0, p.D, 1.0f);

  float dK[KN][ON], dV[KN][ON];
#pragma unroll
  for (int r = 0; r < KN; ++r)
#pragma unroll
    for (int o = 0; o < ON; ++o) dK[r][o] = dV[r][o] = 0.0f;

  const long long col = entry * p.tiles.kTiles + kt;
  const int first = p.tiles.qPtr[col], last = p.tiles.qPtr[col + 1];
  for (long long g = 0; g < p.G; ++g) {
    const long long h = kvh * p.G + g;
    for (int x = first; x < last; ++x) {
      const long long qt = p.tiles.qIdx[x];
      const bool partial = p.tiles.states[(entry * p.tiles.qTiles + qt) * p.tiles.kTiles + kt] == kBlockPartial;
      for (int qs = 0; qs < kTile / BM; ++qs) {
        const long long i0 = qt * kTile + qs * BM;
        if (i0 >= p.T) break;
        __syncthreads();  // the previous step is done with Qs, dOs and Ps
        LoadQuerySide<T, DB, BM>(p, q, dOut, lse, delta, b, h, i0, Qs, dOs, Ls, Ds);
        __syncthreads();
        float pr[RM][CN], ds[RM][CN];
        StepGrads<DB, BM, BN>(p, b, i0, j0, partial, Qs, dOs, Ks, Vs, Ls, Ds, pr, ds);
#pragma unroll
        for (int r = 0; r < RM; ++r)
#pragma unroll
          for (int c = 0; c < CN; ++c) Ps[(ty + 16 * r) * PP + tx + 16 * c] = pr[r][c];
        __syncthreads();
#pragma unroll 4
        for (int i = 0; i < BM; ++i) {  // dV += P^T dO
          float a[KN], o[ON];
#pragma unroll
          for (int r = 0; r < KN; ++r) a[r] = Ps[i * PP + ty + 16 * r];
#pragma unroll
          for (int c = 0; c < ON; ++c) o[c] = dOs[i * DP + tx + 16 * c];
#pragma unroll
          for (int r = 0; r < KN; ++r)
#pragma unroll
            for (int c = 0; c < ON; ++c) dV[r][c] = fmaf(a[r], o[c], dV[r][c]);
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < RM; ++r)
#pragma unroll
          for (int c = 0; c < CN; ++c) Ps[(ty + 16 * r) * PP + tx + 16 * c] = ds[r][c];
        __syncthreads();
#pragma unroll 4
        for (int i = 0; i < BM; ++i) {  // dK += dS^T (c Q)
          float a[KN], o[ON];
#pragma unroll
          for (int r = 0; r < KN; ++r) a[r] = Ps[i * PP + ty + 16 * r];
#pragma unroll
          for (int c = 0; c < ON; ++c) o[c] = Qs[i * DP + tx + 16 * c];
#pragma unroll
          for (int r = 0; r < KN; ++r)
#pragma unroll
            for (int c = 0; c < ON; ++c) dK[r][c] = fmaf(a[r], o[c], dK[r][c]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < KN; ++r) {
    const long long j = j0 + ty + 16 * r;
    if (j >= p.Tk) continue;
    const long long at = ((b * p.Tk + j) * p.Hkv + kvh) * p.D;
#pragma unroll
    for (int c = 0; c < ON; ++c) {
      const int d = tx + 16 * c;
      if (d < p.D) {
        dk[at + d] = FromF<T>(dK[r][c]);
        dv[at + d] = FromF<T>(dV[r][c]);
      }
    }
  }
}

template <typename T, int DB, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
    QueryGradKernel(AttnParams p, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                    const T* __restrict__ dOut, const float* __restrict__ lse, const float* __restrict__ delta,
                    T* __restrict__ dq) {
  using C = BwdCfg<DB, BM, BN>;
  constexpr int RM = C::RM, CN = C::CN, ON = C::ON, DP = C::DP, PP = C::PP;
  constexpr int kSub = kTile / BM;
  SFX_DYNAMIC_SHARED(float, smem);
  float* Ks = smem;
  float* Vs = Ks + BN * DP;
  float* Qs = Vs + BN * DP;
  float* dOs = Qs + BM * DP;
  float* Ps = dOs + BM * DP;
  float* Ls = Ps + BM * PP;
  float* Ds = Ls + BM;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;

  long long t = blockIdx.x;
  const long long h = t % p.Hq;
  t /= p.Hq;
  const long long b = t % p.B;
  t /= p.B;
  const long long sub = static_cast<long long>(p.tiles.qTiles) * kSub - 1 - t;  // last rows first
  const long long qt = sub / kSub, i0 = sub * BM;
  if (i0 >= p.T) return;
  const long long kvh = h / p.G, entry = p.tiles.entries == 1 ? 0 : b;
  LoadQuerySide<T, DB, BM>(p, q, dOut, lse, delta, b, h, i0, Qs, dOs, Ls, Ds);

  float dQ[RM][ON];
#pragma unroll
  for (int r = 0; r < RM; ++r)
#pragma unroll
    for (int o = 0; o < ON; ++o) dQ[r][o] = 0.0f;

  const long long row = entry * p.tiles.qTiles + qt;
  const int first = p.tiles.kvPtr[row], last = p.tiles.kvPtr[row + 1];
  for (int x = first; x < last; ++x) {
    const long long kt = p.tiles.kvIdx[x];
    const bool partial = p.tiles.states[row * p.tiles.kTiles + kt] == kBlockPartial;
    for (int ks = 0; ks < kTile / BN; ++ks) {
      const long long j0 = kt * kTile + ks * BN;
      if (j0 >= p.Tk) break;
      __syncthreads();  // the previous step is done with Ks, Vs and Ps
      const long long kvOff = ((b * p.Tk + j0) * p.Hkv + kvh) * p.D;
      LoadTile<T, DB, BN>(Ks, k + kvOff, p.Hkv * p.D, p.Tk - j0, p.D, 1.0f);
      LoadTile<T, DB, BN>(Vs, v + kvOff, p.Hkv * p.D, p.Tk - j0, p.D, 1.0f);
      __syncthreads();
      float pr[RM][CN], ds[RM][CN];
      StepGrads<DB, BM, BN>(p, b, i0, j0, partial, Qs, dOs, Ks, Vs, Ls, Ds, pr, ds);
#pragma unroll
      for (int r = 0; r < RM; ++r)
#pragma unroll
        for (int c = 0; c < CN; ++c) Ps[(ty + 16 * r) * PP + tx + 16 * c] = ds[r][c];
      __syncthreads();
#pragma unroll 4
      for (int jj = 0; jj < BN; ++jj) {  // dQ += dS K
        float a[RM], kk[ON];
#pragma unroll
        for (int r = 0; r < RM; ++r) a[r] = Ps[(ty + 16 * r) * PP + jj];
#pragma unroll
        for (int o = 0; o < ON; ++o) kk[o] = Ks[jj * DP + tx + 16 * o];
#pragma unroll
        for (int r = 0; r < RM; ++r)
#pragma unroll
          for (int o = 0; o < ON; ++o) dQ[r][o] = fmaf(a[r], kk[o], dQ[r][o]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const long long i = i0 + ty + 16 * r;
    if (i >= p.T) continue;
    T* dst = dq + ((b * p.T + i) * p.Hq + h) * p.D;
#pragma unroll
    for (int o = 0; o < ON; ++o) {
      const int d = tx + 16 * o;
      if (d < p.D) dst[d] = FromF<T>(dQ[r][o] * p.scale);
    }
  }
}

template <typename T, int DB, int BM, int BN>
void LaunchGrads(const AttnParams& p, const DeviceBackwardArgs& a, const float* delta, cudaStream_t stream) {
  using C = BwdCfg<DB, BM, BN>;
  const T* q = static_cast<const T*>(a.q);
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  const T* dOut = static_cast<const T*>(a.dOut);
  RequireSharedMemory(C::kSmem, "the fused attention backward");
  auto kvKernel = KeyGradKernel<T, DB, BM, BN>;
  auto qKernel = QueryGradKernel<T, DB, BM, BN>;
  SFX_CUDA_CHECK(
      cudaFuncSetAttribute(kvKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kSmem)));
  SFX_CUDA_CHECK(
      cudaFuncSetAttribute(qKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kSmem)));
  const long long kvBlocks = static_cast<long long>(p.tiles.kTiles) * (kTile / BN) * p.B * p.Hkv;
  const long long qBlocks = static_cast<long long>(p.tiles.qTiles) * (kTile / BM) * p.B * p.Hq;
  if (kvBlocks > 2147483647LL || qBlocks > 2147483647LL) throw ArgumentError("too many tiles for one launch");
  SFX_LAUNCH(kvKernel, static_cast<unsigned>(kvBlocks), kThreads, C::kSmem, stream)
  (p, q, k, v, dOut, a.lse, delta, static_cast<T*>(a.dk), static_cast<T*>(a.dv));
  SFX_CUDA_LAUNCH_CHECK("KeyGradKernel");
  SFX_LAUNCH(qKernel, static_cast<unsigned>(qBlocks), kThreads, C::kSmem, stream)
  (p, q, k, v, dOut, a.lse, delta, static_cast<T*>(a.dq));
  SFX_CUDA_LAUNCH_CHECK("QueryGradKernel");
}

template <typename T>
void LaunchPrologueTyped(const AttnParams& p, const DeviceBackwardArgs& a, float* delta, cudaStream_t stream) {
  const long long rows = p.B * p.Hq * p.T;
  const long long deltaBlocks = (rows * 32 + kThreads - 1) / kThreads;
  if (deltaBlocks > 2147483647LL) throw ArgumentError("too many rows for one launch");
  SFX_LAUNCH(DeltaKernel<T>, static_cast<unsigned>(deltaBlocks), kThreads, 0, stream)
  (p, static_cast<const T*>(a.out), static_cast<const T*>(a.dOut), a.dLse, delta);
  SFX_CUDA_LAUNCH_CHECK("DeltaKernel");
  if (a.sinks != nullptr && a.dSinks != nullptr) {
    SFX_LAUNCH(SinkGradKernel, static_cast<unsigned>(p.Hq), kThreads, 0, stream)(p, a.sinks, a.lse, delta, a.dSinks);
    SFX_CUDA_LAUNCH_CHECK("SinkGradKernel");
  }
}

template <typename T>
void LaunchTyped(int device, const AttnParams& p, const DeviceBackwardArgs& a, cudaStream_t stream) {
  const long long rows = p.B * p.Hq * p.T;
  DeviceBuffer<float> delta(device, static_cast<std::size_t>(rows), "fused attention backward D");
  LaunchPrologueTyped<T>(p, a, delta.data(), stream);
  if (p.D <= 64) {
    LaunchGrads<T, 64, 32, 64>(p, a, delta.data(), stream);
  } else if (p.D <= 128) {
    LaunchGrads<T, 128, 32, 32>(p, a, delta.data(), stream);
  } else {
    LaunchGrads<T, 256, 16, 16>(p, a, delta.data(), stream);
  }
  SFX_CUDA_CHECK(cudaStreamSynchronize(stream));  // delta is freed on return
}

}  // namespace

void LaunchBackwardPrologue(const AttnParams& p, const DeviceBackwardArgs& a, float* delta, cudaStream_t stream) {
  if (a.dtype == DType::kBF16) {
    LaunchPrologueTyped<__nv_bfloat16>(p, a, delta, stream);
  } else if (a.dtype == DType::kF16) {
    LaunchPrologueTyped<F16>(p, a, delta, stream);
  } else {
    LaunchPrologueTyped<float>(p, a, delta, stream);
  }
}

void LaunchFusedBackward(int device, const AttnParams& p, const DeviceBackwardArgs& a, cudaStream_t stream) {
  if (a.dtype == DType::kBF16) {
    LaunchTyped<__nv_bfloat16>(device, p, a, stream);
  } else if (a.dtype == DType::kF16) {
    LaunchTyped<F16>(device, p, a, stream);
  } else {
    LaunchTyped<float>(device, p, a, stream);
  }
}

}  // namespace sinkflex::attention::cuda
