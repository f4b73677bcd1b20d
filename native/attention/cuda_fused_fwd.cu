// Reference: docs/design.md, "Sink attention — semantics"; checked against the CPU kernels and the
//   float64 reference test/attention/fixtures/reference.ts.
// Tests: test/attention/cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// Fused sink-attention forward on CUDA (FlashAttention-2 style, fp32 arithmetic).
//
// One block of 256 threads per (query sub-tile of BM rows, batch, query head). The block keeps
// its BM query rows (times the scale) in shared memory and walks the non-empty 64-key tiles of
// its 64-row tile in BN-key steps: S = Q K^T into registers (each thread a RM x CN piece:
// rows ty + 16 r, columns tx + 16 c, with tx = threadIdx % 16, ty = threadIdx / 16), softcap,
// the mask only on partial tiles, the online softmax seeded by the sink (m = s_h, l = 1; row
// max and sum reduced over the 16 threads of a row with shuffles), P to shared memory, then
// O += P V (each thread RM rows x DB/16 columns). K and V share one shared-memory tile.
// Output in the input type, lse in fp32; rows with no visible key and no sink give 0 / -inf.
#include <cmath>

#include "cuda_common.cuh"

namespace sinkflex::attention::cuda {
namespace {

constexpr int kThreads = 256;

template <int DB, int BM, int BN>
struct FwdCfg {
  static constexpr int RM = BM / 16, CN = BN / 16, ON = DB / 16;
  static constexpr int DP = DB + 1, PP = BN + 1;  // odd strides: no bank conflicts
  static constexpr std::size_t kSmem =
      (std::size_t(BM) * DP + std::size_t(BN) * DP + std::size_t(BM) * PP) * sizeof(float);
};

// Loads `rows` rows of the tensor [.., row, heads, D] starting at `base` (row stride `stride`)
// into S[r * DP + d] times `mul`, zero past `valid` rows and past D.
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

template <typename T, int DB, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
    FusedForwardKernel(AttnParams p, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                       const float* __restrict__ sinks, T* __restrict__ out, float* __restrict__ lse) {
  using C = FwdCfg<DB, BM, BN>;
  constexpr int RM = C::RM, CN = C::CN, ON = C::ON, DP = C::DP, PP = C::PP;
  constexpr int kSub = kTile / BM;
  SFX_DYNAMIC_SHARED(float, smem);
  float* Qs = smem;
  float* KVs = Qs + BM * DP;
  float* Ps = KVs + BN * DP;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;

  long long t = blockIdx.x;
  const long long h = t % p.Hq;
  t /= p.Hq;
  const long long b = t % p.B;
  t /= p.B;
  const long long sub = static_cast<long long>(p.tiles.qTiles) * kSub - 1 - t;  // last rows first (most keys)
  const long long qt = sub / kSub, i0 = sub * BM;
  if (i0 >= p.T) return;
  const long long kvh = h / p.G, entry = p.tiles.entries == 1 ? 0 : b;
  const long long rowStride = p.Hq * p.D, kvStride = p.Hkv * p.D;

  LoadTile<T, DB, BM>(Qs, q + ((b * p.T + i0) * p.Hq + h) * p.D, rowStride, p.T - i0, p.D, p.scale);

  const float sink = sinks != nullptr ? sinks[h] : -INFINITY;
  const bool hasSink = sink > -INFINITY;
  float m[RM], l[RM], acc[RM][ON];
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    m[r] = hasSink ? sink : -INFINITY;  // the sink seeds the online softmax
    l[r] = hasSink ? 1.0f : 0.0f;
#pragma unroll
    for (int o = 0; o < ON; ++o) acc[r][o] = 0.0f;
  }

