// Reference: docs/design.md, "Sink attention — semantics" (backward); FlashAttention-2 (Dao, 2023),
//   the backward's split into a key-side and a query-side pass; the PTX ISA's mma.m16n8k16 fragments.
// Tests: test/attention/cuda-tensor-cores.test.ts (on a GPU, or on the CUDA emulator without one).
// Fused sink-attention backward on the tensor cores (bf16 or fp16 q, k, v, out, dO — the template
// parameter Op; fp32 statistics and accumulators), deterministic: no atomics, every output element written by one
// thread, sums in a fixed order.
//
//   1. D_i = dO_i . o_i - dLse_i and dsink_h = -sum_{b,i} exp(s_h - L_i) D_i (in double): the
//      kernels of cuda_fused_bwd.cu (LaunchBackwardPrologue).
//   2. TcKeyGradKernel: one block of 4 warps per (64 keys, batch, kv head, head split), warp w
//      owning keys 16w..16w+15. For every query head of its part of the group (all of it unless
//      the grid would be too small for the GPU: then the group's heads are split over `split`
//      blocks that write fp32 partials, summed in a fixed order by SumSplitsKernel) and every
//      non-empty query tile, in QS-row
//      steps: Sᵀ = K Qᵀ and dPᵀ = V dOᵀ on the tensor cores, P = exp(c Sᵀ - L) and
//      dS = P (dPᵀ - D) (times tanh' under softcap) in fp32 registers, then dV += Pᵀ dO and
//      dK += dSᵀ Q with P and dS rounded to bf16 / fp16 as A fragments in registers; dk = c dK.
//   3. TcQueryGradKernel: one block of 4 warps per (64 query rows, batch, head): for every
//      non-empty key tile, in BN-key steps, S = Q Kᵀ and dP = dO Vᵀ, the same P and dS, then
//      dQ += dS K on the tensor cores; dq = c dQ.
// headDim is padded with zeros to DB = 64 or 128. Tiles are row-major in shared memory; ldmatrix
// .trans gives the operands that the mma needs in the other orientation (Q and dO for dK and dV,
// K for dQ).
#include <cmath>

#include "cuda_tc.cuh"