  const long long row = entry * p.tiles.qTiles + qt;
  const int first = p.tiles.kvPtr[row], last = p.tiles.kvPtr[row + 1];
  const float cap = p.softcap, invCap = cap > 0.0f ? 1.0f / cap : 0.0f;
  for (int x = first; x < last; ++x) {
    const long long kt = p.tiles.kvIdx[x];
    const bool partial = p.tiles.states[row * p.tiles.kTiles + kt] == kBlockPartial;
    for (int ks = 0; ks < kTile / BN; ++ks) {
      const long long j0 = kt * kTile + ks * BN;
      if (j0 >= p.Tk) break;
      __syncthreads();  // the previous step is done with KVs and Ps
      LoadTile<T, DB, BN>(KVs, k + ((b * p.Tk + j0) * p.Hkv + kvh) * p.D, kvStride, p.Tk - j0, p.D, 1.0f);
      __syncthreads();

      float s[RM][CN];
#pragma unroll
      for (int r = 0; r < RM; ++r)
#pragma unroll
        for (int c = 0; c < CN; ++c) s[r][c] = 0.0f;
#pragma unroll 4
      for (int d = 0; d < DB; ++d) {
        float a[RM], bk[CN];
#pragma unroll
        for (int r = 0; r < RM; ++r) a[r] = Qs[(ty + 16 * r) * DP + d];
#pragma unroll
        for (int c = 0; c < CN; ++c) bk[c] = KVs[(tx + 16 * c) * DP + d];
#pragma unroll
        for (int r = 0; r < RM; ++r)
#pragma unroll
          for (int c = 0; c < CN; ++c) s[r][c] = fmaf(a[r], bk[c], s[r][c]);
      }

#pragma unroll
      for (int r = 0; r < RM; ++r) {
        const long long i = i0 + ty + 16 * r;
        float mx = -INFINITY;
#pragma unroll
        for (int c = 0; c < CN; ++c) {
          const long long j = j0 + tx + 16 * c;
          float z = s[r][c];
          if (cap > 0.0f) z = cap * tanhf(z * invCap);
          if (j >= p.Tk || i >= p.T || (partial && !MaskAllowed(p.mask, b, p.qOffset + i, j))) z = -INFINITY;
          s[r][c] = z;
          mx = fmaxf(mx, z);
        }
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        const float mNew = fmaxf(m[r], mx);
        float sum = 0.0f;
        if (mNew == -INFINITY) {  // nothing visible yet and no sink
#pragma unroll
          for (int c = 0; c < CN; ++c) s[r][c] = 0.0f;
        } else {
#pragma unroll
          for (int c = 0; c < CN; ++c) {
            s[r][c] = expf(s[r][c] - mNew);
            sum += s[r][c];
          }
        }
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        if (mNew != -INFINITY && mNew != m[r]) {
          const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - mNew);
          l[r] *= alpha;
#pragma unroll
          for (int o = 0; o < ON; ++o) acc[r][o] *= alpha;
          m[r] = mNew;
        }
        l[r] += sum;
#pragma unroll
        for (int c = 0; c < CN; ++c) Ps[(ty + 16 * r) * PP + tx + 16 * c] = s[r][c];
      }
      __syncthreads();  // everyone is done with K; P is written
      LoadTile<T, DB, BN>(KVs, v + ((b * p.Tk + j0) * p.Hkv + kvh) * p.D, kvStride, p.Tk - j0, p.D, 1.0f);
      __syncthreads();
#pragma unroll 4
      for (int jj = 0; jj < BN; ++jj) {
        float pr[RM], vv[ON];
#pragma unroll
        for (int r = 0; r < RM; ++r) pr[r] = Ps[(ty + 16 * r) * PP + jj];
#pragma unroll
        for (int o = 0; o < ON; ++o) vv[o] = KVs[jj * DP + tx + 16 * o];
#pragma unroll
        for (int r = 0; r < RM; ++r)
#pragma unroll
          for (int o = 0; o < ON; ++o) acc[r][o] = fmaf(pr[r], vv[o], acc[r][o]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const long long i = i0 + ty + 16 * r;
    if (i >= p.T) continue;
    T* dst = out + ((b * p.T + i) * p.Hq + h) * p.D;
    const bool any = l[r] > 0.0f;
    const float inv = any ? 1.0f / l[r] : 0.0f;
#pragma unroll
    for (int o = 0; o < ON; ++o) {
      const int d = tx + 16 * o;
      if (d < p.D) dst[d] = FromF<T>(any ? acc[r][o] * inv : 0.0f);
    }
    if (tx == 0) lse[(b * p.Hq + h) * p.T + i] = any ? m[r] + logf(l[r]) : -INFINITY;
  }
}

template <typename T, int DB, int BM, int BN>
void Launch(const AttnParams& p, const T* q, const T* k, const T* v, const float* sinks, T* out, float* lse,
            cudaStream_t stream) {
  using C = FwdCfg<DB, BM, BN>;
  auto kernel = FusedForwardKernel<T, DB, BM, BN>;
  RequireSharedMemory(C::kSmem, "the fused attention forward");
  SFX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kSmem)));
  const long long blocks = static_cast<long long>(p.tiles.qTiles) * (kTile / BM) * p.B * p.Hq;
  if (blocks > 2147483647LL) throw ArgumentError("too many (query tile, batch, head) blocks for one launch");
  SFX_LAUNCH(kernel, static_cast<unsigned>(blocks), kThreads, C::kSmem, stream)(p, q, k, v, sinks, out, lse);
  SFX_CUDA_LAUNCH_CHECK("FusedForwardKernel");
}

template <typename T>
void LaunchTyped(const AttnParams& p, const DeviceForwardArgs& a, cudaStream_t stream) {
  const T* q = static_cast<const T*>(a.q);
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  T* out = static_cast<T*>(a.out);
  if (p.D <= 64) {
    Launch<T, 64, 64, 64>(p, q, k, v, a.sinks, out, a.lse, stream);
  } else if (p.D <= 128) {
    Launch<T, 128, 64, 32>(p, q, k, v, a.sinks, out, a.lse, stream);
  } else {
    Launch<T, 256, 32, 32>(p, q, k, v, a.sinks, out, a.lse, stream);
  }
}

}  // namespace

void LaunchFusedForward(const AttnParams& p, const DeviceForwardArgs& a, cudaStream_t stream) {
  if (a.dtype == DType::kBF16) {
    LaunchTyped<__nv_bfloat16>(p, a, stream);
  } else if (a.dtype == DType::kF16) {
    LaunchTyped<F16>(p, a, stream);
  } else {
    LaunchTyped<float>(p, a, stream);
  }
}

}  // namespace sinkflex::attention::cuda