namespace sinkflex::attention::cuda {
namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;

/** The probability and dS of one score (fp32), or 0 / 0 where the key is not visible. */
__device__ __forceinline__ void ProbAndGrad(const AttnParams& p, long long b, long long i, long long j, bool partial,
                                            float s, float dp, float L, float Di, float& P, float& dS) {
  float z = s * p.scale, dt = 1.0f;
  if (p.softcap > 0.0f) {
    const float th = tanhf(z / p.softcap);
    z = p.softcap * th;
    dt = 1.0f - th * th;
  }
  const bool visible = i < p.T && j < p.Tk && L != -INFINITY && (!partial || MaskAllowed(p.mask, b, p.qOffset + i, j));
  P = visible ? expf(z - L) : 0.0f;
  dS = P * (dp - Di) * dt;
}

// ---- dk, dv ------------------------------------------------------------------------------------

template <int DB, int QS>
struct TcKeyCfg {
  static constexpr int RP = DB + 8;  // row stride of the tiles (K, V, Q, dO)
  static constexpr std::size_t kSmem = (2 * std::size_t(kTile) + 2 * std::size_t(QS)) * RP * 2 + 2 * QS * sizeof(float);
};

template <Operand Op, int DB, int QS>
__global__ void __launch_bounds__(kThreads)
    TcKeyGradKernel(AttnParams p, const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                    const std::uint16_t* __restrict__ v, const std::uint16_t* __restrict__ dOut,
                    const float* __restrict__ lse, const float* __restrict__ delta, std::uint16_t* __restrict__ dk,
                    std::uint16_t* __restrict__ dv, int split, float* __restrict__ partial) {
  using C = TcKeyCfg<DB, QS>;
  constexpr int RP = C::RP, NT = QS / 8, ON = DB / 8;
  SFX_DYNAMIC_SHARED(TcChunk, raw);
  std::uint16_t* Ks = reinterpret_cast<std::uint16_t*>(raw);
  std::uint16_t* Vs = Ks + kTile * RP;
  std::uint16_t* Qs = Vs + kTile * RP;
  std::uint16_t* dOs = Qs + QS * RP;
  float* Ls = reinterpret_cast<float*>(dOs + QS * RP);
  float* Ds = Ls + QS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
  const int r0 = warp * 16;

  long long t = blockIdx.x;
  const long long kvh = t % p.Hkv;
  t /= p.Hkv;
  const long long b = t % p.B;
  t /= p.B;
  const long long part = t % split, kt = t / split, j0 = kt * kTile;
  const long long entry = p.tiles.entries == 1 ? 0 : b;
  const long long kvOff = ((b * p.Tk + j0) * p.Hkv + kvh) * p.D;
  LoadTile16<DB, kTile, RP, kThreads>(Ks, k + kvOff, p.Hkv * p.D, p.Tk - j0, p.D);
  LoadTile16<DB, kTile, RP, kThreads>(Vs, v + kvOff, p.Hkv * p.D, p.Tk - j0, p.D);

  float dK[ON][4], dV[ON][4];
#pragma unroll
  for (int o = 0; o < ON; ++o)
#pragma unroll
    for (int e = 0; e < 4; ++e) dK[o][e] = dV[o][e] = 0.0f;

  const long long col = entry * p.tiles.kTiles + kt;
  const int first = p.tiles.qPtr[col], last = p.tiles.qPtr[col + 1];
  const long long perPart = p.G / split;
  for (long long gq = part * perPart; gq < (part + 1) * perPart; ++gq) {
    const long long h = kvh * p.G + gq;
    for (int x = first; x < last; ++x) {
      const long long qt = p.tiles.qIdx[x];
      const bool partial = p.tiles.states[(entry * p.tiles.qTiles + qt) * p.tiles.kTiles + kt] == kBlockPartial;
      for (int qs = 0; qs < kTile / QS; ++qs) {
        const long long i0 = qt * kTile + qs * QS;
        if (i0 >= p.T) break;
        __syncthreads();  // the previous step is done with the query-side tiles
        const long long off = ((b * p.T + i0) * p.Hq + h) * p.D;
        LoadTile16<DB, QS, RP, kThreads>(Qs, q + off, p.Hq * p.D, p.T - i0, p.D);
        LoadTile16<DB, QS, RP, kThreads>(dOs, dOut + off, p.Hq * p.D, p.T - i0, p.D);
        for (int r = threadIdx.x; r < QS; r += kThreads) {
          const long long i = i0 + r, at = (b * p.Hq + h) * p.T + i;
          Ls[r] = i < p.T ? lse[at] : -INFINITY;  // rows past the end get P = 0
          Ds[r] = i < p.T ? delta[at] : 0.0f;
        }
        __syncthreads();

        float s[NT][4], dp[NT][4];
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < DB / 16; ++kk) {
          std::uint32_t ak[4], av[4];
          LoadA<RP>(ak, Ks, r0, kk * 16);
          LoadA<RP>(av, Vs, r0, kk * 16);
#pragma unroll
          for (int n = 0; n < NT; n += 2) {
            std::uint32_t bq[2][2], bo[2][2];
            LoadB2<RP>(bq, Qs, n * 8, kk * 16);
            LoadB2<RP>(bo, dOs, n * 8, kk * 16);
            Mma<Op>(s[n], ak, bq[0]);
            Mma<Op>(s[n + 1], ak, bq[1]);
            Mma<Op>(dp[n], av, bo[0]);
            Mma<Op>(dp[n + 1], av, bo[1]);
          }
        }
        // Rows are keys (r0 + g + 8 hr), columns queries (n * 8 + 2 tg + e).
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int c = n * 8 + 2 * tg + (e & 1);
            const long long j = j0 + r0 + g + 8 * (e >> 1), i = i0 + c;
            ProbAndGrad(p, b, i, j, partial, s[n][e], dp[n][e], Ls[c], Ds[c], s[n][e], dp[n][e]);
          }
          // dV += Pᵀ dO and dK += dSᵀ Q, P and dS as 16-bit A fragments (16 keys x 16 queries per step).
#pragma unroll
        for (int kk = 0; kk < QS / 16; ++kk) {
          std::uint32_t ap[4], ad[4];
          CToA<Op>(ap, s[2 * kk], s[2 * kk + 1]);
          CToA<Op>(ad, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
          for (int o = 0; o < ON; o += 2) {
            std::uint32_t bo[2][2], bq[2][2];
            LoadBT2<RP>(bo, dOs, kk * 16, o * 8);
            LoadBT2<RP>(bq, Qs, kk * 16, o * 8);
            Mma<Op>(dV[o], ap, bo[0]);
            Mma<Op>(dV[o + 1], ap, bo[1]);
            Mma<Op>(dK[o], ad, bq[0]);
            Mma<Op>(dK[o + 1], ad, bq[1]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const long long j = j0 + r0 + g + 8 * hr;
    if (j >= p.Tk) continue;
    const long long at = ((b * p.Tk + j) * p.Hkv + kvh) * p.D;
#pragma unroll
    for (int o = 0; o < ON; ++o)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = o * 8 + 2 * tg + e;
        if (d >= p.D) continue;
        if (split == 1) {
          dk[at + d] = ::sinkflex::mma::Bits16<Op>(dK[o][2 * hr + e] * p.scale);
          dv[at + d] = ::sinkflex::mma::Bits16<Op>(dV[o][2 * hr + e]);
        } else {  // planes [part][dk, dv][B * Tk * Hkv * D]
          const long long n = p.B * p.Tk * p.Hkv * p.D;
          partial[(2 * part) * n + at + d] = dK[o][2 * hr + e] * p.scale;
          partial[(2 * part + 1) * n + at + d] = dV[o][2 * hr + e];
        }
      }
  }
}

/** dk and dv = the sums over the `split` partial planes (in order), rounded to bf16 or fp16 (Op). */
template <Operand Op>
__global__ void SumSplitsKernel(long long n, int split, const float* __restrict__ partial,
                                std::uint16_t* __restrict__ dk, std::uint16_t* __restrict__ dv) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n) return;
  float sk = 0.0f, sv = 0.0f;
  for (int s = 0; s < split; ++s) {
    sk += partial[(2 * s) * n + e];
    sv += partial[(2 * s + 1) * n + e];
  }
  dk[e] = ::sinkflex::mma::Bits16<Op>(sk);
  dv[e] = ::sinkflex::mma::Bits16<Op>(sv);
}

// ---- dq ----------------------------------------------------------------------------------------

template <int DB, int BN>
struct TcQueryCfg {
  static constexpr int RP = DB + 8;  // row stride of the tiles (Q, dO, K, V)
  static constexpr std::size_t kSmem = (2 * std::size_t(kTile) + 2 * std::size_t(BN)) * RP * 2;
};

template <Operand Op, int DB, int BN>
__global__ void __launch_bounds__(kThreads)
    TcQueryGradKernel(AttnParams p, const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                      const std::uint16_t* __restrict__ v, const std::uint16_t* __restrict__ dOut,
                      const float* __restrict__ lse, const float* __restrict__ delta, std::uint16_t* __restrict__ dq) {
  using C = TcQueryCfg<DB, BN>;
  constexpr int RP = C::RP, NT = BN / 8, ON = DB / 8;
  SFX_DYNAMIC_SHARED(TcChunk, raw);
  std::uint16_t* Qs = reinterpret_cast<std::uint16_t*>(raw);
  std::uint16_t* dOs = Qs + kTile * RP;
  std::uint16_t* Ks = dOs + kTile * RP;
  std::uint16_t* Vs = Ks + BN * RP;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
  const int r0 = warp * 16;

  long long t = blockIdx.x;
  const long long h = t % p.Hq;
  t /= p.Hq;
  const long long b = t % p.B;
  t /= p.B;
  const long long qt = static_cast<long long>(p.tiles.qTiles) - 1 - t;  // last rows first
  const long long i0 = qt * kTile;
  const long long kvh = h / p.G, entry = p.tiles.entries == 1 ? 0 : b;
  const long long off = ((b * p.T + i0) * p.Hq + h) * p.D;
  LoadTile16<DB, kTile, RP, kThreads>(Qs, q + off, p.Hq * p.D, p.T - i0, p.D);
  LoadTile16<DB, kTile, RP, kThreads>(dOs, dOut + off, p.Hq * p.D, p.T - i0, p.D);
  float L[2], Di[2];
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const long long i = i0 + r0 + g + 8 * hr, at = (b * p.Hq + h) * p.T + i;
    L[hr] = i < p.T ? lse[at] : -INFINITY;
    Di[hr] = i < p.T ? delta[at] : 0.0f;
  }

  float dQ[ON][4];
#pragma unroll
  for (int o = 0; o < ON; ++o)
#pragma unroll
    for (int e = 0; e < 4; ++e) dQ[o][e] = 0.0f;

  const long long row = entry * p.tiles.qTiles + qt;
  const int first = p.tiles.kvPtr[row], last = p.tiles.kvPtr[row + 1];
  for (int x = first; x < last; ++x) {
    const long long kt = p.tiles.kvIdx[x];
    const bool partial = p.tiles.states[row * p.tiles.kTiles + kt] == kBlockPartial;
    for (int ks = 0; ks < kTile / BN; ++ks) {
      const long long j0 = kt * kTile + ks * BN;
      if (j0 >= p.Tk) break;
      __syncthreads();  // the previous step is done with the key-side tiles
      const long long kvOff = ((b * p.Tk + j0) * p.Hkv + kvh) * p.D;
      LoadTile16<DB, BN, RP, kThreads>(Ks, k + kvOff, p.Hkv * p.D, p.Tk - j0, p.D);
      LoadTile16<DB, BN, RP, kThreads>(Vs, v + kvOff, p.Hkv * p.D, p.Tk - j0, p.D);
      __syncthreads();

      float s[NT][4], dp[NT][4];
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < DB / 16; ++kk) {
        std::uint32_t aq[4], ao[4];
        LoadA<RP>(aq, Qs, r0, kk * 16);
        LoadA<RP>(ao, dOs, r0, kk * 16);
#pragma unroll
        for (int n = 0; n < NT; n += 2) {
          std::uint32_t bk[2][2], bv[2][2];
          LoadB2<RP>(bk, Ks, n * 8, kk * 16);
          LoadB2<RP>(bv, Vs, n * 8, kk * 16);
          Mma<Op>(s[n], aq, bk[0]);
          Mma<Op>(s[n + 1], aq, bk[1]);
          Mma<Op>(dp[n], ao, bv[0]);
          Mma<Op>(dp[n + 1], ao, bv[1]);
        }
      }
      // Rows are queries (r0 + g + 8 hr), columns keys (n * 8 + 2 tg + e).
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int hr = e >> 1;
          const long long i = i0 + r0 + g + 8 * hr, j = j0 + n * 8 + 2 * tg + (e & 1);
          float P;
          ProbAndGrad(p, b, i, j, partial, s[n][e], dp[n][e], L[hr], Di[hr], P, dp[n][e]);
        }
        // dQ += dS K (dS as 16-bit A fragments, K through ldmatrix.trans).
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        std::uint32_t ad[4];
        CToA<Op>(ad, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
        for (int o = 0; o < ON; o += 2) {
          std::uint32_t bk[2][2];
          LoadBT2<RP>(bk, Ks, kk * 16, o * 8);
          Mma<Op>(dQ[o], ad, bk[0]);
          Mma<Op>(dQ[o + 1], ad, bk[1]);
        }
      }
    }
  }

#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const long long i = i0 + r0 + g + 8 * hr;
    if (i >= p.T) continue;
    std::uint16_t* dst = dq + ((b * p.T + i) * p.Hq + h) * p.D;
#pragma unroll
    for (int o = 0; o < ON; ++o)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = o * 8 + 2 * tg + e;
        if (d < p.D) dst[d] = ::sinkflex::mma::Bits16<Op>(dQ[o][2 * hr + e] * p.scale);
      }
  }
}

template <Operand Op, int DB, int QS, int BN>
void LaunchGrads(int device, const AttnParams& p, const DeviceBackwardArgs& a, const float* delta,
                 cudaStream_t stream) {
  using KC = TcKeyCfg<DB, QS>;
  using QC = TcQueryCfg<DB, BN>;
  const auto* q = static_cast<const std::uint16_t*>(a.q);
  const auto* k = static_cast<const std::uint16_t*>(a.k);
  const auto* v = static_cast<const std::uint16_t*>(a.v);
  const auto* dOut = static_cast<const std::uint16_t*>(a.dOut);
  RequireSharedMemory(KC::kSmem > QC::kSmem ? KC::kSmem : QC::kSmem, "the tensor-core attention backward");
  auto kvKernel = TcKeyGradKernel<Op, DB, QS>;
  auto qKernel = TcQueryGradKernel<Op, DB, BN>;
  auto sumKernel = SumSplitsKernel<Op>;
  SFX_CUDA_CHECK(
      cudaFuncSetAttribute(kvKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(KC::kSmem)));
  SFX_CUDA_CHECK(
      cudaFuncSetAttribute(qKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(QC::kSmem)));
  // Split the group's query heads over blocks when (key tile, batch, kv head) blocks alone would
  // not fill the GPU: the smallest divisor of G that gives 4 blocks per multiprocessor, else G.
  const long long kvBase = static_cast<long long>(p.tiles.kTiles) * p.B * p.Hkv;
  const long long target = 4LL * MultiProcessors(device);
  int split = 1;
  for (long long d = 1; d <= p.G; ++d) {
    if (p.G % d != 0) continue;
    split = static_cast<int>(d);
    if (kvBase * d >= target) break;
  }
  const long long kvBlocks = kvBase * split;
  const long long qBlocks = static_cast<long long>(p.tiles.qTiles) * p.B * p.Hq;
  if (kvBlocks > 2147483647LL || qBlocks > 2147483647LL) throw ArgumentError("too many tiles for one launch");
  const long long n = p.B * p.Tk * p.Hkv * p.D;
  DeviceBuffer<float> partial(device, split > 1 ? static_cast<std::size_t>(2 * split * n) : 1,
                              "tensor-core attention backward dk/dv partials");
  SFX_LAUNCH(kvKernel, static_cast<unsigned>(kvBlocks), kThreads, KC::kSmem, stream)
  (p, q, k, v, dOut, a.lse, delta, static_cast<std::uint16_t*>(a.dk), static_cast<std::uint16_t*>(a.dv), split,
   partial.data());
  SFX_CUDA_LAUNCH_CHECK("TcKeyGradKernel");
  if (split > 1) {
    const long long blocks = (n + 255) / 256;
    if (blocks > 2147483647LL) throw ArgumentError("too many dk/dv elements for one launch");
    SFX_LAUNCH(sumKernel, static_cast<unsigned>(blocks), 256, 0, stream)
    (n, split, partial.data(), static_cast<std::uint16_t*>(a.dk), static_cast<std::uint16_t*>(a.dv));
    SFX_CUDA_LAUNCH_CHECK("SumSplitsKernel");
  }
  SFX_LAUNCH(qKernel, static_cast<unsigned>(qBlocks), kThreads, QC::kSmem, stream)
  (p, q, k, v, dOut, a.lse, delta, static_cast<std::uint16_t*>(a.dq));
  SFX_CUDA_LAUNCH_CHECK("TcQueryGradKernel");
  SFX_CUDA_CHECK(cudaStreamSynchronize(stream));  // partial is freed on return
}

}  // namespace

void LaunchTensorCoreBackward(int device, const AttnParams& p, const DeviceBackwardArgs& a, cudaStream_t stream) {
  const long long rows = p.B * p.Hq * p.T;
  DeviceBuffer<float> delta(device, static_cast<std::size_t>(rows), "fused attention backward D");
  LaunchBackwardPrologue(p, a, delta.data(), stream);
  const bool f16 = a.dtype == DType::kF16;
  if (p.D <= 64) {
    f16 ? LaunchGrads<Operand::kF16, 64, 64, 64>(device, p, a, delta.data(), stream)
        : LaunchGrads<Operand::kBf16, 64, 64, 64>(device, p, a, delta.data(), stream);
  } else {
    f16 ? LaunchGrads<Operand::kF16, 128, 32, 32>(device, p, a, delta.data(), stream)
        : LaunchGrads<Operand::kBf16, 128, 32, 32>(device, p, a, delta.data(), stream);
  }
  SFX_CUDA_CHECK(cudaStreamSynchronize(stream));  // delta is freed on return
}

}  // namespace sinkflex::attention::cuda
